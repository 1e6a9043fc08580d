"""The ``chunkwise`` command line, driven in-process through ``main()``."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

import chunkwise
from chunkwise_tools.cli import main
from chunkwise_tools.cli._common import parse_http_head, split_http_head
from helpers.cli import run_main
from helpers.data import DATA, REPO
from helpers.processes import run_python

RECORDINGS = DATA / "openai_recordings"

# What each recording must show, independent of the parser: its finish_reason
# and text that must appear (content, refusal, tool names, ids, arguments).
EXPECTED: dict[str, tuple[str, list[str]]] = {
    "173417d55340.sse": ("stop", ["refusal:", "I'm sorry, I can't assist with that request."]),
    "2018feb66ae1.sse": (
        "tool_calls",
        ["get_weather", "call_4XzlGBLtUe9dy3GVNV4jhq7h", '"city": "New York City"'],
    ),
    "4cc50a6135d2.sse": ("length", ['{"']),
    "569c877e6942.sse": (
        "stop",
        ["refusal:", "I'm very sorry, but I can't assist with that.", "logprobs: refusal 11"],
    ),
    "7e5ea4d12e7c.sse": ("stop", ['{"city":"San Francisco","temperature":61,"units":"f"}']),
    "83b060bae42e.sse": ("stop", ["Foo!", "logprobs: content 2 tokens"]),
    "a247c49c5fcd.sse": (
        "tool_calls",
        ["get_weather", "call_CTf1nWJLqSeRgDqaCG27xZ74", '"state": "CA"'],
    ),
    "a491adda08c3.sse": (
        "stop",
        ["choice 0", "choice 1", "choice 2", '"temperature":65', '"temperature":59'],
    ),
    "c6aa7e397b71.sse": ("tool_calls", ["GetWeatherArgs", '"country": "UK"']),
    "d61558011839.sse": ("stop", ['"location": "San Francisco, CA",', "Mostly Cloudy"]),
    "e2aad469b71d.sse": ("stop", ["I'm unable to provide real-time weather updates."]),
    "f82268f2fefd.sse": (
        "tool_calls",
        [
            "[tool call 0] GetWeatherArgs",
            "call_JMW1whyEaYG438VE1OIflxA2",
            "[tool call 1] get_stock_price",
            "call_DNYTawLBoN8fj3KN6qU9N1Ou",
            '"ticker": "AAPL"',
        ],
    ),
}
NAMES = sorted(EXPECTED)

ERROR_STREAM = (
    b'data: {"id":"c1","model":"m","choices":[{"index":0,"delta":'
    b'{"role":"assistant","content":"Partial answer"}}]}\n\n'
    b'data: {"error":{"message":"The server had an error","type":"server_error","code":500}}\n\n'
)


def parse(data: bytes) -> chunkwise.chat.Result:
    parser = chunkwise.chat.Parser()
    parser.feed(data)
    parser.end()
    return parser.result


def write(tmp_path: Path, data: bytes, name: str = "stream.sse") -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def test_expectations_cover_every_recording() -> None:
    assert {path.name for path in RECORDINGS.glob("*.sse")} == set(EXPECTED)


# -- human output ---------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
async def test_recording(capsys: pytest.CaptureFixture[str], name: str) -> None:
    path = RECORDINGS / name
    status, out, err = await run_main(capsys, "inspect", str(path))
    assert (status, err) == (0, "")
    finish_reason, snippets = EXPECTED[name]
    for snippet in snippets:
        assert snippet in out
    assert f"finish_reason: {finish_reason}" in out
    # Everything the parser reconstructed is shown, line by line.
    result = parse(path.read_bytes())
    for choice in result.choices:
        for line in (choice.content + "\n" + (choice.refusal or "")).splitlines():
            assert line in out
    assert result.usage is not None
    assert f"total_tokens: {result.usage['total_tokens']}" in out
    assert f"model: {result.model}" in out
    assert f"id: {result.id}" in out
    assert out.splitlines()[-1] == "status: complete"


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("mode", [[], ["--json"], ["--sse"]])
async def test_read_size_one_gives_identical_output(
    capsys: pytest.CaptureFixture[str], name: str, mode: list[str]
) -> None:
    path = str(RECORDINGS / name)
    whole = await run_main(capsys, "inspect", *mode, path)
    assert await run_main(capsys, "inspect", *mode, "--read-size", "1", path) == whole
    assert await run_main(capsys, "inspect", *mode, "--read-size", "7", path) == whole


async def test_stdin(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    data = (RECORDINGS / "f82268f2fefd.sse").read_bytes()
    expected = await run_main(capsys, "inspect", str(RECORDINGS / "f82268f2fefd.sse"))
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    assert await run_main(capsys, "inspect", "-") == expected


async def test_incomplete_stream(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    data = (RECORDINGS / "e2aad469b71d.sse").read_bytes()
    # Cut at the start of the event carrying the finish_reason.
    cut = data.rindex(b"data: ", 0, data.index(b'"finish_reason":"stop"'))
    path = write(tmp_path, data[:cut])
    status, out, err = await run_main(capsys, "inspect", path)
    assert (status, err) == (1, "")
    assert "I'm unable to provide real-time weather updates." in out
    assert "finish_reason: none (unfinished)" in out
    assert "[DONE]: not received" in out
    assert "anomalies" not in out
    assert out.splitlines()[-1] == "status: incomplete (unfinished)"

    status, out, _ = await run_main(capsys, "inspect", "--json", path)
    document = json.loads(out)
    assert status == 1
    assert (document["status"], document["reason"]) == ("incomplete", "unfinished")
    assert document["choices"][0]["content"] == parse(data[:cut]).content


async def test_stream_cut_inside_an_event(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = (RECORDINGS / "e2aad469b71d.sse").read_bytes()
    path = write(tmp_path, data[:1500])
    status, out, _ = await run_main(capsys, "inspect", path)
    assert status == 1
    assert "anomalies:\n  - unterminated event: " in out
    assert out.splitlines()[-1] == "status: incomplete (unfinished)"

    status, out, err = await run_main(capsys, "inspect", "--sse", path)
    assert status == 1
    assert len(out.splitlines()) == data[:1500].count(b"\n\n")
    assert err == "chunkwise inspect: note: the body ended inside an event, which was discarded\n"


async def test_failed_stream(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = write(tmp_path, ERROR_STREAM)
    status, out, err = await run_main(capsys, "inspect", path)
    assert (status, err) == (1, "")
    assert "Partial answer" in out
    assert "error: StreamError\n  type: server_error\n  code: 500\n" in out
    assert out.splitlines()[-1] == "status: failed: The server had an error"

    status, out, _ = await run_main(capsys, "inspect", "--json", path)
    assert status == 1
    document = json.loads(out)
    assert document["status"] == "failed"
    assert document["choices"][0]["content"] == "Partial answer"
    assert document["error"] == {
        "exception": "StreamError",
        "message": "The server had an error",
        "type": "server_error",
        "code": 500,
        "param": None,
        "body": {"message": "The server had an error", "type": "server_error", "code": 500},
        "retry_after": None,
    }


async def test_invalid_tool_arguments(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = write(
        tmp_path,
        b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1",'
        b'"type":"function","function":{"name":"lookup","arguments":"{\\"q\\": \\"Par"}}]}}]}\n\n'
        b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\n'
        b"data: [DONE]\n\n",
    )
    status, out, _ = await run_main(capsys, "inspect", path)
    assert status == 0  # the stream is complete; only the arguments are unusable
    assert "  [tool call 0] lookup (call_1)\n    arguments error: " in out
    assert "not valid JSON" in out
    assert 'raw arguments: "{\\"q\\": \\"Par"' in out

    status, out, _ = await run_main(capsys, "inspect", "--json", path)
    call = json.loads(out)["choices"][0]["tool_calls"][0]
    assert call["arguments"] == '{"q": "Par'
    assert call["error"]["exception"] == "ToolArgumentsError"
    assert call["error"]["raw"] == '{"q": "Par'
    assert "parsed_arguments" not in call


async def test_reasoning_and_control_characters(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = write(
        tmp_path,
        b'data: {"choices":[{"index":0,"delta":{"reasoning_content":"Think\\nharder"}}]}\n\n'
        b'data: {"choices":[{"index":0,"delta":{"content":"red \\u001b[31mtext\\r"},'
        b'"finish_reason":"stop"}]}\n\n',
    )
    status, out, _ = await run_main(capsys, "inspect", path)
    assert status == 0
    assert "  reasoning:\n    Think\n    harder\n  content:\n" in out
    # Escape sequences from a recording are shown, never sent to the terminal.
    assert "    red \\x1b[31mtext\\x0d\n" in out
    assert "\x1b" not in out
    assert "\r" not in out


# -- --json and --sse ----------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
async def test_json(capsys: pytest.CaptureFixture[str], name: str) -> None:
    path = RECORDINGS / name
    status, out, _ = await run_main(capsys, "inspect", "--json", str(path))
    assert status == 0
    document = json.loads(out)
    result = parse(path.read_bytes())
    assert document["status"] == "complete"
    assert document["reason"] is None
    assert document["done_received"] is True
    assert (document["id"], document["model"]) == (result.id, result.model)
    assert document["usage"] == result.usage
    assert len(document["choices"]) == len(result.choices)
    for doc_choice, choice in zip(document["choices"], result.choices, strict=True):
        assert doc_choice["content"] == choice.content
        assert doc_choice["refusal"] == choice.refusal
        assert doc_choice["finish_reason"] == choice.finish_reason
        assert [c["name"] for c in doc_choice["tool_calls"]] == [c.name for c in choice.tool_calls]
        for doc_call, call in zip(doc_choice["tool_calls"], choice.tool_calls, strict=True):
            assert doc_call["arguments"] == call.arguments
            assert doc_call["parsed_arguments"] == json.loads(call.arguments)
            assert doc_call["error"] is None


@pytest.mark.parametrize("name", NAMES)
async def test_sse(capsys: pytest.CaptureFixture[str], name: str) -> None:
    data = (RECORDINGS / name).read_bytes()
    status, out, err = await run_main(capsys, "inspect", "--sse", str(RECORDINGS / name))
    assert (status, err) == (0, "")
    events = [json.loads(line) for line in out.splitlines()]
    assert len(events) == sum(line.startswith(b"data:") for line in data.splitlines())
    for event in events:
        assert set(event) == {"event", "data", "id", "retry"}
        assert event["event"] == "message"
    assert events[-1]["data"] == "[DONE]"
    assert json.loads(events[0]["data"])["object"] == "chat.completion.chunk"


# -- recordings with an HTTP head ----------------------------------------------


@pytest.mark.parametrize("newline", [b"\r\n", b"\n"])
async def test_http_head_is_skipped(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, newline: bytes
) -> None:
    body = (RECORDINGS / "f82268f2fefd.sse").read_bytes()
    head = newline.join([b"HTTP/1.1 200 OK", b"Content-Type: text/event-stream", b"", b""])
    path = write(tmp_path, head + body)
    status, out, _ = await run_main(capsys, "inspect", path)
    assert status == 0
    assert out.startswith("http: HTTP/1.1 200 OK\n")
    assert (
        out.replace("http: HTTP/1.1 200 OK\n\n", "", 1)
        == (await run_main(capsys, "inspect", write(tmp_path, body, "body.sse")))[1]
    )

    status, out, _ = await run_main(capsys, "inspect", "--json", "--read-size", "1", path)
    document = json.loads(out)
    assert document["http_status_line"] == "HTTP/1.1 200 OK"
    assert document["status"] == "complete"


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"data: x\n\n", (None, b"data: x\n\n")),
        (b"HTTP/1.1 200 OK\r\nA: b\r\n\r\ndata: x\n\n", ("HTTP/1.1 200 OK", b"data: x\n\n")),
        (b"HTTP/1.1 200 OK\nA: b\n\ndata: x\r\n\r\n", ("HTTP/1.1 200 OK", b"data: x\r\n\r\n")),
        # The first blank line ends the head, whichever way it is written.
        (b"HTTP/2 200\r\n\r\ndata: a\n\n", ("HTTP/2 200", b"data: a\n\n")),
        (b"HTTP/1.1 502 Bad Gateway\r\nA: b\r\n", ("HTTP/1.1 502 Bad Gateway", b"")),
        (b"HTTP/1.1 200 \xe9t\xe9\r\n\r\n", ("HTTP/1.1 200 \xe9t\xe9", b"")),
        (b"", (None, b"")),
    ],
)
def test_split_http_head(data: bytes, expected: tuple[str | None, bytes]) -> None:
    assert split_http_head(data) == expected


# -- errors and usage ------------------------------------------------------------


@pytest.mark.parametrize("what", ["missing", "directory"])
async def test_unreadable_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, what: str
) -> None:
    path = tmp_path / "missing.sse" if what == "missing" else tmp_path
    status, out, err = await run_main(capsys, "inspect", str(path))
    assert status == 2
    assert out == ""
    assert err.startswith(f"chunkwise inspect: error: cannot read {str(path)!r}: ")
    assert err.count("\n") == 1
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "argv",
    [
        ["inspect", "--read-size", "0", "x.sse"],
        ["inspect", "--read-size", "many", "x.sse"],
        ["inspect", "--sse", "--json", "x.sse"],
        ["inspect"],
        ["nonsense"],
        [],
    ],
)
async def test_usage_errors(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    status, out, err = await run_main(capsys, *argv)
    assert status == 2
    assert out == ""
    assert "error:" in err
    assert "Traceback" not in err


async def test_read_size_zero_message(capsys: pytest.CaptureFixture[str]) -> None:
    _, _, err = await run_main(capsys, "inspect", "--read-size", "0", "x.sse")
    assert "argument --read-size: must be at least 1, not 0" in err


async def test_help_and_version(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = await run_main(capsys, "inspect", "--help")
    assert status == 0
    assert (
        "usage: chunkwise inspect [-h] [--read-size N]\n"
        "                         [--api {auto,chat,responses,completions,messages}]\n"
        "                         [--sse | --json] [--audio-out PATH]\n"
        "                         [--audio-format FORMAT]\n"
        "                         FILE"
    ) in out
    status, out, _ = await run_main(capsys, "--version")
    assert (status, out) == (0, f"chunkwise {chunkwise.__version__}\n")


class _ClosedPipe(io.StringIO):
    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")


def test_broken_pipe(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdout", _ClosedPipe())
    status = main(["inspect", "--sse", str(RECORDINGS / "d61558011839.sse")])
    assert status == 141
    assert capsys.readouterr().err == ""


async def test_python_dash_m() -> None:
    recording = (REPO / "examples" / "recordings" / "parallel_tool_calls.sse").relative_to(REPO)
    status, out, err = await run_python("-m", "chunkwise", "inspect", str(recording))
    assert (status, err) == (0, "")
    assert "[tool call 0] GetWeatherArgs" in out
    assert "[tool call 1] get_stock_price" in out
    assert out.endswith("status: complete\n")


# -- recordings that are not streams ---------------------------------------------

LLAMA_401 = (
    b"HTTP/1.1 401 Unauthorized\r\n"
    b"Content-Type: application/json; charset=utf-8\r\n"
    b"X-Request-Id: req_401\r\n"
    b"\r\n"
    b'{"error":{"code":401,"message":"Invalid API Key","type":"authentication_error"}}'
)


@pytest.mark.parametrize("read_size", ["65536", "1"])
async def test_a_recorded_http_error_is_failed_with_the_servers_message(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, read_size: str
) -> None:
    path = write(tmp_path, LLAMA_401, "401.http")
    status, out, err = await run_main(capsys, "inspect", "--read-size", read_size, path)
    assert (status, err) == (1, "")
    lines = out.splitlines()
    assert lines[0] == "http: HTTP/1.1 401 Unauthorized"
    assert lines[-1] == "status: failed: HTTP 401: Invalid API Key"
    assert "error: HTTPStatusError" in lines
    assert "  request_id: req_401" in lines
    assert "empty stream" not in out
    assert "unterminated event" not in out


async def test_a_recorded_http_error_in_json(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    status, out, _ = await run_main(capsys, "inspect", "--json", write(tmp_path, LLAMA_401))
    assert status == 1
    document = json.loads(out)
    assert document["status"] == "failed"
    assert document["http_status_line"] == "HTTP/1.1 401 Unauthorized"
    error = document["error"]
    assert error["exception"] == "HTTPStatusError"
    assert error["message"] == "HTTP 401: Invalid API Key"
    assert (error["status_code"], error["reason"]) == (401, "Unauthorized")
    assert error["error"]["message"] == "Invalid API Key"
    assert error["error"]["type"] == "authentication_error"
    assert error["error"]["code"] == 401


async def test_a_recorded_http_error_is_not_a_stream_for_sse(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    status, out, err = await run_main(capsys, "inspect", "--sse", write(tmp_path, LLAMA_401))
    assert (status, out) == (1, "")
    assert err == (
        "chunkwise inspect: HTTP 401: Invalid API Key (an error response, not a stream)\n"
    )


async def test_a_recorded_error_without_a_json_body_gives_the_reason(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = b"HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/html\r\n\r\n<html>bad</html>"
    status, out, _ = await run_main(capsys, "inspect", write(tmp_path, data))
    assert status == 1
    assert out.splitlines()[-1] == "status: failed: HTTP 502: Bad Gateway"


NOT_SSE = {
    "an HTML page": (b"<!DOCTYPE html>\n<html><body>Not found</body></html>\n", '"<!DOCTYPE html>'),
    "a JSON document": (b'{\n  "id": "chatcmpl-1",\n  "choices": []\n}\n', '"{\\n  \\"id\\"'),
    "an empty file": (b"", "it is empty"),
}


@pytest.mark.parametrize("what", sorted(NOT_SSE))
@pytest.mark.parametrize("mode", [[], ["--json"], ["--sse"]])
async def test_a_file_without_server_sent_events_says_so(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, what: str, mode: list[str]
) -> None:
    data, start = NOT_SSE[what]
    path = write(tmp_path, data, "page.txt")
    status, out, err = await run_main(capsys, "inspect", *mode, path)
    assert (status, out) == (1, "")
    assert err.startswith(f"chunkwise inspect: no server-sent events found in {path!r} (")
    assert start in err
    assert err.count("\n") == 1


async def test_a_recorded_200_that_is_not_a_stream_names_its_content_type(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{"object": "chat.completion"}'
    status, _, err = await run_main(capsys, "inspect", write(tmp_path, data))
    assert status == 1
    assert "no server-sent events found" in err
    assert "content-type application/json; the body starts with" in err


async def test_a_stream_of_keep_alive_events_is_still_a_stream(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Events without chunks are SSE: an empty stream, not "no events".
    status, out, err = await run_main(capsys, "inspect", write(tmp_path, b"data: [DONE]\n\n"))
    assert (status, err) == (1, "")
    assert out.splitlines()[-1] == "status: incomplete (empty stream)"


def test_parse_http_head() -> None:
    head, body = parse_http_head(LLAMA_401)
    assert head is not None
    assert (head.status_line, head.status_code, head.reason) == (
        "HTTP/1.1 401 Unauthorized",
        401,
        "Unauthorized",
    )
    assert head.headers["x-request-id"] == "req_401"
    assert body.startswith(b'{"error"')
    head, _ = parse_http_head(b"HTTP/2 200\n\n")
    assert head is not None and (head.status_code, head.reason) == (200, "")
    head, _ = parse_http_head(b"HTTP/1.1 weird\r\n\r\n")
    assert head is not None and head.status_code is None
    assert parse_http_head(b"data: x\n\n") == (None, b"data: x\n\n")


@pytest.mark.parametrize(
    "data", [b'data: {"choices": [{"delta": {"con', b": keep-alive\n\n", b"\xef\xbb\xbfdata: {"]
)
async def test_a_stream_cut_before_its_first_event_is_an_empty_stream_not_another_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, data: bytes
) -> None:
    status, out, err = await run_main(capsys, "inspect", write(tmp_path, data))
    assert (status, err) == (1, "")
    assert out.splitlines()[-1] == "status: incomplete (empty stream)"

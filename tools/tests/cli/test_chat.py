"""``chunkwise chat`` against loopback servers, in-process through ``main()`` and as a process."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import trio

from chunkwise import chat
from chunkwise.testing import RecordedRequest, ResponseWriter, ScriptedResponse, open_test_server
from chunkwise_tools.cli import main
from helpers.bodies import choice, chunk, tool
from helpers.cli import WEATHER_TOOL, run_main, slow_words
from helpers.data import KEY, KEY_VAR
from helpers.processes import interrupt, run_python

pytestmark = pytest.mark.usefixtures("api_key")

USAGE = {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}
TEXT_STREAM = ScriptedResponse.sse(
    [
        chunk(choice(role="assistant", content="")),
        chunk(choice(content="Hello, ")),
        chunk(choice(content="wörld ✓")),
        chunk(choice(finish_reason="stop")),
        chunk(usage=USAGE),
    ],
    write_sizes=7,
)


def chat_args(server_url: str, *extra: str) -> list[str]:
    return ["chat", "--base-url", server_url, "--api-key-env", KEY_VAR, *extra]


async def test_text_streams_and_summary_goes_to_stderr(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([WEATHER_TOOL]))
    async with open_test_server(TEXT_STREAM) as server:
        status, out, err = await run_main(
            capsys,
            *chat_args(server.base_url, "Say hello"),
            "--model",
            "my-model",
            "--system",
            "Be brief.",
            "--max-tokens",
            "20",
            "--temperature",
            "0.5",
            "--tools",
            str(tools),
            "--include-usage",
        )
    assert status == 0
    assert out == "Hello, wörld ✓\n"
    assert err.splitlines() == [
        "finish_reason: stop",
        "usage: prompt_tokens=5 completion_tokens=3 total_tokens=8",
        "status: complete",
    ]
    [request] = server.requests
    assert request.target == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.json() == {
        "model": "my-model",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Say hello"},
        ],
        "max_tokens": 20,
        "temperature": 0.5,
        "tools": [WEATHER_TOOL],
        "stream_options": {"include_usage": True},
        "stream": True,
    }
    assert KEY not in out + err


async def test_endpoint_and_model_from_the_environment(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    async with open_test_server(TEXT_STREAM) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
        monkeypatch.setenv("CHUNKWISE_MODEL", "env-model")
        status, out, _ = await run_main(capsys, "chat", "hi")
    assert status == 0
    assert out == "Hello, wörld ✓\n"
    [request] = server.requests
    assert request.headers["authorization"] == "Bearer sk-from-env"
    assert request.json()["model"] == "env-model"
    assert "stream_options" not in request.json()


async def test_default_model_and_no_key(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEY_VAR)
    async with open_test_server(TEXT_STREAM) as server:
        status, _, _ = await run_main(capsys, *chat_args(server.base_url, "hi"))
    assert status == 0
    [request] = server.requests
    assert "authorization" not in request.headers
    assert request.json()["model"] == "gpt-4o-mini"


async def test_reasoning_and_tool_calls(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([WEATHER_TOOL]))
    body = ScriptedResponse.sse(
        [
            chunk(choice(role="assistant", reasoning_content="Thinking ")),
            chunk(choice(reasoning_content="hard.")),
            chunk(choice(content="Let me check.")),
            chunk(choice(tool_calls=[tool(0, id="call_1", name="get_weather", arguments="")])),
            chunk(choice(tool_calls=[tool(0, arguments='{"city": ')])),
            chunk(choice(tool_calls=[tool(0, arguments='"Paris"}')])),
            chunk(
                choice(
                    tool_calls=[tool(1, id="call_2", name="get_weather", arguments='{"town": 1}')]
                )
            ),
            chunk(choice(tool_calls=[tool(2, id="call_3", name="x")])),
            chunk(choice(tool_calls=[tool(2, arguments="{oops")])),
            chunk(choice(finish_reason="tool_calls")),
        ]
    )
    async with open_test_server(body) as server:
        status, out, err = await run_main(
            capsys, *chat_args(server.base_url, "weather?", "--tools", str(tools))
        )
    assert status == 0
    lines = out.splitlines()
    assert lines[0] == "[reasoning] Thinking hard."
    assert lines[1] == "Let me check."
    assert lines[2] == '[tool call 0] get_weather (call_1): {"city": "Paris"}'
    assert lines[3] == "[tool call 1] get_weather (call_2)"
    assert lines[4].startswith("  arguments error: ")
    assert "city" in lines[4]
    assert lines[5] == '  raw arguments: "{\\"town\\": 1}"'
    assert lines[6] == "[tool call 2] x (call_3)"
    assert "not valid JSON" in lines[7]
    assert err.splitlines()[-3:] == [
        "finish_reason: tool_calls",
        # The live preview of call 2's arguments stopped at "{o".
        "note: not JSON (choice 0): tool call 2: expected an object key, found 'o' "
        "(at character 1)",
        "status: complete",
    ]


async def test_refusal_and_control_characters(capsys: pytest.CaptureFixture[str]) -> None:
    body = ScriptedResponse.sse(
        [
            chunk(choice(content="evil \x1b[31mred\x1b[0m\n")),
            chunk(choice(refusal="I can't.")),
            chunk(choice(finish_reason="stop")),
        ]
    )
    async with open_test_server(body) as server:
        status, out, _ = await run_main(capsys, *chat_args(server.base_url, "x"))
    assert status == 0
    assert "\x1b" not in out
    assert out == "evil \\x1b[31mred\\x1b[0m\n[refusal] I can't.\n"


async def test_several_choices(capsys: pytest.CaptureFixture[str]) -> None:
    body = ScriptedResponse.sse(
        [
            chunk(choice(0, content="A")),
            chunk(choice(1, content="B")),
            chunk(choice(0, "stop")),
            chunk(choice(1, "length")),
        ]
    )
    async with open_test_server(body) as server:
        status, out, err = await run_main(capsys, *chat_args(server.base_url, "x"))
    assert status == 0  # "length" is a finish reason: the stream is complete
    assert out == "A\n[choice 1]\nB\n"
    assert "finish_reason (choice 0): stop" in err
    assert "finish_reason (choice 1): length" in err


async def test_json_lines(capsys: pytest.CaptureFixture[str]) -> None:
    async with open_test_server(TEXT_STREAM) as server:
        status, out, err = await run_main(capsys, *chat_args(server.base_url, "hi", "--json"))
    assert status == 0
    assert err == ""
    documents = [json.loads(line) for line in out.splitlines()]
    types = [d["type"] for d in documents]
    assert types[0] == "HeadReceived"
    assert types[-1] == "StreamCompleted"
    assert types.count("TextDelta") == 2
    assert "ChoiceFinished" in types
    assert "UsageReported" in types
    assert documents[-1]["result"]["status"] == "complete"
    assert documents[-1]["result"]["choices"][0]["content"] == "Hello, wörld ✓"
    assert KEY not in out


async def test_json_is_utf8_and_unescaped_like_the_text(capsys: pytest.CaptureFixture[str]) -> None:
    async with open_test_server(TEXT_STREAM) as server:
        _, text, _ = await run_main(capsys, *chat_args(server.base_url, "hi"))
        _, lines, _ = await run_main(capsys, *chat_args(server.base_url, "hi", "--json"))
    assert "wörld ✓" in text
    assert '"text": "wörld ✓"' in lines
    assert "\\u" not in lines


async def test_json_is_utf8_whatever_the_locale_and_text_never_fails_to_encode() -> None:
    # A stdout in latin-1 (a legacy locale, a Windows pipe): JSON is switched to
    # UTF-8, the encoding of JSON between systems; text shows what latin-1
    # cannot hold ("✓") as an escape instead of crashing.
    latin1 = {"PYTHONIOENCODING": "latin-1"}
    async with open_test_server(TEXT_STREAM) as server:
        argv = ["-m", "chunkwise", *chat_args(server.base_url, "hi")]
        status, out, err = await run_python(*argv, "--json", env=latin1, text=False)
        assert (status, err) == (0, b"")
        assert '"text": "wörld ✓"'.encode() in out
        assert json.loads(out.splitlines()[-1].decode("utf-8"))["type"] == "StreamCompleted"

        status, out, err = await run_python(*argv, env=latin1, text=False)
        assert (status, b"Traceback" in err) == (0, False)
        assert out == "Hello, wörld \\u2713\n".encode("latin-1")


@pytest.mark.parametrize(
    ("status_code", "message"),
    [
        (401, "Incorrect API key provided"),
        (404, "The model `nope` does not exist"),
        (429, "Rate limit reached"),
        (500, "The server had an error\nwhile processing your request"),
        (503, "Service unavailable"),
    ],
)
async def test_http_errors_are_one_line(
    capsys: pytest.CaptureFixture[str], status_code: int, message: str
) -> None:
    async with open_test_server(ScriptedResponse.error(status_code, message)) as server:
        status, out, err = await run_main(capsys, *chat_args(server.base_url, "x"))
    assert status == 1
    assert out == ""
    # 429 and 5xx are retried (twice, by default) before the error is shown.
    attempts = " (after 3 attempts)" if status_code in (429, 500, 503) else ""
    # A 401 says whether a key was sent (one was); the 404's base URL has /v1.
    sent = " (an API key was sent, and the server did not accept it)" if status_code == 401 else ""
    expected = f"HTTP {status_code}: {' '.join(message.split())}{sent}{attempts}"
    assert err == f"chunkwise chat: error: {expected}\n"


async def test_http_error_in_json_mode(capsys: pytest.CaptureFixture[str]) -> None:
    error = ScriptedResponse.error(401, "Incorrect API key provided", code="invalid_api_key")
    async with open_test_server(error) as server:
        status, out, err = await run_main(capsys, *chat_args(server.base_url, "x", "--json"))
    assert status == 1
    [document] = [json.loads(line) for line in out.splitlines()]
    assert document["type"] == "error"
    assert document["error"]["exception"] == "HTTPStatusError"
    assert document["error"]["status_code"] == 401
    assert err == (
        "chunkwise chat: error: HTTP 401: Incorrect API key provided "
        "(an API key was sent, and the server did not accept it)\n"
    )


@pytest.mark.parametrize("json_mode", [False, True])
async def test_a_key_quoted_back_by_the_server_is_redacted(
    capsys: pytest.CaptureFixture[str], json_mode: bool
) -> None:
    error = ScriptedResponse.error(401, f"Incorrect API key provided: {KEY}.")
    async with open_test_server(error) as server:
        argv = chat_args(server.base_url, "x", *(["--json"] if json_mode else []))
        status, out, err = await run_main(capsys, *argv)
    assert status == 1
    assert KEY not in out + err
    assert "Incorrect API key provided: ***." in err


async def test_connection_refused(capsys: pytest.CaptureFixture[str], refused_port: int) -> None:
    argv = chat_args(f"http://127.0.0.1:{refused_port}/v1", "x")
    status, out, err = await run_main(capsys, *argv)
    assert status == 1
    assert out == ""
    assert err.startswith(f"chunkwise chat: error: cannot connect to 127.0.0.1:{refused_port}")
    assert err.count("\n") == 1


async def test_not_an_event_stream(capsys: pytest.CaptureFixture[str]) -> None:
    body = ScriptedResponse(content_type="application/json", body=b'{"choices": []}')
    async with open_test_server(body) as server:
        status, _, err = await run_main(capsys, *chat_args(server.base_url, "x"))
    assert status == 1
    assert err.startswith("chunkwise chat: error: expected a text/event-stream response")
    assert err.count("\n") == 1


async def test_disconnect_is_incomplete(capsys: pytest.CaptureFixture[str]) -> None:
    body = TEXT_STREAM.body
    cut = body.index(b"w\\u00f6rld")
    async with open_test_server(ScriptedResponse(body=body, disconnect_after=cut + 5)) as server:
        status, out, err = await run_main(capsys, *chat_args(server.base_url, "x"))
    assert status == 1
    assert out == "Hello, \n"
    lines = err.splitlines()
    assert lines[0] == "finish_reason: none"
    assert lines[1].startswith("note: transport error: ")
    assert "closed the connection" in lines[1]
    assert lines[-1] == "status: incomplete (connection lost)"


async def test_stream_error_is_failed(capsys: pytest.CaptureFixture[str]) -> None:
    body = ScriptedResponse.sse(
        [
            chunk(choice(content="Par")),
            {"error": {"message": "overloaded", "type": "server_error"}},
        ],
        done=False,
    )
    async with open_test_server(body) as server:
        status, out, err = await run_main(capsys, *chat_args(server.base_url, "x"))
    assert status == 1
    assert out == "Par\n"
    assert err.splitlines()[-1] == "status: failed: overloaded"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read"),
        ("{not json", "is not valid JSON"),
        ('{"type": "function"}', "must hold a JSON list"),
    ],
)
def test_bad_tools_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: str | None, message: str
) -> None:
    path = tmp_path / "tools.json"
    if content is not None:
        path.write_text(content)
    status = main(["chat", "--base-url", "http://127.0.0.1:9/v1", "x", "--tools", str(path)])
    _, err = capsys.readouterr()
    assert status == 2
    assert err.startswith("chunkwise chat: error: ")
    assert message in err


def test_bad_base_url(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["chat", "--base-url", "ftp://example.com/v1", "x"]) == 2
    _, err = capsys.readouterr()
    assert err.startswith("chunkwise chat: error: base URL")


def test_bad_key_is_not_quoted(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_VAR, "sk-bad\x01key")
    assert main(chat_args("http://127.0.0.1:9/v1", "x")) == 2
    _, err = capsys.readouterr()
    assert "sk-bad" not in err
    assert "api_key" in err


@pytest.mark.parametrize("json_mode", [False, True])
async def test_ctrl_c_keeps_partial_output_and_exits_130(json_mode: bool) -> None:
    """SIGINT to a real ``python -m chunkwise chat`` while a slow server streams."""
    async with open_test_server(slow_words()) as server:
        argv = chat_args(server.base_url, "count", *(["--json"] if json_mode else []))
        status, out, err = await interrupt(argv, after_stdout=b"word2 ")
        # The client closed its socket.
        with trio.fail_after(5):
            await server.wait_client_closed()
    assert status == 130, err
    assert "word199" not in out
    assert "Traceback" not in err
    assert KEY not in out + err
    if json_mode:
        last = json.loads(out.splitlines()[-1])
        assert last["type"] == "interrupted"
        assert last["status"] == "incomplete"
        assert last["result"]["choices"][0]["content"].startswith("word0 word1 word2 ")
    else:
        assert out.startswith("word0 word1 word2 ")
        assert err.splitlines()[-1] == "status: incomplete (interrupted)"


async def test_handler_form_key_not_echoed_in_json(capsys: pytest.CaptureFixture[str]) -> None:
    async def echo_auth(request: RecordedRequest, writer: ResponseWriter) -> None:
        # A hostile relay quoting the Authorization header back inside the stream.
        auth = request.headers.get("authorization", "")
        stream = [chunk(choice(content=auth)), chunk(choice(finish_reason="stop"))]
        await writer.play(ScriptedResponse.sse(stream))

    async with open_test_server(echo_auth) as server:
        status, out, _ = await run_main(capsys, *chat_args(server.base_url, "x", "--json"))
    assert status == 0
    assert KEY not in out
    assert "Bearer ***" in out


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_reasoning_is_dimmed_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    from chunkwise_tools.cli.chat import TextRenderer

    body = ScriptedResponse.sse(
        [
            chunk(choice(reasoning_content="Think.")),
            chunk(choice(content="Answer.")),
            chunk(choice(finish_reason="stop")),
        ]
    ).body
    out, err = FakeTerminal(), io.StringIO()
    renderer = TextRenderer(out, err)
    parser = chat.Parser()
    for event in [*parser.feed(body), *parser.end()]:
        renderer.event(event)
    assert out.getvalue() == "\x1b[2mThink.\x1b[0m\nAnswer.\n"
    assert err.getvalue() == "finish_reason: stop\nstatus: complete\n"

    monkeypatch.setenv("NO_COLOR", "1")
    out = FakeTerminal()
    renderer = TextRenderer(out, err)
    parser = chat.Parser()
    for event in [*parser.feed(body), *parser.end()]:
        renderer.event(event)
    assert out.getvalue() == "[reasoning] Think.\nAnswer.\n"


async def test_ctrl_c_before_the_response_began() -> None:
    stream = [chunk(choice(content="late")), chunk(choice(finish_reason="stop"))]
    slow_head = ScriptedResponse.sse(stream, head_delay=30)
    async with open_test_server(slow_head) as server:
        argv = chat_args(server.base_url, "x")
        status, out, err = await interrupt(argv, after=server.wait_requests)
        with trio.fail_after(5):
            await server.wait_client_closed()
    assert status == 130
    assert out == ""
    assert err == "status: incomplete (interrupted before the response began)\n"


def test_tools_need_jsonschema(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    real_find_spec = importlib.util.find_spec

    def find_spec(name: str, package: str | None = None) -> Any:
        return None if name == "jsonschema" else real_find_spec(name, package)

    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([WEATHER_TOOL]))
    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    assert main([*chat_args("http://127.0.0.1:9/v1", "x"), "--tools", str(tools)]) == 2
    _, err = capsys.readouterr()
    assert "pip install -e '.[jsonschema]'" in err


@pytest.mark.parametrize("api", ["responses", "chat"])
async def test_a_chat_server_answering_a_responses_request_gets_a_hint(
    capsys: pytest.CaptureFixture[str], api: str
) -> None:
    # `chat --api responses` against a server that streams chat chunks
    # wherever it is asked: one counted anomaly, and a note naming --api chat.
    async with open_test_server(TEXT_STREAM) as server:
        status, _, err = await run_main(capsys, *chat_args(server.base_url, "hi", "--api", api))
    hint = "the server answered with a chat completions stream, not Responses API events"
    if api == "responses":
        assert status == 1
        assert f"chunkwise chat: note: {hint} (try --api chat)" in err
        assert err.count("event without type") <= 1  # counted once, not once an event
    else:
        assert status == 0 and "note:" not in err

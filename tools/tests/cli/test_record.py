"""``chunkwise record`` against loopback servers, read back with ``chunkwise inspect``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio

from chunkwise.testing import ScriptedResponse, open_test_server
from chunkwise_tools.cli import main
from chunkwise_tools.cli._common import split_http_head
from chunkwise_tools.cli.record import KeyWatch
from chunkwise_tools.server import ServerOptions, open_chat_server
from helpers.bodies import choice, chunk
from helpers.cli import run_main, slow_words
from helpers.data import KEY, KEY_VAR
from helpers.processes import interrupt

pytestmark = pytest.mark.usefixtures("api_key")

STREAM = ScriptedResponse.sse(
    [
        chunk(choice(role="assistant", content="Hi")),
        chunk(choice(content=" there")),
        chunk(choice(finish_reason="stop")),
    ],
    headers={"X-Request-Id": "req_123", "Openai-Processing-Ms": "42"},
    write_sizes=5,
)


def record_args(base_url: str, output: Path, *extra: str) -> list[str]:
    return ["record", "--base-url", base_url, "--api-key-env", KEY_VAR, "-o", str(output), *extra]


async def test_records_head_and_body_and_inspect_reads_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    output = tmp_path / "out.http"
    async with open_test_server(STREAM) as server:
        status, out, err = await run_main(
            capsys, *record_args(server.base_url, output, "hello", "--include-usage")
        )
    assert status == 0
    assert out == ""
    data = output.read_bytes()
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.split(b"\r\n") == [
        b"HTTP/1.1 200 OK",
        b"Content-Type: text/event-stream",
        b"X-Request-Id: req_123",
        b"Openai-Processing-Ms: 42",
        b"Transfer-Encoding: chunked",
    ]
    assert body == STREAM.body  # de-chunked, byte for byte
    assert err.splitlines() == [
        f"recorded HTTP/1.1 200 OK, {len(STREAM.body)} body bytes, to {str(output)!r}",
        "status: complete",
    ]
    # The request sent is the one chat would send.
    request = server.requests[0].json()
    assert request["stream"] is True
    assert request["stream_options"] == {"include_usage": True}
    assert request["messages"] == [{"role": "user", "content": "hello"}]
    # Nothing of the request reaches the file: no key, no request header.
    assert KEY.encode() not in data
    assert b"authorization" not in data.lower()
    assert b"bearer" not in data.lower()
    assert b"user-agent" not in data.lower()
    assert b"chat/completions" not in data
    assert KEY not in out + err

    assert split_http_head(data) == ("HTTP/1.1 200 OK", STREAM.body)
    assert main(["inspect", str(output)]) == 0
    inspected, _ = capsys.readouterr()
    assert "http: HTTP/1.1 200 OK" in inspected
    assert "Hi there" in inspected
    assert "status: complete" in inspected


@pytest.mark.parametrize(
    ("status_code", "message"), [(401, "Incorrect API key provided"), (503, "busy")]
)
async def test_error_responses_are_recorded(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, status_code: int, message: str
) -> None:
    output = tmp_path / "error.http"
    response = ScriptedResponse.error(status_code, message, headers={"Retry-After": "3"})
    async with open_test_server(response) as server:
        status, _, err = await run_main(capsys, *record_args(server.base_url, output, "x"))
    assert status == 1
    data = output.read_bytes()
    status_line, body = split_http_head(data)
    assert status_line is not None and status_line.startswith(f"HTTP/1.1 {status_code} ")
    assert b"Retry-After: 3\r\n" in data
    assert json.loads(body)["error"]["message"] == message
    # A key was sent (the fixture's): a 401 says so, as chat's error does.
    sent = " (an API key was sent, and the server did not accept it)" * (status_code == 401)
    assert err.splitlines()[-1] == f"error: HTTP {status_code}: {message}{sent}"
    assert KEY.encode() not in data


@pytest.mark.parametrize("where", ["error body", "stream body", "header"])
async def test_a_key_quoted_back_is_recorded_unchanged_with_a_warning(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, where: str
) -> None:
    # A recording is evidence: never changed.  The key is not printed, but the
    # user is told that the file holds it.
    output = tmp_path / "echo.http"
    if where == "error body":
        response = ScriptedResponse.error(401, f"Incorrect API key provided: {KEY}")
    elif where == "stream body":
        # Written 3 bytes at a time, so the key is split across many reads.
        response = ScriptedResponse.sse(
            [chunk(choice(content=f"your key is {KEY}!")), chunk(choice(finish_reason="stop"))],
            write_sizes=3,
        )
    else:
        response = ScriptedResponse.sse(
            [chunk(choice(finish_reason="stop"))], headers={"X-Echo": f"Bearer {KEY}"}
        )
    async with open_test_server(response) as server:
        status, out, err = await run_main(capsys, *record_args(server.base_url, output, "x"))
    data = output.read_bytes()
    assert KEY not in out + err
    assert f"warning: the server quoted the API key back: {str(output)!r} holds it" in err
    if where == "error body":
        assert status == 1
        _, body = split_http_head(data)
        assert body == response.body
        assert json.loads(body)["error"]["message"] == f"Incorrect API key provided: {KEY}"
        assert "error: HTTP 401: Incorrect API key provided: ***" in err
    elif where == "stream body":
        assert status == 0
        assert split_http_head(data)[1] == response.body
        assert f"your key is {KEY}!".encode() in data
    else:
        assert f"X-Echo: Bearer {KEY}\r\n".encode() in data


async def test_no_warning_when_the_key_is_not_in_the_recording(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    async with open_test_server(STREAM) as server:
        status, _, err = await run_main(capsys, *record_args(server.base_url, tmp_path / "o", "x"))
    assert status == 0
    assert not any(line.startswith("warning:") for line in err.splitlines())


@pytest.mark.parametrize("key", ["sk-abcdefghijklmn", "a" * 15 + "b", "ab" * 8, "k" * 16])
def test_key_watch_finds_the_key_at_every_split(key: str) -> None:
    text = f"x{key[:-1]}y{key}z".encode()
    for split in range(len(text) + 1):
        for second in range(split, len(text) + 1):
            watch = KeyWatch(key)
            for piece in (text[:split], text[split:second], text[second:]):
                watch.feed(piece)
            assert watch.seen, (split, second)
    watch = KeyWatch(key)
    for byte in f"x{key[:-1]}y{key[1:]}z".encode():
        watch.feed(bytes([byte]))
    assert not watch.seen  # near misses are not the key


@pytest.mark.parametrize("key", [None, "e", "x", "test", "sk-no-key-requ"])
def test_key_watch_ignores_a_key_too_short_to_be_a_secret(key: str | None) -> None:
    watch = KeyWatch(key)
    watch.feed(f"HTTP/1.1 200 OK {key} Content-Type: text/event-stream test exceeds x".encode())
    assert not watch.seen


async def test_cut_off_stream_keeps_what_arrived(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    output = tmp_path / "cut.http"
    cut = ScriptedResponse(body=STREAM.body, write_sizes=10, disconnect_after=25)
    async with open_test_server(cut) as server:
        status, _, err = await run_main(capsys, *record_args(server.base_url, output, "x"))
    assert status == 1
    _, body = split_http_head(output.read_bytes())
    assert body == STREAM.body[:25]
    assert "transport error: " in err
    assert err.splitlines()[-1] == "status: incomplete (connection lost)" or err.splitlines()[
        -1
    ].startswith("status: incomplete")


async def test_request_json_is_sent_verbatim(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    request = tmp_path / "request.json"
    raw = b'{"model": "x", "messages": [{"role": "user", "content": "hi"}], "stream": true}'
    request.write_bytes(raw)
    output = tmp_path / "out.http"
    async with open_test_server(STREAM) as server:
        status, _, _ = await run_main(
            capsys, *record_args(server.base_url, output, "--request-json", str(request))
        )
    assert status == 0
    assert server.requests[0].body == raw


@pytest.mark.parametrize(
    ("raw", "why"),
    [(b'{"model": "x", "messages": [}', "Expecting value"), (b"\xff{}", "can't decode")],
)
async def test_request_json_that_is_not_json_is_sent_with_a_warning(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, raw: bytes, why: str
) -> None:
    request = tmp_path / "request.json"
    request.write_bytes(raw)
    async with open_test_server(STREAM) as server:
        status, _, err = await run_main(
            capsys,
            *record_args(server.base_url, tmp_path / "out.http", "--request-json", str(request)),
        )
    assert status == 0
    assert server.requests[0].body == raw  # the server's reaction may be the point
    first = err.splitlines()[0]
    assert first.startswith(f"warning: {str(request)!r} is not JSON (") and why in first
    assert first.endswith("); sending it as is")


async def test_output_to_stdout(capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    async with open_test_server(STREAM) as server:
        argv = ["record", "--base-url", server.base_url, "-o", "-", "x"]
        status, out, _ = await run_main(capsysbinary, *argv)
    assert status == 0
    assert out.startswith(b"HTTP/1.1 200 OK\r\n")
    assert out.endswith(STREAM.body)


async def test_connection_refused_leaves_no_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, refused_port: int
) -> None:
    output = tmp_path / "out.http"
    status, _, err = await run_main(
        capsys, *record_args(f"http://127.0.0.1:{refused_port}/v1", output, "x")
    )
    assert status == 1
    assert err.startswith("chunkwise record: error: cannot connect")
    assert not output.exists()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ([], "give PROMPT or --request-json FILE"),
        (["x", "--request-json", "r.json"], "not both"),
        (["--request-json", "/nonexistent/r.json"], "cannot read"),
    ],
)
def test_usage_errors(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, extra: list[str], message: str
) -> None:
    argv = ["record", "--base-url", "http://127.0.0.1:9/v1", "-o", str(tmp_path / "o"), *extra]
    assert main(argv) == 2
    _, err = capsys.readouterr()
    assert err.startswith("chunkwise record: error: ")
    assert message in err


def test_unwritable_output(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    argv = ["record", "--base-url", "http://127.0.0.1:9/v1", "-o", str(tmp_path / "no" / "o"), "x"]
    assert main(argv) == 2
    _, err = capsys.readouterr()
    assert err.startswith("chunkwise record: error: cannot write")


async def test_ctrl_c_keeps_what_was_recorded() -> None:
    async with open_test_server(slow_words()) as server:
        argv = ["record", "--base-url", server.base_url, "--api-key-env", KEY_VAR, "-o", "-", "x"]
        status, out, err = await interrupt(argv, after_stdout=b"word2 ")
        with trio.fail_after(5):
            await server.wait_client_closed()
    assert status == 130, err
    assert out.startswith("HTTP/1.1 200 OK\r\n")
    assert "word2 " in out
    assert "word199" not in out
    assert err.splitlines()[-1] == "status: incomplete (interrupted)"


@pytest.mark.parametrize("short_key", ["e", "x", "test"])
async def test_a_short_api_key_never_rewrites_the_recording_or_the_json_output(
    short_key: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Local servers accept any key and people type "e": that is no secret to mask.
    monkeypatch.setenv(KEY_VAR, short_key)
    output = tmp_path / "out.http"
    async with open_test_server(STREAM) as server:
        status, _, err = await run_main(capsys, *record_args(server.base_url, output, "hello"))
        assert status == 0
        data = output.read_bytes()
        assert b"Content-Type: text/event-stream" in data
        assert split_http_head(data)[1] == STREAM.body
        assert "***" not in err
        status, out, _ = await run_main(
            capsys, "chat", "--base-url", server.base_url, "--api-key-env", KEY_VAR, "--json", "hi"
        )
    assert status == 0
    assert "***" not in out
    assert all(json.loads(line)["type"] for line in out.splitlines())
    assert main(["inspect", str(output)]) == 0
    assert "Hi there" in capsys.readouterr()[0]


async def test_a_recorded_401_reads_back_as_failed_with_the_servers_message(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEY_VAR)  # no key: the server refuses
    output = tmp_path / "401.http"
    async with open_chat_server(ServerOptions(api_key=KEY)) as server:
        status, _, err = await run_main(capsys, *record_args(server.base_url, output, "hi"))
    assert status == 1
    assert err.splitlines()[1:] == [
        "error: HTTP 401: Incorrect API key provided "
        "(no API key was sent: the endpoint has no api_key)",
        f"hint: no API key was sent, because ${KEY_VAR} is unset or empty "
        "(set it, or name another variable with --api-key-env)",
    ]
    assert main(["inspect", str(output)]) == 1
    out, _ = capsys.readouterr()
    assert out.splitlines()[0] == "http: HTTP/1.1 401 Unauthorized"
    assert out.splitlines()[-1] == "status: failed: HTTP 401: Incorrect API key provided"


async def test_record_sends_what_chat_sends(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # One request lifecycle (open_http_response): the same head for both commands.
    async with open_test_server(STREAM) as server:
        await run_main(capsys, *record_args(server.base_url, tmp_path / "o", "hello"))
        argv = ["chat", "--base-url", server.base_url, "--api-key-env", KEY_VAR, "hello"]
        await run_main(capsys, *argv)
    recorded, chatted = server.requests
    assert recorded.target == chatted.target == "/v1/chat/completions"
    assert recorded.headers == chatted.headers
    assert recorded.headers["authorization"] == f"Bearer {KEY}"
    assert recorded.headers["accept-encoding"] == "identity"
    assert recorded.json() == chatted.json()

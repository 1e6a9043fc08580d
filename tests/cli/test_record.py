"""``chunkwise record`` against loopback servers, read back with ``chunkwise inspect``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from chunkwise._cli import main
from chunkwise._cli._common import split_http_head
from chunkwise._cli._record import KeyRedactor
from chunkwise.testing import ScriptedResponse, open_test_server

KEY = "sk-record-SECRET-fedcba9876543210"
KEY_VAR = "CHUNKWISE_TEST_KEY"


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "c1",
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


STREAM = ScriptedResponse.sse(
    [
        chunk({"role": "assistant", "content": "Hi"}),
        chunk({"content": " there"}),
        chunk({}, "stop"),
    ],
    headers={"X-Request-Id": "req_123", "Openai-Processing-Ms": "42"},
    write_sizes=5,
)


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "CHUNKWISE_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(KEY_VAR, KEY)


async def run_main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = await trio.to_thread.run_sync(main, list(argv))
    out, err = capsys.readouterr()
    return status, out, err


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
    assert err.splitlines()[-1] == f"error: HTTP {status_code}: {message}"
    assert KEY.encode() not in data


@pytest.mark.parametrize("where", ["error body", "stream body", "header"])
async def test_a_key_quoted_back_is_redacted_everywhere(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, where: str
) -> None:
    output = tmp_path / "echo.http"
    if where == "error body":
        response = ScriptedResponse.error(401, f"Incorrect API key provided: {KEY}")
    elif where == "stream body":
        # Written 3 bytes at a time, so the key is split across many reads.
        response = ScriptedResponse.sse(
            [chunk({"content": f"your key is {KEY}!"}), chunk({}, "stop")], write_sizes=3
        )
    else:
        response = ScriptedResponse.sse([chunk({}, "stop")], headers={"X-Echo": f"Bearer {KEY}"})
    async with open_test_server(response) as server:
        status, out, err = await run_main(capsys, *record_args(server.base_url, output, "x"))
    data = output.read_bytes()
    assert KEY.encode() not in data
    assert KEY not in out + err
    if where == "error body":
        assert status == 1
        assert b"Incorrect API key provided: ***" in data
        assert "Incorrect API key provided: ***" in err
    elif where == "stream body":
        assert status == 0
        assert b"your key is ***!" in data
    else:
        assert b"X-Echo: Bearer ***\r\n" in data


@pytest.mark.parametrize("key", ["sk-abcdefghijklmn", "a" * 15 + "b", "ab" * 8, "k" * 16])
def test_key_redactor_at_every_split(key: str) -> None:
    text = f"x{key}{key}y{key[:-1]}z{key}".encode()
    expected = text.replace(key.encode(), b"***")
    for split in range(len(text) + 1):
        for second in range(split, len(text) + 1):
            redactor = KeyRedactor(key)
            pieces = (text[:split], text[split:second], text[second:])
            written = b"".join(redactor.feed(p) for p in pieces) + redactor.end()
            assert written == expected, (split, second)


def test_key_redactor_without_key_and_held_start_of_key() -> None:
    assert KeyRedactor(None).feed(b"abc") == b"abc"
    redactor = KeyRedactor("sk-0123456789abcdef")
    assert redactor.feed(b"data sk-0123") == b"data "
    assert redactor.end() == b"***"  # a long start of the key is not written either


@pytest.mark.parametrize("key", ["e", "x", "test", "sk-no-key-requ"])
def test_key_redactor_leaves_bytes_alone_for_a_key_too_short_to_be_a_secret(key: str) -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n"
    body = b'data: {"choices":[{"delta":{"content":"test exceeds x"}}]}\n\n'
    redactor = KeyRedactor(key)
    assert redactor.feed(head) + redactor.feed(body) + redactor.end() == head + body


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


async def test_output_to_stdout(capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    async with open_test_server(STREAM) as server:
        argv = ["record", "--base-url", server.base_url, "-o", "-", "x"]
        status = await trio.to_thread.run_sync(main, argv)
    out, _ = capsysbinary.readouterr()
    assert status == 0
    assert out.startswith(b"HTTP/1.1 200 OK\r\n")
    assert out.endswith(STREAM.body)


async def test_connection_refused_leaves_no_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with trio.socket.socket() as sock:
        await sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    output = tmp_path / "out.http"
    status, _, err = await run_main(
        capsys, *record_args(f"http://127.0.0.1:{port}/v1", output, "x")
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


async def test_ctrl_c_keeps_what_was_recorded(tmp_path: Path) -> None:
    from test_chat import interrupt, slow_words

    output = tmp_path / "out.http"
    async with open_test_server(slow_words()) as server:
        argv = ["record", "--base-url", server.base_url, "--api-key-env", KEY_VAR, "-o", "-", "x"]
        status, out, err = await interrupt(argv, b"word2 ")
        with trio.fail_after(5):
            await server.wait_client_closed()
    assert status == 130, err
    assert out.startswith("HTTP/1.1 200 OK\r\n")
    assert "word2 " in out
    assert "word199" not in out
    assert err.splitlines()[-1] == "status: incomplete (interrupted)"
    del output


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

"""``chunkwise chat`` against loopback servers.

``main()`` is synchronous and runs its own ``trio.run``, so it runs in a worker
thread while the test's trio loop serves the scripted responses.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from chunkwise._cli import main
from chunkwise.testing import RecordedRequest, ResponseWriter, ScriptedResponse, open_test_server

KEY = "sk-test-SECRET-0123456789abcdef"
KEY_VAR = "CHUNKWISE_TEST_KEY"


def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **extra,
    }


USAGE = {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}
TEXT_STREAM = ScriptedResponse.sse(
    [
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "Hello, "}),
        chunk({"content": "wörld ✓"}),
        chunk({}, "stop"),
        {"id": "chatcmpl-1", "model": "m", "choices": [], "usage": USAGE},
    ],
    write_sizes=7,
)

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


async def run_main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = await trio.to_thread.run_sync(main, list(argv))
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "CHUNKWISE_MODEL", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(KEY_VAR, KEY)


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
    call = {"index": 0, "id": "call_1", "type": "function"}
    body = ScriptedResponse.sse(
        [
            chunk({"role": "assistant", "reasoning_content": "Thinking "}),
            chunk({"reasoning_content": "hard."}),
            chunk({"content": "Let me check."}),
            chunk({"tool_calls": [{**call, "function": {"name": "get_weather", "arguments": ""}}]}),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": '}}]}),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]}),
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": 1,
                            "id": "call_2",
                            "function": {"name": "get_weather", "arguments": '{"town": 1}'},
                        }
                    ]
                }
            ),
            chunk({"tool_calls": [{"index": 2, "id": "call_3", "function": {"name": "x"}}]}),
            chunk({"tool_calls": [{"index": 2, "function": {"arguments": "{oops"}}]}),
            chunk({}, "tool_calls"),
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
    assert err.splitlines()[-2:] == ["finish_reason: tool_calls", "status: complete"]


async def test_refusal_and_control_characters(capsys: pytest.CaptureFixture[str]) -> None:
    body = ScriptedResponse.sse(
        [
            chunk({"content": "evil \x1b[31mred\x1b[0m\n"}),
            chunk({"refusal": "I can't."}),
            chunk({}, "stop"),
        ]
    )
    async with open_test_server(body) as server:
        status, out, _ = await run_main(capsys, *chat_args(server.base_url, "x"))
    assert status == 0
    assert "\x1b" not in out
    assert out == "evil \\x1b[31mred\\x1b[0m\n[refusal] I can't.\n"


async def test_several_choices(capsys: pytest.CaptureFixture[str]) -> None:
    def choice(index: int, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"id": "c", "choices": [{"index": index, "delta": delta, "finish_reason": finish}]}

    body = ScriptedResponse.sse(
        [
            choice(0, {"content": "A"}),
            choice(1, {"content": "B"}),
            choice(0, {}, "stop"),
            choice(1, {}, "length"),
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
    assert types[0] == "ResponseStarted"
    assert types[-1] == "StreamCompleted"
    assert types.count("ContentDelta") == 2
    assert "ChoiceFinished" in types
    assert "UsageReported" in types
    assert documents[-1]["result"]["status"] == "complete"
    assert documents[-1]["result"]["choices"][0]["content"] == "Hello, wörld ✓"
    assert KEY not in out


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
    assert err == f"chunkwise chat: error: HTTP {status_code}: {' '.join(message.split())}\n"


async def test_http_error_in_json_mode(capsys: pytest.CaptureFixture[str]) -> None:
    error = ScriptedResponse.error(401, "Incorrect API key provided", code="invalid_api_key")
    async with open_test_server(error) as server:
        status, out, err = await run_main(capsys, *chat_args(server.base_url, "x", "--json"))
    assert status == 1
    [document] = [json.loads(line) for line in out.splitlines()]
    assert document["type"] == "error"
    assert document["error"]["exception"] == "HTTPStatusError"
    assert document["error"]["status_code"] == 401
    assert err == "chunkwise chat: error: HTTP 401: Incorrect API key provided\n"


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


async def test_connection_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with trio.socket.socket() as sock:
        await sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    status, out, err = await run_main(capsys, *chat_args(f"http://127.0.0.1:{port}/v1", "x"))
    assert status == 1
    assert out == ""
    assert err.startswith(f"chunkwise chat: error: cannot connect to 127.0.0.1:{port}")
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
        [chunk({"content": "Par"}), {"error": {"message": "overloaded", "type": "server_error"}}],
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


def slow_words(count: int = 200, delay: float = 0.05) -> ScriptedResponse:
    """``count`` words, one event per write, ``delay`` seconds apart."""
    words = [chunk({"content": f"word{i} "}) for i in range(count)]
    body = ScriptedResponse.sse([*words, chunk({}, "stop")])
    sizes = [len(event) + 2 for event in body.body.split(b"\n\n")[:-1]]
    return ScriptedResponse(body=body.body, write_sizes=sizes, delay=delay)


async def interrupt(argv: list[str], marker: bytes) -> tuple[int, str, str]:
    """Run ``python -m chunkwise *argv``, SIGINT it once ``marker`` is on stdout."""
    env = {**os.environ, KEY_VAR: KEY, "PYTHONUNBUFFERED": "1"}
    env.pop("OPENAI_BASE_URL", None)
    out = bytearray()
    err = bytearray()
    async with trio.open_nursery() as nursery:
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "chunkwise", *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        assert process.stdout is not None

        async def read_stderr() -> None:
            assert process.stderr is not None
            async for data in process.stderr:
                err.extend(data)

        nursery.start_soon(read_stderr)
        with trio.fail_after(20):
            while marker not in out:
                data = await process.stdout.receive_some()
                assert data, bytes(err)
                out.extend(data)
            process.send_signal(signal.SIGINT)
            async for data in process.stdout:
                out.extend(data)
            status = await process.wait()
    return status, out.decode(), err.decode()


@pytest.mark.parametrize("json_mode", [False, True])
async def test_ctrl_c_keeps_partial_output_and_exits_130(json_mode: bool) -> None:
    """SIGINT to a real ``python -m chunkwise chat`` while a slow server streams."""
    async with open_test_server(slow_words()) as server:
        argv = chat_args(server.base_url, "count", *(["--json"] if json_mode else []))
        status, out, err = await interrupt(argv, b"word2 ")
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
        await writer.play(ScriptedResponse.sse([chunk({"content": auth}), chunk({}, "stop")]))

    async with open_test_server(echo_auth) as server:
        status, out, _ = await run_main(capsys, *chat_args(server.base_url, "x", "--json"))
    assert status == 0
    assert KEY not in out
    assert "Bearer ***" in out


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_reasoning_is_dimmed_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    from chunkwise import ChatStreamParser
    from chunkwise._cli._chat import _TextRenderer

    body = ScriptedResponse.sse(
        [
            chunk({"reasoning_content": "Think."}),
            chunk({"content": "Answer."}),
            chunk({}, "stop"),
        ]
    ).body
    out, err = FakeTerminal(), io.StringIO()
    renderer = _TextRenderer(out, err)
    parser = ChatStreamParser()
    for event in [*parser.feed(body), *parser.end()]:
        renderer.event(event)
    assert out.getvalue() == "\x1b[2mThink.\x1b[0m\nAnswer.\n"
    assert err.getvalue() == "finish_reason: stop\nstatus: complete\n"

    monkeypatch.setenv("NO_COLOR", "1")
    out = FakeTerminal()
    renderer = _TextRenderer(out, err)
    parser = ChatStreamParser()
    for event in [*parser.feed(body), *parser.end()]:
        renderer.event(event)
    assert out.getvalue() == "[reasoning] Think.\nAnswer.\n"


async def test_ctrl_c_before_the_response_began() -> None:
    slow_head = ScriptedResponse.sse([chunk({"content": "late"}), chunk({}, "stop")], head_delay=30)
    env = {**os.environ, KEY_VAR: KEY}
    async with open_test_server(slow_head) as server:
        argv = [sys.executable, "-m", "chunkwise", *chat_args(server.base_url, "x")]
        with trio.fail_after(20):
            process = await trio.lowlevel.open_process(
                argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
            )
            await server.wait_requests(1)
            process.send_signal(signal.SIGINT)
            status = await process.wait()
            await server.wait_client_closed()
    assert process.stdout is not None and process.stderr is not None
    out = await process.stdout.receive_some()
    err = (await process.stderr.receive_some()).decode()
    assert status == 130
    assert out == b""
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
    assert "pip install 'chunkwise[jsonschema]'" in err

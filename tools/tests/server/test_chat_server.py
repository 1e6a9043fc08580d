"""``chunkwise serve``: the embedded OpenAI-compatible server, seen from chunkwise,
from raw HTTP, from the command line and from the official ``openai`` SDK."""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing

import chunkwise
from chunkwise._net.http import open_http_response
from chunkwise.testing import LoopbackServer, RecordedRequest
from chunkwise.types import Headers
from chunkwise_tools._convert import completion_document
from chunkwise_tools.cli import build_parser, main
from chunkwise_tools.cli.serve import options_from_args, serve
from chunkwise_tools.server import SCENARIOS, Scenario, ServerOptions, open_chat_server
from chunkwise_tools.server._chat_server import describe_request
from chunkwise_tools.server._options import DEFAULT_PORT
from chunkwise_tools.server._scenarios import (
    scenario_body,
    scenario_chunks,
    scenario_events,
    split_events,
)
from helpers.data import RECORDINGS as RECORDING_PATHS
from helpers.servers import http_exchange

RECORDINGS = {path.name: path.read_bytes() for path in RECORDING_PATHS}
NAMES = list(SCENARIOS)
MESSAGES = [{"role": "user", "content": "hi"}]


def _request(model: str, **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": MESSAGES, **extra}


def _usage_request(model: str, **extra: Any) -> dict[str, Any]:
    return _request(model, stream_options={"include_usage": True}, **extra)


async def _chat_json(server: LoopbackServer, body: Any, **kwargs: Any) -> tuple[int, Any]:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    status, _, data = await http_exchange(server, "POST", "/v1/chat/completions", raw, **kwargs)
    return status, json.loads(data)


def _expected_usage(scenario: Scenario, n: int = 1) -> dict[str, Any]:
    completion = scenario.usage["completion_tokens"] * n
    usage = {"prompt_tokens": 19, "completion_tokens": completion, "total_tokens": 19 + completion}
    usage.update({k: v for k, v in scenario.usage.items() if k != "completion_tokens"})
    return usage


def _check_reconstruction(result: chunkwise.chat.Result, scenario: Scenario, n: int = 1) -> None:
    assert [choice.index for choice in result.choices] == list(range(n))
    for choice in result.choices:
        assert choice.role == "assistant"
        assert choice.content == scenario.text
        assert choice.reasoning == scenario.reasoning_text
        assert [(c.id, c.name, c.arguments) for c in choice.tool_calls] == [
            (c.id, c.name, c.arguments) for c in scenario.tool_calls
        ]
        for call in choice.tool_calls:
            assert call.error is None
            assert call.parse_arguments()["unit"] == "celsius"
    if scenario.error is not None:
        assert result.status == "failed"
        assert result.server_error is not None
        assert result.server_error.message == scenario.error["message"]
        assert result.server_error.type == scenario.error["type"]
        assert not result.done_received
        assert all(choice.finish_reason is None for choice in result.choices)
    else:
        assert result.status == "complete"
        assert result.done_received
        assert all(choice.finish_reason == scenario.finish_reason for choice in result.choices)
        assert result.anomalies == ()


# -- scenarios through chunkwise -------------------------------------------------


@pytest.mark.parametrize("write_size", [None, 5])
@pytest.mark.parametrize("name", NAMES)
async def test_each_scenario_streams_its_reconstruction(name: str, write_size: int | None) -> None:
    scenario = SCENARIOS[name]
    async with open_chat_server(ServerOptions(write_size=write_size)) as server:
        result = await chunkwise.chat.complete(server.endpoint(), _usage_request(name))
    _check_reconstruction(result, scenario)
    assert result.model == name
    assert result.usage == (None if scenario.error is not None else _expected_usage(scenario))


def test_scenario_contents() -> None:
    text = SCENARIOS["text"].text
    assert "é" in text and "日本語" in text and "🎉" in text
    tools = SCENARIOS["tools"].tool_calls
    assert [json.loads(c.arguments)["city"] for c in tools] == ["Paris", "東京"]
    assert all(len(c.fragments) > 1 for c in tools)  # really fragmented
    assert SCENARIOS["reasoning"].reasoning and SCENARIOS["reasoning"].content
    assert SCENARIOS["length"].finish_reason == "length"
    demo = SCENARIOS["demo"]
    assert demo.content and len(demo.tool_calls) == 1 and demo.finish_reason == "tool_calls"


async def test_unknown_model_gets_the_default_scenario() -> None:
    async with open_chat_server(ServerOptions(scenario="length")) as server:
        result = await chunkwise.chat.complete(server.endpoint(), _request("gpt-4o"))
    assert result.model == "gpt-4o"  # echoed, as a server does
    assert result.choice(0).finish_reason == "length"


# -- wire shapes -------------------------------------------------------------------


def _data_lines(body: bytes) -> list[str]:
    text = body.decode().replace("\r\n", "\n")
    return [line.split(":", 1)[1].strip() for line in text.split("\n") if line.startswith("data:")]


def test_include_usage_off_sends_no_usage_at_all() -> None:
    chunks = scenario_chunks(SCENARIOS["text"])
    assert all("usage" not in chunk for chunk in chunks)
    assert all(chunk["choices"] for chunk in chunks)


def test_include_usage_on_ends_with_an_empty_choices_chunk() -> None:
    chunks = scenario_chunks(SCENARIOS["text"], include_usage=True)
    assert all(chunk["usage"] is None for chunk in chunks[:-1])
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"] == _expected_usage(SCENARIOS["text"])
    assert _data_lines(scenario_body(SCENARIOS["text"], include_usage=True))[-1] == "[DONE]"


def test_usage_on_the_last_chunk_quirk() -> None:
    scenario = SCENARIOS["quirks-usage-last-chunk"]
    chunks = scenario_chunks(scenario, include_usage=True)
    assert all(chunk["choices"] for chunk in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["usage"] == _expected_usage(scenario)
    assert all("usage" not in chunk for chunk in scenario_chunks(scenario))


def test_n_choices_are_interleaved() -> None:
    chunks = scenario_chunks(SCENARIOS["text"], n=3)
    indexes = [chunk["choices"][0]["index"] for chunk in chunks]
    assert indexes == [0, 1, 2] * (len(chunks) // 3)


def test_quirk_wire_formats() -> None:
    keepalive = scenario_body(SCENARIOS["quirks-keepalive"])
    assert keepalive.startswith(b": keep-alive\n\n") and keepalive.count(b": keep-alive\n\n") > 2
    nospace = scenario_body(SCENARIOS["quirks-nospace"])
    assert b"data: " not in nospace and nospace.startswith(b"data:{")
    crlf = scenario_body(SCENARIOS["quirks-crlf"])
    assert crlf.count(b"\r\n\r\n") == len(scenario_events(SCENARIOS["text"]))
    assert b"\n\n" not in crlf
    assert b"\n" not in crlf.replace(b"\r\n", b"")
    error = scenario_body(SCENARIOS["error"])
    assert b"[DONE]" not in error and _data_lines(error)[-1].startswith('{"error":')


def _tool_call_deltas(name: str) -> list[list[dict[str, Any]]]:
    return [
        chunk["choices"][0]["delta"]["tool_calls"]
        for chunk in scenario_chunks(SCENARIOS[name])
        if "tool_calls" in chunk["choices"][0]["delta"]
    ]


def test_tool_call_styles() -> None:
    fragmented = _tool_call_deltas("tools")
    assert all(len(delta) == 1 and "index" in delta[0] for delta in fragmented)
    assert len(fragmented) > 4
    whole = _tool_call_deltas("quirks-whole-tools")
    assert len(whole) == 1 and len(whole[0]) == 2
    assert json.loads(whole[0][1]["function"]["arguments"])["city"] == "東京"
    null_index = _tool_call_deltas("quirks-null-index")
    assert all(delta[0].get("index") is None for delta in null_index)
    assert [delta[0].get("id") for delta in null_index if "id" in delta[0]] == [
        "call_chunkwise_paris",
        "call_chunkwise_tokyo",
    ]


async def test_the_server_sends_the_scenario_bytes_exactly() -> None:
    scenario = SCENARIOS["quirks-crlf"]
    async with open_chat_server(ServerOptions(write_size=3)) as server:
        body = json.dumps({**_usage_request("quirks-crlf", n=2), "stream": True}).encode()
        async with open_http_response(server.endpoint(), body) as response:
            assert response.headers["content-type"] == "text/event-stream; charset=utf-8"
            received = b"".join([data async for data in response])
    assert received == scenario_body(scenario, n=2, include_usage=True, model="quirks-crlf")


# scenario_events caches its answers (a paced server sends one answer again and
# again): every argument, and the mappings a scenario's hash leaves out, must
# still tell two answers apart, each called right after the base it differs from.
_WITH_USAGE = attrs.evolve(SCENARIOS["text"], usage={"completion_tokens": 7})
_OTHER_ERROR = attrs.evolve(
    SCENARIOS["error"], error={**(SCENARIOS["error"].error or {}), "message": "another one"}
)


@pytest.mark.parametrize(
    ("base", "changed", "mark"),
    [
        ((SCENARIOS["text"], {}), (SCENARIOS["text"], {"model": "renamed"}), b'"renamed"'),
        ((SCENARIOS["text"], {}), (SCENARIOS["text"], {"n": 2}), b'"index":1'),
        ((SCENARIOS["text"], {}), (SCENARIOS["text"], {"include_usage": True}), b'"usage"'),
        (
            (SCENARIOS["text"], {"include_usage": True}),
            (_WITH_USAGE, {"include_usage": True}),
            b'"completion_tokens":7',
        ),
        ((SCENARIOS["error"], {}), (_OTHER_ERROR, {}), b"another one"),
    ],
    ids=["model", "n", "include_usage", "usage", "error"],
)
def test_cached_scenario_events_tell_every_argument_apart(
    base: tuple[Scenario, dict[str, Any]], changed: tuple[Scenario, dict[str, Any]], mark: bytes
) -> None:
    first = b"".join(scenario_events(base[0], **base[1]))
    second = b"".join(scenario_events(changed[0], **changed[1]))
    assert mark not in first
    assert mark in second


def test_scenario_events_encodes_an_answer_once(monkeypatch: pytest.MonkeyPatch) -> None:
    module = sys.modules[scenario_events.__module__]
    calls: list[str] = []

    def counted(scenario: Scenario, **kwargs: Any) -> list[dict[str, Any]]:
        calls.append(scenario.name)
        return scenario_chunks(scenario, **kwargs)

    monkeypatch.setattr(module, "scenario_chunks", counted)
    # A name no other test uses, so the first call cannot be a hit.
    scenario = attrs.evolve(SCENARIOS["text"], name="encoded-once")
    first = scenario_events(scenario)
    first.append(b"changed by its caller")
    again = scenario_events(attrs.evolve(scenario))  # equal, not the same object
    assert calls == ["encoded-once"]
    assert again == first[:-1]


def test_split_events_keeps_every_byte() -> None:
    body = b"data: a\n\ndata: b\r\n\r\n: c\r\rdata: d"
    assert split_events(body) == [b"data: a\n\n", b"data: b\r\n\r\n", b": c\r\r", b"data: d"]
    assert split_events(b"") == []


# -- request options ------------------------------------------------------------------


@pytest.mark.parametrize("include_usage", [False, True])
async def test_include_usage(include_usage: bool) -> None:
    scenario = SCENARIOS["text"]
    request = _request("text", stream_options={"include_usage": include_usage})
    async with open_chat_server() as server:
        result = await chunkwise.chat.complete(server.endpoint(), request)
    assert result.status == "complete"
    assert result.usage == (_expected_usage(scenario) if include_usage else None)


@pytest.mark.parametrize("name", ["text", "tools", "reasoning", "quirks-null-index"])
async def test_n_2(name: str) -> None:
    scenario = SCENARIOS[name]
    async with open_chat_server() as server:
        result = await chunkwise.chat.complete(server.endpoint(), _usage_request(name, n=2))
    _check_reconstruction(result, scenario, n=2)
    assert result.usage == _expected_usage(scenario, n=2)


@pytest.mark.parametrize("name", ["text", "tools", "reasoning", "length", "quirks-whole-tools"])
async def test_stream_false_answers_a_chat_completion_document(name: str) -> None:
    scenario = SCENARIOS[name]
    async with open_chat_server() as server:
        status, document = await _chat_json(server, _request(name, n=2, stream=False))
    assert status == 200
    assert document["object"] == "chat.completion"
    assert document["model"] == name
    assert document["usage"] == _expected_usage(scenario, n=2)
    assert [choice["index"] for choice in document["choices"]] == [0, 1]
    for choice in document["choices"]:
        message = choice["message"]
        assert choice["finish_reason"] == scenario.finish_reason
        assert message["role"] == "assistant"
        assert message["content"] == (scenario.text or None)
        assert message.get("reasoning_content") == scenario.reasoning_text
        calls = message.get("tool_calls", [])
        assert [(c["id"], c["type"], c["function"]["name"], c["function"]["arguments"])
                for c in calls] == [
            (c.id, "function", c.name, c.arguments) for c in scenario.tool_calls
        ]  # fmt: skip


async def test_stream_false_of_the_error_scenario_is_a_500() -> None:
    async with open_chat_server() as server:
        status, document = await _chat_json(server, _request("error"))
    assert status == 500
    assert document["error"]["type"] == "server_error"


async def test_stream_options_without_stream_is_a_400() -> None:
    async with open_chat_server() as server:
        status, document = await _chat_json(server, _usage_request("text"))
        status_n, document_n = await _chat_json(server, _request("text", n=0, stream=True))
    assert status == 400 and document["error"]["param"] == "stream_options"
    assert status_n == 400 and document_n["error"]["param"] == "n"


def test_request_log_lines() -> None:
    def request(target: str, body: bytes) -> RecordedRequest:
        return RecordedRequest(
            method="POST", target=target, http_version="1.1", headers=Headers(()), body=body
        )

    assert describe_request(request("/v1/x", b"")) == "POST /v1/x"
    assert describe_request(request("/v1/x", b"{")) == "POST /v1/x (malformed JSON body)"
    # The log reads a body as the request checks do: NaN is not JSON.
    nan = b'{"model": "m", "temperature": NaN}'
    assert describe_request(request("/v1/x", nan)) == "POST /v1/x (malformed JSON body)"
    assert describe_request(request("/v1/x", b'{"model": "m"}')) == (
        "POST /v1/x model='m' stream=False"
    )


def test_completion_document_of_an_empty_result() -> None:
    document = completion_document(chunkwise.chat.Result())
    assert document["choices"] == [] and document["usage"] is None


# -- routes and errors -----------------------------------------------------------------


async def test_models_lists_the_scenarios() -> None:
    async with open_chat_server() as server:
        status, headers, body = await http_exchange(server, "GET", "/v1/models")
        one = await http_exchange(server, "GET", "/v1/models/tools")
        missing = await http_exchange(server, "GET", "/v1/models/nope")
    assert status == 200 and headers["content-type"] == "application/json"
    document = json.loads(body)
    assert document["object"] == "list"
    assert [model["id"] for model in document["data"]] == NAMES
    assert all(model["object"] == "model" for model in document["data"])
    assert one[0] == 200 and json.loads(one[2])["id"] == "tools"
    assert missing[0] == 404 and json.loads(missing[2])["error"]["code"] == "model_not_found"


async def test_unknown_path_is_404_and_wrong_method_is_405() -> None:
    async with open_chat_server() as server:
        status, _, body = await http_exchange(server, "POST", "/v1/embeddings", b"{}")
        status_get, headers, body_get = await http_exchange(server, "GET", "/v1/chat/completions")
        status_post, _, _ = await http_exchange(server, "POST", "/v1/models", b"{}")
    assert status == 404 and "message" in json.loads(body)["error"]
    assert status_get == 405 and headers["allow"] == "POST"
    assert json.loads(body_get)["error"]["type"] == "invalid_request_error"
    assert status_post == 405


@pytest.mark.parametrize("body", [b"{bad", b"", b"[1, 2]"])
async def test_malformed_json_is_a_400(body: bytes) -> None:
    async with open_chat_server() as server:
        status, document = await _chat_json(server, body)
    assert status == 400
    assert document["error"]["type"] == "invalid_request_error"
    assert document["error"]["message"]


async def test_malformed_json_message_is_openais() -> None:
    async with open_chat_server() as server:
        status, document = await _chat_json(server, b'{"model": "text", "messages": [')
    assert status == 400
    assert "could not parse the JSON body" in document["error"]["message"]


async def test_api_key() -> None:
    options = ServerOptions(api_key="sk-right")
    async with open_chat_server(options) as server:
        for key in (None, "sk-wrong"):
            with pytest.raises(chunkwise.HTTPStatusError) as info:
                await chunkwise.chat.complete(server.endpoint(api_key=key), _request("text"))
            error = info.value
            assert error.status_code == 401
            assert error.error is not None
            assert error.error.message == "Incorrect API key provided"
            assert error.error.type == "invalid_request_error"
            assert error.error.code == "invalid_api_key"
        status, _, _ = await http_exchange(server, "GET", "/v1/models")
        assert status == 401
        result = await chunkwise.chat.complete(
            server.endpoint(api_key="sk-right"), _request("text")
        )
    assert result.status == "complete"
    assert "sk-right" not in repr(options)


@pytest.mark.parametrize(("status", "retry_after"), [(429, 1.0), (500, None), (503, 1.0)])
async def test_status_option(status: int, retry_after: float | None) -> None:
    async with open_chat_server(ServerOptions(status=status)) as server:
        with pytest.raises(chunkwise.HTTPStatusError) as info:
            await chunkwise.chat.complete(server.endpoint(), _request("text"))
        models, _, _ = await http_exchange(server, "GET", "/v1/models")
    error = info.value
    assert error.status_code == status
    assert error.retry_after == retry_after
    assert error.error is not None and error.error.message
    assert error.request_id is not None and error.request_id.startswith("req_chunkwise_")
    if status == 429:
        assert error.error.code == "rate_limit_exceeded"
    assert models == 200  # only chat requests get the error status


@pytest.mark.parametrize("cut", [0, 1, 700, 1530])
async def test_disconnect_after_is_incomplete(cut: int) -> None:
    options = ServerOptions(disconnect_after=cut, write_size=64)
    async with open_chat_server(options) as server:
        result = await chunkwise.chat.complete(server.endpoint(), _request("text"))
        assert server.connections[0].requests  # the request did arrive
    assert result.status == "incomplete"
    assert result.reason in (
        chunkwise.IncompleteReason.CONNECTION_LOST,
        chunkwise.IncompleteReason.EMPTY_STREAM,
    )
    assert SCENARIOS["text"].text.startswith(result.content)
    if cut >= 700:
        assert result.reason == chunkwise.IncompleteReason.CONNECTION_LOST
        assert result.content


async def test_disconnect_after_the_whole_body_still_hangs_up() -> None:
    size = len(scenario_body(SCENARIOS["length"], model="length"))
    async with open_chat_server(ServerOptions(disconnect_after=size + 10)) as server:
        result = await chunkwise.chat.complete(server.endpoint(), _request("length"))
    # Every event arrived, so the stream is complete although the body never ended.
    assert result.status == "complete" and result.done_received


async def test_delay_between_events(autojump_clock: trio.testing.MockClock) -> None:
    events = scenario_events(SCENARIOS["text"])
    async with open_chat_server(ServerOptions(delay=0.5)) as server:
        start = trio.current_time()
        result = await chunkwise.chat.complete(server.endpoint(), _request("text"))
        elapsed = trio.current_time() - start
    assert result.status == "complete"
    assert elapsed == pytest.approx(0.5 * (len(events) - 1))


# -- replay -----------------------------------------------------------------------


def _parse(body: bytes) -> chunkwise.chat.Result:
    parser = chunkwise.chat.Parser()
    parser.feed(body)
    parser.end()
    return parser.result


def _comparable(result: chunkwise.chat.Result) -> chunkwise.chat.Result:
    return attrs.evolve(result, anomalies=())


@pytest.mark.parametrize("name", RECORDINGS)
async def test_replay_gives_the_same_result_as_parsing_the_file(name: str) -> None:
    body = RECORDINGS[name]
    async with open_chat_server(ServerOptions(replay=body, write_size=97)) as server:
        result = await chunkwise.chat.complete(server.endpoint(), _request("text", n=5))
    assert result == _parse(body)


async def test_replay_answers_stream_false_too() -> None:
    body = RECORDINGS["f82268f2fefd.sse"]
    async with open_chat_server(ServerOptions(replay=body)) as server:
        status, document = await _chat_json(server, _request("whatever"))
    assert status == 200
    expected = _parse(body)
    assert document["id"] == expected.id
    calls = document["choices"][0]["message"]["tool_calls"]
    assert [c["function"]["arguments"] for c in calls] == [
        c.arguments for c in expected.choice(0).tool_calls
    ]


# -- the command line -----------------------------------------------------------------


def _serve_args(*argv: str) -> Any:
    return build_parser().parse_args(["serve", *argv])


def test_serve_defaults() -> None:
    args = _serve_args()
    assert (args.host, args.port) == ("127.0.0.1", DEFAULT_PORT)
    assert options_from_args(args) == ServerOptions()


def test_serve_arguments(tmp_path: Path) -> None:
    recording = tmp_path / "recorded.http"
    recording.write_bytes(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: x\n\n")
    args = _serve_args(
        "--host", "::1", "--port", "0", "--scenario", "tools", "--replay", str(recording),
        "--write-size", "3", "--delay", "0.25", "--disconnect-after", "100",
        "--status", "429", "--api-key", "k",
    )  # fmt: skip
    assert (args.host, args.port) == ("::1", 0)
    assert options_from_args(args) == ServerOptions(
        scenario="tools",
        replay=b"data: x\n\n",
        write_size=3,
        delay=0.25,
        disconnect_after=100,
        status=429,
        api_key="k",
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["--port", "70000"],
        ["--port", "x"],
        ["--scenario", "nope"],
        ["--write-size", "0"],
        ["--delay", "-1"],
        ["--delay", "nan"],
        ["--disconnect-after", "-1"],
        ["--status", "200"],
    ],
)
def test_serve_rejects_bad_arguments(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", *argv]) == 2
    assert "error:" in capsys.readouterr().err


def test_serve_unreadable_replay_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--replay", "/nonexistent/file.sse"]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_server_options_validation() -> None:
    with pytest.raises(ValueError, match="unknown scenario"):
        ServerOptions(scenario="nope")
    with pytest.raises(ValueError, match="status"):
        ServerOptions(status=302)
    with pytest.raises(ValueError, match="write_size"):
        ServerOptions(write_size=0)
    with pytest.raises(ValueError, match="delay"):
        ServerOptions(delay=float("nan"))


async def _start_serve(nursery: trio.Nursery) -> LoopbackServer:
    """``chunkwise serve``'s server with default options, on a free port."""
    server: LoopbackServer = await nursery.start(
        functools.partial(serve, ServerOptions(), host="127.0.0.1", port=0)
    )
    return server


async def test_serve_announces_its_base_url_and_logs_each_request(
    capsys: pytest.CaptureFixture[str],
) -> None:
    async with trio.open_nursery() as nursery:
        server = await _start_serve(nursery)
        result = await chunkwise.chat.complete(server.endpoint(), _request("reasoning"))
        nursery.cancel_scope.cancel()
    out = capsys.readouterr().out
    assert out.startswith(f"serving on http://127.0.0.1:{server.port}/v1\n")
    assert out.endswith("POST /v1/chat/completions model='reasoning' stream=True\n")
    assert result.choice(0).reasoning == SCENARIOS["reasoning"].reasoning_text


async def test_serve_keeps_no_history_of_the_requests_it_answers(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # A load test sends it millions: kept, they grew its memory and its GC pauses.
    async with trio.open_nursery() as nursery:
        server = await _start_serve(nursery)
        for _ in range(3):
            await chunkwise.chat.complete(server.endpoint(), _request("text"))
        nursery.cancel_scope.cancel()
    assert not server.record
    assert server.requests == [] and server.connections == []
    assert capsys.readouterr().out.count("POST /v1/chat/completions") == 3


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT delivery differs on Windows")
def test_serve_process_prints_its_url_and_exits_130_on_ctrl_c() -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "chunkwise", "serve", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline().decode()
        assert line.startswith("serving on http://127.0.0.1:") and line.endswith("/v1\n")
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 130
    assert err == b""  # quietly: no traceback


# -- the official openai SDK ---------------------------------------------------------


def _sdk_client(server: LoopbackServer, api_key: str = "k") -> Any:
    openai = pytest.importorskip("openai")
    return openai.OpenAI(base_url=server.base_url, api_key=api_key, max_retries=0, timeout=10)


async def test_openai_sdk_streams_text() -> None:
    async with open_chat_server(ServerOptions(write_size=7)) as server:
        client = _sdk_client(server)

        def run() -> tuple[str, list[str], Any]:
            with client:
                stream = client.chat.completions.create(
                    model="text",
                    messages=MESSAGES,
                    stream=True,
                    stream_options={"include_usage": True},
                )
                pieces, finishes, usage = [], [], None
                for chunk in stream:
                    if chunk.usage is not None:
                        usage = chunk.usage
                    for choice in chunk.choices:
                        if choice.delta.content:
                            pieces.append(choice.delta.content)
                        if choice.finish_reason:
                            finishes.append(choice.finish_reason)
                return "".join(pieces), finishes, usage

        text, finishes, usage = await trio.to_thread.run_sync(run)
    assert text == SCENARIOS["text"].text
    assert finishes == ["stop"]
    assert usage.total_tokens == _expected_usage(SCENARIOS["text"])["total_tokens"]


@pytest.mark.parametrize("name", ["tools", "quirks-whole-tools"])
async def test_openai_sdk_streams_tool_calls(name: str) -> None:
    async with open_chat_server() as server:
        client = _sdk_client(server)

        def run() -> tuple[dict[int, dict[str, str]], list[str]]:
            calls: dict[int, dict[str, str]] = {}
            finishes: list[str] = []
            with client:
                for chunk in client.chat.completions.create(
                    model=name, messages=MESSAGES, stream=True
                ):
                    for choice in chunk.choices:
                        for delta in choice.delta.tool_calls or ():
                            call = calls.setdefault(delta.index, {"args": ""})
                            if delta.id:
                                call["id"] = delta.id
                            if delta.function and delta.function.name:
                                call["name"] = delta.function.name
                            if delta.function and delta.function.arguments:
                                call["args"] += delta.function.arguments
                        if choice.finish_reason:
                            finishes.append(choice.finish_reason)
            return calls, finishes

        calls, finishes = await trio.to_thread.run_sync(run)
    assert finishes == ["tool_calls"]
    assert [(c["id"], c["name"], c["args"]) for _, c in sorted(calls.items())] == [
        (c.id, c.name, c.arguments) for c in SCENARIOS[name].tool_calls
    ]


async def test_openai_sdk_non_streaming_and_errors() -> None:
    openai = pytest.importorskip("openai")
    async with open_chat_server(ServerOptions(api_key="right")) as server:
        client = _sdk_client(server, api_key="right")
        wrong = _sdk_client(server, api_key="wrong")

        def run() -> tuple[Any, Any, list[str]]:
            with client, wrong:
                completion = client.chat.completions.create(model="tools", messages=MESSAGES)
                models = [model.id for model in client.models.list()]
                try:
                    wrong.chat.completions.create(model="text", messages=MESSAGES)
                except openai.AuthenticationError as exc:
                    return completion, exc, models
            raise AssertionError("no AuthenticationError")

        completion, error, models = await trio.to_thread.run_sync(run)
    assert models == NAMES
    message = completion.choices[0].message
    assert completion.choices[0].finish_reason == "tool_calls"
    assert [call.function.arguments for call in message.tool_calls] == [
        call.arguments for call in SCENARIOS["tools"].tool_calls
    ]
    assert error.status_code == 401
    assert "Incorrect API key provided" in str(error)


async def test_tool_results_are_answered_with_text_not_the_same_tools() -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "weather?"}]
    async with open_chat_server() as server:
        first = await chunkwise.chat.complete(
            server.endpoint(), {"model": "tools", "messages": messages}
        )
        calls = first.choice(0).tool_calls
        assert calls
        messages.append(completion_document(first)["choices"][0]["message"])
        messages += [{"role": "tool", "tool_call_id": c.id, "content": "sunny"} for c in calls]
        second = await chunkwise.chat.complete(
            server.endpoint(), {"model": "tools", "messages": messages}
        )
    assert second.status == "complete"
    assert second.choice(0).tool_calls == ()
    assert second.content


def test_serve_reads_the_api_key_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SERVE_KEY", "sk-from-env")
    args = _serve_args("--api-key-env", "SERVE_KEY")
    assert options_from_args(args).api_key == "sk-from-env"


@pytest.mark.parametrize(
    "argv",
    [["--api-key-env", "NO_SUCH_VARIABLE"], ["--api-key", "k", "--api-key-env", "SERVE_KEY"]],
)
def test_serve_api_key_env_errors_are_usage_errors(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SERVE_KEY", "sk-from-env")
    monkeypatch.delenv("NO_SUCH_VARIABLE", raising=False)
    assert main(["serve", *argv, "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("chunkwise serve: error:")
    assert "sk-from-env" not in err

"""``POST /v1/responses`` on the embedded server: every Responses scenario and style, parsed
by chunkwise at every split, through the real client, non-streamed, refused, and read by the
official ``openai`` SDK as an oracle."""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest
import trio

import chunkwise
from chunkwise.testing import LoopbackServer
from chunkwise_tools.cli import build_parser
from chunkwise_tools.cli.serve import options_from_args
from chunkwise_tools.server import (
    RESPONSE_SCENARIOS,
    SCENARIOS,
    ResponseScenario,
    ServerOptions,
    open_chat_server,
)
from chunkwise_tools.server._response_wire import (
    response_scenario_body,
    response_scenario_document,
    response_scenario_events,
    response_scenario_payloads,
)
from helpers.reads import byte_reads, pieces_of
from helpers.servers import http_exchange

NAMES = list(RESPONSE_SCENARIOS)


def _request(model: str, **extra: Any) -> dict[str, Any]:
    return {"model": model, "input": "hi", **extra}


def _parse(reads: list[bytes], max_output_tokens: int | None = None) -> chunkwise.responses.Result:
    parser = chunkwise.responses.Parser(max_output_tokens=max_output_tokens)
    for read in reads:
        parser.feed(read)
    parser.end()
    return parser.result


def _expected_usage(scenario: ResponseScenario, output_tokens: int) -> dict[str, Any]:
    usage: dict[str, Any] = {
        "input_tokens": 19,
        "output_tokens": output_tokens,
        "total_tokens": 19 + output_tokens,
    }
    if not scenario.llama_cpp:
        usage["input_tokens_details"] = {"cached_tokens": 0, "cache_write_tokens": 0}
        usage["output_tokens_details"] = {"reasoning_tokens": scenario.reasoning_tokens}
    return usage


def _check(
    result: chunkwise.responses.Result,
    scenario: ResponseScenario,
    *,
    max_output_tokens: int | None = None,
    model: str | None = None,
) -> None:
    """``result`` is what ``scenario`` says, field by field."""
    assert result.id == f"resp_chunkwise_{scenario.name}"
    assert result.output_text == scenario.text
    assert result.reasoning == scenario.reasoning_text
    assert [(c.call_id, c.name, c.parse_arguments(), c.error) for c in result.function_calls] == [
        (scenario.call_id(c), c.name, json.loads(c.arguments), None) for c in scenario.tool_calls
    ]
    assert all(call.finished for call in result.function_calls)
    cut = scenario.outcome == "max_output_tokens"
    output_tokens = (
        max_output_tokens if cut and max_output_tokens is not None else scenario.output_tokens
    )
    anomalies: list[str] = []
    if scenario.outcome == "error":
        assert result.status == "failed"
        error = result.server_error
        assert error is not None and scenario.error is not None
        assert error.message == scenario.error["message"]
        assert result.usage is None
        # llama.cpp's bare frame ends the stream: no terminal event, no final status.
        assert result.response_status == ("in_progress" if scenario.llama_cpp else "failed")
    elif cut and not scenario.llama_cpp:
        assert result.status == "incomplete"
        assert result.response_status == "incomplete"
        assert result.incomplete_reason == "max_output_tokens"
        assert result.reason == chunkwise.IncompleteReason.SERVER_REPORTED
        assert [item.status for item in result.output] == ["incomplete"]
    else:
        assert result.status == "complete"
        assert result.response_status == "completed"
        assert result.incomplete_reason is None
        assert result.error is None
    if scenario.outcome != "error":
        assert result.model == (model or scenario.name)
        assert result.usage == _expected_usage(scenario, output_tokens)
        limit = max_output_tokens
        if limit is not None and output_tokens >= limit and result.status == "complete":
            anomalies.append("max_output_tokens reached")  # llama.cpp's cut, noticed
    assert [a.kind for a in result.anomalies] == anomalies
    assert all(item.done for item in result.output) or scenario.outcome == "error"


# -- the scenarios, parsed at every split ---------------------------------------------


@pytest.mark.parametrize("split", ["whole", "events", "bytes", "7"])
@pytest.mark.parametrize("name", NAMES)
def test_each_scenario_parses_at_every_split(name: str, split: str) -> None:
    scenario = RESPONSE_SCENARIOS[name]
    body = response_scenario_body(scenario)
    reads = {
        "whole": [body],
        "events": response_scenario_events(scenario),
        "bytes": byte_reads(body),
        "7": pieces_of(body, 7),
    }[split]
    _check(_parse(reads), scenario)


@pytest.mark.parametrize("name", ["length", "quirks-llamacpp-length"])
@pytest.mark.parametrize("limit", [16, 40])
def test_max_output_tokens_is_reported_as_the_output_tokens_of_a_cut(name: str, limit: int) -> None:
    scenario = RESPONSE_SCENARIOS[name]
    body = response_scenario_body(scenario, max_output_tokens=limit)
    result = _parse(byte_reads(body), max_output_tokens=limit)
    _check(result, scenario, max_output_tokens=limit)
    if scenario.llama_cpp:
        # Reported completed: only the anomaly tells the answer may have been cut.
        assert result.status == "complete"
        assert [a.kind for a in result.anomalies] == ["max_output_tokens reached"]


def test_scenarios_say_what_the_chat_scenarios_say() -> None:
    for name in ("text", "tools", "reasoning", "length", "error", "demo"):
        chat, responses = SCENARIOS[name], RESPONSE_SCENARIOS[name]
        assert responses.text == chat.text
        assert responses.reasoning_text == chat.reasoning_text
        assert responses.tool_calls == chat.tool_calls
    text = RESPONSE_SCENARIOS["text"].text
    assert "é" in text and "日本語" in text and "🎉" in text


# -- wire shapes ------------------------------------------------------------------------


def _types(payloads: list[dict[str, Any]]) -> list[str | None]:
    return [p.get("type") for p in payloads]


def test_openai_events_are_numbered_and_indexed() -> None:
    for name in ("text", "tools", "reasoning", "length", "error", "quirks-keepalive"):
        payloads = response_scenario_payloads(RESPONSE_SCENARIOS[name])
        assert [p["sequence_number"] for p in payloads] == list(range(len(payloads)))
        for payload in payloads:
            if "item_id" in payload or payload["type"].startswith("response.output_item"):
                assert isinstance(payload["output_index"], int), payload
        created = next(p for p in payloads if p["type"] == "response.created")
        assert created["response"]["tools"] == []  # the whole response object


def test_the_text_scenario_has_the_documented_event_sequence() -> None:
    types = _types(response_scenario_payloads(RESPONSE_SCENARIOS["text"]))
    pieces = len(RESPONSE_SCENARIOS["text"].content)
    assert types == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        *["response.output_text.delta"] * pieces,
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    document = response_scenario_document(RESPONSE_SCENARIOS["text"])
    assert document is not None and document["status"] == "completed"
    assert document["output"][0]["content"][0]["text"] == RESPONSE_SCENARIOS["text"].text


def test_parallel_calls_interleave_their_argument_deltas() -> None:
    payloads = response_scenario_payloads(RESPONSE_SCENARIOS["tools"])
    deltas = [p for p in payloads if p["type"] == "response.function_call_arguments.delta"]
    indices = [p["output_index"] for p in deltas]
    assert indices[:4] == [0, 1, 0, 1]
    dones = [p for p in payloads if p["type"] == "response.function_call_arguments.done"]
    assert [p["arguments"] for p in dones] == [
        c.arguments for c in RESPONSE_SCENARIOS["tools"].tool_calls
    ]


def test_the_mixed_scenario_reasons_calls_in_parallel_then_answers() -> None:
    """One answer as OpenAI orders it: reasoning (0), two interleaved calls (1, 2), message (3)."""
    scenario = RESPONSE_SCENARIOS["mixed"]
    payloads = response_scenario_payloads(scenario)
    added = [p["item"]["type"] for p in payloads if p["type"] == "response.output_item.added"]
    assert added == ["reasoning", "function_call", "function_call", "message"]
    indexed = [p for p in payloads if "output_index" in p]
    # Each item's events carry its index; items start in order, calls overlap.
    firsts = [next(i for i, p in enumerate(indexed) if p["output_index"] == n) for n in range(4)]
    lasts = [max(i for i, p in enumerate(indexed) if p["output_index"] == n) for n in range(4)]
    assert firsts == sorted(firsts) and lasts[0] < firsts[1] and lasts[2] < firsts[3]
    deltas = [p for p in payloads if p["type"] == "response.function_call_arguments.delta"]
    assert [p["output_index"] for p in deltas[:4]] == [1, 2, 1, 2]
    assert firsts[2] < lasts[1]  # the second call starts before the first ends
    text = [p["delta"] for p in payloads if p["type"] == "response.output_text.delta"]
    assert "".join(text) == scenario.text
    assert any(piece.endswith("\N{WOMAN}") for piece in text)  # a ZWJ sequence split
    payload = json.loads(scenario.text.split("As JSON: ", 1)[1])
    assert payload["paris"]["note"] == 'a "mild" day'
    assert payload["東京"]["path"] == "C:\\天気\\晴れ" and payload["東京"]["lines"] == "a\nb"
    document = response_scenario_document(scenario)
    assert document is not None
    assert [item["type"] for item in document["output"]] == added


def test_reasoning_is_a_summary() -> None:
    types = _types(response_scenario_payloads(RESPONSE_SCENARIOS["reasoning"]))
    assert "response.reasoning_summary_part.added" in types
    assert "response.reasoning_summary_text.done" in types
    assert "response.reasoning_text.delta" not in types


def test_length_ends_incomplete_with_the_partial_output() -> None:
    document = response_scenario_document(RESPONSE_SCENARIOS["length"], max_output_tokens=16)
    assert document is not None
    assert document["status"] == "incomplete"
    assert document["incomplete_details"] == {"reason": "max_output_tokens"}
    assert document["max_output_tokens"] == 16
    assert document["output"][0]["status"] == "incomplete"
    assert document["output"][0]["content"][0]["text"] == RESPONSE_SCENARIOS["length"].text
    assert document["usage"]["output_tokens"] == 16


@pytest.mark.parametrize(("name", "shape"), [("error", "nested"), ("quirks-flat-error", "flat")])
def test_error_events_then_failed(name: str, shape: str) -> None:
    payloads = response_scenario_payloads(RESPONSE_SCENARIOS[name])
    error, failed = payloads[-2:]
    assert error["type"] == "error"
    if shape == "nested":
        assert error["error"]["type"] == "server_error" and "message" not in error
    else:
        assert "error" not in error and error["message"] and error["code"] == "server_error"
    assert failed["type"] == "response.failed"
    assert failed["response"]["status"] == "failed"
    assert failed["response"]["error"]["message"] == SCENARIOS["error"].error["message"]  # type: ignore[index]
    assert failed["response"]["usage"] is None


def test_keepalives_are_numbered_events() -> None:
    payloads = response_scenario_payloads(RESPONSE_SCENARIOS["quirks-keepalive"])
    keepalives = [p for p in payloads if p["type"] == "keepalive"]
    assert keepalives and all(set(p) == {"type", "sequence_number"} for p in keepalives)
    assert payloads[0]["type"] == "keepalive"


def test_llama_cpp_shapes() -> None:
    for name in NAMES:
        scenario = RESPONSE_SCENARIOS[name]
        if not scenario.llama_cpp:
            continue
        payloads = response_scenario_payloads(scenario)
        for payload in payloads:
            assert not {"sequence_number", "output_index", "content_index"} & set(payload)
        assert payloads[0]["response"] == {
            "id": f"resp_chunkwise_{name}",
            "object": "response",
            "status": "in_progress",
        }
        types = _types(payloads)
        assert "response.function_call_arguments.done" not in types
    tools = response_scenario_payloads(RESPONSE_SCENARIOS["quirks-llamacpp-tools"])
    added = [p["item"] for p in tools if p["type"] == "response.output_item.added"]
    # As llama-server writes them (tests/data/llama_cpp/responses_tool.sse).
    assert [(item["id"], item["call_id"]) for item in added] == [
        ("fc_chunkwise_paris", "call_chunkwise_paris"),
        ("fc_chunkwise_tokyo", "call_chunkwise_tokyo"),
    ]
    deltas = [p for p in tools if p["type"] == "response.function_call_arguments.delta"]
    assert {p["item_id"] for p in deltas} == {item["id"] for item in added}
    assert not any("output_index" in p for p in deltas)
    error = response_scenario_events(RESPONSE_SCENARIOS["quirks-llamacpp-error"])[-1]
    assert error.startswith(b'data: {"error":{"code":500,')  # no event line, no type
    assert response_scenario_document(RESPONSE_SCENARIOS["quirks-llamacpp-error"]) is None


def test_sse_framing() -> None:
    for event in response_scenario_events(RESPONSE_SCENARIOS["text"]):
        head, data = event.decode().removesuffix("\n\n").split("\n")
        payload = json.loads(data.removeprefix("data: "))
        assert head == f"event: {payload['type']}"


def test_model_is_echoed() -> None:
    document = response_scenario_document(RESPONSE_SCENARIOS["text"], model="gpt-4.1")
    assert document is not None and document["model"] == "gpt-4.1"


# -- llama.cpp's calls, which have no id of their own -------------------------------------


def test_calls_without_an_id_are_found_by_their_call_id() -> None:
    # A function_call item without an id of its own, whose argument deltas name
    # its call_id as their item_id (llama.cpp's server-task.cpp writes this in
    # some versions; the llama-server captured in tests/data/llama_cpp gives ids).
    body = (
        b'event: response.output_item.added\ndata: {"type":"response.output_item.added",'
        b'"item":{"arguments":"","call_id":"fc_1","name":"f","type":"function_call",'
        b'"status":"in_progress"}}\n\n'
        b'event: response.function_call_arguments.delta\ndata: {"type":'
        b'"response.function_call_arguments.delta","delta":"{}","item_id":"fc_1"}\n\n'
        b'event: response.completed\ndata: {"type":"response.completed","response":'
        b'{"id":"r","object":"response","status":"completed","output":[]}}\n\n'
    )
    result = _parse([body])
    assert [(c.call_id, c.name, c.arguments) for c in result.function_calls] == [
        ("fc_1", "f", "{}")
    ]
    assert result.anomalies == ()


# -- through the real client ------------------------------------------------------------


@pytest.mark.parametrize("write_size", [None, 5])
@pytest.mark.parametrize("name", NAMES)
async def test_each_scenario_through_the_client(name: str, write_size: int | None) -> None:
    scenario = RESPONSE_SCENARIOS[name]
    async with open_chat_server(ServerOptions(write_size=write_size)) as server:
        result = await chunkwise.responses.complete(server.endpoint(), _request(name))
        [request] = server.requests
    assert request.target == "/v1/responses"
    assert request.json()["stream"] is True
    _check(result, scenario)


async def test_open_response_stream_and_max_output_tokens() -> None:
    async with open_chat_server() as server:
        request = _request("quirks-llamacpp-length", max_output_tokens=16)
        async with chunkwise.responses.open_stream(server.endpoint(), request) as stream:
            result = await stream.result()
    _check(result, RESPONSE_SCENARIOS["quirks-llamacpp-length"], max_output_tokens=16)
    assert [a.kind for a in result.anomalies] == ["max_output_tokens reached"]


async def test_unknown_model_gets_the_default_scenario() -> None:
    async with open_chat_server(ServerOptions(scenario="length")) as server:
        cut = await chunkwise.responses.complete(server.endpoint(), _request("gpt-4.1"))
    async with open_chat_server(ServerOptions(scenario="quirks-crlf")) as server:
        text = await chunkwise.responses.complete(server.endpoint(), _request("gpt-4.1"))
    options = ServerOptions(scenario="tools", response_scenario="quirks-llamacpp")
    async with open_chat_server(options) as server:
        llama = await chunkwise.responses.complete(server.endpoint(), _request("gpt-4.1"))
    assert cut.model == "gpt-4.1" and cut.incomplete_reason == "max_output_tokens"
    assert text.status == "complete" and text.output_text == RESPONSE_SCENARIOS["text"].text
    assert llama.id == "resp_chunkwise_quirks-llamacpp"


async def test_function_call_output_is_answered_with_text() -> None:
    async with open_chat_server() as server:
        first = await chunkwise.responses.complete(server.endpoint(), _request("tools"))
        calls = [
            {"type": "function_call", "call_id": c.call_id, "name": c.name, "arguments": "{}"}
            for c in first.function_calls
        ]
        outputs = [
            {"type": "function_call_output", "call_id": c.call_id, "output": "sunny"}
            for c in first.function_calls
        ]
        question = {"role": "user", "content": "weather?"}
        second = await chunkwise.responses.complete(
            server.endpoint(), {"model": "tools", "input": [question, *calls, *outputs]}
        )
    assert len(first.function_calls) == 2
    assert second.status == "complete" and second.function_calls == ()
    assert second.output_text


@pytest.mark.parametrize("cut", [0, 1, 900, 2500])
async def test_disconnect_after_is_incomplete(cut: int) -> None:
    options = ServerOptions(disconnect_after=cut, write_size=64)
    async with open_chat_server(options) as server:
        result = await chunkwise.responses.complete(server.endpoint(), _request("text"))
    assert result.status == "incomplete"
    assert result.reason in (
        chunkwise.IncompleteReason.CONNECTION_LOST,
        chunkwise.IncompleteReason.EMPTY_STREAM,
    )
    assert RESPONSE_SCENARIOS["text"].text.startswith(result.output_text)
    if cut >= 2500:
        assert result.output_text


async def test_delay_paces_events(autojump_clock: trio.testing.MockClock) -> None:
    events = response_scenario_events(RESPONSE_SCENARIOS["text"])
    async with open_chat_server(ServerOptions(delay=0.5)) as server:
        start = trio.current_time()
        result = await chunkwise.responses.complete(server.endpoint(), _request("text"))
        elapsed = trio.current_time() - start
    assert result.status == "complete"
    assert elapsed == pytest.approx(0.5 * (len(events) - 1))


async def test_status_option_and_api_key() -> None:
    async with open_chat_server(ServerOptions(status=429)) as server:
        with pytest.raises(chunkwise.HTTPStatusError) as info:
            await chunkwise.responses.complete(server.endpoint(), _request("text"))
    assert info.value.status_code == 429 and info.value.retry_after == 1.0
    async with open_chat_server(ServerOptions(api_key="sk-right")) as server:
        with pytest.raises(chunkwise.HTTPStatusError) as info:
            await chunkwise.responses.complete(server.endpoint(api_key="no"), _request("text"))
        result = await chunkwise.responses.complete(
            server.endpoint(api_key="sk-right"), _request("text")
        )
    assert info.value.status_code == 401
    assert info.value.error is not None and info.value.error.code == "invalid_api_key"
    assert result.status == "complete"


async def test_replay_of_a_responses_body() -> None:
    body = response_scenario_body(RESPONSE_SCENARIOS["reasoning"])
    async with open_chat_server(ServerOptions(replay=body, write_size=97)) as server:
        result = await chunkwise.responses.complete(server.endpoint(), _request("text"))
        status, document = await _responses_json(server, _request("text"))
    assert result == _parse([body])
    assert status == 200 and document == response_scenario_document(RESPONSE_SCENARIOS["reasoning"])


# -- not streamed, and refused -------------------------------------------------------------


async def _http(server: LoopbackServer, body: bytes) -> tuple[int, dict[str, str], bytes]:
    """One raw ``POST /v1/responses``: (status, lower-cased headers, body)."""
    return await http_exchange(server, "POST", "/v1/responses", body)


async def _responses_json(server: LoopbackServer, body: Any) -> tuple[int, Any]:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    status, _, data = await _http(server, raw)
    return status, json.loads(data)


@pytest.mark.parametrize("name", ["text", "tools", "reasoning", "length", "quirks-llamacpp"])
async def test_stream_false_answers_the_terminal_response(name: str) -> None:
    async with open_chat_server() as server:
        status, headers, data = await _http(server, json.dumps(_request(name)).encode())
    assert status == 200 and headers["content-type"] == "application/json"
    assert headers["x-request-id"].startswith("req_chunkwise_")
    assert json.loads(data) == response_scenario_document(RESPONSE_SCENARIOS[name])


@pytest.mark.parametrize("name", ["error", "quirks-flat-error", "quirks-llamacpp-error"])
async def test_stream_false_of_a_failing_scenario_is_a_500(name: str) -> None:
    async with open_chat_server() as server:
        status, document = await _responses_json(server, _request(name, stream=False))
    assert status == 500
    assert document["error"]["message"] == SCENARIOS["error"].error["message"]  # type: ignore[index]


async def test_stream_false_of_a_replay_without_terminal_event_is_a_500() -> None:
    body = b"".join(response_scenario_events(RESPONSE_SCENARIOS["text"])[:-1])
    async with open_chat_server(ServerOptions(replay=body)) as server:
        status, document = await _responses_json(server, _request("text"))
    assert status == 500
    assert document["error"]["message"] == "The stream ended before its terminal event."


async def test_get_is_405() -> None:
    async with open_chat_server() as server:
        stream = await trio.open_tcp_stream(server.host, server.port)
        async with stream:
            await stream.send_all(
                b"GET /v1/responses HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
            )
            received = b""
            while data := await stream.receive_some():
                received += data
    assert received.startswith(b"HTTP/1.1 405 ")
    assert b"Allow: POST" in received


def test_server_options() -> None:
    assert ServerOptions().default_response_scenario == "text"
    assert ServerOptions(scenario="error").default_response_scenario == "error"
    assert ServerOptions(scenario="quirks-crlf").default_response_scenario == "text"
    with pytest.raises(ValueError, match="unknown Responses scenario"):
        ServerOptions(response_scenario="nope")
    options = ServerOptions(response_scenario="quirks-keepalive")
    assert attrs.evolve(options).response_scenario == "quirks-keepalive"


def test_serve_option() -> None:
    args = build_parser().parse_args(["serve", "--response-scenario", "quirks-llamacpp"])
    assert options_from_args(args).response_scenario == "quirks-llamacpp"
    assert options_from_args(build_parser().parse_args(["serve"])).response_scenario is None


# -- the official openai SDK as an oracle --------------------------------------------------


def _sdk(server: LoopbackServer) -> Any:
    openai = pytest.importorskip("openai")
    return openai.AsyncOpenAI(base_url=server.base_url, api_key="k", max_retries=0, timeout=10)


def _sdk_events(name: str, events: list[Any]) -> chunkwise.responses.Result:
    """Feed the SDK's parsed events to chunkwise's accumulator (``model_dump``)."""
    accumulator = chunkwise.responses.Accumulator()
    for event in events:
        # exclude_unset: the fields the server sent, not the model's None defaults.
        accumulator.feed(event.model_dump(exclude_unset=True))
    accumulator.end()
    return accumulator.result


async def _sdk_stream(name: str) -> list[Any]:
    async with open_chat_server(ServerOptions(write_size=7)) as server:
        client = _sdk(server)
        # The SDK runs on asyncio; trio runs this test, so it runs in a thread.
        import asyncio  # only here: the SDK's own event loop, in a worker thread

        async def run() -> list[Any]:
            async with client:
                stream = await client.responses.create(model=name, input="hi", stream=True)
                return [event async for event in stream]

        return await trio.to_thread.run_sync(lambda: asyncio.run(run()))


@pytest.mark.parametrize("name", [n for n in NAMES if "error" not in n])
async def test_the_sdk_reads_every_scenario(name: str) -> None:
    events = await _sdk_stream(name)
    scenario = RESPONSE_SCENARIOS[name]
    payloads = response_scenario_payloads(scenario)
    assert [event.type for event in events] == _types(payloads)
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == scenario.text
    final = events[-1].response
    assert final.status == ("incomplete" if name == "length" else "completed")
    assert final.usage.output_tokens == scenario.output_tokens
    _check(_sdk_events(name, events), scenario)


async def test_the_sdk_reads_the_error_scenarios() -> None:
    openai = pytest.importorskip("openai")
    # openai-python 3.57 raises on data with a truthy "error" at the top: the live
    # nested error event, and llama.cpp's bare frame ...
    message = SCENARIOS["error"].error["message"]  # type: ignore[index]
    for name in ("error", "quirks-llamacpp-error"):
        with pytest.raises(openai.APIError, match="The server had an error"):
            await _sdk_stream(name)
    # ... and passes the documented flat one through, as an event.
    flat = await _sdk_stream("quirks-flat-error")
    assert [e.type for e in flat][-2:] == ["error", "response.failed"]
    assert flat[-2].message == message
    _check(_sdk_events("quirks-flat-error", flat), RESPONSE_SCENARIOS["quirks-flat-error"])


async def _sdk_helper(name: str) -> str:
    """``client.responses.stream()``, the SDK's accumulating helper: the final output text."""
    async with open_chat_server() as server:
        client = _sdk(server)
        import asyncio  # only here: the SDK's own event loop, in a worker thread

        async def run() -> str:
            async with client, client.responses.stream(model=name, input="hi") as stream:
                async for _ in stream:
                    pass
                final = await stream.get_final_response()
                return str(final.output_text)

        return await trio.to_thread.run_sync(lambda: asyncio.run(run()))


@pytest.mark.parametrize("name", ["text", "reasoning", "demo"])
async def test_the_sdk_helper_reads_openai_shaped_streams(name: str) -> None:
    assert await _sdk_helper(name) == RESPONSE_SCENARIOS[name].text


@pytest.mark.parametrize(
    "name", ["quirks-keepalive", "quirks-llamacpp", "quirks-llamacpp-reasoning", "length"]
)
async def test_the_sdk_helper_breaks_where_chunkwise_does_not(name: str) -> None:
    # openai-python 3.57's helper: a keepalive before response.created is "expected to
    # have received response.created"; llama.cpp's missing output_index is a TypeError
    # or a "duplicate output index None"; response.incomplete is "no response.completed".
    # chunkwise reads all of these (test_each_scenario_parses_at_every_split).
    pytest.importorskip("openai")
    with pytest.raises((RuntimeError, TypeError)):
        await _sdk_helper(name)

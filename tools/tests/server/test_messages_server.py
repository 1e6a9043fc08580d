"""``POST /v1/messages`` on the embedded server: every Messages scenario, validated strictly by
the official ``anthropic`` SDK's own event types and accumulated by it, read by chunkwise at
every split and through its client, non-streamed, refused, and failed on purpose."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio

import chunkwise
from chunkwise.testing import LoopbackServer
from chunkwise_tools.server import Faults, ServerOptions, open_chat_server
from chunkwise_tools.server._messages_wire import (
    MESSAGES_SCENARIOS,
    messages_events,
    messages_payloads,
)
from helpers.reads import byte_reads, pieces_of
from helpers.servers import http_exchange

NAMES = list(MESSAGES_SCENARIOS)
FINISHED = [n for n, s in MESSAGES_SCENARIOS.items() if s.error is None and not s.cut]


def _request(model: str, **extra: Any) -> dict[str, Any]:
    return {"model": model, "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]} | (
        extra
    )


def _parse(reads: list[bytes]) -> chunkwise.messages.Result:
    parser = chunkwise.messages.Parser()
    for read in reads:
        parser.feed(read)
    parser.end()
    return parser.result


def _sdk_snapshot(payloads: list[dict[str, Any]]) -> Any:
    """The SDK's accumulation of ``payloads``, each validated strictly by its own types."""
    types = pytest.importorskip("anthropic.types")
    streaming = pytest.importorskip("anthropic.lib.streaming._messages")
    from pydantic import TypeAdapter

    adapter: Any = TypeAdapter(types.RawMessageStreamEvent)
    snapshot = None
    bufs: dict[int, bytes] = {}
    for payload in payloads:
        if payload["type"] in ("ping", "error"):  # not in the union: the SDK's stream drops pings
            continue
        event = adapter.validate_json(json.dumps(payload), strict=True)
        snapshot = streaming.accumulate_event(
            event=event, current_snapshot=snapshot, json_bufs=bufs
        )
    return snapshot


def _same_as_sdk(result: chunkwise.messages.Result, sdk: Any) -> None:
    """Text, thinking, signature, tool input and usage: chunkwise's equal the SDK's."""
    assert [b.type for b in result.content] == [b.type for b in sdk.content]
    for mine, theirs in zip(result.content, sdk.content, strict=True):
        if theirs.type == "text":
            assert mine.text == theirs.text
        elif theirs.type == "thinking":
            assert (mine.thinking, mine.signature) == (theirs.thinking, theirs.signature)
        else:
            assert mine.call is not None
            assert (mine.call.id, mine.call.name) == (theirs.id, theirs.name)
            assert json.loads(mine.call.arguments) == theirs.input
    assert result.usage is not None
    assert result.usage["input_tokens"] == sdk.usage.input_tokens
    assert result.usage["output_tokens"] == sdk.usage.output_tokens
    assert (result.id, result.model, result.stop_reason) == (sdk.id, sdk.model, sdk.stop_reason)


@pytest.mark.parametrize("name", NAMES)
def test_every_scenario_is_valid_for_the_sdk_and_reads_the_same_at_every_split(name: str) -> None:
    scenario = MESSAGES_SCENARIOS[name]
    payloads = messages_payloads(scenario)
    sdk = _sdk_snapshot(payloads)
    body = b"".join(messages_events(scenario))
    for reads in (byte_reads(body), pieces_of(body, 7), [body]):
        result = _parse(reads)
        if scenario.error is None:
            _same_as_sdk(result, sdk)
    assert result.text == "".join(
        scenario.words.content[: len(scenario.words.content) // 2]
        if scenario.cut
        else ()
        if scenario.error == "before-output"
        else scenario.words.content
    )
    expected = {None: "complete", "before-output": "failed", "after-output": "failed"}
    assert result.status == ("incomplete" if scenario.cut else expected[scenario.error])
    if scenario.error is not None:
        assert isinstance(result.error, chunkwise.StreamError)
        assert result.error.type == "overloaded_error"


def test_the_scenarios_say_thinking_signatures_and_tool_input_fragments() -> None:
    thinking = _sdk_snapshot(messages_payloads(MESSAGES_SCENARIOS["thinking"]))
    assert thinking.content[0].type == "thinking" and thinking.content[0].signature
    tools = messages_payloads(MESSAGES_SCENARIOS["tools"])
    fragments = [p for p in tools if p.get("delta", {}).get("type") == "input_json_delta"]
    assert len(fragments) == 10
    assert _sdk_snapshot(tools).stop_reason == "tool_use"


@pytest.mark.parametrize("write_size", [None, 5])
@pytest.mark.parametrize("name", FINISHED)
async def test_each_scenario_through_the_client(name: str, write_size: int | None) -> None:
    async with open_chat_server(ServerOptions(write_size=write_size, api_key="sk-a")) as server:
        endpoint = server.endpoint(api_key="sk-a")
        result = await chunkwise.messages.complete(endpoint, _request(name))
        [request] = server.requests
    assert request.target == "/v1/messages"
    assert request.headers["x-api-key"] == "sk-a"
    _same_as_sdk(result, _sdk_snapshot(messages_payloads(MESSAGES_SCENARIOS[name], model=name)))


@pytest.mark.parametrize("name", NAMES)
async def test_a_non_streamed_request_gets_the_message_the_stream_builds(name: str) -> None:
    scenario = MESSAGES_SCENARIOS[name]
    async with open_chat_server() as server:
        body = json.dumps(_request(name, stream=False)).encode()
        status, _, answer = await http_exchange(server, "POST", "/v1/messages", body)
    document = json.loads(answer)
    if scenario.error is not None or scenario.cut:
        assert document["type"] == "error"
        assert status == (500 if scenario.cut else 529)
        return
    assert status == 200
    types = pytest.importorskip("anthropic.types")
    message = types.Message.model_validate(document)
    sdk = _sdk_snapshot(messages_payloads(scenario, model=name))
    assert message.model_dump() == sdk.model_dump()


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "text", "messages": [{"role": "user", "content": "hi"}]}, "max_tokens"),
        ({"model": "text", "max_tokens": 5}, "messages"),
        ({"max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}, "model"),
        (_request("text", max_tokens=0), "max_tokens"),
        (_request("text", messages=[]), "messages"),
        (_request("text", stream="yes"), "stream"),
    ],
)
async def test_a_request_the_api_refuses_gets_a_400(body: dict[str, Any], param: str) -> None:
    async with open_chat_server() as server:
        status, _, answer = await http_exchange(
            server, "POST", "/v1/messages", json.dumps(body).encode()
        )
    assert status == 400
    assert param in json.loads(answer)["error"]["message"]


async def test_a_wrong_x_api_key_is_refused() -> None:
    async with open_chat_server(ServerOptions(api_key="sk-right")) as server:
        body = json.dumps(_request("text")).encode()
        status, _, _ = await http_exchange(
            server, "POST", "/v1/messages", body, (("x-api-key", "sk-wrong"),)
        )
    assert status == 401


@pytest.mark.parametrize("side", ["before_output", "after_output"])
async def test_the_fault_options_fail_messages_streams_with_anthropic_errors(side: str) -> None:
    faults = Faults(
        before_output=float(side == "before_output"),
        after_output=float(side == "after_output"),
        ways=("overloaded",),
    )
    async with open_chat_server(ServerOptions(faults=faults)) as server:
        result = await chunkwise.messages.complete(server.endpoint(), _request("text"))
    assert result.status == "failed"
    assert isinstance(result.error, chunkwise.StreamError)
    assert result.error.type == "overloaded_error"
    assert (result.text == "") is (side == "before_output")


# -- the official anthropic SDK against the running server ----------------------------------


def _sdk(server: LoopbackServer) -> Any:
    anthropic = pytest.importorskip("anthropic")
    return anthropic.AsyncAnthropic(
        base_url=server.base_url.removesuffix("/v1"), api_key="k", max_retries=0, timeout=10
    )


async def _sdk_final(name: str) -> Any:
    async with open_chat_server(ServerOptions(write_size=7)) as server:
        client = _sdk(server)
        import asyncio  # only here: the SDK's own event loop, in a worker thread

        async def run() -> Any:
            async with client, client.messages.stream(**_request(name)) as stream:
                return await stream.get_final_message()

        return await trio.to_thread.run_sync(lambda: asyncio.run(run()))


@pytest.mark.parametrize("name", FINISHED)
async def test_the_sdk_streams_every_finished_scenario(name: str) -> None:
    final = await _sdk_final(name)
    sdk = _sdk_snapshot(messages_payloads(MESSAGES_SCENARIOS[name], model=name))
    assert final.model_dump() == sdk.model_dump()


@pytest.mark.parametrize("name", ["overloaded", "overloaded-before-output"])
async def test_the_sdk_raises_the_overloaded_error_event(name: str) -> None:
    anthropic = pytest.importorskip("anthropic")
    with pytest.raises(anthropic.APIStatusError, match="Overloaded"):
        await _sdk_final(name)

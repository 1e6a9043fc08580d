"""Socket closure on every path, against the real loopback server.

Each test wraps the client's TCP stream to record when it is closed, and checks
that it was closed *before* ``open_chat_stream``'s ``__aexit__`` returned; the
server then observes the client's EOF.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

import chunkwise
from chunkwise._net.http import connect
from chunkwise.testing import LoopbackServer, ScriptedResponse, open_test_server
from helpers.bodies import choice, chunk, sse
from helpers.reads import parse_chat
from helpers.servers import TrackedStream

REQUEST = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
BODY = sse(
    chunk(choice(role="assistant", content="")),
    *[chunk(choice(content=f"word{i} ")) for i in range(20)],
    chunk(choice(finish_reason="stop")),
)


@asynccontextmanager
async def recorded(
    server: LoopbackServer,
) -> AsyncIterator[tuple[chunkwise.Endpoint, TrackedStream]]:
    endpoint = server.endpoint(api_key="sk-loopback")
    yield endpoint, TrackedStream(await connect(endpoint))


async def assert_closed(server: LoopbackServer, transport: TrackedStream) -> None:
    assert transport.closed, "socket still open after __aexit__ returned"
    with trio.fail_after(5):
        await server.wait_client_closed()


async def test_normal_end_closes_socket() -> None:
    async with open_test_server(ScriptedResponse(body=BODY, write_sizes=64)) as server:
        async with recorded(server) as (endpoint, transport):
            async with chunkwise.chat.open_stream(endpoint, REQUEST, transport=transport) as s:
                result = await s.result()
            await assert_closed(server, transport)
    assert result.status == "complete"
    assert result.content.startswith("word0 word1")
    (request,) = server.requests
    assert request.json()["stream"] is True
    assert request.headers["authorization"] == "Bearer sk-loopback"
    assert request.headers["accept"] == "text/event-stream"


async def test_http_error_closes_socket_and_raises_typed_error() -> None:
    script = ScriptedResponse.error(
        429, "slow down", type="rate_limit", headers={"Retry-After": "7"}
    )
    async with open_test_server(script) as server:
        async with recorded(server) as (endpoint, transport):
            with pytest.raises(chunkwise.HTTPStatusError) as info:
                async with chunkwise.chat.open_stream(endpoint, REQUEST, transport=transport):
                    pytest.fail("not reached")  # pragma: no cover
            await assert_closed(server, transport)
    assert info.value.status_code == 429
    assert info.value.retry_after == 7
    assert info.value.error is not None and info.value.error.message == "slow down"


async def test_protocol_error_closes_socket() -> None:
    script = ScriptedResponse(content_type="application/json", body=b'{"choices": []}')
    async with open_test_server(script) as server:
        async with recorded(server) as (endpoint, transport):
            with pytest.raises(chunkwise.errors.UnexpectedContentType) as info:
                async with chunkwise.chat.open_stream(endpoint, REQUEST, transport=transport):
                    pytest.fail("not reached")  # pragma: no cover
            await assert_closed(server, transport)
    assert info.value.body_start.startswith(b'{"choices"')


async def test_consumer_exception_closes_socket_and_propagates_alone() -> None:
    script = ScriptedResponse(body=BODY, write_sizes=40, delay=0.01)

    async def consumer(channel: trio.MemoryReceiveChannel[chunkwise.Event]) -> None:
        async for event in channel:
            if isinstance(event, chunkwise.chat.TextDelta):
                raise RuntimeError("consumer failed")

    async with open_test_server(script) as server:
        async with recorded(server) as (endpoint, transport):
            with pytest.raises(RuntimeError, match="consumer failed"):
                async with chunkwise.chat.open_stream(endpoint, REQUEST, transport=transport) as s:
                    s.start_soon(consumer, s.subscribe())
                    s.start_soon(consumer, s.subscribe("lifecycle"))  # never raises
                    await s.result()
            await assert_closed(server, transport)


@pytest.mark.parametrize(
    ("where", "script"),
    [
        ("before the head", ScriptedResponse(body=BODY, head_delay=10)),
        ("mid-body", ScriptedResponse(body=BODY, write_sizes=100, delay=1)),
    ],
)
async def test_outer_cancellation_closes_socket(where: str, script: ScriptedResponse) -> None:
    async with open_test_server(script) as server:
        async with recorded(server) as (endpoint, transport):
            with trio.move_on_after(0.2) as scope:
                async with chunkwise.chat.open_stream(endpoint, REQUEST, transport=transport) as s:
                    await s.result()
            assert scope.cancelled_caught, where
            await assert_closed(server, transport)


async def test_deadline_mid_body_raises_too_slow_and_closes_socket() -> None:
    script = ScriptedResponse(body=BODY, write_sizes=100, delay=1)
    async with open_test_server(script) as server:
        async with recorded(server) as (endpoint, transport):
            with pytest.raises(trio.TooSlowError):
                with trio.fail_after(0.2):
                    async with chunkwise.chat.open_stream(
                        endpoint, REQUEST, transport=transport
                    ) as s:
                        async for _ in s:
                            pass
            await assert_closed(server, transport)
            assert s.snapshot.status == "incomplete"
            assert s.snapshot.reason is chunkwise.IncompleteReason.CANCELLED


async def test_disconnect_mid_body_is_incomplete_and_keeps_partial_text() -> None:
    script = ScriptedResponse(body=BODY, write_sizes=50, disconnect_after=len(BODY) // 2)
    async with open_test_server(script) as server:
        result = await chunkwise.chat.complete(server.endpoint(), REQUEST)
        with trio.fail_after(5):
            await server.wait_client_closed()
    assert result.status == "incomplete"
    assert result.reason is chunkwise.IncompleteReason.CONNECTION_LOST
    assert result.content.startswith("word0 ")


@pytest.mark.parametrize("framing", ["chunked", "content-length", "close"])
async def test_every_framing_streams_the_same_result(framing: Any) -> None:
    script = ScriptedResponse(body=BODY, write_sizes=7, framing=framing)
    async with open_test_server(script) as server:
        result = await chunkwise.chat.complete(server.endpoint(), REQUEST)
    assert result == parse_chat([BODY])[1]


async def test_tls_stream_with_trusted_certificate() -> None:
    async with open_test_server(ScriptedResponse(body=BODY), tls=True) as server:
        assert server.base_url.startswith("https://")
        result = await chunkwise.chat.complete(server.endpoint(), REQUEST)
    assert result.status == "complete"


async def test_tools_in_request_validate_streamed_arguments() -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "f",
                "parameters": {
                    "type": "object",
                    "properties": {"x": {"type": "integer"}},
                    "required": ["x"],
                },
            },
        }
    ]
    body = sse(
        chunk(
            choice(
                tool_calls=[
                    {
                        "index": 0,
                        "id": "c",
                        "type": "function",
                        "function": {"name": "f", "arguments": '{"x": "no"}'},
                    }
                ]
            )
        ),
        chunk(choice(finish_reason="tool_calls")),
    )
    async with open_test_server(ScriptedResponse(body=body)) as server:
        result = await chunkwise.chat.complete(server.endpoint(), {**REQUEST, "tools": tools})
    (call,) = result.choice(0).tool_calls
    assert call.validated is False
    assert isinstance(call.error, chunkwise.ToolArgumentsError)
    assert server.requests[0].json()["tools"] == tools


async def test_a_stream_block_is_entered_once() -> None:
    # The object open_chat_stream returns is a one-shot async context manager,
    # like any @asynccontextmanager's: a second entry is refused before any
    # request is sent.
    async with open_test_server(ScriptedResponse(body=BODY)) as server:
        async with recorded(server) as (endpoint, transport):
            block = chunkwise.chat.open_stream(endpoint, REQUEST, transport=transport)
            async with block as stream:
                await stream.result()
            with pytest.raises(RuntimeError, match="entered only once"):
                async with block:
                    pytest.fail("not reached")  # pragma: no cover
    assert len(server.requests) == 1


async def test_a_stream_block_cannot_be_left_without_being_entered() -> None:
    block = chunkwise.chat.open_stream(chunkwise.Endpoint("http://127.0.0.1:9/v1"), REQUEST)
    with pytest.raises(RuntimeError, match="without being entered"):
        await block.__aexit__(None, None, None)


async def test_start_soon_after_the_block_is_refused() -> None:
    async with open_test_server(ScriptedResponse(body=BODY)) as server:
        async with recorded(server) as (endpoint, transport):
            async with chunkwise.chat.open_stream(endpoint, REQUEST, transport=transport) as s:
                await s.result()

            async def consumer() -> None:  # pragma: no cover - never started
                pass

            with pytest.raises(RuntimeError, match="not open"):
                s.start_soon(consumer)


@pytest.mark.parametrize("api", ["chat", "responses", "completions"])
async def test_an_event_stream_holding_an_error_document_ends_failed(api: str) -> None:
    # A relay answering 200 text/event-stream with a JSON error body: the
    # stream ends failed with the error (tests/sansio/test_error_documents.py).
    error = {"message": "no such model", "type": "invalid_request_error", "code": "model_not_found"}
    body = json.dumps({"error": error}, indent=2).encode()
    async with open_test_server(ScriptedResponse(body=body, write_sizes=16)) as server:
        result = await getattr(chunkwise, api).complete(server.endpoint(), {"model": "m"})
    assert result.status == "failed"
    assert isinstance(result.error, chunkwise.StreamError)
    assert (result.error.message, result.error.code) == ("no such model", "model_not_found")

"""open_chat_stream over trio.testing memory streams: fan-out, backpressure,
cancellation and timeouts against chunkwise.testing.serve_stream and a MockClock."""

from __future__ import annotations

import pytest
import trio
import trio.testing

import chunkwise
from chunkwise import (
    EventsDropped,
    HeadReceived,
    IncompleteReason,
    StreamCompleted,
    StreamIncomplete,
    chat,
)
from chunkwise.testing import ScriptedResponse
from helpers.bodies import choice, chunk, sse, tool
from helpers.servers import close_delimited, serving, then_hang

ENDPOINT = chunkwise.Endpoint(base_url="http://127.0.0.1:9/v1", api_key="sk-test-secret")
REQUEST = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}

BODY = sse(
    chunk(choice(role="assistant", content="")),
    chunk(choice(content="Hello")),
    chunk(choice(content=", wörld")),
    chunk(choice(tool_calls=[tool(0, id="call_1", name="f", arguments='{"a": 1}')])),
    chunk(choice(finish_reason="tool_calls")),
    {
        **chunk(),
        "choices": [],
        "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3},
    },
)
N_EVENTS_BODY = 8  # content x2, tool started/args/completed, finished, usage, terminal


#: Ten bytes every 0.1 s, then silence: a stream that is still running.
TRICKLE_THEN_HANG = then_hang(close_delimited(BODY, write_sizes=10, delay=0.1))


# Every test takes autojump_clock: virtual time, so delays and timeouts cost
# nothing and nothing depends on the machine's load.


async def test_subscribers_each_receive_every_event_and_then_end_of_channel(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = close_delimited(BODY, write_sizes=7)
    received: dict[str, list[chunkwise.Event]] = {"all": [], "choice": [], "tool": [], "life": []}

    async def consume(name: str, channel: trio.MemoryReceiveChannel[chunkwise.Event]) -> None:
        async with channel:
            async for event in channel:
                received[name].append(event)

    async with serving(script) as (client, server):
        async with chunkwise.chat.open_stream(ENDPOINT, REQUEST, transport=client) as stream:
            stream.start_soon(consume, "all", stream.subscribe())
            stream.start_soon(consume, "choice", stream.subscribe("choice"))
            stream.start_soon(consume, "tool", stream.subscribe("tool_call"))
            stream.start_soon(consume, "life", stream.subscribe("lifecycle"))
            result = await stream.result()
        assert server.client_closed.is_set()
    assert result.status == "complete"
    assert result.content == "Hello, wörld"
    assert [request.json()["stream"] for request in server.requests] == [True]
    everything = received["all"]
    assert isinstance(everything[0], HeadReceived)
    assert isinstance(everything[-1], StreamCompleted)
    assert len(everything) == 1 + N_EVENTS_BODY
    for name in ("choice", "tool", "life"):
        assert received[name][-1] == everything[-1]
    assert [e for e in received["choice"] if isinstance(e, chat.TextDelta)] == [
        e for e in everything if isinstance(e, chat.TextDelta)
    ]
    assert [type(e) for e in received["tool"]][-2:] == [chat.ToolCallCompleted, StreamCompleted]


async def test_async_for_single_consumer_and_result(autojump_clock: trio.testing.MockClock) -> None:
    script = close_delimited(BODY)
    async with serving(script) as (client, _):
        async with chunkwise.chat.open_stream(ENDPOINT, REQUEST, transport=client) as stream:
            events = [event async for event in stream]
            result = await stream.result()
    assert isinstance(events[-1], StreamCompleted)
    assert events[-1].result == result


async def test_server_close_before_finish_is_incomplete_with_partial_text(
    autojump_clock: trio.testing.MockClock,
) -> None:
    cut = BODY.index("wörld".encode())
    script = close_delimited(BODY[:cut])
    async with serving(script) as (client, _):
        async with chunkwise.chat.open_stream(ENDPOINT, REQUEST, transport=client) as stream:
            events = [event async for event in stream]
    result = stream.snapshot
    assert result.status == "incomplete"
    assert result.content == "Hello"
    assert isinstance(events[-1], StreamIncomplete)


async def test_truncated_chunked_body_is_connection_lost_and_keeps_output(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # One chunk that promises the whole body and is cut off before the tool call.
    script = ScriptedResponse(body=BODY, disconnect_after=BODY.index(b"tool_calls"))
    async with serving(script) as (client, _):
        async with chunkwise.chat.open_stream(ENDPOINT, REQUEST, transport=client) as stream:
            result = await stream.result()
    assert result.status == "incomplete"
    assert result.reason is IncompleteReason.CONNECTION_LOST
    assert result.content == "Hello, wörld"
    assert any(a.kind == "transport error" for a in result.anomalies)


async def test_idle_timeout_ends_stream_incomplete_with_partial_output(
    autojump_clock: trio.testing.MockClock,
) -> None:
    endpoint = chunkwise.Endpoint(
        base_url="http://127.0.0.1:9/v1", timeouts=chunkwise.Timeouts(idle=5.0)
    )
    script = then_hang(close_delimited(BODY[: BODY.index(b"tool_calls")]))
    async with serving(script) as (client, _):
        start = trio.current_time()
        async with chunkwise.chat.open_stream(endpoint, REQUEST, transport=client) as stream:
            result = await stream.result()
        assert trio.current_time() - start == pytest.approx(5.0, abs=0.5)
    assert result.status == "incomplete"
    assert result.reason is IncompleteReason.IDLE_TIMEOUT
    assert result.content == "Hello, wörld"


async def test_consumer_exception_cancels_stream_and_propagates_alone(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = TRICKLE_THEN_HANG

    async def bad_consumer(channel: trio.MemoryReceiveChannel[chunkwise.Event]) -> None:
        async for event in channel:
            if isinstance(event, chat.TextDelta):
                raise KeyError("consumer bug")

    async with serving(script) as (client, server):
        with pytest.raises(KeyError, match="consumer bug"):
            async with chunkwise.chat.open_stream(ENDPOINT, REQUEST, transport=client) as stream:
                stream.start_soon(bad_consumer, stream.subscribe())
                await trio.sleep_forever()
        with trio.fail_after(1):
            await server.client_closed.wait()


async def test_exception_in_block_propagates_alone_and_closes_socket(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = TRICKLE_THEN_HANG
    async with serving(script) as (client, server):
        with pytest.raises(ValueError, match="user error"):
            async with chunkwise.chat.open_stream(ENDPOINT, REQUEST, transport=client) as stream:
                async for event in stream:
                    if isinstance(event, chat.TextDelta):
                        raise ValueError("user error")
        with trio.fail_after(1):
            await server.client_closed.wait()


async def test_leaving_the_block_early_cancels_and_result_says_cancelled(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = TRICKLE_THEN_HANG
    async with serving(script) as (client, server):
        async with chunkwise.chat.open_stream(ENDPOINT, REQUEST, transport=client) as stream:
            channel = stream.subscribe()
            async for event in channel:
                if isinstance(event, chat.TextDelta):
                    break
        assert stream.snapshot.status == "incomplete"
        assert stream.snapshot.reason is IncompleteReason.CANCELLED
        with trio.fail_after(1):
            await server.client_closed.wait()


async def test_stream_cancel_delivers_terminal_event_to_subscribers(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = TRICKLE_THEN_HANG
    async with serving(script) as (client, _):
        async with chunkwise.chat.open_stream(ENDPOINT, REQUEST, transport=client) as stream:
            events = []
            async for event in stream:
                events.append(event)
                if isinstance(event, chat.TextDelta):
                    stream.cancel()
        assert isinstance(events[-1], StreamIncomplete)
        assert events[-1].reason is IncompleteReason.CANCELLED


async def test_outer_deadline_mid_body_closes_socket_before_exit(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = then_hang(close_delimited(BODY[:50]))
    async with serving(script) as (client, server):
        with trio.move_on_after(3) as scope:
            async with chunkwise.chat.open_stream(ENDPOINT, REQUEST, transport=client) as stream:
                await stream.result()
        assert scope.cancelled_caught
        with trio.fail_after(1):
            await server.client_closed.wait()


async def test_slow_lossless_subscriber_applies_backpressure_without_loss(
    autojump_clock: trio.testing.MockClock,
) -> None:
    many = sse(
        *[chunk(choice(content=str(i))) for i in range(50)], chunk(choice(finish_reason="stop"))
    )
    script = close_delimited(many)
    slow: list[chunkwise.Event] = []

    async def slow_consumer(channel: trio.MemoryReceiveChannel[chunkwise.Event]) -> None:
        async for event in channel:
            slow.append(event)
            await trio.sleep(0.01)

    async with serving(script) as (client, _):
        async with chunkwise.chat.open_stream(ENDPOINT, REQUEST, transport=client) as stream:
            stream.start_soon(slow_consumer, stream.subscribe(buffer_size=2))
            fast = [event async for event in stream]
    assert slow == fast
    assert len([e for e in slow if isinstance(e, chat.TextDelta)]) == 50


async def test_lossy_subscriber_reports_drops_and_still_gets_terminal(
    autojump_clock: trio.testing.MockClock,
) -> None:
    many = sse(
        *[chunk(choice(content=str(i))) for i in range(50)], chunk(choice(finish_reason="stop"))
    )
    script = close_delimited(many)
    async with serving(script) as (client, _):
        async with chunkwise.chat.open_stream(ENDPOINT, REQUEST, transport=client) as stream:
            lossy = stream.subscribe(buffer_size=3, lossy=True)
            fast = [event async for event in stream]
        got = [event async for event in lossy]
    dropped = sum(e.count for e in got if isinstance(e, EventsDropped))
    assert dropped > 0
    assert len(got) - sum(isinstance(e, EventsDropped) for e in got) + dropped == len(fast)
    assert got[-1] == fast[-1]


async def test_subscriber_closing_its_channel_does_not_disturb_others(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = close_delimited(BODY, write_sizes=5)
    async with serving(script) as (client, _):
        async with chunkwise.chat.open_stream(ENDPOINT, REQUEST, transport=client) as stream:
            quitter = stream.subscribe(buffer_size=0)
            stays = stream.subscribe()

            async def quit_early() -> None:
                async with quitter:
                    await quitter.receive()

            stream.start_soon(quit_early)
            events = [event async for event in stays]
    assert isinstance(events[-1], StreamCompleted)


async def test_late_subscriber_after_end_gets_terminal_then_end_of_channel(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = close_delimited(BODY)
    async with serving(script) as (client, _):
        async with chunkwise.chat.open_stream(ENDPOINT, REQUEST, transport=client) as stream:
            await stream.result()
            late = stream.subscribe()
            assert [type(e) async for e in late] == [StreamCompleted]


async def test_complete_chat_and_http_error_before_block(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = ScriptedResponse.error(
        404, "no such model", type="invalid_request_error", headers={"x-request-id": "req_1"}
    )
    async with serving(script) as (client, _):
        with pytest.raises(chunkwise.HTTPStatusError) as info:
            async with chunkwise.chat.open_stream(ENDPOINT, REQUEST, transport=client):
                pytest.fail("the block must not run")  # pragma: no cover
    assert info.value.status_code == 404
    assert info.value.error is not None and info.value.error.message == "no such model"
    assert "sk-test-secret" not in str(info.value)


async def test_leaving_early_with_an_unread_subscriber_does_not_hang(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = TRICKLE_THEN_HANG
    received: list[chunkwise.Event] = []

    async def consumer(channel: trio.MemoryReceiveChannel[chunkwise.Event]) -> None:
        async for event in channel:
            received.append(event)
            await trio.sleep(0.05)

    async with serving(script) as (client, _):
        with trio.fail_after(10):
            async with chunkwise.chat.open_stream(ENDPOINT, REQUEST, transport=client) as stream:
                unread = stream.subscribe(buffer_size=1)  # nobody ever reads this one
                stream.start_soon(consumer, stream.subscribe(buffer_size=1))
                await trio.sleep(0.3)  # leave while the stream runs
    assert isinstance(received[-1], StreamIncomplete)
    assert received[-1].reason is IncompleteReason.CANCELLED
    with pytest.raises(trio.EndOfChannel):
        while True:
            unread.receive_nowait()


async def test_leaving_early_with_no_consumer_task_returns_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = TRICKLE_THEN_HANG
    async with serving(script) as (client, _):
        async with chunkwise.chat.open_stream(ENDPOINT, REQUEST, transport=client) as stream:
            stream.subscribe(buffer_size=1)
            await trio.sleep(0.3)
            left = trio.current_time()
        assert trio.current_time() == left
    assert stream.snapshot.reason is IncompleteReason.CANCELLED

"""Promises of the stream layer that the matrix (test_stream_matrix.py) does not
pin on its own: each test here fails when its promise is broken."""

from __future__ import annotations

import math
import sys
from typing import Any

import pytest
import trio
import trio.testing

import chunkwise
from chunkwise import Event, HeadReceived, StreamCompleted, StreamFailed, StreamIncomplete, chat
from chunkwise.testing import Script
from helpers.bodies import choice, chunk, sse
from helpers.servers import TrackedStream, close_delimited, serving, then_hang

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import ExceptionGroup

ENDPOINT = chunkwise.Endpoint(base_url="http://127.0.0.1:9/v1", api_key="sk-test")
REQUEST = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
TERMINAL = (StreamCompleted, StreamIncomplete, StreamFailed)


def text_body(n: int, *, done: bool = True, finish: bool = True) -> bytes:
    return sse(
        *[chunk(choice(content=f"{i} ")) for i in range(n)],
        *([chunk(choice(finish_reason="stop"))] if finish else []),
        done=done,
    )


async def test_reader_waits_for_the_first_subscriber(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = close_delimited(text_body(5))
    async with serving(script) as (client, _):
        async with chunkwise.chat.open_stream(ENDPOINT, REQUEST, transport=client) as stream:
            await trio.sleep(10)  # the whole body has long arrived
            assert not stream.finished  # nobody listened, so nothing was read
            events = [event async for event in stream.subscribe()]
    assert type(events[0]) is HeadReceived
    assert "".join(e.text for e in events if type(e) is chat.TextDelta) == "0 1 2 3 4 "
    assert type(events[-1]) is StreamCompleted


async def test_subscribers_created_before_the_first_checkpoint_see_the_same_events(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = close_delimited(text_body(5), write_sizes=7)
    async with serving(script) as (client, _):
        async with chunkwise.chat.open_stream(ENDPOINT, REQUEST, transport=client) as stream:
            first = stream.subscribe()
            second = stream.subscribe()
            one = [event async for event in first]
            two = [event async for event in second]
    assert one == two
    assert type(one[0]) is HeadReceived


# -- the socket is closed before the terminal event is published --------------


class CloseWatcher(TrackedStream):
    """Takes what ``channel`` holds at the moment the client closes the socket."""

    def __init__(self, inner: trio.abc.Stream) -> None:
        super().__init__(inner)
        self.channel: trio.MemoryReceiveChannel[Event] | None = None
        self.at_close: list[Event] | None = None

    async def aclose(self) -> None:
        if self.at_close is None and self.channel is not None:
            self.at_close = drain(self.channel)
        await super().aclose()


def drain(channel: trio.MemoryReceiveChannel[Event]) -> list[Event]:
    events: list[Event] = []
    while True:
        try:
            events.append(channel.receive_nowait())
        except (trio.WouldBlock, trio.EndOfChannel):
            return events


async def _socket_closed_before_terminal_event(
    script: Script, *, cancel_at: int | None = None, idle: float | None = None
) -> Event:
    """Run a stream; assert that no terminal event was published before the close."""
    endpoint = ENDPOINT
    if idle is not None:
        endpoint = chunkwise.Endpoint(
            base_url="http://127.0.0.1:9/v1", timeouts=chunkwise.Timeouts(idle=idle)
        )
    async with serving(script) as (client, _):
        transport = CloseWatcher(client)
        async with chunkwise.chat.open_stream(endpoint, REQUEST, transport=transport) as stream:
            transport.channel = watched = stream.subscribe(buffer_size=math.inf)
            deltas = 0
            async for event in stream:
                if type(event) is chat.TextDelta:
                    deltas += 1
                    if deltas == cancel_at:
                        stream.cancel()
    assert transport.at_close is not None
    assert not [e for e in transport.at_close if isinstance(e, TERMINAL)]
    after = [event async for event in watched]
    assert isinstance(after[-1], TERMINAL)
    return after[-1]


async def test_socket_closed_before_terminal_event_after_done(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = then_hang(close_delimited(text_body(3)))
    terminal = await _socket_closed_before_terminal_event(script)
    assert type(terminal) is StreamCompleted


async def test_socket_closed_before_terminal_event_at_end_of_body(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = close_delimited(text_body(3, done=False))  # the body ends with the close
    terminal = await _socket_closed_before_terminal_event(script)
    assert type(terminal) is StreamCompleted


async def test_socket_closed_before_terminal_event_on_cancel(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = then_hang(close_delimited(text_body(20), write_sizes=30, delay=0.1))
    terminal = await _socket_closed_before_terminal_event(script, cancel_at=2)
    assert type(terminal) is StreamIncomplete
    assert terminal.reason is chunkwise.IncompleteReason.CANCELLED


async def test_socket_closed_before_terminal_event_on_idle_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = then_hang(close_delimited(text_body(3, done=False, finish=False)))
    terminal = await _socket_closed_before_terminal_event(script, idle=5.0)
    assert type(terminal) is StreamIncomplete
    assert terminal.reason is chunkwise.IncompleteReason.IDLE_TIMEOUT


# -- backpressure ----------------------------------------------------------------


async def test_waiting_on_a_slow_consumer_is_not_idle_time(
    autojump_clock: trio.testing.MockClock,
) -> None:
    endpoint = chunkwise.Endpoint(
        base_url="http://127.0.0.1:9/v1", timeouts=chunkwise.Timeouts(idle=1.0)
    )
    # Many reads, each waiting on the consumer for longer than the idle timeout.
    script = close_delimited(text_body(10), write_sizes=40, delay=0.01)
    received: list[Event] = []

    async def slow(channel: trio.MemoryReceiveChannel[Event]) -> None:
        async for event in channel:
            received.append(event)
            await trio.sleep(2.0)  # twice the idle timeout per event

    async with serving(script) as (client, _):
        start = trio.current_time()
        async with chunkwise.chat.open_stream(endpoint, REQUEST, transport=client) as stream:
            stream.start_soon(slow, stream.subscribe(buffer_size=1))
            result = await stream.result()
        assert trio.current_time() - start >= 20
    assert result.status == "complete"
    assert type(received[-1]) is StreamCompleted


async def test_backpressure_bounds_bytes_read_while_a_subscriber_is_stalled(
    autojump_clock: trio.testing.MockClock,
) -> None:
    big = text_body(20_000)  # about 2 MiB
    script = close_delimited(big)
    async with serving(script) as (client, _):
        transport = TrackedStream(client)
        async with chunkwise.chat.open_stream(ENDPOINT, REQUEST, transport=transport) as stream:
            stalled = stream.subscribe(buffer_size=1)
            await trio.sleep(10)
            # One read of at most 64 KiB is parsed while the subscriber stalls.
            assert transport.received <= 2 * 64 * 1024 < len(big)
            first = await stalled.receive()
            await trio.sleep(10)
            assert transport.received <= 2 * 64 * 1024
            assert type(first) is HeadReceived
    assert stream.snapshot.status == "incomplete"


# -- exceptions --------------------------------------------------------------------


async def test_two_simultaneous_failures_come_out_as_an_exception_group(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = then_hang(close_delimited(text_body(50), write_sizes=30, delay=0.1))

    go = trio.Event()

    async def fail(exc: Exception) -> None:
        await go.wait()  # both wake in the same scheduler batch
        raise exc

    async with serving(script) as (client, _):
        with pytest.raises(ExceptionGroup) as info:
            async with chunkwise.chat.open_stream(ENDPOINT, REQUEST, transport=client) as stream:
                stream.start_soon(fail, ValueError("one"))
                stream.start_soon(fail, KeyError("two"))
                await trio.sleep(1)
                go.set()
                await trio.sleep_forever()
    leaves = info.value.exceptions
    assert sorted(type(exc).__name__ for exc in leaves) == ["KeyError", "ValueError"]


async def test_block_exception_keeps_its_context(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = close_delimited(text_body(3))
    async with serving(script) as (client, _):
        with pytest.raises(ValueError, match="while handling") as info:
            async with chunkwise.chat.open_stream(ENDPOINT, REQUEST, transport=client):
                try:
                    raise KeyError("first")
                except KeyError:
                    raise ValueError("while handling") from None
    assert info.value.__suppress_context__
    assert isinstance(info.value.__context__, KeyError)


# -- the stream object ---------------------------------------------------------------


async def test_cancel_after_the_end_does_nothing(autojump_clock: trio.testing.MockClock) -> None:
    script = close_delimited(text_body(3))
    async with serving(script) as (client, _):
        async with chunkwise.chat.open_stream(ENDPOINT, REQUEST, transport=client) as stream:
            channel = stream.subscribe()
            result = await stream.result()
            stream.cancel()
            events = [event async for event in channel]
    assert result.status == "complete"
    assert stream.snapshot == result
    assert type(events[-1]) is StreamCompleted


async def test_status_code_headers_and_finished(autojump_clock: trio.testing.MockClock) -> None:
    script = close_delimited(text_body(3), headers={"X-Request-Id": "req_42"})
    async with serving(script) as (client, _):
        async with chunkwise.chat.open_stream(ENDPOINT, REQUEST, transport=client) as stream:
            assert stream.status_code == 200
            assert stream.headers["x-request-id"] == "req_42"
            assert stream.headers["content-type"] == "text/event-stream"
            assert not stream.finished
            await stream.result()
            assert stream.finished
    assert stream.finished


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"buffer_size": -1}, ValueError),
        ({"buffer_size": 0, "lossy": True}, ValueError),
        ({"buffer_size": math.inf, "lossy": True}, ValueError),
        ({"buffer_size": 1.5}, TypeError),
        ({"buffer_size": "3"}, TypeError),
        ({"buffer_size": True}, TypeError),
        ({"family": "choices"}, ValueError),
    ],
)
async def test_subscribe_rejects_invalid_arguments(
    kwargs: dict[str, Any], error: type[Exception], autojump_clock: trio.testing.MockClock
) -> None:
    script = close_delimited(text_body(1))
    async with serving(script) as (client, _):
        async with chunkwise.chat.open_stream(ENDPOINT, REQUEST, transport=client) as stream:
            with pytest.raises(error):
                stream.subscribe(**kwargs)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"buffer_size": 0},
        {"buffer_size": 5},
        {"buffer_size": math.inf},
        {"buffer_size": 1, "lossy": True},
        {"buffer_size": 2, "batched": True},
        {"family": "lifecycle", "buffer_size": 1, "lossy": True, "batched": True},
    ],
)
async def test_subscribe_accepts_valid_arguments(
    kwargs: dict[str, Any], autojump_clock: trio.testing.MockClock
) -> None:
    script = close_delimited(text_body(3))
    async with serving(script) as (client, _):
        async with chunkwise.chat.open_stream(ENDPOINT, REQUEST, transport=client) as stream:
            channel: trio.MemoryReceiveChannel[Any] = stream.subscribe(**kwargs)
            items = [item async for item in channel]
    last = items[-1][-1] if kwargs.get("batched") else items[-1]
    assert type(last) is StreamCompleted


# -- batched subscribers ---------------------------------------------------------------


async def test_batched_subscriber_gets_one_tuple_per_read_with_the_same_events(
    autojump_clock: trio.testing.MockClock,
) -> None:
    body = text_body(30)
    script = close_delimited(body, write_sizes=200, delay=0.1)
    async with serving(script) as (client, _):
        async with chunkwise.chat.open_stream(ENDPOINT, REQUEST, transport=client) as stream:
            batched = stream.subscribe(batched=True)
            plain = stream.subscribe()
            choices = stream.subscribe("choice", batched=True)
            batches = [batch async for batch in batched]
            events = [event async for event in plain]
            choice_batches = [batch async for batch in choices]
    assert all(type(batch) is tuple and batch for batch in batches)
    assert [event for batch in batches for event in batch] == events
    assert 1 < len(batches) < len(events)  # several events a read, several reads
    assert [event for batch in choice_batches for event in batch] == [
        event for event in events if type(event) in (chat.TextDelta, chunkwise.chat.ChoiceFinished)
    ] + [events[-1]]


async def test_lossy_batched_subscriber_reports_dropped_events(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = close_delimited(text_body(30), write_sizes=100, delay=0.1)
    async with serving(script) as (client, _):
        async with chunkwise.chat.open_stream(ENDPOINT, REQUEST, transport=client) as stream:
            lossy = stream.subscribe(batched=True, lossy=True, buffer_size=1)
            events = [event async for event in stream]
        batches = [batch async for batch in lossy]
    got = [event for batch in batches for event in batch]
    dropped = sum(e.count for e in got if type(e) is chunkwise.EventsDropped)
    assert dropped > 0
    assert len(got) - sum(type(e) is chunkwise.EventsDropped for e in got) + dropped == len(events)
    assert got[-1] == events[-1]

"""result.timings of the trio layer, and the stall timeout, exact under trio's MockClock.

Every server here is scripted in virtual time (``autojump_clock``) over trio
memory streams: a server that sleeps 0.2 s before the first token and 0.02 s
between tokens gives exactly those figures, with no timed assertion.  The
Client tests (a reused connection, retries) reach the same memory streams by
replacing the connect step of ``chunkwise._net.http`` with one that serves the
scripted server on a new memory stream pair; the tests of a retry's figures
use the loopback server (real sockets, so they assert orderings, not times).

The stall cases take every path of the reader's wait after the last output:
nothing read, bytes that complete no event, events that parse to nothing,
and events that are published but are not output (issue 30).
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import pytest
import trio
import trio.testing

import chunkwise
import chunkwise._net.http
from chunkwise import IncompleteReason, StallTimeout, Timeouts, responses
from chunkwise.testing import (
    LoopbackServer,
    RecordedRequest,
    ResponseWriter,
    ScriptedResponse,
    open_test_server,
    serve_stream,
)
from helpers.bodies import choice, chunk, tool
from helpers.servers import serving

REQUEST = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
RESPONSES_REQUEST = {"model": "m", "input": "hi"}
TOKENS = 5
USAGE = {"prompt_tokens": 3, "completion_tokens": TOKENS, "total_tokens": 8}


def endpoint(**timeouts: Any) -> chunkwise.Endpoint:
    return chunkwise.Endpoint(
        "http://127.0.0.1:9/v1",
        timeouts=Timeouts(**timeouts),
        retries=chunkwise.Retries(max_retries=2),
    )


def data(payload: Mapping[str, Any] | str) -> bytes:
    text = payload if isinstance(payload, str) else json.dumps(payload)
    return f"data: {text}\n\n".encode()


def typed(payload: Mapping[str, Any]) -> bytes:
    return f"event: {payload['type']}\ndata: {json.dumps(payload)}\n\n".encode()


KEEPALIVE = b": keep-alive\n\n"
AT = {"output_index": 0, "item_id": "msg_1"}
MESSAGE = {"id": "msg_1", "type": "message", "role": "assistant", "content": []}


def chat_token(i: int) -> bytes:
    return data(chunk(choice(content=f"t{i} ")))


def response_token(i: int) -> bytes:
    delta = {"type": "response.output_text.delta", **AT, "content_index": 0, "delta": f"t{i} "}
    return typed(delta)


CHAT_START = data(chunk(choice(role="assistant", content="")))
CHAT_END = data(chunk(choice(finish_reason="stop"))) + data(chunk(usage=USAGE)) + data("[DONE]")
RESPONSES_START = typed(
    {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}}
) + typed({"type": "response.output_item.added", "output_index": 0, "item": MESSAGE})
RESPONSES_END = typed(
    {
        "type": "response.completed",
        "response": {
            "id": "resp_1",
            "status": "completed",
            "usage": {"input_tokens": 3, "output_tokens": TOKENS, "total_tokens": 8},
        },
    }
)


def message_token(i: int) -> bytes:
    return typed(
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": f"t{i} "},
        }
    )


MESSAGES_REQUEST = {"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": "hi"}]}
MESSAGES_START = typed(
    {"type": "message_start", "message": {"id": "msg_1", "role": "assistant", "content": []}}
) + typed({"type": "content_block_start", "index": 0, "content_block": {"type": "text"}})
MESSAGES_END = b"".join(
    typed(event)
    for event in (
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": TOKENS},
        },
        {"type": "message_stop"},
    )
)
MESSAGES_PING = typed({"type": "ping"})

#: API: how to open a stream, the request, the start, a token, the end of the body.
SHAPES: dict[str, tuple[Any, dict[str, Any], bytes, Callable[[int], bytes], bytes]] = {
    "chat": (chunkwise.chat.open_stream, REQUEST, CHAT_START, chat_token, CHAT_END),
    "responses": (
        chunkwise.responses.open_stream,
        RESPONSES_REQUEST,
        RESPONSES_START,
        response_token,
        RESPONSES_END,
    ),
    "messages": (
        chunkwise.messages.open_stream,
        MESSAGES_REQUEST,
        MESSAGES_START,
        message_token,
        MESSAGES_END,
    ),
}


def paced(api: str, *, first: float = 0.2, between: float = 0.02, head_delay: float = 0.0) -> Any:
    """A server: the start at once, the first token after ``first``, the rest ``between`` apart."""
    _, _, start, token, end = SHAPES[api]

    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        await trio.sleep(head_delay)
        await writer.start()
        await writer.write(start)
        await trio.sleep(first)
        for i in range(TOKENS):
            if i:
                await trio.sleep(between)
            await writer.write(token(i))
        await writer.write(end)
        await writer.end()

    return handler


# -- one stream, every figure --------------------------------------------------------


@pytest.mark.parametrize("api", list(SHAPES))
async def test_a_paced_server_gives_exact_figures(
    api: str, autojump_clock: trio.testing.MockClock
) -> None:
    open_stream, request, *_ = SHAPES[api]
    async with serving(paced(api)) as (client, _):
        started = trio.current_time()
        async with open_stream(endpoint(), request, transport=client) as stream:
            result = await stream.result()
    assert result.status == "complete"
    timings = result.timings
    assert timings is not None
    assert timings.started == started
    assert timings.connected is None  # the caller's transport was already connected
    assert timings.request_sent == timings.response_head == timings.first_byte == 0.0
    assert timings.first_event == 0.0
    assert timings.first_output == timings.first_content == pytest.approx(0.2)
    assert timings.last_output == pytest.approx(0.28)
    assert timings.ended == pytest.approx(0.28)
    assert (timings.connection_reused, timings.attempts) == (False, 1)
    assert timings.output_tokens == TOKENS
    assert timings.time_to_first_token == pytest.approx(0.2)
    assert timings.time_per_output_token == pytest.approx(0.02)
    assert timings.output_tokens_per_second == pytest.approx(50.0)
    gaps = timings.gaps
    assert gaps is not None and gaps.count == TOKENS - 1
    for value in (gaps.mean, gaps.p50, gaps.p90, gaps.p99, gaps.max):
        assert value == pytest.approx(0.02)
    assert stream.timings == timings  # the stream's own figures, final


async def test_the_head_delay_is_in_the_head_and_first_byte(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with serving(paced("chat", head_delay=0.5)) as (client, _):
        result = await _complete(client)
    assert result.timings is not None
    assert result.timings.request_sent == 0.0
    assert result.timings.first_byte == result.timings.response_head == 0.5
    assert result.timings.first_output == pytest.approx(0.7)


async def _complete(client: trio.abc.Stream, **timeouts: Any) -> chunkwise.chat.Result:
    async with chunkwise.chat.open_stream(endpoint(**timeouts), REQUEST, transport=client) as s:
        return await s.result()


async def test_keepalives_role_only_and_empty_chunks_are_not_output(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        await writer.start()
        await writer.write(KEEPALIVE)
        await trio.sleep(1)
        await writer.write(CHAT_START)  # role only
        await trio.sleep(1)
        await writer.write(data(chunk(choice(content=""))))  # empty
        await trio.sleep(1)
        await writer.write(KEEPALIVE)
        await trio.sleep(1)
        await writer.write(data(chunk(choice(reasoning_content="so"))))
        await trio.sleep(1)
        await writer.write(chat_token(0) + CHAT_END)
        await writer.end()

    async with serving(handler) as (client, _):
        result = await _complete(client)
    timings = result.timings
    assert timings is not None
    assert timings.first_byte == 0.0
    assert timings.first_event == 1.0
    assert timings.first_output == 4.0  # the reasoning
    assert timings.first_content == 5.0
    assert timings.last_output == timings.ended == 5.0
    assert timings.gaps is not None and (timings.gaps.count, timings.gaps.max) == (1, 1.0)


async def test_events_of_one_read_share_its_stamp(autojump_clock: trio.testing.MockClock) -> None:
    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        await writer.start()
        await trio.sleep(0.1)
        await writer.write(b"".join(chat_token(i) for i in range(TOKENS)) + CHAT_END)
        await writer.end()

    async with serving(handler) as (client, _):
        result = await _complete(client)
    assert result.content == "".join(f"t{i} " for i in range(TOKENS))
    timings = result.timings
    assert timings is not None
    assert timings.first_output == timings.last_output == timings.ended == 0.1
    assert timings.gaps is None  # one read carried every token: no gap
    assert timings.time_per_output_token == 0.0


#: The pauses before each token after the first: zeros are reads at one instant.
SAME_INSTANT_PAUSES = {
    "two reads at once": (0.0,),
    "five reads at once": (0.0, 0.0, 0.0, 0.0),
    "at once, then apart": (0.0, 0.0, 0.5),
    "apart, then at once": (0.25, 0.0, 0.0),
    "alternating": (0.0, 1.0, 0.0, 1.0, 0.0),
}


@pytest.mark.parametrize("case", list(SAME_INSTANT_PAUSES))
async def test_output_reads_at_the_same_instant_each_count_with_a_gap_of_zero(
    case: str, autojump_clock: trio.testing.MockClock
) -> None:
    """Rule 2 of chunkwise._core.timings: a gap is between two reads that carried output.

    N output reads give N - 1 gaps even when reads share a stamp: the gap
    between two reads at the same instant is 0 s, counted, never skipped.
    """
    pauses = SAME_INSTANT_PAUSES[case]

    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        await writer.start()
        await writer.write(CHAT_START)
        await trio.sleep(1)
        await writer.write(chat_token(0))
        for i, pause in enumerate(pauses, 1):
            await trio.sleep(pause)
            await writer.write(chat_token(i))  # one read each: the stream is lockstep
        await writer.write(CHAT_END)
        await writer.end()

    async with serving(handler, lockstep=True) as (client, _):
        result = await _complete(client)
    assert result.content == "".join(f"t{i} " for i in range(len(pauses) + 1))
    timings = result.timings
    assert timings is not None
    assert timings.first_output == 1.0
    assert timings.last_output == pytest.approx(1.0 + sum(pauses))
    gaps = timings.gaps
    assert gaps is not None
    assert gaps.count == len(pauses)
    assert gaps.mean == pytest.approx(sum(pauses) / len(pauses))
    assert gaps.max == max(pauses)
    assert gaps.p50 == pytest.approx(sorted(pauses)[math.ceil(len(pauses) / 2) - 1], rel=0.025)


async def test_the_live_figures_grow_and_snapshots_carry_none(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with serving(paced("chat", first=1.0, between=1.0)) as (client, _):
        async with chunkwise.chat.open_stream(endpoint(), REQUEST, transport=client) as stream:
            seen = []
            async for event in stream:
                if type(event) is chunkwise.chat.TextDelta:
                    live = stream.timings
                    assert live is not None and live.ended is None
                    seen.append(live.last_output)
                    assert stream.snapshot.timings is None
    assert seen == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert stream.snapshot.timings == stream.timings


async def test_a_stream_that_fails_keeps_its_figures(
    autojump_clock: trio.testing.MockClock,
) -> None:
    body = CHAT_START + chat_token(0) + data({"error": {"message": "boom"}})
    async with serving(ScriptedResponse(body=body, head_delay=0.25)) as (client, _):
        result = await _complete(client)
    assert result.status == "failed"
    assert result.timings is not None
    assert result.timings.first_output == result.timings.ended == 0.25


# -- a Client: reused connections and retries -----------------------------------------


@pytest.fixture
async def memory_network(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[list[Any]]:
    """Connecting serves the handler in ``handlers[0]`` on a new memory stream pair."""
    handlers: list[Any] = []
    async with trio.open_nursery() as nursery:

        async def connect(origin: Any, **kwargs: Any) -> trio.abc.Stream:
            client, server = trio.testing.memory_stream_pair()
            nursery.start_soon(serve_stream, server, handlers[0])
            return client

        monkeypatch.setattr(chunkwise._net.http, "open_connection", connect)
        yield handlers
        nursery.cancel_scope.cancel()


async def test_a_reused_connection_has_no_connect_time(
    memory_network: list[Any], autojump_clock: trio.testing.MockClock
) -> None:
    memory_network.append(paced("chat"))
    async with chunkwise.Client(endpoint()) as client:
        first = await client.chat.complete(REQUEST)
        second = await client.chat.complete(REQUEST)
    assert first.timings is not None and second.timings is not None
    assert (first.timings.connection_reused, first.timings.connected) == (False, 0.0)
    assert (second.timings.connection_reused, second.timings.connected) == (True, None)
    assert second.timings.attempts == 1
    assert second.timings.first_output == pytest.approx(0.2)


async def test_retries_are_counted_and_their_waits_are_outside_first_byte(
    memory_network: list[Any], autojump_clock: trio.testing.MockClock
) -> None:
    calls = 0
    busy = ScriptedResponse.error(503, "busy", headers={"Retry-After": "3"})

    async def flaky(request: RecordedRequest, writer: ResponseWriter) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            await writer.play(busy)
        else:
            await paced("chat", head_delay=0.5)(request, writer)

    memory_network.append(flaky)
    before = trio.current_time()
    async with chunkwise.Client(endpoint()) as client:
        result = await client.chat.complete(REQUEST)
    timings = result.timings
    assert timings is not None
    assert timings.attempts == 2
    assert timings.started == before + 3.0  # after the Retry-After wait
    assert timings.first_byte == timings.response_head == 0.5
    assert timings.first_output == pytest.approx(0.7)


def loopback(server: LoopbackServer) -> chunkwise.Endpoint:
    return chunkwise.Endpoint(server.base_url, retries=chunkwise.Retries(max_retries=2))


#: What the pooled connection does with the retried request: both retriable,
#: both before any response byte of a stream.
FAILURES_ON_THE_POOLED_CONNECTION = {
    "closed before the response": "close",
    "answered 503": "503",
}


@pytest.mark.parametrize("failure", list(FAILURES_ON_THE_POOLED_CONNECTION))
async def test_a_retry_on_a_new_connection_is_reported_new_not_reused(failure: str) -> None:
    """Rule 1 of chunkwise._core.timings: an attempt's figures are its own.

    A request whose first attempt went out on a pooled connection and failed,
    then streamed on a new one, reports ``connection_reused=False`` and the new
    connection's connect time, not the failed attempt's reuse.
    """
    seen = 0

    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        nonlocal seen
        seen += 1
        if seen == 2:  # the second request, on the first request's pooled connection
            if FAILURES_ON_THE_POOLED_CONNECTION[failure] == "close":
                await writer.disconnect()
            else:
                await writer.play(
                    ScriptedResponse.error(503, "busy", headers={"retry-after-ms": "1"})
                )
            return
        await writer.play(ScriptedResponse(body=CHAT_START + chat_token(0) + CHAT_END))

    async with open_test_server(handler) as server, chunkwise.Client(loopback(server)) as client:
        first = await client.chat.complete(REQUEST)
        retried = await client.chat.complete(REQUEST)
        connections = len(server.connections)
    assert first.timings is not None and retried.timings is not None
    assert first.timings.connection_reused is False
    assert (seen, connections) == (3, 2)  # the retry went out on a second connection
    timings = retried.timings
    assert timings.attempts == 2
    assert timings.connection_reused is False
    # The new connection's own figures, in the order the attempt made them.
    assert timings.connected is not None and timings.request_sent is not None
    assert 0.0 <= timings.connected <= timings.request_sent
    assert timings.response_head is not None and timings.request_sent <= timings.response_head
    assert retried.content == "t0 "


async def test_a_retry_on_a_pooled_connection_has_no_connect_time_of_the_failed_attempt() -> None:
    """Rule 1 of chunkwise._core.timings, the other way round.

    A first attempt on a new connection that failed, retried on a connection
    another stream gave back to the pool meanwhile, reports the reuse and no
    connect time (the failed attempt's is not carried over).
    """
    second_requests = 0
    second_arrived, first_done = trio.Event(), trio.Event()

    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        nonlocal second_requests
        if request.json()["model"] == "second":
            second_requests += 1
            if second_requests == 1:
                # On a new connection: the first stream holds the only other one.
                second_arrived.set()
                await first_done.wait()
                await writer.play(
                    ScriptedResponse.error(503, "busy", headers={"retry-after-ms": "1"})
                )
                return
        await writer.play(ScriptedResponse(body=CHAT_START + chat_token(0) + CHAT_END))

    async with open_test_server(handler) as server, chunkwise.Client(loopback(server)) as client:
        retried: list[chunkwise.chat.Result] = []

        async def second() -> None:
            retried.append(await client.chat.complete({**REQUEST, "model": "second"}))

        async with client.chat.open_stream({**REQUEST, "model": "first"}) as stream:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(second)
                await second_arrived.wait()
                first = await stream.result()  # its connection is back in the pool now
                first_done.set()
        connections = len(server.connections)
    assert first.timings is not None and first.timings.connected is not None
    assert connections == 2  # the retry took the first stream's connection
    (result,) = retried
    timings = result.timings
    assert timings is not None
    assert (timings.attempts, timings.connection_reused) == (2, True)
    assert timings.connected is None
    assert result.content == "t0 "


# -- the stall timeout -----------------------------------------------------------------


#: What a server sends after its last output: how the reader spends the wait.
Tail = Callable[[ResponseWriter], Awaitable[None]]


async def silence(writer: ResponseWriter) -> None:
    """No byte at all: the wait for the next read is what expires."""
    await trio.sleep_forever()


def every_second(piece: Callable[[int], bytes]) -> Tail:
    """``piece(i)``, one a second, forever: reads that never carry output."""

    async def tail(writer: ResponseWriter) -> None:
        for i in itertools.count():
            await trio.sleep(1)
            await writer.write(piece(i))

    return tail


def trickled(event: bytes) -> Tail:
    """``event`` a byte a second, never finished: reads that complete no event."""

    async def tail(writer: ResponseWriter) -> None:
        for byte in event.rstrip(b"\n"):
            await trio.sleep(1)
            await writer.write(bytes([byte]))
        await trio.sleep_forever()

    return tail


def usage_chunk(i: int) -> bytes:
    """A usage-only chunk: a UsageReported event, not output."""
    return data(chunk(usage={**USAGE, "completion_tokens": 2 + i, "total_tokens": 5 + i}))


def tool_call_started(i: int) -> bytes:
    """A chat tool call named, its arguments still to come: ToolCallStarted, not output."""
    return data(chunk(choice(tool_calls=[tool(i, id=f"call_{i}", name="f", arguments="")])))


def reasoning_item_added(i: int) -> bytes:
    """A Responses reasoning item added, no text yet: OutputItemAdded, not output."""
    item = {"id": f"rs_{i}", "type": "reasoning", "summary": []}
    return typed({"type": "response.output_item.added", "output_index": i + 1, "item": item})


def function_call_added(i: int) -> bytes:
    """A Responses function call added, no arguments yet: not output."""
    item = {"id": f"fc_{i}", "type": "function_call", "call_id": f"c{i}", "name": "f"}
    event = {"type": "response.output_item.added", "output_index": i + 1}
    return typed({**event, "item": {**item, "arguments": ""}})


EMPTY_DELTA = data(chunk(choice(content="")))
RESPONSES_KEEPALIVE = typed({"type": "keepalive"})
RESPONSES_KEEP_ALIVE = typed({"type": "response.keep_alive"})


def stalling(api: str, tail: Tail) -> Any:
    """Two tokens (at 0 s and 1 s), then ``tail``: never any output again."""
    _, _, start, token, _ = SHAPES[api]

    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        await writer.start()
        await writer.write(start + token(0))
        await trio.sleep(1)
        await writer.write(token(1))
        await tail(writer)

    return handler


#: The paths of the reader's wait after the last output, each a way a server stalls.
STALLS: dict[str, tuple[str, Tail]] = {
    # Nothing read: the wait itself runs out.
    "chat silence": ("chat", silence),
    "responses silence": ("responses", silence),
    "messages silence": ("messages", silence),
    # Bytes read, no event completed.
    "chat keep-alive comments": ("chat", every_second(lambda i: KEEPALIVE)),
    "chat an event trickled, never finished": ("chat", trickled(chat_token(9))),
    # Events decoded, none parsed into an event.
    "chat role-only chunks": ("chat", every_second(lambda i: CHAT_START)),
    "chat empty deltas": ("chat", every_second(lambda i: EMPTY_DELTA)),
    "responses keepalive events": ("responses", every_second(lambda i: RESPONSES_KEEPALIVE)),
    "responses keep_alive events": ("responses", every_second(lambda i: RESPONSES_KEEP_ALIVE)),
    "messages pings": ("messages", every_second(lambda i: MESSAGES_PING)),
    # Events parsed and published, none of them output.
    "chat usage-only chunks": ("chat", every_second(usage_chunk)),
    "chat tool calls started": ("chat", every_second(tool_call_started)),
    "responses reasoning items added": ("responses", every_second(reasoning_item_added)),
    "responses function calls added": ("responses", every_second(function_call_added)),
}


@pytest.mark.parametrize("case", list(STALLS))
async def test_a_stall_ends_the_stream_incomplete_keeping_the_output(
    case: str, autojump_clock: trio.testing.MockClock
) -> None:
    """After the last output, whatever else a server sends (or nothing), the stall timeout ends it.

    The stream ends incomplete (``stalled``) at the last output plus the
    timeout, keeping the output, with the StallTimeout as its error.
    """
    api, tail = STALLS[case]
    open_stream, request, *_ = SHAPES[api]
    async with serving(stalling(api, tail)) as (client, server):
        with trio.fail_after(60):
            async with open_stream(endpoint(stall=5.5), request, transport=client) as stream:
                result = await stream.result()
        await server.client_closed.wait()
    assert result.status == "incomplete"
    assert result.reason is IncompleteReason.STALLED
    assert str(result.reason) == "stalled"
    if isinstance(result, chunkwise.chat.Result):
        text = result.content
    else:
        text = result.text if isinstance(result, chunkwise.messages.Result) else result.output_text
    assert text == "t0 t1 "
    (anomaly,) = [a for a in result.anomalies if a.kind == "transport error"]
    assert anomaly.detail == "no output from 127.0.0.1:9 for 5.5 s"
    # The timeout is the result's error, the status staying incomplete (issue 21).
    assert type(result.error) is chunkwise.StallTimeout
    assert str(result.error) == anomaly.detail and result.error.timeout == 5.5
    assert result.timings is not None
    assert result.timings.last_output == 1.0
    assert result.timings.ended == 6.5  # the last output, plus the stall timeout


#: Reads whose events are not output, and how to tell from the result that they came.
NOT_OUTPUT: dict[str, tuple[str, Callable[[int], bytes], type[chunkwise.Event]]] = {
    "chat usage-only chunks": ("chat", usage_chunk, chunkwise.UsageReported),
    "chat tool calls started": ("chat", tool_call_started, chunkwise.chat.ToolCallStarted),
    "responses reasoning items added": (
        "responses",
        reasoning_item_added,
        chunkwise.responses.OutputItemAdded,
    ),
    "responses function calls added": (
        "responses",
        function_call_added,
        chunkwise.responses.ToolCallStarted,
    ),
}


@pytest.mark.parametrize("case", list(NOT_OUTPUT))
async def test_events_that_are_not_output_do_not_hold_off_the_stall_timeout(
    case: str, autojump_clock: trio.testing.MockClock
) -> None:
    """Only a read carrying output resets the stall timeout, not any read with events.

    One token, then a non-output event every second forever: the subscriber
    receives those events, and the stream still ends stalled 5 s after the token.
    """
    api, piece, kind = NOT_OUTPUT[case]
    open_stream, request, start, token, _ = SHAPES[api]

    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        await writer.start()
        await writer.write(start + token(0))
        await every_second(piece)(writer)

    received: list[chunkwise.Event] = []
    async with serving(handler) as (client, _):
        with trio.fail_after(60):
            async with open_stream(endpoint(stall=5), request, transport=client) as stream:
                async for event in stream:
                    received.append(event)
                result = stream.snapshot
    assert result.reason is IncompleteReason.STALLED
    assert type(result.error) is chunkwise.StallTimeout
    assert result.timings is not None
    assert (result.timings.last_output, result.timings.ended) == (0.0, 5.0)
    # Published as they came (at 1, 2, 3 and 4 s): events, and not output.
    (token_at,) = [
        i
        for i, e in enumerate(received)
        if type(e) in (chunkwise.chat.TextDelta, responses.TextDelta)
    ]
    assert sum(type(event) is kind for event in received[token_at:]) == 4


def test_stall_timeout_is_a_transport_error_like_the_idle_timeout() -> None:
    assert issubclass(StallTimeout, chunkwise.TransportError)
    assert not issubclass(StallTimeout, chunkwise.IdleTimeout)
    assert Timeouts().stall is None
    for bad in (0, -1, float("nan"), "5", True):
        with pytest.raises(chunkwise.InvalidEndpoint, match="stall timeout"):
            Timeouts(stall=bad)  # type: ignore[arg-type]


#: What a server sends during a long prefill, before any output: every path of the wait.
PREFILLS: dict[str, Callable[[int], bytes] | None] = {
    "silence": None,
    "keep-alive comments": lambda i: KEEPALIVE,
    "role-only chunks": lambda i: CHAT_START,
    "usage-only chunks": usage_chunk,
    "tool calls started": tool_call_started,
}


@pytest.mark.parametrize("case", list(PREFILLS))
async def test_the_wait_for_the_first_output_is_not_bounded_by_stall(
    case: str, autojump_clock: trio.testing.MockClock
) -> None:
    """The stall timeout bounds the waits between outputs, never the wait for the first.

    Half a minute of prefill with ``stall=5``, silent or sending what is not
    output, still completes.
    """
    piece = PREFILLS[case]

    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        await writer.start()
        for i in range(30):  # half a minute before the first output: a long prefill
            if piece is not None:
                await writer.write(piece(i))
            await trio.sleep(1)
        await writer.write(CHAT_START + chat_token(0) + CHAT_END)
        await writer.end()

    async with serving(handler) as (client, _):
        result = await _complete(client, stall=5)
    assert result.status == "complete"
    assert result.content == "t0 "
    assert result.timings is not None and result.timings.first_output == 30.0


async def test_waiting_for_a_slow_subscriber_is_not_a_stall(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        await writer.start()
        await writer.write(CHAT_START + chat_token(0))
        await trio.sleep(1)
        await writer.write(data(chunk(usage=USAGE)))  # an event, not output
        await trio.sleep(20)  # the reader waits from t=20 (its subscriber's pace): 1 s
        await writer.write(chat_token(1) + CHAT_END)
        await writer.end()

    async with serving(handler) as (client, _):
        async with chunkwise.chat.open_stream(
            endpoint(stall=5), REQUEST, transport=client
        ) as stream:
            slow = stream.subscribe(buffer_size=0)

            async def consume() -> None:
                async for _ in slow:
                    await trio.sleep(10)  # far slower than the stall timeout

            stream.start_soon(consume)
            result = await stream.result()
    assert result.status == "complete"
    assert result.content == "t0 t1 "


async def test_output_keeps_resetting_the_stall_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with serving(paced("chat", first=1.0, between=4.5)) as (client, _):
        result = await _complete(client, stall=5)
    assert result.status == "complete"
    assert result.timings is not None and result.timings.last_output == pytest.approx(19.0)


@pytest.mark.parametrize("way", ["cancel", "idle timeout", "connection lost"])
async def test_a_stream_stopped_early_ends_when_the_reading_stopped(
    way: str, autojump_clock: trio.testing.MockClock
) -> None:
    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        await writer.start(framing="close")
        await writer.write(CHAT_START + chat_token(0))
        await trio.sleep(2)
        if way == "connection lost":
            await writer.disconnect()
            return
        await trio.sleep_forever()

    async with serving(handler) as (client, _):
        timeouts = {"idle": 3.0} if way == "idle timeout" else {}
        async with chunkwise.chat.open_stream(
            endpoint(**timeouts), REQUEST, transport=client
        ) as stream:
            stream.subscribe(buffer_size=math.inf)  # the reader reads once somebody listens
            if way == "cancel":
                await trio.sleep(4)
                stream.cancel()
            result = await stream.result()
    assert result.status == "incomplete"
    assert result.timings is not None
    assert result.timings.first_output == result.timings.last_output == 0.0
    assert result.timings.ended == {"cancel": 4.0, "idle timeout": 3.0, "connection lost": 2.0}[way]


async def test_a_stream_cut_by_an_enclosing_deadline_ends_at_the_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The caller's own deadline stops the reading: ``ended`` is then, not the last read."""

    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        await writer.start(framing="close")
        await writer.write(CHAT_START + chat_token(0))
        await trio.sleep_forever()

    async with serving(handler) as (client, _):
        with trio.move_on_after(4):
            async with chunkwise.chat.open_stream(endpoint(), REQUEST, transport=client) as stream:
                stream.subscribe(buffer_size=math.inf)  # the reader reads once somebody listens
                await stream.result()
    result = stream.snapshot
    assert (result.status, result.reason) == ("incomplete", IncompleteReason.CANCELLED)
    assert result.timings is not None
    assert result.timings.first_output == result.timings.last_output == 0.0
    assert result.timings.ended == 4.0


COMPLETION_TOKEN = data({"object": "text_completion", "choices": [{"index": 0, "text": "t "}]})


#: API: how to open a stream, its request, its answer, its finish chunk.
FINISHED: dict[str, tuple[Any, dict[str, Any], bytes, bytes]] = {
    "chat": (
        chunkwise.chat.open_stream,
        REQUEST,
        CHAT_START + chat_token(0),
        data(chunk(choice(finish_reason="stop"))),
    ),
    "completions": (
        chunkwise.completions.open_stream,
        {"model": "m", "prompt": "hi"},
        COMPLETION_TOKEN,
        data({"choices": [{"index": 0, "text": "", "finish_reason": "stop"}]}),
    ),
}


@pytest.mark.parametrize("api", list(FINISHED))
async def test_the_stall_timeout_never_cuts_an_answer_that_finished(
    api: str, autojump_clock: trio.testing.MockClock
) -> None:
    """Once every started choice finished, the usage chunk and [DONE] wait on idle alone.

    A server 3 s apart between its finish, usage and [DONE] chunks, under a
    2 s stall timeout: the answer is complete with its usage, [DONE] read
    (issue 32: it ended ``stalled``, usage ``None``).
    """
    open_stream, request, answer, finish = FINISHED[api]

    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        await writer.start()
        await writer.write(answer)
        await trio.sleep(1)
        await writer.write(finish)
        await trio.sleep(3)
        await writer.write(data(chunk(usage=USAGE)))
        await trio.sleep(3)
        await writer.write(data("[DONE]"))
        await writer.end()

    async with serving(handler) as (client, _):
        with trio.fail_after(60):
            async with open_stream(endpoint(stall=2), request, transport=client) as stream:
                result = await stream.result()
    assert result.status == "complete"
    assert result.error is None and result.reason is None
    assert result.usage == USAGE
    assert not [a for a in result.anomalies if a.kind == "transport error"]
    assert result.timings is not None and result.timings.ended == 7.0


async def test_a_choice_still_streaming_keeps_the_stall_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """With two choices, one finished and one silent, the stall timeout still applies."""

    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        await writer.start()
        await writer.write(data(chunk(choice(0, content="a"), choice(1, content="b"))))
        await trio.sleep(1)
        await writer.write(data(chunk(choice(0, finish_reason="stop"))))
        await trio.sleep_forever()

    async with serving(handler) as (client, _):
        with trio.fail_after(60):
            async with chunkwise.chat.open_stream(
                endpoint(stall=2), REQUEST, transport=client
            ) as stream:
                result = await stream.result()
    assert result.reason is IncompleteReason.STALLED
    assert result.timings is not None and result.timings.ended == 2.0
    assert [c.content for c in result.choices] == ["a", "b"]


async def test_output_after_every_choice_finished_brings_the_stall_timeout_back(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Choice 1 starting after choice 0 finished: its output is bounded again."""

    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        await writer.start()
        await writer.write(data(chunk(choice(0, content="a"))))
        await writer.write(data(chunk(choice(0, finish_reason="stop"))))
        await trio.sleep(5)  # nothing awaited: idle alone
        await writer.write(data(chunk(choice(1, content="b"))))
        await trio.sleep_forever()

    async with serving(handler) as (client, _):
        with trio.fail_after(60):
            async with chunkwise.chat.open_stream(
                endpoint(stall=2), REQUEST, transport=client
            ) as stream:
                result = await stream.result()
    assert result.reason is IncompleteReason.STALLED
    assert result.timings is not None and result.timings.ended == 7.0


@pytest.mark.parametrize(
    "delta",
    [
        {"audio": {"data": "AAAA"}},
        {"audio": {"transcript": "word "}},
        {"function_call": {"arguments": "{}"}},
    ],
    ids=["audio data", "audio transcript", "function_call arguments"],
)
async def test_spoken_output_and_a_legacy_function_call_are_output(
    delta: dict[str, Any], autojump_clock: trio.testing.MockClock
) -> None:
    """Every delta that carries output counts (issue 32, item 4): no text at all, yet
    each delta holds off the stall timeout and stamps first and last output."""

    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        await writer.start()
        await writer.write(CHAT_START)
        for _ in range(4):
            await trio.sleep(1.5)
            await writer.write(data(chunk(choice(**delta))))
        await trio.sleep(1.5)
        await writer.write(CHAT_END)
        await writer.end()

    async with serving(handler) as (client, _):
        result = await _complete(client, stall=2)
    assert result.status == "complete" and result.content == ""
    timings = result.timings
    assert timings is not None
    assert (timings.first_output, timings.last_output, timings.first_content) == (1.5, 6.0, None)


def response_event(payload: dict[str, Any]) -> bytes:
    return f"event: {payload['type']}\ndata: {json.dumps(payload)}\n\n".encode()


RESPONSE_TEXT: list[dict[str, Any]] = [
    {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}},
    {"type": "response.output_item.added", "output_index": 0, "item": {"type": "message"}},
    {"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": "a"},
    {"type": "response.output_item.done", "output_index": 0, "item": {"type": "message"}},
]
WEB_SEARCH = {"id": "ws_1", "type": "web_search_call", "status": "in_progress"}


@pytest.mark.parametrize("ends_by", ["completed", "item done"])
async def test_the_stall_timeout_waits_for_a_hosted_tool_then_applies_again(
    ends_by: str, autojump_clock: trio.testing.MockClock
) -> None:
    """A web search that runs 30 s under a 2 s stall timeout, then a server that stalls.

    From the tool's first progress event to its end (its ``completed`` phase,
    or its item's end) the stall timeout waits; from the end it applies again,
    counted from there: the stream ends stalled 2 s after the tool did.
    """
    at = {"output_index": 1, "item_id": "ws_1"}
    end = (
        {"type": "response.web_search_call.completed", **at}
        if ends_by == "completed"
        else {"type": "response.output_item.done", "output_index": 1, "item": WEB_SEARCH}
    )

    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        await writer.start(framing="close")
        for payload in RESPONSE_TEXT:
            await writer.write(response_event(payload))
        await writer.write(
            response_event(
                {"type": "response.output_item.added", "output_index": 1, "item": WEB_SEARCH}
            )
        )
        await trio.sleep(1)
        await writer.write(response_event({"type": "response.web_search_call.in_progress", **at}))
        await trio.sleep(15)
        await writer.write(response_event({"type": "response.web_search_call.searching", **at}))
        await trio.sleep(15)
        await writer.write(response_event(end))
        await trio.sleep_forever()

    async with serving(handler) as (client, _):
        with trio.fail_after(600):
            async with responses.open_stream(
                endpoint(stall=2), {"model": "m", "input": "hi"}, transport=client
            ) as stream:
                result = await stream.result()
    assert result.reason is IncompleteReason.STALLED
    assert result.timings is not None and result.timings.ended == 33.0
    assert [item.type for item in result.output] == ["message", "web_search_call"]

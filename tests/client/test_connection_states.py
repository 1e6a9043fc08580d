"""The phases of one HTTP/1.1 connection and of a stream, as their state tables say.

``chunkwise._net.http11`` and ``chunkwise._stream`` each keep an explicit state
whose transitions are their rules; these tests walk every transition of the
connection's table and the stream's usual path, over memory streams.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
import trio
import trio.testing

import chunkwise
from chunkwise._net.connect import Origin
from chunkwise._net.http11 import Connection, State
from chunkwise._net.request import prepare_request
from chunkwise._stream import StreamState
from helpers.bodies import choice, chunk, sse
from helpers.servers import close_delimited, serving

ENDPOINT = chunkwise.Endpoint("http://127.0.0.1:9/v1", retries=chunkwise.Retries(max_retries=0))
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 5\r\n\r\n"
REQUEST = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


async def _exchange(
    peer_sends: bytes, close: bool = False
) -> tuple[Connection, list[State], Callable[[], Awaitable[bytes]]]:
    """A connection whose peer sends ``peer_sends`` (then closes, if ``close``), head read.

    Returns it, the states it went through, and a reader of its next body bytes.
    """
    ours, theirs = trio.testing.memory_stream_pair()
    conn = Connection(ours, Origin.of(ENDPOINT), idle_timeout=None)
    seen = [conn.state]
    await conn.send_request(prepare_request(ENDPOINT, b"{}"))
    seen.append(conn.state)
    await theirs.send_all(peer_sends)
    if close:
        await theirs.aclose()
    await conn.receive_head()
    seen.append(conn.state)
    return conn, seen, conn.receive_some


async def test_a_whole_exchange_goes_idle_head_body_done_and_back_to_idle() -> None:
    """A complete response ends DONE; a reusable DONE connection starts over IDLE."""
    conn, seen, receive = await _exchange(HEAD + b"hello")
    assert seen == [State.IDLE, State.AWAITING_HEAD, State.BODY]
    assert await receive() == b"hello"
    assert await receive() == b""
    seen.append(conn.state)
    assert conn.reusable
    conn.start_next_exchange()
    seen.append(conn.state)
    await conn.aclose()
    seen.append(conn.state)
    assert not conn.reusable
    assert seen[3:] == [State.DONE, State.IDLE, State.CLOSED]


async def test_a_body_cut_short_fails_and_every_later_read_raises_it_again() -> None:
    """A read that fails goes to FAILED: data first, then the same error on every read."""
    conn, _, receive = await _exchange(HEAD + b"hel", close=True)
    assert await receive() == b"hel"
    with pytest.raises(chunkwise.errors.IncompleteBody):
        await receive()
    states = [conn.state]
    with pytest.raises(chunkwise.errors.IncompleteBody):
        await receive()
    assert conn.why_not_reusable == "the response broke off (IncompleteBody)"
    await conn.aclose()
    assert [*states, conn.state] == [State.FAILED, State.CLOSED]
    with pytest.raises(trio.ClosedResourceError):
        await receive()


async def test_a_head_that_never_came_fails_the_exchange() -> None:
    ours, theirs = trio.testing.memory_stream_pair()
    conn = Connection(ours, Origin.of(ENDPOINT), idle_timeout=None)
    await conn.send_request(prepare_request(ENDPOINT, b"{}"))
    await theirs.aclose()
    with pytest.raises(chunkwise.ConnectionLost):
        await conn.receive_head()
    assert conn.state is State.FAILED


async def test_transitions_outside_the_table_are_refused() -> None:
    """A request is sent only when IDLE; a new exchange starts only from a reusable DONE."""
    conn, _, _ = await _exchange(HEAD + b"hello")
    with pytest.raises(RuntimeError, match="when body"):
        await conn.send_request(prepare_request(ENDPOINT, b"{}"))
    with pytest.raises(RuntimeError, match="when body"):
        conn.start_next_exchange()
    assert conn.state is State.BODY


async def test_a_stream_goes_opening_streaming_ended() -> None:
    """The reader opens, streams once somebody listens, and ENDED is ``finished``."""
    script = close_delimited(sse(chunk(choice(content="hi", finish_reason="stop"))))
    states = []
    async with (
        serving(script) as (client, _),
        chunkwise.chat.open_stream(ENDPOINT, REQUEST, transport=client) as stream,
    ):
        await trio.testing.wait_all_tasks_blocked()
        states.append((stream.state, stream.finished))  # nobody listens yet
        async for _ in stream:
            states.append((stream.state, stream.finished))
            break
        result = await stream.result()
        states.append((stream.state, stream.finished))
    assert result.content == "hi"
    assert states == [
        (StreamState.OPENING, False),
        (StreamState.STREAMING, False),
        (StreamState.ENDED, True),
    ]


def test_every_state_is_named_in_its_table() -> None:
    # The tables in the modules' docstrings list every state the enums have.
    from chunkwise import _stream
    from chunkwise._net import http11 as _http11

    for module, states in ((_http11, State), (_stream, StreamState)):
        assert module.__doc__ is not None
        for state in states:
            assert state.name in module.__doc__, (module.__name__, state.name)

"""Reading TLS: the records a socket read brought reach h11 together.

:meth:`trio.SSLStream.receive_some` decrypts one TLS record per call, and a
server that flushes every event sends one small record each.
:func:`chunkwise._connect.take_buffered` takes the records already buffered
without waiting (the rules are in ``chunkwise._connect``'s docstring).  These
tests count reads, never time them: the server writes every record before the
client reads anything, so what one read can see does not depend on scheduling.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest
import trio
import trio.testing

import chunkwise
from chunkwise import _http11
from chunkwise._connect import take_buffered
from chunkwise.testing import (
    RecordedRequest,
    ResponseWriter,
    ScriptedResponse,
    open_test_server,
    serve_stream,
    tls_contexts,
)
from helpers import choice, chunk, sse

REQUEST = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
WORDS = [f"word {i} " for i in range(30)]
BODY = sse(
    chunk(choice(role="assistant", content="")),
    *(chunk(choice(content=word)) for word in WORDS),
    chunk(choice(finish_reason="stop")),
)
# One write per event: one HTTP chunk, and over TLS one record, each.
EVENTS = [piece + b"\n\n" for piece in BODY.split(b"\n\n") if piece]


Raw = trio.StapledStream[trio.testing.MemorySendStream, trio.testing.MemoryReceiveStream]


@asynccontextmanager
async def tls_memory_pair() -> AsyncIterator[tuple[trio.SSLStream[Raw], trio.SSLStream[Raw]]]:
    """A handshaken client and server :class:`trio.SSLStream` over memory streams.

    The client's raw incoming stream is ``client.transport_stream.receive_stream``.
    """
    server_context, client_context = tls_contexts()
    raw_client, raw_server = trio.testing.memory_stream_pair()
    client = trio.SSLStream(raw_client, client_context, server_hostname="127.0.0.1")
    server = trio.SSLStream(raw_server, server_context, server_side=True)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(client.do_handshake)
        nursery.start_soon(server.do_handshake)
    yield client, server


async def test_records_already_received_are_taken_in_one_call() -> None:
    async with tls_memory_pair() as (client, server):
        for event in EVENTS:
            await server.send_all(event)  # each one TLS record
        first = await client.receive_some(65536)
        assert first == EVENTS[0]  # trio alone: one record
        assert take_buffered(client, 65536) == b"".join(EVENTS[1:])
        assert take_buffered(client, 65536) == b""


async def test_taking_stops_at_max_bytes_and_leaves_the_rest() -> None:
    async with tls_memory_pair() as (client, server):
        for event in EVENTS:
            await server.send_all(event)
        await client.receive_some(65536)
        taken = take_buffered(client, 10)
        assert taken == b"".join(EVENTS[1:])[:10]
        rest = bytearray(taken)
        while len(rest) < len(b"".join(EVENTS[1:])):
            rest += await client.receive_some(65536)
            rest += take_buffered(client, 65536)
        assert rest == b"".join(EVENTS[1:])


async def test_a_partial_record_is_left_for_the_next_receive() -> None:
    async with tls_memory_pair() as (client, server):
        await server.send_all(EVENTS[0])
        await server.send_all(EVENTS[1])
        # Hold back the last bytes of the second record: it cannot be decrypted yet.
        incoming = client.transport_stream.receive_stream
        data = await incoming.receive_some()
        incoming.put_data(data[:-3])
        assert await client.receive_some(65536) == EVENTS[0]
        assert take_buffered(client, 65536) == b""  # never waits
        incoming.put_data(data[-3:])
        assert await client.receive_some(65536) == EVENTS[1]


async def test_the_peers_close_is_left_for_the_next_receive() -> None:
    async with tls_memory_pair() as (client, server):
        for event in EVENTS[:3]:
            await server.send_all(event)
        await server.aclose()  # close_notify after the records
        assert await client.receive_some(65536) == EVENTS[0]
        assert take_buffered(client, 65536) == EVENTS[1] + EVENTS[2]
        assert await client.receive_some(65536) == b""


async def test_a_corrupt_record_is_left_for_the_next_receive_to_raise() -> None:
    async with tls_memory_pair() as (client, server):
        for event in EVENTS[:3]:
            await server.send_all(event)
        incoming = client.transport_stream.receive_stream
        # An application-data record whose contents fail authentication.
        incoming.put_data(b"\x17\x03\x03\x00\x20" + bytes(32))
        assert await client.receive_some(65536) == EVENTS[0]
        assert take_buffered(client, 65536) == EVENTS[1] + EVENTS[2]
        with pytest.raises(trio.BrokenResourceError):
            await client.receive_some(65536)


async def test_without_the_private_attributes_nothing_is_taken(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with tls_memory_pair() as (client, server):
        for event in EVENTS[:3]:
            await server.send_all(event)
        assert await client.receive_some(65536) == EVENTS[0]
        with monkeypatch.context() as patch:
            patch.setattr(client, "_incoming", None)
            assert take_buffered(client, 65536) == b""
        # trio's own reads are unaffected: one record each, as without chunkwise.
        assert await client.receive_some(65536) == EVENTS[1]


async def test_other_streams_give_nothing() -> None:
    raw_client, raw_server = trio.testing.memory_stream_pair()
    await raw_server.send_all(b"data")
    assert take_buffered(raw_client, 65536) == b""


class GatedStream(trio.abc.Stream):
    """A transport that counts its reads, and makes them wait for ``gate`` once it is set."""

    def __init__(self, transport_stream: trio.abc.Stream) -> None:
        self.transport_stream = transport_stream
        self.gate: trio.Event | None = None
        self.reads = 0

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.transport_stream.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.transport_stream.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        if self.gate is not None:
            await self.gate.wait()
        self.reads += 1
        return await self.transport_stream.receive_some(max_bytes)

    async def aclose(self) -> None:
        await self.transport_stream.aclose()


def record_per_event(
    written: trio.Event,
) -> Callable[[RecordedRequest, ResponseWriter], Awaitable[None]]:
    """A handler writing one chunk (over TLS, one record) per event, then setting ``written``."""

    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        await writer.start(200)
        for event in EVENTS:
            await writer.write(event)
        await writer.end()
        written.set()

    return handler


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts :meth:`Connection._read` calls (the connection's waits for bytes) in ``[0]``."""
    count = [0]
    read = _http11.Connection._read

    async def counting_read(self: _http11.Connection) -> bytes:
        count[0] += 1
        return await read(self)

    monkeypatch.setattr(_http11.Connection, "_read", counting_read)
    return count


async def test_a_response_of_many_records_is_taken_in_one_read(waits: list[int]) -> None:
    # Memory streams: every record the server sent is there for the client's first read.
    server_context, client_context = tls_contexts()
    raw_client, raw_server = trio.testing.memory_stream_pair()
    written = trio.Event()
    gated = GatedStream(raw_client)
    tls = trio.SSLStream(gated, client_context, server_hostname="127.0.0.1")
    server_tls = trio.SSLStream(raw_server, server_context, server_side=True)
    endpoint = chunkwise.Endpoint("https://127.0.0.1/v1", api_key="k")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve_stream, server_tls, record_per_event(written))
        await tls.do_handshake()
        gated.gate, gated.reads = written, 0  # read only once the whole response was sent
        async with chunkwise.chat.open_stream(endpoint, REQUEST, transport=tls) as stream:
            result = await stream.result()
        nursery.cancel_scope.cancel()
    assert result.status == "complete"
    assert result.content == "".join(WORDS)
    # Head, 32 chunks (each its own record) and the last chunk: one read of the
    # socket, one wait of the connection.
    assert (gated.reads, waits[0]) == (1, 1)


async def test_over_loopback_no_wait_is_for_a_record_already_received(
    waits: list[int],
) -> None:
    # Real sockets: how the records arrive in socket reads depends on the kernel,
    # but each wait takes every complete record, so the next one needs a new read.
    written = trio.Event()
    async with open_test_server(record_per_event(written), tls=True) as server:
        endpoint = server.endpoint()
        gated = GatedStream(await trio.open_tcp_stream(server.host, server.port))
        assert endpoint.ssl_context is not None
        tls = trio.SSLStream(gated, endpoint.ssl_context, server_hostname=server.host)
        await tls.do_handshake()
        gated.gate, gated.reads = written, 0
        async with chunkwise.chat.open_stream(endpoint, REQUEST, transport=tls) as stream:
            result = await stream.result()
    assert result.status == "complete"
    assert result.content == "".join(WORDS)
    assert 1 <= waits[0] <= gated.reads < len(EVENTS)


async def test_without_taking_every_record_is_a_wait(
    monkeypatch: pytest.MonkeyPatch, waits: list[int]
) -> None:
    # The count the tests above improve on: trio alone reads one record per call.
    monkeypatch.setattr(_http11, "take_buffered", lambda stream, max_bytes: b"")
    script = ScriptedResponse(body=BODY, write_sizes=tuple(len(e) for e in EVENTS))
    async with open_test_server(script, tls=True) as server:
        result = await chunkwise.chat.complete(server.endpoint(), REQUEST)
    assert result.status == "complete"
    assert waits[0] >= len(EVENTS)

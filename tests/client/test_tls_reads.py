"""Reading TLS: every record a server wrote reaches the stream, one record a read.

:meth:`trio.SSLStream.receive_some` decrypts one TLS record per call, and a
server that flushes every event sends one small record each.  trio has no
public way to take the records it already holds, so each record is a read of
its own: the cost of public APIs, written down in ``chunkwise._net.connect``.
These tests count reads, never time them: the server writes every record
before the client reads anything, so what one read can see does not depend
on scheduling.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
import trio
import trio.testing

import chunkwise
from chunkwise._net import http11 as _http11
from chunkwise.testing import (
    RecordedRequest,
    ResponseWriter,
    open_test_server,
    serve_stream,
    tls_contexts,
)
from helpers.bodies import choice, chunk, sse

REQUEST = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
WORDS = [f"word {i} " for i in range(30)]
BODY = sse(
    chunk(choice(role="assistant", content="")),
    *(chunk(choice(content=word)) for word in WORDS),
    chunk(choice(finish_reason="stop")),
)
# One write per event: one HTTP chunk, and over TLS one record, each.
EVENTS = [piece + b"\n\n" for piece in BODY.split(b"\n\n") if piece]


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


async def test_a_response_of_many_records_is_read_whole_one_record_a_read(
    waits: list[int],
) -> None:
    """Every record already received is read, in order, each by a read of the connection."""
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
    # The head, 32 chunks (each its own record) and the last chunk: trio hands
    # out one record a call, so at least one wait of the connection per event.
    assert waits[0] >= len(EVENTS)


async def test_over_loopback_every_record_reaches_the_stream() -> None:
    """A TLS stream written one record per event over a real socket arrives whole."""
    written = trio.Event()
    async with open_test_server(record_per_event(written), tls=True) as server:
        result = await chunkwise.chat.complete(server.endpoint(), REQUEST)
    assert result.status == "complete"
    assert result.content == "".join(WORDS)

"""Servers and transports for the trio client's tests, all from :mod:`chunkwise.testing`.

:func:`serving` serves a script on a memory stream; :class:`TrackedStream`,
:class:`ResettingStream` and :class:`CutStream` wrap either end of a
connection; :class:`MemoryNetwork` answers every ``trio.open_tcp_stream`` in
memory; :func:`exchange` and :func:`http_exchange` are one raw HTTP/1.1
exchange.  Nothing here imports the tools (the emulator is in
:mod:`helpers.emulator`).
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, Literal

import attrs
import h11
import trio
import trio.testing

from chunkwise.testing import (
    Handler,
    LoopbackServer,
    RecordedRequest,
    ResponseWriter,
    Script,
    ScriptedResponse,
    ServerConnection,
    serve_stream,
)


@asynccontextmanager
async def serving(
    script: Script, *, lockstep: bool = False
) -> AsyncIterator[tuple[trio.abc.HalfCloseableStream, ServerConnection]]:
    """Serve ``script`` on one end of a memory stream; yield the client's end and the connection.

    The server is :func:`chunkwise.testing.serve_stream`, so ``script`` is a
    :class:`~chunkwise.testing.ScriptedResponse`, a list of them or a handler,
    and the :class:`~chunkwise.testing.ServerConnection` records the requests
    and sets ``client_closed`` once the client has closed its end.  Memory
    streams run in virtual time under ``autojump_clock``; ``lockstep=True``
    hands the server's bytes over only as the client reads them, so what the
    client received is all the server could send.  Leaving the block stops the
    server, finished or not.
    """
    pair = trio.testing.lockstep_stream_pair if lockstep else trio.testing.memory_stream_pair
    client, server = pair()
    async with trio.open_nursery() as nursery:
        connection: ServerConnection = await nursery.start(serve_stream, server, script)
        yield client, connection
        nursery.cancel_scope.cancel()


def close_delimited(body: bytes, **kwargs: Any) -> ScriptedResponse:
    """A response whose body has no length: the server's close ends it."""
    return ScriptedResponse(body=body, framing="close", **kwargs)


def then_hang(response: ScriptedResponse) -> Handler:
    """A handler playing ``response``, then neither ending it nor closing: a silent server.

    Only a close-delimited body can be left open this way: the connection,
    which would end it, is closed when the handler returns, and it never does.
    """
    if response.framing != "close":
        raise ValueError("then_hang needs framing='close': other framings end the body")

    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        await writer.play(response)
        await trio.sleep_forever()

    return handler


class TrackedStream(trio.abc.Stream):
    """Delegates to ``inner``; keeps the bytes received and remembers closing."""

    def __init__(self, inner: trio.abc.Stream) -> None:
        self.inner = inner
        self.data = bytearray()
        self.closed = False

    @property
    def received(self) -> int:
        """How many bytes were received."""
        return len(self.data)

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        data = await self.inner.receive_some(max_bytes)
        self.data += data
        return data

    async def aclose(self) -> None:
        self.closed = True
        await self.inner.aclose()


class ResettingStream(TrackedStream):
    """A client transport whose peer resets the connection instead of closing it.

    While ``reset`` is true, the end of the peer's data raises
    :class:`trio.BrokenResourceError`, as receiving on a socket that got a TCP
    reset does; the data before it is delivered as usual.
    """

    def __init__(self, inner: trio.abc.Stream, *, reset: bool = True) -> None:
        super().__init__(inner)
        self.reset = reset

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        data = await super().receive_some(max_bytes)
        if not data and self.reset:
            raise trio.BrokenResourceError("connection reset by peer")
        return data


class CutStream(trio.abc.Stream):
    """A server's end of a connection that breaks after ``body_bytes`` bytes of its body.

    Bytes are counted from the end of the response head (the first blank
    line sent), framing included, and kept in ``body``; at the cut the
    connection is closed and every later send raises
    :class:`trio.BrokenResourceError`, as a reset socket would.  ``None``: no cut.
    ``how="hang"`` goes silent at the cut instead (the connection stays open);
    ``how="garble"`` sends an invalid chunk-size line, then closes.
    """

    def __init__(
        self,
        inner: trio.abc.Stream,
        body_bytes: int | None,
        how: Literal["close", "hang", "garble"] = "close",
    ) -> None:
        self.inner = inner
        self.how = how
        self.left = sys.maxsize if body_bytes is None else body_bytes
        self.body = bytearray()
        self.head: bytearray | None = bytearray()  # None once the head was sent
        self.cut = False

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        if self.cut:
            raise trio.BrokenResourceError("the connection was cut")
        data = bytes(data)
        if self.head is not None:
            seen = len(self.head)
            self.head += data
            end = self.head.find(b"\r\n\r\n")
            if end < 0:
                await self.inner.send_all(data)
                return
            body_start = end + 4 - seen
            self.head = None
            await self.inner.send_all(data[:body_start])
            data = data[body_start:]
        if len(data) > self.left:
            self.body += data[: self.left]
            await self.inner.send_all(data[: self.left])
            self.cut = True
            if self.how == "hang":
                await trio.sleep_forever()
            if self.how == "garble":
                await self.inner.send_all(b"\r\nzz\r\n")
            await self.inner.aclose()
            raise trio.BrokenResourceError("the connection was cut")
        self.left -= len(data)
        self.body += data
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        if self.cut:
            raise trio.ClosedResourceError("the connection was cut")
        return await self.inner.receive_some(max_bytes)

    async def aclose(self) -> None:
        await self.inner.aclose()


@attrs.define
class MemoryNetwork:
    """Connections the client opens (``trio.open_tcp_stream``), served in memory by ``handler``.

    ``cuts[n]`` (a body byte offset, or None) cuts the n-th connection's
    body there (:class:`CutStream`); later connections are whole.
    ``streams`` are the server's ends, in the order they were opened.
    """

    nursery: trio.Nursery
    handler: Any
    cuts: Sequence[int | None] = ()
    how: Literal["close", "hang", "garble"] = "close"
    streams: list[CutStream] = attrs.Factory(list)

    @property
    def opened(self) -> int:
        """How many connections the client opened."""
        return len(self.streams)

    async def open_tcp_stream(self, host: str, port: int, **kwargs: Any) -> trio.abc.Stream:
        client, served = trio.testing.memory_stream_pair()
        cut = self.cuts[self.opened] if self.opened < len(self.cuts) else None
        server = CutStream(served, cut, self.how)
        self.streams.append(server)
        self.nursery.start_soon(serve_stream, server, self.handler)
        return client


@attrs.frozen(kw_only=True)
class Exchange:
    """One HTTP/1.1 exchange as the client saw it; ``complete`` is false for a cut body."""

    status: int
    headers: dict[str, str]
    body: bytes
    complete: bool


async def exchange(
    stream: trio.abc.Stream,
    method: str,
    path: str,
    body: bytes = b"",
    headers: tuple[tuple[str, str], ...] = (),
) -> Exchange:
    """One raw HTTP/1.1 exchange on ``stream``; a cut body is returned as far as it got."""
    client = h11.Connection(h11.CLIENT)
    fields = [("Host", "127.0.0.1"), ("Content-Length", str(len(body))), *headers]
    data = client.send(h11.Request(method=method, target=path, headers=fields))
    if body:
        data = (data or b"") + (client.send(h11.Data(data=body)) or b"")
    await stream.send_all((data or b"") + (client.send(h11.EndOfMessage()) or b""))
    status, received = 0, b""
    response_headers: dict[str, str] = {}
    while True:
        try:
            event = client.next_event()
        except h11.RemoteProtocolError:
            return Exchange(status=status, headers=response_headers, body=received, complete=False)
        if event is h11.NEED_DATA:
            client.receive_data(bytes(await stream.receive_some(65536)))
        elif isinstance(event, h11.Response):
            status = event.status_code
            response_headers = {
                name.decode().lower(): value.decode() for name, value in event.headers
            }
        elif isinstance(event, h11.Data):
            received += event.data
        elif isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
            complete = isinstance(event, h11.EndOfMessage)
            return Exchange(
                status=status, headers=response_headers, body=received, complete=complete
            )


async def http_exchange(
    server: LoopbackServer,
    method: str,
    path: str,
    body: bytes = b"",
    headers: tuple[tuple[str, str], ...] = (),
) -> tuple[int, dict[str, str], bytes]:
    """One raw HTTP/1.1 exchange: (status, lower-cased headers, body)."""
    stream = await trio.open_tcp_stream(server.host, server.port)
    async with stream:
        got = await exchange(stream, method, path, body, headers)
    return got.status, got.headers, got.body

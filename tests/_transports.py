"""Transports for tests: a tracked client stream and a scripted server over memory streams."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import trio
import trio.testing


class TrackedStream(trio.abc.Stream):
    """Delegates to ``inner``; counts the bytes received and remembers closing."""

    def __init__(self, inner: trio.abc.Stream) -> None:
        self.inner = inner
        self.received = 0
        self.closed = False

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        data = await self.inner.receive_some(max_bytes)
        self.received += len(data)
        return data

    async def aclose(self) -> None:
        self.closed = True
        await self.inner.aclose()


def head(framing: str = "close", length: int | None = None) -> bytes:
    lines = ["HTTP/1.1 200 OK", "Content-Type: text/event-stream"]
    if framing == "chunked":
        lines.append("Transfer-Encoding: chunked")
    elif framing == "length":
        lines.append(f"Content-Length: {length}")
    else:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def read_request(stream: trio.abc.Stream) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        data += await stream.receive_some()
    head_bytes, _, body = data.partition(b"\r\n\r\n")
    length = int(
        next(
            line.split(b":")[1]
            for line in head_bytes.split(b"\r\n")
            if line.lower().startswith(b"content-length")
        )
    )
    while len(body) < length:
        body += await stream.receive_some()
    return body


class FakeServer:
    """Writes a raw response in pieces, with optional pauses; records EOF from the client."""

    def __init__(
        self,
        pieces: Sequence[bytes],
        *,
        delay: float = 0.0,
        close: bool = True,
        hang: bool = False,
    ) -> None:
        self.pieces = pieces
        self.delay = delay
        self.close = close
        self.hang = hang
        self.request: dict[str, Any] | None = None
        self.client_closed = trio.Event()

    async def run(self, stream: trio.abc.Stream) -> None:
        self.request = json.loads(await read_request(stream))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._watch_for_eof, stream)
            try:
                for piece in self.pieces:
                    await stream.send_all(piece)
                    if self.delay:
                        await trio.sleep(self.delay)
                if self.hang:
                    await trio.sleep_forever()
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
            if self.close:
                await stream.send_stream.aclose()  # type: ignore[attr-defined]

    async def _watch_for_eof(self, stream: trio.abc.Stream) -> None:
        try:
            while await stream.receive_some():
                pass
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        self.client_closed.set()


@asynccontextmanager
async def serving(server: FakeServer) -> AsyncIterator[trio.abc.Stream]:
    """Run ``server`` on one end of a memory stream; yield the client's end.

    Leaving the block stops the server, finished or not.
    """
    client, server_stream = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(server.run, server_stream)
        yield client
        nursery.cancel_scope.cancel()


def pieces_of(body: bytes, size: int) -> list[bytes]:
    return [body[i : i + size] for i in range(0, len(body), size)]

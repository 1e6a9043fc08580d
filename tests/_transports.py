"""A client transport wrapper for tests that need to see what the client did."""

from __future__ import annotations

import trio


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

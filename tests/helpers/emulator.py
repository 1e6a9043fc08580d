"""The one helper that needs the tools: the OpenAI-compatible emulator on a memory network.

For the library's tests of behaviour only a real server shows (background
resumption's retrieve and resume requests); everything else in ``tests/``
uses :mod:`chunkwise.testing`'s scripted servers and imports no tools.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, Literal

import pytest
import trio

from chunkwise_tools.server import ChatServer, ServerOptions
from helpers.servers import MemoryNetwork


@asynccontextmanager
async def memory_network(
    monkeypatch: pytest.MonkeyPatch,
    cuts: Sequence[int | None] = (),
    how: Literal["close", "hang", "garble"] = "close",
    **options: Any,
) -> AsyncIterator[MemoryNetwork]:
    """A :class:`~chunkwise_tools.server.ChatServer` (``options``) that every connection reaches.

    Its background runs live in this block's nursery, so virtual time
    (``autojump_clock``) is exact; leaving the block stops them.
    """
    async with trio.open_nursery() as nursery:
        handler = ChatServer(ServerOptions(**options), nursery=nursery)
        network = MemoryNetwork(nursery, handler, cuts, how)
        monkeypatch.setattr(trio, "open_tcp_stream", network.open_tcp_stream)
        yield network
        nursery.cancel_scope.cancel()

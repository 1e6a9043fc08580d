"""The one helper module of the library's tests that needs the tools: their
OpenAI-compatible emulator, on a memory network or on a loopback socket.

For the library's tests of behaviour only a real server shows: background
resumption's create, retrieve and resume requests (``tests/client/test_resume.py``)
and schema-driven structured output streamed end to end
(``tests/client/test_live_values_end_to_end.py``).  Everything else in
``tests/`` uses :mod:`chunkwise.testing`'s scripted servers and imports no tools.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, Literal

import pytest
import trio

from chunkwise.testing import LoopbackServer
from chunkwise_tools.server import ChatServer, ServerOptions, open_chat_server
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


@asynccontextmanager
async def emulator(**options: Any) -> AsyncIterator[LoopbackServer]:
    """The emulator (``options`` are its :class:`~chunkwise_tools.server.ServerOptions`)
    on a loopback socket."""
    async with open_chat_server(ServerOptions(**options)) as server:
        yield server

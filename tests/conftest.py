"""Fixtures for every test: ports nobody listens on, servers that never answer."""

from __future__ import annotations

import functools
import socket
from collections.abc import AsyncIterator

import pytest
import trio


@pytest.fixture
def refused_port() -> int:
    """A loopback port with nobody listening on it: connecting is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.fixture
async def silent_port() -> AsyncIterator[int]:
    """A loopback port whose server accepts connections and never sends a byte.

    An ``https://`` client connected to it waits in the TLS handshake.
    """

    async def hold(stream: trio.SocketStream) -> None:
        async with stream:
            await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            functools.partial(trio.serve_tcp, hold, 0, host="127.0.0.1")
        )
        yield listeners[0].socket.getsockname()[1]
        nursery.cancel_scope.cancel()

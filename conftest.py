"""Fixtures for every test: no proxy from the environment, ports nobody listens on,
servers that never answer."""

from __future__ import annotations

import functools
import os
import socket
from collections.abc import AsyncIterator

import pytest
import trio

#: The variables that send chunkwise through a proxy (either spelling counts).
PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


@pytest.fixture(autouse=True)
def _no_proxy_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests talk to loopback servers: a proxy set on the machine (CI's, say) must not
    intercept them.  Tests of the proxy variables set their own."""
    for name in list(os.environ):
        if name.lower() in PROXY_VARIABLES:
            monkeypatch.delenv(name)


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

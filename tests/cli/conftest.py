"""Fixtures the command-line tests share: a clean environment, the API key, ports nobody
listens on, servers that never answer."""

from __future__ import annotations

import functools
import os
import socket
from collections.abc import AsyncIterator

import pytest
import trio

from helpers import KEY, KEY_VAR

#: What a command reads from the environment, besides the variables named ``OPENAI_*``.
COMMAND_VARIABLES = ("CHUNKWISE_MODEL", "NO_COLOR", KEY_VAR)


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No ``OPENAI_*`` variable, ``$CHUNKWISE_MODEL``, ``$NO_COLOR`` or ``$KEY_VAR``.

    Every command-line test starts from this environment, and the processes it
    starts inherit it (see ``helpers.run_python``).
    """
    for name in list(os.environ):
        if name.startswith("OPENAI_") or name in COMMAND_VARIABLES:
            monkeypatch.delenv(name)


@pytest.fixture
def api_key(monkeypatch: pytest.MonkeyPatch) -> str:
    """``$KEY_VAR`` holds :data:`helpers.KEY` (which this returns)."""
    monkeypatch.setenv(KEY_VAR, KEY)
    return KEY


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

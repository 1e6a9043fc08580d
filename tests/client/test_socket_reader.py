"""The plain-TCP reader's rules (:mod:`chunkwise._net.arrivals`, rule 5).

The reader reads through trio's public socket (``SocketStream.socket`` and its
``recvmsg``), so it keeps trio's contract: every read is a checkpoint, a
cancelled read takes nothing, and closing the stream wakes a waiting read.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
import trio
import trio.testing

from chunkwise._net.arrivals import SUPPORTED, SocketReader, open_reader
from chunkwise.testing import ScriptedResponse, open_test_server

pytestmark = pytest.mark.skipif(not SUPPORTED, reason="the socket reader: 64-bit Linux only")


@pytest.fixture
def pair() -> Iterator[tuple[trio.socket.SocketType, socket.socket]]:
    """A connected pair: a trio socket to read, and its peer."""
    ours, theirs = socket.socketpair()
    with trio.socket.from_stdlib_socket(ours) as sock, theirs:
        yield sock, theirs


async def _send_later(peer: socket.socket, data: bytes) -> None:
    await trio.testing.wait_all_tasks_blocked()
    peer.sendall(data)


@pytest.mark.parametrize("there", [True, False], ids=["bytes already there", "bytes later"])
async def test_every_read_is_a_checkpoint_and_returns_what_arrived(
    pair: tuple[trio.socket.SocketType, socket.socket], there: bool
) -> None:
    """A read returns the bytes that arrived, unstamped when stamping is off, at a checkpoint."""
    sock, peer = pair
    reader = SocketReader(sock, stamped=False)
    if there:
        peer.sendall(b"token")
        with trio.testing.assert_checkpoints():
            assert await reader.receive(100) == (b"token", None)
    else:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_send_later, peer, b"later")
            assert await reader.receive(100) == (b"later", None)
    peer.close()
    assert await reader.receive(100) == (b"", None)  # the peer's close


async def test_a_cancelled_read_takes_nothing(
    pair: tuple[trio.socket.SocketType, socket.socket],
) -> None:
    """A read cancelled before it ran leaves the bytes for the next read."""
    sock, peer = pair
    reader = SocketReader(sock, stamped=False)
    peer.sendall(b"kept")
    with trio.CancelScope() as scope:
        scope.cancel()
        await reader.receive(100)
    assert scope.cancelled_caught
    assert await reader.receive(100) == (b"kept", None)


async def test_closing_trios_socket_wakes_a_waiting_read() -> None:
    """Closing stays trio's: a read waiting on the stream's socket ends with ClosedResourceError."""
    async with open_test_server(ScriptedResponse(body=b"")) as server:
        tcp = await trio.open_tcp_stream("127.0.0.1", server.port)
        reader = open_reader(tcp)
        assert reader is not None
        raised = []

        async def read() -> None:
            with pytest.raises(trio.ClosedResourceError):
                await reader.receive(100)
            raised.append(True)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(read)
            await trio.testing.wait_all_tasks_blocked()
            await tcp.aclose()
        assert raised


async def test_the_reader_reads_the_streams_own_public_socket() -> None:
    """The reader is built on ``SocketStream.socket`` itself, nothing under it (rule 5)."""
    async with open_test_server(ScriptedResponse(body=b"")) as server:
        tcp = await trio.open_tcp_stream("127.0.0.1", server.port)
        async with tcp:
            reader = open_reader(tcp)
            assert reader is not None and reader.socket is tcp.socket

"""The plain-TCP reader's rules (:mod:`chunkwise._arrivals`, rules 5 and 6).

A token stream's next bytes are almost never there when the reader asks, so
the reader waits for readability first and calls ``recvmsg`` once: no failed
call and no ``BlockingIOError`` per read.  These tests count the calls on a
socket subclass, and hold the reader to trio's checkpoint contract.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest
import trio
import trio.testing

from chunkwise._arrivals import SUPPORTED, SocketReader, open_reader
from chunkwise.testing import ScriptedResponse, open_test_server

pytestmark = pytest.mark.skipif(not SUPPORTED, reason="the direct reader: 64-bit Linux only")


class CountingSocket(socket.socket):
    """A socket that counts its ``recvmsg`` calls, and those that found nothing."""

    calls = 0
    empty = 0
    spurious = 0  # calls still to fail with EAGAIN as if the wake had been spurious

    def recvmsg(self, *args: Any) -> Any:
        self.calls += 1
        if self.spurious:
            self.spurious -= 1
            self.empty += 1
            raise BlockingIOError
        try:
            return super().recvmsg(*args)
        except BlockingIOError:
            self.empty += 1
            raise


@pytest.fixture
def pair() -> Iterator[tuple[CountingSocket, socket.socket]]:
    """A connected pair: a counting, non-blocking socket to read, and its peer."""
    ours, theirs = socket.socketpair()
    counting = CountingSocket(fileno=ours.detach())
    counting.setblocking(False)
    with counting, theirs:
        yield counting, theirs


async def _send_later(peer: socket.socket, data: bytes) -> None:
    await trio.sleep(0.01)
    peer.sendall(data)


async def test_each_read_waits_first_and_calls_recvmsg_once(
    pair: tuple[CountingSocket, socket.socket],
) -> None:
    sock, peer = pair
    reader = SocketReader(sock, stamped=False)
    for k in range(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_send_later, peer, b"token %d" % k)
            data, arrived = await reader.receive(65536)
        assert (data, arrived) == (b"token %d" % k, None)
    # trio's socket would have tried first: ten calls, five of them EAGAIN.
    assert (sock.calls, sock.empty) == (5, 0)


async def test_after_a_full_read_the_next_is_tried_before_waiting(
    pair: tuple[CountingSocket, socket.socket], monkeypatch: pytest.MonkeyPatch
) -> None:
    sock, peer = pair
    reader = SocketReader(sock, stamped=False)
    peer.sendall(b"x" * 150)
    waits = []
    wait_readable = trio.lowlevel.wait_readable

    async def counting_wait(fd: Any) -> None:
        waits.append(fd)
        await wait_readable(fd)

    monkeypatch.setattr(trio.lowlevel, "wait_readable", counting_wait)
    assert await reader.receive(100) == (b"x" * 100, None)  # waited: a new reader always does
    assert await reader.receive(100) == (b"x" * 50, None)  # tried at once: the buffer was full
    assert len(waits) == 1
    # A read short of its buffer means the socket is drained: the next one waits again.
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_send_later, peer, b"y")
        assert await reader.receive(100) == (b"y", None)
    assert len(waits) == 2
    assert (sock.calls, sock.empty) == (3, 0)


async def test_a_spurious_wake_waits_again(pair: tuple[CountingSocket, socket.socket]) -> None:
    sock, peer = pair
    reader = SocketReader(sock, stamped=False)
    peer.sendall(b"late")
    sock.spurious = 2
    assert await reader.receive(100) == (b"late", None)
    assert (sock.calls, sock.empty) == (3, 2)


@pytest.fixture(params=["waits", "tries first"])
async def either_reader(
    request: pytest.FixtureRequest, pair: tuple[CountingSocket, socket.socket]
) -> SocketReader:
    """A reader of ``pair`` whose next read waits first, or tries first (after a full read)."""
    sock, peer = pair
    reader = SocketReader(sock, stamped=False)
    if request.param == "tries first":
        peer.sendall(b"x" * 10)
        assert await reader.receive(10) == (b"x" * 10, None)
    return reader


async def test_every_read_is_a_checkpoint(
    pair: tuple[CountingSocket, socket.socket], either_reader: SocketReader
) -> None:
    pair[1].sendall(b"y" * 10)
    with trio.testing.assert_checkpoints():
        assert await either_reader.receive(10) == (b"y" * 10, None)


async def test_a_cancelled_read_takes_nothing(
    pair: tuple[CountingSocket, socket.socket], either_reader: SocketReader
) -> None:
    pair[1].sendall(b"kept")
    with trio.CancelScope() as scope:
        scope.cancel()
        await either_reader.receive(100)
    assert scope.cancelled_caught
    assert await either_reader.receive(100) == (b"kept", None)


async def test_closing_trios_socket_wakes_a_waiting_read() -> None:
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


async def test_without_trios_private_socket_there_is_no_reader(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Rule 6: another trio, another layout: trio reads, unstamped.
    async with open_test_server(ScriptedResponse(body=b"")) as server:
        tcp = await trio.open_tcp_stream("127.0.0.1", server.port)
        async with tcp:
            assert open_reader(tcp) is not None
            with monkeypatch.context() as patch:
                patch.setattr(tcp.socket, "_sock", object())
                assert open_reader(tcp) is None
            with monkeypatch.context() as patch:
                patch.delattr(tcp.socket, "_sock")
                assert open_reader(tcp) is None

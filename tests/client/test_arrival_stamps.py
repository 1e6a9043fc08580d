"""A read is stamped when its bytes reached this host, not when the reader ran (Linux, plain TCP).

With hundreds of streams whose tokens are due at the same instant, a reader runs
milliseconds after its bytes arrived, by a different amount each read, and every
inter-token gap carried that.  The kernel's receive timestamp
(:mod:`chunkwise._net.arrivals`) does not.  Here the reader is held up on purpose,
after the server has written, by blocking trio's thread: the stamp must still be
no later than the moment the bytes were known to be there.  And when the
real-time clock is stepped back (the kernel's stamp then looks ahead of it),
the stamp is never in the future.
"""

from __future__ import annotations

import json
import socket
import ssl
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

import attrs
import pytest
import trio
import trio.testing

import chunkwise
import chunkwise._net.arrivals
from chunkwise._net.arrivals import SUPPORTED, open_reader
from chunkwise.testing import ScriptedResponse, open_test_server
from helpers.bodies import choice, chunk

REQUEST = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
HOLD_UP = 0.3


def _event(payload: object) -> bytes:
    return f"data: {json.dumps(payload)}\n\n".encode()


@contextmanager
def _two_token_server(
    go: threading.Event, written: threading.Event
) -> Iterator[tuple[str, list[BaseException]]]:
    """A server in a thread (trio's thread will be blocked): token one, then on ``go`` token two."""
    listener = socket.create_server(("127.0.0.1", 0))
    failures: list[BaseException] = []

    def serve() -> None:
        try:
            connection, _ = listener.accept()
            with connection:
                received = b""
                while b"\r\n\r\n" not in received:
                    received += connection.recv(65536)
                head, _, body = received.partition(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                while len(body) < length:
                    body += connection.recv(65536)
                connection.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                    b"Connection: close\r\n\r\n" + _event(chunk(choice(content="one ")))
                )
                go.wait(10)
                connection.sendall(_event(chunk(choice(content="two"))) + b"data: [DONE]\n\n")
                written.set()
        except BaseException as exc:  # reported by the test, not lost in the thread
            failures.append(exc)
            written.set()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1", failures
    finally:
        go.set()
        thread.join(10)
        listener.close()


@pytest.mark.skipif(not SUPPORTED, reason="kernel receive timestamps: 64-bit Linux only")
async def test_a_late_reader_stamps_the_bytes_arrival_not_its_own_turn() -> None:
    # Stamping is turned on for the host a moment after the first socket asks:
    # token two's read must not go unstamped and fall back to the clock.
    async with _kernel_stamping():
        go, written = threading.Event(), threading.Event()
        with _two_token_server(go, written) as (base_url, failures):
            endpoint = chunkwise.Endpoint(base_url, retries=chunkwise.Retries(max_retries=0))
            async with chunkwise.chat.open_stream(endpoint, REQUEST) as stream:
                async for event in stream:
                    if isinstance(event, chunkwise.chat.TextDelta) and event.text == "one ":
                        go.set()
                        assert written.wait(10)
                        known_there = trio.current_time()  # token two is in the socket by now
                        time.sleep(HOLD_UP)  # noqa: ASYNC251 - on purpose: the reader runs late
                result = await stream.result()
            assert not failures
        timings = result.timings
        assert timings is not None and timings.last_output is not None
        assert result.content == "one two"
        # The clock when the read returned would be at least known_there + HOLD_UP.
        assert timings.started + timings.last_output <= known_there + 0.001


async def test_only_a_plain_tcp_stream_is_stamped_by_the_kernel() -> None:
    # Rule 1 of chunkwise._net.arrivals: a TLS read is what OpenSSL decrypted, not one recvmsg.
    async with open_test_server(ScriptedResponse(body=b"")) as server:
        tcp = await trio.open_tcp_stream("127.0.0.1", server.port)
        async with tcp:
            tls = trio.SSLStream(tcp, ssl.create_default_context(), server_hostname="127.0.0.1")
            assert open_reader(tls) is None
            assert open_reader(trio.testing.memory_stream_pair()[0]) is None
            reader = open_reader(tcp)
            assert (reader is not None and reader.stamped) is SUPPORTED


async def test_a_test_clock_is_never_mixed_with_the_kernels(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Rule 2: virtual time has no relation to the kernel's; its figures stay exact.
    # The socket is still read directly, only unstamped.
    async with open_test_server(ScriptedResponse(body=b"")) as server:
        tcp = await trio.open_tcp_stream("127.0.0.1", server.port)
        async with tcp:
            reader = open_reader(tcp)
            assert (reader is not None) is SUPPORTED
            assert reader is None or not reader.stamped


# -- rule 3: a real-time clock stepped back -------------------------------------------

#: How far the real-time clock was stepped back after the bytes arrived (seconds).
STEPS_BACK = [2.0, 60.0, 86_400.0]


def _stepped_back(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """The reader's real-time clock runs ``seconds`` behind the kernel's stamps."""

    class SteppedBack:
        @staticmethod
        def time_ns() -> int:
            return time.time_ns() - int(seconds * 1e9)

    monkeypatch.setattr(chunkwise._net.arrivals, "time", SteppedBack)


@asynccontextmanager
async def _connected() -> AsyncIterator[tuple[trio.SocketStream, socket.socket]]:
    """A plain TCP connection: trio's end, and its peer as a blocking standard socket."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        tcp = await trio.open_tcp_stream("127.0.0.1", listener.getsockname()[1])
        async with tcp:
            peer, _ = listener.accept()  # already connected: the backlog holds it
            with peer:
                yield tcp, peer


@asynccontextmanager
async def _kernel_stamping() -> AsyncIterator[None]:
    """Kernel receive stamps are flowing for as long as the block runs.

    Linux turns its receive stamping on for the whole host when the first
    socket asks, a moment later (the first segments after may go unstamped,
    rule 4's ``None``): one socket reads until a segment carries a stamp, and
    stays open so that stamping stays on.
    """
    async with _connected() as (tcp, peer):
        reader = open_reader(tcp)
        assert reader is not None and reader.stamped
        for _ in range(200):
            peer.sendall(b"x")
            _, arrived = await reader.receive(1024)
            if arrived is not None:
                break
            await trio.sleep(0.01)
        else:
            pytest.fail("the kernel never stamped a read in 2 s")
        yield


@pytest.mark.skipif(not SUPPORTED, reason="kernel receive timestamps: 64-bit Linux only")
@pytest.mark.parametrize("seconds", STEPS_BACK)
async def test_a_stamp_after_a_clock_step_back_is_the_read_not_the_future(
    seconds: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rule 3 of chunkwise._net.arrivals: a negative delay since the kernel's stamp counts as none.

    The real-time clock stepped back puts the kernel's stamp ahead of it; the
    read is then stamped when it returned, never in the future.
    """
    _stepped_back(monkeypatch, seconds)
    async with _kernel_stamping(), _connected() as (tcp, peer):
        reader = open_reader(tcp)
        assert reader is not None and reader.stamped
        peer.sendall(b"token")
        before = trio.current_time()
        data, arrived = await reader.receive(1024)
        after = trio.current_time()
    assert data == b"token"
    assert arrived is not None  # stamped by the kernel
    assert before <= arrived <= after


@pytest.mark.skipif(not SUPPORTED, reason="kernel receive timestamps: 64-bit Linux only")
@pytest.mark.parametrize("seconds", STEPS_BACK)
async def test_no_figure_of_a_stream_lies_in_the_future_after_a_clock_step_back(
    seconds: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rule 3 of chunkwise._net.arrivals, as a user meets it: every figure is in the past."""
    _stepped_back(monkeypatch, seconds)
    body = _event(chunk(choice(content="one "))) + _event(chunk(choice(content="two")))
    async with (
        _kernel_stamping(),
        open_test_server(
            ScriptedResponse(body=body + b"data: [DONE]\n\n", write_sizes=40, delay=0.01)
        ) as server,
    ):
        endpoint = chunkwise.Endpoint(server.base_url, retries=chunkwise.Retries(max_retries=0))
        result = await chunkwise.chat.complete(endpoint, REQUEST)
        now = trio.current_time()
    assert result.content == "one two"
    timings = result.timings
    assert timings is not None and timings.first_output is not None
    figures = attrs.asdict(timings, recurse=False)
    for name in ("first_byte", "first_event", "first_output", "last_output", "ended"):
        figure = figures[name]
        assert figure is not None and timings.started + figure <= now, name

"""Handlers start in turns: one per pass of trio's scheduler, across every connection.

A burst of requests must not start its handlers in one pass of the scheduler,
where their synchronous starts (parsing, building and scheduling an answer) add
up in front of a paced write that falls due (``_http_server``'s theory of
operation).  An instrument counts the passes (each follows a poll for I/O), so
two handlers that saw the same count started in the same pass.
"""

from __future__ import annotations

import socket

import trio
import trio.testing

from chunkwise.testing import RecordedRequest, ResponseWriter, open_test_server

BURST = 8
REQUEST = (
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    b"Content-Length: 2\r\nConnection: close\r\n\r\n{}"
)


class Passes(trio.abc.Instrument):
    """Counts the passes of trio's scheduler: each begins after its poll for I/O."""

    def __init__(self) -> None:
        self.count = 0

    def after_io_wait(self, timeout: float) -> None:
        self.count += 1


async def test_a_burst_of_requests_starts_its_handlers_one_pass_apart() -> None:
    passes = Passes()
    started: list[int] = []

    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        started.append(passes.count)
        await writer.start(200, content_type="text/plain")
        await writer.write(b"ok")

    async with open_test_server(handler) as server:
        # Every connection accepted and its reader parked before any request is
        # sent; then all are sent without yielding, so the next poll reports
        # every connection at once and their readers run in one pass: a burst.
        clients = [socket.create_connection((server.host, server.port)) for _ in range(BURST)]
        await trio.testing.wait_all_tasks_blocked()
        assert len(server.connections) == BURST
        trio.lowlevel.add_instrument(passes)
        for client in clients:
            client.sendall(REQUEST)
        answers: list[bytes] = []

        async def read(client: socket.socket) -> None:
            answer = b""
            with trio.socket.from_stdlib_socket(client) as sock:
                while data := await sock.recv(65536):
                    answer += data
            answers.append(answer)

        try:
            async with trio.open_nursery() as readers:
                for client in clients:
                    readers.start_soon(read, client)
        finally:
            trio.lowlevel.remove_instrument(passes)
    assert len(answers) == BURST and all(b"\r\nok\r\n" in answer for answer in answers)
    assert len(started) == BURST
    assert len(set(started)) == BURST, f"handlers started in the same pass: {started}"


async def test_a_handler_that_waits_does_not_hold_up_the_next_one() -> None:
    # The first handler waits for the second: a turn held across a handler's
    # awaits would deadlock until fail_after.
    released = trio.Event()
    order: list[str] = []

    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        if request.target.endswith("first"):
            await released.wait()
            order.append("first")
        else:
            order.append("second")
            released.set()
        await writer.start(200, content_type="text/plain")
        await writer.write(b"ok")

    async with open_test_server(handler) as server:
        address = (server.host, server.port)

        async def send(target: bytes) -> None:
            with trio.socket.socket() as sock:
                await sock.connect(address)
                await sock.send(REQUEST.replace(b"completions", target))
                while await sock.recv(65536):
                    pass

        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(send, b"first")
                await server.wait_requests(1)
                nursery.start_soon(send, b"second")
    assert order == ["second", "first"]

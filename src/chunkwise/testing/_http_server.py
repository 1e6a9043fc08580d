"""A real loopback HTTP/1.1 server replaying scripted responses (why: :mod:`chunkwise.testing`).

Theory of operation
-------------------
:func:`serve_test_server` listens on ``127.0.0.1`` (an ephemeral port by default)
and runs two tasks per connection, in a nursery owned by that connection:

* the *reader* parses requests with h11, records them in
  :attr:`LoopbackServer.requests`, and hands them over an unbuffered channel.  It
  keeps reading while the response is written, so it notices at once when the
  client closes (or resets) the connection: it then sets the connection's
  :attr:`ServerConnection.client_closed` event and cancels the response in
  progress.  That event is how tests check that a client closed its socket.
* the *responder* answers each request in order with a :class:`ResponseWriter`
  (byte by byte as scripted: :mod:`chunkwise.testing._responses`), driven by a
  :class:`ScriptedResponse` or by a handler coroutine.

When the server ends a connection itself (close-delimited framing, a scripted
disconnect, ``Connection: close``) it only shuts down its sending side, and the
reader goes on until the client closes too, so ``client_closed`` is observable
on those paths as well.  (A TLS stream cannot half-close; there the server
closes outright and ``client_closed`` is not set.)

Handlers start in turns, one per pass of trio's scheduler, in arrival order
(a lock shared by every connection of a server).  A handler's start is
synchronous work: parsing the request, building and scheduling its answer
(0.4 ms for a paced answer of 100 tokens).  Trio runs every task that is
ready in one pass and checks its timers only between passes, so 200 requests
arriving together would start 200 handlers in one pass, and a paced write
falling due meanwhile would wait for all of them (80 ms).  In turns, it waits for at
most one handler's start.  No turn is held across anything else: a handler that
awaits (a write, a sleep, a background response) has already let the next one
start.

A handler that raises takes the server down with it, so a bug in a test's
handler fails that test instead of hiding behind a 500.

TLS needs the ``test`` extra (trustme); it is imported only by :func:`tls_contexts`.
"""

from __future__ import annotations

import functools
import socket
import ssl
import struct
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager, suppress
from typing import Any, Union

import attrs
import h11
import trio

from .._core.endpoint import Endpoint
from .._core.retries import Retries
from .._core.util import url_host
from .._net.connect import socket_of
from .._net.tasks import close_now, exceptions_unwrapped
from ..types import Headers
from ._responses import RecordedRequest, ResponseWriter, ScriptedResponse

__all__ = [
    "ConnectionServer",
    "Handler",
    "LoopbackServer",
    "Script",
    "ServerConnection",
    "open_test_server",
    "serve_stream",
    "serve_test_server",
    "tls_contexts",
]

#: Requests with a larger body are answered with 413.
MAX_REQUEST_BODY = 16 * 1024 * 1024

_READ_SIZE = 64 * 1024


@attrs.define(eq=False)
class ServerConnection:
    """One accepted connection.

    ``client_closed`` is set when the server reads EOF (or a reset) from the client.
    """

    index: int
    requests: list[RecordedRequest] = attrs.field(factory=list)
    client_closed: trio.Event = attrs.field(factory=trio.Event)


Handler = Callable[[RecordedRequest, "ResponseWriter"], Awaitable[None]]
"""``async def handler(request, writer)``: answer one request through ``writer``."""

Script = Union[ScriptedResponse, "Iterable[ScriptedResponse]", Handler]
"""One response for every request, responses used in order (then a 500), or a handler."""
_UNPARSED = RecordedRequest(method="", target="", http_version="1.1", headers=Headers(()), body=b"")
_BAD_REQUEST = ScriptedResponse.error(400, "malformed HTTP request", type="invalid_request_error")
_TOO_LARGE = ScriptedResponse.error(413, "request body too large", type="invalid_request_error")


class LoopbackServer:
    """A running test server.  Created by :func:`open_test_server` / :func:`serve_test_server`.

    Attributes:
        base_url: e.g. ``"http://127.0.0.1:54321/v1"``, ready for an :class:`Endpoint`.
        requests: every complete request received, in arrival order.
        connections: every accepted connection, in order.
        client_ssl_context: a client context trusting the server, when
            :func:`open_test_server` made the certificate (``tls=True``).
        record: whether ``requests`` and ``connections`` are kept: a server
            that runs for hours (``chunkwise serve`` under load) keeps neither,
            so its memory does not grow with every request it answers.
    """

    def __init__(
        self,
        script: Script,
        *,
        scheme: str,
        host: str,
        port: int,
        client_ssl_context: ssl.SSLContext | None,
        record: bool = True,
    ) -> None:
        self.scheme = scheme
        self.record = record
        self.host = host
        self.port = port
        self.base_url: str = f"{scheme}://{url_host(host)}:{port}/v1"
        self.client_ssl_context = client_ssl_context
        self.requests: list[RecordedRequest] = []
        self.connections: list[ServerConnection] = []
        self._accepted = 0
        self._handler = _as_handler(script)
        self._turns = trio.Lock()  # handlers start in turns
        # Set by open_test_server to the scope around the caller's block.
        self._cancel_on_error: trio.CancelScope | None = None
        self._changed = trio.Event()

    def endpoint(self, **kwargs: Any) -> Endpoint:
        """An :class:`Endpoint` for this server; ``kwargs`` go to its constructor.

        Retries are off unless ``retries`` is given, so each scripted response
        reaches the test that scripted it; and the proxy environment variables
        are ignored unless ``trust_env`` is given (a loopback server is never
        behind the machine's proxy).
        """
        if self.client_ssl_context is not None:
            kwargs.setdefault("ssl_context", self.client_ssl_context)
        kwargs.setdefault("retries", Retries(max_retries=0))
        kwargs.setdefault("trust_env", False)
        return Endpoint(self.base_url, **kwargs)

    async def wait_requests(self, count: int = 1) -> None:
        """Wait until at least ``count`` requests have been received.

        Raises:
            RuntimeError: the server does not record requests.
        """
        await self._checkpoint_recording("requests")
        while len(self.requests) < count:
            await self._changed.wait()

    async def wait_client_closed(self) -> None:
        """Wait until the client has closed every connection accepted so far.

        Raises:
            RuntimeError: the server does not record connections.
        """
        await self._checkpoint_recording("connections")
        while True:
            for connection in self.connections:
                if not connection.client_closed.is_set():
                    await connection.client_closed.wait()
                    break
            else:
                return

    async def _checkpoint_recording(self, what: str) -> None:
        if not self.record:
            raise RuntimeError(f"this server does not record {what} (record=False)")
        await trio.lowlevel.checkpoint()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def _serve_connection(self, stream: trio.abc.Stream) -> None:
        connection = ServerConnection(index=self._accepted)
        self._accepted += 1
        if self.record:
            self.connections.append(connection)
        served = ConnectionServer(
            self._handler,
            connection,
            on_request=self._record,
            on_error=self._on_error,
            turns=self._turns,
            record=self.record,
        )
        await served.serve(stream)

    def _record(self, request: RecordedRequest) -> None:
        if self.record:
            self.requests.append(request)
            self._notify()

    def _on_error(self) -> None:
        # Stop the test before this connection closes: otherwise the client
        # would report the close, and the handler's bug would come second.
        if self._cancel_on_error is not None:
            self._cancel_on_error.cancel()


class ConnectionServer:
    """Serves HTTP/1.1 requests on one connected stream until either side closes it.

    ``on_request`` is called with each complete request before it is answered;
    ``on_error`` when the handler raises, before the connection is closed.
    ``turns`` is the server's, shared by its connections (a connection alone
    has its own).  With ``record=False`` the connection's ``requests`` stay empty.
    """

    def __init__(
        self,
        handler: Handler,
        connection: ServerConnection,
        *,
        on_request: Callable[[RecordedRequest], None] = lambda request: None,
        on_error: Callable[[], None] = lambda: None,
        turns: trio.Lock | None = None,
        record: bool = True,
    ) -> None:
        self._handler = handler
        self._turns = turns or trio.Lock()
        self._recording = record
        self.connection = connection
        self._on_request = on_request
        self._on_error = on_error
        self._reset = False  # a handler asked for a reset (ResponseWriter.close_after)

    async def serve(self, stream: trio.abc.Stream) -> None:
        """Serve until the connection ends; the stream is closed on every path."""
        try:
            async with trio.open_nursery() as nursery:
                send, receive = trio.open_memory_channel[ScriptedResponse | RecordedRequest](0)
                nursery.start_soon(self._read_requests, stream, send, nursery)
                with receive:
                    async for item in receive:
                        if not await self._respond(stream, item):
                            break
                if self._reset:
                    _reset(stream)
                    nursery.cancel_scope.cancel()
                    return
                # The server ends the connection.  Half-close, so the reader can still
                # see the client close; a TLS stream cannot, so stop reading.
                if isinstance(stream, trio.abc.HalfCloseableStream):
                    with suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                        await stream.send_eof()
                else:
                    nursery.cancel_scope.cancel()
        finally:
            await close_now(stream)

    async def _read_requests(
        self,
        stream: trio.abc.Stream,
        send: trio.MemorySendChannel[ScriptedResponse | RecordedRequest],
        nursery: trio.Nursery,
    ) -> None:
        with send:
            eof = await self._parse_requests(stream, send)
        # After a refusal, or once the responder has ended the connection, keep
        # reading anyway: the client's close is what tests wait for.
        while not eof:
            eof = not await _receive(stream)
        self.connection.client_closed.set()
        # Nobody is left to read a response: stop writing one.
        nursery.cancel_scope.cancel()

    async def _parse_requests(
        self,
        stream: trio.abc.Stream,
        send: trio.MemorySendChannel[ScriptedResponse | RecordedRequest],
    ) -> bool:
        """Hand over requests until the client closes (True) or we stop listening."""
        parser = h11.Connection(h11.SERVER)
        head: h11.Request | None = None
        body = bytearray()
        while True:
            try:
                event = parser.next_event()
            except h11.RemoteProtocolError:
                await _offer(send, _BAD_REQUEST)
                return False
            if event is h11.NEED_DATA:
                data = await _receive(stream)
                if not data:
                    return True
                parser.receive_data(data)
            elif isinstance(event, h11.Request):
                head, body = event, bytearray()
            elif isinstance(event, h11.Data):
                body += event.data
                if len(body) > MAX_REQUEST_BODY:
                    await _offer(send, _TOO_LARGE)
                    return False
            elif isinstance(event, h11.EndOfMessage):
                assert head is not None
                request = RecordedRequest(
                    method=head.method.decode("ascii"),
                    target=head.target.decode("ascii"),
                    http_version=head.http_version.decode("ascii"),
                    headers=Headers(head.headers.raw_items()),
                    body=bytes(body),
                )
                if self._recording:
                    self.connection.requests.append(request)
                self._on_request(request)
                if not await _offer(send, request):
                    return False
                # h11 would wait for our response before parsing the next request,
                # but we write responses ourselves: start a fresh parser instead.
                leftover, _ = parser.trailing_data
                parser = h11.Connection(h11.SERVER)
                if leftover:  # receive_data(b"") would mean EOF
                    parser.receive_data(leftover)
            else:  # pragma: no cover - h11 reports EOF only when told, which we never do
                return False

    async def _respond(
        self, stream: trio.abc.Stream, item: ScriptedResponse | RecordedRequest
    ) -> bool:
        """Answer one request; False when the connection must be closed afterwards."""
        if isinstance(item, ScriptedResponse):  # the reader refused the request
            writer = ResponseWriter(stream, _UNPARSED)
            with suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await writer.play(item)
            return False
        writer = ResponseWriter(stream, item)
        # Our turn (theory of operation): taking trio's lock is a checkpoint, and the
        # lock goes to the next waiter only when released, so the next handler
        # starts in the pass after this one.
        async with self._turns:
            pass
        try:
            try:
                await self._handler(item, writer)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                raise  # the client went away: not a bug in the handler
            except Exception:
                self._on_error()
                raise
            if writer.started and not writer.ended:
                await writer.end()
            elif not writer.started and not writer.ended:
                await writer.play(
                    ScriptedResponse.error(500, "the test server's handler sent no response")
                )
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return False  # the client went away; the reader will notice the close
        self._reset = writer.reset
        return not writer.closes_connection


def _reset(stream: trio.abc.Stream) -> None:
    """Make closing ``stream`` send a TCP RST instead of a FIN (SO_LINGER 0)."""
    sock = socket_of(stream)
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


async def _offer(
    send: trio.MemorySendChannel[ScriptedResponse | RecordedRequest],
    item: ScriptedResponse | RecordedRequest,
) -> bool:
    """Hand ``item`` to the responder; False once it has stopped taking requests."""
    try:
        await send.send(item)
    except trio.BrokenResourceError:
        return False
    return True


async def _receive(stream: trio.abc.Stream) -> bytes:
    """The next bytes from the client; ``b""`` once it has closed or reset."""
    try:
        return bytes(await stream.receive_some(_READ_SIZE))
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return b""  # a reset, or a TLS handshake the client gave up on


def _as_handler(script: Script) -> Handler:
    if isinstance(script, ScriptedResponse):
        response = script

        async def replay_one(request: RecordedRequest, writer: ResponseWriter) -> None:
            await writer.play(response)

        return replay_one
    if callable(script):
        return script
    responses = iter(list(script))

    async def replay_in_order(request: RecordedRequest, writer: ResponseWriter) -> None:
        response = next(responses, None)
        if response is None:
            response = ScriptedResponse.error(500, "the test server has no scripted response left")
        await writer.play(response)

    return replay_in_order


async def serve_test_server(
    script: Script,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    ssl_context: ssl.SSLContext | None = None,
    client_ssl_context: ssl.SSLContext | None = None,
    record: bool = True,
    task_status: trio.TaskStatus[LoopbackServer] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run a test server until cancelled; for ``await nursery.start(serve_test_server, ...)``.

    ``nursery.start`` returns the :class:`LoopbackServer` once it is listening.
    ``ssl_context`` (a server context) turns on TLS; ``client_ssl_context`` is only
    recorded, for :meth:`LoopbackServer.endpoint`.  ``record=False`` keeps no
    history (:attr:`LoopbackServer.record`).
    """
    tcp_listeners = await trio.open_tcp_listeners(port, host=host)
    real_port = tcp_listeners[0].socket.getsockname()[1]
    listeners: list[trio.abc.Listener[trio.abc.Stream]] = list(tcp_listeners)
    if ssl_context is not None:
        listeners = [
            trio.SSLListener(listener, ssl_context, https_compatible=True)
            for listener in tcp_listeners
        ]
    server = LoopbackServer(
        script,
        scheme="http" if ssl_context is None else "https",
        host=host,
        port=real_port,
        client_ssl_context=client_ssl_context,
        record=record,
    )
    try:
        async with trio.open_nursery() as nursery:
            for listener in listeners:
                nursery.start_soon(_accept_loop, listener, server._serve_connection, nursery)
            task_status.started(server)
    finally:
        for listener in listeners:
            await close_now(listener)


async def _accept_loop(
    listener: trio.abc.Listener[trio.abc.Stream],
    serve: Callable[[trio.abc.Stream], Awaitable[None]],
    nursery: trio.Nursery,
) -> None:
    # Not trio.serve_listeners: its per-connection cleanup awaits a close that raises
    # Cancelled when the server is being cancelled, hiding a handler's exception.
    while True:
        stream = await listener.accept()
        nursery.start_soon(serve, stream)


async def serve_stream(
    stream: trio.abc.Stream,
    script: Script,
    *,
    task_status: trio.TaskStatus[ServerConnection] = trio.TASK_STATUS_IGNORED,
) -> ServerConnection:
    """Serve ``script`` on one connected stream, e.g. an end of a memory stream pair.

    The same server as :func:`open_test_server`, without a socket: for virtual
    time or lockstep control of each byte.  Returns (and, under
    ``nursery.start``, starts with) the :class:`ServerConnection`.  Runs until
    the client closes its end (after the script ended the connection, if it
    did); ``stream`` is closed on every path.  A handler's exception propagates
    as itself, not wrapped in an exception group.
    """
    connection = ServerConnection(index=0)
    task_status.started(connection)
    with exceptions_unwrapped():
        await ConnectionServer(_as_handler(script), connection).serve(stream)
    return connection


@asynccontextmanager
async def open_test_server(
    script: Script,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    tls: bool = False,
    ssl_context: ssl.SSLContext | None = None,
    record: bool = True,
) -> AsyncIterator[LoopbackServer]:
    """Run a test server answering with ``script`` (a :data:`Script`) for an ``async with`` block.

    ``tls=True`` serves HTTPS with a certificate from a throwaway trustme CA for
    ``127.0.0.1``, ``localhost`` and ``::1``; :meth:`LoopbackServer.endpoint` then
    trusts it.  Or pass your own server ``ssl_context``.  ``record=False`` keeps
    no history of requests and connections (:attr:`LoopbackServer.record`).

    An exception raised inside the block propagates as itself, not wrapped in an
    exception group.
    """
    client_context = None
    if tls and ssl_context is None:
        ssl_context, client_context = tls_contexts()
    with exceptions_unwrapped():
        async with trio.open_nursery() as nursery:
            server: LoopbackServer = await nursery.start(
                functools.partial(
                    serve_test_server,
                    script,
                    host=host,
                    port=port,
                    ssl_context=ssl_context,
                    client_ssl_context=client_context,
                    record=record,
                )
            )
            server._cancel_on_error = nursery.cancel_scope
            try:
                yield server
            finally:
                nursery.cancel_scope.cancel()


def tls_contexts(*hostnames: str) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """``(server_context, client_context)`` from a new throwaway trustme CA.

    The certificate covers ``hostnames`` (default ``127.0.0.1``, ``localhost``,
    ``::1``); the client context trusts only that CA and verifies host names.
    Needs ``trustme`` (the ``test`` extra).
    """
    # Optional dependency (the test extra): imported only when TLS is asked for.
    import trustme

    ca = trustme.CA()
    certificate = ca.issue_cert(*(hostnames or ("127.0.0.1", "localhost", "::1")))
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    certificate.configure_cert(server_context)
    client_context = ssl.create_default_context()
    ca.configure_trust(client_context)
    return server_context, client_context

"""A real loopback HTTP/1.1 server that replays scripted responses.

Tests of a streaming client are only convincing against real sockets: the kernel
splits and merges writes, a peer that closes early produces a real EOF or reset,
and a client that forgets to close its socket leaks a real file descriptor.  This
module is that server, small enough to read, built on trio and h11 like the client.

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
* the *responder* answers each request in order with a :class:`ResponseWriter`,
  driven either by a :class:`ScriptedResponse` or by a handler coroutine.

Responses are written byte by byte as scripted, not through h11's writer, so a
script can produce what a correct server never would: a body cut inside a chunk,
a ``Content-Length`` that is never reached, a close-delimited body.  When the
server ends a connection itself (close-delimited framing, a scripted disconnect,
``Connection: close``) it only shuts down its sending side, and the reader goes
on until the client closes too, so ``client_closed`` is observable on those paths
as well.  (A TLS stream cannot half-close; there the server closes outright and
``client_closed`` is not set.)

Everything runs in the caller's task tree: :func:`open_test_server` owns a
nursery, and leaving its ``async with`` cancels the server and closes every
connection.  A handler that raises takes the server down with it, so a bug in a
test's handler fails that test instead of hiding behind a 500.

TLS needs the ``test`` extra (trustme); it is imported only by :func:`tls_contexts`.
"""

from __future__ import annotations

import functools
import http
import itertools
import json
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping
from contextlib import asynccontextmanager, suppress
from typing import Any, Literal, Union

import attrs
import h11
import trio

from ._endpoint import Endpoint
from ._http import Headers, close_now
from ._util import exceptions_unwrapped

__all__ = [
    "Framing",
    "Handler",
    "LoopbackServer",
    "RecordedRequest",
    "ResponseWriter",
    "Script",
    "ScriptedResponse",
    "ServerConnection",
    "open_test_server",
    "serve_test_server",
    "tls_contexts",
]

Framing = Literal["chunked", "content-length", "close"]

#: Requests with a larger body are answered with 413.
MAX_REQUEST_BODY = 16 * 1024 * 1024

_READ_SIZE = 64 * 1024


def _header_pairs(
    headers: Mapping[str, str] | Iterable[tuple[str, str]],
) -> tuple[tuple[str, str], ...]:
    items = headers.items() if isinstance(headers, Mapping) else headers
    return tuple((str(name), str(value)) for name, value in items)


def _int_tuple(values: Iterable[int]) -> tuple[int, ...]:
    return tuple(values)


def _write_sizes(value: int | Iterable[int] | None) -> int | tuple[int, ...] | None:
    sizes = value if value is None or isinstance(value, int) else tuple(value)
    if sizes is not None and (
        sizes == () or any(s <= 0 for s in ((sizes,) if isinstance(sizes, int) else sizes))
    ):
        raise ValueError("write_sizes must be positive")
    return sizes


@attrs.frozen(kw_only=True)
class ScriptedResponse:
    """One response, replayed exactly as described.

    Attributes:
        status: the status code; ``reason`` defaults to its standard phrase.
        content_type: sent as ``Content-Type`` unless ``None``.
        headers: further header fields, a mapping or ``(name, value)`` pairs.
        body: the complete body.
        framing: ``"chunked"`` (one chunk per write), ``"content-length"``, or
            ``"close"`` (no length: the server closes to end the body).
        write_sizes: bytes per write: an int, or a sequence used cyclically;
            ``None`` writes the body at once.  Each write is a separate ``send_all``
            and, when chunked, a separate chunk.
        delay: seconds to sleep between writes.
        head_delay: seconds to sleep before the status line.
        disconnect_after: close the connection after this many body bytes,
            without finishing the message (no last chunk; a ``Content-Length``
            never reached).  A cut inside a write is a cut inside that chunk.
        informational: 1xx status codes sent before the response.
    """

    status: int = 200
    reason: str | None = None
    content_type: str | None = "text/event-stream"
    headers: tuple[tuple[str, str], ...] = attrs.field(default=(), converter=_header_pairs)
    body: bytes = b""
    framing: Framing = attrs.field(
        default="chunked", validator=attrs.validators.in_(("chunked", "content-length", "close"))
    )
    write_sizes: int | tuple[int, ...] | None = attrs.field(default=None, converter=_write_sizes)
    delay: float = 0.0
    head_delay: float = 0.0
    disconnect_after: int | None = None
    informational: tuple[int, ...] = attrs.field(default=(), converter=_int_tuple)

    @classmethod
    def sse(
        cls, events: Iterable[Mapping[str, Any] | str], *, done: bool = True, **kwargs: Any
    ) -> ScriptedResponse:
        """An event stream with one ``data:`` event per item, then ``[DONE]``.

        Mappings are sent as JSON, strings as they are.
        """
        lines = [e if isinstance(e, str) else json.dumps(e) for e in events]
        if done:
            lines.append("[DONE]")
        body = "".join(f"data: {line}\n\n" for line in lines).encode()
        return cls(body=body, **kwargs)

    @classmethod
    def error(
        cls,
        status: int,
        message: Any,
        *,
        type: str | None = None,
        code: int | str | None = None,
        param: str | None = None,
        **kwargs: Any,
    ) -> ScriptedResponse:
        """An OpenAI-shaped JSON error: ``{"error": {"message", "type", "code", "param"}}``."""
        error = {"message": message, "type": type, "code": code, "param": param}
        kwargs.setdefault("framing", "content-length")
        return cls(
            status=status,
            content_type="application/json",
            body=json.dumps({"error": error}).encode(),
            **kwargs,
        )


@attrs.frozen(kw_only=True)
class RecordedRequest:
    """A request as the server received it."""

    method: str
    target: str
    http_version: str
    headers: Headers
    body: bytes

    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.body)


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
"""One response for every request, responses used in order, or a handler."""


def _status_line(status: int, reason: str | None) -> bytes:
    if reason is None:
        try:
            reason = http.HTTPStatus(status).phrase
        except ValueError:
            reason = ""
    return f"HTTP/1.1 {status} {reason}\r\n".encode("latin-1")


def _head(status: int, reason: str | None, fields: Iterable[tuple[str, str]]) -> bytes:
    lines = [_status_line(status, reason)]
    lines.extend(f"{name}: {value}\r\n".encode() for name, value in fields)
    lines.append(b"\r\n")
    return b"".join(lines)


def _frame_chunk(data: bytes, declared: int) -> bytes:
    # ``declared`` exceeds len(data) only when a script cuts the body inside a chunk.
    tail = b"\r\n" if declared == len(data) else b""
    return b"%x\r\n" % declared + data + tail


class ResponseWriter:
    """Writes one response to the client, in whatever shape the script wants.

    Call :meth:`start`, then :meth:`write` any number of times, then :meth:`end`;
    or :meth:`play` a :class:`ScriptedResponse`.  A handler that returns without
    ending the response has it ended for it (or gets a 500 if it never started).
    """

    def __init__(self, stream: trio.abc.Stream, request: RecordedRequest) -> None:
        self.request = request
        self._stream = stream
        self._framing: Framing | None = None
        self._ended = False
        self._close = request.http_version == "1.0" or "close" in (
            request.headers.get("connection", "").lower()
        )

    @property
    def started(self) -> bool:
        """The status line has been sent."""
        return self._framing is not None

    @property
    def ended(self) -> bool:
        """The response is complete, or was cut off on purpose."""
        return self._ended

    @property
    def closes_connection(self) -> bool:
        """The server will close the connection after this response."""
        return self._close

    async def informational(
        self, status: int = 100, headers: Mapping[str, str] | Iterable[tuple[str, str]] = ()
    ) -> None:
        """Send a 1xx response (e.g. 103 Early Hints) before the real one."""
        await self._stream.send_all(_head(status, None, _header_pairs(headers)))

    async def start(
        self,
        status: int = 200,
        headers: Mapping[str, str] | Iterable[tuple[str, str]] = (),
        *,
        reason: str | None = None,
        content_type: str | None = "text/event-stream",
        framing: Framing = "chunked",
        content_length: int | None = None,
    ) -> None:
        """Send the status line and header fields.

        ``content_length`` is required with ``framing="content-length"``.
        """
        if self.started:
            raise RuntimeError("the response has already started")
        if framing == "chunked" and self.request.http_version == "1.0":
            framing = "close"  # chunked coding does not exist in HTTP/1.0
        fields = [("Content-Type", content_type)] if content_type is not None else []
        fields.extend(_header_pairs(headers))
        if framing == "chunked":
            fields.append(("Transfer-Encoding", "chunked"))
        elif framing == "content-length":
            if content_length is None:
                raise ValueError('framing="content-length" needs content_length')
            fields.append(("Content-Length", str(content_length)))
        else:
            fields.append(("Connection", "close"))
            self._close = True
        self._framing = framing
        await self._stream.send_all(_head(status, reason, fields))

    async def write(self, data: bytes) -> None:
        """Send body bytes in one write (one chunk when chunked)."""
        await self._write(data, len(data))

    async def _write(self, data: bytes, declared: int) -> None:
        if self._framing is None or self._ended:
            raise RuntimeError("write() outside of a started, unfinished response")
        if not data:
            await trio.lowlevel.checkpoint()  # an empty chunk would end the body
            return
        if self._framing == "chunked":
            data = _frame_chunk(data, declared)
        await self._stream.send_all(data)

    async def end(self) -> None:
        """Finish the body: the last chunk, or closing the connection for ``"close"``."""
        if self._framing == "chunked" and not self._ended:
            await self._stream.send_all(b"0\r\n\r\n")
        else:
            await trio.lowlevel.checkpoint()
        self._ended = True

    async def disconnect(self) -> None:
        """Stop here: the connection is closed without finishing the response."""
        self._ended = True
        self._close = True
        await trio.lowlevel.checkpoint()

    async def send_raw(self, data: bytes) -> None:
        """Write bytes verbatim (anything at all); the connection closes afterwards."""
        self._framing = self._framing or "close"
        self._close = True
        await self._stream.send_all(data)

    async def play(self, response: ScriptedResponse) -> None:
        """Send ``response`` as scripted, sleeps and cut-offs included."""
        for status in response.informational:
            await self.informational(status)
        if response.head_delay:
            await trio.sleep(response.head_delay)
        body = response.body
        await self.start(
            response.status,
            response.headers,
            reason=response.reason,
            content_type=response.content_type,
            framing=response.framing,
            content_length=len(body),
        )
        cut = response.disconnect_after
        position = 0
        for size in _sizes(response.write_sizes, len(body)):
            if position and response.delay:
                await trio.sleep(response.delay)
            piece = body[position : position + size]
            if cut is not None and position + len(piece) > cut:
                await self._write(piece[: cut - position], len(piece))
                break
            await self.write(piece)
            position += len(piece)
        if cut is not None:
            await self.disconnect()
        else:
            await self.end()


def _sizes(write_sizes: int | tuple[int, ...] | None, total: int) -> Iterator[int]:
    """Write sizes covering ``total`` bytes (the last one may be cut by the caller)."""
    if write_sizes is None:
        pattern: Iterable[int] = (total,)
    elif isinstance(write_sizes, int):
        pattern = itertools.repeat(write_sizes)
    else:
        pattern = itertools.cycle(write_sizes)
    remaining = total
    for size in pattern:
        if remaining <= 0:
            return
        yield min(size, remaining)
        remaining -= size


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
    """

    def __init__(
        self,
        script: Script,
        *,
        scheme: str,
        host: str,
        port: int,
        client_ssl_context: ssl.SSLContext | None,
    ) -> None:
        self.scheme = scheme
        self.host = host
        self.port = port
        url_host = f"[{host}]" if ":" in host else host
        self.base_url = f"{scheme}://{url_host}:{port}/v1"
        self.client_ssl_context = client_ssl_context
        self.requests: list[RecordedRequest] = []
        self.connections: list[ServerConnection] = []
        self._handler = _as_handler(script)
        # Set by open_test_server to the scope around the caller's block.
        self._cancel_on_error: trio.CancelScope | None = None
        self._changed = trio.Event()

    def endpoint(self, **kwargs: Any) -> Endpoint:
        """An :class:`Endpoint` for this server; ``kwargs`` go to its constructor."""
        if self.client_ssl_context is not None:
            kwargs.setdefault("ssl_context", self.client_ssl_context)
        return Endpoint(self.base_url, **kwargs)

    async def wait_requests(self, count: int = 1) -> None:
        """Wait until at least ``count`` requests have been received."""
        await trio.lowlevel.checkpoint()
        while len(self.requests) < count:
            await self._changed.wait()

    async def wait_client_closed(self) -> None:
        """Wait until the client has closed every connection accepted so far."""
        await trio.lowlevel.checkpoint()
        while True:
            for connection in self.connections:
                if not connection.client_closed.is_set():
                    await connection.client_closed.wait()
                    break
            else:
                return

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def _serve_connection(self, stream: trio.abc.Stream) -> None:
        connection = ServerConnection(index=len(self.connections))
        self.connections.append(connection)
        try:
            async with trio.open_nursery() as nursery:
                send, receive = trio.open_memory_channel[ScriptedResponse | RecordedRequest](0)
                nursery.start_soon(self._read_requests, stream, connection, send, nursery)
                with receive:
                    async for item in receive:
                        if not await self._respond(stream, item):
                            break
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
        connection: ServerConnection,
        send: trio.MemorySendChannel[ScriptedResponse | RecordedRequest],
        nursery: trio.Nursery,
    ) -> None:
        with send:
            eof = await self._parse_requests(stream, connection, send)
        # After a refusal, or once the responder has ended the connection, keep
        # reading anyway: the client's close is what tests wait for.
        while not eof:
            eof = not await _receive(stream)
        connection.client_closed.set()
        self._notify()
        # Nobody is left to read a response: stop writing one.
        nursery.cancel_scope.cancel()

    async def _parse_requests(
        self,
        stream: trio.abc.Stream,
        connection: ServerConnection,
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
                self.requests.append(request)
                connection.requests.append(request)
                self._notify()
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
        try:
            try:
                await self._handler(item, writer)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                raise  # the client went away: not a bug in the handler
            except Exception:
                # Stop the test before this connection closes: otherwise the client
                # would report the close, and the handler's bug would come second.
                if self._cancel_on_error is not None:
                    self._cancel_on_error.cancel()
                raise
            if writer.started and not writer.ended:
                await writer.end()
            elif not writer.started and not writer.ended:
                await writer.play(
                    ScriptedResponse.error(500, "the test server's handler sent no response")
                )
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return False  # the client went away; the reader will notice the close
        return not writer.closes_connection


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
    task_status: trio.TaskStatus[LoopbackServer] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run a test server until cancelled; for ``await nursery.start(serve_test_server, ...)``.

    ``nursery.start`` returns the :class:`LoopbackServer` once it is listening.
    ``ssl_context`` (a server context) turns on TLS; ``client_ssl_context`` is only
    recorded, for :meth:`LoopbackServer.endpoint`.
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


@asynccontextmanager
async def open_test_server(
    script: Script,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    tls: bool = False,
    ssl_context: ssl.SSLContext | None = None,
) -> AsyncIterator[LoopbackServer]:
    """Run a test server for the duration of an ``async with`` block.

    ``script`` is a :class:`ScriptedResponse` (sent for every request), an iterable
    of them (used in order; a 500 once exhausted), or an
    ``async def handler(request, writer)``.

    ``tls=True`` serves HTTPS with a certificate from a throwaway trustme CA for
    ``127.0.0.1``, ``localhost`` and ``::1``; :meth:`LoopbackServer.endpoint` then
    trusts it.  Or pass your own server ``ssl_context``.

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
    import trustme

    ca = trustme.CA()
    certificate = ca.issue_cert(*(hostnames or ("127.0.0.1", "localhost", "::1")))
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    certificate.configure_cert(server_context)
    client_context = ssl.create_default_context()
    ca.configure_trust(client_context)
    return server_context, client_context

"""One streaming HTTP/1.1 request: h11 over a trio stream.

Theory of operation
-------------------
:func:`open_http_response` is the whole client.  It connects (TCP, then TLS for
``https``, both inside the endpoint's connect timeout), sends the request in one
``send_all``, reads the response head, and only yields when the response is one
chunkwise can stream: a 2xx ``text/event-stream`` with no content coding.  Any
other response is read up to :data:`MAX_ERROR_BODY` bytes, for at most the
endpoint's ``timeouts.error_body`` seconds, and raised as a typed error, so callers
never see a response they would have to reject themselves.

h11 does all the parsing; this module only moves bytes and translates outcomes.
Every wait for the peer goes through one method, ``Connection._fill``, which
applies the idle timeout and turns a broken socket into :class:`ConnectionLost`.
Every h11 error goes through ``Connection._translate``: when we had fed h11 the
end of the stream, the server hung up (:class:`ConnectionLost`, or
:class:`IncompleteBody` once the body had begun); otherwise the server sent bytes
that are not HTTP (:class:`RemoteProtocolError`).

Body bytes are handed out as soon as h11 releases them.  When a read both delivers
data and reveals an error (the peer closed mid-chunk), the data is returned first
and the error is raised by the next :meth:`HTTPResponse.receive_some`, so a
truncated stream loses nothing that arrived.

Without a pool, one request per connection: the socket is closed with
:func:`trio.aclose_forcefully` on every exit path, which never blocks, so leaving
the ``async with`` (error, cancellation, or a stream abandoned halfway) cannot
hang and never leaves the socket open.  With a pool (:class:`chunkwise.Client`)
a connection whose exchange finished cleanly on both sides (h11 says both are
``DONE``, neither asked to close) goes back to the pool instead
(:meth:`HTTPResponse.release`); anything else is still closed at once.

Retries (:mod:`chunkwise._retries`) happen here, before anything is yielded:
a failed attempt is closed and the request sent again, so a caller only ever
sees the response of the attempt that is streaming.  A request on a reused
connection that fails before any response byte arrives (the server closed the
idle connection at that moment) is sent once more on a new connection, free of
the retry budget.

The request is sent completely before the response is read.  Chat requests are
small, so a server that answers before reading the body (an early 413) is not
worth a second task.

A process may hold thousands of responses open at once (``bench/load.py``), so
what one keeps is kept small: :class:`Connection` and :class:`HTTPResponse` have
no instance dict, a request without a pool holds no slot object, and the
prepared request (header list and body) is let go once its response is yielded,
since nothing is sent again after that (the body stays alive only if the caller
keeps a reference of its own).
"""

from __future__ import annotations

import functools
import json
import logging
import math
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Hashable,
)
from contextlib import asynccontextmanager
from typing import Any

import h11
import trio

from ._connect import Origin, open_connection, socket_of, take_buffered
from ._endpoint import Endpoint
from ._errors import (
    ChunkwiseError,
    ConnectionLost,
    HTTPStatusError,
    IdleTimeout,
    IncompleteBody,
    LocalProtocolError,
    RemoteProtocolError,
    StreamError,
    TransportError,
    UnexpectedContentEncoding,
    UnexpectedContentType,
    raise_itself,
)
from ._headers import Headers
from ._payloads import parse_error_payload, parse_json
from ._pool import ConnectionPool
from ._proxy import Proxy
from ._request import Request, prepare_request
from ._retries import Retries, retry_after, retry_delay, with_attempts
from ._util import close_now, redact

__all__ = [
    "MAX_ERROR_BODY",
    "HTTPResponse",
    "Headers",
    "connect",
    "http_status_error",
    "open_http_response",
    "parse_error_body",
]

#: How much of an error (or unexpected) response body is kept.
MAX_ERROR_BODY = 64 * 1024
# An echoed key cut off by the end of what was read is masked from this many
# characters on; shorter tails are indistinguishable from ordinary text.

_READ_SIZE = 64 * 1024


class HTTPResponse:
    """A response whose body is being received (a 2xx event stream, unless unchecked).

    Only :func:`open_http_response` creates these.  ``headers`` is a
    :class:`Headers`; ``http_version`` is e.g. ``"1.1"``.  Also an async
    iterator over body chunks (``async for data in response``).
    """

    __slots__ = (
        "_conn",
        "_release",
        "_released",
        "headers",
        "http_version",
        "reason",
        "status_code",
    )

    def __init__(
        self,
        conn: Connection,
        head: h11.Response,
        release: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._conn = conn
        self._release = release
        self._released = False
        self.status_code: int = head.status_code
        self.reason: str = head.reason.decode("latin-1")
        self.http_version: str = head.http_version.decode("ascii")
        self.headers = Headers(head.headers.raw_items())

    async def receive_some(self) -> bytes:
        """The next body bytes, as soon as any arrive; ``b""`` at the clean end.

        Waits at most the endpoint's idle timeout for progress.

        Raises:
            IncompleteBody: the server closed or reset the connection inside a
                ``Content-Length`` or chunked body (after every byte that arrived
                was returned).  A close-delimited body simply ends.
            IdleTimeout: nothing arrived for ``timeouts.idle`` seconds.
            RemoteProtocolError: the body framing is invalid.
            trio.ClosedResourceError: the response was closed.
            trio.BusyResourceError: another task is already receiving.
        """
        return await self._conn.receive_some()

    async def aclose(self) -> None:
        """Close the connection now (unless :meth:`release` gave it back to a pool).

        Never blocks; closes even when cancelled.
        """
        if self._released:
            await trio.lowlevel.checkpoint()
            return
        await self._conn.aclose()
        await trio.lowlevel.checkpoint()

    async def release(self) -> None:
        """Done with the response: keep the connection for the next request, or close it.

        With a pool, a body whose end is near (read within a short grace) is
        read to its end, and a connection whose exchange completed goes back
        to the pool; anything else, and every connection without a pool, is
        closed at once.  Never blocks for longer than that grace.
        """
        if self._released:
            await trio.lowlevel.checkpoint()
        elif self._release is None:
            await self.aclose()
        else:
            self._released = True
            await self._release()

    def __aiter__(self) -> HTTPResponse:
        return self

    async def __anext__(self) -> bytes:
        data = await self.receive_some()
        if not data:
            raise StopAsyncIteration
        return data

    def __repr__(self) -> str:
        return f"<HTTPResponse [{self.status_code} {self.reason}]>"


async def connect(endpoint: Endpoint) -> trio.abc.Stream:
    """Open a connection to ``endpoint``: TCP, plus a verified TLS handshake for ``https``.

    Within ``endpoint.timeouts.connect``; see :func:`chunkwise._connect.open_connection`
    for the steps and the errors, each naming its cause.
    """
    return await open_connection(
        Origin.of(endpoint),
        connect_timeout=endpoint.timeouts.connect,
        ssl_context=endpoint.ssl_context,
    )


@asynccontextmanager
async def open_http_response(
    endpoint: Endpoint,
    body: bytes,
    *,
    path: str = "/chat/completions",
    transport: trio.abc.Stream | None = None,
    check: bool = True,
    pool: ConnectionPool[Connection] | None = None,
) -> AsyncIterator[HTTPResponse]:
    """POST ``body`` (JSON) to ``path`` under ``endpoint``'s base URL; yield the response.

    ``path`` is the API's: ``/chat/completions`` (the default) or ``/responses``.

    Sends ``Host``, ``User-Agent: chunkwise/<version>``, ``Accept:
    text/event-stream``, ``Accept-Encoding: identity``, ``Content-Type:
    application/json``, ``Content-Length``, ``Authorization: Bearer <key>`` when a
    key is set, and the endpoint's extra headers.  Informational (1xx) responses
    are skipped; redirects are not followed.

    ``transport``, when given, is an already connected stream (TLS already
    applied, if wanted) used instead of connecting; it is closed on exit all the
    same.  Tests use it with :func:`trio.testing.memory_stream_pair`.

    ``pool`` (a :class:`chunkwise.Client`'s) reuses a kept-alive connection to
    the same place when one is idle, and takes the connection back when the
    response is released after a complete exchange.

    Failures before the response is yielded are retried by
    ``endpoint.retries`` (see :mod:`chunkwise._retries`); the error raised
    after the last attempt says how many were made.

    ``check=False`` yields whatever final response arrives, error statuses and
    other content types or codings included, for tools that record responses
    as they are.

    The connection is closed before the ``async with`` block exits, whatever the
    reason it exits.

    Raises:
        HTTPStatusError: any non-2xx status, with the parsed error body.
        UnexpectedContentType: a 2xx that is not ``text/event-stream``.
        UnexpectedContentEncoding: a compressed body.
        ConnectTimeout, IdleTimeout, ConnectionLost, TransportError: see :func:`connect`
            and :meth:`HTTPResponse.receive_some`.
        RemoteProtocolError: the response is not valid HTTP/1.1.
    """
    origin = Origin.of(endpoint)
    proxy = endpoint.select_proxy() if transport is None else None
    request = prepare_request(endpoint, body, path=path, proxy=proxy)
    del body  # the request holds it, for as long as it may be sent again
    # A given transport cannot be opened again, so it is tried once.
    retries = endpoint.retries if transport is None else _NO_RETRIES
    key = (origin, proxy)
    retried = 0  # retries made, against retries.max_retries
    resent = False  # the one free re-send after a reused connection failed
    while True:
        async with _NO_SLOT if pool is None else pool.slot():
            conn = await pool.take(key) if pool is not None else None
            reused = conn is not None
            try:
                if conn is None:
                    if transport is None:
                        stream = await open_connection(
                            origin,
                            connect_timeout=endpoint.timeouts.connect,
                            ssl_context=endpoint.ssl_context,
                            proxy=proxy,
                        )
                    else:
                        stream, transport = transport, None
                    conn = Connection(stream, origin, idle_timeout=endpoint.timeouts.idle)
                await conn.send_request(request)
                # Without a pool, releasing is closing: HTTPResponse does it itself.
                release = None if pool is None else functools.partial(_release, conn, pool, key)
                response = HTTPResponse(conn, await conn.receive_head(), release)
                if check:
                    await _check_response(response, endpoint, proxy)
            except ChunkwiseError as exc:
                if conn is not None:
                    await conn.aclose()
                failure = exc
                stale = reused and conn is not None and not conn.response_started
            except BaseException:
                if conn is not None:
                    await conn.aclose()
                raise
            else:
                # Nothing is sent again from here on: the request (its header
                # list, its body) need not live as long as the stream.
                del request
                try:
                    yield response
                finally:
                    await response.aclose()  # nothing to do once released
                return
        if stale and not resent and isinstance(failure, ConnectionLost):
            # The server closed the idle connection as the request went out:
            # send it again on a new connection, free of the budget (curl, Go).
            # Not after an idle timeout: that server took the request.
            resent = True
            continue
        delay = retry_delay(failure, retries, retried)
        if delay is None:
            raise with_attempts(failure, retried + 1)
        retried += 1
        _log.info(
            "retrying POST %s%s in %.2f s (retry %d of %d): %s",
            origin.authority,
            endpoint.target_for(path),
            delay,
            retried,
            retries.max_retries,
            failure,
        )
        await trio.sleep(delay)


_NO_RETRIES = Retries(max_retries=0)
#: After the caller is done with a pooled response, how long (seconds) and how
#: much (bytes) of the rest of its body is read so that the connection can be
#: reused: a stream ends with ``[DONE]`` just before the end of the body.
_DRAIN_GRACE = 1.0
_DRAIN_LIMIT = 64 * 1024

_log = logging.getLogger("chunkwise")


class _NoSlot:
    """The slot of a request without a pool: nothing to hold (one shared instance)."""

    __slots__ = ()

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *exc_info: object) -> None:
        return None


_NO_SLOT = _NoSlot()


async def _release(conn: Connection, pool: ConnectionPool[Connection], key: Hashable) -> None:
    """End a response the caller is done with: back to the pool if the exchange completed."""
    try:
        await conn.drain(_DRAIN_GRACE, _DRAIN_LIMIT)
    finally:
        reusable = conn.reusable
        if reusable:
            conn.start_next_exchange()
        await pool.give_back(key, conn, reusable=reusable)


async def _check_response(
    response: HTTPResponse, endpoint: Endpoint, proxy: Proxy | None = None
) -> None:
    """Raise unless the response is a 2xx event stream chunkwise can read."""
    status = response.status_code
    headers = response.headers
    if not 200 <= status < 300:
        body, truncated = await _read_rejected_body(response, endpoint, proxy)
        raise http_status_error(status, response.reason, headers, body, truncated=truncated)
    encoding = headers.get("content-encoding", "")
    if any(c.strip().lower() not in ("", "identity") for c in encoding.split(",")):
        raise UnexpectedContentEncoding(encoding)
    content_type = headers.get("content-type")
    media_type = (content_type or "").partition(";")[0].strip().lower()
    if media_type != "text/event-stream":
        raise UnexpectedContentType(
            status_code=status,
            content_type=content_type,
            body_start=(await _read_rejected_body(response, endpoint, proxy))[0],
        )


async def _read_rejected_body(
    response: HTTPResponse, endpoint: Endpoint, proxy: Proxy | None = None
) -> tuple[bytes, bool]:
    """The start of a body that is about to be raised as an error, and whether it was cut.

    Reading stops after :data:`MAX_ERROR_BODY` bytes, after ``timeouts.error_body``
    seconds, or when the connection breaks: a partial body still makes a useful error,
    and a body that stalls must not hold the caller for the idle timeout.  Reading goes
    on past the limit, so a body of exactly the limit is known to be whole.
    """
    received = bytearray()
    complete = False
    timeout = endpoint.timeouts.error_body
    with trio.move_on_after(math.inf if timeout is None else timeout):
        try:
            while len(received) <= MAX_ERROR_BODY:
                data = await response.receive_some()
                if not data:
                    complete = True
                    break
                received += data
        except (TransportError, RemoteProtocolError):
            pass
    body = bytes(received)
    # Whatever secret the server (or a proxy) may quote back: the key, and the
    # proxy's credentials as sent (the Basic token) or as typed (the password).
    for secret_text in (endpoint.api_key, *_proxy_secrets(proxy)):
        body = redact(body, secret_text, cut=not complete)
    return body[:MAX_ERROR_BODY], not complete


def _proxy_secrets(proxy: Proxy | None) -> list[str]:
    if proxy is None or proxy.authorization is None:
        return []
    token = proxy.authorization.removeprefix("Basic ")
    return [token, *([proxy.password] if proxy.password else [])]


def http_status_error(
    status_code: int, reason: str, headers: Headers, body: bytes, *, truncated: bool = False
) -> HTTPStatusError:
    """The :class:`HTTPStatusError` for a non-2xx response with this head and body.

    The one place the error is built from a response: the client raises it, and
    tools that read a response kept as is (``chunkwise record`` and
    ``inspect``) show the same error.  ``body`` is used as given (the client
    has already cut it to :data:`MAX_ERROR_BODY` and masked an echoed key).
    """
    return HTTPStatusError(
        status_code,
        reason=reason,
        error=parse_error_body(body),
        body=body,
        request_id=headers.get("x-request-id"),
        headers=headers,
        retry_after=retry_after(headers),
        truncated=truncated,
    )


def parse_error_body(body: bytes) -> StreamError | None:
    """The server's error in an HTTP error body, or ``None`` when the body is not JSON.

    Any JSON body is read by :func:`~chunkwise._payloads.parse_error_payload`,
    the same rules as errors inside a stream.  An empty body, HTML, bytes in no
    Unicode encoding and JSON nested too deeply to parse give ``None``.
    """
    try:
        payload = parse_json(body.decode(json.detect_encoding(body)))
    except ValueError:  # UnicodeDecodeError and JSONDecodeError included
        return None
    return parse_error_payload(payload)


class Connection:
    """The h11 client state machine and the stream under it: the one place with I/O."""

    # One per open stream, thousands at once: no instance dict.
    __slots__ = (
        "_busy",
        "_closed",
        "_done",
        "_eof",
        "_error",
        "_expected",
        "_h11",
        "_host",
        "_idle",
        "_in_body",
        "_port",
        "_received",
        "_transport",
        "_where",
        "response_started",
    )

    def __init__(
        self, transport: trio.abc.Stream, origin: Origin, *, idle_timeout: float | None
    ) -> None:
        self._transport = transport
        self._h11 = h11.Connection(h11.CLIENT)
        self._host = origin.host
        self._port = origin.port
        self._where = origin.authority
        self._idle = math.inf if idle_timeout is None else idle_timeout
        self._closed = False
        self._start_exchange()

    def _start_exchange(self) -> None:
        self._eof = False  # h11 has been told the peer closed
        self._in_body = False
        self._done = False  # EndOfMessage seen
        self._received = 0
        self._expected: int | None = None
        # Raised by every later receive_some, after the data that preceded it.
        self._error: ChunkwiseError | None = None
        self._busy = False
        #: Some bytes of a response arrived (a request that failed before any
        #: did may be sent again on a new connection).
        self.response_started = False

    @property
    def reusable(self) -> bool:
        """The exchange completed on both sides and neither asked to close."""
        return (
            not self._closed
            and self._done
            and self._error is None
            and self._h11.our_state is h11.DONE
            and self._h11.their_state is h11.DONE
        )

    def readable_while_idle(self) -> bool:
        """Bytes or an EOF arrived while no response is expected: not reusable."""
        sock = socket_of(self._transport)
        return sock is not None and sock.is_readable()

    def start_next_exchange(self) -> None:
        """Make a :attr:`reusable` connection ready for the next request."""
        self._h11.start_next_cycle()
        self._start_exchange()

    async def drain(self, grace: float, limit: int) -> None:
        """Read what is left of the body for up to ``grace`` seconds and ``limit`` bytes.

        Only to end an exchange so the connection can be reused: errors just
        leave it unreusable.
        """
        with trio.move_on_after(grace):
            total = 0
            try:
                while not self._done and total <= limit:
                    total += len(await self.receive_some())
            except (ChunkwiseError, trio.ClosedResourceError, trio.BusyResourceError):
                pass

    async def send_request(self, request: Request) -> None:
        head = h11.Request(
            method=request.method, target=request.target, headers=list(request.headers)
        )
        try:
            data = b"".join(
                self._h11.send(event) or b""
                for event in (head, h11.Data(data=request.body), h11.EndOfMessage())
            )
        except h11.LocalProtocolError:
            # Endpoint checked every header, so this is a chunkwise bug.  Not chained:
            # h11's message quotes the offending header value, which may be the key.
            raise LocalProtocolError("h11 refused to serialise the request") from None
        with trio.move_on_after(self._idle):
            try:
                await self._transport.send_all(data)
            except (trio.BrokenResourceError, OSError) as exc:
                raise ConnectionLost(
                    f"connection to {self._where} lost while sending the request"
                ) from exc
            return
        raise IdleTimeout(self._host, self._port, self._idle)

    async def receive_head(self) -> h11.Response:
        while True:
            event = self._next_event()
            if event is h11.NEED_DATA:
                await self._fill()
            elif isinstance(event, h11.Response):
                self._in_body = True
                self._expected = _declared_length(event)
                return event
            elif not isinstance(event, h11.InformationalResponse):  # 1xx are skipped
                raise _unexpected(event)

    async def receive_some(self) -> bytes:
        if self._closed:
            raise trio.ClosedResourceError("the HTTP response was closed")
        if self._busy:
            raise trio.BusyResourceError("another task is already receiving this response")
        await trio.lowlevel.checkpoint_if_cancelled()
        self._busy = True
        try:
            return await self._receive_body()
        finally:
            self._busy = False

    async def _receive_body(self) -> bytes:
        if self._error is not None:
            raise_itself(self._error, fresh_traceback=True)
        chunks: list[bytes] = []
        waited = False
        while not self._done:
            try:
                event = self._next_event()
            except ChunkwiseError as exc:
                self._error = exc
                if chunks:
                    break
                raise
            if event is h11.NEED_DATA:
                if chunks:
                    break
                try:
                    await self._fill()
                except ChunkwiseError as exc:
                    self._error = exc
                    raise
                waited = True
            elif isinstance(event, h11.Data):
                # h11 hands out a bytearray sliced from its buffer: one copy to
                # immutable bytes here, none further up.
                data = bytes(event.data)
                self._received += len(data)
                chunks.append(data)
            elif isinstance(event, h11.EndOfMessage):
                self._done = True
            else:
                raise _unexpected(event)
        if not waited:
            # Nothing was awaited, but callers may rely on this being a checkpoint.
            # Shielded: the bytes already taken from h11 must not be lost to a cancel.
            await trio.lowlevel.cancel_shielded_checkpoint()
        return b"".join(chunks)

    def _next_event(self) -> Any:
        try:
            return self._h11.next_event()
        except h11.RemoteProtocolError as exc:
            raise self._translate(exc) from exc

    def _translate(self, exc: h11.RemoteProtocolError) -> ChunkwiseError:
        if not self._eof:
            return RemoteProtocolError(f"invalid HTTP response from {self._where}: {exc}")
        if not self._in_body:
            return ConnectionLost(f"{self._where} closed the connection before a complete response")
        return self._incomplete("closed the connection")

    def _incomplete(self, what: str) -> IncompleteBody:
        if self._expected is not None:
            detail = f"after {self._received} of {self._expected} body bytes"
        else:
            detail = f"inside the response body, after {self._received} bytes"
        return IncompleteBody(
            f"{self._where} {what} {detail}", received=self._received, expected=self._expected
        )

    async def _fill(self) -> None:
        """Wait for the next bytes from the peer and give them to h11."""
        with trio.move_on_after(self._idle):
            try:
                data = await self._transport.receive_some(_READ_SIZE)
            except (trio.BrokenResourceError, OSError) as exc:
                # A reset is never a clean end, even of a close-delimited body.
                if self._in_body:
                    raise self._incomplete("reset the connection") from exc
                raise ConnectionLost(f"connection to {self._where} lost: {exc}") from exc
            if not data:
                self._eof = True
            else:
                self.response_started = True
                # TLS hands out one record per read; the records that came with
                # it go to h11 in the same call (see chunkwise._connect).
                more = take_buffered(self._transport, _READ_SIZE - len(data))
                if more:
                    data = b"".join((data, more))
            self._h11.receive_data(bytes(data))  # a no-op for bytes; streams may give bytearray
            return
        raise IdleTimeout(self._host, self._port, self._idle)

    async def aclose(self) -> None:
        self._closed = True
        await close_now(self._transport)


def _unexpected(event: object) -> RemoteProtocolError:
    # h11 produces nothing else in these states; reaching this is a bug, but raising
    # beats looping forever on an event h11 will keep returning.
    return RemoteProtocolError(f"unexpected HTTP event {event!r}")


def _declared_length(head: h11.Response) -> int | None:
    fields = dict(head.headers)  # h11 lower-cases names and allows one Content-Length
    if b"transfer-encoding" in fields or b"content-length" not in fields:
        return None
    return int(fields[b"content-length"])

"""One streaming HTTP/1.1 request: h11 over a trio stream, one attempt and the retry loop.

Theory of operation
-------------------
:func:`attempt` makes exactly one try: it takes a pooled connection or opens
one (TCP, then TLS for ``https``, within the connect timeout), sends the
request in one ``send_all``, reads the head and checks it (:func:`_check_response`),
and returns the response or what failed (:class:`Failed`), its connection
already closed.  Only a response chunkwise can stream is returned: a 2xx of the
expected media type (``text/event-stream``) with no content coding.  Any other
is read up to :data:`MAX_ERROR_BODY` bytes, for at most ``timeouts.error_body``
seconds, and raised as a typed error.

:func:`send_http_request` is the retry loop around it
(:mod:`chunkwise._core.retries`): a failed attempt is sent again after its
backoff, so a caller sees the response of the attempt that streams, or the
last failure with the attempts counted (``with_attempts``).  An attempt on a
reused connection lost before any response byte arrived (the server closed
the idle connection at that moment) is sent once more on a new connection,
free of the retry budget.  :func:`open_http_response` is the same in an
``async with``.

The bytes go through a :class:`~chunkwise._net.http11.Connection`; body bytes
are handed out as soon as h11 releases them, and an error that follows data
is raised by the next read, after that data.  The caller owns the response
and closes it (:meth:`HTTPResponse.aclose`) on every path, which also gives up
the pool's slot.  Without a pool the socket is closed with
:func:`trio.aclose_forcefully`, which never blocks; with one, a connection
whose exchange finished cleanly on both sides goes back to the pool
(:meth:`HTTPResponse.release`), and anything else is closed by the pool, which
counts it and logs why (:mod:`chunkwise._net.pool`, rule 6).

Where errors are converted
--------------------------
trio's, the operating system's, ssl's and h11's exceptions become chunkwise's
(:class:`~chunkwise.ChunkwiseError`) where chunkwise calls them, and nowhere
else (``tests/test_architecture.py`` holds every other module to it):

- opening a connection, in :mod:`chunkwise._net.connect`: ``OSError`` and a
  failed handshake are :class:`~chunkwise.TransportError`, the connect
  timeout :class:`~chunkwise.ConnectTimeout`, a proxy's refusal
  :class:`~chunkwise.ProxyError`;
- the exchange, in :class:`chunkwise._net.http11.Connection`: a broken or reset
  socket is :class:`~chunkwise.ConnectionLost` (:class:`~chunkwise.errors.IncompleteBody`
  inside a body), the idle timeout :class:`~chunkwise.IdleTimeout`, bytes h11
  rejects :class:`~chunkwise.RemoteProtocolError`.

Everything above them (:func:`attempt`, the retry loop, the stream) handles
chunkwise's exceptions only; a response's status and media type become
:class:`~chunkwise.HTTPStatusError` and its kin in :func:`_check_response`.

The request is sent completely before the response is read: chat requests are
small, so a server that answers before reading the body (an early 413) is not
worth a second task.  A process may hold thousands of responses open at once
(``bench/load.py``): :class:`HTTPResponse` has no instance dict, a request
without a pool holds no slot object, no generator is suspended while the body
is read, and the prepared request is let go once its response is returned.
"""

from __future__ import annotations

import math
from collections.abc import (
    AsyncIterator,
    Hashable,
)
from contextlib import asynccontextmanager
from typing import Any

import attrs
import h11
import trio

from .._core.endpoint import Endpoint
from .._core.errors import (
    ChunkwiseError,
    ConnectionLost,
    InvalidChunk,
    RemoteProtocolError,
    TransportError,
    UnexpectedContentEncoding,
    UnexpectedContentType,
)
from .._core.headers import Headers
from .._core.payloads import load_object
from .._core.proxy import Proxy
from .._core.retries import Retries, retry_delay, with_attempts
from .._core.util import redact
from .connect import Origin, open_connection
from .http11 import Connection
from .pool import ConnectionPool, Slot
from .request import Auth, Request, prepare_request
from .status import http_status_error, parse_error_body, status_hint
from .trace import Trace, TraceHook, traced

__all__ = [
    "MAX_ERROR_BODY",
    "MAX_JSON_BODY",
    "Failed",
    "HTTPResponse",
    "attempt",
    "connect",
    "http_status_error",
    "open_http_response",
    "parse_error_body",
    "read_json",
    "send_http_request",
    "status_hint",
]

#: How much of an error (or unexpected) response body is kept.
MAX_ERROR_BODY = 64 * 1024


class HTTPResponse:
    """A response whose body is being received; an async iterator over its body chunks."""

    __slots__ = (
        "_conn",
        "_key",
        "_pool",
        "_released",
        "_slot",
        "headers",
        "http_version",
        "reason",
        "status_code",
        "trace",
    )

    def __init__(
        self,
        conn: Connection,
        head: h11.Response,
        place: _Place,
        slot: Slot | None,
        trace: TraceHook,
    ) -> None:
        self._conn = conn
        #: Called around each read and the close (:mod:`chunkwise._net.trace`).
        self.trace: TraceHook = trace
        # Without a pool, releasing is closing.
        self._pool = place.pool
        self._key = place.key
        self._released = False
        self._slot = slot
        self.status_code: int = head.status_code
        self.reason: str = head.reason.decode("latin-1")
        self.http_version: str = head.http_version.decode("ascii")
        self.headers: Headers = Headers(head.headers.raw_items())

    async def receive_some(self) -> bytes:
        """The next body bytes, as soon as any arrive; ``b""`` at the clean end.

        Raises:
            IncompleteBody: the server closed or reset the connection inside a
                ``Content-Length`` or chunked body (after every byte that arrived
                was returned).  A close-delimited body simply ends.
            IdleTimeout: nothing arrived for ``timeouts.idle`` seconds.
            RemoteProtocolError: the body framing is invalid.
            trio.ClosedResourceError: the response was closed.
            trio.BusyResourceError: another task is already receiving.
        """
        conn = self._conn
        with Trace("receive_body", self.trace) as trace:
            data = await conn.receive_some()
            trace.info = {"bytes": len(data), "arrived": conn.arrived}
        return data

    async def aclose(self) -> None:
        """Close the connection now, once (unless :meth:`release` gave it back); free the slot.

        Never blocks; closes even when cancelled.
        """
        try:
            if not self._released:
                self._released = True  # closing twice would trace a second close
                with Trace("close", self.trace) as trace:
                    trace.info = {"reused": False}
                    why = "the response was closed before its end"
                    await _close(self._conn, self._pool, self._key, why)
        finally:
            self._free_slot()
        await trio.lowlevel.checkpoint()

    async def release(self) -> None:
        """Done with the response: give the connection back to the pool, or close it.

        With a pool, the end of the body is read within a short grace, and a
        connection whose exchange completed goes back to the pool; anything
        else is closed at once.  Either way the pool's slot is given up.
        """
        conn, pool = self._conn, self._pool
        if self._released:
            await trio.lowlevel.checkpoint()
        elif pool is None:
            await self.aclose()
        else:
            self._released = True
            try:
                with Trace("close", self.trace) as trace:
                    try:
                        await conn.drain(_DRAIN_GRACE, _DRAIN_LIMIT)
                    finally:
                        why = conn.why_not_reusable
                        if why is None:
                            conn.start_next_exchange()
                        await pool.give_back(self._key, conn, reusable=why is None, why=why or "")
                    trace.info = {"reused": why is None}
            finally:
                self._free_slot()

    def _free_slot(self) -> None:
        slot, self._slot = self._slot, None
        if slot is not None:
            slot.release()

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
    """:func:`chunkwise._net.connect.open_connection` to ``endpoint``, with its settings."""
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
    auth: Auth = "bearer",
) -> AsyncIterator[HTTPResponse]:
    """POST ``body`` (JSON) to ``path`` under ``endpoint``'s base URL; yield the response.

    :func:`send_http_request` in an ``async with``: the connection is closed
    before the block exits, whatever the reason it exits.  ``auth`` is how the
    key is sent (the API's: Anthropic's as ``x-api-key``).

    Raises:
        HTTPStatusError: any non-2xx status, with the parsed error body.
        UnexpectedContentType: a 2xx that is not ``text/event-stream``.
        UnexpectedContentEncoding: a compressed body.
        ConnectTimeout, IdleTimeout, ConnectionLost, TransportError: see :func:`connect`
            and :meth:`HTTPResponse.receive_some`.
        RemoteProtocolError: the response is not valid HTTP/1.1.
    """
    response = await send_http_request(
        endpoint, body, path=path, transport=transport, check=check, pool=pool, auth=auth
    )
    del body  # not sent again: not kept for as long as the body is read
    try:
        yield response
    finally:
        await response.aclose()  # nothing to do once released


async def send_http_request(
    endpoint: Endpoint,
    body: bytes,
    *,
    path: str = "/chat/completions",
    transport: trio.abc.Stream | None = None,
    check: bool = True,
    pool: ConnectionPool[Connection] | None = None,
    trace: TraceHook | None = None,
    method: str = "POST",
    expect: str = "text/event-stream",
    retried: int = 0,
    auth: Auth = "bearer",
) -> HTTPResponse:
    """POST ``body`` and return the response, its body not read yet (retries included).

    The caller must :meth:`~HTTPResponse.aclose` (or :meth:`~HTTPResponse.release`)
    the response on every path.  Informational (1xx) responses are skipped;
    redirects are not followed.  Failures before the response is returned are
    retried by ``endpoint.retries``; the error raised after the last attempt
    says how many were made.

    ``path`` and ``auth`` are the API's; the headers sent are
    :func:`~chunkwise._net.request.prepare_request`'s.  ``transport``, when
    given, is a connected stream used instead of connecting (tests use
    :func:`trio.testing.memory_stream_pair`), and is tried once.  ``pool`` (a
    :class:`chunkwise.Client`'s) lends a kept-alive connection and takes it back
    on release.  ``check=False`` returns whatever final response arrives, for
    tools that record responses as they are.  ``trace`` is called around each
    step (:mod:`chunkwise._net.trace`), after the logging.  ``method`` ``"GET"``
    sends no body (:mod:`chunkwise._resume`); ``expect`` is the media type a
    2xx must have (``"application/json"`` for :func:`read_json`).
    ``retried``: retries already made for the same answer (a stream sent
    again before its output, :mod:`chunkwise._stream` rule 7), out of the
    same budget.
    """
    origin = Origin.of(endpoint)
    proxy = endpoint.select_proxy() if transport is None else None
    request = prepare_request(
        endpoint, body, path=path, proxy=proxy, method=method, accept=expect, auth=auth
    )
    del body  # the request holds it, for as long as it may be sent again
    # A given transport cannot be opened again, so it is tried once.
    retries = endpoint.retries if transport is None else _NO_RETRIES
    place = _Place(endpoint, origin, proxy, pool)
    hook = traced(trace)
    # ``retried``: retries made, against retries.max_retries
    resent = False  # the one free re-send after a reused connection failed
    while True:
        outcome = await attempt(
            place, request, transport=transport, check=check, expect=expect, hook=hook
        )
        transport = None  # given for the first attempt only
        if isinstance(outcome, HTTPResponse):
            return outcome  # the request is let go: nothing is sent again
        failure = outcome.error
        if outcome.stale and not resent:
            # The server closed the idle connection as the request went out:
            # send it again on a new connection, free of the budget (curl, Go).
            resent = True
            continue
        delay = retry_delay(failure, retries, retried)
        if delay is None:
            raise with_attempts(failure, retried + 1)
        retried += 1
        target = f"{method} {origin.authority}{endpoint.target_for(path)}"
        info = {"delay": delay, "retry": retried, "of": retries.max_retries, "error": failure}
        with Trace("retry", hook, target=target, **info):
            await trio.sleep(delay)


@attrs.frozen
class _Place:
    """Where every attempt of one request goes: the endpoint, the origin, a proxy, a pool."""

    endpoint: Endpoint
    origin: Origin
    proxy: Proxy | None
    pool: ConnectionPool[Connection] | None

    @property
    def key(self) -> Hashable:
        return (self.origin, self.proxy)

    @property
    def label(self) -> str:
        """What the pool's log calls the connections (never a header: never the key)."""
        authority = self.origin.authority
        return authority if self.proxy is None else f"{authority} via {self.proxy.url}"


@attrs.frozen
class Failed:
    """An attempt that failed: its error, and whether it failed on a stale pooled connection.

    ``stale``: a reused connection was lost before any response byte arrived,
    so the request may be sent once more on a new one.  Not after an idle
    timeout: that server took the request.
    """

    error: ChunkwiseError
    stale: bool = False


async def attempt(
    place: _Place,
    request: Request,
    *,
    transport: trio.abc.Stream | None,
    check: bool,
    expect: str,
    hook: TraceHook,
) -> HTTPResponse | Failed:
    """Exactly one try: a pooled connection or a new one, the request, the head, its check.

    A :class:`~chunkwise.ChunkwiseError` is returned as :class:`Failed`, anything
    else (a cancel, a bug) propagates; either way the attempt's connection is
    closed (through the pool, if any) and its slot given up.
    """
    pool = place.pool
    slot = None if pool is None else pool.slot()
    if slot is not None:
        await slot.acquire()
    conn: Connection | None = None
    reused = False
    try:
        with Trace("attempt", hook):
            pass  # an attempt begins: the timings of earlier ones are forgotten
        conn = await pool.take(place.key) if pool is not None else None
        reused = conn is not None
        if conn is None:
            if transport is None:
                with Trace("connect", hook):
                    stream = await open_connection(
                        place.origin,
                        connect_timeout=place.endpoint.timeouts.connect,
                        ssl_context=place.endpoint.ssl_context,
                        proxy=place.proxy,
                        trace=hook,
                    )
            else:
                stream = transport
            conn = Connection(stream, place.origin, idle_timeout=place.endpoint.timeouts.idle)
            if pool is not None:
                pool.add(conn, place.label)
        else:
            with Trace("reuse", hook):
                pass
        with Trace("send_request", hook):
            await conn.send_request(request)
        with Trace("receive_head", hook) as traced_head:
            head = await conn.receive_head()
            traced_head.info = {"first_byte": conn.first_byte_at}
        response = HTTPResponse(conn, head, place, slot, hook)
        if check:
            await _check_response(response, place.endpoint, place.proxy, expect)
    except BaseException as exc:
        try:
            if conn is not None:
                # The error's type only: its message may quote the server.
                await _close(conn, pool, place.key, f"the attempt failed ({type(exc).__name__})")
        finally:
            if slot is not None:
                slot.release()
        if not isinstance(exc, ChunkwiseError):
            raise
        stale = reused and conn is not None and not conn.response_started
        return Failed(exc, stale=stale and isinstance(exc, ConnectionLost))
    return response


async def _close(
    conn: Connection, pool: ConnectionPool[Connection] | None, key: Hashable, why: str
) -> None:
    """Close ``conn`` at once; through the pool, if any, which counts it and logs ``why``."""
    if pool is None:
        await conn.aclose()
    else:
        await pool.give_back(key, conn, reusable=False, why=why)


_NO_RETRIES = Retries(max_retries=0)
#: After the caller is done with a pooled response, how long (seconds) and how
#: much (bytes) of the rest of its body is read so that the connection can be
#: reused: a stream ends with ``[DONE]`` just before the end of the body.
_DRAIN_GRACE = 1.0
_DRAIN_LIMIT = 64 * 1024


async def _check_response(
    response: HTTPResponse,
    endpoint: Endpoint,
    proxy: Proxy | None = None,
    expect: str = "text/event-stream",
) -> None:
    """Raise unless the response is a 2xx of ``expect`` (an event stream) chunkwise can read."""
    status = response.status_code
    headers = response.headers
    if not 200 <= status < 300:
        body, truncated = await _read_rejected_body(response, endpoint, proxy)
        raise http_status_error(
            status, response.reason, headers, body, truncated=truncated, endpoint=endpoint
        )
    encoding = headers.get("content-encoding", "")
    if any(c.strip().lower() not in ("", "identity") for c in encoding.split(",")):
        raise UnexpectedContentEncoding(encoding)
    content_type = headers.get("content-type")
    media_type = (content_type or "").partition(";")[0].strip().lower()
    if media_type != expect:
        raise UnexpectedContentType(
            status_code=status,
            content_type=content_type,
            body_start=(await _read_rejected_body(response, endpoint, proxy))[0],
        )


#: The largest response object read whole (:func:`read_json`): a stored response
#: with its whole output.
MAX_JSON_BODY = 16 * 1024 * 1024


async def read_json(response: HTTPResponse) -> dict[str, Any]:
    """The JSON object of a 2xx ``application/json`` response, read whole; releases it.

    Raises:
        InvalidChunk: the body is not a JSON object, or is over :data:`MAX_JSON_BODY`.
        ConnectionLost, IdleTimeout, RemoteProtocolError: reading failed.
    """
    received = bytearray()
    try:
        while data := await response.receive_some():
            received += data
            if len(received) > MAX_JSON_BODY:
                raise InvalidChunk(f"the response is over {MAX_JSON_BODY} bytes")
        await response.release()
    finally:
        await response.aclose()  # nothing to do once released
    return load_object(received.decode("utf-8", errors="replace"))


async def _read_rejected_body(
    response: HTTPResponse, endpoint: Endpoint, proxy: Proxy | None = None
) -> tuple[bytes, bool]:
    """The start of a body that is about to be raised as an error, and whether it was cut.

    Reading stops after :data:`MAX_ERROR_BODY` bytes (going on past it, so a body
    of exactly the limit is known to be whole), after ``timeouts.error_body``
    seconds, or when the connection breaks: a partial body still makes a useful
    error, and a body that stalls must not hold the caller for the idle timeout.
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

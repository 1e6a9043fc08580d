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

One request per connection: chat streams are long, so connection reuse would
save little and cost a pool with its own cancellation story.  The socket is
closed with :func:`trio.aclose_forcefully` on every exit path, which never blocks,
so leaving the ``async with`` (error, cancellation, or a stream abandoned halfway)
cannot hang and never leaves the socket open.

The request is sent completely before the response is read.  Chat requests are
small, so a server that answers before reading the body (an early 413) is not
worth a second task.
"""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import attrs
import h11
import trio

from ._connect import Origin, open_connection
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
from ._payloads import parse_error_payload, parse_json
from ._retries import retry_after
from ._util import authority, close_now, redact
from ._version import __version__

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
_USER_AGENT = f"chunkwise/{__version__}"


def _pairs(items: Iterable[tuple[bytes, bytes]]) -> tuple[tuple[bytes, bytes], ...]:
    return tuple(items)


@attrs.frozen
class Headers(Mapping[str, str]):
    """HTTP header fields as received: order and spelling kept, lookup case-insensitive.

    ``headers["x-request-id"]`` gives the value; a field sent several times gives
    its values joined with ``", "`` (RFC 9110 5.3), and :meth:`get_all` gives them
    separately.  Iteration yields each lower-cased name once.  ``raw`` holds the
    ``(name, value)`` byte pairs exactly as h11 delivered them.
    """

    raw: tuple[tuple[bytes, bytes], ...] = attrs.field(converter=_pairs)

    def get_all(self, name: str) -> list[str]:
        """Every value of ``name``, in order; ``[]`` when absent."""
        key = name.lower().encode("latin-1")
        return [value.decode("latin-1") for n, value in self.raw if n.lower() == key]

    def __getitem__(self, name: str) -> str:
        values = self.get_all(name)
        if not values:
            raise KeyError(name)
        return ", ".join(values)

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys(n.lower().decode("latin-1") for n, _ in self.raw))

    def __len__(self) -> int:
        return len({n.lower() for n, _ in self.raw})


class HTTPResponse:
    """A response whose body is being received (a 2xx event stream, unless unchecked).

    Only :func:`open_http_response` creates these.  ``headers`` is a
    :class:`Headers`; ``http_version`` is e.g. ``"1.1"``.  Also an async
    iterator over body chunks (``async for data in response``).
    """

    __slots__ = ("_conn", "headers", "http_version", "reason", "status_code")

    def __init__(self, conn: Connection, head: h11.Response) -> None:
        self._conn = conn
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
        """Close the connection now.  Never blocks; closes even when cancelled."""
        await self._conn.aclose()
        await trio.lowlevel.checkpoint()

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
    transport: trio.abc.Stream | None = None,
    check: bool = True,
) -> AsyncIterator[HTTPResponse]:
    """POST ``body`` (JSON) to ``endpoint.url`` and yield the streaming response.

    Sends ``Host``, ``User-Agent: chunkwise/<version>``, ``Accept:
    text/event-stream``, ``Accept-Encoding: identity``, ``Content-Type:
    application/json``, ``Content-Length``, ``Authorization: Bearer <key>`` when a
    key is set, and the endpoint's extra headers.  Informational (1xx) responses
    are skipped; redirects are not followed.

    ``transport``, when given, is an already connected stream (TLS already
    applied, if wanted) used instead of connecting; it is closed on exit all the
    same.  Tests use it with :func:`trio.testing.memory_stream_pair`.

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
    if transport is None:
        transport = await connect(endpoint)
    conn = Connection(transport, endpoint)
    try:
        await conn.send_request(endpoint, body)
        response = HTTPResponse(conn, await conn.receive_head())
        if check:
            await _check_response(response, endpoint)
        yield response
    finally:
        await conn.aclose()


async def _check_response(response: HTTPResponse, endpoint: Endpoint) -> None:
    """Raise unless the response is a 2xx event stream chunkwise can read."""
    status = response.status_code
    headers = response.headers
    if not 200 <= status < 300:
        body, truncated = await _read_rejected_body(response, endpoint)
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
            body_start=(await _read_rejected_body(response, endpoint))[0],
        )


async def _read_rejected_body(response: HTTPResponse, endpoint: Endpoint) -> tuple[bytes, bool]:
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
    body = redact(bytes(received), endpoint.api_key, cut=not complete)
    return body[:MAX_ERROR_BODY], not complete


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


def _request_headers(endpoint: Endpoint, content_length: int) -> list[tuple[bytes, bytes]]:
    defaults = {
        "User-Agent": _USER_AGENT,
        "Accept": "text/event-stream",
        "Content-Type": "application/json",
    }
    if endpoint.api_key is not None:
        defaults["Authorization"] = f"Bearer {endpoint.api_key}"
    overridden = {name.lower() for name, _ in endpoint.headers}
    fields = [
        ("Host", endpoint.host_header),
        *((name, value) for name, value in defaults.items() if name.lower() not in overridden),
        # Without it any coding is acceptable (RFC 9110 12.5.3), and a gzipped event
        # stream cannot be parsed incrementally here.
        ("Accept-Encoding", "identity"),
        ("Content-Length", str(content_length)),
        *endpoint.headers,
    ]
    return [(name.encode("ascii"), value.encode("utf-8")) for name, value in fields]


class Connection:
    """The h11 client state machine and the stream under it: the one place with I/O."""

    def __init__(self, transport: trio.abc.Stream, endpoint: Endpoint) -> None:
        self._transport = transport
        self._h11 = h11.Connection(h11.CLIENT)
        self._host = endpoint.host
        self._port = endpoint.port
        self._where = authority(endpoint.host, endpoint.port)
        self._idle = math.inf if endpoint.timeouts.idle is None else endpoint.timeouts.idle
        self._eof = False  # h11 has been told the peer closed
        self._in_body = False
        self._done = False  # EndOfMessage seen
        self._received = 0
        self._expected: int | None = None
        # Raised by every later receive_some, after the data that preceded it.
        self._error: ChunkwiseError | None = None
        self._busy = False
        self._closed = False

    async def send_request(self, endpoint: Endpoint, body: bytes) -> None:
        request = h11.Request(
            method=b"POST",
            target=endpoint.target.encode("ascii"),
            headers=_request_headers(endpoint, len(body)),
        )
        try:
            data = b"".join(
                self._h11.send(event) or b""
                for event in (request, h11.Data(data=body), h11.EndOfMessage())
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

"""The exception hierarchy.

Modelled on h11: a :class:`ProtocolError` is either *local* (the caller used an
object wrongly) or *remote* (the peer sent something we cannot accept).  Errors
that describe a stream are also stored in results, so they compare by value:
two parses of the same bytes, however split, give equal results.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NoReturn

__all__ = [
    "ChunkwiseError",
    "ConnectTimeout",
    "ConnectionLost",
    "EventTooLarge",
    "HTTPStatusError",
    "IdleTimeout",
    "IncompleteBody",
    "InvalidChunk",
    "InvalidEndpoint",
    "InvalidJSON",
    "InvalidRequest",
    "LocalProtocolError",
    "ProtocolError",
    "ProxyError",
    "RemoteProtocolError",
    "StallTimeout",
    "StreamError",
    "StructuredOutputError",
    "ToolArgumentsError",
    "TransportError",
    "UnexpectedContentEncoding",
    "UnexpectedContentType",
]


class ChunkwiseError(Exception):
    """Base class of every exception chunkwise raises on purpose.

    Every one answers the questions an OpenAI error object answers, so that a
    result's ``error`` can be read the same way whatever went wrong:
    :attr:`message`, :attr:`type` and :attr:`code`.  The last two are the
    server's for a :class:`StreamError`, and ``None`` where they do not apply
    (an error chunkwise found itself, such as :class:`InvalidChunk`).
    """

    #: The error's kind as the server named it (``"server_error"``...), or None.
    type: str | None = None
    #: The server's error code, int or string as sent, or None.
    code: str | int | None = None

    @property
    def message(self) -> str:
        """What went wrong, as a string (the exception's first argument)."""
        return str(self.args[0]) if self.args else ""

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, ChunkwiseError)
        return self.args == other.args and _fields(self) == _fields(other)

    def __hash__(self) -> int:
        return hash((type(self), self.args))

    def __reduce__(self) -> tuple[Any, ...]:
        # Copies and pickles rebuild the error from its args and attributes:
        # the subclasses' constructors take other arguments than ``args``.
        return (_rebuild, (type(self), self.args, vars(self).copy()))


def _rebuild(cls: type[ChunkwiseError], args: tuple[Any, ...], state: dict[str, Any]) -> Any:
    exc = cls.__new__(cls)
    exc.args = args
    exc.__dict__.update(state)
    return exc


def raise_itself(exc: BaseException, *, fresh_traceback: bool = False) -> NoReturn:
    """Raise ``exc`` as itself, with the ``__cause__`` and ``__context__`` it carries.

    The one way chunkwise raises an exception object that already exists: an
    error stored by a decoder, a connection or a result and raised again on
    each call (``fresh_traceback=True``), or the one real exception taken out
    of an exception group (its traceback kept).

    A plain ``raise`` inside an ``except`` block would set ``__context__`` to
    the exception being handled; it is put back.  Every ``raise`` of one object
    also puts the raising frames in front of its ``__traceback__``, so a stored
    error raised by each call would carry a longer traceback every time (and
    keep those frames alive): ``fresh_traceback`` starts it afresh, showing the
    path of this raise only.
    """
    context = exc.__context__
    try:
        raise exc.with_traceback(None) if fresh_traceback else exc
    finally:
        exc.__context__ = context
        # The traceback refers to this frame: don't let the frame refer back.
        del exc, context


def _fields(exc: BaseException) -> dict[str, Any]:
    # __notes__ and friends are bookkeeping, not part of the error's value.
    return {k: v for k, v in vars(exc).items() if not k.startswith("_")}


class ProtocolError(ChunkwiseError):
    """Something broke the rules of HTTP, SSE or the chat-completions stream."""


class LocalProtocolError(ProtocolError):
    """The caller did something illegal, e.g. ``feed()`` after ``end()``."""


class RemoteProtocolError(ProtocolError):
    """The peer sent something we cannot accept."""


class EventTooLarge(RemoteProtocolError):
    """One server-sent event grew past ``max_event_size`` characters.

    Raised before the event is fully buffered, so memory stays bounded.
    """

    def __init__(self, limit: int) -> None:
        # No size: it depends on where the reads happened to end, and the
        # error must be the same however the bytes were split.
        super().__init__(f"a server-sent event exceeds max_event_size ({limit} characters)")
        self.limit = limit


class InvalidChunk(RemoteProtocolError):
    """An event's data is not a chat-completion chunk we can interpret.

    ``data`` holds (the start of) the offending text, so nothing is lost.
    """

    def __init__(self, message: str, data: str = "") -> None:
        super().__init__(message)
        self.data = data


class StreamError(ChunkwiseError):
    """An error reported *by the server* inside the stream.

    ``message`` is always a string (an object-valued message is kept as JSON
    text); ``code`` is kept as sent, int or string; ``body`` is the payload;
    ``retry_after`` the seconds the server asks to wait before asking again,
    when it says (a ``retry_after`` or ``retry_after_ms`` of the error).
    """

    def __init__(
        self,
        message: str,
        *,
        type: str | None = None,
        code: str | int | None = None,
        param: str | None = None,
        body: Mapping[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.type = type
        self.code = code
        self.param = param
        self.body = body
        self.retry_after = retry_after

    def __repr__(self) -> str:
        return f"StreamError({self.message!r}, type={self.type!r}, code={self.code!r})"


class ToolArgumentsError(ChunkwiseError):
    """A tool call's arguments are not valid JSON, or fail the tool's schema.

    ``raw`` is the concatenated argument text exactly as received.
    """

    def __init__(self, message: str, *, raw: str, tool_name: str | None = None) -> None:
        super().__init__(message)
        self.raw = raw
        self.tool_name = tool_name


class StructuredOutputError(ChunkwiseError):
    """A finished answer is not the JSON its schema asked for (structured outputs).

    ``raw`` is the answer's text exactly as received; ``schema_name`` the
    name of the requested schema, when it has one.
    """

    def __init__(self, message: str, *, raw: str, schema_name: str | None = None) -> None:
        super().__init__(message)
        self.raw = raw
        self.schema_name = schema_name


class TransportError(ChunkwiseError):
    """The connection failed: connect, TLS, or the socket broke mid-response.

    ``attempts`` is how many times the request was sent before this error
    (retries, see :class:`~chunkwise.Retries`); the message says so when it
    is more than one.
    """

    attempts: int = 1


class HTTPStatusError(ChunkwiseError):
    """The server answered with a non-2xx status.

    ``error`` is the parsed OpenAI-shaped error when the body had one.  ``body``
    is the start of the body (never the API key): ``truncated`` is True when it
    is not all of it (longer than ``MAX_ERROR_BODY``, slower than
    ``timeouts.error_body``, or the connection broke).  ``headers`` are the
    response's; ``attempts`` is how many times the request was sent.

    ``hint``, also said at the end of the message, is what the client knows
    and the status suggests: ``api_key_sent`` (whether the request carried a
    key at all, for a 401) and ``suggested_base_url`` (the base URL with
    ``/v1`` added, for a 404).  All three are ``None`` for an error built from
    a recorded response.
    """

    attempts: int = 1

    def __init__(
        self,
        status_code: int,
        *,
        reason: str = "",
        error: StreamError | None = None,
        body: bytes = b"",
        request_id: str | None = None,
        retry_after: float | None = None,
        truncated: bool = False,
        headers: Mapping[str, str] | None = None,
        hint: str | None = None,
        api_key_sent: bool | None = None,
        suggested_base_url: str | None = None,
    ) -> None:
        detail = error.message if error is not None else reason
        message = f"HTTP {status_code}: {detail}" if detail else f"HTTP {status_code}"
        if truncated:
            message += f" (body truncated to {len(body)} bytes)"
        if hint is not None:
            message += f" ({hint})"
        super().__init__(message)
        self.hint = hint
        self.api_key_sent = api_key_sent
        self.suggested_base_url = suggested_base_url
        self.status_code = status_code
        self.reason = reason
        self.error = error
        self.body = body
        self.truncated = truncated
        self.request_id = request_id
        self.retry_after = retry_after
        self.headers = headers


# --- Endpoint configuration and transport (layer 4) ----------------------------------------
#
# Every message below is built from the host, port, status and sizes only: never from a
# header value, so the API key cannot leak into an exception, a log line or a traceback.


class InvalidEndpoint(ChunkwiseError, ValueError):
    """An :class:`~chunkwise.Endpoint` was given a URL, key or header it cannot use.

    Raised when the endpoint is built, before anything is sent.  The message names
    the problem (and the header name), never the key or a header value.
    """


class ConnectTimeout(TransportError):
    """Connecting (TCP and, for ``https``, the TLS handshake) took longer than allowed.

    ``host`` and ``port`` are the API's.  ``tls_handshake``: the time ran out
    in the TLS handshake (often a plain-HTTP server; the message says so).
    ``proxy`` (its password masked) is set when the time ran out reaching the
    proxy or waiting for its tunnel.
    """

    def __init__(
        self,
        host: str,
        port: int,
        timeout: float,
        *,
        tls_handshake: bool = False,
        proxy: str | None = None,
        tunnel: bool = False,
    ) -> None:
        if proxy is not None and tunnel:
            message = (
                f"timed out after {timeout:g} s waiting for the proxy {proxy} "
                f"to open a tunnel to {host}:{port}"
            )
        elif proxy is not None:
            message = f"timed out after {timeout:g} s connecting to the proxy {proxy}"
        elif tls_handshake:
            message = (
                f"timed out after {timeout:g} s in the TLS handshake with {host}:{port}: "
                "the TCP connection was made, but the TLS handshake did not complete "
                "(if the server speaks plain HTTP, use an http:// URL)"
            )
        else:
            message = f"timed out after {timeout:g} s connecting to {host}:{port}"
        super().__init__(message)
        self.host = host
        self.port = port
        self.timeout = timeout
        self.tls_handshake = tls_handshake
        self.proxy = proxy


class ProxyError(TransportError):
    """The HTTP proxy refused or failed the ``CONNECT`` tunnel to the API's host.

    ``status_code`` is the proxy's answer (e.g. 407 for missing or wrong
    credentials; some proxies answer 401), ``None`` when it gave none.  The
    message names the proxy with its password masked.
    """

    def __init__(
        self, proxy: str, target: str, *, status_code: int | None = None, reason: str = ""
    ) -> None:
        detail = f"it answered {status_code} {reason}".rstrip() if status_code else reason
        super().__init__(f"proxy {proxy} failed to open a tunnel to {target}: {detail}")
        self.proxy = proxy
        self.target = target
        self.status_code = status_code
        self.reason = reason


class IdleTimeout(TransportError):
    """No response bytes arrived (or the request could not be sent) for ``timeout`` seconds.

    An idle timeout (``Timeouts.idle``), not a limit on the whole response.
    """

    def __init__(self, host: str, port: int, timeout: float) -> None:
        super().__init__(f"no progress from {host}:{port} for {timeout:g} s")
        self.host = host
        self.port = port
        self.timeout = timeout


class ConnectionLost(TransportError):
    """The peer closed or reset the connection before the response was complete."""


class IncompleteBody(ConnectionLost):
    """The connection ended inside a ``Content-Length`` or chunked response body.

    Raised only after every body byte that did arrive has been delivered.
    ``received`` counts those bytes; ``expected`` is the declared length, or
    ``None`` for a chunked (or close-delimited, when reset) body.
    """

    def __init__(self, message: str, *, received: int, expected: int | None) -> None:
        super().__init__(message)
        self.received = received
        self.expected = expected


class UnexpectedContentType(RemoteProtocolError):
    """A successful response is not ``text/event-stream``.

    ``content_type`` is the header as sent (``None`` when absent) and
    ``body_start`` the first bytes of the body, which often explain why
    (a JSON completion from a server that ignored ``stream``, an HTML error page).
    """

    def __init__(
        self, *, status_code: int, content_type: str | None, body_start: bytes = b""
    ) -> None:
        super().__init__(
            f"expected a text/event-stream response, got HTTP {status_code} "
            f"with content-type {content_type!r}"
        )
        self.status_code = status_code
        self.content_type = content_type
        self.body_start = body_start


class UnexpectedContentEncoding(RemoteProtocolError):
    """The response body is compressed although chunkwise asked for ``identity``."""

    def __init__(self, content_encoding: str) -> None:
        super().__init__(
            f"response uses Content-Encoding {content_encoding!r}, "
            "but the request sent Accept-Encoding: identity"
        )
        self.content_encoding = content_encoding


# --- The request body (layer 5) ------------------------------------------------------------


class InvalidRequest(ChunkwiseError, TypeError):
    """A request body chunkwise cannot send: not a mapping, or a value JSON cannot encode.

    Raised before anything is sent.  ``path`` names where the bad value is
    (``messages[0].content``; ``""`` for the request itself); the message says
    why JSON cannot hold it, quoting its type, never the value (a request may
    carry secrets).
    """

    def __init__(self, message: str, *, path: str = "") -> None:
        super().__init__(message)
        self.path = path


class StallTimeout(TransportError):
    """The server sent no output for longer than ``Timeouts.stall`` (see :doc:`/timeouts`).

    Never raised out of the stream's block: it is the ``error`` of a result
    ``incomplete`` with reason ``stalled``.
    """

    def __init__(self, host: str, port: int, timeout: float) -> None:
        super().__init__(f"no output from {host}:{port} for {timeout:g} s")
        self.host = host
        self.port = port
        self.timeout = timeout


# --- Live structured values (partial JSON) -------------------------------------------------


class InvalidJSON(ChunkwiseError, ValueError):
    """JSON text streamed to :class:`~chunkwise.PartialJSON` can no longer become JSON.

    Also raised past a limit (nesting depth, size).  ``offset`` is the position
    (in characters of the whole text) of the first offending character, or the
    text's length when it ended too early.  The same text gives the same error
    however it was split.
    """

    def __init__(self, message: str, *, offset: int) -> None:
        super().__init__(f"{message} (at character {offset})")
        self.offset = offset

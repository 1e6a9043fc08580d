"""Opening a connection: TCP, an HTTP proxy's CONNECT tunnel, and TLS.

Theory of operation
-------------------
:func:`open_connection` turns an :class:`Origin` into a connected trio stream
ready for HTTP/1.1, under one connect timeout covering every step:

1. TCP to the origin, or to the proxy when one is given;
2. for an ``https`` origin through a proxy, ``CONNECT host:port HTTP/1.1`` with
   ``Host: host:port`` (IPv6 in brackets, the port always present) and the
   proxy's credentials, on that request only; a non-2xx answer is a
   :class:`~chunkwise.ProxyError`.  Bytes after the proxy's answer belong to
   the tunnel and are handed to TLS first;
3. for ``https``, a verified TLS handshake naming the origin's host (SNI and
   certificate check), inside the tunnel when there is one.

An ``http`` origin through a proxy needs no tunnel: the request goes to the
proxy in absolute form (:func:`chunkwise._net.request.prepare_request`).

:meth:`trio.SSLStream.receive_some` decrypts one TLS record per call, so a
server that flushes every event costs a trip through the event loop, h11 and
the parser per record.  trio has no public way to take the records it already
holds; an earlier version reached into ``SSLStream``'s privates to do so, and
it is gone on purpose: the cost (one read per record) is accepted.

Every failure names its cause (connection refused, a name that does not
resolve, a server that does not speak TLS, a handshake that never completed, a
proxy that refused); the proxy's password and the API key never appear.
"""

from __future__ import annotations

import functools
import math
import os
import socket
import ssl
import sys

import attrs
import h11
import trio

from .._core.endpoint import Endpoint
from .._core.errors import ConnectTimeout, ProxyError, TransportError
from .._core.proxy import Proxy
from .._core.util import authority
from .tasks import close_now, exceptions_unwrapped
from .trace import Trace, TraceHook, log_event

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

__all__ = [
    "Origin",
    "PrefixedStream",
    "open_connection",
    "open_tunnel",
    "socket_of",
]

_READ_SIZE = 64 * 1024
#: A proxy's answer to CONNECT larger than this is not an HTTP answer.
_MAX_PROXY_ANSWER = 64 * 1024


@attrs.frozen
class Origin:
    """Where a request goes: scheme, host (IPv6 without brackets) and port."""

    scheme: str
    host: str
    port: int

    @classmethod
    def of(cls, endpoint: Endpoint) -> Origin:
        return cls(endpoint.scheme, endpoint.host, endpoint.port)

    @property
    def authority(self) -> str:
        """``host:port``, IPv6 in brackets."""
        return authority(self.host, self.port)


class PrefixedStream(trio.abc.Stream):
    """A stream whose first received bytes are ``prefix``: what a proxy sent past its answer."""

    def __init__(self, transport_stream: trio.abc.Stream, prefix: bytes) -> None:
        self.transport_stream = transport_stream
        self._prefix = prefix

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.transport_stream.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.transport_stream.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        if self._prefix:
            await trio.lowlevel.checkpoint()
            size = len(self._prefix) if max_bytes is None else max_bytes
            data, self._prefix = self._prefix[:size], self._prefix[size:]
            return data
        return await self.transport_stream.receive_some(max_bytes)

    async def aclose(self) -> None:
        await self.transport_stream.aclose()


def socket_of(stream: trio.abc.Stream) -> trio.socket.SocketType | None:
    """The socket under ``stream`` (through TLS and tunnels), or ``None`` (e.g. memory)."""
    inner: object = stream
    while True:
        if isinstance(inner, trio.SocketStream):
            return inner.socket
        inner = getattr(inner, "transport_stream", None)
        if inner is None:
            return None


@functools.cache
def _default_ssl_context() -> ssl.SSLContext:
    # Loading the trust store costs milliseconds; a thousand connections share one.
    return ssl.create_default_context()


async def open_connection(
    origin: Origin,
    *,
    connect_timeout: float | None,
    ssl_context: ssl.SSLContext | None = None,
    proxy: Proxy | None = None,
    trace: TraceHook = log_event,
) -> trio.abc.Stream:
    """A connected stream to ``origin`` (the module's steps), within ``connect_timeout`` seconds.

    Each step is traced (:mod:`~chunkwise._net.trace`): ``connect_tcp``,
    ``proxy_tunnel``, ``start_tls``.

    Raises:
        ConnectTimeout: the timeout expired (``tls_handshake`` says whether the
            TCP connection, and tunnel, had been made).
        ProxyError: the proxy refused or failed the CONNECT.
        TransportError: the connection was refused, the name did not resolve, or
            the TLS handshake failed; the ``OSError`` or TLS error is its cause.
    """
    tcp: trio.abc.Stream | None = None
    tunnelled = proxy is None  # no tunnel to wait for
    with trio.move_on_after(math.inf if connect_timeout is None else connect_timeout):
        with Trace("connect_tcp", trace):
            if proxy is None:
                tcp = await _open_tcp(origin.host, origin.port, "")
            else:
                tcp = await _open_tcp(proxy.host, proxy.port, "the proxy ")
        if origin.scheme == "http":
            return tcp
        try:
            if proxy is not None:
                with Trace("proxy_tunnel", trace):
                    tcp = await open_tunnel(tcp, proxy, origin)
                tunnelled = True
            with Trace("start_tls", trace):
                return await _tls_handshake(tcp, origin, ssl_context)
        except BaseException:
            await close_now(tcp)
            raise
    assert connect_timeout is not None
    # Where the time ran out: reaching the proxy, waiting for its tunnel, or
    # (once a TCP connection, and tunnel, existed) in the TLS handshake.
    if proxy is not None and not tunnelled:
        raise ConnectTimeout(
            origin.host, origin.port, connect_timeout, proxy=proxy.url, tunnel=tcp is not None
        )
    raise ConnectTimeout(origin.host, origin.port, connect_timeout, tls_handshake=tcp is not None)


async def _open_tcp(host: str, port: int, what: str) -> trio.abc.Stream:
    try:
        # trio tries each address in a nursery: a Ctrl-C (or a cancellation)
        # that lands there comes out as a group; callers must see it alone.
        with exceptions_unwrapped():
            return await trio.open_tcp_stream(host, port)
    except OSError as exc:
        where = authority(host, port)
        raise TransportError(
            f"cannot connect to {what}{where}: {_connect_failure(exc, host)}"
        ) from exc


def _connect_failure(exc: OSError, host: str) -> str:
    """Why connecting failed, in words: ``connection refused``, ``no route to host``...

    trio raises one ``OSError("all attempts to connect ... failed")`` whose cause
    is a group of the error of each address tried; the causes are what matter.
    """
    if isinstance(exc, socket.gaierror):  # retried as any failure: resolvers fail briefly too
        return f"the host name {host} did not resolve ({exc.strerror or exc})"
    cause = exc.__cause__
    attempts = (
        [e for e in cause.exceptions if isinstance(e, OSError)]
        if isinstance(cause, BaseExceptionGroup)
        else []
    )
    reasons = dict.fromkeys(_os_reason(e) for e in attempts or [exc])
    return ", ".join(reasons)


def _os_reason(exc: OSError) -> str:
    # trio's per-address message repeats the address; the errno's text is the reason.
    text = os.strerror(exc.errno) if exc.errno is not None else str(exc)
    return text[:1].lower() + text[1:]


async def open_tunnel(tcp: trio.abc.Stream, proxy: Proxy, origin: Origin) -> trio.abc.Stream:
    """``CONNECT`` through ``proxy`` to ``origin``; the stream inside the tunnel."""
    target = origin.authority.encode("ascii")
    headers = [(b"Host", target)]
    if proxy.authorization is not None:
        headers.append((b"Proxy-Authorization", proxy.authorization.encode("ascii")))
    client = h11.Connection(h11.CLIENT)
    request = client.send(h11.Request(method=b"CONNECT", target=target, headers=headers))
    eof = False
    try:
        await tcp.send_all(request or b"")
        received = 0
        while True:
            event = client.next_event()
            if isinstance(event, h11.Response):
                break
            if event is h11.NEED_DATA:
                data = await tcp.receive_some(_READ_SIZE)
                eof = not data
                received += len(data)
                if received > _MAX_PROXY_ANSWER:
                    raise ProxyError(proxy.url, origin.authority, reason="its answer is too long")
                client.receive_data(bytes(data))
            # Anything else is a 1xx answer: skipped.
    except h11.RemoteProtocolError as exc:
        reason = "it closed the connection" if eof else "its answer is not HTTP"
        raise ProxyError(proxy.url, origin.authority, reason=reason) from exc
    except (trio.BrokenResourceError, OSError) as exc:
        raise ProxyError(proxy.url, origin.authority, reason="the connection broke") from exc
    if not 200 <= event.status_code < 300:
        raise ProxyError(
            proxy.url,
            origin.authority,
            status_code=event.status_code,
            reason=event.reason.decode("latin-1"),
        )
    leftover, _ = client.trailing_data
    return PrefixedStream(tcp, bytes(leftover))


# OpenSSL's reasons for a reply that is not TLS at all, e.g. a plain-HTTP server
# answering the ClientHello with "HTTP/1.1 400 Bad Request".
_NOT_TLS_REASONS = frozenset(
    {
        "WRONG_VERSION_NUMBER",
        "HTTP_REQUEST",
        "PACKET_LENGTH_TOO_LONG",
        "RECORD_LAYER_FAILURE",
        "UNKNOWN_PROTOCOL",
    }
)


async def _tls_handshake(
    tcp: trio.abc.Stream, origin: Origin, ssl_context: ssl.SSLContext | None
) -> trio.abc.Stream:
    context = ssl_context or _default_ssl_context()
    tls = trio.SSLStream(tcp, context, server_hostname=origin.host, https_compatible=True)
    try:
        # Explicit, so the handshake counts against the connect timeout rather than
        # happening lazily inside the first send.
        await tls.do_handshake()
    except trio.BrokenResourceError as exc:
        raise TransportError(
            f"TLS handshake with {origin.authority} failed: {_tls_failure(exc)}"
        ) from exc
    return tls


def _tls_failure(exc: trio.BrokenResourceError) -> str:
    reason = exc.__cause__ if exc.__cause__ is not None else exc
    if isinstance(reason, ssl.SSLError) and reason.reason in _NOT_TLS_REASONS:
        return (
            "the server does not speak TLS: it answered the TLS hello with something "
            "else, such as plain HTTP (for a plain-HTTP server, use an http:// URL)"
        )
    if isinstance(reason, ssl.SSLEOFError):
        return (
            "the server closed the connection during the handshake (does it speak TLS? "
            "for a plain-HTTP server, use an http:// URL)"
        )
    return str(reason)

"""The request chunkwise sends, prepared from an :class:`~chunkwise.Endpoint` and a body.

A :class:`Request` is what a connection puts on the wire and nothing about
where it goes: the connection takes an origin and a prepared request
(httpcore's model), so the same connection code serves direct requests,
tunnelled ones and requests in absolute form through a proxy.
"""

from __future__ import annotations

import attrs

from ._endpoint import Endpoint
from ._proxy import Proxy
from ._version import __version__

__all__ = ["Request", "prepare_request"]

_USER_AGENT = f"chunkwise/{__version__}"


@attrs.frozen
class Request:
    """A request ready for the wire: what the connection sends, and nothing about where."""

    method: bytes
    target: bytes
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytes


def prepare_request(
    endpoint: Endpoint,
    body: bytes,
    *,
    path: str = "/chat/completions",
    proxy: Proxy | None = None,
) -> Request:
    """The ``POST`` of ``body`` to ``endpoint``; through ``proxy`` for an ``http`` endpoint.

    An ``http`` request through a proxy goes to the proxy in absolute form
    (``POST http://host:port/v1/chat/completions``) with the proxy's
    credentials; an ``https`` one goes through a tunnel (see
    :mod:`chunkwise._connect`) and is sent exactly as without a proxy, so the
    proxy never sees it.
    """
    target = endpoint.target_for(path)
    headers = _request_headers(endpoint, len(body))
    if proxy is not None and endpoint.scheme == "http":
        target = f"http://{endpoint.host_header}{target}"
        if proxy.authorization is not None:
            headers.append((b"Proxy-Authorization", proxy.authorization.encode("ascii")))
    return Request(b"POST", target.encode("ascii"), tuple(headers), body)


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

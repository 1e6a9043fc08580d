"""The request chunkwise sends, prepared from an :class:`~chunkwise.Endpoint` and a body.

A :class:`Request` is what a connection puts on the wire and nothing about
where it goes (httpcore's model), so one connection code serves direct,
tunnelled and proxied requests.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from typing import Any, Literal

import attrs

from .._core.endpoint import Endpoint
from .._core.errors import InvalidRequest
from .._core.proxy import Proxy
from .._core.version import __version__

__all__ = ["ANTHROPIC_VERSION", "Auth", "Request", "encode_request", "prepare_request"]

_USER_AGENT = f"chunkwise/{__version__}"

#: How an API is sent the key: OpenAI's ``Authorization: Bearer <key>``, or
#: Anthropic's ``x-api-key: <key>`` with an ``anthropic-version`` (the Messages API).
Auth = Literal["bearer", "anthropic"]
#: The ``anthropic-version`` sent to the Messages API unless the endpoint sets its own.
ANTHROPIC_VERSION = "2023-06-01"


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
    method: str = "POST",
    accept: str = "text/event-stream",
    auth: Auth = "bearer",
) -> Request:
    """The ``POST`` of ``body`` to ``endpoint``; through ``proxy`` for an ``http`` endpoint.

    Sends ``Host``, ``User-Agent: chunkwise/<version>``, ``Accept: <accept>``,
    ``Accept-Encoding: identity``, ``Content-Type: application/json`` with a
    body, ``Content-Length`` unless a ``GET``, ``Authorization: Bearer <key>``
    when a key is set (with ``auth="anthropic"``: ``x-api-key: <key>`` and
    ``anthropic-version: 2023-06-01``), and the endpoint's own headers, which
    replace the defaults of the same name.

    An ``http`` request through a proxy goes to the proxy in absolute form with
    the proxy's credentials; an ``https`` one goes through a tunnel
    (:mod:`chunkwise._net.connect`) exactly as without a proxy.
    """
    target = endpoint.target_for(path)
    headers = _request_headers(endpoint, None if method == "GET" else len(body), accept, auth)
    if proxy is not None and endpoint.scheme == "http":
        target = f"http://{endpoint.host_header}{target}"
        if proxy.authorization is not None:
            headers.append((b"Proxy-Authorization", proxy.authorization.encode("ascii")))
    return Request(method.encode("ascii"), target.encode("ascii"), tuple(headers), body)


def _request_headers(
    endpoint: Endpoint, content_length: int | None, accept: str, auth: Auth
) -> list[tuple[bytes, bytes]]:
    defaults = {"User-Agent": _USER_AGENT, "Accept": accept}
    if content_length:
        defaults["Content-Type"] = "application/json"
    if auth == "anthropic":
        defaults["anthropic-version"] = ANTHROPIC_VERSION
        if endpoint.api_key is not None:
            defaults["x-api-key"] = endpoint.api_key
    elif endpoint.api_key is not None:
        defaults["Authorization"] = f"Bearer {endpoint.api_key}"
    overridden = {name.lower() for name, _ in endpoint.headers}
    fields = [
        ("Host", endpoint.host_header),
        *((name, value) for name, value in defaults.items() if name.lower() not in overridden),
        # Without it any coding is acceptable (RFC 9110 12.5.3), and a gzipped event
        # stream cannot be parsed incrementally here.
        ("Accept-Encoding", "identity"),
        *([] if content_length is None else [("Content-Length", str(content_length))]),
        *endpoint.headers,
    ]
    return [(name.encode("ascii"), value.encode("utf-8")) for name, value in fields]


# -- the body --------------------------------------------------------------------------
#
# json.dumps is the encoder and the judge: the request is walked only when it
# refused, to say where (a large request costs one C-speed encoding, nothing
# more).  The walk applies json.dumps's own rules, in its order, so what it
# finds is what json.dumps stopped at.

# Key types json.dumps turns into strings.
_KEY_TYPES = (str, int, float, bool, type(None))


def encode_request(request: object) -> bytes:
    """The JSON body (UTF-8) of ``request``, with ``"stream": true`` set.

    Any :class:`~collections.abc.Mapping` is accepted at every level.

    Raises:
        InvalidRequest: ``request`` is not a mapping, or holds a value JSON
            cannot encode; its ``path`` says where, and the encoder's own
            error is its cause.
    """
    if not isinstance(request, Mapping):
        raise InvalidRequest(
            "the request must be a mapping: the JSON body, such as "
            f"{{'model': ..., 'messages': [...]}}, not {_type_name(request)}"
        )
    body = {**request, "stream": True}
    try:
        return json.dumps(body, ensure_ascii=False, allow_nan=False, default=_plain).encode()
    except (TypeError, ValueError, RecursionError) as exc:  # UnicodeEncodeError is a ValueError
        found = _first_problem(body)
        if found is None:  # nested deeper than the encoder's recursion allows
            raise InvalidRequest(f"the request cannot be encoded as JSON ({exc})") from exc
        path, problem = found
        raise InvalidRequest(f"request {path or 'body'} {problem}", path=path) from exc


def _plain(value: object) -> object:
    # json.dumps's fallback: any mapping is an object; anything else is refused.
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"Object of type {_type_name(value)} is not JSON serializable")


def _type_name(value: object) -> str:
    return type(value).__qualname__


def _format_path(components: list[object]) -> str:
    """``messages[0].content``: keys as attributes when they can be, else subscripts."""
    text = ""
    for part in components:
        if isinstance(part, str) and part.isidentifier():
            text = f"{text}.{part}" if text else part
        else:
            text = f"{text}[{part!r}]"
    return text


def _scalar_problem(value: object) -> str | None:
    """Why json.dumps (strict, UTF-8) refuses a value that is not a container, or ``None``."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            char = value[exc.start]
            return (
                f"is a string holding a lone surrogate (U+{ord(char):04X}), which is not "
                "Unicode text and cannot be sent as UTF-8"
            )
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return f"is {value!r}, which JSON cannot represent (allowed numbers are finite)"
    if isinstance(value, (int, float, bool)) or value is None:
        return None
    hint = " (decode bytes to str; base64 for binary data)" if isinstance(value, bytes) else ""
    return f"is of type {_type_name(value)}, which JSON cannot encode{hint}"


_Children = Iterator[tuple[object, object]]


def _children(value: object) -> _Children:
    """The items of a container, as json.dumps takes them (raises :class:`_Found` at a key)."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, _KEY_TYPES):
                raise _Found(f"has a key of type {_type_name(key)}; JSON keys are strings")
            problem = _scalar_problem(key)
            if problem is not None:
                raise _Found(f"has a key that {problem}")
            yield key, item
    else:
        assert isinstance(value, (list, tuple))
        yield from enumerate(value)


class _Found(Exception):
    """A container's key is the problem: found at the container's own path."""

    def __init__(self, problem: str) -> None:
        self.problem = problem


def _first_problem(body: Mapping[Any, Any]) -> tuple[str, str] | None:
    """Where json.dumps refused ``body``, and why: ``(path, problem)``, or ``None``.

    Depth-first and iterative (a request too deep for the encoder's recursion
    is walked all the same), linear in its size: the path is kept as a list of
    keys and indices and written out only for the value found.  The containers
    on the current path are tracked, so one that holds itself is found where
    the loop closes.
    """
    stack: list[tuple[int, _Children]] = [(id(body), _children(body))]
    path: list[object] = []  # the keys leading to stack[-1]
    active = {id(body)}
    while stack:
        ident, children = stack[-1]
        try:
            child = next(children, None)
        except _Found as found:
            return _format_path(path), found.problem
        if child is None:
            stack.pop()
            active.discard(ident)
            if path:
                path.pop()
            continue
        key, value = child
        if isinstance(value, (Mapping, list, tuple)):
            path.append(key)
            if id(value) in active:
                return _format_path(path), (
                    "closes a circular reference (a container holding itself), "
                    "which JSON cannot encode"
                )
            active.add(id(value))
            stack.append((id(value), _children(value)))
            continue
        problem = _scalar_problem(value)
        if problem is not None:
            return _format_path([*path, key]), problem
    return None

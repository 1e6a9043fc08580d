"""Where to send a request, and with which credentials: plain configuration, no I/O.

Everything that could make a request fail before a byte is sent is checked when
an :class:`Endpoint` is built, so a bad URL or a header value carrying
``\\r\\n`` raises :class:`InvalidEndpoint` at construction, not inside a
nursery later.  The base URL is used as given, with the API's path appended,
because OpenAI-compatible servers disagree on the prefix (``/v1``, ``/api/v1``,
``/v1beta/openai``); a trailing slash is dropped.  The API key is the one
secret: the repr shows ``api_key=<set>``, and messages name the offending
header but never quote a header value or the key.
"""

from __future__ import annotations

import ipaddress
import os
import re
import ssl
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

import attrs

from .checks import instance_of, positive_seconds
from .errors import InvalidEndpoint
from .proxy import Proxy, parse_proxy_url, select_proxy
from .retries import Retries
from .telemetry import Telemetry
from .util import authority, url_host

__all__ = ["DEFAULT_BASE_URL", "Endpoint", "Timeouts"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
# Anthropic's base URL as its SDK spells it (ANTHROPIC_BASE_URL), without the /v1
# that chunkwise's base URLs end with.
_ANTHROPIC_BASE_URL = "https://api.anthropic.com"
_APIS = ("chat", "responses", "completions", "messages")

_COMPLETIONS_PATH = "/chat/completions"
_DEFAULT_PORTS = {"http": 80, "https": 443}

# RFC 9110 token characters: the only ones allowed in a header name.
_TOKEN_RE = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# C0 controls except HTAB, and DEL.  CR, LF and NUL are the injection risk; the
# others are refused too because no server accepts them and h11 would quote the
# whole value (possibly the key) in its error message.
_FORBIDDEN_IN_VALUE_RE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
_HOST_RE = re.compile(r"[A-Za-z0-9._~%!$&'()*+,;=-]+")

# Headers that describe the connection or the message framing, which the HTTP layer
# owns.  Letting a caller set them would desynchronise h11 from the bytes on the wire
# (Content-Length, Transfer-Encoding), or ask for a compressed body the stream parser
# cannot read (Accept-Encoding).
_MANAGED_HEADERS = frozenset(
    {"host", "content-length", "transfer-encoding", "connection", "accept-encoding"}
)


# Every endpoint setting raises InvalidEndpoint, for a wrong type too: one error
# type for "this endpoint is wrong", a ValueError as the others are.
_TIMEOUT = positive_seconds.or_none().raising(InvalidEndpoint)


@attrs.frozen(kw_only=True)
class Timeouts:
    """Transport time limits, in seconds; ``None`` disables one (see :doc:`/timeouts`).

    ``connect``: the TCP connection and TLS handshake
    (:class:`~chunkwise.ConnectTimeout`).  ``idle``: each wait for progress
    once connected, reset by every byte (:class:`~chunkwise.IdleTimeout`).
    ``error_body``: reading the body of an error response.  ``stall`` (off by
    default): the wait between *output* events, from the first one on
    (:class:`~chunkwise.StallTimeout`).  For a limit on the whole request,
    use your own :func:`trio.fail_after`.
    """

    connect: float | None = 10.0
    idle: float | None = 600.0
    error_body: float | None = 5.0
    stall: float | None = None

    def __attrs_post_init__(self) -> None:
        # Named "connect timeout", not "connect": the word alone says too little.
        for name in ("connect", "idle", "error_body", "stall"):
            _TIMEOUT.check(f"{name} timeout", getattr(self, name))


@attrs.frozen
class _URLParts:
    scheme: str
    host: str
    port: int
    path: str
    explicit_port: bool


def _parse_base_url(url: str) -> _URLParts:
    """Split and check a base URL; every refusal says what is wrong."""
    if not isinstance(url, str):
        raise InvalidEndpoint(f"base URL must be a str, not {type(url).__name__}")
    try:
        url.encode("ascii")
    except UnicodeEncodeError:
        raise InvalidEndpoint(
            f"base URL {url!r} contains non-ASCII characters "
            "(use punycode for the host and percent-encoding for the path)"
        ) from None
    if re.search(r"[\x00-\x20\x7f]", url):
        raise InvalidEndpoint(f"base URL {url!r} contains whitespace or control characters")
    if "://" not in url:
        raise InvalidEndpoint(
            f"base URL {url!r} has no scheme (expected e.g. 'https://api.openai.com/v1')"
        )
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # e.g. an unbalanced or invalid [IPv6] host
        raise InvalidEndpoint(f"base URL {url!r} is malformed: {exc}") from None
    if "@" in parts.netloc:
        # Don't quote the URL: the userinfo may be a password.
        raise InvalidEndpoint(
            "base URL contains credentials (user:password@); pass the key as api_key instead"
        )
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise InvalidEndpoint(f"base URL {url!r} has scheme {scheme!r}; use http or https")
    if "?" in url or "#" in url:
        # Don't quote the URL: a query is where some relays put a key.
        raise InvalidEndpoint(
            f"base URL has a query or fragment; chunkwise appends {_COMPLETIONS_PATH!r} "
            "to the path, so the base URL must end with its path"
        )
    host = parts.hostname
    if not host:
        raise InvalidEndpoint(f"base URL {url!r} has no host")
    if parts.netloc.startswith("["):
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise InvalidEndpoint(f"base URL {url!r} has an invalid IPv6 address") from None
    elif not _HOST_RE.fullmatch(host):
        raise InvalidEndpoint(f"base URL {url!r} has an invalid host {host!r}")
    try:
        port = parts.port
    except ValueError:
        port = 0
    if port == 0:
        raise InvalidEndpoint(f"base URL {url!r} has an invalid port (expected 1-65535)")
    path = parts.path.rstrip("/")
    if path.endswith(_COMPLETIONS_PATH):
        raise InvalidEndpoint(
            f"base URL {url!r} already ends with {_COMPLETIONS_PATH!r}; give the base "
            f"(e.g. {url[: url.rindex(_COMPLETIONS_PATH)]!r}), chunkwise appends the rest"
        )
    return _URLParts(
        scheme=scheme,
        host=host,
        port=port if port is not None else _DEFAULT_PORTS[scheme],
        path=path,
        explicit_port=port is not None and port != _DEFAULT_PORTS[scheme],
    )


def _check_header_value(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise InvalidEndpoint(f"{what} must be a str, not {type(value).__name__}")
    if _FORBIDDEN_IN_VALUE_RE.search(value):
        # The value itself is never quoted: it may be a credential.
        raise InvalidEndpoint(
            f"{what} contains CR, LF, NUL or another control character; refusing to send it"
        )
    return value


def _convert_api_key(key: str | None) -> str | None:
    if key is None:
        return None
    _check_header_value(key, "api_key")
    if key != key.strip(" \t"):
        raise InvalidEndpoint("api_key has leading or trailing whitespace")
    if not key.isascii():
        raise InvalidEndpoint("api_key contains non-ASCII characters")
    return key or None


def _convert_headers(
    headers: Mapping[str, str] | Iterable[tuple[str, str]],
) -> tuple[tuple[str, str], ...]:
    items: Iterable[Any] = headers.items() if isinstance(headers, Mapping) else headers
    result: list[tuple[str, str]] = []
    for item in items:
        try:
            name, value = item
        except (TypeError, ValueError):
            raise InvalidEndpoint("headers must be a mapping or (name, value) pairs") from None
        if not isinstance(name, str) or not _TOKEN_RE.fullmatch(name):
            raise InvalidEndpoint(f"invalid header name {name!r}")
        if name.lower() in _MANAGED_HEADERS:
            raise InvalidEndpoint(f"header {name!r} is set by chunkwise and cannot be overridden")
        # Optional whitespace around a value is not part of it (RFC 9110 5.5), and h11
        # refuses to send it.
        result.append((name, _check_header_value(value, f"header {name!r}").strip(" \t")))
    return tuple(result)


_SSL_CONTEXT = instance_of(ssl.SSLContext, "an ssl.SSLContext").or_none().raising(InvalidEndpoint)
_TIMEOUTS = instance_of(Timeouts, "a chunkwise.Timeouts").raising(InvalidEndpoint)
_RETRIES = instance_of(Retries, "a chunkwise.Retries").raising(InvalidEndpoint)
_TRUST_ENV = instance_of(bool, "a bool").raising(InvalidEndpoint)
_TELEMETRY = (
    instance_of(Telemetry, "chunkwise.telemetry.instrument()'s result")
    .or_none()
    .raising(InvalidEndpoint)
)


def _check_proxy(_: Any, __: Any, value: Any) -> None:
    if value is not None:
        parse_proxy_url(value)  # raises InvalidEndpoint, never quoting the URL


@attrs.frozen(repr=False)
class Endpoint:
    """An OpenAI-compatible server: base URL, API key, extra headers.

    Args:
        base_url: e.g. ``"https://api.openai.com/v1"``, to which the API's path
            is appended: ``http`` or ``https``, with a host and no query,
            fragment or credentials.
        api_key: sent as ``Authorization: Bearer <key>``; ``None`` or ``""``
            sends none (local servers).
        headers: extra request headers, a mapping or ``(name, value)`` pairs,
            replacing chunkwise's of the same name; the framing headers cannot
            be set (see :doc:`/relays`).
        ssl_context: for ``https``; defaults to :func:`ssl.create_default_context`.
        timeouts: see :class:`Timeouts`.
        retries: see :class:`Retries`: what is tried again before a stream
            starts (never after).
        proxy: an HTTP proxy, ``"http://[user:password@]host[:port]"``
            (see :doc:`/client`); ``None`` reads the environment when
            ``trust_env`` is true.  The password never appears in a repr or
            message.
        trust_env: read the proxy environment variables (default True).
        telemetry: :func:`chunkwise.telemetry.instrument`'s result: a span and
            the GenAI client metrics for each stream (:doc:`/telemetry`).

    Raises:
        InvalidEndpoint: a :class:`ValueError` naming what is wrong.
    """

    base_url: str
    api_key: str | None = attrs.field(
        default=None, kw_only=True, repr=False, converter=_convert_api_key
    )
    headers: tuple[tuple[str, str], ...] = attrs.field(
        default=(), kw_only=True, converter=_convert_headers
    )
    ssl_context: ssl.SSLContext | None = attrs.field(
        default=None, kw_only=True, validator=_SSL_CONTEXT
    )
    timeouts: Timeouts = attrs.field(factory=Timeouts, kw_only=True, validator=_TIMEOUTS)
    retries: Retries = attrs.field(factory=Retries, kw_only=True, validator=_RETRIES)
    proxy: str | None = attrs.field(default=None, kw_only=True, repr=False, validator=_check_proxy)
    trust_env: bool = attrs.field(default=True, kw_only=True, validator=_TRUST_ENV)
    telemetry: Telemetry | None = attrs.field(
        default=None, kw_only=True, repr=False, validator=_TELEMETRY
    )
    _parts: _URLParts = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        # Parse the URL as given, so error messages quote what the caller wrote, then
        # store it without the trailing slash: both spellings are the same endpoint.
        object.__setattr__(self, "_parts", _parse_base_url(self.base_url))
        object.__setattr__(self, "base_url", self.base_url.rstrip("/"))

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        headers: Mapping[str, str] | Iterable[tuple[str, str]] = (),
        ssl_context: ssl.SSLContext | None = None,
        timeouts: Timeouts | None = None,
        api: str = "chat",
    ) -> Endpoint:
        """Build an endpoint from ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY``.

        ``environ`` defaults to :data:`os.environ`.  An unset or empty
        ``OPENAI_BASE_URL`` means :data:`DEFAULT_BASE_URL`.  Whitespace around
        the key (a trailing newline from ``$(cat keyfile)``) is removed; anything
        else unusual in it raises :class:`InvalidEndpoint`.

        With ``api="messages"`` (Anthropic's), ``ANTHROPIC_BASE_URL`` and
        ``ANTHROPIC_API_KEY`` are read instead, as the ``anthropic`` SDK reads
        them: the base URL is the host's (default ``https://api.anthropic.com``),
        to which ``/v1`` is added unless it ends with it already.  ``api`` is
        one of ``"chat"``, ``"responses"``, ``"completions"``, ``"messages"``.
        """
        if api not in _APIS:
            raise InvalidEndpoint(f"api must be one of {', '.join(_APIS)}, not {api!r}")
        env = os.environ if environ is None else environ
        prefix = "ANTHROPIC" if api == "messages" else "OPENAI"
        key = env.get(f"{prefix}_API_KEY", "").strip() or None
        url = env.get(f"{prefix}_BASE_URL", "").strip()
        if api == "messages":
            url = (url or _ANTHROPIC_BASE_URL).rstrip("/")
            url = url if url.endswith("/v1") else url + "/v1"
        return cls(
            url or DEFAULT_BASE_URL,
            api_key=key,
            headers=headers,
            ssl_context=ssl_context,
            timeouts=timeouts if timeouts is not None else Timeouts(),
        )

    @property
    def url(self) -> str:
        """The full URL requests are sent to."""
        return self.base_url + _COMPLETIONS_PATH

    @property
    def scheme(self) -> str:
        """``"http"`` or ``"https"`` (lower case)."""
        return self._parts.scheme

    @property
    def host(self) -> str:
        """Host name or IP address to connect to (IPv6 without brackets)."""
        return self._parts.host

    @property
    def port(self) -> int:
        """TCP port; the scheme's default when the URL has none."""
        return self._parts.port

    @property
    def target(self) -> str:
        """Request target: the base URL's path plus ``/chat/completions``."""
        return self.target_for(_COMPLETIONS_PATH)

    def target_for(self, path: str) -> str:
        """Request target of an API path (``/responses``): the base URL's path plus it."""
        return self._parts.path + path

    @property
    def host_header(self) -> str:
        """Value of the ``Host`` header: the port only when it is not the default."""
        if self._parts.explicit_port:
            return authority(self.host, self.port)
        return url_host(self.host)

    def __repr__(self) -> str:
        key = "<set>" if self.api_key is not None else "None"
        # Header values may be credentials too (e.g. an ``api-key`` header): names only.
        names = tuple(name for name, _ in self.headers)
        ctx = ", ssl_context=<custom>" if self.ssl_context is not None else ""
        proxy = ""
        if self.proxy is not None:
            proxy = f", proxy={parse_proxy_url(self.proxy).url!r}"  # the password masked
        env = "" if self.trust_env else ", trust_env=False"
        env += "" if self.telemetry is None else ", telemetry=<on>"
        return (
            f"Endpoint({self.base_url!r}, api_key={key}, headers={names!r}{ctx}, "
            f"timeouts={self.timeouts!r}, retries={self.retries!r}{proxy}{env})"
        )

    def select_proxy(self, environ: Mapping[str, str] | None = None) -> Proxy | None:
        """The proxy requests to this endpoint go through, or ``None`` (direct).

        ``environ`` defaults to :data:`os.environ`, read at each call.
        """
        return select_proxy(
            self.proxy,
            trust_env=self.trust_env,
            environ=os.environ if environ is None else environ,
            scheme=self.scheme,
            host=self.host,
            port=self.port,
        )

"""Which proxy a request goes through: proxy URLs, the environment, and ``NO_PROXY``.

Pure functions and one frozen class, no I/O: the transport asks :func:`select_proxy`
for a target's proxy and gets a :class:`Proxy` or ``None``.

Rules (curl's and httpx's, which users expect; the tests keep them as a table)
------------------------------------------------------------------------------
1. An explicit ``Endpoint(proxy=...)`` wins; the environment is read only when it
   is ``None`` and ``trust_env`` is true.
2. The variable is chosen by the target's scheme: ``https_proxy`` for ``https://``
   targets, ``http_proxy`` for ``http://``, then ``all_proxy`` for both.  For each
   name the lowercase spelling wins over the uppercase one, and an empty lowercase
   value unsets the variable (the uppercase one is then not consulted either).
   ``HTTP_PROXY`` in uppercase is honoured like the others (a CGI concern that
   does not apply to a client library).
3. A proxy URL without a scheme means ``http://``; only ``http://`` proxies are
   supported (a TLS connection *to* the proxy is not); the port defaults to 80.
   User and password are percent-decoded and used only for
   ``Proxy-Authorization: Basic``; they never appear in a repr or message.
4. ``NO_PROXY`` (``no_proxy`` wins, as in rule 2) is a comma-separated list,
   spaces ignored; an entry matches when
   * it is ``*``: every host;
   * it is a domain, written ``example.com``, ``.example.com`` or
     ``*.example.com``: the domain itself and every subdomain (case-insensitive,
     a trailing dot ignored);
   * it is an IP address (IPv6 with or without brackets): that address exactly;
   * it is a CIDR block (``10.0.0.0/8``, ``::1/128``): every address inside it;
   * it ends in ``:port`` (``example.com:8080``, ``[::1]:8080``): as above, for
     that port only.
   A host name is never resolved to match an address entry.
"""

from __future__ import annotations

import base64
import ipaddress
from collections.abc import Mapping
from urllib.parse import unquote, urlsplit

import attrs

from .errors import InvalidEndpoint
from .util import authority

__all__ = ["Proxy", "bypasses_proxy", "parse_proxy_url", "proxy_from_environment", "select_proxy"]

_PROXY_DEFAULT_PORT = 80


@attrs.frozen(repr=False)
class Proxy:
    """An HTTP proxy: where it is, and the credentials for ``Proxy-Authorization``."""

    host: str
    port: int
    username: str | None = None
    password: str | None = None

    @property
    def authorization(self) -> str | None:
        """The ``Proxy-Authorization`` value, or ``None`` without credentials."""
        if self.username is None:
            return None
        token = f"{self.username}:{self.password or ''}".encode()
        return "Basic " + base64.b64encode(token).decode("ascii")

    @property
    def url(self) -> str:
        """The proxy's URL with the password masked: safe to show."""
        user = ""
        if self.username is not None:
            user = self.username + (":***" if self.password is not None else "") + "@"
        return f"http://{user}{authority(self.host, self.port)}"

    def __repr__(self) -> str:
        return f"Proxy({self.url!r})"


def parse_proxy_url(url: str) -> Proxy:
    """A :class:`Proxy` from ``http://user:pass@host:port`` (rule 3).

    Raises:
        InvalidEndpoint: the URL is not a usable HTTP proxy URL (the URL itself is
            never quoted: it may hold a password).
    """
    if not isinstance(url, str):
        raise InvalidEndpoint(f"proxy must be a str, not {type(url).__name__}")
    text = url.strip()
    if "://" not in text:
        text = "http://" + text
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        raise InvalidEndpoint("proxy URL is malformed (bad host or port)") from None
    scheme = parts.scheme.lower()
    if scheme != "http":
        raise InvalidEndpoint(
            f"proxy URL has scheme {scheme!r}; only http:// proxies are supported"
        )
    host = parts.hostname
    if not host:
        raise InvalidEndpoint("proxy URL has no host")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise InvalidEndpoint("proxy URL must be http://[user:password@]host[:port]")
    username = None if parts.username is None else unquote(parts.username)
    password = None if parts.password is None else unquote(parts.password)
    return Proxy(
        host=host,
        port=_PROXY_DEFAULT_PORT if port is None else port,
        username=username,
        password=password,
    )


def _variable(environ: Mapping[str, str], name: str) -> str | None:
    """Rule 2: the lowercase spelling wins; an empty lowercase value unsets."""
    value = environ.get(name.lower())
    if value is None:
        value = environ.get(name.upper())
    return None if value is None else value.strip() or None


def proxy_from_environment(environ: Mapping[str, str], scheme: str) -> str | None:
    """The proxy URL the environment gives a ``scheme`` target, ignoring ``NO_PROXY``."""
    specific = "https_proxy" if scheme == "https" else "http_proxy"
    return _variable(environ, specific) or _variable(environ, "all_proxy")


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text.strip("[]").split("%")[0])
    except ValueError:
        return None


def _entry_matches(entry: str, host: str, port: int) -> bool:
    entry_port: int | None = None
    # ``host:port``, ``[v6]:port``; a bare IPv6 address has colons but no port.
    if entry.startswith("["):
        inside, _, rest = entry[1:].partition("]")
        if rest.startswith(":") and rest[1:].isdigit():
            entry_port = int(rest[1:])
        entry = inside
    elif entry.count(":") == 1:
        name, _, number = entry.partition(":")
        if number.isdigit():
            entry, entry_port = name, int(number)
    if entry_port is not None and entry_port != port:
        return False
    if "/" in entry:
        try:
            network = ipaddress.ip_network(entry, strict=False)
        except ValueError:
            return False
        address = _address(host)
        return address is not None and address.version == network.version and address in network
    entry_address = _address(entry)
    if entry_address is not None:
        return _address(host) == entry_address
    domain = entry.lower().rstrip(".").removeprefix("*").removeprefix(".")
    if not domain:
        return False
    name = host.lower().rstrip(".")
    return name == domain or name.endswith("." + domain)


def bypasses_proxy(no_proxy: str, host: str, port: int) -> bool:
    """Whether a ``NO_PROXY`` value exempts ``host:port`` from the proxy (rule 4)."""
    for raw in no_proxy.split(","):
        entry = raw.strip()
        if entry == "*":
            return True
        if entry and _entry_matches(entry, host, port):
            return True
    return False


def select_proxy(
    proxy: str | None,
    *,
    trust_env: bool,
    environ: Mapping[str, str],
    scheme: str,
    host: str,
    port: int,
) -> Proxy | None:
    """The proxy for a request to ``scheme://host:port``, or ``None`` to go direct (rule 1)."""
    if proxy is not None:
        return parse_proxy_url(proxy)
    if not trust_env:
        return None
    url = proxy_from_environment(environ, scheme)
    if url is None:
        return None
    no_proxy = _variable(environ, "no_proxy")
    if no_proxy is not None and bypasses_proxy(no_proxy, host, port):
        return None
    return parse_proxy_url(url)

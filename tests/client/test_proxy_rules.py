"""The proxy rules of ``chunkwise._core.proxy`` as tables: NO_PROXY, the environment, proxy URLs."""

from __future__ import annotations

import pytest

from chunkwise import InvalidEndpoint
from chunkwise._core.proxy import (
    Proxy,
    bypasses_proxy,
    parse_proxy_url,
    proxy_from_environment,
    select_proxy,
)

# (NO_PROXY value, host, port, bypassed)
NO_PROXY_TABLE = [
    # `*` bypasses everything; an empty list nothing.
    ("*", "api.openai.com", 443, True),
    ("", "api.openai.com", 443, False),
    (" , ,", "api.openai.com", 443, False),
    # A domain, with or without a leading dot or `*.`, covers itself and subdomains.
    ("example.com", "example.com", 443, True),
    ("example.com", "api.example.com", 443, True),
    ("example.com", "a.b.example.com", 80, True),
    (".example.com", "example.com", 443, True),
    (".example.com", "api.example.com", 443, True),
    ("*.example.com", "example.com", 443, True),
    ("*.example.com", "api.example.com", 443, True),
    # ...but not a name that merely ends with the same letters.
    ("example.com", "badexample.com", 443, False),
    ("example.com", "example.com.evil.net", 443, False),
    ("example.com", "example.org", 443, False),
    # Case and a trailing dot do not matter.
    ("Example.COM", "API.example.com.", 443, True),
    ("example.com.", "example.com", 443, True),
    # Spaces around entries are ignored; any entry may match.
    ("foo.net, example.com ,bar.org", "api.example.com", 443, True),
    ("foo.net,bar.org", "api.example.com", 443, False),
    # host:port matches that port only.
    ("example.com:8080", "example.com", 8080, True),
    ("example.com:8080", "api.example.com", 8080, True),
    ("example.com:8080", "example.com", 443, False),
    # IP literals match exactly, IPv6 with or without brackets.
    ("127.0.0.1", "127.0.0.1", 8000, True),
    ("127.0.0.1", "127.0.0.2", 8000, False),
    ("::1", "::1", 8000, True),
    ("[::1]", "::1", 8000, True),
    ("[::1]:8000", "::1", 8000, True),
    ("[::1]:8000", "::1", 9000, False),
    ("127.0.0.1:8000", "127.0.0.1", 8000, True),
    ("127.0.0.1:8000", "127.0.0.1", 8001, False),
    # CIDR blocks cover their addresses; a host name is never resolved.
    ("10.0.0.0/8", "10.1.2.3", 443, True),
    ("10.0.0.0/8", "11.0.0.1", 443, False),
    ("192.168.1.0/24", "192.168.1.77", 443, True),
    ("::1/128", "::1", 443, True),
    ("fd00::/8", "fd12:3456::1", 443, True),
    ("fd00::/8", "fe80::1", 443, False),
    ("10.0.0.0/8", "ten.example.com", 443, False),
    ("127.0.0.1", "localhost", 443, False),
    # An IPv4 block never matches an IPv6 address, and nonsense matches nothing.
    ("10.0.0.0/8", "::ffff:10.0.0.1", 443, False),
    ("10.0.0.0/33", "10.0.0.1", 443, False),
    ("*", "anything", 1, True),
]


@pytest.mark.parametrize(("no_proxy", "host", "port", "bypassed"), NO_PROXY_TABLE)
def test_no_proxy_table(no_proxy: str, host: str, port: int, bypassed: bool) -> None:
    assert bypasses_proxy(no_proxy, host, port) is bypassed


# (environment, target scheme, proxy URL chosen)
ENVIRONMENT_TABLE: list[tuple[dict[str, str], str, str | None]] = [
    ({}, "https", None),
    ({"HTTPS_PROXY": "http://p:1"}, "https", "http://p:1"),
    ({"https_proxy": "http://p:1"}, "https", "http://p:1"),
    # The scheme picks the variable.
    ({"HTTPS_PROXY": "http://p:1"}, "http", None),
    ({"HTTP_PROXY": "http://p:2"}, "http", "http://p:2"),
    ({"HTTP_PROXY": "http://p:2"}, "https", None),
    # ALL_PROXY is the fallback for both.
    ({"ALL_PROXY": "http://p:3"}, "https", "http://p:3"),
    ({"all_proxy": "http://p:3"}, "http", "http://p:3"),
    ({"ALL_PROXY": "http://p:3", "HTTPS_PROXY": "http://p:1"}, "https", "http://p:1"),
    # Lowercase wins over uppercase.
    ({"https_proxy": "http://low:1", "HTTPS_PROXY": "http://up:1"}, "https", "http://low:1"),
    # An empty lowercase value unsets, and the uppercase one is not consulted.
    ({"https_proxy": "", "HTTPS_PROXY": "http://up:1"}, "https", None),
    # An empty value is no proxy; the fallback still applies.
    ({"HTTPS_PROXY": "", "ALL_PROXY": "http://p:3"}, "https", "http://p:3"),
    ({"https_proxy": "  ", "all_proxy": "http://p:3"}, "https", "http://p:3"),
]


@pytest.mark.parametrize(("environ", "scheme", "expected"), ENVIRONMENT_TABLE)
def test_environment_table(environ: dict[str, str], scheme: str, expected: str | None) -> None:
    assert proxy_from_environment(environ, scheme) == expected


def test_an_explicit_proxy_wins_over_the_environment() -> None:
    environ = {"HTTPS_PROXY": "http://env:1", "NO_PROXY": "*"}
    chosen = select_proxy(
        "http://mine:2", trust_env=True, environ=environ, scheme="https", host="h", port=443
    )
    assert chosen == Proxy(host="mine", port=2)


def test_trust_env_false_ignores_the_environment() -> None:
    environ = {"HTTPS_PROXY": "http://env:1"}
    assert (
        select_proxy(None, trust_env=False, environ=environ, scheme="https", host="h", port=1)
        is None
    )
    assert select_proxy(
        None, trust_env=True, environ=environ, scheme="https", host="h", port=1
    ) == (Proxy(host="env", port=1))


@pytest.mark.parametrize(
    ("no_proxy_names", "bypassed"),
    [
        ({"NO_PROXY": "example.com"}, True),
        ({"no_proxy": "example.com"}, True),
        ({"no_proxy": "other.net", "NO_PROXY": "example.com"}, False),  # lowercase wins
        ({"no_proxy": "", "NO_PROXY": "example.com"}, False),  # empty lowercase unsets
    ],
)
def test_no_proxy_from_the_environment(no_proxy_names: dict[str, str], bypassed: bool) -> None:
    environ = {"HTTPS_PROXY": "http://env:1", **no_proxy_names}
    chosen = select_proxy(
        None, trust_env=True, environ=environ, scheme="https", host="api.example.com", port=443
    )
    assert (chosen is None) is bypassed


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://proxy.local:3128", Proxy(host="proxy.local", port=3128)),
        ("proxy.local:3128", Proxy(host="proxy.local", port=3128)),  # no scheme: http://
        ("http://proxy.local", Proxy(host="proxy.local", port=80)),
        ("HTTP://Proxy.Local:1/", Proxy(host="proxy.local", port=1)),
        ("http://[::1]:8888", Proxy(host="::1", port=8888)),
        ("http://u:p@h:1", Proxy(host="h", port=1, username="u", password="p")),
        # Credentials are percent-decoded.
        (
            "http://us%40er:p%3Ass%2Fw@h:1",
            Proxy(host="h", port=1, username="us@er", password="p:ss/w"),
        ),
        ("http://user@h:1", Proxy(host="h", port=1, username="user")),
    ],
)
def test_proxy_urls(url: str, expected: Proxy) -> None:
    assert parse_proxy_url(url) == expected


@pytest.mark.parametrize(
    "url",
    [
        "https://proxy.local:443",  # TLS to the proxy is not supported
        "socks5://proxy.local:1080",
        "http://",
        "http://h:99999",
        "http://h:1/path",
        "http://h:1?q=1",
        "http://u:secret-pass@h:notaport",
    ],
)
def test_bad_proxy_urls_are_refused_without_quoting_them(url: str) -> None:
    with pytest.raises(InvalidEndpoint) as info:
        parse_proxy_url(url)
    assert "secret-pass" not in str(info.value)


def test_proxy_authorization_and_repr_never_show_the_password() -> None:
    proxy = parse_proxy_url("http://user:pa%20ss@h:3128")
    assert proxy.authorization == "Basic dXNlcjpwYSBzcw=="  # base64("user:pa ss")
    assert "pa ss" not in repr(proxy) and "pa%20ss" not in repr(proxy)
    assert repr(proxy) == "Proxy('http://user:***@h:3128')"
    assert parse_proxy_url("http://h:1").authorization is None
    assert parse_proxy_url("http://u@h:1").authorization == "Basic dTo="  # base64("u:")

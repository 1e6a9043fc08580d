"""Endpoint: URL handling, validation before anything is sent, and key redaction."""

from __future__ import annotations

import ssl

import attrs
import pytest

from chunkwise._core.endpoint import Endpoint, Timeouts
from chunkwise._core.errors import ChunkwiseError, InvalidEndpoint
from chunkwise.types import DEFAULT_BASE_URL

KEY = "sk-proj-SECRET0123456789abcdef"


@pytest.mark.parametrize(
    ("url", "base_url", "scheme", "host", "port", "target", "host_header"),
    [
        (
            "https://api.openai.com/v1",
            "https://api.openai.com/v1",
            "https",
            "api.openai.com",
            443,
            "/v1/chat/completions",
            "api.openai.com",
        ),
        (
            "https://relay.example/api/v1",
            "https://relay.example/api/v1",
            "https",
            "relay.example",
            443,
            "/api/v1/chat/completions",
            "relay.example",
        ),
        (
            "https://generativelanguage.googleapis.com/v1beta/openai/",
            "https://generativelanguage.googleapis.com/v1beta/openai",
            "https",
            "generativelanguage.googleapis.com",
            443,
            "/v1beta/openai/chat/completions",
            "generativelanguage.googleapis.com",
        ),
        (
            "http://localhost:11434/v1/",
            "http://localhost:11434/v1",
            "http",
            "localhost",
            11434,
            "/v1/chat/completions",
            "localhost:11434",
        ),
        (
            "http://127.0.0.1:8000",
            "http://127.0.0.1:8000",
            "http",
            "127.0.0.1",
            8000,
            "/chat/completions",
            "127.0.0.1:8000",
        ),
        (
            "http://[::1]:8080/v1",
            "http://[::1]:8080/v1",
            "http",
            "::1",
            8080,
            "/v1/chat/completions",
            "[::1]:8080",
        ),
        # An explicit default port is not repeated in Host; scheme and host are case-folded.
        (
            "HTTPS://API.Example.com:443/",
            "HTTPS://API.Example.com:443",
            "https",
            "api.example.com",
            443,
            "/chat/completions",
            "api.example.com",
        ),
        (
            "http://h.example/a%20b/v1",
            "http://h.example/a%20b/v1",
            "http",
            "h.example",
            80,
            "/a%20b/v1/chat/completions",
            "h.example",
        ),
    ],
)
def test_url_pieces(
    url: str, base_url: str, scheme: str, host: str, port: int, target: str, host_header: str
) -> None:
    endpoint = Endpoint(url)
    assert endpoint.base_url == base_url
    assert endpoint.url == base_url + "/chat/completions"
    assert (endpoint.scheme, endpoint.host, endpoint.port) == (scheme, host, port)
    assert endpoint.target == target
    assert endpoint.host_header == host_header


def test_trailing_slash_is_the_same_endpoint() -> None:
    assert Endpoint("https://relay.example/v1/") == Endpoint("https://relay.example/v1")
    assert hash(Endpoint("https://relay.example/v1/")) == hash(Endpoint("https://relay.example/v1"))


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("api.openai.com/v1", "no scheme"),
        ("localhost:8000/v1", "no scheme"),
        ("ftp://example.com/v1", "scheme 'ftp'"),
        ("ws://example.com/v1", "scheme 'ws'"),
        ("http:///v1", "no host"),
        ("https://", "no host"),
        ("https://example.com/v1?api-version=2024", "query or fragment"),
        ("https://example.com/v1?", "query or fragment"),
        ("https://example.com/v1#top", "query or fragment"),
        ("https://example.com:99999/v1", "invalid port"),
        ("https://example.com:http/v1", "invalid port"),
        ("https://example.com:0/v1", "invalid port"),
        ("https://exa mple.com/v1", "whitespace or control"),
        ("https://example.com/v1\r\nX: y", "whitespace or control"),
        ("https://exämple.com/v1", "non-ASCII"),
        ("https://[zz::1/v1", "malformed"),
        ("https://ex<ample.com/v1", "invalid host"),
        ("", "no scheme"),
    ],
)
def test_invalid_url(url: str, problem: str) -> None:
    with pytest.raises(InvalidEndpoint, match="base URL") as info:
        Endpoint(url)
    assert problem in str(info.value)


def test_credentials_in_url_are_refused_without_echoing_them() -> None:
    with pytest.raises(InvalidEndpoint, match="credentials") as info:
        Endpoint("https://user:hunter2@example.com/v1")
    assert "hunter2" not in str(info.value)


def test_invalid_endpoint_is_a_value_error() -> None:
    assert issubclass(InvalidEndpoint, ValueError)
    assert issubclass(InvalidEndpoint, ChunkwiseError)
    with pytest.raises(ValueError, match="str"):
        Endpoint(b"https://example.com")  # type: ignore[arg-type]


def test_repr_and_str_hide_the_key() -> None:
    endpoint = Endpoint(
        "https://api.openai.com/v1",
        api_key=KEY,
        headers={"api-key": KEY, "X-Title": "demo"},
        ssl_context=ssl.create_default_context(),
    )
    for text in (repr(endpoint), str(endpoint), f"{endpoint}", repr([endpoint])):
        assert KEY not in text
        assert "SECRET" not in text
    assert "api_key=<set>" in repr(endpoint)
    assert "'X-Title'" in repr(endpoint)
    assert "api_key=None" in repr(Endpoint("http://localhost:8000/v1"))


@pytest.mark.parametrize("bad", ["\r", "\n", "\r\n", "\x00", "\x7f", "\x1b"])
def test_key_with_control_characters_is_refused_without_echo(bad: str) -> None:
    with pytest.raises(InvalidEndpoint, match="api_key") as info:
        Endpoint("https://api.openai.com/v1", api_key=f"{KEY}{bad}X-Injected: 1")
    assert KEY not in str(info.value)
    assert info.value.__cause__ is None


def test_key_with_surrounding_whitespace_or_non_ascii_is_refused() -> None:
    with pytest.raises(InvalidEndpoint, match="whitespace"):
        Endpoint("https://api.openai.com/v1", api_key=f" {KEY}")
    with pytest.raises(InvalidEndpoint, match="non-ASCII") as info:
        Endpoint("https://api.openai.com/v1", api_key=f"{KEY}é")
    assert KEY not in str(info.value)


def test_empty_key_means_no_key() -> None:
    assert Endpoint("http://localhost/v1", api_key="").api_key is None


@pytest.mark.parametrize("bad", ["\r", "\n", "\r\nX-Injected: 1", "\x00", "a\x0bb"])
def test_header_value_injection_is_refused(bad: str) -> None:
    with pytest.raises(InvalidEndpoint, match="'X-Custom'") as info:
        Endpoint("https://api.openai.com/v1", headers={"X-Custom": f"{KEY}{bad}"})
    assert KEY not in str(info.value)


@pytest.mark.parametrize("name", ["Bad Name", "X-Bad:", "", "X-\r\nInjected", "é"])
def test_invalid_header_name_is_refused(name: str) -> None:
    with pytest.raises(InvalidEndpoint, match="header name"):
        Endpoint("https://api.openai.com/v1", headers={name: "v"})


@pytest.mark.parametrize(
    "name", ["Host", "content-length", "Transfer-Encoding", "Connection", "Accept-Encoding"]
)
def test_framing_headers_cannot_be_overridden(name: str) -> None:
    with pytest.raises(InvalidEndpoint, match="set by chunkwise"):
        Endpoint("https://api.openai.com/v1", headers={name: "x"})


def test_headers_accept_pairs_keep_order_and_strip_optional_whitespace() -> None:
    endpoint = Endpoint(
        "https://api.openai.com/v1",
        headers=[("X-A", " 1 "), ("X-B", "\t2"), ("X-A", "3"), ("X-Empty", "")],
    )
    assert endpoint.headers == (("X-A", "1"), ("X-B", "2"), ("X-A", "3"), ("X-Empty", ""))
    with pytest.raises(InvalidEndpoint, match="pairs"):
        Endpoint("https://api.openai.com/v1", headers=["X-A"])  # type: ignore[list-item]
    with pytest.raises(InvalidEndpoint, match="must be a str"):
        Endpoint("https://api.openai.com/v1", headers={"X-A": 1})  # type: ignore[arg-type]


def test_ssl_context_and_timeouts_are_type_checked() -> None:
    with pytest.raises(InvalidEndpoint, match="ssl_context"):
        Endpoint("https://x.example", ssl_context=object())  # type: ignore[arg-type]
    with pytest.raises(InvalidEndpoint, match="timeouts"):
        Endpoint("https://x.example", timeouts=5)  # type: ignore[arg-type]


def test_timeouts() -> None:
    assert Timeouts() == Timeouts(connect=10.0, idle=600.0, error_body=5.0)
    assert Endpoint("https://x.example").timeouts == Timeouts()
    assert Timeouts(connect=None, idle=None, error_body=None).error_body is None
    for bad in (0, -1, float("nan"), True, "5"):
        with pytest.raises(InvalidEndpoint, match="timeout"):
            Timeouts(connect=bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidEndpoint, match="timeout"):
            Timeouts(idle=bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidEndpoint, match="error_body timeout"):
            Timeouts(error_body=bad)  # type: ignore[arg-type]


def test_evolve_revalidates() -> None:
    endpoint = Endpoint("https://api.openai.com/v1", api_key=KEY)
    relay = attrs.evolve(endpoint, base_url="https://relay.example/api/v1/")
    assert relay.target == "/api/v1/chat/completions"
    assert relay.api_key == KEY
    with pytest.raises(InvalidEndpoint):
        attrs.evolve(endpoint, base_url="relay.example")
    with pytest.raises(InvalidEndpoint):
        attrs.evolve(endpoint, api_key="a\nb")


def test_from_env_defaults() -> None:
    endpoint = Endpoint.from_env({})
    assert endpoint.base_url == DEFAULT_BASE_URL == "https://api.openai.com/v1"
    assert endpoint.api_key is None
    assert Endpoint.from_env({"OPENAI_BASE_URL": "", "OPENAI_API_KEY": ""}) == endpoint


def test_from_env_reads_url_and_key() -> None:
    endpoint = Endpoint.from_env(
        {"OPENAI_BASE_URL": "https://relay.example/api/v1/", "OPENAI_API_KEY": f"{KEY}\n"},
        headers={"X-Title": "t"},
        timeouts=Timeouts(idle=30),
    )
    assert endpoint.base_url == "https://relay.example/api/v1"
    assert endpoint.api_key == KEY  # the trailing newline of `$(cat keyfile)` is dropped
    assert endpoint.headers == (("X-Title", "t"),)
    assert endpoint.timeouts.idle == 30


def test_from_env_uses_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:8000/v1")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    endpoint = Endpoint.from_env()
    assert (endpoint.host, endpoint.port, endpoint.api_key) == ("localhost", 8000, KEY)


def test_from_env_invalid_url_is_reported() -> None:
    with pytest.raises(InvalidEndpoint, match="no scheme"):
        Endpoint.from_env({"OPENAI_BASE_URL": "relay.example/v1"})


def test_full_completions_url_is_refused_with_the_base_to_use() -> None:
    with pytest.raises(InvalidEndpoint, match="already ends with '/chat/completions'") as info:
        Endpoint("https://relay.example/v1/chat/completions/")
    assert "'https://relay.example/v1'" in str(info.value)

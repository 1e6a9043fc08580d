"""HTTP proxies end to end: a real proxy.py process, and fake proxies for exact bytes.

The proxy *rules* (which proxy, ``NO_PROXY``) are tables in ``test_proxy_rules.py``;
this module checks what happens on the wire:

* through `proxy.py <https://github.com/abhinavsingh/proxy.py>`_ (a real, separate
  process, started once per module): an ``https`` target through a ``CONNECT``
  tunnel, an ``http`` target in absolute form, Basic credentials accepted and
  refused, and events that flow through the proxy as they are written;
* through fake proxies written here (trio listeners in the test's own task tree):
  the exact ``CONNECT`` and absolute-form bytes, IPv6 targets, the proxy's
  answer in odd shapes, bytes that follow its answer, refusals, garbage,
  silence, proxies that cannot be reached, connections kept alive through a
  proxy, and the proxy environment variables.
"""

from __future__ import annotations

import base64
import importlib.util
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import attrs
import pytest
import trio
import trio.testing

import chunkwise
from chunkwise import (
    ConnectTimeout,
    Endpoint,
    HTTPStatusError,
    ProxyError,
    Retries,
    Timeouts,
    TransportError,
)
from chunkwise._core.proxy import parse_proxy_url
from chunkwise._net.connect import Origin, PrefixedStream, open_tunnel
from chunkwise._net.tasks import exceptions_unwrapped
from chunkwise.testing import (
    LoopbackServer,
    RecordedRequest,
    ResponseWriter,
    ScriptedResponse,
    open_test_server,
)
from helpers.bodies import choice, chunk, sse

KEY = "sk-proj-SECRETpr0xy0123456789abcdef"
REQUEST: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
TEXT = "Hello through the proxy"
BODY = sse(
    chunk(choice(role="assistant", content="Hello")),
    chunk(choice(content=" through")),
    chunk(choice(content=" the proxy")),
    chunk(choice(finish_reason="stop")),
)
#: The chat stream, a few bytes a write: several chunks cross the proxy.
STREAM = ScriptedResponse(body=BODY, write_sizes=(40, 7, 100))
NO_RETRIES = Retries(max_retries=0)
#: Retries on, and quick: a failure that is retried would show as a second attempt.
QUICK_RETRIES = Retries(max_retries=2, initial_delay=0.01, max_delay=0.01)
#: No test waits for anything longer than this.
BOUND = 5.0

USER = "user"
PASSWORD = "pass"
#: Basic credentials for user:pass, as every proxy receives them.
BASIC = base64.b64encode(b"user:pass").decode()
assert BASIC == "dXNlcjpwYXNz"
#: A password that only works percent-encoded in a URL.
ODD_PASSWORD = "p@ss:w/rd %#?"
WRONG_PASSWORD = "WRONG-S3CRET-pw"


def secrets_absent(text: str, *secrets: str) -> bool:
    """No secret appears in ``text``, as is, percent-encoded or base64-encoded.

    Pass ``"user:password"`` too: its base64 form is what ``Proxy-Authorization``
    carries.
    """
    forms = set()
    for secret in secrets:
        forms |= {secret, quote(secret, safe=""), base64.b64encode(secret.encode()).decode()}
    return not any(form in text for form in forms)


# --- proxy.py, a real proxy in its own process ------------------------------------------


@attrs.frozen
class ProxyPy:
    """A running proxy.py: its port, and its log file (one line per connection)."""

    port: int
    log: Path

    def url(self, userinfo: str | None = None) -> str:
        return f"http://{'' if userinfo is None else userinfo + '@'}127.0.0.1:{self.port}"

    async def wait_logged(self, text: str) -> None:
        """Wait until proxy.py's log has ``text``: it logs a connection once it ends."""
        with trio.fail_after(BOUND):
            while True:  # polling a file: nothing to wait on
                if text in self.log.read_text(errors="replace"):
                    return
                await trio.sleep(0.01)


def _output(directory: Path) -> str:
    """What proxy.py wrote: its output, then its log."""
    texts = []
    for name in ("output.log", "proxy.log"):
        with suppress(FileNotFoundError):
            texts.append((directory / name).read_text(errors="replace"))
    return "\n".join(texts)


def _read_port(process: subprocess.Popen[bytes], directory: Path) -> int:
    """proxy.py's port, once it wrote its port file (it listens by then)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"proxy.py exited with {process.returncode}:\n{_output(directory)}")
        # Written after the listening socket exists; a file without its newline is
        # being written.
        with suppress(FileNotFoundError):
            text = (directory / "port").read_text()
            if text.endswith("\n"):
                return int(text.split()[0])
        time.sleep(0.005)  # polling the file, bounded by the deadline
    pytest.fail(f"proxy.py wrote no port file within 30 s:\n{_output(directory)}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    """End proxy.py and every process it started: they share its process group."""
    with suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    # A worker the main process left behind (there should be none).
    with suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


@contextmanager
def running_proxy_py(directory: Path, *options: str) -> Iterator[ProxyPy]:
    """Run ``python -m proxy`` on an ephemeral loopback port, with ``options``."""
    if importlib.util.find_spec("proxy") is None:
        pytest.skip("proxy.py is not installed (pip install 'chunkwise[test]')")
    if not hasattr(os, "killpg"):
        pytest.skip("stopping proxy.py needs process groups (POSIX)")
    log = directory / "proxy.log"
    command = [
        sys.executable,
        "-m",
        "proxy",
        "--hostname",
        "127.0.0.1",
        "--port",
        "0",
        "--port-file",
        str(directory / "port"),
        "--num-workers",
        "1",
        "--num-acceptors",
        "1",
        "--log-file",
        str(log),
        *options,
    ]
    with open(directory / "output.log", "wb") as output:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield ProxyPy(_read_port(process, directory), log)
    finally:
        _stop(process)


@pytest.fixture(scope="module")
def proxy_py(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxyPy]:
    """proxy.py without authentication."""
    with running_proxy_py(tmp_path_factory.mktemp("proxy")) as proxy:
        yield proxy


@pytest.fixture(scope="module")
def auth_proxy_py(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxyPy]:
    """proxy.py that wants ``Proxy-Authorization: Basic`` for user:pass."""
    directory = tmp_path_factory.mktemp("auth-proxy")
    with running_proxy_py(directory, "--basic-auth", f"{USER}:{PASSWORD}") as proxy:
        yield proxy


@pytest.fixture(scope="module")
def odd_auth_proxy_py(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxyPy]:
    """proxy.py whose password has the characters a URL must percent-encode."""
    directory = tmp_path_factory.mktemp("odd-auth-proxy")
    with running_proxy_py(directory, "--basic-auth", f"{USER}:{ODD_PASSWORD}") as proxy:
        yield proxy


@asynccontextmanager
async def chat_server(scheme: str, script: Any = STREAM) -> AsyncIterator[LoopbackServer]:
    async with open_test_server(script, tls=scheme == "https") as server:
        yield server


async def complete(endpoint: Endpoint) -> chunkwise.chat.Result:
    with trio.fail_after(BOUND):
        return await chunkwise.chat.complete(endpoint, REQUEST)


def assert_answered(result: chunkwise.chat.Result, server: LoopbackServer) -> RecordedRequest:
    """The stream completed with the scripted text; the one request the server saw."""
    assert result.status == "complete", result
    assert result.content == TEXT
    [request] = server.requests
    assert request.method == "POST"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.json()["messages"] == REQUEST["messages"]
    # The proxy's credentials are for the proxy: they never reach the API.
    assert "proxy-authorization" not in request.headers
    return request


async def test_https_target_through_proxy_py_tunnel(proxy_py: ProxyPy) -> None:
    async with chat_server("https") as server:
        result = await complete(server.endpoint(api_key=KEY, proxy=proxy_py.url()))
    request = assert_answered(result, server)
    # Inside the tunnel the request is the one sent without a proxy: origin form,
    # nothing added by the proxy (it cannot see it).
    assert request.target == "/v1/chat/completions"
    assert request.headers["host"] == f"127.0.0.1:{server.port}"
    assert "via" not in request.headers
    await proxy_py.wait_logged(f"CONNECT 127.0.0.1:{server.port} ")


async def test_http_target_through_proxy_py_absolute_form(proxy_py: ProxyPy) -> None:
    async with chat_server("http") as server:
        result = await complete(server.endpoint(api_key=KEY, proxy=proxy_py.url()))
    request = assert_answered(result, server)
    # proxy.py took the absolute-form request and forwarded it in origin form.
    assert request.target == "/v1/chat/completions"
    assert request.headers["via"].startswith("1.1 proxy.py")
    await proxy_py.wait_logged(f"POST 127.0.0.1:{server.port}/v1/chat/completions ")


@pytest.mark.parametrize("scheme", ["https", "http"])
@pytest.mark.parametrize(
    "userinfo",
    ["user:pass", "%75ser:p%61ss"],
    ids=["plain", "percent-encoded"],
)
async def test_proxy_py_accepts_the_credentials(
    auth_proxy_py: ProxyPy, scheme: str, userinfo: str
) -> None:
    async with chat_server(scheme) as server:
        result = await complete(server.endpoint(api_key=KEY, proxy=auth_proxy_py.url(userinfo)))
    assert_answered(result, server)


@pytest.mark.parametrize("scheme", ["https", "http"])
async def test_proxy_py_accepts_a_percent_encoded_odd_password(
    odd_auth_proxy_py: ProxyPy, scheme: str
) -> None:
    proxy = odd_auth_proxy_py.url(f"{USER}:{quote(ODD_PASSWORD, safe='')}")
    async with chat_server(scheme) as server:
        endpoint = server.endpoint(api_key=KEY, proxy=proxy)
        result = await complete(endpoint)
    assert_answered(result, server)
    assert secrets_absent(repr(endpoint), ODD_PASSWORD, f"{USER}:{ODD_PASSWORD}")


REFUSED_CREDENTIALS = [f"{USER}:{WRONG_PASSWORD}", f"nobody:{PASSWORD}", None]
REFUSED_IDS = ["wrong-password", "wrong-user", "none"]


@pytest.mark.parametrize("userinfo", REFUSED_CREDENTIALS, ids=REFUSED_IDS)
async def test_proxy_py_refuses_the_tunnel_with_407(
    auth_proxy_py: ProxyPy, userinfo: str | None
) -> None:
    async with chat_server("https") as server:
        endpoint = server.endpoint(
            api_key=KEY, proxy=auth_proxy_py.url(userinfo), retries=QUICK_RETRIES
        )
        with trio.fail_after(BOUND), pytest.raises(ProxyError) as info:
            await chunkwise.chat.complete(endpoint, REQUEST)
    exc = info.value
    assert exc.status_code == 407
    assert exc.attempts == 1  # a refusal is not retried
    assert "after" not in str(exc)
    assert f"127.0.0.1:{server.port}" in str(exc)
    assert "407" in str(exc)
    assert server.connections == []  # the target never heard of it
    for text in (str(exc), repr(exc), repr(endpoint)):
        assert secrets_absent(text, WRONG_PASSWORD, PASSWORD, userinfo or PASSWORD, KEY), text
    if userinfo is not None:
        user = userinfo.partition(":")[0]
        assert f"{user}:***@127.0.0.1:{auth_proxy_py.port}" in str(exc)


@pytest.mark.parametrize("userinfo", REFUSED_CREDENTIALS, ids=REFUSED_IDS)
async def test_proxy_py_refuses_the_http_request_with_407(
    auth_proxy_py: ProxyPy, userinfo: str | None
) -> None:
    async with chat_server("http") as server:
        endpoint = server.endpoint(
            api_key=KEY, proxy=auth_proxy_py.url(userinfo), retries=QUICK_RETRIES
        )
        with trio.fail_after(BOUND), pytest.raises(HTTPStatusError) as info:
            await chunkwise.chat.complete(endpoint, REQUEST)
    exc = info.value
    assert exc.status_code == 407
    assert exc.attempts == 1  # asking again with the same credentials changes nothing
    assert "after" not in str(exc)
    assert server.connections == []
    for text in (str(exc), repr(exc), repr(exc.body), repr(endpoint)):
        assert secrets_absent(text, WRONG_PASSWORD, PASSWORD, userinfo or PASSWORD, KEY), text


@pytest.mark.parametrize("scheme", ["https", "http"])
async def test_events_cross_proxy_py_as_they_are_written(proxy_py: ProxyPy, scheme: str) -> None:
    # The second event is written only once the client has the first: a proxy
    # (or a client) that buffered the body would deadlock, and fail_after says so.
    first_received = trio.Event()

    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        await writer.start()
        await writer.write(sse(chunk(choice(role="assistant", content="Hello")), done=False))
        await first_received.wait()
        await writer.write(
            sse(chunk(choice(content=" through")), chunk(choice(content=" the proxy")), done=False)
        )
        await writer.write(sse(chunk(choice(finish_reason="stop"))))

    async with chat_server(scheme, handler) as server:
        endpoint = server.endpoint(api_key=KEY, proxy=proxy_py.url())
        with trio.fail_after(BOUND):
            async with chunkwise.chat.open_stream(endpoint, REQUEST) as stream:
                texts = []
                async for event in stream:
                    if isinstance(event, chunkwise.chat.TextDelta):
                        texts.append(event.text)
                        first_received.set()
                result = await stream.result()
    assert texts == ["Hello", " through", " the proxy"]
    assert result.status == "complete"
    assert result.content == TEXT


# --- tinyproxy, a second real proxy, where installed -------------------------------------


@attrs.frozen
class Tinyproxy:
    """A running tinyproxy: its port."""

    port: int

    def url(self, userinfo: str | None = None) -> str:
        return f"http://{'' if userinfo is None else userinfo + '@'}127.0.0.1:{self.port}"


def _free_port() -> int:
    # tinyproxy cannot report an ephemeral port: take one the kernel just gave out.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def tinyproxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tinyproxy]:
    """tinyproxy (``apt install tinyproxy``) wanting Basic credentials user:pass.

    Without ``ConnectPort`` lines it tunnels to any port; in the foreground
    (``-d``), in its own process group, logging to a file.
    """
    binary = shutil.which("tinyproxy") or next(
        (p for p in ("/usr/bin/tinyproxy", "/usr/sbin/tinyproxy") if os.access(p, os.X_OK)), None
    )
    if binary is None:
        pytest.skip("tinyproxy is not installed (apt install tinyproxy)")
    directory = tmp_path_factory.mktemp("tinyproxy")
    port = _free_port()
    config = directory / "tinyproxy.conf"
    config.write_text(
        f"Port {port}\nListen 127.0.0.1\nTimeout 30\nAllow 127.0.0.1\n"
        f'BasicAuth {USER} {PASSWORD}\nLogFile "{directory / "tinyproxy.log"}"\n'
        "LogLevel Info\nMaxClients 20\n"
    )
    with open(directory / "output.log", "wb") as output:
        process = subprocess.Popen(
            [binary, "-d", "-c", str(config)],
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 10
        while True:  # polling the port: tinyproxy says nothing when it listens
            if process.poll() is not None:
                pytest.fail(f"tinyproxy exited: {(directory / 'output.log').read_text()}")
            with suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            if time.monotonic() > deadline:
                pytest.fail("tinyproxy did not listen within 10 s")
            time.sleep(0.01)
        yield Tinyproxy(port)
    finally:
        _stop(process)


@pytest.mark.parametrize("scheme", ["https", "http"])
async def test_a_stream_through_tinyproxy_with_credentials(
    tinyproxy: Tinyproxy, scheme: str
) -> None:
    async with chat_server(scheme) as server:
        result = await complete(server.endpoint(api_key=KEY, proxy=tinyproxy.url("user:pass")))
    request = assert_answered(result, server)
    assert request.target == "/v1/chat/completions"
    if scheme == "http":
        # Forwarded by tinyproxy (absolute form in, origin form out, its Via added).
        assert "tinyproxy" in request.headers["via"]
    else:
        assert "via" not in request.headers  # inside the tunnel: unseen by the proxy


@pytest.mark.parametrize("userinfo", REFUSED_CREDENTIALS, ids=REFUSED_IDS)
async def test_tinyproxy_refuses_the_tunnel_with_401(
    tinyproxy: Tinyproxy, userinfo: str | None
) -> None:
    # tinyproxy 1.11 answers 407 when no credentials came, and 401 (not 407) to
    # wrong ones: either way a ProxyError with the status it sent.
    async with chat_server("https") as server:
        endpoint = server.endpoint(
            api_key=KEY, proxy=tinyproxy.url(userinfo), retries=QUICK_RETRIES
        )
        with trio.fail_after(BOUND), pytest.raises(ProxyError) as info:
            await chunkwise.chat.complete(endpoint, REQUEST)
    assert info.value.status_code == (407 if userinfo is None else 401)
    assert info.value.attempts == 1
    assert server.connections == []
    for text in (str(info.value), repr(info.value), repr(endpoint)):
        assert secrets_absent(text, WRONG_PASSWORD, PASSWORD, userinfo or PASSWORD, KEY), text


async def test_tinyproxy_refuses_the_http_request_with_401(tinyproxy: Tinyproxy) -> None:
    async with chat_server("http") as server:
        endpoint = server.endpoint(
            api_key=KEY, proxy=tinyproxy.url(f"{USER}:{WRONG_PASSWORD}"), retries=QUICK_RETRIES
        )
        with trio.fail_after(BOUND), pytest.raises(HTTPStatusError) as info:
            await chunkwise.chat.complete(endpoint, REQUEST)
    assert info.value.status_code == 401 and info.value.attempts == 1
    assert server.connections == []


@pytest.mark.parametrize("scheme", ["https", "http"])
async def test_events_cross_tinyproxy_as_they_are_written(
    tinyproxy: Tinyproxy, scheme: str
) -> None:
    # As with proxy.py: the next event is written only once the client has the
    # previous one, so a proxy that buffered the body would deadlock.
    received = [trio.Event() for _ in range(2)]

    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        await writer.start()
        await writer.write(sse(chunk(choice(role="assistant", content="Hello")), done=False))
        await received[0].wait()
        await writer.write(sse(chunk(choice(content=" through")), done=False))
        await received[1].wait()
        await writer.write(
            sse(chunk(choice(content=" the proxy")), chunk(choice(finish_reason="stop")))
        )

    async with chat_server(scheme, handler) as server:
        endpoint = server.endpoint(api_key=KEY, proxy=tinyproxy.url("user:pass"))
        with trio.fail_after(BOUND):
            async with chunkwise.chat.open_stream(endpoint, REQUEST) as stream:
                texts = []
                async for event in stream:
                    if isinstance(event, chunkwise.chat.TextDelta):
                        texts.append(event.text)
                        received[min(len(texts), 2) - 1].set()
                result = await stream.result()
    assert texts == ["Hello", " through", " the proxy"]
    assert result.status == "complete"


# --- fake proxies: exact bytes, odd answers, failures ------------------------------------


@attrs.define(eq=False)
class ProxiedConnection:
    """What a fake proxy saw on one connection from the client."""

    #: Every byte received before the proxy answered (for a tunnel: its request).
    head: bytearray = attrs.field(factory=bytearray)
    #: Every byte relayed from the client to the target afterwards.
    relayed: bytearray = attrs.field(factory=bytearray)


Behaviour = Callable[[trio.SocketStream, ProxiedConnection], Awaitable[None]]


@attrs.define(eq=False)
class FakeProxy:
    port: int
    connections: list[ProxiedConnection] = attrs.field(factory=list)

    def url(self, userinfo: str | None = None) -> str:
        return f"http://{'' if userinfo is None else userinfo + '@'}127.0.0.1:{self.port}"


@asynccontextmanager
async def open_fake_proxy(behaviour: Behaviour) -> AsyncIterator[FakeProxy]:
    """A proxy on a loopback port that handles each connection with ``behaviour``."""
    [listener] = await trio.open_tcp_listeners(0, host="127.0.0.1")
    proxy = FakeProxy(port=listener.socket.getsockname()[1])

    async def serve(stream: trio.SocketStream) -> None:
        connection = ProxiedConnection()
        proxy.connections.append(connection)
        async with stream:
            with suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await behaviour(stream, connection)

    # A failed assertion in the block comes out as itself, not in a group.
    with exceptions_unwrapped():
        async with listener, trio.open_nursery() as nursery:

            async def accept_loop() -> None:
                while True:
                    nursery.start_soon(serve, await listener.accept())

            nursery.start_soon(accept_loop)
            yield proxy
            nursery.cancel_scope.cancel()


async def read_head(stream: trio.abc.ReceiveStream, connection: ProxiedConnection) -> bytes:
    """Receive up to the end of the request head; the head (the request line and fields)."""
    while b"\r\n\r\n" not in connection.head:
        data = await stream.receive_some()
        if not data:
            raise trio.BrokenResourceError("the client closed before its request head")
        connection.head += data
    head, _, _ = bytes(connection.head).partition(b"\r\n\r\n")
    return head


async def read_to_end(stream: trio.abc.ReceiveStream) -> None:
    """Wait for the client to close (a proxy that holds the connection open)."""
    while await stream.receive_some():
        pass


def request_target(head: bytes) -> tuple[str, int]:
    """Host and port of a ``CONNECT host:port`` or absolute-form request."""
    method, target, _ = head.split(b"\r\n")[0].decode("ascii").split(" ")
    if method != "CONNECT":
        target = urlsplit(target).netloc
    parts = urlsplit("//" + target)
    assert parts.hostname is not None and parts.port is not None
    return parts.hostname, parts.port


async def relay(
    client: trio.SocketStream, upstream: trio.abc.Stream, connection: ProxiedConnection
) -> None:
    """Copy bytes both ways until either side ends."""
    async with upstream, trio.open_nursery() as nursery:

        async def pump(source: trio.abc.Stream, sink: trio.abc.Stream, record: bool) -> None:
            with suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                async for data in source:
                    if record:
                        connection.relayed += data
                    await sink.send_all(data)
            nursery.cancel_scope.cancel()

        nursery.start_soon(pump, client, upstream, True)
        nursery.start_soon(pump, upstream, client, False)


ESTABLISHED = b"HTTP/1.1 200 Connection established\r\n\r\n"


def tunnel(answer: bytes = ESTABLISHED, *, write_sizes: int | None = None) -> Behaviour:
    """A ``CONNECT`` proxy: answers ``answer`` (in writes of ``write_sizes``), then relays."""

    async def behaviour(client: trio.SocketStream, connection: ProxiedConnection) -> None:
        head = await read_head(client, connection)
        assert head.startswith(b"CONNECT "), head
        upstream = await trio.open_tcp_stream(*request_target(head))
        size = write_sizes or len(answer)
        for start in range(0, len(answer), size):
            await client.send_all(answer[start : start + size])
        await relay(client, upstream, connection)

    return behaviour


async def forward(client: trio.SocketStream, connection: ProxiedConnection) -> None:
    """An ``http`` proxy that sends the request on as it came (absolute form and all)."""
    head = await read_head(client, connection)
    upstream = await trio.open_tcp_stream(*request_target(head))
    await upstream.send_all(bytes(connection.head))
    await relay(client, upstream, connection)


def answer(data: bytes) -> Behaviour:
    """A proxy that answers every request with ``data`` and waits for the client to close."""

    async def behaviour(client: trio.SocketStream, connection: ProxiedConnection) -> None:
        await read_head(client, connection)
        await client.send_all(data)
        await read_to_end(client)

    return behaviour


async def hang_up(client: trio.SocketStream, connection: ProxiedConnection) -> None:
    """A proxy that reads the request and closes without a word."""
    await read_head(client, connection)


async def reset(client: trio.SocketStream, connection: ProxiedConnection) -> None:
    """A proxy that reads the request and resets the connection."""
    await read_head(client, connection)
    # Closing with a zero linger time sends a TCP reset instead of a FIN.
    client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


async def silent(client: trio.SocketStream, connection: ProxiedConnection) -> None:
    """A proxy that reads whatever comes and never answers."""
    await read_head(client, connection)
    await read_to_end(client)


def connect_bytes(target: str, authorization: str | None) -> bytes:
    credentials = (
        b""
        if authorization is None
        else b"Proxy-Authorization: Basic %b\r\n" % (authorization.encode())
    )
    return b"CONNECT %b HTTP/1.1\r\nHost: %b\r\n%b\r\n" % (
        target.encode(),
        target.encode(),
        credentials,
    )


@pytest.mark.parametrize(
    ("userinfo", "authorization"),
    [("user:pass", BASIC), (None, None), ("%75ser:p%61ss", BASIC), ("user", "dXNlcjo=")],
    ids=["credentials", "none", "percent-encoded", "user-only"],
)
async def test_connect_request_bytes_and_the_key_stays_in_the_tunnel(
    userinfo: str | None, authorization: str | None
) -> None:
    async with chat_server("https") as server, open_fake_proxy(tunnel()) as proxy:
        result = await complete(server.endpoint(api_key=KEY, proxy=proxy.url(userinfo)))
    assert_answered(result, server)
    [connection] = proxy.connections
    # Exactly this, field names as written, and not one byte more before the answer.
    assert bytes(connection.head) == connect_bytes(f"127.0.0.1:{server.port}", authorization)
    # The proxy never had the key: not in the CONNECT, not in the (encrypted) tunnel.
    assert KEY.encode() not in connection.head
    assert len(connection.relayed) > 0
    assert KEY.encode() not in connection.relayed
    assert b"chat/completions" not in connection.relayed


def ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as sock:
            sock.bind(("::1", 0))
    except OSError:
        return False
    return True


async def test_connect_to_an_ipv6_target_uses_brackets() -> None:
    if not ipv6_loopback():
        pytest.skip("this machine has no IPv6 loopback")
    async with (
        open_test_server(STREAM, host="::1", tls=True) as server,
        open_fake_proxy(tunnel()) as proxy,
    ):
        assert server.base_url.startswith("https://[::1]:")
        result = await complete(server.endpoint(api_key=KEY, proxy=proxy.url("user:pass")))
    request = assert_answered(result, server)
    assert request.headers["host"] == f"[::1]:{server.port}"
    [connection] = proxy.connections
    assert bytes(connection.head) == connect_bytes(f"[::1]:{server.port}", BASIC)


async def test_http_target_request_bytes_in_absolute_form() -> None:
    async with chat_server("http") as server, open_fake_proxy(forward) as proxy:
        result = await complete(server.endpoint(api_key=KEY, proxy=proxy.url("user:pass")))
    [request] = server.requests
    assert result.content == TEXT
    # This fake proxy forwards the request untouched: the server sees what it sent.
    assert request.target == f"http://127.0.0.1:{server.port}/v1/chat/completions"
    assert request.headers["proxy-authorization"] == f"Basic {BASIC}"
    [connection] = proxy.connections
    head = bytes(connection.head)
    assert head.startswith(
        b"POST http://127.0.0.1:%d/v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
        % (server.port, server.port)
    )
    assert b"\r\nProxy-Authorization: Basic dXNlcjpwYXNz\r\n" in head
    # Plain HTTP: the proxy does see the key (it is the request); only a tunnel hides it.
    assert b"\r\nAuthorization: Bearer %b\r\n" % KEY.encode() in head


@pytest.mark.parametrize(
    ("answer", "write_sizes"),
    [
        (ESTABLISHED, 1),
        (b"HTTP/1.0 200 Connection established\r\n\r\n", None),
        (b"HTTP/1.1 200 OK\r\nProxy-Agent: fake\r\nContent-Length: 0\r\n\r\n", 5),
        (b"HTTP/1.1 100 Continue\r\n\r\n" + ESTABLISHED, 3),
        (b"HTTP/1.1 204 No Content\r\n\r\n", None),
    ],
    ids=["byte-by-byte", "http-1.0", "with-fields", "after-100", "204"],
)
async def test_proxy_answers_in_other_shapes(answer: bytes, write_sizes: int | None) -> None:
    behaviour = tunnel(answer, write_sizes=write_sizes)
    async with chat_server("https") as server, open_fake_proxy(behaviour) as proxy:
        result = await complete(server.endpoint(api_key=KEY, proxy=proxy.url()))
    assert_answered(result, server)


async def test_bytes_after_the_answer_go_to_tls() -> None:
    # TLS speaks first, so a real tunnel never has bytes right after the answer:
    # the server cannot say anything before the client's hello, which waits for
    # the answer.  A proxy that sends some anyway shows where they go: into the
    # TLS handshake (which they break), not lost.  What they are is checked below.
    behaviour = tunnel(ESTABLISHED + b"not a TLS record")
    async with chat_server("https") as server, open_fake_proxy(behaviour) as proxy:
        endpoint = server.endpoint(api_key=KEY, proxy=proxy.url())
        with trio.fail_after(BOUND), pytest.raises(TransportError) as info:
            await chunkwise.chat.complete(endpoint, REQUEST)
    # (Which OpenSSL reason it gives depends on its version.)
    assert type(info.value) is TransportError
    assert f"TLS handshake with 127.0.0.1:{server.port} failed" in str(info.value)


async def test_tunnel_stream_starts_with_the_bytes_after_the_answer() -> None:
    client, proxy_side = trio.testing.memory_stream_pair()
    proxy = parse_proxy_url("http://user:pass@proxy.example:3128")
    origin = Origin("https", "api.example", 443)
    received = ProxiedConnection()

    async def fake_proxy() -> None:
        await read_head(proxy_side, received)
        # The answer, and the tunnel's first bytes, in one write.
        await proxy_side.send_all(ESTABLISHED + b"early bytes")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(fake_proxy)
        with trio.fail_after(BOUND):
            stream = await open_tunnel(client, proxy, origin)
    assert bytes(received.head) == connect_bytes("api.example:443", BASIC)
    assert isinstance(stream, PrefixedStream)
    await proxy_side.send_all(b" and later ones")
    assert await stream.receive_some(5) == b"early"  # max_bytes respected
    assert await stream.receive_some() == b" bytes"
    assert await stream.receive_some() == b" and later ones"
    await stream.send_all(b"to the target")
    assert await proxy_side.receive_some() == b"to the target"
    await stream.aclose()
    assert await proxy_side.receive_some() == b""


async def test_prefixed_stream_delegates_after_the_prefix() -> None:
    client, server = trio.testing.memory_stream_pair()
    stream = PrefixedStream(client, b"abc")
    await server.send_all(b"def")
    assert await stream.receive_some(1) == b"a"
    assert await stream.receive_some(None) == b"bc"
    assert await stream.receive_some() == b"def"
    await stream.wait_send_all_might_not_block()
    await stream.send_all(b"xyz")
    assert await server.receive_some() == b"xyz"
    await stream.aclose()
    with pytest.raises(trio.ClosedResourceError):
        await client.send_all(b"closed")


FAILURES = [
    (hang_up, None, "it closed the connection"),
    (reset, None, "the connection broke"),
    # 64 KiB of interim answers and still no answer.
    (answer(b"HTTP/1.1 100 Continue\r\n\r\n" * 3000), None, "its answer is too long"),
    (answer(b"SSH-2.0-OpenSSH_9.6\r\n\r\n"), None, "its answer is not HTTP"),
    (answer(b"HTTP/1.1 2000 Huh\r\n\r\n"), None, "its answer is not HTTP"),
    (
        answer(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n"),
        403,
        "it answered 403 Forbidden",
    ),
    (
        answer(b"HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic\r\n\r\n"),
        407,
        "it answered 407 Proxy Authentication Required",
    ),
    (answer(b"HTTP/1.1 502 Bad Gateway\r\n\r\n"), 502, "it answered 502 Bad Gateway"),
]


@pytest.mark.parametrize(
    ("behaviour", "status_code", "reason"),
    FAILURES,
    ids=["closes", "resets", "endless-1xx", "garbage", "bad-status", "403", "407", "502"],
)
async def test_proxy_failures_raise_proxy_error(
    behaviour: Behaviour, status_code: int | None, reason: str
) -> None:
    async with chat_server("https") as server, open_fake_proxy(behaviour) as proxy:
        endpoint = server.endpoint(
            api_key=KEY, proxy=proxy.url(f"user:{WRONG_PASSWORD}"), retries=QUICK_RETRIES
        )
        with trio.fail_after(BOUND), pytest.raises(ProxyError) as info:
            await chunkwise.chat.complete(endpoint, REQUEST)
    exc = info.value
    assert exc.status_code == status_code
    assert str(exc) == (
        f"proxy http://user:***@127.0.0.1:{proxy.port} failed to open a tunnel to "
        f"127.0.0.1:{server.port}: {reason}"
    )
    assert exc.attempts == 1 and len(proxy.connections) == 1  # never retried
    assert server.connections == []
    for text in (str(exc), repr(exc), repr(endpoint)):
        assert secrets_absent(text, WRONG_PASSWORD, f"user:{WRONG_PASSWORD}", KEY), text


async def test_http_target_407_from_a_proxy_is_not_retried() -> None:
    refusal = answer(
        b"HTTP/1.1 407 Proxy Authentication Required\r\n"
        b'Proxy-Authenticate: Basic realm="fake"\r\nContent-Length: 0\r\n\r\n'
    )
    async with chat_server("http") as server, open_fake_proxy(refusal) as proxy:
        endpoint = server.endpoint(
            api_key=KEY, proxy=proxy.url(f"user:{WRONG_PASSWORD}"), retries=QUICK_RETRIES
        )
        with trio.fail_after(BOUND), pytest.raises(HTTPStatusError) as info:
            await chunkwise.chat.complete(endpoint, REQUEST)
    assert info.value.status_code == 407
    assert info.value.attempts == 1 and len(proxy.connections) == 1
    for text in (str(info.value), repr(info.value), repr(info.value.body)):
        assert secrets_absent(text, WRONG_PASSWORD, f"user:{WRONG_PASSWORD}", KEY), text


async def echo_credentials(client: trio.SocketStream, connection: ProxiedConnection) -> None:
    """A proxy whose 407 page quotes the credentials it was sent (as debugging proxies do)."""
    head = await read_head(client, connection)
    fields = dict(line.split(b": ", 1) for line in head.split(b"\r\n")[1:])
    message = b"bad credentials: " + fields[b"Proxy-Authorization"]
    body = b'{"error": {"message": "%b"}}' % message
    await client.send_all(
        b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%b" % (len(body), body)
    )
    await read_to_end(client)


async def test_credentials_a_proxy_quotes_back_are_masked() -> None:
    async with chat_server("http") as server, open_fake_proxy(echo_credentials) as proxy:
        endpoint = server.endpoint(api_key=KEY, proxy=proxy.url(f"user:{WRONG_PASSWORD}"))
        with trio.fail_after(BOUND), pytest.raises(HTTPStatusError) as info:
            await chunkwise.chat.complete(endpoint, REQUEST)
    assert info.value.status_code == 407
    for text in (str(info.value), repr(info.value.body)):
        assert secrets_absent(text, WRONG_PASSWORD, f"user:{WRONG_PASSWORD}"), text


async def test_a_proxy_that_never_answers_hits_the_connect_timeout() -> None:
    async with chat_server("https") as server, open_fake_proxy(silent) as proxy:
        endpoint = server.endpoint(
            api_key=KEY, proxy=proxy.url(), timeouts=Timeouts(connect=0.5), retries=NO_RETRIES
        )
        start = trio.current_time()
        with trio.fail_after(BOUND), pytest.raises(ConnectTimeout) as info:
            await chunkwise.chat.complete(endpoint, REQUEST)
    assert 0.5 <= trio.current_time() - start < 0.5 + 2.0
    assert info.value.timeout == 0.5
    [connection] = proxy.connections
    assert bytes(connection.head).startswith(b"CONNECT ")
    assert server.connections == []


@pytest.fixture
def unreachable_port() -> Iterator[int]:
    """A loopback port where connecting hangs: a listener whose backlog is full.

    The listener never accepts; one connection fills its queue (``listen(0)``),
    so the kernel ignores the next ones' SYNs, like a host that does not answer.
    """
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port: int = listener.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=BOUND):
            with socket.socket() as probe:
                probe.settimeout(0.05)
                try:
                    probe.connect(("127.0.0.1", port))
                except TimeoutError:
                    pass
                except OSError as exc:
                    pytest.skip(f"a full backlog refuses here ({exc}) instead of hanging")
                else:
                    pytest.skip("a full backlog does not hold connections off here")
            yield port


@pytest.mark.parametrize("scheme", ["https", "http"])
async def test_an_unreachable_proxy_hits_the_connect_timeout(
    unreachable_port: int, scheme: str
) -> None:
    async with chat_server(scheme) as server:
        endpoint = server.endpoint(
            api_key=KEY,
            proxy=f"http://127.0.0.1:{unreachable_port}",
            timeouts=Timeouts(connect=0.3),
            retries=NO_RETRIES,
        )
        with trio.fail_after(BOUND), pytest.raises(ConnectTimeout) as info:
            await chunkwise.chat.complete(endpoint, REQUEST)
    assert info.value.timeout == 0.3
    assert not info.value.tls_handshake
    assert server.connections == []


@pytest.mark.parametrize("where", ["connecting-to-the-proxy", "waiting-for-the-answer"])
async def test_a_connect_timeout_through_a_proxy_names_the_proxy(
    request: pytest.FixtureRequest, where: str
) -> None:
    async with chat_server("https") as server, open_fake_proxy(silent) as silent_proxy:
        if where == "connecting-to-the-proxy":
            port: int = request.getfixturevalue("unreachable_port")
        else:
            port = silent_proxy.port
        endpoint = server.endpoint(
            api_key=KEY,
            proxy=f"http://127.0.0.1:{port}",
            timeouts=Timeouts(connect=0.3),
            retries=NO_RETRIES,
        )
        with trio.fail_after(BOUND), pytest.raises(ConnectTimeout) as info:
            await chunkwise.chat.complete(endpoint, REQUEST)
    message = str(info.value)
    # What timed out was the proxy: the message must say so, and not blame TLS.
    assert f"127.0.0.1:{port}" in message, message
    assert "TLS handshake" not in message, message
    assert not info.value.tls_handshake


# --- connections kept alive through a proxy ----------------------------------------------


@pytest.mark.parametrize("scheme", ["https", "http"])
async def test_a_client_reuses_its_connection_through_a_proxy(scheme: str) -> None:
    behaviour = tunnel() if scheme == "https" else forward
    async with chat_server(scheme) as server, open_fake_proxy(behaviour) as proxy:
        endpoint = server.endpoint(api_key=KEY, proxy=proxy.url("user:pass"))
        async with chunkwise.Client(endpoint) as client:
            with trio.fail_after(BOUND):
                results = [await client.chat.complete(REQUEST) for _ in range(3)]
    assert [result.content for result in results] == [TEXT] * 3
    # One connection to the proxy (one tunnel), three requests through it.
    assert len(proxy.connections) == 1
    assert len(server.connections) == 1
    assert len(server.requests) == 3
    if scheme == "https":
        assert bytes(proxy.connections[0].head).count(b"CONNECT") == 1


# --- the environment ------------------------------------------------------------------

PROXY_VARIABLES = ["https_proxy", "http_proxy", "all_proxy", "no_proxy"]


@pytest.fixture
def clean_proxy_environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No proxy variable in either spelling, whatever the machine running the tests has."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    return monkeypatch


async def test_https_proxy_from_the_environment(
    clean_proxy_environment: pytest.MonkeyPatch,
) -> None:
    async with chat_server("https") as server, open_fake_proxy(tunnel()) as proxy:
        clean_proxy_environment.setenv("HTTPS_PROXY", proxy.url("user:pass"))
        endpoint = server.endpoint(api_key=KEY, trust_env=True)
        result = await complete(endpoint)
    assert_answered(result, server)
    [connection] = proxy.connections
    assert bytes(connection.head) == connect_bytes(f"127.0.0.1:{server.port}", BASIC)


async def test_http_proxy_from_the_environment_through_proxy_py(
    clean_proxy_environment: pytest.MonkeyPatch, proxy_py: ProxyPy
) -> None:
    clean_proxy_environment.setenv("HTTP_PROXY", proxy_py.url())
    async with chat_server("http") as server:
        result = await complete(server.endpoint(api_key=KEY, trust_env=True))
    request = assert_answered(result, server)
    assert request.headers["via"].startswith("1.1 proxy.py")


@pytest.mark.parametrize("scheme", ["https", "http"])
@pytest.mark.parametrize("no_proxy", ["127.0.0.1", "*", "localhost,127.0.0.0/8"])
async def test_no_proxy_goes_direct(
    clean_proxy_environment: pytest.MonkeyPatch, scheme: str, no_proxy: str
) -> None:
    async with chat_server(scheme) as server, open_fake_proxy(tunnel()) as proxy:
        clean_proxy_environment.setenv("HTTPS_PROXY", proxy.url())
        clean_proxy_environment.setenv("HTTP_PROXY", proxy.url())
        clean_proxy_environment.setenv("NO_PROXY", no_proxy)
        result = await complete(server.endpoint(api_key=KEY, trust_env=True))
    assert_answered(result, server)
    assert proxy.connections == []


async def test_a_bad_proxy_in_the_environment_is_refused_without_its_password(
    clean_proxy_environment: pytest.MonkeyPatch,
) -> None:
    clean_proxy_environment.setenv("HTTPS_PROXY", f"socks5://user:{WRONG_PASSWORD}@127.0.0.1:1")
    async with chat_server("https") as server:
        endpoint = server.endpoint(api_key=KEY, trust_env=True)
        with trio.fail_after(BOUND), pytest.raises(chunkwise.InvalidEndpoint) as info:
            await chunkwise.chat.complete(endpoint, REQUEST)
    assert "only http:// proxies are supported" in str(info.value)
    assert secrets_absent(str(info.value), WRONG_PASSWORD, KEY)
    assert server.connections == []


async def test_trust_env_false_ignores_the_environment(
    clean_proxy_environment: pytest.MonkeyPatch,
) -> None:
    async with chat_server("https") as server, open_fake_proxy(tunnel()) as proxy:
        clean_proxy_environment.setenv("HTTPS_PROXY", proxy.url())
        result = await complete(server.endpoint(api_key=KEY, trust_env=False))
    assert_answered(result, server)
    assert proxy.connections == []

"""A failed request names its cause, in the library and in ``chat``, ``record`` and ``probe``.

The messages a new user met said "all attempts to connect ... failed", a bare
``HTTP 401``, a bare ``HTTP 404`` and, for ``https://`` against a plain-HTTP
server, a TCP connect timeout.  Each now says what happened, and the command
line adds a ``hint:`` when the cause is a likely slip.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import trio

import chunkwise
from chunkwise._net.http import connect
from chunkwise_tools.server import ServerOptions, open_chat_server
from helpers.cli import run_main
from helpers.data import KEY_VAR

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

SERVER_KEY = "sk-server-requires-0123456789"
NO_KEY_HINT = (
    f"hint: no API key was sent, because ${KEY_VAR} is unset or empty "
    "(set it, or name another variable with --api-key-env)"
)


def command(name: str, base_url: str, tmp_path: Path) -> list[str]:
    """``chat``, ``record`` or ``probe`` against ``base_url``, the key from ``$KEY_VAR``."""
    argv = [name, "--base-url", base_url, "--api-key-env", KEY_VAR]
    if name == "record":
        return [*argv, "-o", str(tmp_path / "out.http"), "hi"]
    if name == "probe":
        return [*argv, "--json"]
    return [*argv, "hi"]


def probe_request(out: str) -> dict[str, str]:
    request: dict[str, str] = json.loads(out)["requests"][0]
    return request


# -- connection refused ----------------------------------------------------------


async def test_a_refused_connection_says_connection_refused_and_keeps_type_and_chain(
    refused_port: int,
) -> None:
    endpoint = chunkwise.Endpoint(f"http://127.0.0.1:{refused_port}/v1")
    with pytest.raises(chunkwise.TransportError) as info:
        await connect(endpoint)
    assert str(info.value) == f"cannot connect to 127.0.0.1:{refused_port}: connection refused"
    assert type(info.value) is chunkwise.TransportError
    assert isinstance(info.value.__cause__, OSError)  # trio's error, for the details


@pytest.mark.parametrize("name", ["chat", "record", "probe"])
async def test_every_command_says_connection_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, refused_port: int, name: str
) -> None:
    argv = command(name, f"http://127.0.0.1:{refused_port}/v1", tmp_path)
    status, out, err = await run_main(capsys, *argv)
    assert status == (3 if name == "probe" else 1)  # probe: it could not start
    message = f"cannot connect to 127.0.0.1:{refused_port}: connection refused"
    if name == "probe":
        assert probe_request(out)["error"] == message
    elif name == "record":  # records one request: no retries
        assert err == f"chunkwise {name}: error: {message}\n"
    else:  # chat retries a refused connection twice, and says so
        assert err == f"chunkwise {name}: error: {message} (after 3 attempts)\n"
    assert "all attempts" not in out + err


async def test_a_host_name_that_does_not_resolve_says_so() -> None:
    endpoint = chunkwise.Endpoint("http://no-such-host.invalid/v1")
    with pytest.raises(
        chunkwise.TransportError, match=r"the host name no-such-host\.invalid did not resolve"
    ):
        await connect(endpoint)


async def test_connect_hands_a_ctrl_c_out_of_trios_connection_attempts_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # trio.open_tcp_stream tries addresses in a nursery: a Ctrl-C that lands
    # there comes out as a group, which `except KeyboardInterrupt` misses (the
    # command line printed a traceback for a Ctrl-C while connecting).
    interrupt = KeyboardInterrupt()

    async def interrupted(host: str, port: int) -> trio.SocketStream:
        raise BaseExceptionGroup("connecting", [interrupt])

    monkeypatch.setattr(trio, "open_tcp_stream", interrupted)
    with pytest.raises(KeyboardInterrupt) as info:
        await connect(chunkwise.Endpoint("http://127.0.0.1:9/v1"))
    assert info.value is interrupt


# -- no key sent ----------------------------------------------------------------


@pytest.mark.parametrize("name", ["chat", "record", "probe"])
async def test_a_401_without_a_key_names_the_unset_variable(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str
) -> None:
    async with open_chat_server(ServerOptions(api_key=SERVER_KEY)) as server:
        status, out, err = await run_main(capsys, *command(name, server.base_url, tmp_path))
    assert status == (3 if name == "probe" else 1)
    if name == "probe":
        assert f"hint: {probe_request(out)['hint']}" == NO_KEY_HINT
    else:
        assert err.splitlines()[-1] == NO_KEY_HINT
        assert "HTTP 401: Incorrect API key provided" in err.splitlines()[-2]


async def test_chat_json_carries_the_hint(capsys: pytest.CaptureFixture[str]) -> None:
    async with open_chat_server(ServerOptions(api_key=SERVER_KEY)) as server:
        argv = ["chat", "--base-url", server.base_url, "--api-key-env", KEY_VAR, "--json", "hi"]
        status, out, _ = await run_main(capsys, *argv)
    assert status == 1
    [document] = [json.loads(line) for line in out.splitlines()]
    assert document["type"] == "error"
    assert document["error"]["status_code"] == 401
    assert f"hint: {document['hint']}" == NO_KEY_HINT


@pytest.mark.parametrize("name", ["chat", "record"])
async def test_a_401_with_a_key_says_it_was_sent_and_has_no_hint(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str
) -> None:
    monkeypatch.setenv(KEY_VAR, "sk-wrong-key-0123456789abcdef")
    async with open_chat_server(ServerOptions(api_key=SERVER_KEY)) as server:
        status, _, err = await run_main(capsys, *command(name, server.base_url, tmp_path))
    assert status == 1
    prefix = "chunkwise chat: error: " if name == "chat" else "error: "  # record: after its file
    assert err.splitlines()[-1] == (
        f"{prefix}HTTP 401: Incorrect API key provided "
        "(an API key was sent, and the server did not accept it)"
    )


# -- a base URL without /v1 -------------------------------------------------------


@pytest.mark.parametrize("name", ["chat", "record", "probe"])
async def test_a_404_from_a_base_url_without_v1_suggests_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str
) -> None:
    async with open_chat_server() as server:
        bare = server.base_url.removesuffix("/v1")
        status, out, err = await run_main(capsys, *command(name, bare, tmp_path))
    assert status == (3 if name == "probe" else 1)
    hint = f"try --base-url {bare}/v1"
    if name == "probe":
        assert probe_request(out)["hint"] == hint
        assert f"did you mean {bare}/v1?" in probe_request(out)["error"]
    else:
        assert err.splitlines()[-1] == f"hint: {hint}"


async def test_a_404_from_a_versioned_base_url_has_no_hint(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    async with open_chat_server() as server:
        wrong = server.base_url + "beta/openai"  # .../v1beta/openai: versioned, but wrong
        status, _, err = await run_main(capsys, *command("chat", wrong, tmp_path))
    assert status == 1
    assert "hint" not in err


# -- https:// against a plain-HTTP server ----------------------------------------


async def test_https_against_a_plain_http_server_says_it_does_not_speak_tls(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # The chat server answers the TLS hello with "HTTP/1.1 400" and closes: the
    # handshake fails at once, and the message says why.
    async with open_chat_server() as server:
        https = server.base_url.replace("http://", "https://")
        with trio.fail_after(5):
            status, _, err = await run_main(capsys, *command("chat", https, tmp_path))
    assert status == 1
    where = https.removeprefix("https://").removesuffix("/v1")
    assert err == (
        f"chunkwise chat: error: TLS handshake with {where} failed: the server does not "
        "speak TLS: it answered the TLS hello with something else, such as plain HTTP "
        "(for a plain-HTTP server, use an http:// URL)\n"
    )


async def test_a_tls_handshake_that_never_completes_is_named_not_the_tcp_connect(
    silent_port: int,
) -> None:
    # A server that waits for a request line never answers the TLS hello: the
    # connect timeout covers the handshake, and says that is where it ran out.
    endpoint = chunkwise.Endpoint(
        f"https://127.0.0.1:{silent_port}/v1", timeouts=chunkwise.Timeouts(connect=0.3)
    )
    with trio.fail_after(5), pytest.raises(chunkwise.ConnectTimeout) as info:
        await connect(endpoint)
    assert info.value.tls_handshake is True
    assert str(info.value).startswith(
        f"timed out after 0.3 s in the TLS handshake with 127.0.0.1:{silent_port}: "
        "the TCP connection was made, but the TLS handshake did not complete"
    )
    assert "http://" in str(info.value)


async def test_probe_names_the_tls_handshake_timeout(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, silent_port: int
) -> None:
    argv = command("probe", f"https://127.0.0.1:{silent_port}/v1", tmp_path)
    status, out, _ = await run_main(capsys, *argv, "--timeout", "0.3")
    assert status == 3
    assert "in the TLS handshake" in probe_request(out)["error"]


async def test_a_plain_connect_timeout_still_says_connecting() -> None:
    timeout = chunkwise.ConnectTimeout("example.test", 443, 10.0)
    assert str(timeout) == "timed out after 10 s connecting to example.test:443"
    assert timeout.tls_handshake is False

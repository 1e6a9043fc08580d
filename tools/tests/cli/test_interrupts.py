"""Ctrl-C at start-up, before anything streams, exits 130 quietly, whatever the command.

Each command runs as a real process, and gets SIGINT while it waits: in the
TCP connect (to a listener whose backlog is full, so the SYN is never
answered), in the TLS handshake, reading stdin, or serving.  A Ctrl-C in the
TCP connect used to escape as an exception group from trio's connection
attempts, and print a traceback.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from helpers.data import KEY_VAR
from helpers.processes import interrupt

pytestmark = pytest.mark.usefixtures("api_key")


def tcp_states(port: int) -> list[str]:
    """The states (hex, as in /proc/net/tcp) of the IPv4 connections to ``port``."""
    with open("/proc/net/tcp") as table:
        rows = [line.split() for line in table.readlines()[1:]]
    return [row[3] for row in rows if int(row[2].split(":")[1], 16) == port]


SYN_SENT = "02"


@pytest.fixture
def unanswered_port() -> Iterator[int]:
    """A port whose SYNs are never answered: its listener's backlog is full."""
    if not os.path.exists("/proc/net/tcp"):
        pytest.skip("needs Linux's /proc/net/tcp to see the connect in progress")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(3):  # fill the accept queue; later SYNs are dropped
        filler = socket.socket()
        filler.setblocking(False)
        filler.connect_ex(("127.0.0.1", port))
        fillers.append(filler)
    try:
        yield port
    finally:
        for sock in [*fillers, listener]:
            sock.close()


async def connecting(port: int, ready: trio.Event) -> None:
    """Set ``ready`` once a connection to ``port`` waits for its SYN to be answered."""
    before = tcp_states(port).count(SYN_SENT)
    while tcp_states(port).count(SYN_SENT) <= before:  # noqa: ASYNC110 - polling the kernel
        await trio.sleep(0.01)
    ready.set()


@pytest.mark.parametrize(
    ("command", "expected_err"),
    [
        (["chat"], "status: incomplete (interrupted before the response began)\n"),
        (["chat", "--json"], ""),
        (
            ["record", "-o", "{tmp}/out.http"],
            "status: incomplete (interrupted before the response began; nothing was recorded)\n",
        ),
        (["probe"], "chunkwise probe: interrupted before any request ended\n"),
    ],
    ids=["chat", "chat --json", "record", "probe"],
)
async def test_ctrl_c_in_the_tcp_connect_exits_130_without_a_traceback(
    unanswered_port: int, tmp_path: Path, command: list[str], expected_err: str
) -> None:
    base_url = f"http://127.0.0.1:{unanswered_port}/v1"
    argv = [arg.replace("{tmp}", str(tmp_path)) for arg in command]
    argv += ["--base-url", base_url, "--api-key-env", KEY_VAR]
    if command[0] != "probe":
        argv.append("hi")
    ready = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(connecting, unanswered_port, ready)
        status, out, err = await interrupt(argv, after=ready.wait)
    assert (status, err) == (130, expected_err)
    if command == ["chat", "--json"]:
        assert out == '{"type": "interrupted", "status": "incomplete", "result": null}\n'
    else:
        assert out == ""
    assert not (tmp_path / "out.http").exists()  # nothing was received: no file


async def test_ctrl_c_in_the_tls_handshake_exits_130(silent_port: int) -> None:
    argv = ["chat", "--base-url", f"https://127.0.0.1:{silent_port}/v1", "hi"]
    status, out, err = await interrupt(argv, wait=0.5)
    assert (status, out) == (130, "")
    assert err == "status: incomplete (interrupted before the response began)\n"


@pytest.mark.parametrize(
    "argv",
    [["inspect", "-"], ["serve", "--port", "0"], ["demo"]],
    ids=["inspect reading stdin", "serve", "demo"],
)
async def test_ctrl_c_while_the_other_commands_wait_exits_130(argv: list[str]) -> None:
    status, _, err = await interrupt(argv, wait=0.5)
    assert status == 130
    assert "Traceback" not in err

"""``chunkwise serve``: a closed stdout is a broken pipe (141); only binding is "cannot listen";
a stdout nobody reads never stops the server.

``chunkwise serve | head -1`` used to exit 2 with ``cannot listen on ...:
Broken pipe``: every ``OSError`` of the whole run was taken for a bind failure.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import io
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import trio
import trio.testing

import chunkwise
from chunkwise_tools.cli import build_parser, main
from chunkwise_tools.cli._common import COLLECTOR_THRESHOLDS, UsageError
from chunkwise_tools.cli.serve import RequestLog, options_from_args
from chunkwise_tools.server import Faults
from helpers.cli import run_main
from helpers.processes import child_environment, collect, read_until


async def _open_serve() -> trio.Process:
    """``chunkwise serve --port 0`` in a child process, its stdout and stderr piped to us."""
    return await trio.lowlevel.open_process(
        [sys.executable, "-m", "chunkwise", "serve", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=child_environment(),
    )


async def test_serve_into_a_reader_that_closes_early_exits_141_quietly() -> None:
    # As `chunkwise serve --port 0 | head -1`: read the first line, close the
    # pipe; the next line the server writes (it logs each request) meets the
    # closed pipe.
    async with trio.open_nursery() as nursery:
        process = await _open_serve()
        assert process.stdout is not None and process.stderr is not None
        err = bytearray()
        nursery.start_soon(collect, process.stderr, err)
        with trio.fail_after(30):
            first = bytearray()
            assert await read_until(process.stdout, first, b"\n"), bytes(err)
            await process.stdout.aclose()  # `head -1` is done
            line = first.split(b"\n", 1)[0].decode()
            assert line.startswith("serving on http://127.0.0.1:")
            base_url = line.removeprefix("serving on ")
            request = {"model": "text", "messages": [{"role": "user", "content": "hi"}]}
            # The server may end while answering: whatever the client sees is fine.
            with contextlib.suppress(chunkwise.ChunkwiseError):
                await chunkwise.chat.complete(chunkwise.Endpoint(base_url), request)
            status = await process.wait()
    assert status == 141
    assert bytes(err) == b""  # no "cannot listen", no traceback


async def test_a_port_in_use_is_the_one_cannot_listen_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with trio.socket.socket() as taken:
        await taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        status, out, err = await run_main(capsys, "serve", "--port", str(port))
    assert status == 2
    assert out == ""
    assert err.startswith(f"chunkwise serve: error: cannot listen on 127.0.0.1:{port}: ")
    assert "in use" in err.lower()


def test_an_address_that_cannot_be_bound(capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["serve", "--host", "192.0.2.1", "--port", "0"])  # TEST-NET-1: not ours
    _, err = capsys.readouterr()
    assert status == 2
    assert err.startswith("chunkwise serve: error: cannot listen on 192.0.2.1:0: ")


@pytest.mark.skipif(not hasattr(fcntl, "F_SETPIPE_SZ"), reason="needs Linux's F_SETPIPE_SZ")
async def test_serve_keeps_answering_when_nobody_reads_its_request_log() -> None:
    # bench/accuracy.py read the "serving on" line and never read stdout again:
    # once the pipe filled with request lines, the server's blocking print stopped
    # every connection (300 requests unread, clients' closes unnoticed, 0% CPU).
    # A one-page pipe fills after ~80 lines instead of ~1300.
    async with trio.open_nursery() as nursery:
        process = await _open_serve()
        assert isinstance(process.stdout, trio.lowlevel.FdStream)
        assert process.stderr is not None
        fcntl.fcntl(process.stdout.fileno(), fcntl.F_SETPIPE_SZ, 4096)
        err = bytearray()
        nursery.start_soon(collect, process.stderr, err)
        try:
            with trio.fail_after(60):
                first = bytearray()
                assert await read_until(process.stdout, first, b"\n"), bytes(err)
                base_url = first.split(b"\n", 1)[0].decode().removeprefix("serving on ")
                endpoint = chunkwise.Endpoint(base_url, timeouts=chunkwise.Timeouts(idle=10))
                request = {"model": "text", "messages": [{"role": "user", "content": "hi"}]}
                for _ in range(300):  # ~15 kB of request lines: far past the pipe's 4 kB
                    result = await chunkwise.chat.complete(endpoint, request)
                    assert result.status == "complete" and result.content
        finally:
            process.kill()
            await process.wait()
            await process.stdout.aclose()


class _BlockedOut(io.StringIO):
    """A stdout whose writes wait until released, as a pipe nobody reads."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.counted = threading.Event()

    def fileno(self) -> int:
        raise io.UnsupportedOperation("no descriptor")

    def write(self, text: str) -> int:
        self.release.wait(30)
        written = super().write(text)
        if "not logged" in text:
            self.counted.set()
        return written


async def test_the_request_log_holds_its_backlog_and_counts_the_rest() -> None:
    out = _BlockedOut()
    log = RequestLog(out, backlog=3)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(log.write_lines)
        log("first")
        await trio.testing.wait_all_tasks_blocked()  # "first" is being written: blocked
        for name in ("a", "b", "c", "d", "e"):
            log(name)  # never blocks: a, b, c wait; d, e are counted
        out.release.set()
        assert await trio.to_thread.run_sync(out.counted.wait, 10)
        nursery.cancel_scope.cancel()
    assert out.getvalue() == "first\na\nb\nc\n(2 request lines not logged: stdout was not read)\n"


async def test_lines_logged_just_before_the_server_stops_are_still_written() -> None:
    # A test that cancels the server right after its request returned used to
    # find the request's line still queued, and missing.
    out = io.StringIO()
    log = RequestLog(out)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(log.write_lines)
        await trio.testing.wait_all_tasks_blocked()
        log("POST /v1/chat/completions")
        nursery.cancel_scope.cancel()
    assert out.getvalue() == "POST /v1/chat/completions\n"


def test_serve_quiets_the_collector_before_its_run(monkeypatch: pytest.MonkeyPatch) -> None:
    order: list[object] = []
    monkeypatch.setattr(gc, "freeze", lambda: order.append("freeze"))
    monkeypatch.setattr(gc, "set_threshold", lambda *limits: order.append(limits))
    monkeypatch.setattr(trio, "run", lambda *args, **kwargs: order.append("run"))
    assert main(["serve", "--port", "0"]) == 0
    assert order == ["freeze", COLLECTOR_THRESHOLDS, "run"]


def test_serve_help_names_every_path_the_server_answers(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["serve", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    paths = ("/v1/chat/completions", "/v1/responses", "/v1/completions", "/v1/messages")
    for path in (*paths, "/v1/models"):
        assert path in out.replace(f"{path}/", ""), path  # the path itself, not a longer one


@pytest.mark.parametrize(
    ("body", "warned"),
    [
        (b"<!DOCTYPE html>\n<html><body>Sign in</body></html>\n", True),
        (b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n<html></html>", True),
        (b"", True),
        (b"data: {}\n\n", False),
        (b"HTTP/1.1 200 OK\r\n\r\nevent: response.created\ndata: {}\n\n", False),
    ],
    ids=["html page", "recorded html", "empty", "event stream", "recorded event stream"],
)
def test_a_replay_file_without_events_is_served_with_a_warning(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, body: bytes, warned: bool
) -> None:
    page = tmp_path / "page.html"
    page.write_bytes(body)
    options = options_from_args(build_parser().parse_args(["serve", "--replay", str(page)]))
    assert options.replay is not None and options.replay in body  # served as it is
    warning = (
        f"warning: --replay {page} holds no server-sent event (no data: line); serving it as is\n"
    )
    assert capsys.readouterr().err == (warning if warned else "")


def test_the_fail_options_make_the_faults_drawn_with_seed() -> None:
    args = build_parser().parse_args(
        [
            *("serve", "--fail-before-output", "0.25", "--fail-after-output", "0.5"),
            *("--fail-way", "cut", "--fail-way", "idle", "--seed", "3"),
        ]
    )
    faults = Faults(before_output=0.25, after_output=0.5, ways=("cut", "idle"), seed=3)
    assert options_from_args(args).faults == faults
    assert options_from_args(build_parser().parse_args(["serve"])).faults is None
    every = build_parser().parse_args(["serve", "--fail-before-output", "1"])
    assert options_from_args(every).faults == Faults(before_output=1.0)


@pytest.mark.parametrize(
    "argv",
    [
        ["--fail-before-output", "1.5"],
        ["--fail-after-output", "-0.1"],
        ["--fail-before-output", "nan"],
        ["--fail-before-output", "half"],
        ["--fail-way", "explode"],
    ],
)
def test_a_fail_option_out_of_range_is_a_usage_error(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["serve", *argv])
    assert exited.value.code == 2


def test_shares_adding_up_to_more_than_all_answers_are_refused() -> None:
    args = build_parser().parse_args(
        ["serve", "--fail-before-output", "0.6", "--fail-after-output", "0.6"]
    )
    with pytest.raises(UsageError, match="add up to more than 1"):
        options_from_args(args)

"""``chunkwise serve``: a closed stdout is a broken pipe (141); only binding is "cannot listen".

``chunkwise serve | head -1`` used to exit 2 with ``cannot listen on ...:
Broken pipe``: every ``OSError`` of the whole run was taken for a bind failure.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys

import pytest
import trio

import chunkwise
from chunkwise._cli import main
from helpers import child_environment, collect, read_until, run_main


async def test_serve_into_a_reader_that_closes_early_exits_141_quietly() -> None:
    # As `chunkwise serve --port 0 | head -1`: read the first line, close the
    # pipe; the next line the server writes (it logs each request) meets the
    # closed pipe.
    async with trio.open_nursery() as nursery:
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "chunkwise", "serve", "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=child_environment(),
        )
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
                await chunkwise.complete_chat(chunkwise.Endpoint(base_url), request)
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

"""Running Python processes to their end, or interrupting one with Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Literal, overload

import trio

from helpers.data import REPO


def child_environment(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The test's environment, in UTF-8 mode and unbuffered, with ``env`` added.

    For the command-line tests that environment is already clean: their
    conftest removes the variables (``OPENAI_*`` and others) a command reads.
    """
    return {**os.environ, "PYTHONUTF8": "1", "PYTHONUNBUFFERED": "1", **(env or {})}


@overload
async def run_python(
    *args: str,
    env: Mapping[str, str] | None = None,
    text: Literal[True] = True,
) -> tuple[int, str, str]: ...


@overload
async def run_python(
    *args: str,
    env: Mapping[str, str] | None = None,
    text: Literal[False],
) -> tuple[int, bytes, bytes]: ...


async def run_python(
    *args: str,
    env: Mapping[str, str] | None = None,
    text: bool = True,
) -> tuple[int, str, str] | tuple[int, bytes, bytes]:
    """Run ``python *args`` in the repository to its end: its exit status, stdout and stderr.

    The process has the test's environment and ``env``, in UTF-8 mode (which a
    ``PYTHONIOENCODING`` in ``env`` overrides); its output is decoded from
    UTF-8 unless ``text`` is false.  It must end within two minutes.
    """
    with trio.fail_after(120):
        process = await trio.run_process(
            [sys.executable, *args],
            cwd=REPO,
            env=child_environment(env),
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    if text:
        return process.returncode, process.stdout.decode(), process.stderr.decode()
    return process.returncode, process.stdout, process.stderr


async def read_until(stream: trio.abc.ReceiveStream, into: bytearray, marker: bytes) -> bool:
    """Receive from ``stream`` into ``into`` until ``marker`` is there; false if it ended first."""
    while marker not in into:
        data = await stream.receive_some()
        if not data:
            return False
        into.extend(data)
    return True


async def collect(stream: trio.abc.ReceiveStream, into: bytearray) -> None:
    """Receive everything ``stream`` sends, up to its end, into ``into``."""
    async for data in stream:
        into.extend(data)


# ``python -m chunkwise``, once chunkwise and every command are imported and it
# said so on stderr: the signal then comes while the command runs, not while
# main() imports it (which the start-up tests cover).
_READY = b"ready\n"
_BOOT = (
    "import runpy, sys, chunkwise_tools.cli\n"
    "chunkwise_tools.cli.build_parser()\n"
    "print('ready', file=sys.stderr, flush=True)\n"
    "runpy.run_module('chunkwise', run_name='__main__', alter_sys=True)\n"
)


async def interrupt(
    argv: Sequence[str],
    *,
    after_stdout: bytes | None = None,
    after: Callable[[], Awaitable[object]] | None = None,
    wait: float = 0.0,
) -> tuple[int, str, str]:
    """Run ``python -m chunkwise *argv``, then SIGINT it: its exit status, stdout and stderr.

    The signal comes once chunkwise is imported and then, in this order, once
    ``after_stdout`` is on its stdout, ``after()`` has returned and ``wait``
    more seconds have passed.  The process has the test's environment (see
    :func:`child_environment`) and a stdin that stays open and empty
    (``inspect -`` waits on it).  It must all take less than 30 seconds.
    """
    out = bytearray()
    err = bytearray()
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            process = await trio.lowlevel.open_process(
                [sys.executable, "-c", _BOOT, *argv],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=child_environment(),
            )
            assert process.stdin is not None
            assert process.stdout is not None and process.stderr is not None
            try:
                assert await read_until(process.stderr, err, _READY), bytes(err)
                nursery.start_soon(collect, process.stderr, err)
                if after_stdout is not None:
                    assert await read_until(process.stdout, out, after_stdout), bytes(err)
                nursery.start_soon(collect, process.stdout, out)
                if after is not None:
                    await after()
                await trio.sleep(wait)
                process.send_signal(signal.SIGINT)
                status = await process.wait()
            finally:
                if process.returncode is None:
                    process.kill()
            await process.stdin.aclose()
    return status, out.decode(), err.decode().removeprefix(_READY.decode())

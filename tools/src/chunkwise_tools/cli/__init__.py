"""The ``chunkwise`` command line: ``main()`` and the parser that holds every command.

Each command lives in its own module as ``add_<name>_command(commands)``, which
registers an argparse subparser whose ``handler`` is a function
``(args) -> exit status``; this root imports them all and is imported by nobody
but the console script (``chunkwise = chunkwise_tools.cli:main``, which
``python -m chunkwise`` looks up).  Exit statuses and the other shared pieces
are in :mod:`._common`.  Commands never import each other: where one command
needs another module's work (``probe --api responses`` runs
:mod:`._probe_responses`), this root hands it over.  The emulator behind
``serve`` and ``demo`` is :mod:`chunkwise_tools.server`; the bench runner and
its report are :mod:`chunkwise_tools.bench`.

``main()`` returns the status instead of raising :class:`SystemExit`, so it can
be called in-process.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from chunkwise.lowlevel import exceptions_unwrapped

from .._version import __version__
from ._common import (
    EXIT_BROKEN_PIPE,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    PROG,
    UsageError,
    tolerate_stdout,
)
from ._probe_responses import run_responses_probe
from .bench import add_bench_command
from .chat import add_chat_command
from .demo import add_demo_command
from .inspect import add_inspect_command
from .probe import add_probe_command
from .record import add_record_command
from .serve import add_serve_command

__all__ = ["build_parser", "main"]

_Handler = Callable[[argparse.Namespace], int]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); return the exit status.

    Ctrl-C at any point once this runs (parsing, connecting, streaming) gives
    status 130 without a traceback, and a closed stdout 141; commands that
    have something to say about an interruption (``chat``, ``record``) catch
    it themselves first.
    """
    command = None
    try:
        parser = build_parser()
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:
            # argparse exits for --help, --version and usage errors; callers of
            # main() get a status either way.
            return exc.code if isinstance(exc.code, int) else EXIT_USAGE
        command = args.command
        handler: _Handler = args.handler
        tolerate_stdout()
        with exceptions_unwrapped():
            status = handler(args)
        # Flush here, so a closed pipe is noticed while we can still handle it
        # rather than at interpreter exit.
        sys.stdout.flush()
    except UsageError as exc:
        print(f"{PROG} {command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    return status


def _silence_stdout() -> None:
    # The reader went away (e.g. ``| head``).  Python flushes stdout again at
    # exit and would print an "Exception ignored" message, so point the file
    # descriptor at devnull, as the signal-handling docs recommend.
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass  # no real file descriptor (e.g. a captured stdout): nothing to flush later


def build_parser() -> argparse.ArgumentParser:
    """The ``chunkwise`` parser with every command (also used to generate the docs)."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description=(
            "Stream, record, inspect and probe OpenAI-compatible chat-completion, "
            "Responses API and legacy completion streams (server-sent events), and serve "
            "scripted ones locally.  "
            "Start with "
            "'chunkwise demo'."
        ),
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    add_inspect_command(commands)
    add_chat_command(commands)
    add_record_command(commands)
    add_probe_command(commands, run_responses_probe)
    add_serve_command(commands)
    add_bench_command(commands)
    add_demo_command(commands)
    return parser

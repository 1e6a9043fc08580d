"""The ``chunkwise`` command line: ``main()`` and the parser that holds every command.

Each command lives in its own module as ``add_<name>_command(commands)``, which
registers an argparse subparser whose ``handler`` is a function
``(args) -> exit status``; this root imports them all and is imported by nobody
but the console script (``chunkwise = chunkwise_tools.cli:main``, which
``python -m chunkwise`` looks up).  Exit statuses and the other shared pieces
are in :mod:`._common`.  Commands never import each other: where one command
needs another module's work (``probe --api responses`` runs
:mod:`._probe_responses`, ``--api messages`` :mod:`._probe_messages`), this
root hands it over.  The emulator behind ``serve`` and ``demo`` is
:mod:`chunkwise_tools.server`; the bench runner and its report are :mod:`chunkwise_tools.bench`.

Start-up is lazy: ``main()`` imports only the module of the command named on
the command line (the others are listed from :mod:`._commands`, which imports
nothing heavy), and imports it inside its Ctrl-C handling, so ``chunkwise
--help`` imports neither trio nor the library, and a Ctrl-C at any moment
exits 130 without a traceback.  :func:`build_parser` builds every command, for
the docs.

``main()`` returns the status instead of raising :class:`SystemExit`, so it can
be called in-process.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import os
import sys
from collections.abc import Callable, Collection, Sequence

from .._version import __version__
from ._commands import COMMANDS, EXIT_BROKEN_PIPE, EXIT_INTERRUPTED, EXIT_USAGE, PROG

__all__ = ["build_parser", "help_pages", "main"]

_Handler = Callable[[argparse.Namespace], int]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); return the exit status.

    Ctrl-C at any point once this runs (importing the command, parsing,
    connecting, streaming) gives status 130 without a traceback, and a closed
    stdout 141; commands that have something to say about an interruption
    (``chat``, ``record``, ``bench``, ``probe``) catch it themselves first.
    """
    command = None
    try:
        arguments = sys.argv[1:] if argv is None else list(argv)
        # The command is the first argument that is not an option (the root's
        # options take no value); only its module is imported.
        named = next((arg for arg in arguments if not arg.startswith("-")), None)
        parser = _parser(commands=[named] if named in COMMANDS else [])
        try:
            args = parser.parse_args(arguments)
        except SystemExit as exc:
            # argparse exits for --help, --version and usage errors; callers of
            # main() get a status either way.
            return exc.code if isinstance(exc.code, int) else EXIT_USAGE
        command = args.command
        return _run(command, args.handler, args)
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


def _run(command: str, handler: _Handler, args: argparse.Namespace) -> int:
    # Imported once a command runs: ``--help`` and ``--version`` need neither (start-up).
    from chunkwise.lowlevel import exceptions_unwrapped

    # The command's module imported this already; the root must not before it.
    from ._common import UsageError, tolerate_stdout

    try:
        tolerate_stdout()
        with exceptions_unwrapped():
            status = handler(args)
        # Flush here, so a closed pipe is noticed while we can still handle it
        # rather than at interpreter exit.
        sys.stdout.flush()
    except UsageError as exc:
        print(f"{PROG} {command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
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
    return _parser(commands=COMMANDS.keys())


def help_pages() -> dict[str, str]:
    """Every ``--help`` page, the root's (as ``chunkwise``) first: the docs' option reference.

    Wrapped to ``$COLUMNS``, as argparse does.
    """
    parser = build_parser()
    pages = {PROG: parser.format_help()}
    for name in COMMANDS:  # argparse reaches a command's parser only by parsing
        page = io.StringIO()
        with contextlib.redirect_stdout(page), contextlib.suppress(SystemExit):
            parser.parse_args([name, "--help"])
        pages[name] = page.getvalue()
    return pages


def _parser(commands: Collection[str]) -> argparse.ArgumentParser:
    """The root parser: ``commands`` built by their modules, the others listed by name only."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description=(
            "Stream, record, inspect, probe and bench OpenAI-compatible chat-completion, "
            "Responses API and legacy completion streams (server-sent events), and serve "
            "scripted ones locally.  Start with 'chunkwise demo': a local server streams "
            "to chunkwise's consumers (no network, no API key)."
        ),
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, help_ in COMMANDS.items():
        if name not in commands:
            subparsers.add_parser(name, help=help_, add_help=False)
            continue
        module = importlib.import_module(f".{name}", __name__)
        add = getattr(module, f"add_{name}_command")
        if name == "probe":
            # Commands never import each other: the root hands probe the other APIs' probes.
            responses = importlib.import_module("._probe_responses", __name__)
            messages = importlib.import_module("._probe_messages", __name__)
            add(subparsers, responses.run_responses_probe, messages.run_messages_probe)
        else:
            add(subparsers)
    return parser

"""Sphinx configuration for the chunkwise-tools documentation (the command line).

Build with ``sphinx-build -W --keep-going -b html tools/docs tools/docs/_build/html``
(or ``nox -s docs``, which builds the library's docs too).  It needs no network:
the library's documentation (``docs/``) is referred to by path, as plain text.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from pathlib import Path

# Build from the source trees even when the distributions are not installed
# (their dependencies still need to be importable).
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import chunkwise_tools
from chunkwise_tools.cli import build_parser

# -- Project -------------------------------------------------------------------

project = "chunkwise-tools"
author = "chunkwise developers"
copyright = "2026, chunkwise developers"
release = chunkwise_tools.__version__
version = ".".join(release.split(".")[:2])

# -- Command-line reference ----------------------------------------------------
# cli.rst includes each command's --help, generated here from the real parser
# so the reference cannot drift from the code.

_CLI_HELP = Path(__file__).resolve().parent / "_cli_help"


def _write_cli_help() -> None:
    os.environ["COLUMNS"] = "88"  # argparse wraps to this width
    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command")
    _CLI_HELP.mkdir(exist_ok=True)
    # The top-level help first (saved as chunkwise.txt), then each command's.
    helps = {"chunkwise": parser, **commands.choices}  # type: ignore[attr-defined]
    for name, subparser in helps.items():
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            subparser.print_help()
        path = _CLI_HELP / f"{name}.txt"
        if not path.exists() or path.read_text() != out.getvalue():
            path.write_text(out.getvalue())


_write_cli_help()

# -- General -------------------------------------------------------------------

extensions: list[str] = []
root_doc = "index"
exclude_patterns = ["_build", "_cli_help"]
default_role = "literal"

# -- HTML ----------------------------------------------------------------------

html_theme = "alabaster"
html_title = f"chunkwise-tools {release}"
html_theme_options = {
    "description": "The chunkwise command line, a local OpenAI-compatible server and bench",
    "fixed_sidebar": True,
}

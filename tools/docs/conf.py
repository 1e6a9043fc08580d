"""Sphinx configuration for the chunkwise-tools documentation (the command line).

Build with ``sphinx-build -W --keep-going -b html tools/docs tools/docs/_build/html``
(or ``nox -s docs``, which builds the library's docs too).  It needs no network:
the library's documentation (``docs/``) is referred to by path, as plain text.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# Build from the source trees even when the distributions are not installed
# (their dependencies still need to be importable).
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import chunkwise_tools
from chunkwise_tools.cli import help_pages

# -- Project -------------------------------------------------------------------

project = "chunkwise-tools"
author = "chunkwise developers"
copyright = "2026, chunkwise developers"
release = chunkwise_tools.__version__
version = ".".join(release.split(".")[:2])

# -- Command-line reference ----------------------------------------------------
# cli.rst includes each command's --help from _cli_help/, which is committed (so
# the reference reads on GitHub too) and rewritten here from the real parser;
# tools/tests/cli/test_help.py fails when a committed page differs from it.

_CLI_HELP = Path(__file__).resolve().parent / "_cli_help"
#: The width argparse wraps the pages to ($COLUMNS).
CLI_HELP_COLUMNS = "88"


def _write_cli_help() -> None:
    os.environ["COLUMNS"] = CLI_HELP_COLUMNS
    _CLI_HELP.mkdir(exist_ok=True)
    for name, text in help_pages().items():
        path = _CLI_HELP / f"{name}.txt"
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")


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

"""Sphinx configuration for the chunkwise documentation.

Build with ``sphinx-build -W --keep-going -b html docs docs/_build/html`` (or
``nox -s docs``).  The build must pass offline: intersphinx inventories are
only used when their hosts answer, and never when ``CHUNKWISE_DOCS_OFFLINE``
is set (``.ci/run`` sets it).  Without them, links to Python, trio and h11
render as plain text instead of failing the build.
"""

from __future__ import annotations

import inspect
import os
import socket
import sys
from pathlib import Path
from typing import Any

# Build from the source tree even when chunkwise is not installed (its
# dependencies still need to be importable).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import chunkwise

# -- Project -------------------------------------------------------------------

project = "chunkwise"
author = "chunkwise developers"
copyright = "2026, chunkwise developers"
release = chunkwise.__version__
version = ".".join(release.split(".")[:2])

# -- General -------------------------------------------------------------------

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.intersphinx",
    "sphinx.ext.viewcode",
    "sphinxcontrib_trio",
]

root_doc = "index"
exclude_patterns = ["_build"]
default_role = "py:obj"
nitpicky = False

# -- autodoc / napoleon --------------------------------------------------------

autodoc_member_order = "bysource"
autodoc_typehints = "signature"
napoleon_google_docstring = True
napoleon_numpy_docstring = False
# "Attributes:" sections become attribute entries (link targets such as
# ToolCall.arguments).  attrs fields have no doc comments, so autodoc does not
# document them a second time; a field with both would be a duplicate (-W).
napoleon_use_ivar = False

# -- intersphinx ---------------------------------------------------------------

_INVENTORIES = {
    "python": "https://docs.python.org/3",
    "trio": "https://trio.readthedocs.io/en/stable",
    "h11": "https://h11.readthedocs.io/en/latest",
}


def _reachable(url: str) -> bool:
    host = url.split("/")[2]
    try:
        socket.create_connection((host, 443), timeout=3).close()
    except OSError:
        return False
    return True


if os.environ.get("CHUNKWISE_DOCS_OFFLINE"):
    intersphinx_mapping: dict[str, tuple[str, None]] = {}
else:
    intersphinx_mapping = {
        name: (url, None) for name, url in _INVENTORIES.items() if _reachable(url)
    }
intersphinx_timeout = 10

# -- HTML ----------------------------------------------------------------------

html_theme = "alabaster"
html_title = f"chunkwise {release}"
html_theme_options = {
    "description": "OpenAI-style chat streams, parsed correctly at every chunk boundary",
    "fixed_sidebar": True,
}

# -- Checks --------------------------------------------------------------------


def _check_public_api(app: Any, env: Any) -> None:
    """Warn (an error under -W) about names in chunkwise.__all__ missing from the docs."""
    from sphinx.util import logging

    documented = set(env.domains["py"].objects)
    missing = sorted(
        name
        for name in chunkwise.__all__
        if not name.startswith("_") and f"chunkwise.{name}" not in documented
    )
    if missing:
        logging.getLogger(__name__).warning(
            "public names not documented in docs/api.rst: %s", ", ".join(missing)
        )


def _drop_type_docstring(
    app: Any, what: str, name: str, obj: Any, options: Any, lines: list[str]
) -> None:
    """Re-exported constants (e.g. DEFAULT_MAX_EVENT_SIZE) would show int's docstring."""
    type_doc = inspect.getdoc(type(obj))
    if what == "data" and type_doc and lines and lines[0].strip() == type_doc.splitlines()[0]:
        lines.clear()


def setup(app: Any) -> None:
    app.connect("autodoc-process-docstring", _drop_type_docstring)
    app.connect("env-check-consistency", _check_public_api)

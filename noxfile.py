"""Development sessions: ``nox`` runs them all, ``nox -s tests`` (etc.) one.

Tool versions come from the ``dev`` extra in ``pyproject.toml``, so nox, CI
(``.ci/run``) and a hand-made ``pip install -e '.[dev]'`` agree.  Every session
that imports the code installs both distributions of the repository: the
library (``.``) and the tools (``./tools``, ``chunkwise-tools``).
"""

from __future__ import annotations

import nox
from packaging.requirements import Requirement

PYTHON = "3.11"
DOCS_OUT = "docs/_build/html"
TOOLS_DOCS_OUT = "tools/docs/_build/html"

nox.options.sessions = ["tests", "lint", "typecheck", "docs"]

_DEV_REQUIREMENTS: list[str] = nox.project.load_toml("pyproject.toml")["project"][
    "optional-dependencies"
]["dev"]


def _dev_requirement(name: str) -> str:
    """The requirement string for ``name`` in the ``dev`` extra."""
    for requirement in _DEV_REQUIREMENTS:
        if Requirement(requirement).name == name:
            return requirement
    raise LookupError(f"{name} is not in the dev extra of pyproject.toml")


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Run both test suites, the library's and the tools' (extra arguments go to pytest)."""
    session.install("-e", ".[test]", "-e", "./tools[test]")
    session.run("python", "-m", "pytest", *session.posargs)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff check and ruff format --check."""
    session.install(_dev_requirement("ruff"))
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session(python=PYTHON)
def typecheck(session: nox.Session) -> None:
    """mypy --strict on both distributions and their tests (files and settings: pyproject.toml),
    then pyright's --verifytypes over the library's public face (.ci/verifytypes.py)."""
    session.install("-e", ".[dev]", "-e", "./tools[test]")
    session.run("mypy", "--strict", *session.posargs)
    session.run("python", ".ci/verifytypes.py")


@nox.session(python=PYTHON)
def docs(session: nox.Session) -> None:
    """Build the HTML docs of both distributions; any Sphinx warning is an error."""
    session.install("-e", ".[docs]", "-e", "./tools")
    session.run(
        "sphinx-build", "-W", "--keep-going", "-b", "html", "docs", DOCS_OUT, *session.posargs
    )
    session.run(
        "sphinx-build",
        "-W",
        "--keep-going",
        "-b",
        "html",
        "tools/docs",
        TOOLS_DOCS_OUT,
        *session.posargs,
    )

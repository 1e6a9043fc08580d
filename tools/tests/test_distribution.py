"""chunkwise-tools is released with chunkwise: the same version, and a requirement that pins
exactly that version of the library (the tools use :mod:`chunkwise.lowlevel`)."""

from __future__ import annotations

import sys
from importlib.metadata import requires

import pytest
from packaging.requirements import Requirement

import chunkwise
import chunkwise_tools
from helpers.data import REPO


def _pins(requirements: list[str]) -> list[str]:
    """The version specifiers of every requirement on chunkwise, extras or not."""
    return [str(req.specifier) for req in map(Requirement, requirements) if req.name == "chunkwise"]


def test_the_tools_have_the_version_of_the_library() -> None:
    assert chunkwise_tools.__version__ == chunkwise.__version__


def test_the_installed_tools_require_exactly_this_version_of_the_library() -> None:
    pins = _pins(requires("chunkwise-tools") or [])
    assert pins != []
    assert set(pins) == {f"=={chunkwise.__version__}"}


def test_the_tools_pyproject_pins_the_version_of_the_library() -> None:
    if sys.version_info < (3, 11):
        pytest.skip("tomllib is new in Python 3.11")
    else:  # mypy checks for 3.10, where this branch is not analysed
        import tomllib

        project = tomllib.loads((REPO / "tools" / "pyproject.toml").read_text())["project"]
        requirements = list(project["dependencies"])
        for extra in project.get("optional-dependencies", {}).values():
            requirements += extra
        pins = _pins(requirements)
        assert pins != []
        assert set(pins) == {f"=={chunkwise.__version__}"}

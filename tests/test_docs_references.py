"""The prose names files and commands that exist: docs drift is a test failure.

The README, the library's docs and the tools' docs cite test modules by path
("rerun: ``.venv/bin/pytest tests/client/test_resume.py``") and repeat the
README's commands; a move of a test module or a change of a command must
carry them along.  The lab notebook (``tools/docs/performance_log.rst``) is a
dated record of past trees and is exempt.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROSE = sorted(
    path
    for path in (ROOT / "README.md", *ROOT.glob("docs/*.rst"), *ROOT.glob("tools/docs/*.rst"))
    if path.name != "performance_log.rst"
)
TEST_PATH = re.compile(r"(?:tools/)?tests/[\w/]+\.py")


@pytest.mark.parametrize("page", PROSE, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_test_module_the_prose_names_exists(page: Path) -> None:
    named = set(TEST_PATH.findall(page.read_text(encoding="utf-8")))
    assert sorted(path for path in named if not (ROOT / path).is_file()) == []


def test_the_quickstart_runs_the_tests_with_the_readmes_command() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    command = next(line for line in readme.splitlines() if line.endswith("python -m pytest"))
    assert f"   {command}\n" in (ROOT / "docs" / "quickstart.rst").read_text(encoding="utf-8")

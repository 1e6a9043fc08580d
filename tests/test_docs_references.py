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


def _prose(path: str) -> str:
    """``path``'s text with its line breaks and indents as single spaces."""
    return " ".join((ROOT / path).read_text(encoding="utf-8").split())


def test_the_readme_and_quick_start_count_the_demos_consumers() -> None:
    demo = _prose("tools/src/chunkwise_tools/cli/demo.py")
    counted = re.search(r"One request, (\w+) independent consumers", demo)
    assert counted is not None
    for page in ("README.md", "docs/quickstart.rst"):
        said = {word.lower() for word in re.findall(r"(\w+) independent consumers", _prose(page))}
        assert said == {counted.group(1)}, page


def test_the_quick_start_installs_the_command_it_runs() -> None:
    quickstart = (ROOT / "docs" / "quickstart.rst").read_text(encoding="utf-8")
    command = next(line for line in quickstart.splitlines() if "chunkwise demo" in line)
    assert "-e ./tools" in command


def test_the_live_values_example_runs_a_tool_only_once_validated() -> None:
    page = (ROOT / "docs" / "live_values.rst").read_text(encoding="utf-8")
    lines = page.splitlines()
    [run] = [n for n, line in enumerate(lines) if "await run_tool(" in line]
    assert ".validated" in lines[run - 1]


def test_the_readme_says_how_long_the_tests_take_and_offers_a_quick_subset() -> None:
    readme = _prose("README.md")
    assert "The whole suite takes a few minutes" in readme
    quick = re.search(r"A quick check.*?```sh (.*?) ```", readme)
    assert quick is not None
    named = re.findall(r"(?:tools/)?tests/[\w/]+\.py", quick.group(1))
    assert named and all((ROOT / path).is_file() for path in named)

"""Every runnable example is named where a newcomer looks: the README and the quick start."""

from __future__ import annotations

import pytest

from helpers.data import REPO

EXAMPLES = sorted(path.name for path in (REPO / "examples").glob("*.py"))


def test_there_are_examples_to_list() -> None:
    assert "basic_stream.py" in EXAMPLES
    assert "responses_stream.py" in EXAMPLES


@pytest.mark.parametrize("page", ["README.md", "docs/quickstart.rst"])
@pytest.mark.parametrize("example", EXAMPLES)
def test_each_example_is_listed(page: str, example: str) -> None:
    assert example in (REPO / page).read_text(encoding="utf-8")


@pytest.mark.parametrize("page", ["README.md", "docs/quickstart.rst"])
def test_the_example_needing_openai_says_so(page: str) -> None:
    text = " ".join((REPO / page).read_text(encoding="utf-8").split())
    start = text.index("sdk_chunks.py")
    assert "openai" in text[start : start + 200]

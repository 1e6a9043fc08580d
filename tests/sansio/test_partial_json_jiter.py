"""chunkwise.PartialJSON against jiter's partial modes, the parser the openai SDK uses.

``jiter.from_json(text, partial_mode="trailing-strings")`` is compared with
``strings="partial"`` and ``partial_mode="on"`` with ``strings="whole"``, on
every prefix of every document hypothesis makes.  Where the two disagree by
design, the comparison says which row of ``docs/differences.rst`` ("Partial
JSON: chunkwise and jiter") allows it, and a table test pins each row, so a
jiter that changes makes a test say so.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

import pytest
from hypothesis import HealthCheck, given, settings

import chunkwise
from helpers.json_values import same_json
from helpers.strategies import json_texts

jiter = pytest.importorskip("jiter")

SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
JITER_MODE = {"partial": "trailing-strings", "whole": "on"}
# A number at the end of a prefix (outside a string, where it matters).
_TRAILING_NUMBER = re.compile(r"-?[0-9][0-9.eE+-]*$|-$")


def theirs(text: str, strings: Literal["partial", "whole"]) -> Any:
    try:
        return jiter.from_json(text.encode(), partial_mode=JITER_MODE[strings])
    except ValueError:
        return _RAISED


_RAISED = object()


def agree(prefix: str, strings: Literal["partial", "whole"]) -> bool:
    ours = chunkwise.partial_json(prefix, strings)
    other = theirs(prefix, strings)
    if other is not _RAISED and same_json(ours, other):
        return True
    # Row "nothing yet": jiter raises where chunkwise shows no value (an
    # empty prefix, a root string in "whole" mode, a root literal half spelled).
    if ours is None and other is _RAISED:
        return True
    # Row "unfinished numbers": jiter shows a number before anything proves it
    # complete; chunkwise waits for the delimiter.
    number = _TRAILING_NUMBER.search(prefix)
    if number is not None:
        other = theirs(prefix[: number.start()], strings)
        return (other is _RAISED and ours is None) or same_json(ours, other)
    return False


@SETTINGS
@given(text=json_texts)
def test_every_prefix_agrees_with_jiter_where_the_semantics_do(text: str) -> None:
    for strings in ("partial", "whole"):
        for end in range(len(text) + 1):
            assert agree(text[:end], strings), (strings, text[:end])
    parser = chunkwise.PartialJSON()
    parser.feed(text)
    assert same_json(parser.end(), jiter.from_json(text.encode()))


# (text, chunkwise "partial", jiter "trailing-strings", row of docs/differences.rst)
ROWS: list[tuple[str, Any, Any, str]] = [
    ("[1, 2", (1,), [1, 2], "unfinished numbers"),
    ('{"n": -0.5e', {}, {}, "unfinished numbers"),
    ("12", None, 12, "unfinished numbers"),
    ('{"a": 1, "a": "x', {"a": 1}, {"a": "x"}, "duplicate keys"),
    ('{"a": 1, "a": [2', {"a": 1}, {"a": [2]}, "duplicate keys"),
    ('["\\ud800"]', ("\ud800",), ValueError, "lone surrogates"),
    ("[NaN]", chunkwise.InvalidJSON, [float("nan")], "NaN and Infinity"),
    ("[Infinity]", chunkwise.InvalidJSON, [float("inf")], "NaN and Infinity"),
    ("[" * 129, chunkwise.InvalidJSON, json.loads("[" * 129 + "]" * 129), "nesting depth"),
    ("[" * 300 + "]" * 300, chunkwise.InvalidJSON, ValueError, "nesting depth"),
    ("[1, 2]x", chunkwise.InvalidJSON, [1, 2], "trailing data"),
    ("[1 2", chunkwise.InvalidJSON, [1], "early rejection"),
    ('{"a": 1 "b"', chunkwise.InvalidJSON, {"a": 1}, "early rejection"),
]


@pytest.mark.parametrize(("text", "ours", "other", "row"), ROWS)
def test_documented_differences_from_jiter(text: str, ours: Any, other: Any, row: str) -> None:
    del row  # the row of docs/differences.rst this case pins
    if isinstance(ours, type):
        with pytest.raises(ours):
            chunkwise.partial_json(text)
    else:  # exactly: a root "12" shows None, not 12 (same_json compares types too)
        assert same_json(chunkwise.partial_json(text), ours), chunkwise.partial_json(text)
    if isinstance(other, type):
        with pytest.raises(other):
            jiter.from_json(text.encode(), partial_mode="trailing-strings")
    else:
        got = jiter.from_json(text.encode(), partial_mode="trailing-strings")
        assert json.dumps(got) == json.dumps(other)


def test_whole_mode_root_string_jiter_raises_chunkwise_shows_nothing() -> None:
    # Row "nothing yet".
    assert chunkwise.partial_json('"ab', "whole") is None
    with pytest.raises(ValueError, match="EOF"):
        jiter.from_json(b'"ab', partial_mode="on")


def test_every_row_in_the_docs_has_its_test() -> None:
    text = (Path(__file__).parents[2] / "docs" / "differences.rst").read_text(encoding="utf-8")
    section = text.split("Partial JSON: chunkwise and jiter\n", 1)[1].split("\n---", 1)[0]
    named = set(re.findall(r"``(test_\w+)``", section))
    assert named and named <= {name for name in globals() if name.startswith("test_")}
    rows = re.findall(r"^     - ``([a-zA-Z ]+)``$", section, flags=re.MULTILINE)
    assert set(rows) == {row for *_, row in ROWS}

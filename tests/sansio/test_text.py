"""Fragments: streamed text put together exactly, with few string objects alive (its rules)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chunkwise._core.text import BATCH, Fragments

# One operation: append a fragment, replace the whole text, or take a snapshot.
operations = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.text(max_size=12)),
        st.tuples(st.just("replace"), st.text(max_size=30)),
        st.tuples(st.just("text"), st.just("")),
    ),
    max_size=300,
)


def held_at_most(appended: int) -> int:
    # Rule 3: a batch of fragments, plus about one run per doubling of the text.
    return BATCH + max(1, math.ceil(math.log2(appended + 1))) + 1


@given(operations)
def test_text_is_every_fragment_since_the_last_replace_in_order(ops: list[tuple[str, str]]) -> None:
    fragments = Fragments()
    expected = ""
    touched = False
    for op, value in ops:
        if op == "append":
            fragments.append(value)
            expected += value
            touched = True
        elif op == "replace":
            fragments.replace(value)
            expected = value
            touched = True
        else:
            assert fragments.text() == expected
        assert bool(fragments) is touched
    assert fragments.text() == expected


@settings(deadline=None)
@given(st.lists(st.text(min_size=1, max_size=8), max_size=2000))
def test_a_long_answer_holds_few_strings(pieces: list[str]) -> None:
    fragments = Fragments()
    for count, piece in enumerate(pieces, 1):
        fragments.append(piece)
        assert fragments.strings <= held_at_most(count)
    assert fragments.text() == "".join(pieces)
    assert fragments.strings <= 1


def test_ten_thousand_single_characters_hold_a_few_dozen_strings() -> None:
    fragments = Fragments()
    for i in range(10_000):
        fragments.append("ab"[i % 2])
    assert fragments.strings <= BATCH + 16
    assert fragments.text() == "ab" * 5_000


def test_a_second_snapshot_returns_the_same_string() -> None:
    fragments = Fragments()
    for piece in ("Hel", "lo, ", "wor", "ld"):
        fragments.append(piece)
    first = fragments.text()
    assert first == "Hello, world"
    assert fragments.text() is first
    assert fragments.strings == 1


def test_nothing_appended_is_empty_and_false() -> None:
    fragments = Fragments()
    assert not fragments
    assert fragments.text() == ""
    fragments.append("")
    assert fragments  # an empty fragment still counts as something that arrived
    assert fragments.text() == ""


def test_replace_discards_the_fragments() -> None:
    fragments = Fragments()
    for _ in range(3 * BATCH):
        fragments.append("x")
    fragments.replace("final")
    fragments.append("!")
    assert fragments.text() == "final!"
    assert repr(fragments) == "Fragments('final!')"


def _shapes(count: int) -> dict[str, list[str]]:
    """``count`` distinct fragments in shapes that merge runs differently (rule 2 compares
    lengths): all alike, growing, one long first, and lengths that go up and down."""
    return {
        "alike": [f"<{i:05}>" for i in range(count)],
        "growing": [f"<{i}>" + "+" * (i // 8) for i in range(count)],
        "long first": ["<first>" * 50] + [f"<{i}>" for i in range(1, count)],
        "up and down": [f"<{i}>" + "~" * (i * 7 % 13) for i in range(count)],
    }


@pytest.mark.parametrize("shape", list(_shapes(1)))
@pytest.mark.parametrize(
    "count", [2 * BATCH - 1, 2 * BATCH, 2 * BATCH + 1, 3 * BATCH, 4 * BATCH + 5, 100, 1000]
)
def test_more_than_two_batches_of_fragments_keep_their_order(count: int, shape: str) -> None:
    # Past 2 * BATCH fragments, runs are merged with runs (not only fragments
    # joined into a run): each merge must put the older run first.
    pieces = _shapes(count)[shape]
    fragments = Fragments()
    for piece in pieces:
        fragments.append(piece)
    assert fragments.text() == "".join(pieces)


def test_every_prefix_of_a_hundred_fragments_reads_in_order() -> None:
    pieces = [f"<{i}>" for i in range(100)]
    for length in range(2 * BATCH + 1, len(pieces) + 1):
        fragments = Fragments()
        for piece in pieces[:length]:
            fragments.append(piece)
        assert fragments.text() == "".join(pieces[:length]), length
    # Snapshots in between (which join everything into one run) change nothing.
    fragments = Fragments()
    for i, piece in enumerate(pieces):
        fragments.append(piece)
        if i % 37 == 36:
            assert fragments.text() == "".join(pieces[: i + 1])
    assert fragments.text() == "".join(pieces)

"""The fuzz harness of chunkwise.PartialJSON (fuzz/fuzz_partial_json.py), run by the suite.

As for the other harnesses (tests/sansio/test_fuzz.py): a few hundred
derandomized hypothesis inputs and the harness's seeds, so it cannot rot and
CI needs no atheris.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import chunkwise

sys.path.insert(0, str(Path(__file__).parents[2] / "fuzz"))
import _bytes
import fuzz_partial_json

SMOKE = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)


@SMOKE
@given(data=st.binary(max_size=3000))
def test_fuzz_partial_json_harness_smoke(data: bytes) -> None:
    fuzz_partial_json.TestOneInput(data)


@pytest.mark.parametrize("whole", [False, True])
@pytest.mark.parametrize("name", sorted(fuzz_partial_json.SEEDS))
def test_fuzz_partial_json_harness_on_its_seeds(name: str, whole: bool) -> None:
    fuzz_partial_json.TestOneInput(
        fuzz_partial_json.seed(fuzz_partial_json.SEEDS[name], whole=whole)
    )


def test_seeds_feed_the_text_they_are_meant_for() -> None:
    # A seed whose prefix no longer matches the harness would fuzz something else.
    for name, text in fuzz_partial_json.SEEDS.items():
        reader = _bytes.ByteReader(fuzz_partial_json.seed(text, whole=True))
        assert reader.byte() & 1
        assert fuzz_partial_json.DEPTHS[reader.int_below(len(fuzz_partial_json.DEPTHS))] == 128
        size = fuzz_partial_json.SIZES[reader.int_below(len(fuzz_partial_json.SIZES))]
        assert size == chunkwise.types.DEFAULT_MAX_EVENT_SIZE
        assert fuzz_partial_json.text_of(reader) == text, name


def test_the_harness_catches_a_broken_rule() -> None:
    # A harness that cannot fail is a defect: an outcome that differs is found.
    good = fuzz_partial_json.run(["[1, 2]"], "partial", 128, 100)
    other = fuzz_partial_json.run(["[1, 3]"], "partial", 128, 100)
    assert not fuzz_partial_json.same_outcome(good, other)
    assert not fuzz_partial_json.grows(("ab",), ("b",))
    assert not fuzz_partial_json.same(-0.0, 0.0)
    with pytest.raises(AssertionError):
        fuzz_partial_json.check_against_json("[1, 2]", (None, [1, 3], None), 128, 100)
    fuzz_partial_json.TestOneInput(b"")

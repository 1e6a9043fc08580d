"""chunkwise.PartialJSON: live values of JSON text, at every split, in both string modes.

The properties run over every document hypothesis makes, written every way
``json.dumps`` writes it, at every split: after each fragment the patches
replayed on a mirror give the snapshot, the snapshot is ``partial_json`` of
the text so far, it grew from the previous one by the rules, and the end is
``json.loads``.  The tables pin the hard cases.
"""

from __future__ import annotations

import json
import math
from typing import Any, Literal

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import chunkwise
from chunkwise._core.partial_json import DEFAULT_MAX_DEPTH
from chunkwise._core.payloads import parse_json
from helpers.json_values import grows, same_json
from helpers.reads import split_text
from helpers.strategies import json_texts

SETTINGS = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
MODES: tuple[Literal["partial", "whole"], ...] = ("partial", "whole")


def replay(
    text: str, fragments: list[str], strings: Literal["partial", "whole"]
) -> tuple[Any, list[Any]]:
    """Feed ``fragments``, checking every rule after each; the end value and the snapshots."""
    parser = chunkwise.PartialJSON(strings)
    mirror: Any = None
    snapshots: list[Any] = []
    fed = ""
    for fragment in fragments:
        patches = parser.feed(fragment)
        fed += fragment
        mirror = chunkwise.apply_patches(mirror, patches)
        value = parser.value
        assert same_json(value, mirror) or (value is None and mirror is None), (fed, patches)
        assert same_json(value, chunkwise.partial_json(fed, strings)) or value is None
        assert chunkwise.partial_json(fed, strings) is None or value is not None
        if snapshots and snapshots[-1] is not None:
            assert grows(snapshots[-1], value), (fed, snapshots[-1], value)
        assert all(p.op != "replace" for p in patches)  # no duplicate keys here
        snapshots.append(value)
    assert fed == text
    return parser.end(), snapshots


@SETTINGS
@given(text=json_texts, cuts=st.lists(st.integers(0, 400), max_size=12), data=st.data())
@example(text='"\\ud83d\\ude00"', cuts=[1, 2, 3, 7, 8, 9, 13], data=None)
@example(text='{"a": [-0.0, 1e-7, 12345678901234567890]}', cuts=[9, 10, 11, 12], data=None)
def test_every_split_every_mode_follows_the_rules(
    text: str, cuts: list[int], data: st.DataObject | None
) -> None:
    expected = json.loads(text)
    for strings in MODES:
        final, snapshots = replay(text, split_text(text, cuts), strings)
        assert same_json(final, expected)
        assert type(final) is type(expected)  # plain: dicts and lists
        if expected is not None and (
            not isinstance(expected, (int, float)) or isinstance(expected, bool)
        ):
            # A root number is shown only by end() (or a delimiter after it);
            # a root null is shown, as None, which is also "nothing yet".
            assert text.strip() == text or snapshots[-1] is not None


# Fewer examples than the others: each one feeds every character on its own,
# the slowest shape there is (every split is the next test's business).
@settings(SETTINGS, max_examples=100)
@given(text=json_texts)
def test_one_character_at_a_time_equals_one_piece(text: str) -> None:
    for strings in MODES:
        final, snapshots = replay(text, list(text), strings)
        assert same_json(final, json.loads(text))
        whole = chunkwise.PartialJSON(strings)
        whole.feed(text)
        assert same_json(whole.value, snapshots[-1]) or whole.value is None is snapshots[-1]


def test_every_single_split_of_a_hard_document() -> None:
    text = (
        ' {"s": "a\\u00e9\\ud83d\\ude00\\\\\\"\\/\\b\\f\\n\\r\\t\\ud800x", "n": [0, -0, -0.0, '
        '1.5e+3, 2E-2, 123456789012345678901234567890, 1e999], "l": [true, false, null], '
        '"o": {"": {}, "e": []}} '
    )
    for cut in range(len(text) + 1):
        for strings in MODES:
            final, _ = replay(text, [text[:cut], text[cut:]], strings)
            assert same_json(final, json.loads(text))


# --- tables of the hard cases --------------------------------------------------------------

# (prefix, snapshot in "partial" mode, snapshot in "whole" mode)
PREFIXES: list[tuple[str, Any, Any]] = [
    ("", None, None),
    ("  \n", None, None),
    ('"', "", None),
    ('"ab', "ab", None),
    ('"ab"', "ab", "ab"),
    ('"ab\\', "ab", None),
    ('"ab\\n', "ab\n", None),
    ('"ab\\u00', "ab", None),
    ('"ab\\u00e9', "abé", None),
    ('"\\ud83d', "", None),
    ('"\\ud83d\\', "", None),
    ('"\\ud83d\\ude0', "", None),
    ('"\\ud83d\\ude00', "😀", None),
    ('"\\ud83dx', "\ud83dx", None),
    ('"\\ud83d\\n', "\ud83d\n", None),
    ('"\\ud83d\\u0041', "\ud83dA", None),
    ('"\\ud83d\\ud83d', "\ud83d", None),
    ('"\\ud83d"', "\ud83d", "\ud83d"),
    ('"\\ude00\\ud83d"', "\ude00\ud83d", "\ude00\ud83d"),
    ("[", (), ()),
    ("[1", (), ()),
    ("[1 ", (1,), (1,)),
    ("[1,", (1,), (1,)),
    ("[1]", (1,), (1,)),
    ("[-", (), ()),
    ("[-0", (), ()),
    ("[-0,", (0,), (0,)),
    ("[-0.0,", (-0.0,), (-0.0,)),
    ("[1.", (), ()),
    ("[1e", (), ()),
    ("[1e-", (), ()),
    ("[1e5", (), ()),
    ("[1e5]", (100000.0,), (100000.0,)),
    ("[1e999,", (math.inf,), (math.inf,)),
    ("[-1e999,", (-math.inf,), (-math.inf,)),
    ("[t", (), ()),
    ("[tru", (), ()),
    ("[true", (True,), (True,)),
    ("[fals", (), ()),
    ("[false", (False,), (False,)),
    ("[null", (None,), (None,)),
    ("{", {}, {}),
    ('{"a', {}, {}),
    ('{"a"', {}, {}),
    ('{"a":', {}, {}),
    ('{"a": "', {"a": ""}, {}),
    ('{"a": "x', {"a": "x"}, {}),
    ('{"a": "x"', {"a": "x"}, {"a": "x"}),
    ('{"a": [', {"a": ()}, {"a": ()}),
    ('{"a": {', {"a": {}}, {"a": {}}),
    ('{"a": {"b": ["c', {"a": {"b": ("c",)}}, {"a": {"b": ()}}),
    ('{"a": 1', {}, {}),
    ('{"a": 1}', {"a": 1}, {"a": 1}),
    ("12", None, None),
    ("12 ", 12, 12),
    ("true", True, True),
    ("nul", None, None),
    ('[1, "x", [2], {"y": null}] ', (1, "x", (2,), {"y": None}), (1, "x", (2,), {"y": None})),
]


@pytest.mark.parametrize(("prefix", "partial", "whole"), PREFIXES)
def test_prefix_shows(prefix: str, partial: Any, whole: Any) -> None:
    for strings, expected in (("partial", partial), ("whole", whole)):
        value = chunkwise.partial_json(prefix, strings)  # type: ignore[arg-type]
        assert same_json(value, expected) or value is expected, (strings, value)
        # The same, fed one character at a time.
        parser = chunkwise.PartialJSON(strings)  # type: ignore[arg-type]
        for char in prefix:
            parser.feed(char)
        assert same_json(parser.value, expected) or parser.value is expected


# The edges of both surrogate ranges (high D800-DBFF, low DC00-DFFF) and one
# code point outside each.
HIGH_HALVES = (0xD7FF, 0xD800, 0xDBFF, 0xDC00)
LOW_HALVES = (0xDBFF, 0xDC00, 0xDFFF, 0xE000)


@pytest.mark.parametrize("low", LOW_HALVES, ids=hex)
@pytest.mark.parametrize("high", HIGH_HALVES, ids=hex)
def test_a_surrogate_pair_is_one_character_exactly_where_json_loads_says_at_every_split(
    high: int, low: int
) -> None:
    """Two escapes are one character exactly when the first is D800-DBFF and the second DC00-DFFF.

    Both ends included (``\\ud83d\\udfff`` is one character), as json.loads decodes them.
    """
    paired = 0xD800 <= high <= 0xDBFF and 0xDC00 <= low <= 0xDFFF
    for body in (f"\\u{high:04x}\\u{low:04x}", f"\\u{high:04X}\\u{low:04X}"):
        assert len(json.loads(f'"{body}"')) == (1 if paired else 2)  # the rule, per json.loads
        for text in (f'"{body}"', f'["a{body}b", "{body}"]', f'{{"{body}": "{body}x"}}'):
            expected = json.loads(text)
            for cut in range(len(text) + 1):
                for strings in MODES:
                    final, snapshots = replay(text, [text[:cut], text[cut:]], strings)
                    assert same_json(final, expected), (strings, cut, final)
                    assert same_json(snapshots[-1], expected), (strings, cut, snapshots[-1])


NUMBERS = ["0", "-0", "7", "-12", "1.5", "-0.0", "1e3", "1E+3", "-2.5e-3", "1" * 40, "4.9e-324"]


@pytest.mark.parametrize("number", NUMBERS)
def test_a_number_is_shown_once_a_delimiter_proves_it_complete(number: str) -> None:
    expected = json.loads(number)
    for opening, delimiters in (("[", " \t\n\r,]"), ('{"k": ', " \t\n\r,}")):
        key: Any = 0 if opening == "[" else "k"
        for cut in range(1, len(number) + 1):
            shown = chunkwise.partial_json(opening + number[:cut])
            assert len(shown) == 0, (number[:cut], shown)
        for delimiter in delimiters:
            shown = chunkwise.partial_json(opening + number + delimiter)
            assert same_json(shown[key], expected), (delimiter, shown)
    # At the root: a delimiter, or the end.
    assert chunkwise.partial_json(number) is None
    parser = chunkwise.PartialJSON()
    assert parser.feed(number) == ()
    assert same_json(parser.end(), expected)
    assert same_json(chunkwise.partial_json(number + " "), expected)
    assert chunkwise.PartialJSON().feed(number + "\n") == (chunkwise.Patch("add", (), expected),)


# Where a number may stand: (the text before it, what closes the value after it).
NUMBER_PLACES = [
    ("", ""),
    ("[", "]"),
    ("[true, ", "]"),
    ('{"a": ', "}"),
    ('{"a": "x", "b": ', "}"),
    ('{"a": [{"b": [', "]}]}"),
]
NUMBER_PLACE_IDS = ["root", "array", "array-later", "object", "object-later", "nested"]
NUMBER_SHAPES = ["0", "-0", "7", "12", "-345", "1.5", "-0.25", "12.75", "1e5", "-2E+10", "2.5e-3"]


@pytest.mark.parametrize(("opening", "closing"), NUMBER_PLACES, ids=NUMBER_PLACE_IDS)
@pytest.mark.parametrize("number", NUMBER_SHAPES)
def test_end_never_shows_an_unfinished_number_in_any_place(
    number: str, opening: str, closing: str
) -> None:
    """A number is shown only once a delimiter or end() proves it complete (``12`` may be ``123``).

    So when the text ends inside a container, end() raises where it ends and the
    snapshot stays the one from before the number began.
    """
    before = chunkwise.partial_json(opening)
    for cut in range(1, len(number) + 1):
        text = opening + number[:cut]
        parser = chunkwise.PartialJSON()
        parser.feed(opening)
        assert parser.feed(number[:cut]) == ()  # no patch shows any of it
        assert same_json(parser.value, before) or parser.value is before is None
        try:
            complete = json.loads(text)
        except ValueError:
            complete = None
            with pytest.raises(chunkwise.InvalidJSON) as info:
                parser.end()
            assert info.value.offset == len(text), (text, info.value)
            # end() refused the text: it showed nothing of the number either.
            assert same_json(parser.value, before) or parser.value is before is None, text
            with pytest.raises(chunkwise.InvalidJSON):
                parser.end()
        else:  # a root number the text's end proves complete
            assert not opening and same_json(parser.end(), complete), text
    # Closed, the same number is shown, as json.loads reads it.
    whole = opening + number + closing
    assert same_json(chunkwise.partial_json(whole + " "), json.loads(whole))


# (text, the offset of the first character that cannot be JSON)
INVALID: list[tuple[str, int]] = [
    ("", 0),
    ("   ", 3),
    ("Sure! Here is the JSON: {}", 0),
    ("{'a': 1}", 1),
    ("[1,]", 3),
    ("[,1]", 1),
    ("[1 2]", 3),
    ("[1}", 2),
    ('{"a"}', 4),
    ('{"a" 1}', 5),
    ('{"a":1,}', 7),
    ('{"a":1 "b":2}', 7),
    ("{,}", 1),
    ('{"a":1]', 6),
    ("[1]]", 3),
    ("[1] [2]", 4),
    ("[1]x", 3),
    ("01", 1),
    ("[01]", 2),
    ("-01", 2),
    ("-", 1),
    ("--1", 1),
    ("+1", 0),
    (".5", 0),
    ("1.", 2),
    ("1.e5", 2),
    ("1e", 2),
    ("1e+", 3),
    ("1ee", 2),
    ("0x10", 1),
    ("NaN", 0),
    ("[Infinity]", 1),
    ("-Infinity", 1),
    ("tru", 3),
    ("trux", 3),
    ("nulL", 3),
    ("[True]", 1),
    ('"abc', 4),
    ('"\\x"', 2),
    ('"\\u12g4"', 5),
    ('"\\U0041"', 2),
    ('"\\ud83d\\u12x4"', 11),
    ('"a\nb"', 2),
    ('"a\tb"', 2),
    ('"a\x00"', 2),
    ("[" * 5, 5),
    ("\ufeff[]", 0),
    ("1" * 5000, 0),
    ("[1, " + "2" * 4301 + "]", 4),
]


@pytest.mark.parametrize(("text", "offset"), INVALID)
def test_invalid_json_is_rejected_at_its_first_bad_character(text: str, offset: int) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - any of json's errors
        parse_json(text)
    for cut in sorted({0, 1, offset, offset + 1, len(text) // 2, len(text)}):
        cut = min(cut, len(text))
        parser = chunkwise.PartialJSON()
        with pytest.raises(chunkwise.InvalidJSON) as info:
            parser.feed(text[:cut])
            parser.feed(text[cut:])
            parser.end()
        error = info.value
        assert isinstance(error, ValueError) and isinstance(error, chunkwise.ChunkwiseError)
        assert error.offset == offset, (cut, error)
        # The snapshot is the last valid state: the text before the offending character.
        valid = chunkwise.partial_json(text[:offset])
        assert same_json(parser.value, valid) or parser.value is valid
        # The error stays: every later call raises it again.
        with pytest.raises(chunkwise.InvalidJSON) as repeated:
            parser.feed("1")
        assert repeated.value is error
        with pytest.raises(chunkwise.InvalidJSON) as repeated:
            parser.end()
        assert repeated.value is error
        assert parser.error is error


# Malformed numbers: (text, the offset of the first character no JSON number
# may have there; len(text) when only the text's end shows it).
MALFORMED_NUMBERS: list[tuple[str, int]] = [
    ("1e+-5", 3),
    ("1e-+5", 3),
    ("1E+-1", 3),
    ("1e--5", 3),
    ("1e+", 3),
    ("1e", 2),
    ("1ee5", 2),
    ("1e5e", 3),
    ("1e-e", 3),
    ("1e1.5", 3),
    ("1e+5+", 4),
    ("01", 1),
    ("00", 1),
    ("-01", 2),
    ("0x1", 1),
    ("-", 1),
    ("--1", 1),
    ("-.5", 1),
    ("-e5", 1),
    ("+1", 0),
    (".5", 0),
    ("1.", 2),
    ("-0.", 3),
    ("1.e5", 2),
    ("0.e1", 2),
    ("2.-1", 2),
    ("1.5.2", 3),
    ("1.0.", 3),
]


def _viable(text: str, opening: str, closing: str) -> bool:
    # json.loads' word on whether ``text`` can still become a number there:
    # every unfinished number becomes one with nothing, "0" or "1" after it.
    for tail in ("", "0", "1"):
        try:
            json.loads(opening + text + tail + closing)
        except ValueError:
            continue
        return True
    return False


@pytest.mark.parametrize(("opening", "closing"), NUMBER_PLACES, ids=NUMBER_PLACE_IDS)
@pytest.mark.parametrize(("number", "offset"), MALFORMED_NUMBERS)
def test_a_malformed_number_is_rejected_as_a_prefix_at_its_first_bad_character(
    number: str, offset: int, opening: str, closing: str
) -> None:
    """A number is checked against the grammar as it arrives: the error is at its first bad char.

    The same offset at every split, never a later one (``1e+-5`` fails at the ``-``).
    """
    # The table is json.loads': rejected, and the offset is its longest viable prefix.
    with pytest.raises(ValueError):  # noqa: PT011 - any of json's errors
        json.loads(opening + number + closing)
    assert max(i for i in range(len(number) + 1) if _viable(number[:i], opening, closing)) == offset
    text = opening + number + closing
    at = len(opening) + offset
    # Rejected as a prefix: the text up to the bad character is fine, with it not.
    chunkwise.PartialJSON().feed(text[:at])
    if at < len(text):
        with pytest.raises(chunkwise.InvalidJSON) as info:
            chunkwise.partial_json(text[: at + 1])
        assert info.value.offset == at
    for cut in range(len(text) + 1):
        parser = chunkwise.PartialJSON()
        with pytest.raises(chunkwise.InvalidJSON) as info:
            parser.feed(text[:cut])
            parser.feed(text[cut:])
            parser.end()
        assert info.value.offset == at, (cut, info.value)
        valid = chunkwise.partial_json(text[:at])
        assert same_json(parser.value, valid) or parser.value is valid is None


def test_the_patches_of_a_failing_fragment_are_kept() -> None:
    parser = chunkwise.PartialJSON()
    mirror = chunkwise.apply_patches(None, parser.feed('{"a": "x'))
    with pytest.raises(chunkwise.InvalidJSON):
        parser.feed('yz", "b": [1, 2, ?')
    mirror = chunkwise.apply_patches(mirror, parser.error_patches)
    assert mirror == {"a": "xyz", "b": [1, 2]}
    assert same_json(parser.value, mirror)


def test_error_equals_for_any_split() -> None:
    text = '{"a": [1, 2, tru "'
    errors = set()
    for cut in range(len(text) + 1):
        parser = chunkwise.PartialJSON()
        with pytest.raises(chunkwise.InvalidJSON) as info:
            parser.feed(text[:cut])
            parser.feed(text[cut:])
        errors.add(info.value)
    assert len(errors) == 1
    assert errors.pop().offset == 16


# --- limits -------------------------------------------------------------------------------


def test_nesting_up_to_the_depth_limit_is_fine_and_past_it_is_invalid() -> None:
    depth = DEFAULT_MAX_DEPTH
    assert depth == 128
    deepest = "[" * depth + "]" * depth
    value = chunkwise.PartialJSON()
    value.feed(deepest)
    assert value.end() == json.loads(deepest)
    parser = chunkwise.PartialJSON()
    with pytest.raises(chunkwise.InvalidJSON, match="max_depth") as info:
        parser.feed('{"a":' * depth + "[")
    assert info.value.offset == 5 * depth
    snapshot = parser.value
    for _ in range(depth - 1):
        assert list(snapshot) == ["a"]
        snapshot = snapshot["a"]
    assert snapshot == {}
    small = chunkwise.PartialJSON(max_depth=2)
    small.feed("[[")
    with pytest.raises(chunkwise.InvalidJSON) as info:
        small.feed("[")
    assert info.value.offset == 2


def test_the_size_limit_stops_at_the_same_character_for_any_split() -> None:
    text = '["ab", "cd", "ef"]'
    for cut in range(len(text) + 1):
        parser = chunkwise.PartialJSON(max_size=10)
        with pytest.raises(chunkwise.InvalidJSON, match="max_size") as info:
            parser.feed(text[:cut])
            parser.feed(text[cut:])
        assert info.value.offset == 10
        assert parser.value == ("ab", "cd")
    exact = chunkwise.PartialJSON(max_size=len(text))
    exact.feed(text)
    assert exact.end() == ["ab", "cd", "ef"]
    assert chunkwise.PartialJSON().max_size == chunkwise.types.DEFAULT_MAX_EVENT_SIZE


def test_integers_as_long_as_json_loads_takes() -> None:
    text = "[" + "9" * 4300 + "]"
    parser = chunkwise.PartialJSON()
    for i in range(0, len(text), 7):
        parser.feed(text[i : i + 7])
    assert parser.end() == json.loads(text)


# --- duplicate keys ---------------------------------------------------------------------------


DUPLICATES: list[tuple[str, list[chunkwise.Patch]]] = [
    (
        '{"a":1,"a":2}',
        [
            chunkwise.Patch("add", (), {}),
            chunkwise.Patch("add", ("a",), 1),
            chunkwise.Patch("replace", ("a",), 2),
        ],
    ),
    (
        '{"a":"x","a":"yy"}',
        [
            chunkwise.Patch("add", (), {}),
            chunkwise.Patch("add", ("a",), ""),
            chunkwise.Patch("append", ("a",), "x"),
            chunkwise.Patch("replace", ("a",), "yy"),
        ],
    ),
    (
        '{"a":1,"b":2,"a":{"c":[1,{"d":3,"d":4}]}}',
        [
            chunkwise.Patch("add", (), {}),
            chunkwise.Patch("add", ("a",), 1),
            chunkwise.Patch("add", ("b",), 2),
            chunkwise.Patch("replace", ("a",), {"c": (1, {"d": 4})}),
        ],
    ),
    (
        '[{"a":[],"a":[[]]}]',
        [
            chunkwise.Patch("add", (), []),
            chunkwise.Patch("add", (0,), {}),
            chunkwise.Patch("add", (0, "a"), []),
            chunkwise.Patch("replace", (0, "a"), ((),)),
        ],
    ),
]


@pytest.mark.parametrize(("text", "patches"), DUPLICATES)
def test_duplicate_keys_are_replaced_once_the_later_value_is_complete(
    text: str, patches: list[chunkwise.Patch]
) -> None:
    expected = json.loads(text)
    parser = chunkwise.PartialJSON()
    got: list[chunkwise.Patch] = []
    mirror: Any = None
    previous: Any = None
    for char in text:
        new = parser.feed(char)
        got += new
        mirror = chunkwise.apply_patches(mirror, new)
        assert same_json(parser.value, mirror)
        if previous is not None and not any(p.op == "replace" for p in new):
            assert grows(previous, parser.value)
        previous = parser.value
    assert got == patches
    assert same_json(parser.end(), expected)
    top = parser.value if isinstance(expected, dict) else parser.value[0]
    assert list(top) == list(expected if isinstance(expected, dict) else expected[0])


# --- snapshots are read-only and never change -----------------------------------------------


def test_snapshots_are_read_only_and_old_ones_never_change() -> None:
    parser = chunkwise.PartialJSON()
    parser.feed('{"list": [1, {"x": "ab')
    old = parser.value
    with pytest.raises(TypeError):
        old["new"] = 1
    with pytest.raises(TypeError):
        old["list"][1]["x"] = "changed"
    with pytest.raises((TypeError, AttributeError)):
        old["list"].append(2)
    parser.feed('c"}, 3], "more": true}')
    assert same_json(old, {"list": [1, {"x": "ab"}]})
    assert same_json(parser.value, {"list": [1, {"x": "abc"}, 3], "more": True})
    # Unchanged subtrees are shared between snapshots; reading twice costs nothing.
    assert parser.value is parser.value
    parser = chunkwise.PartialJSON()
    parser.feed('{"done": {"a": [1, 2]}, "open": [')
    first = parser.value
    parser.feed("3, ")
    assert parser.value["done"] is first["done"]
    assert parser.value["open"] is not first["open"]


def test_a_replace_patch_value_is_read_only_and_apply_patches_copies_it() -> None:
    parser = chunkwise.PartialJSON()
    patches = parser.feed('{"a": 1, "a": {"b": [1]}}')
    replace = patches[-1]
    with pytest.raises(TypeError):
        replace.value["c"] = 1
    mirror = chunkwise.apply_patches(None, patches)
    mirror["a"]["b"].append(2)
    assert replace.value == {"b": (1,)}


# --- the public face ------------------------------------------------------------------------


def test_done_end_and_misuse() -> None:
    parser = chunkwise.PartialJSON("whole")
    assert parser.strings == "whole" and not parser.done and parser.value is None
    parser.feed(' {"a": "b"')
    assert not parser.done
    parser.feed("} \n")
    assert parser.done
    assert parser.end() == {"a": "b"} == parser.end()
    with pytest.raises(chunkwise.LocalProtocolError):
        parser.feed("")
    with pytest.raises(TypeError):
        chunkwise.PartialJSON().feed(b"[]")
    with pytest.raises(ValueError, match="strings"):
        chunkwise.PartialJSON("some")
    with pytest.raises(ValueError, match="max_depth must be an int >= 1, not 0"):
        chunkwise.PartialJSON(max_depth=0)
    assert chunkwise.PartialJSON().feed("") == ()


def test_patches_of_one_feed_are_merged_per_string() -> None:
    parser = chunkwise.PartialJSON()
    assert parser.feed('{"a": "x\\n') == (
        chunkwise.Patch("add", (), {}),
        chunkwise.Patch("add", ("a",), ""),
        chunkwise.Patch("append", ("a",), "x\n"),
    )
    assert parser.feed("y") == (chunkwise.Patch("append", ("a",), "y"),)
    assert parser.feed("\\u00") == ()
    assert parser.feed('e9", "b": ["') == (
        chunkwise.Patch("append", ("a",), "é"),
        chunkwise.Patch("add", ("b",), []),
        chunkwise.Patch("add", ("b", 0), ""),
    )


def test_apply_patches_refuses_patches_that_do_not_fit() -> None:
    with pytest.raises(ValueError, match="does not fit"):
        chunkwise.apply_patches({}, [chunkwise.Patch("append", ("a",), "x")])
    with pytest.raises(ValueError, match="index 3"):
        chunkwise.apply_patches([], [chunkwise.Patch("add", (3,), 1)])
    assert chunkwise.apply_patches("ab", [chunkwise.Patch("append", (), "c")]) == "abc"

"""PartialJSON's fast paths: a fragment that only extends the open string, or a number's digits.

``feed()`` reads such a fragment without running the state machine; these
tests pin the edges where it must not (an escape or a surrogate pending, a
quote, a control character, a leading zero, the size limit, after an error or
:meth:`~chunkwise.PartialJSON.end`), and check that fragments of every width
give what the text fed in one piece gives.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import pytest

import chunkwise
from helpers.json_values import same_json

P = chunkwise.Patch

# Text that keeps the parser inside strings and numbers across fragments.
DOCUMENTS = [
    '{"a": "plain text, long enough for many fragments", "b": [12345678, -0.25e+10]}',
    '["x\\\\y\\"z\\n", "\\u00e9t\\u00E9 \\ud83d\\ude00 \\ud800 lone", "\u00e9\U0001f600 \u2028"]',
    '"a root string with a \\/ and a \\\\ at the end \\\\"',
    "[0, -0, 10, 1234567890123456789012345678901234567890, 1.000001, 2e-0003, 3E+45]",
    '{"name": "caf\\u00e9", "score": 0.8841197954362969, "ok": true, "id": 12}',
]


def fed_in_fragments(
    text: str, width: int, strings: Literal["partial", "whole"]
) -> tuple[Any, Any]:
    """Feed ``text`` ``width`` characters at a time, checking each step; the last snapshot, end."""
    parser = chunkwise.PartialJSON(strings)
    mirror: Any = None
    for start in range(0, len(text), width):
        mirror = chunkwise.apply_patches(mirror, parser.feed(text[start : start + width]))
        value = parser.value
        expected = chunkwise.partial_json(text[: start + width], strings)
        assert same_json(value, expected) or value is expected, (start, value, expected)
        assert same_json(mirror, value) or mirror is value is None, (start, mirror, value)
    return parser.value, parser.end()


@pytest.mark.parametrize("text", DOCUMENTS)
@pytest.mark.parametrize("strings", ["partial", "whole"])
def test_fragments_of_every_width_equal_the_text_fed_whole(
    text: str, strings: Literal["partial", "whole"]
) -> None:
    whole = chunkwise.PartialJSON(strings)
    whole.feed(text)
    for width in range(1, 12):
        snapshot, end = fed_in_fragments(text, width, strings)
        assert same_json(snapshot, whole.value) or snapshot is whole.value
        assert end == json.loads(text)


# (fragments, the patches of each)
EDGES: list[tuple[list[str], list[tuple[Any, ...]]]] = [
    # A lone backslash at a fragment's end: the next fragment starts an escape.
    (
        ['{"a": "', "xy\\", "nab"],
        [
            (P("add", (), {}), P("add", ("a",), "")),
            (P("append", ("a",), "xy"),),
            (P("append", ("a",), "\nab"),),
        ],
    ),
    (
        ['"', "\\", "\\", "cd"],
        [(P("add", (), ""),), (), (P("append", (), "\\"),), (P("append", (), "cd"),)],
    ),
    # A \u escape split: its hex digits are no string text.
    (
        ['"ab\\u', "00e9", "zz"],
        [
            (P("add", (), ""), P("append", (), "ab")),
            (P("append", (), "é"),),
            (P("append", (), "zz"),),
        ],
    ),
    (
        ['"\\u0', "0", "e9", "ab"],
        [(P("add", (), ""),), (), (P("append", (), "é"),), (P("append", (), "ab"),)],
    ),
    # A surrogate pair split, and a high surrogate left alone by plain text.
    (
        ['"\\ud83d', "\\ude00", "ab"],
        [(P("add", (), ""),), (P("append", (), "😀"),), (P("append", (), "ab"),)],
    ),
    (['"\\ud83d', "abc"], [(P("add", (), ""),), (P("append", (), "\ud83dabc"),)]),
    # A quote at a fragment's start and at its end.
    (
        ['["ab', '"', ', "cd'],
        [
            (P("add", (), []), P("add", (0,), ""), P("append", (0,), "ab")),
            (),
            (P("add", (1,), ""), P("append", (1,), "cd")),
        ],
    ),
    (
        ['["ab', 'cd"', "]"],
        [
            (P("add", (), []), P("add", (0,), ""), P("append", (0,), "ab")),
            (P("append", (0,), "cd"),),
            (),
        ],
    ),
    # Printable or not, any character but a quote, a backslash or a control one is text.
    (
        ['{"k": "', "\u2028\u00e9", "\U0001f600\u200d", "\x7f"],
        [
            (P("add", (), {}), P("add", ("k",), "")),
            (P("append", ("k",), "\u2028é"),),
            (P("append", ("k",), "😀\u200d"),),
            (P("append", ("k",), "\x7f"),),
        ],
    ),
    # An empty fragment changes nothing.
    (['"ab', "", "c"], [(P("add", (), ""), P("append", (), "ab")), (), (P("append", (), "c"),)]),
    # Digits extend a number, shown once delimited.
    (["[12", "34", "56", "]"], [(P("add", (), []),), (), (), (P("add", (0,), 123456),)]),
    (
        ["[-", "12", ".", "5", "e", "10", ","],
        [(P("add", (), []),), (), (), (), (), (), (P("add", (0,), -12.5e10),)],
    ),
    (["[1.0", "25", "E+", "02", " "], [(P("add", (), []),), (), (), (), (P("add", (0,), 102.5),)]),
]


@pytest.mark.parametrize(("fragments", "patches"), EDGES)
def test_the_patches_at_the_fast_paths_edges(
    fragments: list[str], patches: list[tuple[Any, ...]]
) -> None:
    parser = chunkwise.PartialJSON()
    assert [parser.feed(fragment) for fragment in fragments] == patches


def test_whole_mode_strings_show_nothing_until_closed() -> None:
    parser = chunkwise.PartialJSON("whole")
    assert parser.feed('{"a": "x') == (P("add", (), {}),)
    assert parser.feed("yz") == ()
    assert parser.feed('w"') == (P("add", ("a",), "xyzw"),)


# (fragments, the offset of the error)
FAILURES: list[tuple[list[str], int]] = [
    (['"ab', "c\td"], 4),  # a control character
    (['"ab', "\x00"], 3),
    (['"ab', "cd\x1f"], 5),
    (["[0", "12"], 2),  # a leading zero
    (["[-0", "1"], 3),
    (["[1", "\u0663"], 2),  # a digit, but not an ASCII one
    (["[1.5", "\u0663"], 4),
    (['"ab\\u', "00g0"], 7),  # a \u escape's non-hex digit
]


@pytest.mark.parametrize(("fragments", "offset"), FAILURES)
def test_what_the_fast_paths_must_not_take_is_rejected_where_it_is(
    fragments: list[str], offset: int
) -> None:
    parser = chunkwise.PartialJSON()
    with pytest.raises(chunkwise.InvalidJSON) as info:
        for fragment in fragments:
            parser.feed(fragment)
    assert info.value.offset == offset
    with pytest.raises(chunkwise.InvalidJSON) as again:
        parser.feed("ab")  # what a fast path would take, had the error not stopped the parser
    assert again.value is info.value


@pytest.mark.parametrize("opening", ['"abc', "[123"])
def test_the_size_limit_holds_on_the_fast_paths(opening: str) -> None:
    for size in (7, 8, 9):
        parser = chunkwise.PartialJSON(max_size=size)
        parser.feed(opening)  # 4 characters
        if size >= 8:
            parser.feed(opening[1:] + opening[1])  # 4 more: exactly 8
            continue
        with pytest.raises(chunkwise.InvalidJSON, match="max_size") as info:
            parser.feed(opening[1:] + opening[1])
        assert info.value.offset == 7
        if opening.startswith('"'):
            assert parser.error_patches == (P("append", (), "abc"),)
            assert parser.value == "abcabc"


def test_feed_after_end_of_a_root_number_is_misuse() -> None:
    parser = chunkwise.PartialJSON()
    assert parser.feed("12") == ()
    assert parser.end() == 12
    with pytest.raises(chunkwise.LocalProtocolError):
        parser.feed("34")
    assert parser.end() == 12

"""Fuzz :class:`chunkwise.PartialJSON`: arbitrary text, JSON-shaped or not, arbitrary fragments.

Run for as long as you like (needs ``pip install atheris``)::

    python fuzz/fuzz_partial_json.py -max_total_time=3600 fuzz/corpus/partial_json

What a finding means -- :func:`TestOneInput` raises when:

* ``feed()``/``end()`` raise anything but :class:`~chunkwise.InvalidJSON`;
* the patches of a fragment, applied to a mirror, do not give the snapshot;
* a snapshot does not grow from the one before (keys kept, arrays and
  strings extended, nothing else changed) without a ``"replace"`` patch;
* the final snapshot, the end value or the error (its offset and message)
  depend on how the text was split (one piece, the fuzzer's fragments, one
  character at a time);
* the end value is not :func:`json.loads` of the text bit for bit, or the
  text is rejected although ``json.loads`` (chunkwise's, without ``NaN``)
  takes it within the limits, or accepted although it does not;
* after an error, the snapshot is not ``partial_json`` of the text before
  the offending character.

The test suite runs :func:`TestOneInput` on a few hundred inputs and on the
seeds without atheris (tests/sansio/test_partial_json_fuzz.py).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Literal

sys.path.insert(0, str(Path(__file__).parent))

from _bytes import MAX_BODY, ByteReader, JsonShapes, fuzz_main

import chunkwise

#: Nesting limits the fuzzer picks from (small ones are reached often).
DEPTHS = (1, 2, 5, 128)
#: Size limits (characters) the fuzzer picks from.
SIZES = (1, 16, 1000, chunkwise.types.DEFAULT_MAX_EVENT_SIZE)
#: Pieces of JSON text glued together in raw mode.
TOKENS = (
    "{", "}", "[", "]", ",", ":", " ", "\n", '"', '"a"', '"\\', "\\u", "\\ud83d", "\\ude00",
    "\\n", "00", "-", "0", "1", "9", ".", "e", "E", "+", "true", "false", "null", "tr", "NaN",
    "\x00", "\x1f", "é", "😀", "\ud800", '{"a":', '{"a":1,"a":', "1e999", "-0.0",
)  # fmt: skip
SHAPES = JsonShapes(
    strings=("", "a", "é😀", '"\\', "\ud800", "\x00\n", "x" * 40),
    keys=("a", "b", "", "é"),
)


def text_of(reader: ByteReader) -> str:
    """A text: JSON written by json.dumps (perhaps damaged), or tokens glued at random."""
    mode = reader.byte() % 4
    if mode == 0:
        raw = reader.take(reader.int_below(MAX_BODY))
        return raw.decode("utf-8", "surrogateescape")
    if mode == 1:
        return "".join(str(reader.choice(TOKENS)) for _ in range(reader.int_below(200)))
    value = SHAPES.value(reader, 0)
    text = json.dumps(value, ensure_ascii=bool(reader.byte() & 1), indent=reader.byte() % 3 or None)
    if mode == 3 and text:  # damaged: a token put somewhere
        at = reader.int_below(len(text) + 1)
        text = text[:at] + str(reader.choice(TOKENS)) + text[at:]
    return text


def fragments_of(reader: ByteReader, text: str) -> list[str]:
    pieces: list[str] = []
    pos = 0
    while pos < len(text):
        size = reader.byte() % 33
        pieces.append(text[pos : pos + size])
        pos += size
        if reader.remaining == 0:
            pieces.append(text[pos:])
            break
    return pieces


def same(a: Any, b: Any) -> bool:
    """Bit for bit (types, float bits, key order); mappings match dicts, tuples lists."""
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, tuple | list) and isinstance(b, tuple | list):
        return len(a) == len(b) and all(map(same, a, b))
    if type(a) is not type(b):
        return False
    return a.hex() == b.hex() if isinstance(a, float) else bool(a == b)


def grows(old: Any, new: Any) -> bool:
    if isinstance(old, str):
        return isinstance(new, str) and new.startswith(old)
    if isinstance(old, tuple):
        return isinstance(new, tuple) and all(map(grows, old, new[: len(old)]))
    if isinstance(old, dict):
        return (
            isinstance(new, dict)
            and list(new)[: len(old)] == list(old)
            and all(grows(old[k], new[k]) for k in old)
        )
    return same(old, new)


def run(fragments: list[str], strings: Any, depth: int, size: int) -> tuple[Any, ...]:
    parser = chunkwise.PartialJSON(strings, max_depth=depth, max_size=size)
    mirror: Any = None
    previous: Any = None
    try:
        for fragment in fragments:
            patches = parser.feed(fragment)
            mirror = chunkwise.apply_patches(mirror, patches)
            value = parser.value
            assert same(value, mirror) or value is mirror is None, (fragment, patches)
            if previous is not None and all(p.op != "replace" for p in patches):
                assert grows(previous, value), (previous, value)
            previous = value
        return parser.value, parser.end(), None
    except chunkwise.InvalidJSON as exc:
        mirror = chunkwise.apply_patches(mirror, parser.error_patches)
        assert same(parser.value, mirror) or parser.value is mirror is None
        return parser.value, None, (exc.offset, str(exc))


def depth_of(value: Any) -> int:
    deepest, todo = 0, [(value, 0)]
    while todo:
        item, level = todo.pop()
        if isinstance(item, dict | list):
            level += 1
            deepest = max(deepest, level)
            todo += [
                (child, level) for child in (item.values() if isinstance(item, dict) else item)
            ]
    return deepest


def check_against_json(text: str, outcome: tuple[Any, ...], depth: int, size: int) -> None:
    _, end, error = outcome
    try:
        expected = json.loads(text, parse_constant=_reject)
    except (ValueError, RecursionError):
        assert error is not None, "accepted text json.loads rejects"
        return
    if error is None:
        assert same(end, expected), (end, expected)
        assert type(end) is type(expected)
        return
    over = len(text) > size or depth_of(expected) > depth
    assert over, f"rejected JSON within the limits: {error}"


def _reject(name: str) -> Any:
    raise ValueError(name)


def TestOneInput(data: bytes) -> None:
    reader = ByteReader(data)
    strings: Literal["partial", "whole"] = "whole" if reader.byte() & 1 else "partial"
    depth = int(reader.choice(DEPTHS))  # type: ignore[call-overload]
    size = int(reader.choice(SIZES))  # type: ignore[call-overload]
    text = text_of(reader)
    fragments = fragments_of(reader, text)
    assert "".join(fragments) == text
    whole = run([text], strings, depth, size)
    assert same_outcome(whole, run(fragments, strings, depth, size))
    assert same_outcome(whole, run(list(text), strings, depth, size))
    check_against_json(text, whole, depth, size)
    if whole[2] is not None:
        offset = whole[2][0]
        before = chunkwise.PartialJSON(strings, max_depth=depth, max_size=size)
        before.feed(text[:offset])
        assert same(whole[0], before.value) or whole[0] is before.value is None


#: Hard cases, as texts; :func:`seed` makes each a whole input (raw mode).
SEEDS: dict[str, str] = {
    "surrogate-pair": '["\\ud83d\\ude00", "\\ud83d", "\\ud83d\\u0041", "\\ude00\\ud83d"]',
    "numbers": "[0, -0, -0.0, 1.5e+3, 2E-2, 1e999, -1e999, 4.9e-324, " + "9" * 300 + "]",
    "huge-integer": "[" + "7" * 5000 + "]",
    "duplicate-keys": '{"a": 1, "b": {"a": [1], "a": {"c": "d"}}, "a": [2, {"a": 3, "a": 4}]}',
    "deep": '{"a":' * 200 + "1" + "}" * 200,
    "prose-first": 'Sure! Here is the JSON: {"a": 1}',
    "nan": '{"a": NaN}',
    "control-character": '["a\nb", "c\x00"]'.replace("\\x00", "\x00"),
}


def seed(text: str, *, whole: bool = False) -> bytes:
    """The input that feeds ``text`` with the default limits, the fuzzer's reads after it."""
    body = text.encode("utf-8", "surrogateescape")
    assert len(body) < MAX_BODY
    depth, size = DEPTHS.index(128), SIZES.index(chunkwise.types.DEFAULT_MAX_EVENT_SIZE)
    prefix = bytes([whole]) + depth.to_bytes(2, "big") + size.to_bytes(2, "big") + b"\x00"
    return prefix + len(body).to_bytes(2, "big") + body + bytes(range(1, 33))


def same_outcome(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    return (same(a[0], b[0]) or a[0] is b[0] is None) and same(a[1], b[1]) and a[2] == b[2]


if __name__ == "__main__":  # pragma: no cover - needs atheris
    fuzz_main(TestOneInput)

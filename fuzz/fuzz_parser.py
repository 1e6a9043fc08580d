"""Fuzz :class:`chunkwise.chat.Parser`: raw bytes, and JSON-shaped chunks as SSE.

Run for as long as you like (needs ``pip install atheris``)::

    python fuzz/fuzz_parser.py -max_total_time=3600 fuzz/corpus/parser

The first input byte picks the mode:

* *raw*: the rest is the response body, bytes as they come;
* *chunks*: the rest drives a generator of chunk-shaped JSON documents (the
  keys a chat-completion chunk has, with values of every JSON type, valid or
  not), written as an SSE body with ``[DONE]``, error events and comments mixed
  in, with a chosen line ending.

Either way the body is parsed in one read, in reads of sizes the fuzzer chose,
and byte by byte.  :func:`TestOneInput` raises when:

* ``feed()`` or ``end()`` raises anything at all (the parser must not raise);
* the three parses differ in any event or in the result (split invariance);
* the events do not end with exactly one terminal event whose result is the
  final result, or the status is not complete / incomplete / failed;
* the streamed deltas do not add up to the result (content, tool arguments).

Small ``max_event_size`` values are among the choices, so the
:class:`~chunkwise.errors.EventTooLarge` path (the bound on memory) is exercised too.

The test suite runs :func:`TestOneInput` on a few hundred inputs without
atheris (tests/test_fuzz.py).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from _bytes import MAX_BODY, ByteReader, JsonShapes, fuzz_main, split_reads
from _parsing import check_end, feed_all

import chunkwise

LIMITS = (64, 512, chunkwise.types.DEFAULT_MAX_EVENT_SIZE)

_KEYS: tuple[object, ...] = ("id", "model", "created", "choices", "usage", "error", "object")
_CHOICE_KEYS: tuple[object, ...] = ("index", "delta", "finish_reason", "logprobs", "message")
_DELTA_KEYS: tuple[object, ...] = (
    "role",
    "content",
    "refusal",
    "reasoning",
    "reasoning_content",
    "tool_calls",
)
_CALL_KEYS: tuple[object, ...] = ("index", "id", "type", "function")
_FUNCTION_KEYS: tuple[object, ...] = ("name", "arguments")
_STRINGS: tuple[object, ...] = (
    "",
    "a",
    "stop",
    "length",
    "tool_calls",
    "error",
    "assistant",
    "call_1",
    '{"x": ',
    "1}",
    "é😀",
    "\u2028",
    "\x00",
)


_SHAPES = JsonShapes(_STRINGS, _KEYS)
_scalar = _SHAPES.scalar
_value = _SHAPES.value
_mapping = _SHAPES.mapping


def chunk(reader: ByteReader) -> Any:
    """One chunk-shaped JSON value: usually a plausible chunk, sometimes not."""

    def function(key: str) -> Any:
        return _value(reader, 2) if reader.int_below(4) == 0 else reader.choice(_STRINGS)

    def call(key: str) -> Any:
        if key == "function":
            return _mapping(reader, _FUNCTION_KEYS, function)
        if key == "index":
            return reader.int_below(4) if reader.byte() & 3 else _scalar(reader)
        return reader.choice(_STRINGS) if reader.byte() & 1 else _scalar(reader)

    def delta(key: str) -> Any:
        if key == "tool_calls":
            if reader.int_below(5) == 0:
                return _value(reader, 1)
            return [_mapping(reader, _CALL_KEYS, call) for _ in range(reader.int_below(3))]
        return reader.choice(_STRINGS) if reader.byte() & 1 else _scalar(reader)

    def choice(key: str) -> Any:
        if key in ("delta", "message"):
            return _mapping(reader, _DELTA_KEYS, delta)
        if key == "index":
            return reader.int_below(3) if reader.byte() & 3 else _scalar(reader)
        if key == "finish_reason":
            return None if reader.byte() & 1 else reader.choice(_STRINGS)
        return _value(reader, 2)

    def top(key: str) -> Any:
        if key == "choices":
            if reader.int_below(6) == 0:
                return _value(reader, 1)
            return [_mapping(reader, _CHOICE_KEYS, choice) for _ in range(reader.int_below(3))]
        if key == "usage":
            return {"prompt_tokens": reader.int_below(9), "total_tokens": reader.int_below(9)}
        if key == "error":
            return {"message": _scalar(reader), "code": _scalar(reader)}
        return _scalar(reader)

    return _mapping(reader, _KEYS, top)


def chunks_body(reader: ByteReader) -> bytes:
    """An SSE body of chunk-shaped events, with the odd [DONE], error and comment."""
    eol = str(reader.choice(("\n", "\r\n", "\r")))
    lines: list[str] = []
    for _ in range(reader.int_below(12)):
        extra = reader.int_below(16)
        if extra == 0:
            lines.append(f"data: [DONE]{eol}{eol}")
        elif extra == 1:
            lines.append(f"event: error{eol}data: {json.dumps(chunk(reader))}{eol}{eol}")
        elif extra == 2:
            lines.append(f": keep-alive{eol}")
        else:
            text = json.dumps(chunk(reader), ensure_ascii=bool(reader.byte() & 1))
            lines.append(f"data: {text}{eol}{eol}")
        if reader.remaining == 0:
            break
    if reader.byte() & 1:
        lines.append(f"data: [DONE]{eol}{eol}")
    return "".join(lines).encode()


def parse(reads: list[bytes], limit: int) -> tuple[list[chunkwise.Event], chunkwise.chat.Result]:
    return feed_all(chunkwise.chat.Parser(max_event_size=limit), reads)


def check(events: list[chunkwise.Event], result: chunkwise.chat.Result, limit: int) -> None:
    check_end(events, result)
    # The deltas add up to the result, for every choice.
    for choice in result.choices:
        text = "".join(
            e.text
            for e in events
            if type(e) is chunkwise.chat.TextDelta and e.choice_index == choice.index
        )
        assert text == choice.content, (text, choice.content)
        for call in choice.tool_calls:
            fragments = "".join(
                e.fragment
                for e in events
                if type(e) is chunkwise.chat.ToolCallArgumentsDelta
                and e.choice_index == choice.index
                and e.tool_index == call.index
            )
            assert fragments == call.arguments, (fragments, call.arguments)


def TestOneInput(data: bytes) -> None:
    reader = ByteReader(data)
    mode = reader.byte()
    limit = int(reader.choice(LIMITS))  # type: ignore[call-overload]
    body = reader.take(reader.int_below(MAX_BODY)) if mode & 1 else chunks_body(reader)
    reads = split_reads(reader, body)
    whole = parse([body], limit)
    check(*whole, limit)
    assert parse(reads, limit) == whole
    assert parse([body[i : i + 1] for i in range(len(body))], limit) == whole


if __name__ == "__main__":  # pragma: no cover - needs atheris
    fuzz_main(TestOneInput)

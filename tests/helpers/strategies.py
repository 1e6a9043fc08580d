"""Hypothesis strategies: SSE streams and reads of them, JSON shaped like chunks, JSON
documents, and whole chat, legacy completion and Responses bodies."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs
from hypothesis import strategies as st

from helpers.bodies import (
    call_events,
    completion_chunk,
    numbered,
    response_object,
    response_usage,
    text_choice,
)
from helpers.decoders import BOM
from helpers.reads import as_buffers, split_at

# --- chunks ----------------------------------------------------------------------------

#: Any short text that UTF-8 can encode (no lone surrogates).
any_text = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]),
    min_size=1,
    max_size=12,
)
# JSON has no NaN or infinity: json.dumps would write text the parser rejects.
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | any_text,
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.sampled_from(["a", "index", "delta", "content"]), children, max_size=3)
    ),
    max_leaves=8,
)
delta_values = st.fixed_dictionaries(
    {},
    optional={
        "role": json_values,
        "content": json_values,
        "refusal": json_values,
        "reasoning": json_values,
        "reasoning_content": json_values,
        "tool_calls": st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    "index": st.none() | st.integers(-1, 3) | any_text,
                    "id": st.none() | st.sampled_from(["", "a", "b"]),
                    "type": json_values,
                    "function": st.fixed_dictionaries(
                        {}, optional={"name": json_values, "arguments": json_values}
                    )
                    | json_values,
                },
            )
            | json_values,
            max_size=3,
        )
        | json_values,
        "audio": st.fixed_dictionaries(
            {},
            optional={k: json_values for k in ("id", "data", "transcript", "expires_at")},
        )
        | json_values,
        "function_call": st.fixed_dictionaries(
            {}, optional={"name": json_values, "arguments": json_values}
        )
        | json_values,
    },
)
chunk_values = st.fixed_dictionaries(
    {},
    optional={
        "id": json_values,
        "model": json_values,
        "created": json_values,
        "usage": json_values,
        "error": st.none() | json_values,
        "choices": st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    "index": st.integers(0, 2) | json_values,
                    "delta": delta_values | json_values,
                    "finish_reason": st.none()
                    | st.sampled_from(["stop", "", "length"])
                    | json_values,
                    "logprobs": json_values,
                    "stop_reason": json_values,
                },
            )
            | json_values,
            max_size=3,
        )
        | json_values,
        "service_tier": json_values,
    },
)


# --- JSON documents (chunkwise.PartialJSON) -------------------------------------------

# Text with every kind of character: escapes (ensure_ascii), astral characters
# (surrogate pairs once escaped), control characters, quotes and backslashes.
_json_text = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"])
    | st.sampled_from(['"', "\\", "/", "\n", "\x00", "\x1f", "\u2028", "😀", "é"]),
    max_size=10,
)
json_documents = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(-(10**40), 10**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _json_text,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(_json_text, children, max_size=4)
    ),
    max_leaves=12,
)
json_texts = st.builds(
    lambda value, ascii_only, indent, lead, trail: (
        lead + json.dumps(value, ensure_ascii=ascii_only, indent=indent) + trail
    ),
    json_documents,
    st.booleans(),
    st.sampled_from([None, 0, 2]),
    st.sampled_from(["", " ", "\n\t "]),
    st.sampled_from(["", " ", "\r\n"]),
)


# --- Responses streams ----------------------------------------------------------------

#: Short texts for Responses streams: any UTF-8 text, with astral characters,
#: combining marks and ZWJ sequences made likely.
response_text = st.lists(
    st.sampled_from(["😀", "e\u0301", "\u0301", "𝄞", "\U0001f468\u200d\U0001f469", "ß", " "])
    | st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=3),
    max_size=3,
).map("".join)


@attrs.frozen(kw_only=True)
class GeneratedResponse:
    """A generated Responses stream (:func:`response_streams`) and what it must give.

    ``events`` are the decoded events in order (keepalives included, the
    comments and a proxy's ``[DONE]`` are only in ``body``); ``parts`` maps
    ``(output position, "content" or "summary", part index)`` to the part's
    type and text; ``calls`` are ``(call_id, name, arguments)`` in output order;
    ``terminal_end`` is the offset in ``body`` just after the terminal event.
    ``indexed`` is false for a llama.cpp-style stream (no ``output_index``,
    ``content_index``, ``summary_index`` nor ``sequence_number``).
    """

    events: tuple[Mapping[str, Any], ...]
    body: bytes
    parts: Mapping[tuple[int, str, int], tuple[str, str]]
    calls: tuple[tuple[str, str, str], ...]
    output_text: str
    terminal_end: int
    indexed: bool


#: For messages and reasoning items: the part list, its index key, the part
#: events' and the text events' names.
_PART_NAMES = {
    "message": ("content", "content_index", "content_part", "output_text"),
    "reasoning": ("summary", "summary_index", "reasoning_summary_part", "reasoning_summary_text"),
}


def _generated_item(
    draw: st.DrawFn, position: int, indexed: bool
) -> tuple[
    list[dict[str, Any]], dict[str, Any], dict[tuple[int, str, int], tuple[str, str]], list[str]
]:
    """One item's events (its own order), the finished item, its parts' texts and call."""
    kind = draw(st.sampled_from(["message", "function_call", "reasoning"]))
    at = {"output_index": position} if indexed else {}
    item_id = f"{kind[:2]}_{position}"
    parts: dict[tuple[int, str, int], tuple[str, str]] = {}
    if kind == "function_call":
        pieces = draw(st.lists(response_text, max_size=4))
        call_id, name = f"call_{position}", draw(st.sampled_from(["f", "get_weather"]))
        events = call_events(position if indexed else None, item_id, call_id, name, pieces)
        return events, events[-1]["item"], parts, [call_id, name, "".join(pieces)]
    which, index_key, part_event, delta_event = _PART_NAMES[kind]
    done_event, text_key, list_key = f"response.{delta_event}.done", "text", which
    head: dict[str, Any] = {"id": item_id, "type": kind}
    head.update({"summary": []} if kind == "reasoning" else {"role": "assistant", "content": []})
    events = [
        {"type": "response.output_item.added", **at, "item": {**head, "status": "in_progress"}}
    ]
    finished: list[dict[str, Any]] = []
    for p in range(draw(st.integers(1, 3)) if indexed else 1):
        part_type = "summary_text" if kind == "reasoning" else "output_text"
        is_refusal = kind == "message" and indexed and draw(st.integers(0, 3)) == 0
        delta_type, done_type, key = (
            ("response.refusal.delta", "response.refusal.done", "refusal")
            if is_refusal
            else (f"response.{delta_event}.delta", done_event, text_key)
        )
        part_type = "refusal" if is_refusal else part_type
        where = {"item_id": item_id, **at, **({index_key: p} if indexed else {})}
        pieces = draw(st.lists(response_text, max_size=4))
        text = "".join(pieces)
        empty = {"type": part_type, key: ""}
        events.append({"type": f"response.{part_event}.added", **where, "part": empty})
        events += [
            {"type": delta_type, **where, "delta": piece, "obfuscation": "x1"}
            for piece in pieces
            if piece
        ]
        events.append({"type": done_type, **where, key: text})
        events.append(
            {"type": f"response.{part_event}.done", **where, "part": {**empty, key: text}}
        )
        finished.append({"type": part_type, key: text})
        parts[(position, which, p)] = (part_type, text)
    item = {**head, "status": "completed", list_key: finished}
    events.append({"type": "response.output_item.done", **at, "item": item})
    return events, item, parts, []


@st.composite
def response_streams(draw: st.DrawFn) -> GeneratedResponse:
    """A Responses stream: interleaved items, keepalives, comments, any line ending."""
    indexed = draw(st.booleans())
    queues: list[list[dict[str, Any]]] = []
    items: list[dict[str, Any]] = []
    parts: dict[tuple[int, str, int], tuple[str, str]] = {}
    calls: list[tuple[str, str, str]] = []
    for position in range(draw(st.integers(1, 4))):
        events, item, item_parts, call = _generated_item(draw, position, indexed)
        queues.append(events)
        items.append(item)
        parts.update(item_parts)
        if call:
            calls.append((call[0], call[1], call[2]))
    # Interleave the items, each in its own order; items are added in output order.
    order: list[dict[str, Any]] = [
        {"type": "response.created", "response": response_object()},
        {"type": "response.in_progress", "response": response_object()},
    ]
    started = 0
    while any(queues):
        ready = [i for i, q in enumerate(queues) if q and i <= started]
        i = draw(st.sampled_from(ready))
        started = max(started, i + 1)
        order.append(queues[i].pop(0))
        if draw(st.integers(0, 7)) == 0:
            order.append({"type": "keepalive"})
    output = draw(st.sampled_from(["items", "null", "empty"]))
    final = response_object(
        "completed", None if output == "null" else ([] if output == "empty" else items)
    )
    final["usage"] = response_usage(3, 4)
    order.append({"type": "response.completed", "response": final})
    if indexed:
        order = numbered(order)
    else:
        order = [{k: v for k, v in e.items() if k != "sequence_number"} for e in order]
        order[0]["response"] = {"id": "resp_1", "object": "response", "status": "in_progress"}
    eol = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    event_field = draw(st.booleans())
    ascii_only = draw(st.booleans())
    chunks: list[str] = []
    for event in order:
        if draw(st.integers(0, 6)) == 0:
            chunks.append(f": ping{eol}{eol}")
        head = f"event: {event['type']}{eol}" if event_field else ""
        chunks.append(f"{head}data: {json.dumps(event, ensure_ascii=ascii_only)}{eol}{eol}")
    terminal_end = len("".join(chunks).encode())
    if draw(st.booleans()):
        chunks.append(f"data: [DONE]{eol}{eol}")
    output_text = "".join(
        text for _, (kind, text) in sorted(parts.items()) if kind == "output_text"
    )
    return GeneratedResponse(
        events=tuple(order),
        body="".join(chunks).encode(),
        parts=parts,
        calls=tuple(calls),
        output_text=output_text,
        terminal_end=terminal_end,
        indexed=indexed,
    )


# --- SSE streams, and reads of them ----------------------------------------------------

FIELD_NAMES = ["data", "data", "data", "event", "id", "retry", "error", "", "Data", "foo", "data "]
SEPARATORS = [": ", ":", ":  ", ""]
LINE_ENDINGS = ["\n", "\r\n", "\r"]

# Characters that stress decoding and splitting: multibyte (2, 3 and 4 bytes),
# NUL, a mid-stream BOM, Unicode line-ish separators that are *not* SSE line
# endings, digits (for retry) and the colon and space the parser looks for.
SPECIAL_CHARS = [*"abz019 :\t\x00é€中😀\u2028\x85\x0b", BOM, "\u200d"]
value_chars = st.one_of(
    st.sampled_from(SPECIAL_CHARS),
    st.characters(codec="utf-8", exclude_characters="\r\n"),
)
values = st.text(value_chars, max_size=8)
digit_values = st.text(st.sampled_from("0123456789"), min_size=1, max_size=4)


@st.composite
def sse_lines(draw: st.DrawFn) -> str:
    """One line (without its line ending) of a plausible event stream."""
    if draw(st.integers(0, 3)) == 0:
        return ""  # a blank line: dispatch
    name = draw(st.sampled_from(FIELD_NAMES))
    separator = draw(st.sampled_from(SEPARATORS))
    retry_digits = name == "retry" and draw(st.booleans())
    value = draw(digit_values if retry_digits else values)
    if not separator and name in ("data", "event", "id", "retry", "error"):
        value = ""  # "data" alone: the field with an empty value
    return name + separator + value


@st.composite
def sse_streams(draw: st.DrawFn) -> bytes:
    """A whole encoded event stream: lines, any line endings, optional BOM."""
    lines = draw(st.lists(sse_lines(), max_size=25))
    endings = draw(
        st.lists(st.sampled_from(LINE_ENDINGS), min_size=len(lines), max_size=len(lines))
    )
    text = "".join(line + eol for line, eol in zip(lines, endings, strict=True))
    if draw(st.booleans()):
        text += draw(sse_lines())  # a last line without a line ending
    if draw(st.booleans()):
        text = BOM + text
    return text.encode("utf-8")


# Arbitrary bytes, biased towards the tokens the decoder cares about.
TOKENS = [
    b"data:",
    b"data: ",
    b"event: ",
    b"id:",
    b"retry: ",
    b"error: ",
    b":",
    b"\n",
    b"\r",
    b"\r\n",
    b"\n\n",
    b"\xef\xbb\xbf",
    "😀".encode(),
    "€".encode(),
    b"\x00",
    b"12",
]
arbitrary_streams = st.lists(
    st.one_of(st.sampled_from(TOKENS), st.binary(max_size=6)), max_size=30
).map(b"".join)


@st.composite
def reads_of(draw: st.DrawFn, data: bytes) -> list[bytes | bytearray | memoryview]:
    """``data`` cut at arbitrary offsets, each read as bytes, bytearray or memoryview."""
    cuts = draw(st.lists(st.integers(0, len(data)), max_size=10))
    kinds = draw(st.lists(st.integers(0, 2), max_size=4))
    return as_buffers(split_at(data, cuts), kinds)


# --- whole API bodies ------------------------------------------------------------------


@st.composite
def chat_streams(draw: st.DrawFn) -> tuple[bytes, dict[int, dict[str, Any]]]:
    """An SSE body and the per-choice reconstruction it must give.

    Besides content and tool calls, a choice may speak (``delta.audio``: the
    id with the first transcript piece, data pieces) or make a legacy
    ``function_call``; chunks and choices may carry fields chunkwise does not
    model (``"extra"``: each one's last value, per choice; ``-1`` for the chunk's).
    """
    n = draw(st.integers(1, 3))
    eol = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    plan: list[tuple[int, dict[str, Any]]] = []
    expected: dict[int, dict[str, Any]] = {}
    for index in range(n):
        pieces = draw(st.lists(any_text, max_size=6))
        calls = draw(st.lists(st.lists(any_text, min_size=1, max_size=4), max_size=2))
        spoken = draw(st.none() | st.tuples(st.lists(any_text, max_size=3), any_text))
        legacy = None if calls else draw(st.none() | st.lists(any_text, max_size=3))
        expected[index] = {
            "content": "".join(pieces),
            "calls": [(f"call_{index}_{i}", "".join(args)) for i, args in enumerate(calls)],
            "audio": None if spoken is None else ("".join(spoken[0]), spoken[1]),
            "function_call": None if legacy is None else "".join(legacy),
        }
        plan.append((index, {"role": "assistant", "content": ""}))
        plan += [(index, {"content": p}) for p in pieces]
        if spoken is not None:
            plan.append((index, {"audio": {"id": f"audio_{index}", "transcript": spoken[1]}}))
            plan += [(index, {"audio": {"data": d}}) for d in spoken[0]]
        if legacy is not None:
            plan.append((index, {"function_call": {"name": "f", "arguments": ""}}))
            plan += [(index, {"function_call": {"arguments": a}}) for a in legacy]
        for i, args in enumerate(calls):
            head = {"index": i, "id": f"call_{index}_{i}", "type": "function"}
            plan.append(
                (index, {"tool_calls": [{**head, "function": {"name": "f", "arguments": ""}}]})
            )
            plan += [
                (index, {"tool_calls": [{"index": i, "function": {"arguments": a}}]}) for a in args
            ]
    # Interleave the choices, keeping each choice's own order.
    order = draw(st.permutations(range(len(plan))))
    queues: dict[int, list[dict[str, Any]]] = {i: [] for i in range(n)}
    for index, delta in plan:
        queues[index].append(delta)
    sequence = [plan[i][0] for i in order]
    lines: list[str] = []
    extra: dict[int, dict[str, Any]] = {index: {} for index in (-1, *range(n))}
    for index in sequence:
        delta = queues[index].pop(0)
        entry: dict[str, Any] = {"index": index, "delta": delta, "finish_reason": None}
        body: dict[str, Any] = {"id": "x", "choices": [entry]}
        for where, fields in ((-1, body), (index, entry)):
            field = draw(st.none() | st.tuples(st.sampled_from("ab"), json_values))
            if field is not None:
                fields[f"{where}_{field[0]}"] = extra[where][f"{where}_{field[0]}"] = field[1]
        space = draw(st.sampled_from(["", " "]))
        if draw(st.integers(0, 5)) == 0:
            lines.append(": keep-alive" + eol)
        lines.append(f"data:{space}{json.dumps(body, ensure_ascii=draw(st.booleans()))}{eol}{eol}")
    for index in range(n):
        finish = {"index": index, "delta": {}, "finish_reason": "stop"}
        lines.append(f"data: {json.dumps({'choices': [finish]})}{eol}{eol}")
    usage = {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}
    lines.append(f"data: {json.dumps({'choices': [], 'usage': usage})}{eol}{eol}")
    lines.append(f"data: [DONE]{eol}{eol}")
    prefix = "\ufeff" if draw(st.booleans()) else ""
    for index, fields in extra.items():
        expected.setdefault(index, {})["extra"] = fields
    return (prefix + "".join(lines)).encode(), expected


@st.composite
def completion_streams(draw: st.DrawFn) -> bytes:
    """A legacy completions body: interleaved choices, keepalives, a usage chunk, maybe
    ``[DONE]``, any line ending."""
    n = draw(st.integers(1, 3))
    eol = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    lines: list[str] = []
    for index in draw(st.lists(st.integers(0, n - 1), max_size=12)):
        text = draw(st.none() | any_text)
        lines.append(f"data: {json.dumps(completion_chunk(text_choice(text, index)))}{eol}{eol}")
        if draw(st.integers(0, 5)) == 0:
            lines.append(f": keep-alive{eol}{eol}")
    for index in range(n):
        reason = draw(st.sampled_from(["stop", "length", None]))
        lines.append(
            f"data: {json.dumps(completion_chunk(text_choice('', index, reason)))}{eol}{eol}"
        )
    if draw(st.booleans()):
        usage = {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}
        lines.append(f"data: {json.dumps(completion_chunk(usage=usage))}{eol}{eol}")
    if draw(st.booleans()):
        lines.append(f"data: [DONE]{eol}{eol}")
    return "".join(lines).encode()

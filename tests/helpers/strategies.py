"""Hypothesis strategies: JSON shaped like chunks, JSON documents, whole Responses streams."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs
from hypothesis import strategies as st

from helpers.bodies import call_events, numbered, response_object, response_usage

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
                },
            )
            | json_values,
            max_size=3,
        )
        | json_values,
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

"""Fuzz :class:`chunkwise.responses.Parser`: raw bytes, and Responses-shaped events as SSE.

Run for as long as you like (needs ``pip install atheris``)::

    python fuzz/fuzz_responses.py -max_total_time=3600 fuzz/corpus/responses

The first input byte picks the mode:

* *raw*: the rest is the response body, bytes as they come;
* *events*: the rest drives a generator of Responses-shaped events (the
  documented event types with their keys -- ``type``, ``sequence_number``,
  ``output_index``, ``content_index``, ``summary_index``, ``item_id``,
  ``item``, ``part``, ``delta``, ``text``, ``arguments``, ``response`` with
  ``status``, ``output``, ``usage``, ``error``, ``incomplete_details`` --
  with values of every JSON type, valid or not), written as an SSE body with
  keepalives, ``[DONE]``, error events (flat, nested, llama.cpp's bare
  frame), comments and a chosen line ending.

Either way the body is parsed in one read, in reads of sizes the fuzzer chose,
and byte by byte.  :func:`TestOneInput` raises when:

* ``feed()`` or ``end()`` raises anything at all (the parser must not raise);
* the three parses differ in any event or in the result (split invariance);
* the events do not end with exactly one terminal event whose result is the
  final result, or the status is not complete / incomplete / failed;
* the result is ``complete`` but the body's first terminal response event
  (``response.completed``/``incomplete``/``failed``) did not say
  ``completed`` (read independently, with :class:`~chunkwise.SSEDecoder` and
  :mod:`json`);
* a part's text deltas do not add up to its text, unless the server's final
  text replaced them: a part that had no deltas may get its text whole (from
  ``content_part.added``/``.done``, a ``.done`` event, ``output_item.done`` or
  the terminal output), and a part whose deltas were replaced by a different
  text has the anomaly ``final text differs from deltas`` naming it;
* an anomaly's detail is not bounded (the details quote server values only
  through ``preview``).

Small ``max_event_size`` values are among the choices, so the
:class:`~chunkwise.errors.EventTooLarge` path (the bound on memory) is exercised too.

The test suite runs :func:`TestOneInput` on a few hundred inputs without
atheris (tests/sansio/test_fuzz.py).
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
#: The terminal response events, with the status their name implies.
TERMINAL_TYPES = {
    "response.completed": "completed",
    "response.incomplete": "incomplete",
    "response.failed": "failed",
}
#: Anomaly details quote server values through ``preview`` (200 characters each).
DETAIL_LIMIT = 1000

_TYPES: tuple[object, ...] = (
    "response.created",
    "response.queued",
    "response.in_progress",
    "response.completed",
    "response.incomplete",
    "response.failed",
    "response.output_item.added",
    "response.output_item.done",
    "response.content_part.added",
    "response.content_part.done",
    "response.output_text.delta",
    "response.output_text.done",
    "response.refusal.delta",
    "response.refusal.done",
    "response.reasoning_text.delta",
    "response.reasoning_text.done",
    "response.reasoning_summary_part.added",
    "response.reasoning_summary_part.done",
    "response.reasoning_summary_text.delta",
    "response.reasoning_summary_text.done",
    "response.function_call_arguments.delta",
    "response.function_call_arguments.done",
    "response.output_text.annotation.added",
    "response.custom_tool_call_input.delta",
    "error",
    "keepalive",
    "response.keep_alive",
)
_KEYS: tuple[object, ...] = (
    "type",
    "sequence_number",
    "output_index",
    "content_index",
    "summary_index",
    "item_id",
    "item",
    "part",
    "delta",
    "text",
    "refusal",
    "arguments",
    "name",
    "annotation",
    "response",
)
_ITEM_KEYS: tuple[object, ...] = (
    "id",
    "type",
    "status",
    "role",
    "content",
    "summary",
    "name",
    "call_id",
    "arguments",
)
_PART_KEYS: tuple[object, ...] = ("type", "text", "refusal", "annotations")
_RESPONSE_KEYS: tuple[object, ...] = (
    "id",
    "model",
    "created_at",
    "status",
    "output",
    "usage",
    "error",
    "incomplete_details",
)
_ITEM_TYPES: tuple[object, ...] = (
    "message",
    "function_call",
    "reasoning",
    "web_search_call",
    "",
)
_PART_TYPES: tuple[object, ...] = (
    "output_text",
    "refusal",
    "reasoning_text",
    "summary_text",
    "input_text",
)
_STATUSES: tuple[object, ...] = (
    "completed",
    "incomplete",
    "failed",
    "cancelled",
    "in_progress",
    "queued",
    "",
)
#: Few ids, so that items collide; ``call_1`` is both an id and a call_id.
_IDS: tuple[object, ...] = ("msg_1", "msg_2", "fc_1", "call_1", "rs_1", "")
_INDICES: tuple[object, ...] = (0, 0, 1, 1, 2, 3, 7, 10**12, -1)
_STRINGS: tuple[object, ...] = (
    "",
    "a",
    "Hi",
    "é😀",
    "\u2028",
    "\x00",
    '{"x": ',
    "1}",
    "completed",
    "error",
    "assistant",
)


_SHAPES = JsonShapes(_STRINGS, _KEYS)
_scalar = _SHAPES.scalar
_value = _SHAPES.value
_mapping = _SHAPES.mapping


def _often(reader: ByteReader, options: tuple[object, ...]) -> Any:
    """Usually one of ``options``, sometimes any scalar (the wrong type, or null)."""
    return reader.choice(options) if reader.byte() & 3 else _scalar(reader)


def _part(reader: ByteReader) -> Any:
    def field(key: str) -> Any:
        if key == "type":
            return _often(reader, _PART_TYPES)
        if key == "annotations":
            return [_value(reader, 2) for _ in range(reader.int_below(3))]
        return _often(reader, _STRINGS)

    return _mapping(reader, _PART_KEYS, field)


def _item(reader: ByteReader) -> Any:
    def field(key: str) -> Any:
        if key == "type":
            return _often(reader, _ITEM_TYPES)
        if key in ("id", "call_id"):
            return _often(reader, _IDS)
        if key == "status":
            return _often(reader, _STATUSES)
        if key in ("content", "summary"):
            if reader.int_below(6) == 0:
                return _value(reader, 1)
            return [_part(reader) for _ in range(reader.int_below(4))]
        return _often(reader, _STRINGS)

    return _mapping(reader, _ITEM_KEYS, field)


def _response(reader: ByteReader) -> Any:
    def field(key: str) -> Any:
        if key == "status":
            return _often(reader, _STATUSES)
        if key == "output":
            if reader.int_below(6) == 0:
                return _value(reader, 1)
            return [_item(reader) for _ in range(reader.int_below(4))]
        if key == "usage":
            return {"output_tokens": reader.int_below(9), "total_tokens": reader.int_below(9)}
        if key == "error":
            return (
                None if reader.byte() & 1 else {"message": _scalar(reader), "code": _scalar(reader)}
            )
        if key == "incomplete_details":
            return {"reason": _often(reader, ("max_output_tokens", "content_filter"))}
        if key == "id":
            return _often(reader, ("resp_1", "resp_2"))
        return _scalar(reader)

    return _mapping(reader, _RESPONSE_KEYS, field)


def event(reader: ByteReader) -> Any:
    """One Responses-shaped event: usually a plausible one, sometimes not."""
    etype = _often(reader, _TYPES)

    def field(key: str) -> Any:
        if key in ("sequence_number", "output_index", "content_index", "summary_index"):
            return _often(reader, _INDICES)
        if key == "item_id":
            return _often(reader, _IDS)
        if key == "item":
            return _item(reader)
        if key == "part":
            return _part(reader)
        if key == "response":
            return _response(reader)
        if key == "annotation":
            return _value(reader, 1) if reader.byte() & 1 else {"type": "url_citation"}
        return _often(reader, _STRINGS)

    value = _mapping(reader, _KEYS[1:], field)
    if type(value) is dict and reader.int_below(16):
        value = {"type": etype, **value}  # the type is rarely missing
    return value


def _error(reader: ByteReader) -> Any:
    """An error event: flat, nested, or llama.cpp's bare frame (no type)."""
    fields = {"message": _often(reader, _STRINGS), "code": _scalar(reader)}
    shape = reader.int_below(3)
    if shape == 0:
        return {"type": "error", **fields, "param": None}
    if shape == 1:
        return {"type": "error", "error": fields}
    return {"error": fields}


def events_body(reader: ByteReader) -> bytes:
    """An SSE body of Responses-shaped events, with keepalives, errors, [DONE] and comments."""
    eol = str(reader.choice(("\n", "\r\n", "\r")))
    lines: list[str] = []
    for _ in range(reader.int_below(16)):
        extra = reader.int_below(32)
        if extra == 0:
            lines.append(f"data: [DONE]{eol}{eol}")
        elif extra == 1:
            data = json.dumps(_error(reader))
            head = f"event: error{eol}" if reader.byte() & 1 else ""
            lines.append(f"{head}data: {data}{eol}{eol}")
        elif extra == 2:
            lines.append(f": keep-alive{eol}")
        elif extra == 3:
            lines.append(
                f'data: {{"type":"keepalive","sequence_number":{reader.byte()}}}{eol}{eol}'
            )
        else:
            value = event(reader)
            text = json.dumps(value, ensure_ascii=bool(reader.byte() & 1))
            kind = value.get("type") if type(value) is dict else None
            # The event: line usually names the type; sometimes it is missing or wrong.
            choice = reader.int_below(4)
            head = ""
            if choice == 1 or (choice > 1 and isinstance(kind, str)):
                head = f"event: {kind if choice > 1 else reader.choice(_TYPES)}{eol}"
            lines.append(f"{head}data: {text}{eol}{eol}")
        if reader.remaining == 0:
            break
    return "".join(lines).encode()


def parse(
    reads: list[bytes], limit: int
) -> tuple[list[chunkwise.Event], chunkwise.responses.Result]:
    return feed_all(chunkwise.responses.Parser(max_event_size=limit), reads)


def first_terminal_status(body: bytes, limit: int) -> str | None:
    """The status the body's first terminal response event says, read independently.

    None when no terminal event comes before the stream stops making sense
    (data that is not a JSON object, an event past ``limit``).
    """
    decoder = chunkwise.SSEDecoder(max_event_size=limit, legacy_error_field=True)
    try:
        sse_events = decoder.feed(body) + decoder.end()
    except chunkwise.errors.EventTooLarge:
        sse_events = []  # conservative: what came before the error may count
        decoder = chunkwise.SSEDecoder(max_event_size=limit, legacy_error_field=True)
        for i in range(len(body)):
            try:
                sse_events += decoder.feed(body[i : i + 1])
            except chunkwise.errors.EventTooLarge:
                break
    for sse in sse_events:
        if not sse.data or sse.data == "[DONE]":
            continue
        try:
            data = json.loads(sse.data)
        except (ValueError, RecursionError):
            return None
        if type(data) is not dict:
            return None
        etype = data.get("type")
        if type(etype) is not str:
            etype = sse.event if sse.event != "message" else None
        if etype not in TERMINAL_TYPES:
            continue
        response = data.get("response")
        status = response.get("status") if type(response) is dict else None
        return status if type(status) is str else TERMINAL_TYPES[etype]
    return None


_DELTAS = (
    chunkwise.responses.TextDelta,
    chunkwise.responses.RefusalDelta,
    chunkwise.responses.ReasoningDelta,
)


def delta_texts(events: list[chunkwise.Event]) -> dict[tuple[int, str, int], str]:
    """The text deltas, joined per part: (output_index, part list, part index)."""
    texts: dict[tuple[int, str, int], str] = {}
    for e in events:
        if isinstance(e, _DELTAS):
            key = (e.output_index, "content", e.content_index)
        elif isinstance(e, chunkwise.responses.ReasoningSummaryDelta):
            key = (e.output_index, "summary", e.summary_index)
        else:
            continue
        texts[key] = texts.get(key, "") + e.text
    return texts


def check(
    events: list[chunkwise.Event], result: chunkwise.responses.Result, body: bytes, limit: int
) -> None:
    check_end(events, result)
    if result.status == "complete":
        # Only the server's terminal response saying completed makes a stream complete.
        assert result.error is None, result.error
        assert result.response_status == "completed", result.response_status
        assert first_terminal_status(body, limit) == "completed", body[-300:]
    for anomaly in result.anomalies:
        assert len(anomaly.detail) <= DETAIL_LIMIT, (anomaly.kind, len(anomaly.detail))
    # The deltas add up to each part's text, unless the server's final text replaced
    # them: the part's own (a .done event, the finished item, the terminal output),
    # or a whole item the terminal output put at the streamed item's position.
    replaced = {
        anomaly.detail.partition(":")[0]
        for anomaly in result.anomalies
        if anomaly.kind == "final text differs from deltas"
    }
    items_replaced = {
        int(anomaly.detail.split(":")[0].removeprefix("output "))
        for anomaly in result.anomalies
        if anomaly.kind == "item replaced"
    }
    deltas = delta_texts(events)
    seen: set[tuple[int, str, int]] = set()
    for item in result.output:
        for which, parts in (("content", item.content), ("summary", item.summary)):
            for part in parts:
                key = (item.index, which, part.index)
                seen.add(key)
                streamed = deltas.get(key, "")
                if streamed == part.text or not streamed or item.index in items_replaced:
                    continue
                # Text that came whole (no deltas) needs no anomaly; replaced deltas do.
                assert f"output {item.index} part {part.index}" in replaced, (key, streamed, part)
    # Every delta went to a part that is in the result (or to an item replaced whole).
    lost = {key for key in set(deltas) - seen if key[0] not in items_replaced}
    assert not lost, lost


def TestOneInput(data: bytes) -> None:
    reader = ByteReader(data)
    mode = reader.byte()
    limit = int(reader.choice(LIMITS))  # type: ignore[call-overload]
    body = reader.take(reader.int_below(MAX_BODY)) if mode & 1 else events_body(reader)
    reads = split_reads(reader, body)
    whole = parse([body], limit)
    check(*whole, body, limit)
    assert parse(reads, limit) == whole
    assert parse([body[i : i + 1] for i in range(len(body))], limit) == whole


if __name__ == "__main__":  # pragma: no cover - needs atheris
    fuzz_main(TestOneInput)

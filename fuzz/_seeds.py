"""Seed inputs for the harnesses: the hard cases found so far, as harness inputs.

Each seed is a whole ``TestOneInput`` input: the prefix bytes choose the
parameters (see each harness), the rest is the response body.  The test suite
runs every seed (tests/test_fuzz.py); to start a long run from them::

    .venv/bin/python fuzz/_seeds.py fuzz/corpus      # writes corpus/{sse,parser,responses}/*
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))


from _bytes import MAX_BODY

# Bodies worth keeping, by name, parsed with the default max_event_size: JSON
# the parser must turn into InvalidChunk or accept (nesting past the recursion
# limit, integers past the digit limit, non-finite numbers), and an id the
# end of the stream cuts off.
_NEST = 1500  # past the default recursion limit of 1000, within MAX_BODY
BODIES: dict[str, bytes] = {
    "deep-array": b"data: " + b"[" * _NEST + b"]" * _NEST + b"\n\n",
    "deep-object": b"data: " + b'{"a":' * _NEST + b"1" + b"}" * _NEST + b"\n\n",
    "deep-in-a-delta": (
        b'data: {"choices":[{"index":0,"delta":{"content":"hi","tool_calls":{"x":'
        + b"[" * _NEST
        + b"]" * _NEST
        + b"}}}]}\n\n"
    ),
    "deep-error-event": b"event: error\ndata: " + b"[" * _NEST + b"]" * _NEST + b"\n\n",
    "huge-integer": b'data: {"choices":[],"usage":{"total_tokens":' + b"7" * 5000 + b"}}\n\n",
    "float-overflow": b'data: {"choices":[],"usage":{"cost":1e999,"x":-1e999}}\n\n',
    "nan": b'data: {"choices":[{"index":0,"delta":{"content":"a"},"logprobs":NaN}]}\n\n',
    "infinity": b'data: {"choices":[],"usage":{"cost":-Infinity}}\n\n',
    "id-cut-off": b"id: 1\ndata: a\n\nid: 2\ndata: b",
}


def cut_off_line(limit: int) -> bytes:
    """A line whose value fills ``limit``; the U+FFFD flushed at end of stream is one more."""
    return b"data: " + b"x" * limit + b"\xc2"


def _size(body: bytes) -> bytes:
    assert len(body) < MAX_BODY, len(body)
    return len(body).to_bytes(2, "big")


def sse_seeds() -> dict[str, bytes]:
    """Inputs for fuzz_sse.py (limit: index into its LIMITS; legacy error field on)."""
    seeds = {name: b"\x00\x06\x01" + _size(body) + body for name, body in BODIES.items()}
    body = cut_off_line(100)
    seeds["cut-off-line-over-the-limit-at-end"] = b"\x00\x04\x01" + _size(body) + body
    return seeds


def parser_seeds() -> dict[str, bytes]:
    """Inputs for fuzz_parser.py (raw mode; limit: index into its LIMITS)."""
    seeds = {name: b"\x01\x00\x02" + _size(body) + body for name, body in BODIES.items()}
    body = cut_off_line(64)
    seeds["cut-off-line-over-the-limit-at-end"] = b"\x01\x00\x00" + _size(body) + body
    return seeds


def _sse(*events: Any) -> bytes:
    """Responses events as SSE: a dict with its ``event:`` line, a str as the data."""
    out = []
    for event in events:
        if isinstance(event, str):
            out.append(f"data: {event}\n\n")
            continue
        head = f"event: {event['type']}\n" if "type" in event else ""
        out.append(f"{head}data: {json.dumps(event, separators=(',', ':'))}\n\n")
    return "".join(out).encode()


def _ev(kind: str, **fields: Any) -> dict[str, Any]:
    return {"type": kind, **fields}


_CREATED = _ev("response.created", response={"id": "resp_1", "status": "in_progress"})
_MSG = {
    "type": "message",
    "id": "msg_1",
    "status": "completed",
    "role": "assistant",
    "content": [{"type": "output_text", "text": "Hello", "annotations": []}],
}
_NEW_MSG = {**_MSG, "status": "in_progress", "content": []}
_CALL = {
    "type": "function_call",
    "id": "fc_1",
    "call_id": "call_1",
    "name": "f",
    "arguments": '{"x":1}',
    "status": "completed",
}
_USAGE = {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5}
_PART = {"type": "output_text", "text": "", "annotations": []}


def _completed(*output: Any, status: str = "completed") -> dict[str, Any]:
    response = {"id": "resp_1", "status": status, "output": list(output), "usage": _USAGE}
    return _ev(f"response.{status}", response=response)


def _at(index: int, **fields: Any) -> dict[str, Any]:
    """The addressing OpenAI sends: output_index, and item_id for msg_1."""
    return {"output_index": index, "item_id": "msg_1", **fields}


# Responses bodies: the documented shapes (every index, sequence numbers),
# llama.cpp's (no index, no sequence number, the bare error frame), the error
# shapes, and the findings of the hostile review (tests/sansio/test_response_hostile.py).
_NINES = int("9" * 4000)  # JSON Python still parses: past 2**53, no index
RESPONSE_BODIES: dict[str, bytes] = {
    "responses-text": _sse(
        {**_CREATED, "sequence_number": 0},
        _ev("response.output_item.added", sequence_number=1, output_index=0, item=_NEW_MSG),
        _ev(
            "response.content_part.added", sequence_number=2, **_at(0, content_index=0), part=_PART
        ),
        _ev(
            "response.output_text.delta", sequence_number=3, **_at(0, content_index=0), delta="Hel"
        ),
        _ev("response.output_text.delta", sequence_number=4, **_at(0, content_index=0), delta="lo"),
        _ev(
            "response.output_text.done", sequence_number=5, **_at(0, content_index=0), text="Hello"
        ),
        _ev("keepalive", sequence_number=6),
        _ev("response.output_item.done", sequence_number=7, output_index=0, item=_MSG),
        {**_completed(_MSG), "sequence_number": 8},
    ),
    "responses-function-call-and-reasoning": _sse(
        _CREATED,
        _ev("response.output_item.added", output_index=0, item={"type": "reasoning", "id": "rs"}),
        _ev("response.reasoning_summary_part.added", output_index=0, summary_index=0, part={}),
        _ev("response.reasoning_summary_text.delta", output_index=0, summary_index=0, delta="A"),
        _ev("response.reasoning_summary_text.done", output_index=0, summary_index=0, text="B"),
        _ev("response.output_item.added", output_index=1, item={**_CALL, "arguments": ""}),
        _ev("response.function_call_arguments.delta", output_index=1, delta='{"x"'),
        _ev("response.function_call_arguments.delta", output_index=1, delta=":1}"),
        _ev("response.function_call_arguments.done", output_index=1, arguments='{"x":1}'),
        _ev("response.output_item.done", output_index=1, item=_CALL),
        _completed(),
    ),
    "responses-llama-cpp-no-indices": _sse(
        {**_CREATED, "response": {"id": "resp_1", "object": "response", "status": "in_progress"}},
        _ev("response.output_item.added", item=_NEW_MSG),
        _ev("response.content_part.added", item_id="msg_1", part=_PART),
        _ev("response.output_text.delta", item_id="msg_1", delta="Hel"),
        _ev("response.output_text.delta", item_id="msg_1", delta="lo"),
        _ev("response.output_item.added", item={**_CALL, "id": None, "arguments": ""}),
        _ev("response.function_call_arguments.delta", item_id="call_1", delta='{"x":1}'),
        _ev("response.output_item.done", item={**_CALL, "id": None}),
        _ev("response.output_item.done", item=_MSG),
        _completed(_MSG, {**_CALL, "id": None}),
    ),
    "responses-llama-cpp-bare-error": _sse(
        _ev("response.output_item.added", item=_NEW_MSG),
        _ev("response.output_text.delta", item_id="msg_1", delta="Par"),
        {"error": {"code": 500, "message": "context shift is disabled", "type": "server_error"}},
    ),
    "responses-flat-error-then-failed": _sse(
        _CREATED,
        _ev("error", code="server_error", message="boom", param=None),
        _ev("response.failed", response={"status": "failed", "error": {"message": "boom"}}),
    ),
    "responses-nested-error-then-done": _sse(
        _ev("error", error={"type": "invalid_request_error", "code": "x", "message": "bad"}),
        "[DONE]",
    ),
    "responses-lifecycle-completed-then-eof": _sse(
        _ev("response.output_text.delta", output_index=0, delta="Hel"),
        _ev("response.in_progress", response={"id": "resp_1", "status": "completed"}),
    ),
    "responses-terminal-replaces-and-moves-items": _sse(
        _ev("response.output_item.added", output_index=0, item={"type": "message", "id": "a"}),
        _ev("response.output_text.delta", output_index=0, content_index=0, delta="x"),
        _ev("response.output_item.added", output_index=1, item={"type": "message", "id": "b"}),
        _completed(_MSG, {"type": "message", "id": "a"}),
    ),
    "responses-delta-after-item-done": _sse(
        _ev("response.output_item.done", output_index=0, item=_MSG),
        _ev("response.output_text.delta", output_index=0, content_index=1, delta="late"),
        _completed(status="incomplete"),
    ),
    "responses-huge-numbers": _sse(
        _ev("keepalive", sequence_number=_NINES),
        _ev("keepalive", sequence_number=1),
        _ev("response.output_text.delta", output_index=_NINES, delta="a"),
        _ev("response.output_text.done", output_index=_NINES, text="b"),
        _ev("response.output_text.delta", output_index=10**12, content_index=10**15, delta="c"),
    ),
}


def responses_seeds() -> dict[str, bytes]:
    """Inputs for fuzz_responses.py (raw mode; limit: index into its LIMITS)."""
    bodies = {**BODIES, **RESPONSE_BODIES}
    seeds = {name: b"\x01\x00\x02" + _size(body) + body for name, body in bodies.items()}
    body = cut_off_line(64)
    seeds["cut-off-line-over-the-limit-at-end"] = b"\x01\x00\x00" + _size(body) + body
    return seeds


def main() -> None:
    corpus = Path(sys.argv[1] if len(sys.argv) > 1 else "fuzz/corpus")
    harnesses = {"sse": sse_seeds(), "parser": parser_seeds(), "responses": responses_seeds()}
    for harness, seeds in harnesses.items():
        (corpus / harness).mkdir(parents=True, exist_ok=True)
        for name, data in seeds.items():
            (corpus / harness / f"seed-{name}").write_bytes(data)


if __name__ == "__main__":
    main()

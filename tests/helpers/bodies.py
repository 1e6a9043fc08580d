"""Body builders: chat chunks, legacy completion chunks, Responses events, framed as SSE.

Plain data in, plain data (or bytes) out: nothing here parses, so a test states
what the server sent with these and checks it against the parsers.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

# --- chat completions ------------------------------------------------------------------


def chunk(
    *choices: Mapping[str, Any],
    usage: Mapping[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A ``chat.completion.chunk`` with these choices (see :func:`choice`)."""
    body: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "test-model",
        "choices": list(choices),
    }
    if usage is not None:
        body["usage"] = usage
    body.update(extra)
    return body


def choice(index: int = 0, finish_reason: str | None = None, **delta: Any) -> dict[str, Any]:
    """One entry of a chunk's ``choices``; keyword arguments form its ``delta``."""
    return {"index": index, "delta": delta, "finish_reason": finish_reason}


def tool(
    index: int | None = 0,
    *,
    id: str | None = None,
    name: str | None = None,
    arguments: str | None = None,
) -> dict[str, Any]:
    """One entry of a delta's ``tool_calls``; ``None`` leaves a field out."""
    call: dict[str, Any] = {"function": {}}
    if index is not None:
        call["index"] = index
    if id is not None:
        call["id"] = id
        call["type"] = "function"
    if name is not None:
        call["function"]["name"] = name
    if arguments is not None:
        call["function"]["arguments"] = arguments
    return call


def sse(
    *payloads: Mapping[str, Any] | str,
    done: bool = True,
    eol: str = "\n",
    ensure_ascii: bool = False,
    space: bool = True,
    keepalive: bool = False,
) -> bytes:
    """An SSE body with one ``data:`` event per payload (JSON unless a str), then ``[DONE]``.

    ``space=False`` writes ``data:`` with no space after the colon, and
    ``keepalive=True`` puts a ``: keep-alive`` comment before each event.
    """
    prefix = "data: " if space else "data:"
    texts = [
        payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=ensure_ascii)
        for payload in payloads
    ]
    parts = []
    for text in [*texts, "[DONE]"] if done else texts:
        if keepalive:
            parts.append(f": keep-alive{eol}{eol}")
        parts.append(f"{prefix}{text}{eol}{eol}")
    return "".join(parts).encode()


# --- legacy completions ---------------------------------------------------------------


def completion_chunk(
    *choices: Mapping[str, Any], id: str = "cmpl-1", **extra: Any
) -> dict[str, Any]:
    """A legacy ``text_completion`` chunk with these choices."""
    return {
        "id": id,
        "object": "text_completion",
        "created": 1,
        "model": "m",
        "choices": list(choices),
        **extra,
    }


def text_choice(
    text: str | None = "", index: int = 0, finish_reason: str | None = None, **extra: Any
) -> dict[str, Any]:
    """One choice of a legacy completion chunk."""
    return {"index": index, "text": text, "finish_reason": finish_reason, **extra}


# --- the Responses API ----------------------------------------------------------------


def sse_typed(*events: Mapping[str, Any], eol: str = "\n") -> bytes:
    """A Responses API body: ``event: <type>`` + ``data: <json>`` per event, no ``[DONE]``."""
    return "".join(
        f"event: {event['type']}{eol}data: {json.dumps(event, ensure_ascii=False)}{eol}{eol}"
        for event in events
    ).encode()


def response_sse(
    *payloads: Mapping[str, Any] | str, eol: str = "\n", event_field: bool = True
) -> bytes:
    """A Responses SSE body: each payload as ``event: <type>`` and one ``data:`` line.

    A str payload is written as the data as is (``[DONE]``, invalid JSON...);
    ``event_field=False`` leaves the ``event:`` lines out.
    """
    parts = []
    for payload in payloads:
        if isinstance(payload, str):
            parts.append(f"data: {payload}{eol}{eol}")
            continue
        kind = payload.get("type")
        head = f"event: {kind}{eol}" if event_field and isinstance(kind, str) else ""
        parts.append(f"{head}data: {json.dumps(payload, ensure_ascii=False)}{eol}{eol}")
    return "".join(parts).encode()


def response_object(
    status: str = "in_progress",
    output: Sequence[Mapping[str, Any]] | None = (),
    usage: Mapping[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A Responses ``response`` object as OpenAI sends it in lifecycle and terminal events."""
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 1741290958,
        "status": status,
        "error": None,
        "incomplete_details": None,
        "model": "gpt-4.1-2025-04-14",
        "output": None if output is None else list(output),
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": None if usage is None else dict(usage),
        **extra,
    }


def response_usage(input_tokens: int = 10, output_tokens: int = 5) -> dict[str, Any]:
    """A Responses ``usage`` object, with its detail objects."""
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input_tokens + output_tokens,
    }


def message_item(
    item_id: str = "msg_1", *texts: str, status: str = "completed", refusal: str | None = None
) -> dict[str, Any]:
    """A finished ``message`` item: one ``output_text`` part per text (then a refusal part)."""
    content: list[dict[str, Any]] = [
        {"type": "output_text", "text": text, "annotations": [], "logprobs": []} for text in texts
    ]
    if refusal is not None:
        content.append({"type": "refusal", "refusal": refusal})
    return {
        "id": item_id,
        "type": "message",
        "status": status,
        "role": "assistant",
        "content": content,
    }


def call_item(
    item_id: str, call_id: str, name: str, arguments: str, status: str = "completed"
) -> dict[str, Any]:
    """A ``function_call`` item."""
    return {
        "id": item_id,
        "type": "function_call",
        "status": status,
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
    }


def text_events(
    output_index: int | None, item_id: str, pieces: Sequence[str], content_index: int | None = 0
) -> list[dict[str, Any]]:
    """The events of one message with one ``output_text`` part, OpenAI's order, without
    ``sequence_number`` (see :func:`numbered`); a None index is left out (llama.cpp)."""
    text = "".join(pieces)
    where = _indices(output_index, content_index)
    part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
    events: list[dict[str, Any]] = [
        {
            "type": "response.output_item.added",
            **_indices(output_index, None),
            "item": {**message_item(item_id, status="in_progress"), "content": []},
        },
        {"type": "response.content_part.added", "item_id": item_id, **where, "part": part},
    ]
    events += [
        {"type": "response.output_text.delta", "item_id": item_id, **where, "delta": p}
        for p in pieces
    ]
    events += [
        {"type": "response.output_text.done", "item_id": item_id, **where, "text": text},
        {
            "type": "response.content_part.done",
            "item_id": item_id,
            **where,
            "part": {**part, "text": text},
        },
        {
            "type": "response.output_item.done",
            **_indices(output_index, None),
            "item": message_item(item_id, text),
        },
    ]
    return events


def call_events(
    output_index: int | None, item_id: str, call_id: str, name: str, pieces: Sequence[str]
) -> list[dict[str, Any]]:
    """The events of one function call, OpenAI's order (see :func:`text_events`)."""
    arguments = "".join(pieces)
    where = {**_indices(output_index, None), "item_id": item_id}
    events: list[dict[str, Any]] = [
        {
            "type": "response.output_item.added",
            **_indices(output_index, None),
            "item": call_item(item_id, call_id, name, "", status="in_progress"),
        }
    ]
    events += [
        {"type": "response.function_call_arguments.delta", **where, "delta": p} for p in pieces
    ]
    events += [
        {"type": "response.function_call_arguments.done", **where, "arguments": arguments},
        {
            "type": "response.output_item.done",
            **_indices(output_index, None),
            "item": call_item(item_id, call_id, name, arguments),
        },
    ]
    return events


def _indices(output_index: int | None, content_index: int | None) -> dict[str, int]:
    where = {}
    if output_index is not None:
        where["output_index"] = output_index
    if content_index is not None:
        where["content_index"] = content_index
    return where


def numbered(events: Iterable[Mapping[str, Any]], start: int = 0) -> list[dict[str, Any]]:
    """The events with ``sequence_number`` 0, 1, 2... (from ``start``), as OpenAI numbers them."""
    return [{**event, "sequence_number": start + i} for i, event in enumerate(events)]


def rotated(events: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``events`` as a Copilot Responses endpoint sends them: a new response id and a new
    item id on every event that carries one (``capture-id-N``, as in its recordings)."""
    fresh = iter(f"capture-id-{n}" for n in itertools.count(1))
    out = []
    for event in json.loads(json.dumps(list(events))):
        if "response" in event:
            event["response"]["id"] = next(fresh)
            for item in event["response"].get("output") or ():
                item["id"] = next(fresh)
        if "item" in event:
            event["item"]["id"] = next(fresh)
        if "item_id" in event:
            event["item_id"] = next(fresh)
        out.append(event)
    return out


# --- Anthropic Messages ----------------------------------------------------------------
#
# Bodies are ``sse_typed`` of these events, as Anthropic sends them (``event:`` = type).


def message_start(
    message_id: str = "msg_1", usage: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """``message_start`` with an empty assistant message."""
    return {
        "type": "message_start",
        "message": {
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "content": [],
            "model": "claude-test",
            "stop_reason": None,
            "stop_sequence": None,
            "usage": dict(usage or {"input_tokens": 10, "output_tokens": 1}),
        },
    }


def block_start(index: int, block: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": dict(block)}


def block_delta(index: int, delta: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": dict(delta)}


def block_stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def message_delta(
    stop_reason: str | None = "end_turn", usage: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "type": "message_delta",
        "delta": {"stop_reason": stop_reason, "stop_sequence": None},
        "usage": dict(usage or {"output_tokens": 5}),
    }


MESSAGE_STOP: dict[str, Any] = {"type": "message_stop"}
PING: dict[str, Any] = {"type": "ping"}


def text_block(index: int, *fragments: str) -> list[dict[str, Any]]:
    """A ``text`` block streamed as ``fragments``."""
    return [
        block_start(index, {"type": "text", "text": ""}),
        *(block_delta(index, {"type": "text_delta", "text": f}) for f in fragments),
        block_stop(index),
    ]


def tool_use_block(
    index: int, name: str, *fragments: str, block_id: str = "toolu_1"
) -> list[dict[str, Any]]:
    """A ``tool_use`` block whose input streams as ``fragments``."""
    return [
        block_start(index, {"type": "tool_use", "id": block_id, "name": name, "input": {}}),
        *(block_delta(index, {"type": "input_json_delta", "partial_json": f}) for f in fragments),
        block_stop(index),
    ]


def message_events(*blocks: list[dict[str, Any]], stop_reason: str = "end_turn") -> list[Any]:
    """A whole message: ``message_start``, the blocks, ``message_delta`` and ``message_stop``."""
    return [
        message_start(),
        *(event for block in blocks for event in block),
        message_delta(stop_reason),
        MESSAGE_STOP,
    ]

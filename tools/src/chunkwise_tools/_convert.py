"""Results and events as JSON documents: one conversion for the CLI, the server and inspect.

* :func:`to_json` / :func:`result_to_json` / :func:`event_to_json`: what
  ``chunkwise inspect --json`` and ``chunkwise chat --json`` print.  attrs
  classes become objects of their public fields; exceptions become
  ``{"exception": class name, "message": ..., ...fields}``; enums their values.
* :func:`completion_document`: the ``chat.completion`` document a server
  answers a ``stream: false`` request with, built from a parsed stream.

Sans-IO: attrs and the result and event classes only.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

import attrs

from chunkwise import ChunkwiseError, Event, ToolArgumentsError, ToolCall, chat

__all__ = [
    "completion_document",
    "event_to_json",
    "exception_fields",
    "exception_to_json",
    "public_fields",
    "result_to_json",
    "to_json",
    "tool_call_to_json",
]


def result_to_json(result: chat.Result) -> dict[str, Any]:
    """Convert a :class:`chunkwise.chat.Result` into JSON-compatible data.

    attrs classes become objects of their public fields; exceptions become
    ``{"exception": class name, "message": ..., ...fields}`` (``"exception"``
    rather than ``"type"``, which a :class:`StreamError` uses for the
    server's error type); enums become their values.  Each tool call also has
    ``"parsed_arguments"`` when its arguments are valid, and a non-null
    ``"error"`` when they are not.
    """
    document = to_json(result)
    assert isinstance(document, dict)
    return document


def to_json(value: Any) -> Any:
    """JSON-compatible data for a result, an event, an error, or any part of them."""
    # Enums first: IncompleteReason is also a str.
    if isinstance(value, enum.Enum):
        return to_json(value.value)
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, ToolCall):
        return tool_call_to_json(value)
    if attrs.has(type(value)):
        return {name: to_json(item) for name, item in public_fields(value)}
    if isinstance(value, BaseException):
        return exception_to_json(value)
    if isinstance(value, Mapping):
        return {str(key): to_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(item) for item in value]
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    return repr(value)


def public_fields(value: Any) -> list[tuple[str, Any]]:
    """The public fields of an attrs instance, by name, in order.

    A private field given under a public alias and read through a property of
    that name (``responses.Result._parsed``, read as ``parsed``, which copies)
    counts under its public name; other private fields do not count.
    """
    cls = type(value)
    fields = []
    for field in attrs.fields(cls):
        name = field.name
        if name.startswith("_"):
            name = field.alias
            if not field.init or name.startswith("_") or not hasattr(cls, name):
                continue
        fields.append((name, getattr(value, name)))
    return fields


def tool_call_to_json(call: ToolCall) -> dict[str, Any]:
    """A tool call (or a Responses :class:`FunctionCall`) with its parsed arguments or error."""
    document: dict[str, Any] = {name: to_json(item) for name, item in public_fields(call)}
    try:
        # Present only when valid: JSON null is itself a valid parse.
        document["parsed_arguments"] = call.parse_arguments()
    except ToolArgumentsError as exc:
        document["error"] = exception_to_json(exc)
    return document


def exception_to_json(exc: BaseException) -> dict[str, Any]:
    document: dict[str, Any] = {"exception": type(exc).__name__, "message": str(exc)}
    for key, value in exception_fields(exc).items():
        if key != "message":
            document[key] = to_json(value)
    return document


def exception_fields(exc: BaseException) -> dict[str, Any]:
    # Every ChunkwiseError answers type and code (None where they do not apply).
    fields = {"type": exc.type, "code": exc.code} if isinstance(exc, ChunkwiseError) else {}
    fields.update((key, value) for key, value in vars(exc).items() if not key.startswith("_"))
    return fields


def event_to_json(event: Event) -> dict[str, Any]:
    """``{"type": <event class>, ...its fields}``, JSON-compatible."""
    document = to_json(event)
    assert isinstance(document, dict)
    return {"type": type(event).__name__, **document}


# -- stream to document --------------------------------------------------------


def _tool_call_document(call: ToolCall) -> dict[str, Any]:
    return {
        "id": call.id,
        "type": call.type or "function",
        "function": {"name": call.name, "arguments": call.arguments},
    }


def _message(choice: chat.ChoiceResult) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": choice.role or "assistant",
        # OpenAI sends null content beside tool calls, "" never.
        "content": choice.content or (None if choice.tool_calls else ""),
        "refusal": choice.refusal,
    }
    if choice.reasoning is not None:
        message["reasoning_content"] = choice.reasoning
    if choice.tool_calls:
        message["tool_calls"] = [_tool_call_document(call) for call in choice.tool_calls]
    return message


def completion_document(result: chat.Result) -> dict[str, Any]:
    """A ``chat.completion`` JSON document holding what ``result`` reconstructs."""
    return {
        "id": result.id,
        "object": "chat.completion",
        "created": result.created,
        "model": result.model,
        "system_fingerprint": result.system_fingerprint,
        "choices": [
            {
                "index": choice.index,
                "message": _message(choice),
                "logprobs": None,
                "finish_reason": choice.finish_reason,
            }
            for choice in result.choices
        ],
        "usage": None if result.usage is None else dict(result.usage),
    }

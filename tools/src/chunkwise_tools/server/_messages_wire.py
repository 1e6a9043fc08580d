"""Anthropic Messages answers (``POST /v1/messages``): the chat scenarios' words, as events.

Theory of operation
-------------------
A :class:`MessagesScenario` takes its words from a chat scenario
(:data:`~._scenarios.SCENARIOS`: text pieces, reasoning pieces, tool calls
with their argument fragments) and says how the answer ends: a stop reason,
an ``error`` event before or after the first output, or a cut.  The request's
``model`` names it (:data:`MESSAGES_SCENARIOS`).  :func:`messages_events`
writes it as the API streams it; a non-streamed request gets the ``message``
document the stream reconstructs (:func:`message_document`), so the two
answers cannot drift apart.

Rules
-----
1. Anthropic's order: ``message_start`` (the message with empty ``content``,
   null ``stop_reason``, usage with the input tokens and ``output_tokens``
   1), one ``ping``, the blocks, ``message_delta`` (``stop_reason``, null
   ``stop_sequence``, the output tokens) and ``message_stop``.  Every event
   has an ``event:`` line naming its ``type``.
2. A block is ``content_block_start`` (the block empty), its deltas,
   ``content_block_stop``; blocks never interleave, and ``index`` counts them.
3. Reasoning is a ``thinking`` block first: a ``thinking_delta`` per piece,
   then one ``signature_delta``.  Text is a ``text`` block, a ``text_delta``
   per piece.  Each tool call is a ``tool_use`` block (``input: {}``) after
   the text, an ``input_json_delta`` per argument fragment; the stop reason
   is then ``tool_use``.  A chat ``length`` finish is ``max_tokens``.
4. An ``error`` event (``{"type": "error", "error": {"type", "message"}}``)
   ends the stream where the scenario says: right after ``message_start``
   (before output) or after the text block's deltas (after output, the block
   left open); nothing follows it.
5. A cut ends the body after half the text's deltas: no stop, no
   ``message_delta``, no ``message_stop``.

Pure functions: no I/O, no trio.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import attrs

from chunkwise import messages

from ._response_wire import response_event_bytes
from ._scenarios import SCENARIOS, Scenario

__all__ = [
    "MESSAGES_SCENARIOS",
    "MessagesScenario",
    "message_document",
    "messages_error_bytes",
    "messages_events",
]

INPUT_TOKENS = 19
#: The signature a thinking block ends with (rule 3): opaque, as Anthropic's.
SIGNATURE = "EqQBCkgIARABGAIiQGNodW5rd2lzZSBzaWduYXR1cmUgb2YgdGhlIHRoaW5raW5nIGJsb2Nr"
OVERLOADED = {"type": "overloaded_error", "message": "Overloaded"}


@attrs.frozen(kw_only=True)
class MessagesScenario:
    """A chat scenario's words and how its Messages answer ends (rules 3 to 5)."""

    name: str
    summary: str
    words: Scenario
    error: Literal["before-output", "after-output"] | None = None
    cut: bool = False

    @property
    def stop_reason(self) -> str:
        if self.words.tool_calls:
            return "tool_use"
        return "max_tokens" if self.words.finish_reason == "length" else "end_turn"


def _scenario(name: str, words: str, summary: str, **how: Any) -> MessagesScenario:
    return MessagesScenario(name=name, summary=summary, words=SCENARIOS[words], **how)


_ALL = (
    _scenario("text", "text", "a few sentences with multibyte characters; end_turn"),
    _scenario("thinking", "reasoning", "a thinking block (deltas, a signature), then text"),
    _scenario("tools", "tools", "two get_weather tool_use blocks, input in fragments; tool_use"),
    _scenario("demo", "demo", "text, then one get_weather tool_use block; tool_use"),
    _scenario("length", "length", "text cut by the token limit: stop_reason max_tokens"),
    _scenario(
        "overloaded",
        "error",
        "some text, then an overloaded_error event",
        error="after-output",
    ),
    _scenario(
        "overloaded-before-output",
        "text",
        "message_start, then an overloaded_error event before any output",
        error="before-output",
    ),
    _scenario("cut", "text", "half the text, then the body ends: no message_stop", cut=True),
)
#: The Messages scenarios by the model name that selects them.
MESSAGES_SCENARIOS: Mapping[str, MessagesScenario] = {s.name: s for s in _ALL}


def _block(index: int, block: dict[str, Any], deltas: Sequence[dict[str, Any]]) -> list[Any]:
    start = {"type": "content_block_start", "index": index, "content_block": block}
    middle = [{"type": "content_block_delta", "index": index, "delta": d} for d in deltas]
    return [start, *middle, {"type": "content_block_stop", "index": index}]


def messages_payloads(scenario: MessagesScenario, *, model: str | None = None) -> list[Any]:
    """The JSON objects the scenario streams, in order (rules 1 to 5)."""
    words = scenario.words
    usage = {"input_tokens": INPUT_TOKENS, "output_tokens": 1}
    message: dict[str, Any] = {
        "id": f"msg_chunkwise_{scenario.name}",
        "type": "message",
        "role": "assistant",
        "model": model if model is not None else scenario.name,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage,
    }
    events: list[Any] = [{"type": "message_start", "message": message}, {"type": "ping"}]
    if scenario.error == "before-output":
        return [*events, {"type": "error", "error": OVERLOADED}]  # rule 4
    index = 0
    if words.reasoning:
        deltas = [{"type": "thinking_delta", "thinking": piece} for piece in words.reasoning]
        deltas.append({"type": "signature_delta", "signature": SIGNATURE})
        events += _block(index, {"type": "thinking", "thinking": "", "signature": ""}, deltas)
        index += 1
    if words.content:
        pieces = words.content[: len(words.content) // 2] if scenario.cut else words.content
        text = _block(
            index,
            {"type": "text", "text": ""},
            [{"type": "text_delta", "text": piece} for piece in pieces],
        )
        if scenario.cut:
            return events + text[:-1]  # rule 5
        if scenario.error == "after-output":
            return [*events, *text[:-1], {"type": "error", "error": OVERLOADED}]  # rule 4
        events += text
        index += 1
    for call in words.tool_calls:
        block = {"type": "tool_use", "id": f"toolu_{call.id}", "name": call.name, "input": {}}
        deltas = [{"type": "input_json_delta", "partial_json": f} for f in call.fragments]
        events += _block(index, block, deltas)
        index += 1
    output = {"output_tokens": words.usage.get("completion_tokens", 20)}
    stop = {"stop_reason": scenario.stop_reason, "stop_sequence": None}
    events.append({"type": "message_delta", "delta": stop, "usage": output})
    events.append({"type": "message_stop"})
    return events


def messages_events(scenario: MessagesScenario, *, model: str | None = None) -> list[bytes]:
    """The exact bytes of each SSE event the scenario sends (rule 1)."""
    return [response_event_bytes(p) for p in messages_payloads(scenario, model=model)]


def messages_error_bytes(error: Mapping[str, Any]) -> bytes:
    """An in-stream ``error`` event (rule 4) for an error object of any API's words."""
    kind = {"server_error": "api_error", "requests": "rate_limit_error"}.get(
        str(error.get("type")), str(error.get("type"))
    )
    body = {"type": kind, "message": error.get("message")}
    return response_event_bytes({"type": "error", "error": body})


def message_document(result: messages.Result) -> dict[str, Any]:
    """The ``message`` a non-streamed request is answered with: what the stream built."""
    content: list[dict[str, Any]] = []
    for block in result.content:
        data = dict(block.data or {"type": block.type})
        if block.type == "text":
            data["text"] = block.text
        elif block.type == "thinking":
            data |= {"thinking": block.thinking, "signature": block.signature or ""}
        content.append(data)
    message = dict(result.message or {})
    return {
        **message,
        "content": content,
        "stop_reason": result.stop_reason,
        "stop_sequence": result.stop_sequence,
        "usage": dict(result.usage or {}),
    }

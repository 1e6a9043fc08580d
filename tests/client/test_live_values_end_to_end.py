"""Live values end to end: the real client against ``chunkwise serve``, both APIs.

The loopback server answers a ``response_format`` json_schema (chat) or a
``text.format`` (Responses) with a generated JSON document streamed in small
fragments cut inside keys and escapes, and the model ``tools`` makes it call a
tool.  For every stream, read as a consumer does (the events, and
``stream.snapshot`` right after each one):

* the patches of every delta event, applied in order to a plain mirror,
  reproduce the final value, and after each delta the mirror is
  ``partial_json`` of the text so far;
* the newest snapshot (which may already be ahead of the event, as the
  reader runs on) is the mirror grown, and every snapshot's preview grows from
  the one before (keys added, arrays extended, strings appended to, nothing
  else changed);
* the final ``parsed`` / ``parse_arguments()`` equal the previews' end.

The matrix: both APIs x write sizes that split multibyte characters and
escapes across reads x a structured answer and tool calls.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import pytest

import chunkwise
from helpers.emulator import emulator
from helpers.json_values import grows, same_json

SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "enum": ["Zürich", "東京", "Paris 🎉"]},
        "note": {"type": "string"},
        "days": {
            "type": "array",
            "minItems": 2,
            "items": {
                "type": "object",
                "properties": {
                    "high": {"type": "number"},
                    "rain": {"type": "integer"},
                    "sunny": {"type": "boolean"},
                    "alert": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                },
                "required": ["high", "rain", "sunny", "alert"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["city", "note", "days"],
    "additionalProperties": False,
}
WEATHER_TOOL = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
    "required": ["city", "unit"],
}
CHAT_TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER_TOOL}}]
RESPONSE_TOOLS = [{"type": "function", "name": "get_weather", "parameters": WEATHER_TOOL}]
MESSAGES = [{"role": "user", "content": "The weather, as JSON?"}]
WRITE_SIZES = [None, 1, 3]


class Previews:
    """What a consumer sees: one mirror per JSON value, checked at every delta."""

    def __init__(self) -> None:
        self.texts: dict[Hashable, str] = {}
        self.mirrors: dict[Hashable, Any] = {}
        self.previews: dict[Hashable, Any] = {}
        self.deltas = 0

    def delta(
        self, key: Hashable, text: str, patches: tuple[chunkwise.Patch, ...], preview: Any
    ) -> None:
        """One delta event (its text and patches) and the newest snapshot's preview."""
        self.deltas += 1
        self.texts[key] = self.texts.get(key, "") + text
        mirror = self.mirrors[key] = chunkwise.apply_patches(self.mirrors.get(key), patches)
        now = chunkwise.partial_json(self.texts[key])  # read-only: arrays are tuples
        assert same_json(mirror, now)
        assert now is None or (preview is not None and grows(now, preview))
        old = self.previews.get(key)
        assert old is None or (preview is not None and grows(old, preview)), (old, preview)
        self.previews[key] = preview


def chat_request(model: str) -> dict[str, Any]:
    json_schema = {"name": "weather", "schema": SCHEMA, "strict": True}
    request: dict[str, Any] = {
        "model": model,
        "messages": MESSAGES,
        "response_format": {"type": "json_schema", "json_schema": json_schema},
    }
    if model == "tools":
        request["tools"] = CHAT_TOOLS
    return request


def responses_request(model: str) -> dict[str, Any]:
    text_format = {"type": "json_schema", "name": "weather", "schema": SCHEMA, "strict": True}
    request: dict[str, Any] = {"model": model, "input": "Weather?", "text": {"format": text_format}}
    if model == "tools":
        request["tools"] = RESPONSE_TOOLS
    return request


async def read_chat(model: str, write_size: int | None) -> tuple[chunkwise.chat.Result, Previews]:
    previews = Previews()
    async with emulator(write_size=write_size) as server:
        async with chunkwise.chat.open_stream(server.endpoint(), chat_request(model)) as stream:
            async for event in stream:
                snapshot = stream.snapshot
                if type(event) is chunkwise.chat.TextDelta:
                    choice = snapshot.choices[event.choice_index]
                    previews.delta(
                        event.choice_index, event.text, event.patches, choice.partial_parsed
                    )
                elif type(event) is chunkwise.chat.ToolCallArgumentsDelta:
                    choice = snapshot.choices[event.choice_index]
                    call = choice.tool_calls[event.tool_index]
                    key = (event.choice_index, event.tool_index)
                    previews.delta(key, event.fragment, event.patches, call.partial_arguments)
            result = await stream.result()
    return result, previews


async def read_responses(
    model: str, write_size: int | None
) -> tuple[chunkwise.responses.Result, Previews]:
    previews = Previews()
    request = responses_request(model)
    async with emulator(write_size=write_size) as server:
        async with chunkwise.responses.open_stream(server.endpoint(), request) as stream:
            async for event in stream:
                snapshot = stream.snapshot
                if type(event) is chunkwise.responses.TextDelta:
                    previews.delta("text", event.text, event.patches, snapshot.partial_parsed)
                elif type(event) is chunkwise.responses.ToolCallArgumentsDelta:
                    (call,) = [i.call for i in snapshot.output if i.index == event.output_index]
                    assert call is not None  # a function_call item shows its call as it streams
                    previews.delta(
                        event.output_index, event.fragment, event.patches, call.partial_arguments
                    )
            result = await stream.result()
    return result, previews


@pytest.mark.parametrize("write_size", WRITE_SIZES)
async def test_chat_structured_answer_previews_end_at_parsed(write_size: int | None) -> None:
    result, previews = await read_chat("text", write_size)
    assert result.status == "complete"
    parsed = result.choices[0].parsed
    assert isinstance(parsed, dict) and parsed["days"]
    assert previews.deltas > 10  # small fragments, many previews
    assert same_json(previews.mirrors[0], parsed)
    assert same_json(previews.previews[0], parsed)
    assert same_json(result.choices[0].partial_parsed, parsed)


@pytest.mark.parametrize("write_size", WRITE_SIZES)
async def test_chat_tool_call_previews_end_at_parse_arguments(write_size: int | None) -> None:
    result, previews = await read_chat("tools", write_size)
    assert result.status == "complete"
    calls = result.choices[0].tool_calls
    assert len(calls) == 2
    for call in calls:
        final = call.parse_arguments()
        assert call.error is None and isinstance(final, dict) and final
        key = (0, call.index)
        assert same_json(previews.mirrors[key], final)
        assert same_json(previews.previews[key], final)
        assert same_json(call.partial_arguments, final)


@pytest.mark.parametrize("write_size", WRITE_SIZES)
async def test_responses_structured_answer_previews_end_at_parsed(write_size: int | None) -> None:
    result, previews = await read_responses("text", write_size)
    assert result.status == "complete"
    parsed = result.parsed
    assert isinstance(parsed, dict) and parsed["days"]
    assert previews.deltas > 10
    assert same_json(previews.mirrors["text"], parsed)
    assert same_json(previews.previews["text"], parsed)
    assert same_json(result.partial_parsed, parsed)


@pytest.mark.parametrize("write_size", WRITE_SIZES)
async def test_responses_function_call_previews_end_at_parse_arguments(
    write_size: int | None,
) -> None:
    result, previews = await read_responses("tools", write_size)
    assert result.status == "complete"
    items = [item for item in result.output if item.call is not None]
    assert len(items) == 2
    for item in items:
        call = item.call
        assert call is not None
        final = call.parse_arguments()
        assert call.error is None and isinstance(final, dict) and final
        assert same_json(previews.mirrors[item.index], final)
        assert same_json(previews.previews[item.index], final)
        assert same_json(call.partial_arguments, final)

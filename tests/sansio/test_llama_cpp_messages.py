"""llama.cpp's ``llama-server`` answering Anthropic's ``POST /v1/messages``: real captures.

Captured by ``tests/llama_server/capture.py messages`` from llama-server (built
from llama-cpp-python 0.3.36's sources, ``messages_server.json``) serving the
scripted tiny model: without tools it answers :data:`SENTENCE`, with the
``get_weather`` tool it calls ``get_weather({"city": "Zürich"})``.  What the
captures show of llama.cpp: an empty ``text_delta`` first, ``chatcmpl-`` ids,
no ``ping``, ``cache_read_input_tokens`` in ``message_start``'s usage, a
``max_tokens`` stop mid-character held back.  Each is parsed exactly, in any
reads, and the official ``anthropic`` SDK's accumulation agrees.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chunkwise
from helpers.data import DATA
from helpers.reads import split_at

LLAMA = DATA / "llama_cpp"
SENTENCE = (
    'Hello world!\nThe tiny model streams café, 日本語 🙂 "quotes" back\\slash and jalapeño 😀.'
)


def request(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((LLAMA / f"messages_{name}.request.json").read_bytes())
    return loaded


def body(name: str) -> bytes:
    return (LLAMA / f"messages_{name}.sse").read_bytes()


def parse(name: str, reads: list[bytes]) -> tuple[list[Any], chunkwise.messages.Result]:
    parser = chunkwise.messages.Parser(tools=request(name).get("tools"))
    events: list[Any] = []
    for read in reads:
        events += parser.feed(read)
    events += parser.end()
    return events, parser.result


def test_the_text_answer() -> None:
    events, result = parse("text", [body("text")])
    assert (result.status, result.stop_reason, result.text) == ("complete", "end_turn", SENTENCE)
    assert result.model == "tiny" and result.id is not None and result.id.startswith("chatcmpl-")
    assert result.usage == {"cache_read_input_tokens": 0, "input_tokens": 15, "output_tokens": 27}
    assert result.anomalies == ()
    deltas = [e.text for e in events if type(e) is chunkwise.messages.TextDelta]
    # One delta a token, llama.cpp holding incomplete UTF-8 back: "ñ" arrives whole.
    assert "".join(deltas) == SENTENCE and " jalape" in deltas and "ñ" in deltas


def test_the_answer_not_streamed_is_the_same_message() -> None:
    document = json.loads((LLAMA / "messages_text_nonstream.json").read_bytes())
    _, result = parse("text", [body("text")])
    assert [block["text"] for block in document["content"]] == [result.text]
    assert (document["stop_reason"], document["usage"]) == (result.stop_reason, result.usage)


def test_max_tokens_stops_before_the_held_back_character() -> None:
    _, result = parse("max_tokens", [body("max_tokens")])
    assert (result.status, result.stop_reason) == ("complete", "max_tokens")
    assert result.text == SENTENCE[: SENTENCE.index("ñ")]
    assert result.usage is not None and result.usage["output_tokens"] == 18


def test_the_tool_call_streams_live_and_is_validated() -> None:
    events, result = parse("tool", [body("tool")])
    assert (result.status, result.stop_reason) == ("complete", "tool_use")
    [call] = result.tool_calls
    assert call.name == "get_weather" and call.finished
    assert call.parse_arguments() == {"city": "Zürich"}
    fragments = [e.fragment for e in events if type(e) is chunkwise.messages.ToolCallArgumentsDelta]
    assert fragments == ['{"', "city", '": "', "Zürich", '"}']
    value: Any = None
    for event in events:
        if type(event) is chunkwise.messages.ToolCallArgumentsDelta:
            value = chunkwise.apply_patches(value, event.patches)
    assert value == {"city": "Zürich"}


@settings(max_examples=30, deadline=None)
@given(
    name=st.sampled_from(["text", "max_tokens", "tool"]),
    cuts=st.lists(st.integers(0, 4096), max_size=12),
)
def test_every_capture_reads_the_same_at_any_split(name: str, cuts: list[int]) -> None:
    whole = parse(name, [body(name)])
    assert parse(name, split_at(body(name), cuts)) == whole


@pytest.mark.parametrize("name", ["text", "max_tokens", "tool"])
def test_the_anthropic_sdk_accumulates_the_same_message(name: str) -> None:
    pytest.importorskip("anthropic")
    from anthropic.lib.streaming._messages import accumulate_event

    decoder = chunkwise.SSEDecoder()
    snapshot: Any = None
    buffers: dict[int, bytes] = {}
    for event in [*decoder.feed(body(name)), *decoder.end()]:
        snapshot = accumulate_event(
            event=json.loads(event.data), current_snapshot=snapshot, json_bufs=buffers
        )
    _, result = parse(name, [body(name)])
    texts = [block.text for block in snapshot.content if block.type == "text"]
    inputs = [block.input for block in snapshot.content if block.type == "tool_use"]
    assert "".join(texts) == result.text
    assert inputs == [call.parse_arguments() for call in result.tool_calls]
    assert snapshot.stop_reason == result.stop_reason
    assert result.usage is not None
    assert snapshot.usage.output_tokens == result.usage["output_tokens"]

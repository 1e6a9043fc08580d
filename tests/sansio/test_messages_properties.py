"""Hypothesis: generated Messages streams give one result however they are split, and the
``anthropic`` SDK's own accumulation (``accumulate_event``) agrees with it.

The streams hold text, thinking (with a signature) and ``tool_use`` blocks, pings
between events, unicode with astral characters, and fragments of any size.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import chunkwise
from helpers.bodies import (
    MESSAGE_STOP,
    PING,
    block_delta,
    block_start,
    block_stop,
    message_delta,
    message_start,
    sse_typed,
)
from helpers.reads import parse_message, split_at, split_text

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TEXT = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)
JSON_VALUES = st.dictionaries(
    st.text(max_size=5), st.one_of(st.integers(), TEXT, st.booleans(), st.none()), max_size=4
)


@st.composite
def message_streams(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A whole Messages stream, decoded: its events in order."""
    start_usage = {"input_tokens": draw(st.integers(0, 999)), "output_tokens": 1}
    events: list[dict[str, Any]] = [message_start(usage=start_usage)]
    kinds = draw(st.lists(st.sampled_from(["text", "thinking", "tool_use"]), max_size=4))
    for index, kind in enumerate(kinds):
        if kind == "text":
            events.append(block_start(index, {"type": "text", "text": ""}))
            for piece in draw(st.lists(TEXT, max_size=4)):
                events.append(block_delta(index, {"type": "text_delta", "text": piece}))
        elif kind == "thinking":
            events.append(block_start(index, {"type": "thinking", "thinking": "", "signature": ""}))
            for piece in draw(st.lists(TEXT, max_size=4)):
                events.append(block_delta(index, {"type": "thinking_delta", "thinking": piece}))
            signature = draw(st.text("abcXYZ0123+/=", min_size=1, max_size=20))
            events.append(block_delta(index, {"type": "signature_delta", "signature": signature}))
        else:
            block = {"type": "tool_use", "id": f"toolu_{index}", "name": "f", "input": {}}
            events.append(block_start(index, block))
            text = json.dumps(draw(JSON_VALUES), ensure_ascii=draw(st.booleans()))
            for piece in split_text(text, draw(st.lists(st.integers(0, len(text)), max_size=4))):
                events.append(
                    block_delta(index, {"type": "input_json_delta", "partial_json": piece})
                )
        events.append(block_stop(index))
        if draw(st.booleans()):
            events.append(PING)
    usage = {"output_tokens": draw(st.integers(1, 999))}
    stop = "tool_use" if "tool_use" in kinds else "end_turn"
    events += [message_delta(stop, usage), MESSAGE_STOP]
    return events


@SETTINGS
@given(events=message_streams(), data=st.data())
def test_every_split_gives_the_same_events_and_result(
    events: list[Any], data: st.DataObject
) -> None:
    body = sse_typed(*events, eol=data.draw(st.sampled_from(["\n", "\r\n", "\r"])))
    whole = parse_message([body])
    cuts = data.draw(st.lists(st.integers(0, len(body)), max_size=12))
    assert parse_message(split_at(body, cuts)) == whole
    assert whole[1].status == "complete" and whole[1].anomalies == ()


@SETTINGS
@given(events=message_streams())
def test_deltas_add_up_to_the_blocks(events: list[Any]) -> None:
    out, result = parse_message([sse_typed(*events)])
    texts: dict[int, str] = {}
    for e in out:
        if isinstance(e, (chunkwise.messages.TextDelta, chunkwise.messages.ThinkingDelta)):
            texts[e.index] = texts.get(e.index, "") + e.text
        elif isinstance(e, chunkwise.messages.ToolCallArgumentsDelta):
            texts[e.index] = texts.get(e.index, "") + e.fragment
    for block in result.content:
        got = block.text or block.thinking or (block.call.arguments if block.call else "")
        assert texts.get(block.index, "") == got


# -- the anthropic SDK as a differential oracle -----------------------------------------


def sdk_snapshot(events: list[dict[str, Any]]) -> Any:
    streaming = pytest.importorskip("anthropic.lib.streaming._messages")
    snapshot = None
    bufs: dict[int, bytes] = {}
    for event in events:
        if event["type"] != "ping":  # the SDK's stream drops it before accumulating
            snapshot = streaming.accumulate_event(
                event=event, current_snapshot=snapshot, json_bufs=bufs
            )
    return snapshot


def compare_with_sdk(events: list[dict[str, Any]]) -> None:
    _, ours = parse_message([sse_typed(*events)])
    theirs = sdk_snapshot(events)
    assert [b.type for b in ours.content] == [b.type for b in theirs.content]
    for mine, sdk in zip(ours.content, theirs.content, strict=True):
        if sdk.type == "text":
            assert mine.text == sdk.text
            assert [dict(c) for c in mine.citations] == [
                c.model_dump() for c in sdk.citations or ()
            ]
        elif sdk.type == "thinking":
            assert (mine.thinking, mine.signature) == (sdk.thinking, sdk.signature)
        elif sdk.type == "tool_use":
            assert mine.call is not None and mine.call.parse_arguments() == sdk.input
            assert (mine.call.id, mine.call.name) == (sdk.id, sdk.name)
    usage = {k: v for k, v in theirs.usage.model_dump().items() if v is not None}
    assert ours.usage == usage
    assert (ours.stop_reason, ours.stop_sequence) == (theirs.stop_reason, theirs.stop_sequence)
    assert (ours.id, ours.model, ours.role) == (theirs.id, theirs.model, theirs.role)


@SETTINGS
@given(events=message_streams())
def test_generated_streams_agree_with_the_sdk(events: list[Any]) -> None:
    compare_with_sdk(events)


def test_citations_and_merged_cache_usage_agree_with_the_sdk() -> None:
    citation = {
        "type": "char_location",
        "cited_text": "The grass is green.",
        "document_index": 0,
        "document_title": "Facts",
        "start_char_index": 0,
        "end_char_index": 19,
        "file_id": None,
    }
    start = {
        "input_tokens": 12,
        "cache_creation_input_tokens": 5,
        "cache_read_input_tokens": 0,
        "output_tokens": 1,
    }
    events = [
        message_start(usage=start),
        block_start(0, {"type": "text", "text": "", "citations": []}),
        block_delta(0, {"type": "citations_delta", "citation": citation}),
        block_delta(0, {"type": "text_delta", "text": "The grass is green."}),
        block_stop(0),
        message_delta("end_turn", {"output_tokens": 9, "cache_read_input_tokens": 7}),
        MESSAGE_STOP,
    ]
    compare_with_sdk(events)


# -- where they differ (docs/differences.rst) ---------------------------------------------


def test_a_tool_input_that_is_not_json_raises_in_the_sdk_and_is_an_error_on_the_call() -> None:
    events = [
        message_start(),
        block_start(0, {"type": "tool_use", "id": "t", "name": "f", "input": {}}),
        block_delta(0, {"type": "input_json_delta", "partial_json": '{"a": tru'}),
        block_delta(0, {"type": "input_json_delta", "partial_json": "x}"}),
        block_stop(0),
        message_delta("tool_use"),
        MESSAGE_STOP,
    ]
    with pytest.raises(ValueError, match="Unable to parse tool parameter JSON"):
        sdk_snapshot(events)
    _, result = parse_message([sse_typed(*events)])
    assert result.status == "complete" and result.tool_calls[0].error is not None
    assert result.tool_calls[0].arguments == '{"a": trux}'


def test_a_delta_before_its_block_start_is_an_index_error_in_the_sdk() -> None:
    events = [message_start(), block_delta(0, {"type": "text_delta", "text": "Hi"})]
    with pytest.raises(IndexError):
        sdk_snapshot(events)
    _, result = parse_message([sse_typed(*events, block_stop(0), message_delta(), MESSAGE_STOP)])
    assert result.content[0].text == "Hi"
    assert [a.kind for a in result.anomalies] == ["event for an unknown block"]


def test_blocks_out_of_index_order_are_misaddressed_by_the_sdk() -> None:
    events = [
        message_start(),
        block_start(1, {"type": "text", "text": ""}),
        block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
        block_delta(1, {"type": "text_delta", "text": "one"}),
        block_delta(0, {"type": "thinking_delta", "thinking": "zero"}),
        block_stop(0),
        block_stop(1),
        message_delta(),
        MESSAGE_STOP,
    ]
    # The SDK's content[1] is the thinking block: the text delta for index 1 is
    # dropped there, and the thinking delta for index 0 dropped on the text block.
    theirs = sdk_snapshot(events)
    assert [
        (b.type, getattr(b, "text", None) or getattr(b, "thinking", "")) for b in theirs.content
    ] == [
        ("text", ""),
        ("thinking", ""),
    ]
    _, ours = parse_message([sse_typed(*events)])
    assert (ours.thinking, ours.text) == ("zero", "one")


def test_an_unknown_delta_type_is_silent_in_the_sdk_and_counted_here() -> None:
    odd = block_delta(0, {"type": "future_delta", "x": 1})
    events = [
        message_start(),
        block_start(0, {"type": "text", "text": ""}),
        odd,
        block_stop(0),
        message_delta(),
        MESSAGE_STOP,
    ]
    assert sdk_snapshot(events).content[0].text == ""
    _, ours = parse_message([sse_typed(*events)])
    assert [(a.kind, a.count) for a in ours.anomalies] == [("unknown delta type", 1)]

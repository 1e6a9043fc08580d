"""Anthropic Messages, sans-IO: what every event type and delta type becomes, and the rules.

The rules are :mod:`chunkwise.messages.accumulator`'s, numbered as there.
"""

from __future__ import annotations

import json
import typing
from typing import Any

import pytest

import chunkwise
from chunkwise.messages import (
    BlockStarted,
    BlockStopped,
    CitationAdded,
    TextDelta,
    ThinkingDelta,
    ToolCallArgumentsDelta,
    ToolCallCompleted,
    ToolCallStarted,
)
from helpers.bodies import (
    MESSAGE_STOP,
    PING,
    block_delta,
    block_start,
    block_stop,
    message_delta,
    message_events,
    message_start,
    sse_typed,
    text_block,
    tool_use_block,
)
from helpers.reads import accumulate_message, parse_message, terminal

WEATHER = {
    "name": "get_weather",
    "description": "The weather in a city",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}
CITATION = {
    "type": "char_location",
    "cited_text": "The grass is green.",
    "document_index": 0,
    "document_title": "Facts",
    "start_char_index": 0,
    "end_char_index": 19,
}


def kinds(result: chunkwise.messages.Result) -> list[str]:
    return [a.kind for a in result.anomalies]


def plain(value: Any) -> Any:
    """A snapshot's value as plain JSON (lists for its tuples)."""
    return json.loads(json.dumps(value))


def sdk_types(union: Any) -> set[str]:
    """The ``type`` values of the members of one of the SDK's discriminated unions."""
    members = typing.get_args(typing.get_args(union)[0])
    return {typing.get_args(m.model_fields["type"].annotation)[0] for m in members}


def content_events(events: list[chunkwise.Event]) -> list[chunkwise.Event]:
    """The events of the blocks alone (no usage, anomaly or terminal event)."""
    lifecycle = (chunkwise.UsageReported, chunkwise.AnomalyDetected, chunkwise.TerminalEvent)
    return [e for e in events if not isinstance(e, lifecycle)]


# -- every delta type: what it becomes (rule 2) --------------------------------------

DELTAS: list[tuple[str, dict[str, Any], dict[str, Any], list[Any], dict[str, Any]]] = [
    (
        "text_delta",
        {"type": "text", "text": ""},
        {"type": "text_delta", "text": "Hi"},
        [TextDelta(index=0, text="Hi")],
        {"text": "Hi"},
    ),
    (
        "thinking_delta",
        {"type": "thinking", "thinking": "", "signature": ""},
        {"type": "thinking_delta", "thinking": "Let me see."},
        [ThinkingDelta(index=0, text="Let me see.")],
        {"thinking": "Let me see.", "signature": ""},
    ),
    (
        "signature_delta",
        {"type": "thinking", "thinking": "", "signature": ""},
        {"type": "signature_delta", "signature": "EqQBCgIYAh"},
        [],
        {"signature": "EqQBCgIYAh"},
    ),
    (
        "input_json_delta",
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}},
        {"type": "input_json_delta", "partial_json": '{"city": "Paris"}'},
        [ToolCallStarted(index=0, id="toolu_1", name="get_weather")],
        {
            "data": {
                "type": "tool_use",
                "id": "toolu_1",
                "name": "get_weather",
                "input": {"city": "Paris"},
            }
        },
    ),
    (
        "citations_delta",
        {"type": "text", "text": ""},
        {"type": "citations_delta", "citation": CITATION},
        [CitationAdded(index=0, citation=CITATION)],
        {"citations": (CITATION,)},
    ),
]


@pytest.mark.parametrize(
    ("block", "delta", "expected", "fields"),
    [row[1:] for row in DELTAS],
    ids=[row[0] for row in DELTAS],
)
def test_every_delta_type_becomes_its_event_and_field(
    block: dict[str, Any], delta: dict[str, Any], expected: list[Any], fields: dict[str, Any]
) -> None:
    body = message_events([block_start(0, block), block_delta(0, delta), block_stop(0)])
    events, result = parse_message([sse_typed(*body)], tools=[WEATHER])
    started = [e for e in content_events(events) if not isinstance(e, (BlockStarted, BlockStopped))]
    # A tool's input fragment is a ToolCallArgumentsDelta (its patches checked below).
    assert [
        e for e in started if not isinstance(e, (ToolCallArgumentsDelta, ToolCallCompleted))
    ] == expected
    assert result.status == "complete" and result.anomalies == ()
    (content,) = result.content
    assert content.done and content.type == block["type"]
    for name, value in fields.items():
        assert getattr(content, name) == value


def test_the_table_covers_every_delta_type_the_sdk_declares() -> None:
    anthropic = pytest.importorskip("anthropic")
    declared = sdk_types(anthropic.types.RawContentBlockDelta)
    assert declared == {row[0] for row in DELTAS}


# -- every event type: what it becomes (rule 1) -------------------------------------

EVENT_TYPES: list[tuple[str, dict[str, Any], list[type[chunkwise.Event]]]] = [
    ("message_start", message_start(), [chunkwise.UsageReported]),
    ("content_block_start", block_start(0, {"type": "text", "text": ""}), [BlockStarted]),
    ("content_block_delta", block_delta(0, {"type": "text_delta", "text": "x"}), [TextDelta]),
    ("content_block_stop", block_stop(0), [BlockStopped]),
    ("ping", PING, []),
    ("message_delta", message_delta("end_turn"), [chunkwise.UsageReported]),
    ("message_stop", MESSAGE_STOP, [chunkwise.StreamCompleted]),
    (
        "error",
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        [chunkwise.StreamErrorReceived, chunkwise.StreamFailed],
    ),
]


@pytest.mark.parametrize(
    ("event", "expected"), [row[1:] for row in EVENT_TYPES], ids=[row[0] for row in EVENT_TYPES]
)
def test_every_event_type_becomes_its_events(
    event: dict[str, Any], expected: list[type[chunkwise.Event]]
) -> None:
    before = [message_start(), block_start(0, {"type": "text", "text": ""})]
    if event["type"] in ("content_block_stop", "message_start", "content_block_start"):
        before = [message_start(), block_start(1, {"type": "text", "text": ""})]
        before = before[1:] if event["type"] == "message_start" else before
    accumulator = chunkwise.messages.Accumulator()
    for earlier in before:
        accumulator.feed(earlier)
    if event["type"] == "content_block_stop":
        accumulator.feed(block_start(0, {"type": "text", "text": ""}))
    if event["type"] == "content_block_start":
        accumulator = chunkwise.messages.Accumulator()
        accumulator.feed(message_start())
    events = accumulator.feed(event)
    assert [type(e) for e in events] == expected
    assert not any(isinstance(e, chunkwise.AnomalyDetected) for e in events)


def test_the_table_covers_every_event_type_the_sdk_declares() -> None:
    anthropic = pytest.importorskip("anthropic")
    declared = sdk_types(anthropic.types.RawMessageStreamEvent)
    # ping and error are on the wire only: the SDK's stream drops ping and raises on error.
    assert declared | {"ping", "error"} == {row[0] for row in EVENT_TYPES}


def test_an_unknown_event_type_is_one_counted_anomaly() -> None:
    odd = {"type": "message_annotation", "x": 1}
    body = message_events(text_block(0, "Hi"))
    _, result = parse_message([sse_typed(body[0], odd, odd, *body[1:])])
    assert result.status == "complete" and result.text == "Hi"
    (anomaly,) = result.anomalies
    assert (anomaly.kind, anomaly.count) == ("unknown event type", 2)


def test_an_unknown_delta_type_is_one_counted_anomaly() -> None:
    odd = block_delta(0, {"type": "compaction_delta", "content": "..."})
    body = message_events([*text_block(0, "Hi")[:2], odd, odd, block_stop(0)])
    _, result = parse_message([sse_typed(*body)])
    assert result.text == "Hi" and result.status == "complete"
    (anomaly,) = result.anomalies
    assert (anomaly.kind, anomaly.count) == ("unknown delta type", 2)


def test_the_event_field_names_an_event_without_type() -> None:
    body = (
        b"event: message_start\ndata: "
        + json.dumps({k: v for k, v in message_start().items() if k != "type"}).encode()
        + b"\n\n"
    )
    _, result = parse_message([body])
    assert result.id == "msg_1" and result.anomalies == ()


# -- rule 2: blocks by index ----------------------------------------------------------


def test_blocks_are_kept_by_index_whatever_the_order() -> None:
    body = [
        message_start(),
        block_start(1, {"type": "text", "text": ""}),
        block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
        block_delta(1, {"type": "text_delta", "text": "answer"}),
        block_delta(0, {"type": "thinking_delta", "thinking": "thought"}),
        block_stop(0),
        block_stop(1),
        message_delta(),
        MESSAGE_STOP,
    ]
    _, result = parse_message([sse_typed(*body)])
    assert [(b.index, b.type) for b in result.content] == [(0, "thinking"), (1, "text")]
    assert (result.text, result.thinking) == ("answer", "thought")


def test_a_delta_for_an_unknown_block_creates_it_with_an_anomaly() -> None:
    body = message_events([block_delta(3, {"type": "text_delta", "text": "Hi"}), block_stop(3)])
    _, result = parse_message([sse_typed(*body)])
    assert result.content[0].text == "Hi" and kinds(result) == ["event for an unknown block"]


def test_a_delta_after_its_block_stopped_is_an_anomaly_and_changes_nothing() -> None:
    late = block_delta(0, {"type": "text_delta", "text": " more"})
    body = message_events([*text_block(0, "Hi"), late])
    _, result = parse_message([sse_typed(*body)])
    assert result.text == "Hi" and kinds(result) == ["delta after stop"]


def test_a_block_started_twice_is_an_anomaly_and_keeps_the_first() -> None:
    again = block_start(0, {"type": "tool_use", "id": "t", "name": "x", "input": {}})
    body = message_events([*text_block(0, "Hi")[:2], again, block_stop(0)])
    _, result = parse_message([sse_typed(*body)])
    assert result.content[0].type == "text" and kinds(result) == ["block started again"]


def test_text_sent_in_the_block_start_is_where_the_deltas_start() -> None:
    body = message_events(
        [
            block_start(0, {"type": "text", "text": "Hel"}),
            block_delta(0, {"type": "text_delta", "text": "lo"}),
            block_stop(0),
        ]
    )
    events, result = parse_message([sse_typed(*body)])
    assert result.text == "Hello"
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Hello"


def test_server_tool_blocks_are_kept_raw_with_their_streamed_input() -> None:
    result_block = {
        "type": "web_search_tool_result",
        "tool_use_id": "srvtoolu_1",
        "content": [{"type": "web_search_result", "url": "https://example.com", "title": "Ex"}],
    }
    body = message_events(
        [
            block_start(
                0,
                {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}},
            ),
            block_delta(0, {"type": "input_json_delta", "partial_json": '{"query": "weather"}'}),
            block_stop(0),
        ],
        [block_start(1, result_block), block_stop(1)],
        text_block(2, "Sunny."),
    )
    _, result = parse_message(
        [sse_typed(*body)], tools=[{"type": "web_search_20250305", "name": "web_search"}]
    )
    assert result.content[0].data is not None and result.content[0].data["input"] == {
        "query": "weather"
    }
    assert plain(result.content[1].data) == result_block
    assert result.tool_calls == () and result.text == "Sunny." and result.anomalies == ()


def test_the_server_running_its_tool_awaits_no_output() -> None:
    accumulator = chunkwise.messages.Accumulator()
    accumulator.feed(message_start())
    accumulator.feed(
        block_start(0, {"type": "server_tool_use", "id": "s", "name": "web_search", "input": {}})
    )
    assert accumulator.awaiting_output
    accumulator.feed(block_stop(0))
    assert not accumulator.awaiting_output  # the server runs the search
    accumulator.feed(
        block_start(1, {"type": "web_search_tool_result", "tool_use_id": "s", "content": []})
    )
    assert accumulator.awaiting_output


# -- rule 3: tool input -----------------------------------------------------------------


def test_tool_input_is_validated_against_the_request_tool_schema_at_its_stop() -> None:
    body = message_events(
        tool_use_block(0, "get_weather", '{"ci', 'ty": "Paris"}'), stop_reason="tool_use"
    )
    events, result = parse_message([sse_typed(*body)], tools=[WEATHER])
    (call,) = result.tool_calls
    assert (call.id, call.name, call.arguments) == ("toolu_1", "get_weather", '{"city": "Paris"}')
    assert call.finished and call.completed and call.validated and call.error is None
    assert call.parse_arguments() == {"city": "Paris"}
    completed = [e for e in events if isinstance(e, ToolCallCompleted)]
    assert completed == [ToolCallCompleted(index=0, call=call)]
    # Completed at the stop, before the block's BlockStopped.
    assert isinstance(events[events.index(completed[0]) + 1], BlockStopped)
    assert result.stop_reason == "tool_use"


@pytest.mark.parametrize(
    ("fragments", "message"),
    [
        (['{"city": 3}'], "do not match its schema"),
        (['{"city": "Pa'], "are not valid JSON"),
    ],
)
def test_tool_input_that_fails_is_an_error_on_the_call(fragments: list[str], message: str) -> None:
    body = message_events(tool_use_block(0, "get_weather", *fragments))
    _, result = parse_message([sse_typed(*body)], tools=[WEATHER])
    (call,) = result.tool_calls
    assert call.error is not None and message in call.error.message
    assert result.status == "complete"  # the stream is fine; the call is not


def test_a_tool_not_among_the_request_tools_is_an_error_on_the_call() -> None:
    body = message_events(tool_use_block(0, "launch", "{}"))
    _, result = parse_message([sse_typed(*body)], tools=[WEATHER])
    assert "not among the request's tools" in result.tool_calls[0].error.message  # type: ignore[union-attr]


def test_an_input_without_fragments_is_the_start_input() -> None:
    body = message_events(
        [
            block_start(
                0, {"type": "tool_use", "id": "t", "name": "get_weather", "input": {"city": "Oslo"}}
            ),
            block_stop(0),
        ]
    )
    _, result = parse_message([sse_typed(*body)], tools=[WEATHER])
    assert result.tool_calls[0].parse_arguments() == {"city": "Oslo"}
    assert result.tool_calls[0].validated


def test_a_call_cut_by_the_end_of_the_stream_is_completed_unfinished() -> None:
    body = message_events(tool_use_block(0, "get_weather", '{"city": "Pa'))[:-4]
    events, result = parse_message([sse_typed(*body)], tools=[WEATHER])
    (call,) = result.tool_calls
    assert call.completed and not call.finished and call.error is not None
    assert sum(isinstance(e, ToolCallCompleted) for e in events) == 1
    assert result.status == "incomplete"


def test_live_patches_reassemble_to_the_input() -> None:
    value = {"city": "Paris", "days": [1, 2, 3], "units": {"temp": "C"}, "note": "é 🌍"}
    text = json.dumps(value, ensure_ascii=False)
    fragments = [text[i : i + 3] for i in range(0, len(text), 3)]
    body = message_events(tool_use_block(0, "get_weather", *fragments))
    events, result = parse_message([sse_typed(*body)])
    mirror: Any = None
    for event in events:
        if isinstance(event, ToolCallArgumentsDelta):
            mirror = chunkwise.apply_patches(mirror, event.patches)
    assert mirror == value == plain(result.tool_calls[0].partial_arguments)
    assert "".join(e.fragment for e in events if isinstance(e, ToolCallArgumentsDelta)) == text


# -- rule 4: usage ----------------------------------------------------------------------


def test_usage_is_merged_from_message_start_and_message_delta() -> None:
    start_usage = {
        "input_tokens": 472,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 100,
        "output_tokens": 2,
    }
    body = [
        message_start(usage=start_usage),
        *text_block(0, "Hi"),
        message_delta("end_turn", {"output_tokens": 14, "input_tokens": None}),
        MESSAGE_STOP,
    ]
    events, result = parse_message([sse_typed(*body)])
    assert result.usage == {**start_usage, "output_tokens": 14}
    reported = [e.usage for e in events if isinstance(e, chunkwise.UsageReported)]
    assert reported == [start_usage, result.usage]


def test_stop_reason_and_sequence_are_kept_raw() -> None:
    body = [
        message_start(),
        *text_block(0, "Hi"),
        {
            "type": "message_delta",
            "delta": {"stop_reason": "stop_sequence", "stop_sequence": "END"},
            "usage": {"output_tokens": 3},
        },
        MESSAGE_STOP,
    ]
    _, result = parse_message([sse_typed(*body)])
    assert (result.stop_reason, result.stop_sequence, result.status) == (
        "stop_sequence",
        "END",
        "complete",
    )


# -- rule 5: errors -------------------------------------------------------------------


def test_an_error_mid_stream_ends_failed_with_its_type_and_keeps_what_came_before() -> None:
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    body = [message_start(), *text_block(0, "Par", "tial")[:3], error]
    events, result = parse_message([sse_typed(*body)])
    assert isinstance(terminal(events), chunkwise.StreamFailed)
    assert result.status == "failed" and result.text == "Partial"
    assert result.server_error is not None
    assert (result.server_error.type, result.server_error.message) == (
        "overloaded_error",
        "Overloaded",
    )


def test_an_error_event_whose_data_is_not_json_is_its_text() -> None:
    _, result = parse_message(
        [sse_typed(message_start()) + b"event: error\ndata: upstream died\n\n"]
    )
    assert result.status == "failed" and result.error == chunkwise.StreamError("upstream died")


# -- rule 6: the end -------------------------------------------------------------------


def test_no_message_stop_is_incomplete_whatever_arrived() -> None:
    body = message_events(text_block(0, "Hi"))[:-1]
    events, result = parse_message([sse_typed(*body)])
    assert isinstance(terminal(events), chunkwise.StreamIncomplete)
    assert (result.status, result.reason, result.text) == (
        "incomplete",
        chunkwise.IncompleteReason.UNFINISHED,
        "Hi",
    )
    assert result.stop_reason == "end_turn"


def test_an_empty_body_is_an_empty_stream() -> None:
    _, result = parse_message([b""])
    assert (result.status, result.reason) == ("incomplete", chunkwise.IncompleteReason.EMPTY_STREAM)


def test_ping_is_no_output_and_once_the_stop_reason_came_none_is_awaited() -> None:
    accumulator = chunkwise.messages.Accumulator()
    accumulator.feed(message_start())
    assert accumulator.feed(PING) == [] and accumulator.awaiting_output
    accumulator.feed(message_delta("end_turn"))
    assert not accumulator.awaiting_output


def test_done_and_empty_data_after_message_stop_are_a_proxy_close() -> None:
    body = sse_typed(*message_events(text_block(0, "Hi"))) + b"data: [DONE]\n\n"
    _, result = parse_message([body])
    assert result.status == "complete" and result.anomalies == ()


def test_decoded_events_give_the_same_result_as_the_body() -> None:
    body = message_events(text_block(0, "Hi"), tool_use_block(1, "get_weather", '{"city": "Rome"}'))
    assert accumulate_message(body, tools=[WEATHER]) == parse_message(
        [sse_typed(*body)], tools=[WEATHER]
    )


# -- rule 7: structured outputs ----------------------------------------------------------

FORMAT = {
    "type": "json_schema",
    "schema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
}


@pytest.mark.parametrize(
    ("text", "stop_reason", "parsed", "error"),
    [
        ('{"n": 3}', "end_turn", {"n": 3}, None),
        ('{"n": "3"}', "end_turn", None, "does not match the schema"),
        ('{"n": 3', "max_tokens", None, "cut short (max_tokens)"),
        ("I cannot help with that.", "refusal", None, None),
    ],
)
def test_a_structured_output_is_checked_at_message_stop(
    text: str, stop_reason: str, parsed: Any, error: str | None
) -> None:
    body = message_events(text_block(0, text[:4], text[4:]), stop_reason=stop_reason)
    events, result = parse_message([sse_typed(*body)], output_format=FORMAT)
    assert result.parsed == parsed
    if error is None:
        assert result.parse_error is None
    else:
        assert result.parse_error is not None and error in result.parse_error.message
    if parsed is not None:
        assert result.partial_parsed == parsed
        assert any(e.patches for e in events if isinstance(e, TextDelta))


def test_without_output_format_nothing_is_parsed() -> None:
    _, result = parse_message([sse_typed(*message_events(text_block(0, '{"n": 1}')))])
    assert (result.parsed, result.parse_error, result.partial_parsed) == (None, None, None)

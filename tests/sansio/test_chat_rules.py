"""The rules of the chat layer (DESIGN.md "Rules of the chat layer"), one test each."""

from __future__ import annotations

import json
from typing import Any

import pytest

import chunkwise
from chunkwise import (
    AnomalyDetected,
    IncompleteReason,
    StreamCompleted,
    StreamErrorReceived,
    StreamFailed,
    StreamIncomplete,
    UsageReported,
    chat,
)
from helpers.bodies import choice, chunk, sse, tool
from helpers.reads import accumulate, parse_chat, terminal

# -- content and choices ---------------------------------------------------------


def test_content_is_appended_exactly_without_trimming_or_separators() -> None:
    pieces = [" Hello", ",", "  world ", "\n", "", "!\t"]
    chunks = [chunk(choice(content=p)) for p in pieces]
    chunks.append(chunk(choice(finish_reason="stop")))
    events, result = accumulate(chunks)
    assert result.choice(0).content == " Hello,  world \n!\t"
    assert [e.text for e in events if isinstance(e, chat.TextDelta)] == [p for p in pieces if p]


def test_role_only_null_and_empty_deltas_emit_nothing() -> None:
    events, _ = accumulate(
        [
            chunk(choice(role="assistant")),
            chunk(choice(role="assistant", content="")),
            chunk(choice(content=None)),
            chunk(choice()),
        ]
    )
    assert [type(e) for e in events] == [StreamIncomplete]


def test_role_is_assigned_once_never_concatenated() -> None:
    _, result = accumulate(
        [chunk(choice(role="assistant", content="a")), chunk(choice(role="assistant", content="b"))]
    )
    assert result.choice(0).role == "assistant"


def test_stream_may_start_with_choice_index_one() -> None:
    _, result = accumulate([chunk(choice(1, content="x")), chunk(choice(1, finish_reason="stop"))])
    assert [c.index for c in result.choices] == [1]
    assert result.status == "complete"
    with pytest.raises(KeyError):
        result.choice(0)


def test_interleaved_choices_are_kept_apart_and_sorted_by_index() -> None:
    events, result = accumulate(
        [
            chunk(choice(2, content="c1")),
            chunk(choice(0, content="a1"), choice(1, content="b1")),
            chunk(choice(1, content="b2")),
            chunk(choice(0, content="a2"), choice(2, content="c2")),
            chunk(choice(0, finish_reason="stop")),
            chunk(choice(1, finish_reason="length"), choice(2, finish_reason="stop")),
        ]
    )
    assert [(c.index, c.content, c.finish_reason) for c in result.choices] == [
        (0, "a1a2", "stop"),
        (1, "b1b2", "length"),
        (2, "c1c2", "stop"),
    ]
    assert isinstance(terminal(events), StreamCompleted)


@pytest.mark.parametrize("content", [{"type": "text", "text": "x"}, 42, True])
def test_content_that_is_neither_a_string_nor_a_list_of_parts_is_recorded_not_appended(
    content: object,
) -> None:
    events, result = accumulate([chunk(choice(content=content))])
    assert result.choice(0).content == ""
    assert [a.kind for a in result.anomalies] == ["non-string content"]
    assert any(isinstance(e, AnomalyDetected) for e in events)


def test_refusal_and_reasoning_fields_stream_separately() -> None:
    events, result = accumulate(
        [
            chunk(choice(reasoning_content="think ")),
            chunk(choice(reasoning="more")),
            chunk(choice(refusal="I can't")),
            chunk(choice(content="ok", finish_reason="stop")),
        ]
    )
    c = result.choice(0)
    assert (c.reasoning, c.refusal, c.content) == ("think more", "I can't", "ok")
    kinds = [type(e) for e in events]
    assert kinds[:4] == [
        chat.ReasoningDelta,
        chat.ReasoningDelta,
        chat.RefusalDelta,
        chat.TextDelta,
    ]


def test_reasoning_content_and_reasoning_in_one_delta_are_not_doubled() -> None:
    _, result = accumulate([chunk(choice(reasoning_content="x", reasoning="x"))])
    assert result.choice(0).reasoning == "x"


def test_choice_without_delta_is_ignored_and_starts_no_completion() -> None:
    annotation: dict[str, Any] = {
        "index": 1,
        "finish_reason": None,
        "content_filter_results": {"hate": {}},
    }
    _, result = accumulate(
        [chunk(annotation), chunk(choice(0, content="hi", finish_reason="stop"))]
    )
    assert [c.index for c in result.choices] == [0]
    assert result.status == "complete"


def test_empty_choices_chunk_carries_usage_not_a_completion() -> None:
    usage = {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}
    events, result = accumulate(
        [
            chunk(choice(content="x", finish_reason="stop")),
            chunk(usage=usage, prompt_filter_results=[{"prompt_index": 0}]),
        ]
    )
    assert len(result.choices) == 1
    assert result.usage == usage
    assert UsageReported(usage=usage) in events


# -- finish reasons ----------------------------------------------------------------


@pytest.mark.parametrize(
    "reason",
    ["stop", "length", "tool_calls", "content_filter", "eos", "stop_sequence", "function_call"],
)
def test_finish_reason_is_kept_as_sent(reason: str) -> None:
    events, result = accumulate([chunk(choice(content="x", finish_reason=reason))])
    assert result.choice(0).finish_reason == reason
    assert chat.ChoiceFinished(choice_index=0, finish_reason=reason) in events
    assert result.status == "complete"


def test_finish_reason_is_never_cleared_by_a_later_null() -> None:
    _, result = accumulate(
        [
            chunk(choice(content="x", finish_reason="length")),
            chunk(choice(finish_reason=None)),
        ]
    )
    assert result.choice(0).finish_reason == "length"


def test_an_empty_finish_reason_reads_as_none_and_finishes_nothing() -> None:
    # TGI sends "" on every chunk: a cut stream must not show it as the reason.
    _, result = accumulate([chunk(choice(content="x", finish_reason=""))])
    assert result.choice(0).finish_reason is None
    assert not result.choice(0).finished
    assert result.status == "incomplete"


def test_finish_reason_error_fails_the_stream() -> None:
    events, result = accumulate([chunk(choice(content="partial", finish_reason="error"))])
    assert result.status == "failed"
    assert result.choice(0).content == "partial"
    assert isinstance(terminal(events), StreamFailed)


def test_content_after_finish_is_an_anomaly_not_merged() -> None:
    events, result = accumulate(
        [
            chunk(choice(content="done", finish_reason="stop")),
            chunk(choice(content=" extra")),
        ]
    )
    assert result.choice(0).content == "done"
    (anomaly,) = result.anomalies
    assert (anomaly.kind, anomaly.detail, anomaly.choice_index) == (
        "content after finish",
        " extra",
        0,
    )
    assert AnomalyDetected(anomaly=anomaly) in events
    assert result.status == "complete"


def test_second_different_finish_reason_is_an_anomaly_first_kept() -> None:
    _, result = accumulate(
        [chunk(choice(content="x", finish_reason="stop")), chunk(choice(finish_reason="length"))]
    )
    assert result.choice(0).finish_reason == "stop"
    assert [a.kind for a in result.anomalies] == ["second finish_reason"]


# -- status and the terminal event --------------------------------------------


def test_done_after_finished_choices_is_complete() -> None:
    events, result = parse_chat([sse(chunk(choice(content="x", finish_reason="stop")))])
    assert result.status == "complete" and result.done_received
    assert isinstance(terminal(events), StreamCompleted)


def test_missing_done_with_finished_choices_is_still_complete() -> None:
    events, result = parse_chat([sse(chunk(choice(content="x", finish_reason="stop")), done=False)])
    assert result.status == "complete"
    assert not result.done_received
    assert isinstance(terminal(events), StreamCompleted)


def test_done_without_finish_reason_is_complete_with_one_anomaly_per_choice() -> None:
    # [DONE] is the server's word that the stream is over (Snowflake Cortex
    # and some OpenRouter upstreams never send a finish_reason).
    body = sse(chunk(choice(0, content="a"), choice(1, content="b")), chunk(choice(1, content="c")))
    events, result = parse_chat([body])
    assert (result.status, result.reason) == ("complete", None)
    assert [(c.content, c.finish_reason, c.finished) for c in result.choices] == [
        ("a", None, True),
        ("bc", None, True),
    ]
    assert [(a.kind, a.choice_index) for a in result.anomalies] == [
        ("missing finish_reason", 0),
        ("missing finish_reason", 1),
    ]
    assert not any(isinstance(e, chat.ChoiceFinished) for e in events)
    assert isinstance(terminal(events), StreamCompleted)


def test_no_finish_reason_and_no_done_is_incomplete_not_success() -> None:
    events, result = parse_chat([sse(chunk(choice(content="partial")), done=False)])
    assert result.status == "incomplete"
    assert result.reason is IncompleteReason.UNFINISHED
    assert result.choice(0).content == "partial"
    assert not result.choice(0).finished and not result.anomalies
    last = terminal(events)
    assert isinstance(last, StreamIncomplete) and last.reason is IncompleteReason.UNFINISHED


def test_zero_chunks_then_done_is_a_typed_empty_stream() -> None:
    events, result = parse_chat([b"data: [DONE]\n\n"])
    assert result.status == "incomplete"
    assert result.reason is IncompleteReason.EMPTY_STREAM
    assert result.done_received
    assert events == [StreamIncomplete(result=result, reason=IncompleteReason.EMPTY_STREAM)]


def test_nothing_at_all_is_an_empty_stream() -> None:
    events, result = parse_chat([])
    assert result.reason is IncompleteReason.EMPTY_STREAM
    assert len(events) == 1


def test_events_after_done_are_ignored() -> None:
    body = sse(chunk(choice(content="x", finish_reason="stop"))) + sse(
        chunk(choice(content="late")), done=False
    )
    events, result = parse_chat([body])
    assert result.choice(0).content == "x"
    assert isinstance(events[-1], StreamCompleted)
    assert [a.kind for a in result.anomalies] == ["data after [DONE]"]


@pytest.mark.parametrize("line", [b"data: [DONE]\n\n", b"data:[DONE]\n\n"])
def test_done_matches_with_or_without_the_space(line: bytes) -> None:
    _, result = parse_chat(
        [sse(chunk(choice(content="x", finish_reason="stop")), done=False) + line]
    )
    assert result.done_received


@pytest.mark.parametrize("data", [b"data:  [DONE]\n\n", b"data: [DONE] \n\n", b"data: [done]\n\n"])
def test_done_is_an_exact_match(data: bytes) -> None:
    _, result = parse_chat([data])
    assert not result.done_received
    assert result.status == "failed"
    assert isinstance(result.error, chunkwise.errors.InvalidChunk)


def test_exactly_one_terminal_event_even_when_end_is_called_twice() -> None:
    parser = chunkwise.chat.Parser()
    events = parser.feed(sse(chunk(choice(content="x", finish_reason="stop"))))
    events += parser.end()
    events += parser.end()
    terminal(events)
    with pytest.raises(chunkwise.LocalProtocolError):
        parser.feed(b"data: {}\n\n")


def test_result_is_readable_mid_stream_and_says_streaming() -> None:
    parser = chunkwise.chat.Parser()
    parser.feed(sse(chunk(choice(content="hel")), done=False))
    assert parser.result.status == "streaming"
    assert parser.result.content == "hel"
    parser.feed(sse(chunk(choice(content="lo")), done=False))
    assert parser.result.content == "hello"


# -- usage ---------------------------------------------------------------------------


def test_last_non_null_usage_wins_and_null_never_erases_it() -> None:
    u1 = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    u2 = {"prompt_tokens": 1, "completion_tokens": 5, "total_tokens": 6, "cost": 0.1}
    _, result = accumulate(
        [
            chunk(choice(content="a"), usage=u1),
            chunk(choice(content="b", finish_reason="stop"), usage=u2),
            {**chunk(), "usage": None},
        ]
    )
    assert result.usage == u2


def test_usage_on_the_last_content_chunk_is_taken() -> None:
    usage = {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}
    _, result = accumulate([chunk(choice(content="a", finish_reason="stop"), usage=usage)])
    assert result.usage == usage


def test_usage_under_x_groq_is_taken() -> None:
    usage = {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}
    _, result = accumulate(
        [chunk(choice(content="a", finish_reason="stop"), x_groq={"id": "r", "usage": usage})]
    )
    assert result.usage == usage


def test_usage_extra_keys_are_kept() -> None:
    usage = {
        "prompt_tokens": 3,
        "completion_tokens": 4,
        "total_tokens": 7,
        "cost": 1e-5,
        "completion_tokens_details": {"reasoning_tokens": 2},
    }
    _, result = accumulate([chunk(usage=usage)])
    assert result.usage == usage


# -- errors ------------------------------------------------------------------------------


def test_error_payload_with_string_message_fails_and_keeps_content() -> None:
    body = sse(
        chunk(choice(content="partial ")),
        {"error": {"message": "overloaded", "type": "server_error", "code": 503}},
        done=False,
    )
    events, result = parse_chat([body])
    assert result.status == "failed"
    assert result.choice(0).content == "partial "
    error = result.server_error
    assert error is not None
    assert (error.message, error.type, error.code) == ("overloaded", "server_error", 503)
    assert StreamErrorReceived(error=error) in events
    last = terminal(events)
    assert isinstance(last, StreamFailed) and last.error == error


def test_error_message_that_is_an_object_is_kept_as_json_text() -> None:
    body = sse({"error": {"message": {"detail": "bad"}, "code": "rate_limit"}}, done=False)
    _, result = parse_chat([body])
    assert result.server_error is not None
    assert json.loads(result.server_error.message) == {"detail": "bad"}
    assert result.server_error.code == "rate_limit"


def test_error_as_a_plain_string() -> None:
    _, result = parse_chat([sse({"error": "upstream timed out"}, done=False)])
    assert result.server_error is not None
    assert result.server_error.message == "upstream timed out"


def test_sse_event_type_error_is_an_error_payload() -> None:
    body = b'event: error\ndata: {"message": "boom", "code": 500}\n\n'
    _, result = parse_chat([sse(chunk(choice(content="a")), done=False) + body])
    assert result.status == "failed"
    assert result.server_error is not None
    assert (result.server_error.message, result.server_error.code) == ("boom", 500)
    assert result.choice(0).content == "a"


def test_sse_event_type_error_with_non_json_data() -> None:
    _, result = parse_chat([b"event: error\ndata: something broke\n\n"])
    assert result.server_error is not None
    assert result.server_error.message == "something broke"


def test_legacy_error_field_line_is_an_error_payload() -> None:
    body = b'error: {"code": 500, "message": "llama crashed", "type": "server_error"}\n\n'
    _, result = parse_chat([sse(chunk(choice(content="a")), done=False) + body])
    assert result.status == "failed"
    assert result.server_error is not None
    assert result.server_error.message == "llama crashed"


def test_object_error_body_is_an_error_payload() -> None:
    body = sse({"object": "error", "message": "model not found", "type": "NotFoundError"})
    _, result = parse_chat([body])
    assert result.server_error is not None
    assert result.server_error.message == "model not found"
    assert result.server_error.type == "NotFoundError"


def test_finish_reason_error_next_to_an_error_object_keeps_both() -> None:
    # OpenRouter's mid-stream error chunk: the choice ends with finish_reason
    # "error" and the chunk carries the error object.
    error_chunk = {
        "id": "gen-1",
        "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}],
        "error": {"message": "Provider returned error", "code": 502},
    }
    body = sse(chunk(choice(content="partial")), error_chunk, done=False)
    events, result = parse_chat([body])
    assert result.status == "failed"
    assert result.choice(0).finish_reason == "error"
    assert result.choice(0).content == "partial"
    error = result.server_error
    assert error is not None
    assert (error.message, error.code) == ("Provider returned error", 502)
    kinds = [type(e) for e in events]
    assert kinds[-3:] == [chat.ChoiceFinished, StreamErrorReceived, StreamFailed]
    assert events[-3] == chat.ChoiceFinished(choice_index=0, finish_reason="error")
    assert terminal(events) == StreamFailed(result=result, error=error)


def test_ill_shaped_choices_next_to_an_error_object_fail_with_the_servers_error() -> None:
    events, result = parse_chat([sse({"error": {"message": "boom"}, "choices": "x"}, done=False)])
    assert result.server_error is not None
    assert result.server_error.message == "boom"
    assert [a.kind for a in result.anomalies] == ["invalid chunk"]
    assert isinstance(terminal(events), StreamFailed)


def test_done_after_an_error_does_not_make_it_complete() -> None:
    body = sse({"error": {"message": "x"}}, done=True)
    events, result = parse_chat([body])
    assert result.status == "failed"
    terminal(events)


# -- tool calls ------------------------------------------------------------------------


def test_tool_call_fragments_are_concatenated_and_parsed_when_the_choice_finishes() -> None:
    events, result = accumulate(
        [
            chunk(choice(tool_calls=[tool(0, id="call_1", name="get", arguments="")])),
            chunk(choice(tool_calls=[tool(0, arguments='{"ci')])),
            chunk(choice(tool_calls=[tool(0, arguments='ty": "Paris"}')])),
            chunk(choice(finish_reason="tool_calls")),
        ]
    )
    (call,) = result.choice(0).tool_calls
    assert (call.id, call.name, call.type, call.arguments) == (
        "call_1",
        "get",
        "function",
        '{"city": "Paris"}',
    )
    assert call.parse_arguments() == {"city": "Paris"}
    assert [type(e) for e in events] == [
        chat.ToolCallStarted,
        chat.ToolCallArgumentsDelta,
        chat.ToolCallArgumentsDelta,
        chat.ToolCallCompleted,
        chat.ChoiceFinished,
        StreamCompleted,
    ]


def test_arguments_are_appended_even_when_the_first_fragment_is_complete_json() -> None:
    _, result = accumulate(
        [
            chunk(choice(tool_calls=[tool(0, id="c", name="f", arguments="{}")])),
            chunk(choice(tool_calls=[tool(0, arguments="{}")])),
            chunk(choice(finish_reason="tool_calls")),
        ]
    )
    (call,) = result.choice(0).tool_calls
    assert call.arguments == "{}{}"
    assert isinstance(call.error, chunkwise.ToolArgumentsError)


def test_whole_call_in_one_delta_and_several_calls_in_one_delta() -> None:
    _, result = accumulate(
        [
            chunk(
                choice(
                    tool_calls=[
                        tool(0, id="a", name="f", arguments='{"x": 1}'),
                        tool(1, id="b", name="g", arguments='{"y": 2}'),
                    ]
                )
            ),
            chunk(choice(finish_reason="tool_calls")),
        ]
    )
    calls = result.choice(0).tool_calls
    assert [(c.id, c.name, c.parse_arguments()) for c in calls] == [
        ("a", "f", {"x": 1}),
        ("b", "g", {"y": 2}),
    ]


def test_null_index_new_id_opens_a_new_call_and_no_id_continues_the_last() -> None:
    _, result = accumulate(
        [
            chunk(choice(tool_calls=[tool(None, id="a", name="f", arguments='{"x"')])),
            chunk(choice(tool_calls=[tool(None, arguments=": 1}")])),
            chunk(choice(tool_calls=[tool(None, id="b", name="g", arguments="{}")])),
            chunk(choice(finish_reason="tool_calls")),
        ]
    )
    calls = result.choice(0).tool_calls
    assert [(c.index, c.id, c.name, c.arguments) for c in calls] == [
        (0, "a", "f", '{"x": 1}'),
        (1, "b", "g", "{}"),
    ]


def test_repeated_identical_id_is_the_same_call_not_concatenated() -> None:
    _, result = accumulate(
        [
            chunk(choice(tool_calls=[tool(None, id="call_x", name="f", arguments='{"a":')])),
            chunk(choice(tool_calls=[tool(None, id="call_x", arguments="1}")])),
            chunk(choice(finish_reason="tool_calls")),
        ]
    )
    (call,) = result.choice(0).tool_calls
    assert call.id == "call_x"
    assert call.parse_arguments() == {"a": 1}


def test_repeated_identical_id_with_index_is_the_same_call() -> None:
    _, result = accumulate(
        [
            chunk(choice(tool_calls=[tool(0, id="call_x", name="f", arguments='{"a":')])),
            chunk(choice(tool_calls=[tool(0, id="call_x", name="f", arguments="1}")])),
            chunk(choice(finish_reason="tool_calls")),
        ]
    )
    (call,) = result.choice(0).tool_calls
    assert (call.id, call.name, call.arguments) == ("call_x", "f", '{"a":1}')


def test_empty_string_id_means_no_id() -> None:
    _, result = accumulate(
        [
            chunk(choice(tool_calls=[tool(None, id="a", name="f", arguments="{")])),
            chunk(choice(tool_calls=[tool(None, id="", arguments="}")])),
            chunk(choice(finish_reason="tool_calls")),
        ]
    )
    (call,) = result.choice(0).tool_calls
    assert (call.id, call.arguments) == ("a", "{}")


def test_name_is_set_once_and_null_or_empty_never_overwrite() -> None:
    first = tool(0, id="a", name="lookup", arguments="")
    again = {"index": 0, "function": {"name": "", "arguments": "{}"}}
    null = {"index": 0, "function": {"name": None, "arguments": None}}
    _, result = accumulate(
        [chunk(choice(tool_calls=[first])), chunk(choice(tool_calls=[again, null]))]
    )
    assert result.choice(0).tool_calls[0].name == "lookup"


def test_same_index_with_a_different_id_is_a_new_call() -> None:
    _, result = accumulate(
        [
            chunk(choice(tool_calls=[tool(0, id="a", name="f", arguments="{}")])),
            chunk(choice(tool_calls=[tool(0, id="b", name="g", arguments="[]")])),
            chunk(choice(finish_reason="tool_calls")),
        ]
    )
    calls = result.choice(0).tool_calls
    assert [(c.id, c.arguments) for c in calls] == [("a", "{}"), ("b", "[]")]
    assert [a.kind for a in result.anomalies] == ["tool index reused"]


def test_parallel_tool_calls_in_two_choices_are_separate() -> None:
    _, result = accumulate(
        [
            chunk(
                choice(0, tool_calls=[tool(0, id="a", name="f", arguments="{")]),
                choice(1, tool_calls=[tool(0, id="b", name="f", arguments="[")]),
            ),
            chunk(choice(0, tool_calls=[tool(0, arguments="}")])),
            chunk(choice(1, tool_calls=[tool(0, arguments="]")])),
            chunk(choice(0, finish_reason="tool_calls"), choice(1, finish_reason="tool_calls")),
        ]
    )
    assert result.choice(0).tool_calls[0].parse_arguments() == {}
    assert result.choice(1).tool_calls[0].parse_arguments() == []


def test_tool_call_completed_once_even_if_finish_arrives_twice() -> None:
    events, _ = accumulate(
        [
            chunk(choice(tool_calls=[tool(0, id="a", name="f", arguments="{}")])),
            chunk(choice(finish_reason="tool_calls")),
            chunk(choice(finish_reason="tool_calls")),
        ]
    )
    assert sum(isinstance(e, chat.ToolCallCompleted) for e in events) == 1


def test_unfinished_tool_call_is_completed_at_end_of_stream_and_marked() -> None:
    events, result = parse_chat(
        [
            sse(
                chunk(choice(tool_calls=[tool(0, id="a", name="f", arguments='{"x": 1')])),
                done=False,
            )
        ]
    )
    (call,) = result.choice(0).tool_calls
    assert call.completed and not call.finished
    assert call.arguments == '{"x": 1'
    assert isinstance(call.error, chunkwise.ToolArgumentsError)
    assert "ended before the call finished" in str(call.error)
    assert result.status == "incomplete"
    completed = [e for e in events if isinstance(e, chat.ToolCallCompleted)]
    assert len(completed) == 1
    assert events.index(completed[0]) < len(events) - 1


def test_invalid_tool_arguments_give_a_typed_error_keeping_raw_text() -> None:
    _, result = accumulate(
        [
            chunk(choice(tool_calls=[tool(0, id="a", name="f", arguments="{not json")])),
            chunk(choice(finish_reason="tool_calls")),
        ]
    )
    (call,) = result.choice(0).tool_calls
    with pytest.raises(chunkwise.ToolArgumentsError) as info:
        call.parse_arguments()
    assert info.value.raw == "{not json"
    assert info.value.tool_name == "f"
    assert call.arguments == "{not json"


def test_tool_call_snapshot_mid_stream_parses_on_demand() -> None:
    acc = chunkwise.chat.Accumulator()
    acc.feed(chunk(choice(tool_calls=[tool(0, id="a", name="f", arguments="[1]")])))
    (call,) = acc.result.choice(0).tool_calls
    assert not call.completed
    assert call.parse_arguments() == [1]


@pytest.mark.parametrize(
    ("arguments", "text"),
    [
        pytest.param({"city": "Paris"}, '{"city":"Paris"}', id="object"),
        pytest.param(
            {"ville": "Zürich", "n": [1, 2.5]}, '{"ville":"Zürich","n":[1,2.5]}', id="nested"
        ),
        pytest.param({}, "{}", id="empty-object"),
        pytest.param([1, "a"], '[1,"a"]', id="list"),
        pytest.param(42, "42", id="number"),
        pytest.param(False, "false", id="bool"),
    ],
)
def test_tool_arguments_sent_as_a_json_value_are_kept_as_compact_json_text(
    arguments: object, text: str
) -> None:
    # Some OpenAI-compatible servers send "arguments" as a JSON value, not as
    # text: kept as its compact JSON text, appended like a fragment, and noted.
    call = {"index": 0, "id": "a", "type": "function"}
    call["function"] = {"name": "get_weather", "arguments": arguments}
    events, result = accumulate(
        [chunk(choice(tool_calls=[call])), chunk(choice(finish_reason="tool_calls"))]
    )
    (got,) = result.choice(0).tool_calls
    assert got.arguments == text
    assert got.parse_arguments() == arguments
    patches = chunkwise.PartialJSON().feed(text)  # the arguments' live value, whole at once
    assert (
        chat.ToolCallArgumentsDelta(choice_index=0, tool_index=0, fragment=text, patches=patches)
        in events
    )
    assert [a.kind for a in result.anomalies] == ["non-string arguments"]
    assert result.status == "complete"


def test_null_tool_arguments_are_nothing_and_no_anomaly() -> None:
    call = {"index": 0, "id": "a", "function": {"name": "f", "arguments": None}}
    events, result = accumulate(
        [
            chunk(choice(tool_calls=[call])),
            chunk(choice(tool_calls=[tool(0, arguments="{}")])),
            chunk(choice(finish_reason="tool_calls")),
        ]
    )
    assert result.choice(0).tool_calls[0].arguments == "{}"
    assert [e.fragment for e in events if isinstance(e, chat.ToolCallArgumentsDelta)] == ["{}"]
    assert not result.anomalies


# -- bad input ----------------------------------------------------------------------------


def test_invalid_json_fails_with_typed_error_and_keeps_what_came_before() -> None:
    body = sse(chunk(choice(content="kept")), done=False) + b"data: {not json\n\n"
    events, result = parse_chat([body])
    assert result.status == "failed"
    assert isinstance(result.error, chunkwise.errors.InvalidChunk)
    assert result.error.data == "{not json"
    assert result.choice(0).content == "kept"
    assert isinstance(terminal(events), StreamFailed)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"data: 42\n\n", "JSON int, not an object"),
        (b'data: "text"\n\n', "JSON str, not an object"),
        (b"data: [1, 2]\n\n", "JSON list, not an object"),
        (b'data: {"choices": {"0": {}}}\n\n', "'choices' is dict, not a list"),
        (b'data: {"choices": [42]}\n\n', "a choice is int, not an object"),
        (b'data: {"choices": [{"index": "0", "delta": {}}]}\n\n', "choice index '0'"),
        (b'data: {"choices": [{"index": 0, "delta": "x"}]}\n\n', "delta of choice 0 is str"),
    ],
)
def test_ill_shaped_chunks_fail_with_invalid_chunk(data: bytes, message: str) -> None:
    prefix = sse(chunk(choice(content="kept")), done=False)
    events, result = parse_chat([prefix + data])
    assert isinstance(result.error, chunkwise.errors.InvalidChunk)
    assert isinstance(result.error, chunkwise.RemoteProtocolError)
    assert message in str(result.error)
    assert result.choice(0).content == "kept"
    assert isinstance(terminal(events), StreamFailed)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        pytest.param(b"[" * 5000 + b"]" * 5000, "nested deeper", id="deeply-nested"),
        pytest.param(
            b'{"choices": [], "usage": {"total_tokens": ' + b"9" * 5000 + b"}}",
            "integer string conversion",
            id="integer-with-too-many-digits",
        ),
        pytest.param(b'{"choices": [], "usage": {"cost": NaN}}', "NaN is not", id="nan"),
        pytest.param(b'{"usage": {"cost": Infinity}}', "Infinity is not", id="infinity"),
        pytest.param(b'{"usage": {"cost": -Infinity}}', "-Infinity is not", id="minus-infinity"),
    ],
)
def test_json_the_parser_cannot_take_fails_with_invalid_chunk_keeping_earlier_output(
    data: bytes, message: str
) -> None:
    prefix = sse(chunk(choice(content="kept")), done=False)
    body = prefix + b"data: " + data + b"\n\n"
    for reads in ([body], [body[:100], body[100:]]):
        events, result = parse_chat(reads)
        assert isinstance(result.error, chunkwise.errors.InvalidChunk)
        assert message in str(result.error)
        assert result.error.data == data[:2000].decode()
        assert result.content == "kept"
        assert isinstance(terminal(events), StreamFailed)


def test_number_too_large_for_a_float_is_infinity_as_in_javascript() -> None:
    body = sse(chunk(choice(content="x", finish_reason="stop"), usage={"cost": 1e999}))
    assert b"Infinity" in body  # json.dumps writes inf so; the test needs 1e999
    body = body.replace(b"Infinity", b"1e999")
    _, result = parse_chat([body])
    assert result.status == "complete"
    assert result.usage == {"cost": float("inf")}


def test_integer_within_the_digit_limit_is_kept_exactly() -> None:
    import sys

    digits = sys.get_int_max_str_digits() or 4300
    body = sse(chunk(choice(content="x", finish_reason="stop"), usage={"n": 10 ** (digits - 1)}))
    _, result = parse_chat([body])
    assert result.status == "complete"
    assert result.usage == {"n": 10 ** (digits - 1)}


def test_error_event_with_deeply_nested_data_is_a_stream_error_with_the_text() -> None:
    data = "[" * 5000 + "]" * 5000
    body = (
        sse(chunk(choice(content="kept")), done=False) + f"event: error\ndata: {data}\n\n".encode()
    )
    events, result = parse_chat([body])
    assert result.server_error is not None
    assert result.server_error.message == data
    assert result.content == "kept"
    assert isinstance(terminal(events), StreamFailed)


def test_invalid_utf8_is_replaced_never_raised() -> None:
    body = b'data: {"choices": [{"index": 0, "delta": {"content": "a\xff\xfeb"}}]}\n\n'
    _, result = parse_chat([body])
    assert result.choice(0).content == "a\ufffd\ufffdb"


def test_oversized_event_fails_with_event_too_large_keeping_earlier_output() -> None:
    head = sse(chunk(choice(content="kept")), done=False)
    huge = b"data: " + b"x" * 5000
    parser = chunkwise.chat.Parser(max_event_size=1000)
    events = parser.feed(head)
    for i in range(0, len(huge), 100):
        events += parser.feed(huge[i : i + 100])
    events += parser.end()
    assert isinstance(parser.result.error, chunkwise.errors.EventTooLarge)
    assert parser.result.content == "kept"
    assert isinstance(terminal(events), StreamFailed)


def test_feed_chunk_rejects_a_non_mapping_as_failure() -> None:
    acc = chunkwise.chat.Accumulator()
    events = acc.feed([1, 2])  # type: ignore[arg-type]
    assert isinstance(acc.result.error, chunkwise.errors.InvalidChunk)
    assert isinstance(events[-1], StreamFailed)


def test_unterminated_final_event_is_discarded_and_recorded() -> None:
    body = sse(chunk(choice(content="a", finish_reason="stop")), done=False)
    tail = b'data: {"choices": [{"index": 0, "delta": {"content": "lost"}}]}'
    _, result = parse_chat([body + tail])
    assert result.content == "a"
    assert [a.kind for a in result.anomalies] == ["unterminated event"]


# -- schema validation --------------------------------------------------------------------

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
                "additionalProperties": False,
            },
        },
    }
]


def _call_with(arguments: str, name: str = "get_weather") -> chunkwise.ToolCall:
    _, result = accumulate(
        [
            chunk(choice(tool_calls=[tool(0, id="a", name=name, arguments=arguments)])),
            chunk(choice(finish_reason="tool_calls")),
        ],
        tools=TOOLS,
    )
    return result.choice(0).tool_calls[0]


def test_arguments_matching_the_schema_are_validated() -> None:
    call = _call_with('{"city": "Paris"}')
    assert call.validated is True
    assert call.error is None
    assert call.parse_arguments() == {"city": "Paris"}


def test_arguments_failing_the_schema_give_a_typed_error() -> None:
    call = _call_with('{"town": "Paris"}')
    assert call.validated is False
    assert isinstance(call.error, chunkwise.ToolArgumentsError)
    assert "schema" in str(call.error)
    assert call.arguments == '{"town": "Paris"}'
    with pytest.raises(chunkwise.ToolArgumentsError):
        call.parse_arguments()


def test_call_to_a_tool_not_in_the_request_is_an_error() -> None:
    call = _call_with("{}", name="delete_everything")
    assert isinstance(call.error, chunkwise.ToolArgumentsError)
    assert "not among the request's tools" in str(call.error)


def test_without_tools_no_schema_is_checked() -> None:
    _, result = accumulate(
        [
            chunk(choice(tool_calls=[tool(0, id="a", name="x", arguments='{"any": 1}')])),
            chunk(choice(finish_reason="tool_calls")),
        ]
    )
    assert result.choice(0).tool_calls[0].validated is None


def test_parser_passes_tools_to_validation() -> None:
    body = sse(
        chunk(choice(tool_calls=[tool(0, id="a", name="get_weather", arguments='{"city": 1}')])),
        chunk(choice(finish_reason="tool_calls")),
    )
    _, result = parse_chat([body], tools=TOOLS)
    assert result.choice(0).tool_calls[0].validated is False


# -- metadata ----------------------------------------------------------------------------


def test_metadata_first_seen_in_a_later_chunk_is_kept() -> None:
    # Each field is assigned the first time a chunk carries a valid value,
    # whichever chunk that is; later values never replace it.
    _, result = accumulate(
        [
            {"id": "chatcmpl-1", "model": "m", "choices": [choice(content="a")]},
            {"id": "chatcmpl-1", "created": "soon", "choices": [choice(content="b")]},
            {"created": 1700000001, "choices": [choice(content="c")]},
            {"system_fingerprint": "fp_late", "choices": [choice(finish_reason="stop")]},
            {"created": 5, "system_fingerprint": "fp_other", "model": "m2", "choices": []},
        ]
    )
    assert (result.id, result.model, result.created, result.system_fingerprint) == (
        "chatcmpl-1",
        "m",
        1700000001,
        "fp_late",
    )


def test_metadata_is_assigned_from_the_first_chunk_that_has_it() -> None:
    _, result = accumulate(
        [
            {"choices": [], "id": "", "model": None},
            chunk(choice(content="x"), id="chatcmpl-9", model="m1", system_fingerprint="fp"),
            chunk(choice(content="y"), id="other", model="m2"),
        ]
    )
    assert (result.id, result.model, result.created, result.system_fingerprint) == (
        "chatcmpl-9",
        "m1",
        1700000000,
        "fp",
    )


def test_without_jsonschema_tools_are_name_checked_but_not_validated(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "jsonschema", None)  # import now fails
    call = _call_with('{"town": 1}')
    assert call.validated is None
    assert call.error is None
    assert _call_with("{}", name="unknown").error is not None


# -- shapes seen in the wild: a table, each row checked under every split -----------------

USAGE = {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13}


def thinking(text: str) -> dict[str, Any]:
    """A Mistral (Magistral) reasoning part."""
    return {"type": "thinking", "thinking": [{"type": "text", "text": text}]}


def text_part(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def bare(**delta: Any) -> dict[str, Any]:
    """A choice without a finish_reason key at all (Snowflake Cortex, Bedrock-style)."""
    return {"index": 0, "delta": delta}


def view(events: list[chunkwise.Event], result: chunkwise.chat.Result) -> dict[str, Any]:
    """What a row of :data:`WILD_SHAPES` checks: the result and the events that matter."""
    error = result.error
    return {
        "status": result.status,
        "reason": None if result.reason is None else str(result.reason),
        "done": result.done_received,
        "choices": [(c.content, c.reasoning, c.finish_reason, c.finished) for c in result.choices],
        "calls": [
            (t.name, t.arguments, t.finished, t.error is None)
            for c in result.choices
            for t in c.tool_calls
        ],
        "anomalies": [(a.kind, a.choice_index, a.count) for a in result.anomalies],
        "error": None if error is None else (type(error).__name__, error.message),
        "events": [
            type(e).__name__
            for e in events
            if not isinstance(e, (chat.TextDelta, chat.ReasoningDelta, chat.ToolCallArgumentsDelta))
        ],
        "text": [
            (type(e).__name__, e.text)
            for e in events
            if isinstance(e, (chat.TextDelta, chat.ReasoningDelta))
        ],
        "usage": result.usage,
    }


#: Each row: the body a server sent, and what :func:`view` must make of it.
WILD_SHAPES: dict[str, tuple[bytes, dict[str, Any]]] = {
    "mistral-thinking-parts-then-text-parts": (
        sse(
            chunk(choice(role="assistant", content=[thinking("Count the r")]), model="magistral"),
            chunk(choice(content=[thinking("s: three.")])),
            chunk(choice(content=[text_part("There are ")])),
            chunk(choice(content=[text_part("3.")])),
            chunk(choice(finish_reason="stop"), usage=USAGE),
        ),
        {
            "status": "complete",
            "reason": None,
            "done": True,
            "choices": [("There are 3.", "Count the rs: three.", "stop", True)],
            "calls": [],
            "anomalies": [],
            "error": None,
            "events": ["ChoiceFinished", "UsageReported", "StreamCompleted"],
            "text": [
                ("ReasoningDelta", "Count the r"),
                ("ReasoningDelta", "s: three."),
                ("TextDelta", "There are "),
                ("TextDelta", "3."),
            ],
            "usage": USAGE,
        },
    ),
    "mistral-parts-and-strings-in-order": (
        sse(
            chunk(choice(content=[thinking("Hm"), text_part("A"), thinking(""), text_part("")])),
            chunk(choice(content="B")),
            chunk(
                choice(
                    content=[{"type": "thinking", "thinking": "ok"}, text_part("C")],
                    finish_reason="stop",
                )
            ),
        ),
        {
            "status": "complete",
            "reason": None,
            "done": True,
            "choices": [("ABC", "Hmok", "stop", True)],
            "calls": [],
            "anomalies": [],
            "error": None,
            "events": ["ChoiceFinished", "StreamCompleted"],
            "text": [
                ("ReasoningDelta", "Hm"),
                ("TextDelta", "A"),
                ("TextDelta", "B"),
                ("ReasoningDelta", "ok"),
                ("TextDelta", "C"),
            ],
            "usage": None,
        },
    ),
    "mistral-unknown-part-type-is-one-counted-anomaly": (
        sse(
            chunk(choice(content=[text_part("See "), {"type": "reference", "ids": [1]}])),
            chunk(choice(content=[{"type": "reference", "ids": [2]}, text_part("[1]")])),
            chunk(choice(content=[{"type": "image_url", "image_url": "x"}], finish_reason="stop")),
        ),
        {
            "status": "complete",
            "reason": None,
            "done": True,
            "choices": [("See [1]", None, "stop", True)],
            "calls": [],
            "anomalies": [("unknown content part", 0, 3)],
            "error": None,
            "events": ["AnomalyDetected", "ChoiceFinished", "StreamCompleted"],
            "text": [("TextDelta", "See "), ("TextDelta", "[1]")],
            "usage": None,
        },
    ),
    "no-finish-reason-usage-then-done-is-complete": (
        sse(
            chunk(bare(role="assistant", content="Hel")),
            chunk(bare(content="lo")),
            chunk(usage=USAGE),
        ),
        {
            "status": "complete",
            "reason": None,
            "done": True,
            "choices": [("Hello", None, None, True)],
            "calls": [],
            "anomalies": [("missing finish_reason", 0, 1)],
            "error": None,
            "events": ["UsageReported", "AnomalyDetected", "StreamCompleted"],
            "text": [("TextDelta", "Hel"), ("TextDelta", "lo")],
            "usage": USAGE,
        },
    ),
    "no-finish-reason-tool-call-then-done-is-finished-and-parsed": (
        sse(
            chunk(bare(role="assistant", tool_calls=[tool(0, id="c1", name="get", arguments="")])),
            chunk(bare(tool_calls=[tool(0, arguments='{"city": ')])),
            chunk(bare(tool_calls=[tool(0, arguments='"Paris"}')])),
            chunk(usage=USAGE),
        ),
        {
            "status": "complete",
            "reason": None,
            "done": True,
            "choices": [("", None, None, True)],
            "calls": [("get", '{"city": "Paris"}', True, True)],
            "anomalies": [("missing finish_reason", 0, 1)],
            "error": None,
            "events": [
                "ToolCallStarted",
                "UsageReported",
                "AnomalyDetected",
                "ToolCallCompleted",
                "StreamCompleted",
            ],
            "text": [],
            "usage": USAGE,
        },
    ),
    "empty-finish-reason-on-every-chunk-then-done-is-complete-read-as-none": (
        sse(chunk(choice(content="Hi", finish_reason="")), chunk(choice(finish_reason=""))),
        {
            "status": "complete",
            "reason": None,
            "done": True,
            "choices": [("Hi", None, None, True)],
            "calls": [],
            "anomalies": [("missing finish_reason", 0, 1)],
            "error": None,
            "events": ["AnomalyDetected", "StreamCompleted"],
            "text": [("TextDelta", "Hi")],
            "usage": None,
        },
    ),
    "no-finish-reason-and-no-done-stays-incomplete": (
        sse(
            chunk(bare(role="assistant", content="Hel")),
            chunk(bare(tool_calls=[tool(0, id="c1", name="get", arguments='{"city": "Pa')])),
            chunk(usage=USAGE),
            done=False,
        ),
        {
            "status": "incomplete",
            "reason": "unfinished",
            "done": False,
            "choices": [("Hel", None, None, False)],
            "calls": [("get", '{"city": "Pa', False, False)],
            "anomalies": [],
            "error": None,
            "events": ["ToolCallStarted", "UsageReported", "ToolCallCompleted", "StreamIncomplete"],
            "text": [("TextDelta", "Hel")],
            "usage": USAGE,
        },
    ),
    "done-after-an-error-chunk-is-the-normal-close": (
        sse(
            chunk(choice(role="assistant", content="Hel")),
            {"error": {"message": "upstream failed", "type": "server_error", "code": 502}},
        ),
        {
            "status": "failed",
            "reason": None,
            "done": False,
            "choices": [("Hel", None, None, False)],
            "calls": [],
            "anomalies": [],
            "error": ("StreamError", "upstream failed"),
            "events": ["StreamErrorReceived", "StreamFailed"],
            "text": [("TextDelta", "Hel")],
            "usage": None,
        },
    ),
    "done-after-an-error-event-is-the-normal-close": (
        sse(chunk(choice(role="assistant", content="Hel")), done=False)
        + b'event: error\ndata: {"message": "overloaded", "code": 529}\n\ndata: [DONE]\n\n',
        {
            "status": "failed",
            "reason": None,
            "done": False,
            "choices": [("Hel", None, None, False)],
            "calls": [],
            "anomalies": [],
            "error": ("StreamError", "overloaded"),
            "events": ["StreamErrorReceived", "StreamFailed"],
            "text": [("TextDelta", "Hel")],
            "usage": None,
        },
    ),
    "data-after-done-is-one-counted-anomaly": (
        sse(chunk(choice(content="x", finish_reason="stop")))
        + sse(chunk(choice(content="late")), chunk(choice(content="later"))),
        {
            "status": "complete",
            "reason": None,
            "done": True,
            "choices": [("x", None, "stop", True)],
            "calls": [],
            "anomalies": [("data after [DONE]", None, 3)],
            "error": None,
            "events": ["ChoiceFinished", "StreamCompleted"],
            "text": [("TextDelta", "x")],
            "usage": None,
        },
    ),
}


@pytest.mark.parametrize(
    "part",
    [
        {"type": "thinking", "thinking": None},
        {"type": "thinking"},
        {"type": "thinking", "thinking": [{"type": "image_url", "image_url": "x"}]},
        {"type": "thinking", "thinking": ["text"]},
        {"type": "text", "text": 5},
        {"text": "no type"},
        "a bare string",
        None,
    ],
)
def test_a_content_part_not_understood_is_one_counted_anomaly_never_text(part: Any) -> None:
    chunks = [chunk(choice(content=[text_part("a"), part, text_part("b")])) for _ in range(2)]
    events, result = accumulate([*chunks, chunk(choice(finish_reason="stop"))])
    assert (result.content, result.choice(0).reasoning) == ("abab", None)
    assert [(a.kind, a.choice_index, a.count) for a in result.anomalies] == [
        ("unknown content part", 0, 2)
    ]
    assert sum(isinstance(e, AnomalyDetected) for e in events) == 1


def test_content_parts_after_finish_are_an_anomaly_not_merged() -> None:
    _, result = accumulate(
        [
            chunk(choice(content=[text_part("done")], finish_reason="stop")),
            chunk(choice(content=[text_part(" extra"), thinking("late")])),
        ]
    )
    assert (result.content, result.choice(0).reasoning) == ("done", None)
    assert [a.kind for a in result.anomalies] == ["content after finish"]


@pytest.mark.parametrize("name", WILD_SHAPES)
def test_wild_shape_gives_its_result(name: str) -> None:
    # Whole: reads change nothing (test_split_invariance.py).
    body, expected = WILD_SHAPES[name]
    whole = parse_chat([body])
    assert view(*whole) == expected
    terminal(whole[0])


@pytest.mark.parametrize("name", WILD_SHAPES)
def test_wild_shape_through_feed_chunk_gives_the_same_result(name: str) -> None:
    # The decoded chunks (as another client would pass them), then what
    # feed_chunk cannot carry: [DONE] and the error event, through feed_data.
    body, _ = WILD_SHAPES[name]
    decoder = chunkwise.SSEDecoder(legacy_error_field=True)
    accumulator = chunkwise.chat.Accumulator()
    events: list[chunkwise.Event] = []
    for event in [*decoder.feed(body), *decoder.end()]:
        if event.event == "message" and event.data.startswith("{"):
            events += accumulator.feed(json.loads(event.data))
        else:
            events += accumulator.feed_data(event.event, event.data)
    events += accumulator.end()
    assert (events, accumulator.result) == parse_chat([body])

"""The rules of the Responses layer, one test (or one table) each.

The rules are those of :mod:`chunkwise.responses.accumulator` (after the
skeleton's, :mod:`chunkwise._core.accumulator`) and the facts about real
streams in RESPONSES.md (OpenAI, vLLM, llama.cpp quirks);
each test is named for the behaviour it checks.  Streams are built from
OpenAI's documented shapes (``helpers.bodies.text_events``, ``helpers.bodies.call_events``)
and fed either as bytes (:class:`chunkwise.responses.Parser`) or as
decoded events (:meth:`chunkwise.responses.Accumulator.feed`).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
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
    responses,
)
from helpers.bodies import (
    call_events,
    message_item,
    numbered,
    response_object,
    response_sse,
    response_usage,
    rotated,
    text_events,
)
from helpers.reads import accumulate_response, parse_response, terminal

# -- building streams ------------------------------------------------------------


def created(**fields: Any) -> dict[str, Any]:
    return {"type": "response.created", "response": response_object(**fields)}


def ended(
    *output: Mapping[str, Any],
    kind: str = "response.completed",
    status: str | None = "completed",
    usage: Mapping[str, Any] | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """A terminal event; ``status=None`` leaves the response's status out."""
    response = response_object(status or "", output, usage, **fields)
    if status is None:
        del response["status"]
    return {"type": kind, "response": response}


def delta(text: str, output_index: int = 0, content_index: int = 0, **extra: Any) -> dict[str, Any]:
    return {
        "type": "response.output_text.delta",
        "item_id": "msg_1",
        "output_index": output_index,
        "content_index": content_index,
        "delta": text,
        **extra,
    }


#: A finished message "Hello" (deltas "Hel", "lo"): created, the 7 events of the
#: message (added, part added, 2 deltas, text done, part done, item done), completed.
HELLO_DONE = [
    created(),
    *text_events(0, "msg_1", ["Hel", "lo"]),
    ended(message_item("msg_1", "Hello"), usage=response_usage()),
]
#: The same stream cut after the second delta: nothing finished yet.
HELLO = HELLO_DONE[:5]


def kinds(result: chunkwise.responses.Result) -> list[str]:
    return [a.kind for a in result.anomalies]


def frames(*payloads: str) -> bytes:
    """Raw SSE blocks, each ``\\n\\n``-terminated."""
    return b"".join(p.encode() + b"\n\n" for p in payloads)


def data(payload: Mapping[str, Any]) -> str:
    return "data: " + json.dumps(payload)


# -- rule 1: dispatch, unknown events and fields, [DONE] ---------------------------


def test_dispatch_is_on_the_data_type_not_the_event_field() -> None:
    body = frames(
        "event: response.completed\n" + data(created()),
        "event: response.failed\n" + data(delta("hi")),
        "event: error\n" + data(ended(message_item("msg_1", "hi"))),
    )
    events, result = parse_response([body])
    assert result.status == "complete"
    assert result.output_text == "hi"
    assert [type(e) for e in events if isinstance(e, responses.TextDelta)] == [responses.TextDelta]


@pytest.mark.parametrize(
    "event_field",
    ["response.output_text.delta", "message"],
    ids=["event-field-used", "default-message-is-not-a-type"],
)
def test_the_event_field_is_only_a_fallback_for_data_without_type(event_field: str) -> None:
    untyped = {k: v for k, v in delta("x").items() if k != "type"}
    body = response_sse(*HELLO) + frames(f"event: {event_field}\n" + data(untyped))
    _, result = parse_response([body])
    if event_field == "message":  # no type, no event field: nothing to dispatch on
        assert result.output_text == "Hello"
        assert kinds(result) == ["event without type"]
    else:
        assert result.output_text == "Hellox"
        assert kinds(result) == []


def test_events_without_type_are_one_counted_anomaly() -> None:
    # A chat stream read as Responses (`chat --api responses` against a chat
    # server): 53 chunks were 53 anomalies; they are one, with its count.
    chat_chunk = {"id": "c", "object": "chat.completion.chunk", "choices": []}
    body = frames(*(data(chat_chunk) for _ in range(53)))
    _, result = parse_response([body])
    (anomaly,) = result.anomalies
    assert (anomaly.kind, anomaly.count) == ("event without type", 53)


@pytest.mark.parametrize("kind", ["keepalive", "response.keep_alive"])
def test_keepalive_events_are_ignored(kind: str) -> None:
    events, result = accumulate_response([*HELLO[:3], {"type": kind}, *HELLO_DONE[3:]])
    assert (events, result) == accumulate_response(HELLO_DONE)


@pytest.mark.parametrize("times", [1, 3])
def test_an_unknown_event_type_is_one_counted_anomaly_not_fatal(times: int) -> None:
    unknown = [{"type": "response.something_new", "whatever": [1, {"x": None}]}] * times
    events, result = accumulate_response([*HELLO[:3], *unknown, *HELLO_DONE[3:]])
    want_events, want = accumulate_response(HELLO_DONE)
    anomaly = chunkwise.Anomaly(
        kind="unknown event type", detail="'response.something_new'", count=times
    )
    assert result == attrs.evolve(want, anomalies=(anomaly,))
    others = [e for e in events[:-1] if type(e) is not chunkwise.AnomalyDetected]
    assert others == want_events[:-1]
    assert sum(type(e) is chunkwise.AnomalyDetected for e in events) == 1


UNKNOWN_FIELDS = {
    "obfuscation": "Xy12ab",
    # llama.cpp's "timings" is read (result.server_timings): tests/sansio/test_timing_figures.py.
    "prompt_progress": {"total": 8, "cache": 0, "processed": 8},
    "logprobs": [],
}


@pytest.mark.parametrize("field", UNKNOWN_FIELDS)
def test_unknown_fields_are_ignored_on_every_event(field: str) -> None:
    noisy = [{**event, field: UNKNOWN_FIELDS[field]} for event in HELLO_DONE]
    assert accumulate_response(noisy) == accumulate_response(HELLO_DONE)
    assert parse_response([response_sse(*noisy)]) == parse_response([response_sse(*HELLO_DONE)])


@pytest.mark.parametrize("position", [0, 3, len(HELLO_DONE) - 1])
@pytest.mark.parametrize("noise", ["data: [DONE]", "data:", "data: ", "data"])
def test_done_and_empty_data_are_ignored_anywhere(position: int, noise: str) -> None:
    body = b"".join(
        (frames(noise) if i == position else b"") + response_sse(e)
        for i, e in enumerate(HELLO_DONE)
    )
    assert parse_response([body]) == parse_response([response_sse(*HELLO_DONE)])


def test_done_after_the_terminal_event_is_no_anomaly() -> None:
    # Proxies add a [DONE] after response.completed: it proves nothing.
    _, result = parse_response([response_sse(*HELLO_DONE) + frames("data: [DONE]")])
    assert result.status == "complete"
    assert kinds(result) == []


def test_done_does_not_end_a_stream_without_a_terminal_event() -> None:
    events, result = parse_response([response_sse(*HELLO) + frames("data: [DONE]")])
    assert result.status == "incomplete"
    assert result.reason is IncompleteReason.UNFINISHED
    assert isinstance(terminal(events), StreamIncomplete)


# -- rule 2: addressing items and parts ------------------------------------------


def test_items_are_keyed_by_output_index_and_gaps_are_kept() -> None:
    stream = [
        created(),
        *text_events(5, "msg_c", ["c"]),
        *text_events(0, "msg_a", ["a"]),
        *text_events(2, "msg_b", ["b"]),
        ended(),
    ]
    stream[-1]["response"]["output"] = None
    _, result = accumulate_response(stream)
    assert [(i.index, i.id, i.text) for i in result.output] == [
        (0, "msg_a", "a"),
        (2, "msg_b", "b"),
        (5, "msg_c", "c"),
    ]
    assert result.output_text == "abc"


def test_without_indices_events_find_their_item_by_item_id() -> None:
    # llama.cpp: no output_index, no content_index; two messages whose deltas interleave.
    first = text_events(None, "msg_a", ["a1", "a2"], content_index=None)
    second = text_events(None, "msg_b", ["b1", "b2"], content_index=None)
    stream = [first[0], first[1], second[0], second[1], second[2], first[2], first[3]]
    stream += [second[3], *first[4:], *second[4:]]
    _, result = accumulate_response(stream)
    assert [(i.index, i.id, i.text) for i in result.output] == [
        (0, "msg_a", "a1a2"),
        (1, "msg_b", "b1b2"),
    ]
    assert kinds(result) == []


def test_without_index_or_item_id_an_event_goes_to_the_last_item() -> None:
    stream = [
        *text_events(None, "msg_a", [], content_index=None)[:2],
        *text_events(None, "msg_b", [], content_index=None)[:2],
        {"type": "response.output_text.delta", "delta": "to b"},
    ]
    _, result = accumulate_response(stream)
    assert [i.text for i in result.output] == ["", "to b"]


def test_a_new_item_without_index_takes_the_position_after_the_last() -> None:
    stream = [*text_events(3, "msg_a", ["a"]), *text_events(None, "msg_b", ["b"])]
    _, result = accumulate_response(stream)
    assert [(i.index, i.id) for i in result.output] == [(3, "msg_a"), (4, "msg_b")]


def test_an_event_for_an_item_never_added_creates_it_with_an_anomaly() -> None:
    events, result = accumulate_response([delta("orphan", output_index=1)])
    assert [(i.index, i.text) for i in result.output] == [(1, "orphan")]
    assert kinds(result) == ["event for an unknown item"]
    assert any(isinstance(e, AnomalyDetected) for e in events)


def test_parts_are_keyed_by_content_index_and_may_interleave() -> None:
    part = {"type": "output_text", "text": "", "annotations": []}
    stream = [
        *text_events(0, "msg_1", [])[:1],
        {
            "type": "response.content_part.added",
            "output_index": 0,
            "content_index": 0,
            "part": part,
        },
        {
            "type": "response.content_part.added",
            "output_index": 0,
            "content_index": 1,
            "part": part,
        },
        delta("A", content_index=1),
        delta("a", content_index=0),
        delta("B", content_index=1),
        delta("b", content_index=0),
    ]
    events, result = accumulate_response(stream)
    assert [(p.index, p.text) for p in result.output[0].content] == [(0, "ab"), (1, "AB")]
    assert [(e.content_index, e.text) for e in events if isinstance(e, responses.TextDelta)] == [
        (1, "A"),
        (0, "a"),
        (1, "B"),
        (0, "b"),
    ]


def test_parallel_function_calls_interleave_by_output_index() -> None:
    a = call_events(0, "fc_a", "call_a", "f", ['{"x"', ": 1}"])
    b = call_events(1, "fc_b", "call_b", "g", ['{"y"', ": 2}"])
    stream = [a[0], b[0], b[1], a[1], a[2], b[2], b[3], a[3], a[4], b[4]]
    events, result = accumulate_response(stream)
    assert [(c.call_id, c.name, c.arguments) for c in result.function_calls] == [
        ("call_a", "f", '{"x": 1}'),
        ("call_b", "g", '{"y": 2}'),
    ]
    started = [
        (e.output_index, e.call_id, e.name)
        for e in events
        if isinstance(e, responses.ToolCallStarted)
    ]
    assert started == [(0, "call_a", "f"), (1, "call_b", "g")]
    fragments = [
        (e.output_index, e.fragment)
        for e in events
        if isinstance(e, responses.ToolCallArgumentsDelta)
    ]
    assert fragments == [(1, '{"y"'), (0, '{"x"'), (0, ": 1}"), (1, ": 2}")]
    done = [e.call.call_id for e in events if isinstance(e, responses.ToolCallCompleted)]
    assert done == ["call_b", "call_a"]  # each at its own arguments.done


# -- rule 3: .done events and the terminal output are authoritative -----------------

HELLO_ITEM = message_item("msg_1", "Hello")
HELLO_PART = {"type": "output_text", "text": "Hello", "annotations": []}


def _replacing(event: Mapping[str, Any], new_text: str) -> dict[str, Any]:
    """``event`` with its authoritative text replaced by ``new_text``."""
    out = copy.deepcopy(dict(event))
    if "text" in out:
        out["text"] = new_text
    elif "part" in out:
        out["part"]["text"] = new_text
    elif "item" in out:
        out["item"]["content"][0]["text"] = new_text
    else:
        out["response"]["output"][0]["content"][0]["text"] = new_text
    return out


AUTHORITATIVE = {
    "output_text.done": 5,  # index in HELLO_DONE
    "content_part.done": 6,
    "output_item.done": 7,
    "terminal output": 8,
}


@pytest.mark.parametrize("which", AUTHORITATIVE)
@pytest.mark.parametrize("final", ["Hello", "Goodbye"])
def test_done_events_and_terminal_output_replace_the_deltas(which: str, final: str) -> None:
    position = AUTHORITATIVE[which]
    # From that event on, every authoritative version says ``final``.
    stream = [*HELLO_DONE[:position], *(_replacing(e, final) for e in HELLO_DONE[position:])]
    _, result = accumulate_response(stream)
    assert result.output_text == final
    assert result.status == "complete"
    differ = ["final text differs from deltas"] if final != "Hello" else []
    assert kinds(result) == differ  # once: the later ones agree with the replaced text


def test_refusal_and_reasoning_done_events_replace_their_deltas() -> None:
    stream = [
        {"type": "response.refusal.delta", "output_index": 0, "content_index": 0, "delta": "No"},
        {"type": "response.refusal.done", "output_index": 0, "content_index": 0, "refusal": "Nope"},
        {
            "type": "response.reasoning_summary_text.delta",
            "output_index": 1,
            "summary_index": 0,
            "delta": "thin",
        },
        {
            "type": "response.reasoning_summary_text.done",
            "output_index": 1,
            "summary_index": 0,
            "text": "thinking",
        },
        {
            "type": "response.reasoning_text.delta",
            "output_index": 2,
            "content_index": 0,
            "delta": "r",
        },
        {
            "type": "response.reasoning_text.done",
            "output_index": 2,
            "content_index": 0,
            "text": "raw",
        },
    ]
    _, result = accumulate_response(stream)
    assert result.output[0].refusal == "Nope"
    assert [p.text for p in result.output[1].summary] == ["thinking"]
    assert [(p.type, p.text) for p in result.output[2].content] == [("reasoning_text", "raw")]
    assert kinds(result).count("final text differs from deltas") == 3


def test_a_done_event_without_deltas_gives_the_text_without_anomaly() -> None:
    stream = [*HELLO_DONE[:3], *HELLO_DONE[5:]]  # no delta at all
    _, result = accumulate_response(stream)
    assert result.output_text == "Hello"
    assert kinds(result) == []


@pytest.mark.parametrize("output", [None, []], ids=["null", "empty"])
def test_terminal_output_null_or_empty_keeps_the_items(output: list[Any] | None) -> None:
    stream = [*HELLO_DONE[:-1], ended(status="completed")]
    stream[-1]["response"]["output"] = output
    _, result = accumulate_response(stream)
    assert result.output_text == "Hello"
    assert [(i.id, i.done) for i in result.output] == [("msg_1", True)]
    assert kinds(result) == []


def test_a_delta_after_its_part_is_done_is_an_anomaly_not_appended() -> None:
    stream = [*HELLO_DONE[:6], delta("late"), *HELLO_DONE[6:]]
    _, result = accumulate_response(stream)
    assert result.output_text == "Hello"
    assert kinds(result) == ["delta after done"]


# -- rule 4: function calls ----------------------------------------------------------

FLAT_TOOL = {
    "type": "function",
    "name": "get_weather",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}
CHAT_TOOL = {"type": "function", "function": {k: v for k, v in FLAT_TOOL.items() if k != "type"}}


def weather_call(arguments: Sequence[str], *, done: bool = True) -> list[dict[str, Any]]:
    events = call_events(0, "fc_1", "call_1", "get_weather", arguments)
    return events if done else events[:-2]


def test_call_is_completed_at_arguments_done_before_the_item_is_done() -> None:
    events, result = accumulate_response(weather_call(['{"city"', ': "Oslo"}']))
    completed = [i for i, e in enumerate(events) if isinstance(e, responses.ToolCallCompleted)]
    item_done = [i for i, e in enumerate(events) if isinstance(e, responses.OutputItemDone)]
    assert len(completed) == 1 and completed[0] < item_done[0]
    (call,) = result.function_calls
    assert (call.call_id, call.id, call.name, call.finished) == (
        "call_1",
        "fc_1",
        "get_weather",
        True,
    )
    assert call.parse_arguments() == {"city": "Oslo"}


def test_call_without_arguments_done_is_completed_at_output_item_done() -> None:
    stream = [e for e in weather_call(['{"city": "Oslo"}']) if "arguments.done" not in e["type"]]
    for event in stream:  # llama.cpp: no indices either
        event.pop("output_index", None)
    events, result = accumulate_response(stream)
    assert [type(e) for e in events][-3:] == [
        responses.ToolCallCompleted,
        responses.OutputItemDone,
        StreamIncomplete,
    ]
    assert result.function_calls[0].finished
    assert result.function_calls[0].parse_arguments() == {"city": "Oslo"}


@pytest.mark.parametrize("tool", [FLAT_TOOL, CHAT_TOOL], ids=["responses-flat", "chat-nested"])
@pytest.mark.parametrize(
    ("arguments", "validated", "error"),
    [
        ('{"city": "Oslo"}', True, None),
        ('{"town": "Oslo"}', False, "do not match its schema"),
        ('{"city": ', None, "not valid JSON"),
    ],
)
def test_arguments_are_validated_against_the_request_tools(
    tool: dict[str, Any], arguments: str, validated: bool | None, error: str | None
) -> None:
    _, result = accumulate_response(weather_call([arguments]), tools=[tool])
    (call,) = result.function_calls
    assert call.validated is validated
    if error is None:
        assert call.error is None
    else:
        assert call.error is not None and error in str(call.error)
        assert call.error.raw == arguments


def test_a_call_to_a_function_not_in_the_tools_is_an_error() -> None:
    other = {**FLAT_TOOL, "name": "other"}
    _, result = accumulate_response(weather_call(['{"city": "Oslo"}']), tools=[other])
    error = result.function_calls[0].error
    assert error is not None and "not among the request's tools" in str(error)


def test_an_unfinished_call_is_completed_at_the_end_with_finished_false() -> None:
    stream = weather_call(['{"city": "Os'], done=False)
    events, result = accumulate_response(stream)
    (call,) = result.function_calls
    assert (call.finished, call.completed) == (False, True)
    assert call.error is not None and "ended before the call finished" in str(call.error)
    assert [type(e) for e in events][-2:] == [responses.ToolCallCompleted, StreamIncomplete]


def test_a_later_authoritative_version_replaces_a_completed_call() -> None:
    stream = weather_call(['{"city": "Oslo"}'])
    stream[-1]["item"]["arguments"] = '{"city": "Bergen"}'
    events, result = accumulate_response(stream)
    assert result.function_calls[0].parse_arguments() == {"city": "Bergen"}
    assert result.function_calls[0].finished
    assert kinds(result) == ["final arguments differ from deltas"]
    assert sum(isinstance(e, responses.ToolCallCompleted) for e in events) == 1


def test_arguments_after_done_are_an_anomaly_not_appended() -> None:
    stream = weather_call(['{"city": "Oslo"}'])
    late = {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": "x"}
    stream.insert(-1, late)
    _, result = accumulate_response(stream)
    assert result.function_calls[0].arguments == '{"city": "Oslo"}'
    assert kinds(result) == ["arguments after done"]


# -- rule 5: errors ----------------------------------------------------------------

_ERR = {"type": "server_error", "code": "server_error", "message": "boom", "param": None}
ERROR_SHAPES = {
    "flat event": response_sse(
        {"type": "error", "code": "server_error", "message": "boom", "param": None}
    ),
    "nested event": response_sse({"type": "error", "error": _ERR}),
    "llama.cpp bare frame": frames(data({"error": {"code": "server_error", "message": "boom"}})),
    "bare frame, event error": frames("event: error\n" + data({"error": _ERR})),
    "event field only": frames(
        "event: error\n" + data({"code": "server_error", "message": "boom"})
    ),
    "response.failed only": response_sse(
        ended(
            kind="response.failed",
            status="failed",
            error={"code": "server_error", "message": "boom"},
        )
    ),
}


@pytest.mark.parametrize("shape", ERROR_SHAPES)
@pytest.mark.parametrize("then_failed", [False, True], ids=["then-eof", "then-response.failed"])
def test_every_error_shape_fails_the_stream_keeping_the_output(
    shape: str, then_failed: bool
) -> None:
    body = response_sse(*HELLO) + ERROR_SHAPES[shape]
    if then_failed and shape != "response.failed only":
        body += response_sse(ended(kind="response.failed", status="failed"))
    events, result = parse_response([body])
    assert result.status == "failed"
    assert result.output_text == "Hello"
    error = result.server_error
    assert error is not None
    assert (error.message, error.code) == ("boom", "server_error")
    assert isinstance(terminal(events), StreamFailed)
    received = [e for e in events if isinstance(e, StreamErrorReceived)]
    assert len(received) == (0 if shape == "response.failed only" else 1)


def test_an_error_event_whose_data_is_not_json_gives_its_text() -> None:
    _, result = parse_response([response_sse(*HELLO) + frames("event: error\ndata: upstream died")])
    assert result.status == "failed"
    assert result.server_error is not None and result.server_error.message == "upstream died"
    assert result.output_text == "Hello"


def test_the_stream_goes_on_after_an_error_event_until_its_terminal_event() -> None:
    stream = [*HELLO[:4], {"type": "error", "error": _ERR}, *HELLO_DONE[4:]]
    events, result = accumulate_response(stream)
    assert result.status == "failed"  # an error arrived, whatever the terminal status
    assert result.output_text == "Hello"
    assert [type(e) for e in events].count(responses.TextDelta) == 2
    assert isinstance(terminal(events), StreamFailed)


def test_the_first_error_is_kept_over_the_terminal_response_error() -> None:
    stream = [
        *HELLO,
        {"type": "error", "code": "first", "message": "first"},
        ended(kind="response.failed", status="failed", error={"code": "second", "message": "x"}),
    ]
    _, result = accumulate_response(stream)
    assert result.server_error is not None and result.server_error.code == "first"


def test_response_failed_without_error_still_fails_with_a_message() -> None:
    _, result = accumulate_response([*HELLO, ended(kind="response.failed", status="failed")])
    assert result.status == "failed"
    assert result.server_error is not None and "without an error" in result.server_error.message


# -- rule 6: the outcome comes from response.status ---------------------------------

STATUS_TABLE = [
    # terminal event, its response.status, chunkwise status, anomalies
    ("response.completed", "completed", "complete", []),
    ("response.incomplete", "incomplete", "incomplete", []),
    ("response.failed", "failed", "failed", []),
    ("response.completed", "incomplete", "incomplete", ["terminal event disagrees with status"]),
    ("response.completed", "cancelled", "incomplete", ["terminal event disagrees with status"]),
    ("response.incomplete", "cancelled", "incomplete", ["terminal event disagrees with status"]),
    ("response.completed", "failed", "failed", ["terminal event disagrees with status"]),
    ("response.incomplete", "completed", "complete", ["terminal event disagrees with status"]),
    ("response.completed", None, "complete", []),
    ("response.incomplete", None, "incomplete", []),
]


@pytest.mark.parametrize(("kind", "server", "status", "anomalies"), STATUS_TABLE)
def test_status_is_taken_from_the_terminal_response_status(
    kind: str, server: str | None, status: str, anomalies: list[str]
) -> None:
    events, result = accumulate_response([*HELLO, ended(kind=kind, status=server)])
    assert result.status == status
    assert result.response_status == (server or kind.removeprefix("response."))
    assert kinds(result) == anomalies
    assert result.output_text == "Hello"
    if status == "incomplete":
        assert result.reason is IncompleteReason.SERVER_REPORTED
        assert isinstance(terminal(events), StreamIncomplete)


def test_vllm_completed_wrapping_incomplete_is_incomplete_with_its_reason() -> None:
    end = ended(status="incomplete", incomplete_details={"reason": "max_output_tokens"})
    _, result = accumulate_response([*HELLO, end])
    assert (result.status, result.incomplete_reason) == ("incomplete", "max_output_tokens")


def test_cancelled_is_incomplete_with_reason_cancelled() -> None:
    _, result = accumulate_response([*HELLO, ended(kind="response.incomplete", status="cancelled")])
    assert (result.status, result.response_status) == ("incomplete", "cancelled")
    assert result.incomplete_reason == "cancelled"


def test_lifecycle_events_report_the_server_status_while_streaming() -> None:
    accumulator = chunkwise.responses.Accumulator()
    events = accumulator.feed(created(status="queued"))
    events += accumulator.feed({"type": "response.in_progress", "response": response_object()})
    events += accumulator.feed({"type": "response.in_progress", "response": response_object()})
    assert [e.status for e in events if isinstance(e, responses.StatusChanged)] == [
        "queued",
        "in_progress",
    ]
    result = accumulator.result
    assert (result.status, result.response_status, result.id) == (
        "streaming",
        "in_progress",
        "resp_1",
    )
    assert result.model == "gpt-4.1-2025-04-14" and result.created_at == 1741290958


@pytest.mark.parametrize(
    ("stream", "reason"),
    [
        ([], IncompleteReason.EMPTY_STREAM),
        ([created()], IncompleteReason.UNFINISHED),
        (HELLO, IncompleteReason.UNFINISHED),
        (HELLO_DONE[:-1], IncompleteReason.UNFINISHED),
    ],
    ids=["nothing", "created-only", "mid-message", "all-but-terminal"],
)
def test_eof_before_a_terminal_event_is_incomplete_keeping_the_output(
    stream: list[dict[str, Any]], reason: IncompleteReason
) -> None:
    events, result = parse_response([response_sse(*stream)])
    assert (result.status, result.reason) == ("incomplete", reason)
    assert result.output_text == ("Hello" if len(stream) > 2 else "")
    assert isinstance(terminal(events), StreamIncomplete)


def test_end_passes_its_reason_when_the_stream_stopped_early() -> None:
    accumulator = chunkwise.responses.Accumulator()
    for event in HELLO:
        accumulator.feed(event)
    events = accumulator.end(IncompleteReason.CONNECTION_LOST)
    assert isinstance(events[-1], StreamIncomplete)
    assert accumulator.result.reason is IncompleteReason.CONNECTION_LOST
    assert accumulator.end() == []  # once


def test_eof_after_an_error_event_is_failed_not_incomplete() -> None:
    _, result = accumulate_response([*HELLO, {"type": "error", "error": _ERR}])
    assert (result.status, result.reason) == ("failed", None)
    assert result.output_text == "Hello"


# -- rule 7: usage and max_output_tokens -------------------------------------------


def test_usage_is_the_terminal_response_usage_with_every_key() -> None:
    usage = {**response_usage(7, 3), "x_extra": {"a": 1}}
    stream = [created(usage=response_usage(1, 1)), *HELLO[1:], ended(HELLO_ITEM, usage=usage)]
    events, result = accumulate_response(stream)
    assert result.usage == usage
    assert [e.usage for e in events if isinstance(e, UsageReported)] == [usage]


def test_usage_null_on_failed_leaves_usage_none() -> None:
    stream = [*HELLO, ended(kind="response.failed", status="failed", usage=None)]
    events, result = accumulate_response(stream)
    assert result.usage is None
    assert not any(isinstance(e, UsageReported) for e in events)


@pytest.mark.parametrize(
    ("limit", "used", "kind", "anomaly"),
    [
        (16, 16, "response.completed", True),
        (16, 17, "response.completed", True),
        (16, 15, "response.completed", False),
        (None, 16, "response.completed", False),
        (16, 16, "response.incomplete", False),
    ],
)
def test_a_completed_response_that_used_max_output_tokens_gets_an_anomaly(
    limit: int | None, used: int, kind: str, anomaly: bool
) -> None:
    end = ended(HELLO_ITEM, kind=kind, status=kind.removeprefix("response."))
    end["response"]["usage"] = response_usage(5, used)
    _, result = accumulate_response([*HELLO, end], max_output_tokens=limit)
    assert kinds(result) == (["max_output_tokens reached"] if anomaly else [])
    assert result.response_status == kind.removeprefix("response.")  # unchanged
    assert result.status == ("complete" if kind == "response.completed" else "incomplete")


# -- rule 8: nothing raises; data after the end; sequence numbers -------------------


@pytest.mark.parametrize(
    "bad", ["{not json", '{"type": "response.output_text.delta"', "[1, 2]", '"text"', "42", "null"]
)
def test_data_that_is_not_a_json_object_fails_keeping_the_output(bad: str) -> None:
    events, result = parse_response([response_sse(*HELLO) + frames("data: " + bad)])
    assert result.status == "failed"
    assert isinstance(result.error, chunkwise.errors.InvalidChunk)
    assert result.output_text == "Hello"
    assert isinstance(terminal(events), StreamFailed)


@pytest.mark.parametrize("bad", [[1, 2], "text", None, 42])
def test_feed_event_with_something_not_a_mapping_fails(bad: Any) -> None:
    accumulator = chunkwise.responses.Accumulator()
    for event in HELLO:
        accumulator.feed(event)
    events = accumulator.feed(bad)
    assert isinstance(events[-1], StreamFailed)
    assert isinstance(accumulator.result.error, chunkwise.errors.InvalidChunk)
    assert accumulator.result.output_text == "Hello"


def test_data_after_the_terminal_event_is_ignored_with_one_anomaly() -> None:
    after = [delta("more"), ended(message_item("msg_1", "other")), {"type": "error", "error": _ERR}]
    body = response_sse(*HELLO_DONE, *after) + frames("data: {broken")
    events, result = parse_response([body])
    _, clean = parse_response([response_sse(*HELLO_DONE)])
    assert kinds(result) == ["data after end"]
    assert attrs.evolve(result, anomalies=()) == clean
    assert isinstance(terminal(events), StreamCompleted)


@pytest.mark.parametrize(
    ("numbers", "anomalies"),
    [
        ([0, 1, 2, 3, 4], 0),
        ([0, 1, 5, 9, 10], 0),  # gaps are allowed: nothing documents them as gap-free
        ([0, 2, 1, 3, 4], 1),
        ([0, 1, 1, 2, 3], 1),
        ([4, 3, 2, 1, 0], 4),
    ],
)
def test_sequence_numbers_out_of_order_are_an_anomaly(numbers: list[int], anomalies: int) -> None:
    stream = [{**e, "sequence_number": n} for e, n in zip(HELLO, numbers, strict=True)]
    _, result = accumulate_response(stream)
    assert kinds(result) == ["sequence number out of order"] * anomalies
    assert result.output_text == "Hello"


def test_keepalives_count_in_the_sequence() -> None:
    stream = numbered([HELLO[0], {"type": "keepalive"}, *HELLO_DONE[1:]])
    _, result = accumulate_response(stream)
    assert kinds(result) == [] and result.status == "complete"


def test_a_second_response_id_is_an_anomaly_and_the_first_is_kept() -> None:
    # llama.cpp streams n > 1 answers as several responses in one body.
    other = {"type": "response.created", "response": response_object(id="resp_2")}
    _, result = accumulate_response([HELLO[0], other, *HELLO_DONE[1:]])
    assert result.id == "resp_1" and result.output_text == "Hello"
    assert kinds(result) == ["response id changed"]
    assert "'resp_2' after 'resp_1'" in result.anomalies[0].detail


# -- rule 9: results never change once handed out ---------------------------------


def _scramble(value: Any) -> None:
    """Empty ``value`` and every dict and list inside it, deepest first."""
    if isinstance(value, dict):
        for inner in value.values():
            _scramble(inner)
        value.clear()
    elif isinstance(value, list):
        for inner in value:
            _scramble(inner)
        value.clear()


def test_feed_event_copies_the_callers_mappings() -> None:
    stream = copy.deepcopy([*HELLO_DONE[:-1], ended(HELLO_ITEM, usage=response_usage())])
    stream[2]["part"]["annotations"] = [{"type": "url_citation", "url": "https://a"}]
    accumulator = chunkwise.responses.Accumulator()
    for event in stream:
        accumulator.feed(event)
    accumulator.end()
    before = copy.deepcopy(accumulator.result)
    for event in stream:  # the caller empties every dict and list it handed over
        _scramble(event)
    assert accumulator.result == before
    assert accumulator.result.output[0].data == HELLO_ITEM


def test_a_snapshot_handed_out_never_changes() -> None:
    accumulator = chunkwise.responses.Accumulator()
    handed_out = []
    for event in [*HELLO_DONE, delta("after")]:
        accumulator.feed(event)
        snapshot = accumulator.result
        handed_out.append((snapshot, copy.deepcopy(snapshot)))
    accumulator.end()
    for snapshot, copied in handed_out:
        assert snapshot == copied
    assert handed_out[3][0].output[0].content[0].text == "Hel"


def test_results_are_frozen() -> None:
    _, result = accumulate_response(HELLO_DONE)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        result.status = "failed"  # type: ignore[misc]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        result.output[0].content[0].text = "x"  # type: ignore[misc]
    assert isinstance(result.output, tuple) and isinstance(result.output[0].content, tuple)


def test_parsed_returns_a_new_copy_each_time() -> None:
    fmt = {"type": "json_object"}
    stream = [*text_events(0, "msg_1", ['{"a": [1]}']), ended(message_item("msg_1", '{"a": [1]}'))]
    _, result = accumulate_response(stream, text_format=fmt)
    value = result.parsed
    value["a"].append(2)
    assert result.parsed == {"a": [1]}


# -- structured outputs (Responses) --------------------------------------------------

SCHEMA_FORMAT = {
    "type": "json_schema",
    "name": "weather",
    "strict": True,
    "schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "temp": {"type": "number"}},
        "required": ["city", "temp"],
        "additionalProperties": False,
    },
}


def answer(
    text: str, *, kind: str = "response.completed", item_status: str = "completed"
) -> list[dict[str, Any]]:
    pieces = [text[: len(text) // 2], text[len(text) // 2 :]]
    events = [created(), *text_events(0, "msg_1", [p for p in pieces if p])]
    events[-1]["item"]["status"] = item_status
    item = message_item("msg_1", text, status=item_status)
    return [*events, ended(item, kind=kind, status=kind.removeprefix("response."))]


def test_structured_json_schema_valid_is_parsed() -> None:
    _, result = accumulate_response(
        answer('{"city": "Oslo", "temp": -3.5}'), text_format=SCHEMA_FORMAT
    )
    assert (result.parsed, result.parse_error) == ({"city": "Oslo", "temp": -3.5}, None)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"city": "Oslo", "temp": ', "is not valid JSON"),
        ("", "is empty"),
        ('{"city": "Oslo"}', "does not match the schema"),
        ('{"city": "Oslo", "temp": "cold"}', "does not match the schema"),
    ],
)
def test_structured_text_that_is_not_what_was_asked_is_a_parse_error(
    text: str, message: str
) -> None:
    pytest.importorskip("jsonschema")
    stream = answer(text) if text else [created(), ended(message_item("msg_1", ""))]
    _, result = accumulate_response(stream, text_format=SCHEMA_FORMAT)
    assert result.parsed is None
    error = result.parse_error
    assert isinstance(error, chunkwise.StructuredOutputError)
    assert message in str(error) and "weather" in str(error)
    assert (error.raw, error.schema_name) == (text, "weather")


@pytest.mark.parametrize(
    ("text", "parsed", "error"),
    [('{"any": [1]}', {"any": [1]}, None), ("[1, 2]", None, "not an object")],
)
def test_structured_json_object_accepts_any_object(
    text: str, parsed: Any, error: str | None
) -> None:
    _, result = accumulate_response(answer(text), text_format={"type": "json_object"})
    assert result.parsed == parsed
    if error is None:
        assert result.parse_error is None
    else:
        assert result.parse_error is not None and error in str(result.parse_error)


def test_structured_refusal_is_neither_parsed_nor_an_error() -> None:
    item = message_item("msg_1", refusal="I can't help with that.")
    stream = [
        created(),
        {
            "type": "response.refusal.delta",
            "output_index": 0,
            "content_index": 0,
            "delta": "I can't",
        },
        ended(item),
    ]
    _, result = accumulate_response(stream, text_format=SCHEMA_FORMAT)
    assert result.refusal == "I can't help with that."
    assert (result.parsed, result.parse_error) == (None, None)


@pytest.mark.parametrize(
    ("kind", "item_status", "cut"),
    [
        ("response.incomplete", "incomplete", True),  # as a chat choice cut by "length"
        ("response.completed", "incomplete", True),
        (None, "in_progress", False),  # EOF before the terminal event
    ],
)
def test_structured_an_incomplete_message_is_never_parsed_as_complete(
    kind: str | None, item_status: str, cut: bool
) -> None:
    text = '{"city": "Oslo", "temp": 1}'  # valid: only the status says it was cut
    stream = answer(text, kind=kind or "response.completed", item_status=item_status)
    if kind is None:
        stream = stream[:-1]
    _, result = accumulate_response(stream, text_format=SCHEMA_FORMAT)
    assert result.parsed is None
    if cut:
        assert result.parse_error is not None and "cut short" in str(result.parse_error)
        assert result.parse_error.raw == text
    else:
        assert result.parse_error is None


def test_structured_a_cancelled_answer_is_neither_parsed_nor_an_error() -> None:
    # Cancelled is not cut short by the model: the answer did not finish.
    stream = answer('{"city": "Oslo", "temp": 1}', kind="response.incomplete")
    stream[-1]["response"]["status"] = "cancelled"
    _, result = accumulate_response(stream, text_format=SCHEMA_FORMAT)
    assert (result.status, result.incomplete_reason) == ("incomplete", "cancelled")
    assert (result.parsed, result.parse_error) == (None, None)


@pytest.mark.parametrize("fmt", [None, {"type": "text"}, {}, "json_schema"])
def test_structured_without_a_json_format_gives_none(fmt: Any) -> None:
    _, result = accumulate_response(answer('{"a": 1}'), text_format=fmt)
    assert (result.parsed, result.parse_error) == (None, None)


def test_structured_output_through_the_byte_parser() -> None:
    body = response_sse(*answer('{"city": "Oslo", "temp": 2}'))
    _, result = parse_response([body], text_format=SCHEMA_FORMAT)
    assert result.parsed == {"city": "Oslo", "temp": 2}


# -- shapes seen in the wild: a table, each row checked under every split -----------------


COPILOT = rotated(
    numbered(
        [
            created(),
            {"type": "response.in_progress", "response": response_object()},
            *text_events(0, "msg_1", ["There are ", "3."]),
            *call_events(1, "fc_1", "call_1", "get_weather", ['{"city":', '"Paris"}']),
            ended(
                message_item("msg_1", "There are 3."),
                {
                    "id": "fc_1",
                    "type": "function_call",
                    "status": "completed",
                    "call_id": "call_1",
                    "name": "get_weather",
                    "arguments": '{"city":"Paris"}',
                },
                usage=response_usage(),
            ),
        ]
    )
)
CUT_FORMAT = {"type": "json_schema", "name": "count", "schema": {"type": "object"}}


def wild_view(events: list[chunkwise.Event], result: chunkwise.responses.Result) -> dict[str, Any]:
    """What a row of :data:`WILD_RESPONSES` checks."""
    return {
        "status": (result.status, result.response_status, result.incomplete_reason),
        "id": result.id,
        "output": [(i.index, i.id, i.type, i.text, i.done) for i in result.output],
        "calls": [
            (c.call_id, c.arguments, c.finished, c.error is None) for c in result.function_calls
        ],
        "anomalies": [(a.kind, a.count) for a in result.anomalies],
        "announced": [e.anomaly.kind for e in events if isinstance(e, AnomalyDetected)],
        "items_done": [e.output_index for e in events if isinstance(e, responses.OutputItemDone)],
        "parse_error": None if result.parse_error is None else str(result.parse_error),
    }


#: Each row: the body, the parser's arguments, and what :func:`wild_view` must make of it.
WILD_RESPONSES: dict[str, tuple[bytes, dict[str, Any], dict[str, Any]]] = {
    "copilot-rotates-response-and-item-ids-on-every-event": (
        response_sse(*COPILOT),
        {},
        {
            "status": ("complete", "completed", None),
            "id": "capture-id-1",  # the first response id is kept
            # Each item takes the id of its latest whole version: the terminal output's.
            "output": [
                (0, COPILOT[-1]["response"]["output"][0]["id"], "message", "There are 3.", True),
                (1, COPILOT[-1]["response"]["output"][1]["id"], "function_call", "", True),
            ],
            "calls": [("call_1", '{"city":"Paris"}', True, True)],
            # Message: part added, 2 deltas, text done, part done, item done, output
            # (7); call: 2 deltas, arguments done, item done, output (5).
            "anomalies": [("response id changed", 2), ("item id changed", 12)],
            "announced": ["response id changed", "item id changed"],
            "items_done": [0, 1],
            "parse_error": None,
        },
    ),
    "incomplete-at-max-output-tokens-is-cut-short-like-chat-length": (
        response_sse(
            created(),
            *text_events(0, "msg_1", ['{"n": ', "1"])[:-3],
            ended(
                message_item("msg_1", '{"n": 1', status="incomplete"),
                kind="response.incomplete",
                status="incomplete",
                incomplete_details={"reason": "max_output_tokens"},
            ),
        ),
        {"text_format": CUT_FORMAT},
        {
            "status": ("incomplete", "incomplete", "max_output_tokens"),
            "id": "resp_1",
            "output": [(0, "msg_1", "message", '{"n": 1', True)],
            "calls": [],
            "anomalies": [],
            "announced": [],
            "items_done": [0],
            "parse_error": "structured output 'count': the answer was cut short "
            "(incomplete_details.reason 'max_output_tokens')",
        },
    ),
    "data-after-the-terminal-event-is-one-counted-anomaly": (
        response_sse(*HELLO_DONE, delta("more"), delta("and more"), HELLO_DONE[-1]),
        {},
        {
            "status": ("complete", "completed", None),
            "id": "resp_1",
            "output": [(0, "msg_1", "message", "Hello", True)],
            "calls": [],
            "anomalies": [("data after end", 3)],
            "announced": [],
            "items_done": [0],
            "parse_error": None,
        },
    ),
}


@pytest.mark.parametrize("name", WILD_RESPONSES)
def test_wild_response_shape_gives_its_result(name: str) -> None:
    # Whole: reads change nothing (test_split_invariance.py).
    body, kwargs, expected = WILD_RESPONSES[name]
    whole = parse_response([body], **kwargs)
    assert wild_view(*whole) == expected
    terminal(whole[0])


@pytest.mark.parametrize("name", WILD_RESPONSES)
def test_wild_response_shape_through_feed_event_gives_the_same_result(name: str) -> None:
    body, kwargs, _ = WILD_RESPONSES[name]
    accumulator = chunkwise.responses.Accumulator(**kwargs)
    events: list[chunkwise.Event] = []
    for event in chunkwise.SSEDecoder().feed(body):
        events += accumulator.feed(json.loads(event.data))
    events += accumulator.end()
    assert (events, accumulator.result) == parse_response([body], **kwargs)

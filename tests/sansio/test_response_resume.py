"""The Responses accumulator over several connections (issue 22): sequence numbers decide.

A resumed stream drops what it already has (counted), notes a gap, may start
mid-way (attached after a sequence number), and may end from a polled response.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

import chunkwise
from helpers.bodies import (
    call_item,
    message_item,
    numbered,
    response_object,
    response_usage,
    sse_typed,
    text_events,
)

CALL = call_item("fc_1", "call_1", "get_weather", '{"city": "Paris"}')
MESSAGE = message_item("msg_1", "Hello, wörld!")
FINAL = response_object("completed", [MESSAGE, CALL], response_usage())


def stream_events() -> list[dict[str, Any]]:
    at = {"output_index": 1, "item_id": "fc_1"}
    return numbered(
        [
            {"type": "response.created", "response": response_object("queued")},
            {"type": "response.queued", "response": response_object("queued")},
            {"type": "response.in_progress", "response": response_object()},
            *text_events(0, "msg_1", ["Hello", ", ", "wörld", "!"]),
            {"type": "response.output_item.added", **at, "item": {**CALL, "arguments": ""}},
            {"type": "response.function_call_arguments.delta", **at, "delta": '{"city": '},
            {"type": "response.function_call_arguments.delta", **at, "delta": '"Paris"}'},
            {"type": "response.function_call_arguments.done", **at, "arguments": CALL["arguments"]},
            {"type": "response.output_item.done", "output_index": 1, "item": CALL},
            {"type": "response.completed", "response": FINAL},
        ]
    )


EVENTS = stream_events()


def whole() -> chunkwise.responses.Result:
    parser = chunkwise.responses.Parser()
    parser.feed(sse_typed(*EVENTS))
    parser.end()
    assert parser.result.status == "complete" and parser.result.anomalies == ()
    return parser.result


def kinds(result: chunkwise.responses.Result) -> list[tuple[str, int]]:
    return [(a.kind, a.count) for a in result.anomalies]


@given(
    cut=st.integers(1, len(EVENTS) - 1),
    byte=st.integers(0, 200),
    overlap=st.integers(0, 4),
)
def test_a_resumed_stream_drops_what_it_has_and_counts_it(
    cut: int, byte: int, overlap: int
) -> None:
    """The first body cut anywhere inside event ``cut``; the second starts ``overlap`` early."""
    parser = chunkwise.responses.Parser()
    first = sse_typed(*EVENTS[:cut])
    cut_event = sse_typed(EVENTS[cut])
    events = parser.feed(first + cut_event[: min(byte, len(cut_event) - 1)])
    assert parser.resume_point() == ("resp_1", cut - 1)
    parser.resume()
    again = max(0, cut - overlap)
    events += parser.feed(sse_typed(*EVENTS[again:]))
    events += parser.end()
    result = parser.result
    assert result == whole() if again == cut else result.output == whole().output
    assert result.resumes == 1 and result.status == "complete"
    assert kinds(result) == ([("duplicate event", cut - again)] if again < cut else [])
    assert sum(isinstance(e, chunkwise.StreamCompleted) for e in events) == 1
    deltas = "".join(e.text for e in events if isinstance(e, chunkwise.responses.TextDelta))
    assert deltas == "Hello, wörld!"


def test_a_jump_in_sequence_numbers_after_a_resumption_is_a_gap() -> None:
    parser = chunkwise.responses.Parser()
    parser.feed(sse_typed(*EVENTS[:5]))
    parser.resume()
    parser.feed(sse_typed(*EVENTS[7:]))
    parser.end()
    assert kinds(parser.result) == [("sequence gap", 1)]
    assert "sequence_number 7 after 4" in parser.result.anomalies[0].detail


def test_before_any_resumption_an_old_number_is_out_of_order_and_kept() -> None:
    parser = chunkwise.responses.Parser()
    parser.feed(sse_typed(*EVENTS[:5], EVENTS[3]))
    assert kinds(parser.result) == [("sequence number out of order", 1)]


@given(start=st.integers(0, len(EVENTS) - 2))
def test_a_stream_attached_mid_way_is_accepted_without_anomalies(start: int) -> None:
    """From response.queued, response.in_progress, or inside an item: the end is whole."""
    parser = chunkwise.responses.Parser()
    parser.start_after(start)
    parser.feed(sse_typed(*EVENTS[start + 1 :]))
    parser.end()
    result = parser.result
    assert result == whole()
    assert result.resumes == 0


def test_a_stream_without_a_number_or_an_id_has_no_resume_point() -> None:
    parser = chunkwise.responses.Parser()
    assert parser.resume_point() is None
    parser.feed(sse_typed({**EVENTS[0], "sequence_number": None}))
    assert parser.resume_point() is None  # an id, no number
    parser.feed(sse_typed(EVENTS[1]))
    assert parser.resume_point() == ("resp_1", 1)


def test_a_stream_ended_from_a_polled_response_is_as_complete_as_the_server() -> None:
    parser = chunkwise.responses.Parser()
    parser.feed(sse_typed(*EVENTS[:6]))
    events = parser.end_from_response(FINAL)
    result = parser.result
    assert result.output == whole().output and result.usage == FINAL["usage"]
    assert result.status == "complete" and kinds(result) == [("events not seen", 1)]
    assert isinstance(events[-1], chunkwise.StreamCompleted)
    assert parser.end() == []


def test_a_stream_ended_from_a_polled_response_counts_one_resumption() -> None:
    parser = chunkwise.responses.Parser()
    parser.feed(sse_typed(*EVENTS[:6]))
    parser.resume()  # streamed again once, cut again
    parser.end_from_response(FINAL)  # then polled to its end
    assert parser.result.resumes == 2


def test_a_polled_cancelled_response_ends_incomplete_as_the_server_says() -> None:
    parser = chunkwise.responses.Parser()
    parser.feed(sse_typed(*EVENTS[:6]))
    parser.end_from_response(response_object("cancelled", []))
    result = parser.result
    assert (result.status, result.response_status) == ("incomplete", "cancelled")
    assert result.incomplete_reason == "cancelled"
    assert kinds(result) == [("events not seen", 1)]  # no "disagrees" anomaly: no event name

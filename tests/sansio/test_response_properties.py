"""Hypothesis: generated Responses streams give one result however they are split.

The streams (``helpers.strategies.response_streams``) hold interleaved items (messages
with several parts, refusals, parallel function calls, reasoning summaries),
unicode with astral characters and combining marks, LF, CRLF or CR line
endings, keepalive events, comments, a proxy's ``[DONE]``, and, llama.cpp
style, no indices or sequence numbers at all.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import chunkwise
from helpers.reads import accumulate_response, parse_response, pieces_of, terminal
from helpers.strategies import GeneratedResponse, response_streams

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def part_texts(result: chunkwise.responses.Result) -> dict[tuple[int, str, int], tuple[str, str]]:
    return {
        (item.index, which, part.index): (part.type, part.text)
        for item in result.output
        for which, parts in (("content", item.content), ("summary", item.summary))
        for part in parts
    }


@SETTINGS
@given(stream=response_streams())
def test_generated_stream_reconstructs_exactly(stream: GeneratedResponse) -> None:
    events, result = parse_response([stream.body])
    assert isinstance(terminal(events), chunkwise.StreamCompleted)
    assert (result.status, result.response_status) == ("complete", "completed")
    # Arbitrary argument text: its live preview may stop ("not JSON"), nothing else.
    assert {a.kind for a in result.anomalies} <= {"not JSON"}
    assert part_texts(result) == stream.parts
    assert result.output_text == stream.output_text
    assert [(c.call_id, c.name, c.arguments) for c in result.function_calls] == list(stream.calls)
    assert all(c.finished and c.completed for c in result.function_calls)
    assert result.usage is not None and result.usage["output_tokens"] == 4


@SETTINGS
@given(stream=response_streams())
def test_deltas_add_up_to_the_result_texts(stream: GeneratedResponse) -> None:
    # No .done event of a generated stream disagrees with its deltas.
    events, result = parse_response([stream.body])
    texts: dict[tuple[int, str, int], str] = {}
    arguments: dict[int, str] = {}
    for e in events:
        if isinstance(e, (chunkwise.responses.TextDelta, chunkwise.responses.RefusalDelta)):
            key = (e.output_index, "content", e.content_index)
            texts[key] = texts.get(key, "") + e.text
        elif isinstance(e, chunkwise.responses.ReasoningSummaryDelta):
            key = (e.output_index, "summary", e.summary_index)
            texts[key] = texts.get(key, "") + e.text
        elif isinstance(e, chunkwise.responses.ToolCallArgumentsDelta):
            arguments[e.output_index] = arguments.get(e.output_index, "") + e.fragment
    assert texts == {key: text for key, (_, text) in part_texts(result).items() if text}
    assert arguments == {c.index: c.arguments for c in result.function_calls if c.arguments}


@SETTINGS
@given(stream=response_streams(), data=st.data())
def test_a_cut_stream_ends_with_exactly_one_terminal_event_never_complete_early(
    stream: GeneratedResponse, data: st.DataObject
) -> None:
    cut = data.draw(st.integers(0, len(stream.body)))
    prefix = stream.body[:cut]
    events, result = parse_response(pieces_of(prefix, 5))
    assert (events, result) == parse_response([prefix])
    terminal(events)  # exactly one, and last
    if cut >= stream.terminal_end:
        assert result.status == "complete"
    elif cut < stream.terminal_end - 2:  # a CRLF may dispatch at its CR
        assert result.status == "incomplete"
        assert result.reason in (
            chunkwise.IncompleteReason.UNFINISHED,
            chunkwise.IncompleteReason.EMPTY_STREAM,
        )


@SETTINGS
@given(stream=response_streams())
def test_feed_event_gives_the_result_of_the_bytes(stream: GeneratedResponse) -> None:
    from_bytes = parse_response([stream.body])
    # The same events decoded (as another client would), through feed_event.
    decoded: list[dict[str, Any]] = [json.loads(json.dumps(e)) for e in stream.events]
    assert accumulate_response(decoded) == from_bytes


@settings(max_examples=150, deadline=None)
@given(
    events=st.lists(
        st.fixed_dictionaries(
            {
                "type": st.sampled_from(
                    [
                        "response.output_item.added",
                        "response.output_item.done",
                        "response.content_part.added",
                        "response.output_text.delta",
                        "response.output_text.done",
                        "response.function_call_arguments.delta",
                        "response.function_call_arguments.done",
                        "response.reasoning_summary_text.delta",
                        "response.completed",
                        "response.failed",
                        "error",
                        "keepalive",
                    ]
                )
            },
            optional={
                "output_index": st.none() | st.integers(-1, 3) | st.text(max_size=2),
                "content_index": st.none() | st.integers(-1, 2),
                "item_id": st.none() | st.sampled_from(["a", "b"]) | st.integers(),
                "delta": st.none() | st.text(max_size=3) | st.integers(),
                "text": st.none() | st.text(max_size=3),
                "arguments": st.none() | st.text(max_size=3),
                "item": st.none()
                | st.fixed_dictionaries(
                    {},
                    optional={
                        "type": st.sampled_from(["message", "function_call", "x"]),
                        "id": st.sampled_from(["a", "b"]),
                        "content": st.lists(st.fixed_dictionaries({"text": st.text(max_size=2)})),
                        "arguments": st.text(max_size=3) | st.integers(),
                    },
                ),
                "response": st.none()
                | st.fixed_dictionaries(
                    {},
                    optional={
                        "status": st.sampled_from(["completed", "failed", "incomplete", 3]),
                        "output": st.none() | st.lists(st.just({"type": "message"}), max_size=2),
                        "usage": st.none() | st.just({"output_tokens": 2}),
                        "error": st.none() | st.just({"message": "m"}) | st.text(max_size=2),
                    },
                ),
                "error": st.none() | st.just({"message": "m", "code": 1}),
                "sequence_number": st.integers(-1, 5),
            },
        ),
        max_size=8,
    )
)
def test_arbitrary_events_never_raise_and_end_once(events: list[dict[str, Any]]) -> None:
    accumulator = chunkwise.responses.Accumulator(tools=[], max_output_tokens=2)
    out: list[chunkwise.Event] = []
    for event in events:
        out += accumulator.feed(event)
        assert accumulator.result.status in ("streaming", "complete", "incomplete", "failed")
    out += accumulator.end()
    terminal(out)
    if accumulator.result.status == "failed":
        assert isinstance(accumulator.result.error, chunkwise.ChunkwiseError)

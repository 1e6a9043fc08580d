"""Hostile streams for the Responses parser: what a broken or malicious server can send.

Each finding of a hostile review is a test here, named for the behaviour it
asks for: a stream cut before its terminal event is never complete, an item the
terminal output displaces is neither silently lost nor silently replaced, a
finished item takes no more text, huge numbers neither raise nor make anomaly
details long, and many items or parts cost time linear in their number
(counted, not timed).  Last, a table of adversarial streams that must parse
without surprises: the fuzz harness's own checks (fuzz/fuzz_responses.py) on
each, in one read and byte by byte.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

import chunkwise
from chunkwise.responses import items as response_items
from helpers.bodies import response_sse
from helpers.reads import accumulate_response, byte_reads, parse_response

sys.path.insert(0, str(Path(__file__).parents[2] / "fuzz"))
import fuzz_responses

TEXT = "response.output_text.delta"


def added(index: int | None, item_id: str, kind: str = "message", **extra: Any) -> dict[str, Any]:
    event: dict[str, Any] = {
        "type": "response.output_item.added",
        "item": {"type": kind, "id": item_id, **extra},
    }
    if index is not None:
        event["output_index"] = index
    return event


def message(item_id: str, text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": item_id,
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def completed(*output: Any, **response: Any) -> dict[str, Any]:
    return {
        "type": "response.completed",
        "response": {"id": "resp_1", "status": "completed", "output": list(output), **response},
    }


def kinds(result: chunkwise.responses.Result) -> list[str]:
    return [anomaly.kind for anomaly in result.anomalies]


# -- rule 6: only a terminal event ends a stream complete (or failed) ---------------


@pytest.mark.parametrize("status", ["completed", "failed"])
def test_a_lifecycle_event_status_does_not_end_a_stream_cut_before_its_terminal(
    status: str,
) -> None:
    # Found by the harness: response.in_progress saying "completed", then EOF,
    # ended the stream complete (and "failed" ended it failed).
    stream = [
        added(0, "msg_1"),
        {"type": TEXT, "output_index": 0, "content_index": 0, "delta": "Hel"},
        {"type": "response.in_progress", "response": {"id": "resp_1", "status": status}},
    ]
    events, result = parse_response([response_sse(*stream)])
    assert (result.status, result.reason) == ("incomplete", chunkwise.IncompleteReason.UNFINISHED)
    assert result.response_status == status  # still reported as the server sent it
    assert result.error is None
    assert isinstance(events[-1], chunkwise.StreamIncomplete)


# -- rule 3: the terminal output replaces items, never silently -----------------------


def test_a_terminal_item_at_a_streamed_items_position_replaces_it_with_an_anomaly() -> None:
    stream = [
        added(0, "rs_1", kind="reasoning"),
        {"type": TEXT, "output_index": 0, "content_index": 0, "delta": "streamed"},
        completed(message("msg_9", "final")),
    ]
    _, result = accumulate_response(stream)
    assert result.status == "complete"
    assert [(item.id, item.type, item.text) for item in result.output] == [
        ("msg_9", "message", "final")
    ]
    assert kinds(result) == ["item replaced"]
    assert result.anomalies[0].detail == "output 0: 'rs_1' by 'msg_9'"


def test_a_terminal_item_of_the_same_type_at_a_position_is_that_item_with_a_new_id() -> None:
    # A server may send a new item id with every event (a Copilot endpoint
    # does): the position decides, and neither change goes unsaid.
    stream = [
        added(0, "msg_1"),
        {"type": TEXT, "output_index": 0, "content_index": 0, "delta": "streamed"},
        completed(message("msg_9", "final")),
    ]
    events, result = accumulate_response(stream)
    assert [(item.id, item.text) for item in result.output] == [("msg_9", "final")]
    assert kinds(result) == ["item id changed", "final text differs from deltas"]
    assert result.anomalies[0].detail == "output 0: 'msg_9' after 'msg_1'"
    assert sum(isinstance(e, chunkwise.responses.OutputItemDone) for e in events) == 1


def test_an_item_the_terminal_output_moves_behind_a_new_one_is_not_lost() -> None:
    # The displaced item was still found by its id at the next position, but
    # it was no longer in the table: the result lost it, its OutputItemDone
    # event named a position that held another item.
    stream = [added(0, "msg_1"), completed(message("msg_9", "new"), message("msg_1", "moved"))]
    events, result = accumulate_response(stream)
    assert [(item.index, item.id, item.text) for item in result.output] == [
        (0, "msg_9", "new"),
        (1, "msg_1", "moved"),
    ]
    done = [
        (e.output_index, e.item)
        for e in events
        if isinstance(e, chunkwise.responses.OutputItemDone)
    ]
    assert done == [(item.index, item) for item in result.output]


def test_a_streamed_item_the_terminal_output_leaves_unfinished_is_an_anomaly() -> None:
    stream = [
        added(0, "msg_1"),
        added(1, "msg_2"),
        {"type": TEXT, "output_index": 1, "content_index": 0, "delta": "half an answ"},
        completed(message("msg_1", "whole")),
    ]
    _, result = accumulate_response(stream)
    assert result.status == "complete"
    assert [(item.id, item.done) for item in result.output] == [("msg_1", True), ("msg_2", False)]
    assert kinds(result) == ["items missing from the output"]
    assert result.anomalies[0].detail == "[1]"


# -- a finished item takes no more text ----------------------------------------------


def _finished_hi() -> list[dict[str, Any]]:
    return [
        added(0, "msg_1"),
        {"type": TEXT, "output_index": 0, "content_index": 0, "delta": "Hi"},
        {"type": "response.output_item.done", "output_index": 0, "item": message("msg_1", "Hi")},
    ]


def test_a_delta_for_a_new_part_of_a_finished_item_is_an_anomaly_not_appended() -> None:
    late = {"type": TEXT, "output_index": 0, "content_index": 1, "delta": " there"}
    events, result = accumulate_response([*_finished_hi(), late])
    assert [(part.text, part.done) for part in result.output[0].content] == [("Hi", True)]
    assert kinds(result) == ["delta after done"]
    (done,) = [e for e in events if isinstance(e, chunkwise.responses.OutputItemDone)]
    assert result.output[0] == done.item  # the finished item did not change


def test_a_part_added_with_text_to_a_finished_item_adds_no_text() -> None:
    late = {
        "type": "response.content_part.added",
        "output_index": 0,
        "content_index": 1,
        "part": {"type": "output_text", "text": " there"},
    }
    events, result = accumulate_response([*_finished_hi(), late])
    assert result.output[0].text == "Hi"
    assert not [e for e in events[3:] if isinstance(e, chunkwise.responses.TextDelta)]


def test_an_item_added_again_after_it_is_done_is_an_anomaly_and_changes_nothing() -> None:
    again = added(0, "fc_1", "function_call", status="in_progress", call_id="c", arguments="{")
    events, result = accumulate_response([*_finished_hi(), again])
    (done,) = [e for e in events if isinstance(e, chunkwise.responses.OutputItemDone)]
    assert result.output == (done.item,)
    assert (result.output[0].type, result.output[0].status) == ("message", "completed")
    assert kinds(result) == ["item added after done"]


def test_a_function_call_item_added_twice_does_not_double_its_arguments() -> None:
    call = added(0, "fc_1", "function_call", call_id="call_1", name="f", arguments='{"a":1}')
    events, result = accumulate_response([call, call])
    (completed_call,) = result.function_calls
    assert completed_call.arguments == '{"a":1}'
    fragments = [
        e.fragment for e in events if isinstance(e, chunkwise.responses.ToolCallArgumentsDelta)
    ]
    assert fragments == ['{"a":1}']


# -- numbers the server chose: no raise, bounded details -----------------------------

_HUGE = 10**5000  # past sys.get_int_max_str_digits(): str() of it raises


@pytest.mark.parametrize(
    ("stream", "kwargs"),
    [
        (
            [
                {"type": "keepalive", "sequence_number": _HUGE},
                {"type": "keepalive", "sequence_number": 0},
            ],
            {},
        ),
        (
            [
                {"type": TEXT, "output_index": _HUGE, "content_index": _HUGE, "delta": "a"},
                {"type": "response.output_text.done", "output_index": _HUGE, "text": "b"},
            ],
            {},
        ),
        ([completed(usage={"output_tokens": _HUGE})], {"max_output_tokens": 5}),
    ],
    ids=["sequence-number", "output-index", "output-tokens"],
)
def test_huge_integers_from_feed_event_never_raise(
    stream: list[dict[str, Any]], kwargs: dict[str, Any]
) -> None:
    # Each of these raised ValueError (int to str conversion) out of feed_event.
    events, result = accumulate_response(stream, **kwargs)
    terminal = (chunkwise.StreamCompleted, chunkwise.StreamIncomplete, chunkwise.StreamFailed)
    assert isinstance(events[-1], terminal)
    assert all(len(anomaly.detail) <= 300 for anomaly in result.anomalies)


_LONG = "x" * 100_000


@pytest.mark.parametrize(
    "stream",
    [
        [
            {"type": "response.created", "response": {"id": _LONG}},
            {"type": "response.created", "response": {"id": "resp_2"}},
        ],
        [
            {"type": "response.created", "response": {"id": "resp_1"}},
            {"type": "response.created", "response": {"id": _LONG}},
        ],
        [{"type": "response.completed", "response": {"status": _LONG}}],
        [
            {"type": "keepalive", "sequence_number": int("9" * 4000)},
            {"type": "keepalive", "sequence_number": 1},
        ],
        [
            {"type": TEXT, "output_index": int("9" * 4000), "delta": "a"},
            {"type": "response.output_text.done", "output_index": int("9" * 4000), "text": "b"},
        ],
    ],
    ids=["first-id", "second-id", "terminal-status", "sequence-number", "output-index"],
)
def test_anomaly_details_quote_server_values_within_bounds(stream: list[dict[str, Any]]) -> None:
    # Through the bytes too: 4000 digits are still JSON Python parses.
    body = "".join(f"data: {json.dumps(event)}\n\n" for event in stream).encode()
    for _, result in (accumulate_response(stream), parse_response([body])):
        assert all(len(anomaly.detail) <= 300 for anomaly in result.anomalies), [
            (anomaly.kind, len(anomaly.detail)) for anomaly in result.anomalies
        ]


def test_an_output_index_past_two_to_the_53_is_no_index() -> None:
    # Not exact in JSON everywhere: the event finds its item as if it had none.
    stream = [added(0, "msg_1"), {"type": TEXT, "output_index": 2**53, "delta": "Hi"}]
    _, result = accumulate_response(stream)
    assert [(item.index, item.text) for item in result.output] == [(0, "Hi")]
    assert kinds(result) == []


# -- many items or parts: linear work (counted) --------------------------------------


class CountingDict(dict[int, Any]):
    """A dict that counts the keys its iterations visit."""

    visits: ClassVar[int] = 0

    def __iter__(self) -> Iterator[int]:
        for key in super().__iter__():
            CountingDict.visits += 1
            yield key


def test_items_without_index_are_placed_without_scanning_the_items(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each new item took max() of the positions so far: quadratic for llama.cpp
    # streams (no output_index) of many items.
    accumulator = chunkwise.responses.Accumulator()
    table = accumulator._items
    monkeypatch.setattr(table, "_items", CountingDict())
    monkeypatch.setattr(CountingDict, "visits", 0)
    n = 2000
    for i in range(n):
        accumulator.feed(added(None, f"msg_{i}"))
    assert CountingDict.visits <= n  # 2 million with a scan per item
    accumulator.end()
    assert [item.index for item in accumulator.result.output] == list(range(n))


class CountingPart(response_items.PartState):
    """A part that counts the reads of its type."""

    __slots__ = ("_kind",)
    reads: ClassVar[int] = 0

    @property
    def type(self) -> str:
        CountingPart.reads += 1
        return self._kind

    @type.setter
    def type(self, kind: str) -> None:
        self._kind = kind


def test_parts_without_index_are_found_without_scanning_the_parts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each part event without an index looked through every part for one of
    # its type: quadratic for many parts of different types.
    monkeypatch.setattr(response_items, "PartState", CountingPart)
    monkeypatch.setattr(CountingPart, "reads", 0)
    n = 2000
    stream = [added(0, "msg_1")] + [
        {"type": "response.content_part.added", "output_index": 0, "part": {"type": f"t{i}"}}
        for i in range(n)
    ]
    accumulator = chunkwise.responses.Accumulator()
    for event in stream:
        accumulator.feed(event)
    assert CountingPart.reads <= 5 * n  # 2 million with a scan per event
    assert [part.type for part in accumulator.result.output[0].content] == [
        f"t{i}" for i in range(n)
    ]


# -- adversarial streams: the harness's checks hold -----------------------------------


def _stream(*events: Any) -> bytes:
    return "".join(
        f"data: {event if isinstance(event, str) else json.dumps(event)}\n\n" for event in events
    ).encode()


_DEEP = 900  # under the recursion limit: parsed, then carried around
ADVERSARIAL: dict[str, bytes] = {
    "huge-output-index": _stream(
        {"type": TEXT, "output_index": 10**12, "content_index": 10**12, "delta": "a"},
        added(None, "msg_1"),
        {"type": TEXT, "delta": "b"},
        completed(),
    ),
    "far-part-index": _stream(
        added(0, "m"), {"type": TEXT, "output_index": 0, "content_index": 10**15, "delta": "a"}
    ),
    "one-event-many-parts": _stream(
        added(0, "m", content=[{"type": "output_text", "text": "a"}] * 500), completed()
    ),
    "item-id-collision": _stream(
        added(0, "same"),
        added(1, "same"),
        {"type": TEXT, "item_id": "same", "delta": "to the last"},
        {"type": "response.output_item.done", "item": message("same", "x")},
        completed(message("same", "a"), message("same", "b")),
    ),
    "item-re-added": _stream(
        added(0, "m"),
        {"type": TEXT, "output_index": 0, "content_index": 0, "delta": "a"},
        added(0, "fc", "function_call", call_id="c", arguments="{}"),
        added(0, "fc", "function_call", call_id="c", arguments="{}"),
        completed(),
    ),
    "events-after-item-done": _stream(
        *_finished_hi(),
        {"type": TEXT, "output_index": 0, "content_index": 0, "delta": "late"},
        {"type": "response.refusal.delta", "output_index": 0, "content_index": 3, "delta": "no"},
        {"type": "response.output_text.done", "output_index": 0, "content_index": 0, "text": "Ho"},
        {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": "{"},
        completed(),
    ),
    "colliding-part-kinds": _stream(
        added(0, "rs", "reasoning"),
        {"type": TEXT, "output_index": 0, "content_index": 0, "delta": "text"},
        {"type": "response.refusal.delta", "output_index": 0, "content_index": 0, "delta": "ref"},
        {"type": "response.reasoning_summary_text.delta", "output_index": 0, "delta": "sum"},
        {"type": "response.reasoning_text.delta", "output_index": 0, "delta": "why"},
        {
            "type": "response.content_part.done",
            "output_index": 0,
            "content_index": 0,
            "part": {"type": "refusal", "refusal": "final"},
        },
    ),
    "terminal-output-odd": _stream(
        added(0, "m"),
        added(1, "n"),
        {"type": TEXT, "output_index": 1, "delta": "n"},
        completed(None, 3, "x", [], message("m", "a"), message("z", "b")),
    ),
    "terminal-output-more": _stream(
        added(0, "m"), completed(*[message(f"m{i}", "a") for i in range(50)])
    ),
    "sequence-numbers-odd": _stream(
        *[
            {"type": "keepalive", "sequence_number": n}
            for n in (True, 1.5, "3", None, -1, [1], 2**53)
        ],
        completed(),
    ),
    "response-not-an-object": _stream(
        {"type": "response.completed", "response": [{"status": "failed"}]}
    ),
    "response-status-not-a-string": _stream(
        {"type": "response.incomplete", "response": {"status": 1}}
    ),
    "deep-item": _stream(
        '{"type":"response.output_item.added","output_index":0,"item":{"type":"message","x":'
        + "[" * _DEEP
        + "]" * _DEEP
        + "}}",
        completed(),
    ),
    "deep-error": _stream('{"type":"error","error":' + "[" * _DEEP + "]" * _DEEP + "}"),
}


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_adversarial_streams_pass_the_harness_checks(name: str) -> None:
    body = ADVERSARIAL[name]
    limit = chunkwise.types.DEFAULT_MAX_EVENT_SIZE
    whole = fuzz_responses.parse([body], limit)
    fuzz_responses.check(*whole, body, limit)
    assert fuzz_responses.parse(byte_reads(body), limit) == whole

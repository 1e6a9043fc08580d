"""Legacy completions (``/completions``), sans-IO: every rule of the accumulator, in tables.

Each row is one wire shape seen from a real server (OpenAI, vLLM, llama.cpp,
TGI) or one way a stream breaks; the table says what chunkwise must make of it
(status, text and finish reason per choice, anomalies, error).  Rows are fed
whole (reads change nothing: ``test_split_invariance.py``); the properties
check that the accumulator fed decoded chunks agrees with the parser fed bytes.
"""

from __future__ import annotations

import copy
import json
import typing
from collections.abc import Mapping
from typing import Any

import attrs
import pytest

import chunkwise
from chunkwise import (
    StreamCompleted,
    StreamFailed,
    StreamIncomplete,
    UsageReported,
    chat,
    completions,
)
from helpers.bodies import completion_chunk, sse, text_choice
from helpers.reads import accumulate_completion, parse_completion, terminal

USAGE = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
LEGACY_1 = {
    "tokens": ["Hel"],
    "token_logprobs": [-0.1],
    "top_logprobs": [{"Hel": -0.1}],
    "text_offset": [0],
}
LEGACY_2 = {
    "tokens": ["lo"],
    "token_logprobs": [-0.2],
    "top_logprobs": [{"lo": -0.2}],
    "text_offset": [3],
}
LLAMA_1 = {"content": [{"id": 1, "token": "Hel", "logprob": -0.1, "bytes": [72, 101, 108]}]}
LLAMA_2 = {"content": [{"id": 2, "token": "lo", "logprob": -0.2, "bytes": [108, 111]}]}


@attrs.frozen
class Row:
    name: str
    body: bytes
    status: str
    text: dict[int, str]
    finish: dict[int, str | None] = attrs.Factory(dict)
    anomalies: tuple[str, ...] = ()
    error: str | None = None
    reason: chunkwise.IncompleteReason | None = None


def c(*choices: Mapping[str, Any], **extra: Any) -> dict[str, Any]:
    return completion_chunk(*choices, **extra)


ROWS = [
    Row(
        "openai_single",
        sse(c(text_choice("Hel")), c(text_choice("lo")), c(text_choice("", finish_reason="stop"))),
        "complete",
        {0: "Hello"},
        {0: "stop"},
    ),
    Row(
        "openai_usage_chunk_after_finish",
        sse(
            c(text_choice("Hi", finish_reason="length")),
            c(usage=USAGE),  # stream_options.include_usage: choices []
        ),
        "complete",
        {0: "Hi"},
        {0: "length"},
    ),
    Row(
        "usage_on_the_last_text_chunk",
        sse(c(text_choice("Hi", finish_reason="stop"), usage=USAGE)),
        "complete",
        {0: "Hi"},
        {0: "stop"},
    ),
    Row(
        "several_prompts_and_n_interleaved",
        sse(
            c(text_choice("a", index=0)),
            c(text_choice("b", index=1)),
            c(text_choice("c", index=3)),
            c(text_choice("a", index=0, finish_reason="stop")),
            c(text_choice("", index=3, finish_reason="length")),
            c(text_choice("b", index=1, finish_reason="eos")),
        ),
        "complete",
        {0: "aa", 1: "bb", 3: "c"},
        {0: "stop", 1: "eos", 3: "length"},
    ),
    Row(
        "echo_prompt_first",
        sse(c(text_choice("Say hi")), c(text_choice(" hi", finish_reason="stop"))),
        "complete",
        {0: "Say hi hi"},
        {0: "stop"},
    ),
    Row(
        "empty_finish_reason_reads_as_none",  # TGI: "" on every chunk
        sse(c(text_choice("x", finish_reason="")), done=False),
        "incomplete",
        {0: "x"},
        {0: None},
        reason=chunkwise.IncompleteReason.UNFINISHED,
    ),
    Row(
        "done_without_finish_reason",
        sse(c(text_choice("x")), c(text_choice("y"))),
        "complete",
        {0: "xy"},
        {0: None},
        ("missing finish_reason",),
    ),
    Row(
        "no_done_after_finish",
        sse(c(text_choice("x", finish_reason="stop")), done=False),
        "complete",
        {0: "x"},
        {0: "stop"},
    ),
    Row(
        "cut_off",
        sse(c(text_choice("x")), done=False),
        "incomplete",
        {0: "x"},
        {0: None},
        reason=chunkwise.IncompleteReason.UNFINISHED,
    ),
    Row(
        "done_alone",
        sse(),
        "incomplete",
        {},
        reason=chunkwise.IncompleteReason.EMPTY_STREAM,
    ),
    Row(
        "llama_server_data_null_first",
        sse("null", c(text_choice("a", index=0, finish_reason="stop"))),
        "complete",
        {0: "a"},
        {0: "stop"},
        ("null event",),
    ),
    Row(
        "tgi_empty_id",
        sse(c(text_choice("a", finish_reason="eos_token"), id="")),
        "complete",
        {0: "a"},
        {0: "eos_token"},
    ),
    Row(
        "error_object_midstream",
        sse(c(text_choice("part")), {"error": {"message": "boom", "code": 500}}),
        "failed",
        {0: "part"},
        {0: None},
        error="boom",
    ),
    Row(
        "error_string",
        sse(c(text_choice("p")), {"error": "overloaded"}),
        "failed",
        {0: "p"},
        error="overloaded",
    ),
    Row(
        "vllm_object_error",
        sse({"object": "error", "message": "bad", "type": "BadRequestError", "code": 400}),
        "failed",
        {},
        error="bad",
    ),
    Row(
        "event_error",
        sse(c(text_choice("p")), done=False) + b'event: error\ndata: {"message": "gone"}\n\n',
        "failed",
        {0: "p"},
        error="gone",
    ),
    Row(
        "llama_legacy_error_field",
        b'data: {"choices":[{"index":0,"text":"p"}]}\n\nerror: {"message":"slot died"}\n\n',
        "failed",
        {0: "p"},
        error="slot died",
    ),
    Row(
        "finish_reason_error",
        sse(c(text_choice("p", finish_reason="error"))),
        "failed",
        {0: "p"},
        {0: "error"},
        error='choice 0 finished with finish_reason "error"',
    ),
    Row(
        "not_json",
        b'data: {"choices":[{"index":0,"text":"p"}]}\n\ndata: {oops\n\n',
        "failed",
        {0: "p"},
        error="event data is not valid JSON",
    ),
    Row(
        "text_after_finish",
        sse(c(text_choice("a", finish_reason="stop")), c(text_choice("b"))),
        "complete",
        {0: "a"},
        {0: "stop"},
        ("text after finish",),
    ),
    Row(
        "non_string_text",
        sse(c(text_choice(["a"])), c(text_choice("b", finish_reason="stop"))),  # type: ignore[arg-type]
        "complete",
        {0: "b"},
        {0: "stop"},
        ("non-string text",),
    ),
    Row(
        "null_text_and_filter_annotation",
        sse(
            c(text_choice(None)),
            c({"index": 1, "content_filter_results": {}}),
            c(text_choice("a", finish_reason="stop")),
        ),
        "complete",
        {0: "a"},
        {0: "stop"},
    ),
    Row(
        "second_finish_reason",
        sse(c(text_choice("a", finish_reason="stop")), c(text_choice("", finish_reason="length"))),
        "complete",
        {0: "a"},
        {0: "stop"},
        ("second finish_reason",),
    ),
    Row(
        "data_after_done",
        sse(c(text_choice("a", finish_reason="stop"))) + sse(c(text_choice("b")), done=False),
        "complete",
        {0: "a"},
        {0: "stop"},
        ("data after [DONE]",),
    ),
    Row(
        "choices_not_a_list",
        sse(c(text_choice("a")), {"choices": {"index": 0}}),
        "failed",
        {0: "a"},
        error="'choices' is dict, not a list",
    ),
]
BY_NAME = {row.name: row for row in ROWS}


def texts(result: chunkwise.completions.Result) -> dict[int, str]:
    return {choice.index: choice.text for choice in result.choices}


def check(row: Row, events: list[chunkwise.Event], result: chunkwise.completions.Result) -> None:
    last = terminal(events)
    assert isinstance(last, StreamCompleted | StreamIncomplete | StreamFailed)
    assert result.status == row.status, result
    assert texts(result) == row.text
    for index, reason in row.finish.items():
        assert result.choice(index).finish_reason == reason
    assert tuple(a.kind for a in result.anomalies) == row.anomalies
    if row.error is None:
        assert result.error is None
    else:
        assert result.error is not None and row.error in str(result.error)
        assert type(last) is StreamFailed
    if row.reason is not None:
        assert type(last) is StreamIncomplete and last.reason is row.reason
    if row.status == "complete":
        assert type(last) is StreamCompleted
    # Only anomalies can change after the end (data after it is noted).
    assert attrs.evolve(last.result, anomalies=result.anomalies) == result
    # Deltas add up to the result's text, choice by choice.
    streamed: dict[int, str] = {}
    for event in events:
        if type(event) is completions.TextDelta:
            assert event.text
            streamed[event.choice_index] = streamed.get(event.choice_index, "") + event.text
    assert streamed == {i: t for i, t in row.text.items() if t}


@pytest.mark.parametrize("row", ROWS, ids=[row.name for row in ROWS])
def test_rule_table(row: Row) -> None:
    events, result = parse_completion([row.body])
    check(row, events, result)


@pytest.mark.parametrize(
    ("first", "second", "merged"),
    [
        (
            LEGACY_1,
            LEGACY_2,
            {
                "tokens": ["Hel", "lo"],
                "token_logprobs": [-0.1, -0.2],
                "top_logprobs": [{"Hel": -0.1}, {"lo": -0.2}],
                "text_offset": [0, 3],
            },
        ),
        (LLAMA_1, LLAMA_2, {"content": LLAMA_1["content"] + LLAMA_2["content"]}),
    ],
    ids=["openai_legacy", "llama_cpp_chat_style"],
)
def test_logprobs_kept_as_sent_and_merged_by_extending(
    first: dict[str, Any], second: dict[str, Any], merged: dict[str, Any]
) -> None:
    body = sse(
        c(text_choice("Hel", logprobs=first)),
        c(text_choice("lo", logprobs=second, finish_reason="stop")),
    )
    parser = chunkwise.completions.Parser()
    middle = parser.feed(body[: body.index(b"\n\n") + 2])
    assert [type(e) for e in middle] == [completions.TextDelta]
    snapshot = parser.result
    held = copy.deepcopy(snapshot)
    parser.feed(body[body.index(b"\n\n") + 2 :])
    parser.end()
    assert parser.result.choice(0).logprobs == merged
    # Copy on write: the snapshot taken in between never changed.
    assert snapshot == held
    assert snapshot.choice(0).logprobs == first


def test_usage_from_whichever_chunk_carries_it() -> None:
    for name in ("openai_usage_chunk_after_finish", "usage_on_the_last_text_chunk"):
        events, result = parse_completion([BY_NAME[name].body])
        assert result.usage == USAGE
        assert [e.usage for e in events if type(e) is UsageReported] == [USAGE]


def test_usage_under_x_groq_is_taken_as_for_chat() -> None:
    body = sse(c(text_choice("Hi", finish_reason="stop"), x_groq={"id": "r", "usage": USAGE}))
    events, result = parse_completion([body])
    assert result.usage == USAGE
    assert [e.usage for e in events if type(e) is UsageReported] == [USAGE]


def test_metadata_assigned_once_and_tgi_empty_id_is_no_id() -> None:
    _, result = parse_completion(
        [
            sse(
                c(text_choice("a"), id="", system_fingerprint="fp_1"),
                c(text_choice("", finish_reason="stop"), id="cmpl-2", model="other"),
            )
        ]
    )
    assert result.id == "cmpl-2"
    assert result.model == "m"
    assert result.created == 1
    assert result.system_fingerprint == "fp_1"
    assert result.done_received


def test_llama_server_data_null_is_counted_not_failed() -> None:
    _, result = parse_completion([sse("null", "null", c(text_choice("a", finish_reason="stop")))])
    assert result.status == "complete"
    assert [(a.kind, a.count) for a in result.anomalies] == [("null event", 2)]


def test_server_timings_kept() -> None:
    timings = {"prompt_n": 3, "predicted_n": 2, "predicted_ms": 10.0}
    _, result = parse_completion([sse(c(text_choice("a", finish_reason="stop"), timings=timings))])
    assert result.server_timings == {"timings": timings}


def test_content_before_an_error_stays_and_done_after_it_is_the_normal_close() -> None:
    _, result = parse_completion([BY_NAME["error_object_midstream"].body])
    assert result.text == "part"
    assert result.server_error is not None and result.server_error.code == 500
    assert not [a for a in result.anomalies if a.kind.startswith("data after")]


def object_chunks(row: Row) -> list[dict[str, Any]] | None:
    """The row's data events as decoded objects, or None when one is not a plain chunk."""
    datas = [line[6:] for line in row.body.decode().split("\n") if line.startswith("data: ")]
    chunks: list[dict[str, Any]] = []
    for data in datas:
        if data == "[DONE]":
            continue
        try:
            value = json.loads(data)
        except ValueError:
            return None
        if (
            type(value) is not dict
            or "error" in value
            or ("object" in value and "choices" not in value)
        ):
            return None
        chunks.append(value)
    return chunks


PLAIN = [row for row in ROWS if object_chunks(row) is not None and row.error is None]


@pytest.mark.parametrize("row", PLAIN, ids=[row.name for row in PLAIN])
def test_accumulator_fed_decoded_chunks_agrees_with_the_parser(row: Row) -> None:
    """feed_chunk on each data event's JSON gives what the bytes gave."""
    chunks = object_chunks(row)
    assert chunks is not None
    _, result = accumulate_completion(chunks)
    _, parsed = parse_completion([row.body])
    assert texts(result) == texts(parsed)
    assert [c.finish_reason for c in result.choices] == [c.finish_reason for c in parsed.choices]
    assert result.usage == parsed.usage


def test_feed_chunk_copies_what_it_keeps() -> None:
    accumulator = chunkwise.completions.Accumulator()
    chunk = c(text_choice("a", logprobs={"tokens": ["a"]}), usage=dict(USAGE))
    accumulator.feed(chunk)
    chunk["usage"]["total_tokens"] = 99
    chunk["choices"][0]["logprobs"]["tokens"].append("b")
    assert accumulator.result.usage == USAGE
    assert accumulator.result.choice(0).logprobs == {"tokens": ["a"]}


def test_feed_chunk_rejects_a_non_mapping_with_a_typed_error() -> None:
    accumulator = chunkwise.completions.Accumulator()
    accumulator.feed(c(text_choice("a")))
    events = accumulator.feed([1])  # type: ignore[arg-type]
    assert type(events[-1]) is StreamFailed
    assert isinstance(accumulator.result.error, chunkwise.errors.InvalidChunk)
    assert accumulator.result.text == "a"


def test_choice_finished_event_carries_the_raw_reason() -> None:
    events, _ = parse_completion([BY_NAME["several_prompts_and_n_interleaved"].body])
    finished = [(e.choice_index, e.finish_reason) for e in events if type(e) is chat.ChoiceFinished]
    assert finished == [(0, "stop"), (3, "length"), (1, "eos")]


# The legacy ``error:`` field is an option of the parser's decoder, not an SSE event.
SSE_ROWS = [row for row in ROWS if b"\nerror:" not in b"\n" + row.body]


@pytest.mark.parametrize("row", SSE_ROWS, ids=[row.name for row in SSE_ROWS])
def test_feed_event_with_decoded_sse_events_gives_the_parsers_result(row: Row) -> None:
    """The accumulator fed the SSE decoder's events agrees with the bytes parser."""
    decoder = chunkwise.SSEDecoder()
    accumulator = chunkwise.completions.Accumulator()
    events: list[chunkwise.Event] = []
    for sse_event in [*decoder.feed(row.body), *decoder.end()]:
        events += accumulator.feed_sse(sse_event)
    events += accumulator.end()
    _, parsed = parse_completion([row.body])
    assert accumulator.result == parsed


def test_text_deltas_are_the_choice_family_and_not_chat_events() -> None:
    delta = completions.TextDelta(choice_index=0, text="x")
    assert delta.family == "choice"
    assert completions.TextDelta not in typing.get_args(chunkwise.chat.Event)
    assert completions.TextDelta in typing.get_args(chunkwise.completions.Event)

"""The Responses vectors of ``tests/data/responses`` against their expected results.

Each stream is parsed in one read and in one-byte reads (both must give the
same events and result), and the result is compared, field by field, with
the file's entry in ``expected.json`` (see that folder's README).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import chunkwise
from helpers.data import DATA
from helpers.reads import parse_response, terminal

FOLDER = DATA / "responses"
VECTORS = sorted(FOLDER.glob("*.sse"))
with open(FOLDER / "expected.json", encoding="utf-8") as _f:
    EXPECTED: dict[str, dict[str, Any]] = json.load(_f)


def view(result: chunkwise.responses.Result) -> dict[str, Any]:
    """The fields ``expected.json`` gives, read from a result."""
    error = result.error
    return {
        "status": result.status,
        "response_status": result.response_status,
        "reason": None if result.reason is None else result.reason.name.lower(),
        "incomplete_reason": result.incomplete_reason,
        "output_text": result.output_text,
        "refusal": result.refusal,
        "reasoning": result.reasoning,
        "items": [item.type for item in result.output],
        "function_calls": [[c.call_id, c.name, c.arguments] for c in result.function_calls],
        "usage": None if result.usage is None else dict(result.usage),
        "error": None
        if error is None
        else {"message": getattr(error, "message", None), "code": getattr(error, "code", None)},
        "anomalies": [a.kind for a in result.anomalies],
    }


def test_every_vector_has_an_expectation() -> None:
    assert sorted(p.stem for p in VECTORS) == sorted(EXPECTED)
    assert len(VECTORS) >= 10


@pytest.mark.parametrize("path", VECTORS, ids=[p.stem for p in VECTORS])
def test_vector_gives_its_expected_result(path: Path) -> None:
    # Whole bodies: reads change nothing (test_split_invariance.py).
    events, result = parse_response([path.read_bytes()])
    assert view(result) == EXPECTED[path.stem]
    end = terminal(events)
    want = {
        "complete": chunkwise.StreamCompleted,
        "incomplete": chunkwise.StreamIncomplete,
        "failed": chunkwise.StreamFailed,
    }
    assert isinstance(
        end, (chunkwise.StreamCompleted, chunkwise.StreamIncomplete, chunkwise.StreamFailed)
    )
    assert type(end) is want[result.status]
    assert end.result == result


@pytest.mark.parametrize("path", VECTORS, ids=[p.stem for p in VECTORS])
def test_deltas_add_up_to_the_final_texts(path: Path) -> None:
    # The vectors' .done events never disagree with their deltas, so the
    # deltas alone rebuild every part and every call's arguments.
    events, result = parse_response([path.read_bytes()])
    texts: dict[tuple[int, int], str] = {}
    for e in events:
        if isinstance(e, (chunkwise.responses.TextDelta, chunkwise.responses.RefusalDelta)):
            key = (e.output_index, e.content_index)
            texts[key] = texts.get(key, "") + e.text
    assert texts == {
        (item.index, part.index): part.text
        for item in result.output
        for part in item.content
        if part.text
    }
    arguments: dict[int, str] = {}
    for e in events:
        if isinstance(e, chunkwise.responses.ToolCallArgumentsDelta):
            arguments[e.output_index] = arguments.get(e.output_index, "") + e.fragment
    assert arguments == {c.index: c.arguments for c in result.function_calls}
    assert not [a for a in result.anomalies if "differ" in a.kind]


def test_parallel_calls_complete_in_the_order_their_arguments_finished() -> None:
    events, result = parse_response([(FOLDER / "openai_function_calls.sse").read_bytes()])
    completed = [e for e in events if isinstance(e, chunkwise.responses.ToolCallCompleted)]
    assert [e.call.call_id for e in completed] == ["call_weather_paris", "call_weather_tokyo"]
    assert [c.parse_arguments() for c in result.function_calls] == [
        {"city": "Paris"},
        {"city": "Tōkyō"},
    ]
    assert all(c.finished and c.error is None for c in result.function_calls)


def test_reasoning_summary_deltas_keep_their_summary_index() -> None:
    events, result = parse_response([(FOLDER / "openai_reasoning.sse").read_bytes()])
    deltas = [e for e in events if isinstance(e, chunkwise.responses.ReasoningSummaryDelta)]
    assert sorted({e.summary_index for e in deltas}) == [0, 1]
    assert [p.text for p in result.output[0].summary] == ["**Planning**\n\nI will", " add 2 and 2."]

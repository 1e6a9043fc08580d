"""Provider vectors and recorded OpenAI streams, whole (the same in any reads: see
``test_split_invariance.py``, which reads them all)."""

from __future__ import annotations

from typing import Any

import pytest

import chunkwise
from helpers.data import RECORDINGS, load_vectors
from helpers.reads import parse_chat, terminal

VECTORS = load_vectors()


def reconstruction(result: chunkwise.chat.Result) -> dict[str, Any]:
    """The shape of a vector's ``expected`` section."""
    out: dict[str, Any] = {
        "choices": {
            str(c.index): {
                "content": c.content or None,
                "reasoning": c.reasoning,
                "tool_calls": [
                    {"id": t.id, "name": t.name, "arguments": t.arguments} for t in c.tool_calls
                ],
                "finish_reason": c.finish_reason,
            }
            for c in result.choices
        },
        "usage": None
        if result.usage is None
        else {k: result.usage[k] for k in ("prompt_tokens", "completion_tokens", "total_tokens")},
        "complete": result.status == "complete",
    }
    error = result.server_error
    out["error"] = (
        None
        if error is None
        else {"message": error.message, "type": error.type, "code": error.code}
    )
    return out


def expected_of(vector: dict[str, Any]) -> dict[str, Any]:
    expected = dict(vector["expected"])
    expected.setdefault("error", None)
    return expected


@pytest.mark.parametrize("vector", VECTORS, ids=[v["name"] for v in VECTORS])
def test_provider_vector_reconstructs_expected_result(vector: dict[str, Any]) -> None:
    events, result = parse_chat([vector["raw"].encode()])
    assert reconstruction(result) == expected_of(vector)
    terminal(events)


@pytest.mark.parametrize("path", RECORDINGS, ids=[p.stem for p in RECORDINGS])
def test_openai_recording_completes(path: Any) -> None:
    data = path.read_bytes()
    whole_events, whole = parse_chat([data])
    assert whole.status == "complete"
    assert whole.done_received
    assert whole.usage is not None
    assert not whole.anomalies
    assert isinstance(terminal(whole_events), chunkwise.StreamCompleted)


def test_recording_with_three_choices_keeps_each_choice_apart() -> None:
    (path,) = [p for p in RECORDINGS if p.stem == "a491adda08c3"]
    _, result = parse_chat([path.read_bytes()])
    assert [c.index for c in result.choices] == [0, 1, 2]
    for c in result.choices:
        assert c.content.startswith('{"city":"San Francisco"')
        assert c.finish_reason == "stop"
    assert len({c.content for c in result.choices}) == 3


def test_recording_finish_reason_length_is_not_stop() -> None:
    (path,) = [p for p in RECORDINGS if p.stem == "4cc50a6135d2"]
    _, result = parse_chat([path.read_bytes()])
    assert result.choice(0).finish_reason == "length"
    assert result.status == "complete"


def test_recording_refusal_is_kept_apart_from_content() -> None:
    (path,) = [p for p in RECORDINGS if p.stem == "173417d55340"]
    _, result = parse_chat([path.read_bytes()])
    assert result.choice(0).content == ""
    refusal = result.choice(0).refusal
    assert refusal is not None and refusal.startswith("I'm sorry")


def test_recording_logprobs_are_accumulated() -> None:
    with_logprobs = []
    for path in RECORDINGS:
        _, result = parse_chat([path.read_bytes()])
        lp = result.choices[0].logprobs
        tokens = (lp.get("content") or lp.get("refusal")) if lp is not None else None
        if tokens:
            with_logprobs.append(path.stem)
            text = result.choices[0].content or result.choices[0].refusal
            assert "".join(t["token"] for t in tokens) == text
    assert len(with_logprobs) == 2


def test_recording_parallel_tool_calls_parse_into_two_calls() -> None:
    (path,) = [p for p in RECORDINGS if p.stem == "f82268f2fefd"]
    events, result = parse_chat([path.read_bytes()])
    calls = result.choice(0).tool_calls
    assert [c.index for c in calls] == [0, 1]
    assert len({c.id for c in calls}) == 2
    for call in calls:
        assert call.finished and call.completed and call.error is None
        assert isinstance(call.parse_arguments(), dict)
    completed = [e for e in events if isinstance(e, chunkwise.chat.ToolCallCompleted)]
    assert [e.tool_index for e in completed] == [0, 1]
    finished = [e for e in events if isinstance(e, chunkwise.chat.ChoiceFinished)]
    assert events.index(completed[-1]) < events.index(finished[0])


@pytest.mark.parametrize("path", RECORDINGS, ids=[p.stem for p in RECORDINGS])
def test_one_event_per_read_matches_one_read(path: Any) -> None:
    # Servers that flush every event produce exactly these reads; the parser
    # has a fast path for them that must agree with the general one.
    data = path.read_bytes()
    events = [e + b"\n\n" for e in data.split(b"\n\n") if e]
    assert b"".join(events) == data
    assert parse_chat(events) == parse_chat([data])
    nospace = [e.replace(b"data: ", b"data:", 1) for e in events]
    assert parse_chat(nospace) == parse_chat([b"".join(nospace)])


@pytest.mark.parametrize(
    "read",
    [b"data:\n\n", b"data: \n\n", b"data:  x\n\n", b"data: [DONE]\n\n", b"data: {}\n\n"],
)
def test_single_short_event_reads_match_the_general_path(read: bytes) -> None:
    prefix = b": comment\n\n"  # the fast path needs nothing pending; so does this
    assert parse_chat([prefix, read]) == parse_chat([prefix + read])

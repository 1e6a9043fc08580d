"""Hypothesis: for realistic generated streams, any split into reads gives the same
events and result as one read, and the result is the stream that was generated."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import chunkwise
from helpers.reads import parse_chat, split_at
from helpers.strategies import chat_streams, chunk_values

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(stream=chat_streams())
def test_generated_stream_reconstructs_exactly(
    stream: tuple[bytes, dict[int, dict[str, Any]]],
) -> None:
    body, expected = stream
    events, result = parse_chat([body])
    assert result.status == "complete"
    # Arbitrary argument text: its live preview may stop ("not JSON"), nothing else.
    assert {a.kind for a in result.anomalies} <= {"not JSON"}
    assert result.usage == {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}
    assert _json(result.extra) == _json(expected.pop(-1)["extra"])
    for index, want in expected.items():
        got = result.choice(index)
        assert got.content == want["content"]
        assert [(c.id, c.arguments) for c in got.tool_calls] == want["calls"]
        audio = got.audio and (got.audio.data, got.audio.transcript)
        assert audio == want["audio"]
        assert (got.function_call and got.function_call.arguments) == want["function_call"]
        assert _json(got.extra) == _json(want["extra"])
    for index, want in expected.items():
        deltas = [
            e.text
            for e in events
            if isinstance(e, chunkwise.chat.TextDelta) and e.choice_index == index
        ]
        assert "".join(deltas) == want["content"]
        spoken = [
            (e.data, e.transcript)
            for e in events
            if isinstance(e, chunkwise.chat.AudioDelta) and e.choice_index == index
        ]
        if want["audio"] is not None:
            assert ("".join(d for d, _ in spoken), "".join(t for _, t in spoken)) == want["audio"]


def _json(value: Any) -> str:
    # Frozen values (tuples, read-only dicts) and plain ones write the same JSON.
    return json.dumps(value, sort_keys=True)


@settings(max_examples=300, deadline=None)
@given(chunks=st.lists(chunk_values, max_size=6))
def test_arbitrary_json_shaped_chunks_never_raise(chunks: list[dict[str, Any]]) -> None:
    acc = chunkwise.chat.Accumulator()
    events: list[chunkwise.Event] = []
    for c in chunks:
        events += acc.feed(c)
        snapshot = acc.result  # readable at any time
        assert snapshot.status in ("streaming", "failed", "complete", "incomplete")
    events += acc.end()
    terminals = [
        e
        for e in events
        if isinstance(
            e, (chunkwise.StreamCompleted, chunkwise.StreamIncomplete, chunkwise.StreamFailed)
        )
    ]
    assert len(terminals) == 1 and events[-1] is terminals[0]
    if acc.result.status == "failed":
        assert isinstance(acc.result.error, chunkwise.ChunkwiseError)


# --- a result never changes after it was handed out --------------------------------------

words = st.text(alphabet="abcé😀 ", min_size=1, max_size=4)


@st.composite
def rich_chunks(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Chunks with logprobs, usage (nested details) and streamed tool calls, 1 or 2 choices."""
    queues: list[list[dict[str, Any]]] = []
    for index in range(draw(st.integers(1, 2))):
        deltas: list[dict[str, Any]] = []
        for word in draw(st.lists(words, max_size=4)):
            top = [{"token": word, "logprob": -0.5, "bytes": list(word.encode())}]
            logprobs = {"content": [{**top[0], "top_logprobs": top}], "refusal": None}
            filters = {"hate": {"filtered": False, "severity": "safe"}}  # kept in extra
            deltas.append(
                {
                    "index": index,
                    "delta": {"content": word},
                    "logprobs": logprobs,
                    "content_filter_results": filters,
                }
            )
        for word in draw(st.lists(words, max_size=2)):
            deltas.append({"index": index, "delta": {"audio": {"id": "a", "transcript": word}}})
        for i, value in enumerate(draw(st.lists(words, max_size=2))):
            text = json.dumps({"city": value, "days": [1, 2]})
            cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=3)))
            head = {"index": i, "id": f"call_{index}_{i}", "function": {"name": "f"}}
            deltas.append({"index": index, "delta": {"tool_calls": [head]}})
            for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True):
                call = {"index": i, "function": {"arguments": text[a:b]}}
                deltas.append({"index": index, "delta": {"tool_calls": [call]}})
        if draw(st.booleans()):
            deltas.append({"index": index, "delta": {}, "finish_reason": "stop"})
        queues.append(deltas)
    chunks: list[dict[str, Any]] = []
    while any(queues):
        # Interleave the choices, each in its own order, with the odd usage chunk.
        queue = draw(st.sampled_from([q for q in queues if q]))
        chunks.append({"choices": [queue.pop(0)]})
        if draw(st.integers(0, 3)) == 0:
            chunks[-1]["moderation"] = {"results": [{"flagged": False}]}
        if draw(st.integers(0, 4)) == 0:
            details = {"reasoning_tokens": len(chunks)}
            usage = {"total_tokens": len(chunks), "completion_tokens_details": details}
            chunks.append({"choices": [], "usage": usage})
    return chunks


def _feed_and_snapshot(chunks: list[dict[str, Any]], as_bytes: bool) -> list[tuple[Any, Any]]:
    """Feed the chunks one by one; after each, the snapshot and the events, with deep copies."""
    handed_out: list[tuple[Any, Any]] = []
    parser = chunkwise.chat.Parser()
    accumulator = chunkwise.chat.Accumulator()
    for c in chunks:
        if as_bytes:
            events = parser.feed(f"data: {json.dumps(c)}\n\n".encode())
            snapshot = parser.result
        else:
            events = accumulator.feed(c)
            snapshot = accumulator.result
        handed_out.append(((snapshot, events), copy.deepcopy((snapshot, events))))
    events = parser.end() if as_bytes else accumulator.end()
    final = parser.result if as_bytes else accumulator.result
    handed_out.append(((final, events), copy.deepcopy((final, events))))
    return handed_out


@SETTINGS
@given(chunks=rich_chunks(), as_bytes=st.booleans())
def test_snapshots_and_events_never_change_after_they_were_handed_out(
    chunks: list[dict[str, Any]], as_bytes: bool
) -> None:
    handed_out = _feed_and_snapshot(chunks, as_bytes)
    if not as_bytes:
        # The caller's chunks are theirs to change, which changes no result.
        for c in chunks:
            for choice in c["choices"]:
                logprobs = choice.get("logprobs")
                if logprobs:
                    logprobs["content"].append({"token": "changed"})
                    logprobs["content"][0]["logprob"] = 0.0
                if "content_filter_results" in choice:
                    choice["content_filter_results"]["hate"]["filtered"] = True
            if "moderation" in c:
                c["moderation"]["results"].append({"flagged": True})
            if "usage" in c:
                c["usage"]["completion_tokens_details"]["reasoning_tokens"] = -1
    for given_out, copied in handed_out:
        assert given_out == copied
    # And the final result is what the stream said.
    final = handed_out[-1][0][0]
    for choice in final.choices:
        tokens = [t["token"] for t in (choice.logprobs or {}).get("content", [])]
        assert "".join(tokens) == choice.content


# --- logprobs: lists concatenated across chunks, null is "nothing this chunk" ------------

token_logprobs = st.lists(
    st.builds(lambda w: {"token": w, "logprob": -0.5, "bytes": list(w.encode())}, words),
    max_size=2,
)
#: A choice's ``logprobs`` in one chunk: absent, null, or a dict whose lists may be null.
chunk_logprobs = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {},
        optional={
            "content": st.one_of(st.none(), token_logprobs),
            "refusal": st.one_of(st.none(), token_logprobs),
        },
    ),
)
TOKEN = {"token": "a", "logprob": -0.5, "bytes": [97]}


@SETTINGS
@given(
    sent=st.lists(chunk_logprobs, min_size=1, max_size=8),
    cuts=st.lists(st.integers(0, 4000), max_size=4),
    read_midway=st.booleans(),
)
@example(sent=[{"content": [TOKEN]}, {"content": None}], cuts=[], read_midway=False)
@example(sent=[{"content": [TOKEN]}, {"content": None, "refusal": None}], cuts=[], read_midway=True)
@example(sent=[{"refusal": [TOKEN]}, None, {"refusal": None}], cuts=[], read_midway=False)
def test_a_later_null_logprobs_list_never_wipes_the_lists_merged_so_far(
    sent: list[dict[str, Any] | None], cuts: list[int], read_midway: bool
) -> None:
    """A choice's logprobs lists are the concatenation of every chunk's; a ``null`` list (or
    ``logprobs: null``) adds nothing, as the openai SDK merges them.
    """
    # What the stream said: each key's lists concatenated; a key sent only as null stays null.
    expected: dict[str, Any] | None = None
    for logprobs in sent:
        if logprobs is None:
            continue
        expected = {} if expected is None else expected
        for key, value in logprobs.items():
            if value is not None:
                expected[key] = [*(expected.get(key) or []), *value]
            else:
                expected.setdefault(key, None)
    lines = []
    for logprobs in sent:
        text = "".join(t["token"] for t in (logprobs or {}).get("content") or [])
        choice = {"index": 0, "delta": {"content": text}, "logprobs": logprobs}
        lines.append(f"data: {json.dumps({'id': 'x', 'choices': [choice]})}\n\n")
    lines.append('data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}\n\n')
    body = "".join(lines).encode()
    parser = chunkwise.chat.Parser()
    for read in split_at(body, cuts):
        parser.feed(read)
        if read_midway:  # a snapshot holds the lists: the next merge copies them first
            assert parser.result.status == "streaming"
    parser.end()
    merged = parser.result.choices[0].logprobs
    assert (None if merged is None else dict(merged)) == expected

"""Hardening of the sans-IO layers against what a server (or a caller) can hand them.

* Nothing the server sends makes :class:`chunkwise.chat.Parser` raise, from
  ``feed()`` or from ``end()``: JSON nested past the recursion limit, integers
  past the digit limit, a line cut off over ``max_event_size`` at end of stream.
  Each becomes a failed result with a typed error, keeping what came before.
* ``chunkwise._core.payloads``: every JSON failure is one typed error, and values
  are copied, written back and described without recursion limits.
* A result never changes after it was handed out, whatever the caller does
  with its own chunks or with the values a result gives it.
"""

from __future__ import annotations

import copy
import json
import pickle
import sys
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chunkwise
from chunkwise._core.payloads import (
    DATA_LIMIT,
    copy_json,
    dump_json,
    load_json,
    parse_json,
    preview,
)
from helpers.bodies import choice, chunk, sse, tool
from helpers.reads import accumulate, byte_reads, parse_chat, terminal

# --- ChatStreamParser never raises -----------------------------------------------------


def test_parser_end_turns_a_cut_off_line_over_the_limit_into_a_failed_result() -> None:
    # The flushed U+FFFD makes the cut-off line 17 characters: too large for 16.
    parser = chunkwise.chat.Parser(max_event_size=16)
    events = parser.feed(b"data: data:data:" + b"\x00" * 6 + b"\xc2")
    assert events == []
    events = parser.end()
    assert parser.result.status == "failed"
    assert parser.result.error == chunkwise.errors.EventTooLarge(16)
    assert isinstance(terminal(events), chunkwise.StreamFailed)
    assert parser.end() == []


def test_parser_end_keeps_what_came_before_a_cut_off_line_over_the_limit() -> None:
    body = sse(chunk(choice(content="kept")), done=False) + b"data: " + b"x" * 200 + b"\xc2"
    limit = len(sse(chunk(choice(content="kept")), done=False))  # room for the first event
    for reads in ([body], byte_reads(body)):
        events, result = parse_chat(reads, max_event_size=limit)
        assert isinstance(result.error, chunkwise.errors.EventTooLarge)
        assert result.content == "kept"
        assert isinstance(terminal(events), chunkwise.StreamFailed)


@pytest.mark.parametrize("space", [b" ", b""])
def test_parser_accepts_an_event_of_exactly_max_event_size_and_fails_one_over(
    space: bytes,
) -> None:
    # The parser's own fast paths (one event per read, one data line per
    # event) keep the decoder's rule: the size of a data-only event is len(data).
    data = json.dumps(chunk(choice(content="x", finish_reason="stop"))).encode()
    body = b"data:" + space + data + b"\n\n"
    for limit, status in ((len(data), "complete"), (len(data) - 1, "failed")):
        for reads in ([body], byte_reads(body), [body[:7], body[7:]]):
            _, result = parse_chat(reads, max_event_size=limit)
            assert result.status == status, (limit, len(reads))


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


PLACES = {
    "whole-event": "{}",
    "in-tool-calls": '{{"choices":[{{"index":0,"delta":{{"tool_calls":{{"x":{}}}}}}}]}}',
    "as-tool-call": '{{"choices":[{{"index":0,"delta":{{"tool_calls":[{}]}}}}]}}',
    "as-usage": '{{"choices":[],"usage":{}}}',
    "as-finish-reason": '{{"choices":[{{"index":0,"delta":{{}},"finish_reason":{}}}]}}',
    "as-error-message": '{{"error":{{"message":{}}}}}',
    "as-error": '{{"error":{}}}',
    "as-arguments-value": (
        '{{"choices":[{{"index":0,"delta":{{"tool_calls":[{{"index":0,"id":"a",'
        '"function":{{"name":"f","arguments":{}}}}}]}},"finish_reason":"tool_calls"}}]}}'
    ),
}


@pytest.mark.parametrize("place", sorted(PLACES))
def test_json_nested_at_every_depth_around_the_recursion_limit_never_raises(place: str) -> None:
    # Near the limit a value can be parsed here and still be too deep to
    # repr, copy or write back from a few frames further down: every depth
    # either works or fails the stream with InvalidChunk.
    limit = sys.getrecursionlimit()
    head = sse(chunk(choice(content="kept")), done=False)
    for depth in range(limit - 80, limit + 5):
        data = PLACES[place].format(_nested(depth))
        for kind in ("message", "error"):
            parser = chunkwise.chat.Parser()
            events = parser.feed(head)
            events += parser.feed(f"event: {kind}\ndata: {data}\n\n".encode())
            events += parser.end()
            result = parser.result
            assert result.content == "kept", depth
            assert result.status != "streaming"
            if result.status == "failed":
                assert isinstance(result.error, chunkwise.ChunkwiseError)
            terminal(events)


def test_tool_arguments_nested_past_the_recursion_limit_give_a_tool_arguments_error() -> None:
    arguments = _nested(5000)
    _, result = accumulate(
        [
            chunk(choice(tool_calls=[tool(0, id="a", name="f", arguments=arguments)])),
            chunk(choice(finish_reason="tool_calls")),
        ]
    )
    (call,) = result.choice(0).tool_calls
    assert call.arguments == arguments
    assert isinstance(call.error, chunkwise.ToolArgumentsError)


# --- _payloads ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "message"),
    [
        pytest.param(_nested(5000), "nested deeper than the recursion limit", id="deep"),
        pytest.param('{"a": ' * 5000 + "1" + "}" * 5000, "nested deeper", id="deep-object"),
        pytest.param("9" * 5000, "integer string conversion", id="huge-integer"),
        pytest.param("NaN", "NaN is not a JSON number", id="nan"),
        pytest.param("[Infinity]", "Infinity is not a JSON number", id="infinity"),
        pytest.param("{not json", "is not valid JSON", id="not-json"),
        pytest.param("", "is not valid JSON", id="empty"),
        pytest.param("{} {}", "is not valid JSON: Extra data", id="two-values"),
        pytest.param("\ud800", "is not valid JSON", id="lone-surrogate"),
    ],
)
def test_load_json_turns_every_failure_into_invalid_chunk(data: str, message: str) -> None:
    with pytest.raises(chunkwise.errors.InvalidChunk) as info:
        load_json(data)
    assert message in str(info.value)
    assert info.value.data == data[:DATA_LIMIT]
    assert isinstance(info.value, chunkwise.RemoteProtocolError)
    with pytest.raises(ValueError, match=r"\w"):
        parse_json(data)


def test_load_json_numbers_too_large_for_a_float_are_infinite() -> None:
    assert load_json('{"a": 1e999, "b": -1e999}') == {"a": float("inf"), "b": float("-inf")}


# Everything json.dumps writes as standard JSON (no NaN or infinity).
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(value=json_values, indent=st.sampled_from([None, 1]), space=st.sampled_from(["", " \n"]))
def test_load_json_reads_standard_json_as_json_loads_does(
    value: Any, indent: int | None, space: str
) -> None:
    text = space + json.dumps(value, indent=indent) + space
    assert load_json(text) == json.loads(text)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(value=json_values)
def test_copy_json_equals_its_source_and_shares_no_container(value: Any) -> None:
    copied = copy_json(value)
    assert copied == value
    assert not set(map(id, _containers(copied))) & set(map(id, _containers(value)))
    assert dump_json(value) == json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _containers(value: Any) -> Iterator[Any]:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            yield item
            stack.extend(item.values())
        elif isinstance(item, list):
            yield item
            stack.extend(item)


def test_copy_json_copies_any_depth_and_any_mapping() -> None:
    deep: Any = 1
    for _ in range(100_000):
        deep = [deep]
    copied = copy_json(deep)
    assert copied is not deep
    for _ in range(100_000):
        copied = copied[0]
    assert copied == 1

    class Frozen(Mapping[str, Any]):
        def __getitem__(self, key: str) -> Any:
            return {"x": [1]}[key]

        def __iter__(self) -> Iterator[str]:
            return iter(["x"])

        def __len__(self) -> int:
            return 1

    assert copy_json({"a": Frozen()}) == {"a": {"x": [1]}}
    assert type(copy_json(Frozen())) is dict
    assert copy_json("text") == "text"


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(float("nan"), id="nan"),
        pytest.param(float("inf"), id="infinity"),
        pytest.param({1, 2}, id="set"),
        pytest.param({"a": object()}, id="object"),
        pytest.param(json.loads(_nested(900)), id="too-deep-to-write-from-here"),
    ],
)
def test_dump_json_is_none_for_values_without_json_text(value: Any) -> None:
    def deeper(n: int) -> str | None:
        # A few hundred frames down, as a value parsed near the limit would be.
        return deeper(n - 1) if n else dump_json(value)

    assert deeper(200) is None


class _BadRepr:
    def __repr__(self) -> str:
        raise RuntimeError("no")


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("x" * 1_000_000, id="long-string"),
        pytest.param(list(range(100_000)), id="long-list"),
        pytest.param(json.loads(_nested(900)), id="deep"),
        pytest.param(10**5000, id="integer-past-the-digit-limit"),
        pytest.param(_BadRepr(), id="failing-repr"),
    ],
)
def test_preview_is_short_and_never_raises(value: Any) -> None:
    text = preview(value)
    assert 0 < len(text) <= 200
    assert len(preview(value, 20)) <= 20


def test_preview_of_a_small_value_is_its_repr() -> None:
    assert preview({"a": [1, "b"]}) == repr({"a": [1, "b"]})


# --- results never change once handed out ------------------------------------------------


def test_snapshot_logprobs_do_not_grow_when_later_chunks_arrive() -> None:
    def logprobs_chunk(token: str) -> dict[str, Any]:
        entry = {"token": token, "logprob": -0.1, "top_logprobs": []}
        return chunk({"index": 0, "delta": {"content": token}, "logprobs": {"content": [entry]}})

    acc = chunkwise.chat.Accumulator()
    acc.feed(logprobs_chunk("a"))
    first = acc.result
    acc.feed(logprobs_chunk("b"))
    second = acc.result
    acc.feed(logprobs_chunk("c"))
    acc.end()
    first_logprobs, second_logprobs = first.choice(0).logprobs, second.choice(0).logprobs
    assert first_logprobs is not None and second_logprobs is not None
    assert [t["token"] for t in first_logprobs["content"]] == ["a"]
    assert [t["token"] for t in second_logprobs["content"]] == ["a", "b"]
    assert acc.result.choice(0).logprobs == {
        "content": [{"token": t, "logprob": -0.1, "top_logprobs": []} for t in ("a", "b", "c")]
    }


def test_feed_chunk_copies_what_it_keeps_from_the_callers_mapping() -> None:
    usage: dict[str, Any] = {
        "total_tokens": 3,
        "completion_tokens_details": {"reasoning_tokens": 1},
    }
    logprobs: dict[str, Any] = {"content": [{"token": "a", "logprob": -0.1}]}
    error: dict[str, Any] = {"message": "boom", "metadata": {"raw": ["upstream"]}}
    first = chunk({"index": 0, "delta": {"content": "a"}, "logprobs": logprobs}, usage=usage)
    acc = chunkwise.chat.Accumulator()
    events = acc.feed(first)
    acc.feed({"error": error})
    result = acc.result
    expected = copy.deepcopy((result, events))
    usage["completion_tokens_details"]["reasoning_tokens"] = 99
    logprobs["content"][0]["token"] = "changed"
    logprobs["content"].append({"token": "more"})
    error["metadata"]["raw"].append("changed")
    assert (result, events) == expected
    assert acc.result == expected[0]
    assert result.server_error is not None
    assert result.server_error.body == {"message": "boom", "metadata": {"raw": ["upstream"]}}


def test_parse_arguments_returns_a_new_value_each_time() -> None:
    _, result = accumulate(
        [
            chunk(choice(tool_calls=[tool(0, id="a", name="f", arguments='{"x": [1]}')])),
            chunk(choice(finish_reason="tool_calls")),
        ]
    )
    (call,) = result.choice(0).tool_calls
    value = call.parse_arguments()
    value["x"].append(2)
    value["y"] = 0
    assert call.parse_arguments() == {"x": [1]}


@pytest.mark.parametrize("clone", [copy.deepcopy, lambda c: pickle.loads(pickle.dumps(c))])
def test_copied_tool_calls_still_parse_their_arguments(clone: Any) -> None:
    unfinished = chunkwise.ToolCall(index=0, name="f", arguments="[1]")
    assert clone(unfinished).parse_arguments() == [1]
    _, result = accumulate(
        [
            chunk(choice(tool_calls=[tool(0, id="a", name="f", arguments="[2]")])),
            chunk(choice(finish_reason="tool_calls")),
        ]
    )
    assert clone(result).choice(0).tool_calls[0].parse_arguments() == [2]


@pytest.mark.parametrize(
    "error",
    [
        chunkwise.ToolArgumentsError("bad arguments", raw="{", tool_name="f"),
        chunkwise.errors.EventTooLarge(16),
        chunkwise.StreamError("overloaded", code=529, type="overloaded_error"),
        chunkwise.errors.InvalidChunk("not JSON", "{"),
        chunkwise.HTTPStatusError(429, reason="Too Many Requests", body=b"{}", retry_after=2.0),
    ],
)
def test_errors_survive_deepcopy_and_pickle_equal(error: chunkwise.ChunkwiseError) -> None:
    for copied in (copy.deepcopy(error), pickle.loads(pickle.dumps(error))):
        assert type(copied) is type(error)
        assert copied == error
        assert str(copied) == str(error)

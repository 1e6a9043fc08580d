"""The whole chat surface (issue 32): spoken output, the legacy function_call, and the chunk
and choice fields chunkwise does not model, a table row for every wire shape.

Rows are fed as whole bodies cut at every offset (a cut changes nothing) and
as decoded chunks; the rules are :mod:`chunkwise.chat.accumulator`'s 4 and 5
and :mod:`chunkwise._core.chunks`'s 7.
"""

from __future__ import annotations

from typing import Any

import pytest

import chunkwise
from chunkwise import AnomalyDetected, chat
from helpers.bodies import chunk, sse
from helpers.reads import accumulate, accumulate_completion, parse_chat, split_at

AUDIO = {"id": "audio_1", "transcript": "Hel"}
FUNCTIONS = [
    {"name": "get_weather", "parameters": {"type": "object", "required": ["city"]}},
]


def delta(finish_reason: str | None = None, **fields: Any) -> dict[str, Any]:
    return chunk({"index": 0, "delta": fields, "finish_reason": finish_reason})


FINISH = delta("stop")


def anomalies(events: list[chunkwise.Event]) -> list[str]:
    return [e.anomaly.kind for e in events if isinstance(e, AnomalyDetected)]


def top(body: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """``body`` with these chunk-level fields."""
    return {**body, **fields}


def read_every_way(
    chunks: list[dict[str, Any]], done: bool = True, **kwargs: Any
) -> tuple[list[Any], Any]:
    """The events and result of ``chunks``, checked the same in every two reads and decoded."""
    body = sse(*chunks, done=done)
    whole = parse_chat([body], **kwargs)
    for cut in range(0, len(body) + 1, 7):
        assert parse_chat(split_at(body, [cut]), **kwargs) == whole, cut
    # Decoded chunks (no [DONE]: done_received differs) give the same events and choices.
    events, result = accumulate(chunks, **kwargs)
    assert events[:-1] == whole[0][:-1]
    assert (result.choices, result.extra) == (whole[1].choices, whole[1].extra)
    return whole


# -- audio (rule 4) ------------------------------------------------------------------------

#: deltas' audio -> (Audio, AudioDelta (data, transcript) pairs, anomalies)
AUDIO_SHAPES: dict[str, tuple[list[Any], Any, list[tuple[str, str]], list[str]]] = {
    "openai: id with words, words, data, expires_at after the finish": (
        [
            AUDIO,
            {"transcript": "lo"},
            {"data": "AAAA"},
            {"data": "BBBB"},
            "finish",
            {"expires_at": 9},
        ],
        chat.Audio(id="audio_1", data="AAAABBBB", transcript="Hello", expires_at=9),
        [("", "Hel"), ("", "lo"), ("AAAA", ""), ("BBBB", "")],
        [],
    ),
    "data and transcript in one delta: one event": (
        [{"id": "a", "data": "AAAA", "transcript": "Hi", "expires_at": 5}],
        chat.Audio(id="a", data="AAAA", transcript="Hi", expires_at=5),
        [("AAAA", "Hi")],
        [],
    ),
    "only an id: audio, no event": (
        [{"id": "a"}],
        chat.Audio(id="a"),
        [],
        [],
    ),
    "empty strings and null fields add nothing": (
        [{"id": "", "data": "", "transcript": None, "expires_at": None}, {"id": "b"}],
        chat.Audio(id="b"),
        [],
        [],
    ),
    "id and expires_at: the first valid value, never overwritten": (
        [{"id": "a", "expires_at": "soon"}, {"id": "b", "expires_at": 7}, {"expires_at": 8}],
        chat.Audio(id="a", expires_at=7),
        [],
        [],
    ),
    "audio: null is no audio": ([None], None, [], []),
    "audio that is not an object": (["AAAA"], None, [], ["invalid audio"]),
    "non-string data and transcript": (
        [{"data": 12, "transcript": ["x"]}],
        chat.Audio(),
        [],
        ["non-string audio data", "non-string audio transcript"],
    ),
    "data after the finish: an anomaly, not appended": (
        [{"data": "AAAA"}, "finish", {"data": "BBBB", "transcript": "late"}],
        chat.Audio(data="AAAA"),
        [("AAAA", "")],
        ["audio data after finish", "audio transcript after finish"],
    ),
}


@pytest.mark.parametrize("name", list(AUDIO_SHAPES))
def test_audio_deltas_assemble_into_the_choices_audio(name: str) -> None:
    updates, audio, deltas, kinds = AUDIO_SHAPES[name]
    chunks = [FINISH if u == "finish" else delta(audio=u) for u in updates]
    if "finish" not in updates:
        chunks.append(FINISH)
    events, result = read_every_way(chunks)
    assert result.status == "complete"
    assert result.choice(0).audio == audio
    spoken = [e for e in events if type(e) is chat.AudioDelta]
    assert [(e.data, e.transcript) for e in spoken] == deltas
    assert all(e.choice_index == 0 for e in spoken)
    assert anomalies(events) == kinds


def test_audio_is_output_in_the_choice_family() -> None:
    assert chat.AudioDelta.family == "choice" and chat.AudioDelta.is_output
    assert not chat.AudioDelta.is_content  # the first content is still the first text


def test_audio_of_two_choices_is_kept_apart() -> None:
    chunks = [
        chunk({"index": 1, "delta": {"audio": {"data": "BBBB"}}}),
        chunk({"index": 0, "delta": {"audio": {"data": "AAAA"}}}),
        chunk({"index": 0, "delta": {}, "finish_reason": "stop"}),
        chunk({"index": 1, "delta": {}, "finish_reason": "stop"}),
    ]
    _, result = read_every_way(chunks)
    assert [(c.index, c.audio and c.audio.data) for c in result.choices] == [
        (0, "AAAA"),
        (1, "BBBB"),
    ]


# -- the legacy function_call (rule 5) -----------------------------------------------------


def test_the_legacy_function_call_streams_as_one_tool_call_of_its_own() -> None:
    chunks = [
        delta(
            role="assistant", content=None, function_call={"name": "get_weather", "arguments": ""}
        ),
        delta(function_call={"arguments": '{"ci'}),
        delta(function_call={"name": "other", "arguments": 'ty":"東京"}'}),
        delta("function_call"),
    ]
    events, result = read_every_way(chunks)
    choice = result.choice(0)
    assert result.status == "complete" and choice.finish_reason == "function_call"
    assert choice.tool_calls == () and choice.content == ""
    call = choice.function_call
    assert call is not None
    assert (call.index, call.id, call.type, call.name) == (0, None, "function_call", "get_weather")
    assert call.arguments == '{"city":"東京"}'
    assert call.finished and call.completed and call.error is None
    assert call.parse_arguments() == {"city": "東京"}
    kinds = [type(e).__name__ for e in events if e.family in ("tool_call", "choice")]
    assert kinds == [
        "ToolCallStarted",
        "ToolCallArgumentsDelta",
        "ToolCallArgumentsDelta",
        "ToolCallCompleted",
        "ChoiceFinished",
    ]
    started = next(e for e in events if type(e) is chat.ToolCallStarted)
    assert (started.tool_index, started.id, started.name) == (0, None, "get_weather")
    completed = next(e for e in events if type(e) is chat.ToolCallCompleted)
    assert completed.call == call and completed.tool_index == 0
    assert anomalies(events) == []


#: function_call deltas, whether the choice finishes -> (name, arguments, finished, anomalies)
FUNCTION_CALL_SHAPES: dict[str, tuple[list[Any], bool, tuple[Any, ...] | None, list[str]]] = {
    "name and whole arguments in one delta": (
        [{"name": "f", "arguments": "{}"}],
        True,
        ("f", "{}", True),
        [],
    ),
    "cut before the finish: completed unfinished": (
        [{"name": "f", "arguments": '{"a"'}],
        False,
        ("f", '{"a"', False),
        [],
    ),
    "arguments sent as a JSON value": (
        [{"name": "f", "arguments": {"a": 1}}],
        True,
        ("f", '{"a":1}', True),
        ["non-string arguments"],
    ),
    "not an object": (["f()"], True, None, ["invalid function_call"]),
    "empty object and null: nothing": ([{}, None], True, None, []),
    "after the finish: an anomaly": (
        [{"name": "f", "arguments": "{}"}, "finish", {"arguments": "{}"}],
        True,
        ("f", "{}", True),
        ["function_call after finish"],
    ),
}


@pytest.mark.parametrize("name", list(FUNCTION_CALL_SHAPES))
def test_function_call_shapes(name: str) -> None:
    updates, finish, want, kinds = FUNCTION_CALL_SHAPES[name]
    chunks = [delta("function_call") if u == "finish" else delta(function_call=u) for u in updates]
    if finish and "finish" not in updates:
        chunks.append(delta("function_call"))
    events, result = read_every_way(chunks, done=finish)
    call = result.choice(0).function_call
    assert (call and (call.name, call.arguments, call.finished)) == want
    assert call is None or call.completed
    assert [k for k in anomalies(events) if k != "not JSON"] == kinds
    assert result.status == ("complete" if finish else "incomplete")


@pytest.mark.parametrize(
    ("arguments", "validated"), [('{"city": "Paris"}', True), ('{"town": "Paris"}', False)]
)
def test_the_requests_functions_validate_the_function_call(arguments: str, validated: bool) -> None:
    pytest.importorskip("jsonschema")
    chunks = [
        delta(function_call={"name": "get_weather", "arguments": arguments}),
        delta("function_call"),
    ]
    _, result = read_every_way(chunks, tools=FUNCTIONS)
    call = result.choice(0).function_call
    assert call is not None and call.validated is validated
    assert (call.error is None) is validated


def test_a_function_call_beside_tool_calls_keeps_both() -> None:
    call = {"index": 0, "id": "c", "type": "function", "function": {"name": "t", "arguments": "{}"}}
    chunks = [delta(tool_calls=[call], function_call={"name": "f", "arguments": "{}"}), FINISH]
    _, result = read_every_way(chunks)
    choice = result.choice(0)
    assert [(c.type, c.name) for c in choice.tool_calls] == [("function", "t")]
    assert choice.function_call is not None
    assert (choice.function_call.type, choice.function_call.name) == ("function_call", "f")


# -- fields chunkwise does not model (rule 7 of chunkwise._core.chunks) ---------------------

#: chunks (choice 0 unless said) -> (Result.extra, choice 0's extra)
EXTRA_SHAPES: dict[str, tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]] = {
    "only known keys: nothing": (
        [chunk({"index": 0, "delta": {"content": "a"}, "logprobs": None, "finish_reason": "stop"})],
        {},
        {},
    ),
    "openai: service_tier and obfuscation on every chunk, the last wins": (
        [
            top(delta(content="a"), service_tier="default", obfuscation="x1"),
            top(FINISH, service_tier="default", obfuscation="y22"),
        ],
        {"service_tier": "default", "obfuscation": "y22"},
        {},
    ),
    "a key missing from later chunks stays": (
        [top(delta(content="a"), citations=["u1", "u2"]), FINISH],
        {"citations": ("u1", "u2")},
        {},
    ),
    "null is a value (vLLM's stop_reason)": (
        [
            chunk({"index": 0, "delta": {"content": "a"}, "stop_reason": 7}),
            chunk({"index": 0, "delta": {}, "finish_reason": "stop", "stop_reason": None}),
        ],
        {},
        {"stop_reason": None},
    ),
    "a choice-level annotation without delta, after the choice started": (
        [
            delta(content="a"),
            chunk({"index": 0, "content_filter_results": {"hate": {"filtered": False}}}),
            FINISH,
        ],
        {},
        {"content_filter_results": {"hate": {"filtered": False}}},
    ),
    "azure: a preamble chunk with choices [] and prompt_filter_results": (
        [
            {"choices": [], "id": "", "object": "", "prompt_filter_results": [{"prompt_index": 0}]},
            delta(content="a"),
            FINISH,
        ],
        {"prompt_filter_results": ({"prompt_index": 0},)},
        {},
    ),
    "groq: x_groq kept whole, its usage read too": (
        [delta(content="a"), chunk(x_groq={"id": "req_1", "usage": {"total_tokens": 3}}), FINISH],
        {"x_groq": {"id": "req_1", "usage": {"total_tokens": 3}}},
        {},
    ),
    "server timings are modelled, not extra": (
        [delta(content="a"), chunk(timings={"predicted_n": 1}), FINISH],
        {},
        {},
    ),
}


@pytest.mark.parametrize("name", list(EXTRA_SHAPES))
def test_fields_chunkwise_does_not_model_are_kept_in_extra(name: str) -> None:
    chunks, extra, choice_extra = EXTRA_SHAPES[name]
    events, result = read_every_way(chunks)
    assert result.status == "complete"
    assert result.extra == extra
    assert result.choice(0).extra == choice_extra
    assert anomalies(events) == []
    if name.startswith("groq"):
        assert result.usage == {"total_tokens": 3}


def test_an_annotation_of_a_choice_that_never_started_starts_nothing() -> None:
    _, result = read_every_way([chunk({"index": 0, "content_filter_results": {}})])
    assert result.choices == () and result.status == "incomplete"


def test_extra_is_read_only_all_the_way_down() -> None:
    _, result = accumulate([top(FINISH, moderation={"results": [{"flagged": False}]})])
    extra = result.extra
    with pytest.raises(TypeError):
        extra["moderation"] = None  # type: ignore[index]
    with pytest.raises(TypeError):
        extra["moderation"]["results"] = []
    assert type(extra["moderation"]["results"]) is tuple
    assert type(result.choice(0).extra) is type(extra)


def test_a_snapshot_keeps_the_extra_it_was_taken_with() -> None:
    accumulator = chat.Accumulator()
    accumulator.feed(top(delta(content="a"), obfuscation="x", stop_reason=None))
    before = accumulator.result
    accumulator.feed(top(FINISH, obfuscation="y"))
    assert before.extra == {"obfuscation": "x", "stop_reason": None}
    assert accumulator.result.extra == {"obfuscation": "y", "stop_reason": None}


def test_legacy_completions_keep_their_extra_fields_too() -> None:
    chunks: list[dict[str, Any]] = [
        {"object": "text_completion", "service_tier": "flex", "choices": [{"text": "a"}]},
        {"choices": [{"index": 0, "text": "", "finish_reason": "stop", "stop_reason": None}]},
    ]
    _, result = accumulate_completion(chunks)
    assert result.text == "a" and result.status == "complete"
    assert result.extra == {"service_tier": "flex"}
    assert result.choice(0).extra == {"stop_reason": None}

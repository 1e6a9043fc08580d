"""Live values in both APIs: tool-call arguments and structured outputs, previewed as they stream.

For each delta event, its patches applied to a mirror give the newest
result's preview; every snapshot's preview is ``partial_json`` of its own text
(so an old result never changes), read-only, and never parsed or validated:
``parsed``, ``parse_error``, tool-call validation and ``parse_arguments()`` are
what they were.  Text that cannot become JSON stops the patches with one
anomaly.
"""

from __future__ import annotations

import copy
import json
import pickle
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import chunkwise
from helpers.bodies import (
    call_events,
    call_item,
    choice,
    chunk,
    message_item,
    response_object,
    text_events,
    tool,
)
from helpers.json_values import same_json
from helpers.reads import accumulate_response, split_text
from helpers.strategies import json_texts

ARGUMENTS = ['{"ci', 'ty": "Par', 'is", "days": [1', ", 2", '], "metric": tr', "ue}"]
ANSWER = ['{"name": "Ad', 'a", "langs": ["py', 'thon", "c"], "n": 3', "6}"]
SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}}
RESPONSE_FORMAT = {"type": "json_schema", "json_schema": {"name": "person", "schema": SCHEMA}}
TEXT_FORMAT = {"type": "json_schema", "name": "person", "schema": SCHEMA}
TOOLS = [{"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}]


def feed_chat(
    chunks: Sequence[dict[str, Any]], **kwargs: Any
) -> list[tuple[Any, chunkwise.chat.Result]]:
    """Every event with the result right after it (a consumer reading at every delta)."""
    accumulator = chunkwise.chat.Accumulator(**kwargs)
    seen: list[tuple[Any, chunkwise.chat.Result]] = []
    for c in chunks:
        seen += [(e, accumulator.result) for e in accumulator.feed(c)]
    seen += [(e, accumulator.result) for e in accumulator.end()]
    return seen


def check_mirror(
    seen: Sequence[tuple[Any, Any]],
    kind: Any,
    preview: Callable[[Any], Any],
    text: Callable[[Any], str],
) -> Any:
    """Patches of ``kind`` events replay to ``preview(result)``, which is ``partial_json(text)``."""
    mirror: Any = None
    snapshots = []
    for event, result in seen:
        if type(event) is kind:
            mirror = chunkwise.apply_patches(mirror, event.patches)
            assert same_json(preview(result), mirror) or preview(result) is mirror is None
            snapshots.append((result, preview(result)))
    assert snapshots
    for result, value in snapshots:  # old results keep their own preview
        assert preview(result) is value
        assert same_json(value, chunkwise.partial_json(text(result))) or value is None
    return mirror


# --- chat ------------------------------------------------------------------------------------


def tool_chunks(pieces: Sequence[str]) -> list[dict[str, Any]]:
    return [
        chunk(choice(tool_calls=[tool(0, id="call_1", name="weather")])),
        *(chunk(choice(tool_calls=[tool(0, arguments=p)])) for p in pieces),
        chunk(choice(finish_reason="tool_calls")),
    ]


def test_chat_tool_arguments_are_previewed_delta_by_delta() -> None:
    seen = feed_chat(tool_chunks(ARGUMENTS), tools=TOOLS)
    mirror = check_mirror(
        seen,
        chunkwise.chat.ToolCallArgumentsDelta,
        lambda r: r.choice(0).tool_calls[0].partial_arguments,
        lambda r: r.choice(0).tool_calls[0].arguments,
    )
    final = seen[-1][1].choice(0).tool_calls[0]
    assert mirror == final.parse_arguments() == json.loads("".join(ARGUMENTS))
    assert same_json(final.partial_arguments, mirror)
    assert final.validated is not False and final.error is None
    assert not seen[-1][1].anomalies
    # While streaming: a preview, but parse_arguments() still refuses the unfinished text.
    middle = next(r for e, r in seen if getattr(e, "fragment", None) == ARGUMENTS[2])
    call = middle.choice(0).tool_calls[0]
    assert same_json(call.partial_arguments, {"city": "Paris", "days": []})
    with pytest.raises(chunkwise.ToolArgumentsError):
        call.parse_arguments()
    assert not call.completed and call.validated is None
    with pytest.raises(TypeError):
        call.partial_arguments["city"] = "Lyon"


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=json_texts, cuts=st.lists(st.integers(0, 300), max_size=10), structured=st.booleans())
def test_chat_previews_of_any_document_at_any_split(
    text: str, cuts: list[int], structured: bool
) -> None:
    pieces = [p for p in split_text(text, cuts) if p]
    kind: Any
    if structured:
        seen = feed_chat(content_chunks(pieces), response_format={"type": "json_object"})
        kind = chunkwise.chat.TextDelta

        def preview(r: chunkwise.chat.Result) -> Any:
            return r.choice(0).partial_parsed

        def raw(r: chunkwise.chat.Result) -> str:
            return r.choice(0).content
    else:
        seen = feed_chat(tool_chunks(pieces))
        kind = chunkwise.chat.ToolCallArgumentsDelta

        def preview(r: chunkwise.chat.Result) -> Any:
            return r.choice(0).tool_calls[0].partial_arguments

        def raw(r: chunkwise.chat.Result) -> str:
            return r.choice(0).tool_calls[0].arguments

    mirror = check_mirror(seen, kind, preview, raw)
    whole = json.loads(text)
    if text == text.rstrip() and isinstance(whole, (int, float)) and not isinstance(whole, bool):
        # A bare number: nothing after it proves it complete; the final parse has it.
        assert mirror is None
    else:
        assert same_json(mirror, whole)
    assert not seen[-1][1].anomalies


def test_chat_prose_first_stops_the_patches_with_one_anomaly() -> None:
    pieces = ["Sure! ", '{"city": ', '"Paris"}']
    seen = feed_chat(tool_chunks(pieces))
    deltas = [e for e, _ in seen if type(e) is chunkwise.chat.ToolCallArgumentsDelta]
    assert [d.patches for d in deltas] == [(), (), ()]
    result = seen[-1][1]
    [anomaly] = result.anomalies
    assert (anomaly.kind, anomaly.choice_index) == ("not JSON", 0)
    assert "tool call 0" in anomaly.detail and "offset" not in anomaly.detail
    call = result.choice(0).tool_calls[0]
    assert call.partial_arguments is None
    assert call.arguments == "".join(pieces) and call.error is not None  # as before


def test_chat_invalid_after_a_valid_start_keeps_the_preview_so_far() -> None:
    seen = feed_chat(tool_chunks(['{"a": [1, 2', "] x"]))
    deltas = [e for e, _ in seen if type(e) is chunkwise.chat.ToolCallArgumentsDelta]
    mirror = chunkwise.apply_patches(None, deltas[0].patches)
    mirror = chunkwise.apply_patches(mirror, deltas[1].patches)  # the valid start: "]"
    call = seen[-1][1].choice(0).tool_calls[0]
    assert mirror == {"a": [1, 2]}
    assert same_json(call.partial_arguments, mirror)
    assert [a.kind for a in seen[-1][1].anomalies] == ["not JSON"]


def content_chunks(pieces: Sequence[str]) -> list[dict[str, Any]]:
    return [
        chunk(choice(role="assistant")),
        *(chunk(choice(content=p)) for p in pieces),
        chunk(choice(finish_reason="stop")),
    ]


def test_chat_structured_output_is_previewed_and_parsed_once_at_the_end() -> None:
    seen = feed_chat(content_chunks(ANSWER), response_format=RESPONSE_FORMAT)
    mirror = check_mirror(
        seen,
        chunkwise.chat.TextDelta,
        lambda r: r.choice(0).partial_parsed,
        lambda r: r.choice(0).content,
    )
    final = seen[-1][1].choice(0)
    assert mirror == final.parsed == json.loads("".join(ANSWER))
    assert all(r.choice(0).parsed is None for _, r in seen[:-1])  # never parsed before the end
    assert not seen[-1][1].anomalies


def test_chat_structured_output_in_typed_content_parts_is_previewed_like_a_string() -> None:
    # Content sent as a list of typed parts (Mistral) is the same answer text:
    # its deltas carry the same patches and the result the same preview.
    parts = [
        chunk(choice(role="assistant")),
        *(chunk(choice(content=[{"type": "text", "text": p}])) for p in ANSWER),
        chunk(choice(finish_reason="stop")),
    ]
    seen = feed_chat(parts, response_format=RESPONSE_FORMAT)
    mirror = check_mirror(
        seen,
        chunkwise.chat.TextDelta,
        lambda r: r.choice(0).partial_parsed,
        lambda r: r.choice(0).content,
    )
    plain = feed_chat(content_chunks(ANSWER), response_format=RESPONSE_FORMAT)
    assert [e for e, _ in seen] == [e for e, _ in plain]
    assert mirror == seen[-1][1].choice(0).parsed == json.loads("".join(ANSWER))


def test_chat_without_a_json_format_has_no_preview() -> None:
    for kwargs in ({}, {"response_format": {"type": "text"}}):
        seen = feed_chat(content_chunks(ANSWER), **kwargs)
        assert all(e.patches == () for e, _ in seen if type(e) is chunkwise.chat.TextDelta)
        assert seen[-1][1].choice(0).partial_parsed is None


def test_chat_structured_output_in_prose_gets_one_anomaly_and_its_parse_error() -> None:
    seen = feed_chat(content_chunks(["Here you go: ", *ANSWER]), response_format=RESPONSE_FORMAT)
    result = seen[-1][1]
    assert [a.kind for a in result.anomalies] == ["not JSON"]
    assert "content" in result.anomalies[0].detail
    assert result.choice(0).partial_parsed is None
    assert result.choice(0).parse_error is not None and result.choice(0).parsed is None


def test_chat_results_with_previews_copy_and_pickle_unchanged() -> None:
    result = feed_chat(tool_chunks(ARGUMENTS[:3]))[-1][1]
    for twin in (copy.deepcopy(result), pickle.loads(pickle.dumps(result))):
        assert twin == result
        preview = twin.choice(0).tool_calls[0].partial_arguments
        assert same_json(preview, {"city": "Paris", "days": []})
        with pytest.raises(TypeError):
            preview["x"] = 1


def test_chat_preview_is_the_same_for_any_split_of_the_bytes() -> None:
    body = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in content_chunks(ANSWER))
    parsed = [chunkwise.chat.Parser(response_format=RESPONSE_FORMAT) for _ in range(len(body) + 1)]
    outcomes = []
    for cut, parser in enumerate(parsed):
        events = parser.feed(body[:cut]) + parser.feed(body[cut:]) + parser.end()
        patches = [e.patches for e in events if isinstance(e, chunkwise.chat.TextDelta)]
        outcomes.append((patches, json.dumps(parser.result.choice(0).partial_parsed)))
    assert all(outcome == outcomes[0] for outcome in outcomes)
    assert outcomes[0][1] == json.dumps(json.loads("".join(ANSWER)))


# --- Responses API ---------------------------------------------------------------------------


def response_stream(events: list[dict[str, Any]], output: list[dict[str, Any]]) -> list[Any]:
    return [
        {"type": "response.created", "response": response_object()},
        *events,
        {"type": "response.completed", "response": response_object("completed", output=output)},
    ]


def feed_response(events: list[Any], **kwargs: Any) -> list[tuple[Any, Any]]:
    accumulator = chunkwise.responses.Accumulator(**kwargs)
    seen: list[tuple[Any, Any]] = []
    for event in events:
        seen += [(e, accumulator.result) for e in accumulator.feed(event)]
    seen += [(e, accumulator.result) for e in accumulator.end()]
    return seen


def test_responses_function_arguments_are_previewed_delta_by_delta() -> None:
    arguments = "".join(ARGUMENTS)
    events = response_stream(
        call_events(0, "fc_1", "call_1", "weather", ARGUMENTS),
        [call_item("fc_1", "call_1", "weather", arguments)],
    )
    seen = feed_response(events, tools=TOOLS)
    mirror = check_mirror(
        seen,
        chunkwise.responses.ToolCallArgumentsDelta,
        lambda r: r.output[0].call.partial_arguments,
        lambda r: r.output[0].call.arguments,
    )
    final = seen[-1][1]
    assert final.status == "complete" and not final.anomalies
    assert mirror == final.function_calls[0].parse_arguments() == json.loads(arguments)


def test_responses_final_arguments_that_differ_restart_the_preview() -> None:
    events = response_stream(
        call_events(0, "fc_1", "call_1", "weather", ['{"city": "Par', 'is"}']),
        [call_item("fc_1", "call_1", "weather", '{"city": "Lyon"}')],
    )
    # call_events ends with arguments.done carrying the streamed text: make it differ.
    for event in events:
        if event["type"] == "response.function_call_arguments.done":
            event["arguments"] = '{"city": "Lyon"}'
    result = feed_response(events)[-1][1]
    call = result.function_calls[0]
    assert call.arguments == '{"city": "Lyon"}'
    assert call.partial_arguments == {"city": "Lyon"} == call.parse_arguments()
    assert "final arguments differ from deltas" in [a.kind for a in result.anomalies]


def test_responses_structured_output_is_previewed_and_parsed_once_at_the_end() -> None:
    text = "".join(ANSWER)
    events = response_stream(text_events(0, "msg_1", ANSWER), [message_item("msg_1", text)])
    seen = feed_response(events, text_format=TEXT_FORMAT)
    mirror = check_mirror(
        seen, chunkwise.responses.TextDelta, lambda r: r.partial_parsed, lambda r: r.output_text
    )
    final = seen[-1][1]
    assert mirror == final.parsed == json.loads(text)
    assert all(r.parsed is None for _, r in seen[:-1])
    assert not final.anomalies
    plain = feed_response(events)
    assert all(e.patches == () for e, _ in plain if type(e) is chunkwise.responses.TextDelta)
    assert plain[-1][1].partial_parsed is None


def test_responses_output_sent_whole_is_previewed_too() -> None:
    text = "".join(ANSWER)
    events = response_stream([], [message_item("msg_1", text)])
    _, result = accumulate_response(events, text_format=TEXT_FORMAT)
    assert same_json(result.partial_parsed, result.parsed)
    assert result.parsed == json.loads(text)


def test_responses_prose_first_gets_one_anomaly() -> None:
    pieces = ["Sure: ", *ANSWER]
    text = "".join(pieces)
    events = response_stream(text_events(0, "msg_1", pieces), [message_item("msg_1", text)])
    _, result = accumulate_response(events, text_format=TEXT_FORMAT)
    assert [a.kind for a in result.anomalies] == ["not JSON"]
    assert result.partial_parsed is None
    assert result.parse_error is not None

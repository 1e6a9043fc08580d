"""Structured outputs on the chat side: ``ChatStreamParser(response_format=...)``.

The rules of :mod:`chunkwise._core.schemas`: only a finished choice is parsed,
once; a choice the server cut short gets an error without being parsed; a
refusal or a tool-call-only answer is left alone; each choice of ``n > 1`` is
parsed on its own.  (The Responses side is in ``test_response_rules.py``.)
"""

from __future__ import annotations

from typing import Any

import pytest

import chunkwise
from helpers.bodies import choice, chunk, sse, tool
from helpers.reads import parse_chat

SCHEMA_FORMAT: dict[str, Any] = {
    "type": "json_schema",
    "json_schema": {
        "name": "weather",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "temp": {"type": "number"}},
            "required": ["city", "temp"],
            "additionalProperties": False,
        },
    },
}


def answer(text: str, finish_reason: str | None = "stop", index: int = 0) -> list[dict[str, Any]]:
    """A choice whose content arrives in two pieces, then its finish_reason."""
    half = len(text) // 2
    chunks = [chunk(choice(index, role="assistant", content=text[:half]))]
    chunks.append(chunk(choice(index, content=text[half:])))
    if finish_reason is not None:
        chunks.append(chunk(choice(index, finish_reason=finish_reason)))
    return chunks


def parsed(
    chunks: list[dict[str, Any]], response_format: Any = SCHEMA_FORMAT, index: int = 0
) -> chunkwise.chat.ChoiceResult:
    _, result = parse_chat([sse(*chunks)], response_format=response_format)
    return result.choice(index)


def test_finished_choice_matching_the_schema_is_parsed() -> None:
    c = parsed(answer('{"city": "Oslo", "temp": -3.5}'))
    assert (c.parsed, c.parse_error) == ({"city": "Oslo", "temp": -3.5}, None)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"city": "Oslo", "temp": ', "is not valid JSON"),
        ("   ", "is empty"),
        ('{"city": "Oslo"}', "does not match the schema"),
        ('{"city": 3, "temp": 1}', "does not match the schema"),
    ],
)
def test_finished_choice_that_is_not_what_was_asked_is_a_parse_error(
    text: str, message: str
) -> None:
    pytest.importorskip("jsonschema")
    c = parsed(answer(text))
    assert c.parsed is None
    error = c.parse_error
    assert isinstance(error, chunkwise.StructuredOutputError)
    assert message in str(error)
    assert (error.raw, error.schema_name) == (text, "weather")


@pytest.mark.parametrize("reason", ["length", "content_filter"])
def test_a_choice_cut_short_is_an_error_without_parsing(reason: str) -> None:
    text = '{"city": "Oslo", "temp": 1}'  # valid JSON: only finish_reason says it was cut
    c = parsed(answer(text, finish_reason=reason))
    assert c.parsed is None
    assert c.parse_error is not None and "cut short" in str(c.parse_error)
    assert reason in str(c.parse_error) and c.parse_error.raw == text


def test_an_unfinished_choice_is_neither_parsed_nor_an_error() -> None:
    # No finish_reason and no [DONE]: the body just stopped.
    chunks = answer('{"city": "Oslo", "temp": 1}', finish_reason=None)
    _, result = parse_chat([sse(*chunks, done=False)], response_format=SCHEMA_FORMAT)
    c = result.choice(0)
    assert (c.finished, c.parsed, c.parse_error) == (False, None, None)


def test_a_choice_finished_by_done_alone_is_parsed() -> None:
    # No finish_reason, but [DONE] (Snowflake Cortex, some OpenRouter
    # upstreams): the server said the stream is over, so the answer is whole.
    c = parsed(answer('{"city": "Oslo", "temp": 1}', finish_reason=None))
    assert (c.finished, c.finish_reason) == (True, None)
    assert (c.parsed, c.parse_error) == ({"city": "Oslo", "temp": 1}, None)


def test_a_refusal_is_neither_parsed_nor_an_error() -> None:
    chunks = [
        chunk(choice(role="assistant", refusal="I can't")),
        chunk(choice(refusal=" help with that.")),
        chunk(choice(finish_reason="stop")),
    ]
    c = parsed(chunks)
    assert c.refusal == "I can't help with that."
    assert (c.parsed, c.parse_error) == (None, None)


def test_a_tool_call_only_answer_is_neither_parsed_nor_an_error() -> None:
    chunks = [
        chunk(
            choice(role="assistant", tool_calls=[tool(0, id="call_1", name="f", arguments="{}")])
        ),
        chunk(choice(finish_reason="tool_calls")),
    ]
    c = parsed(chunks)
    assert len(c.tool_calls) == 1
    assert (c.parsed, c.parse_error) == (None, None)


def test_each_choice_of_n_is_parsed_on_its_own() -> None:
    texts = ['{"city": "Oslo", "temp": 1}', '{"city": "Rome"', '{"city": "Lima", "temp": 20}']
    chunks = [c for i, text in enumerate(texts) for c in answer(text, index=i)]
    _, result = parse_chat([sse(*chunks)], response_format=SCHEMA_FORMAT)
    assert [c.parsed for c in result.choices] == [
        {"city": "Oslo", "temp": 1},
        None,
        {"city": "Lima", "temp": 20},
    ]
    assert [c.parse_error is None for c in result.choices] == [True, False, True]


@pytest.mark.parametrize(
    ("text", "value", "error"),
    [('{"any": [1]}', {"any": [1]}, None), ('"text"', None, "not an object")],
)
def test_json_object_accepts_any_object(text: str, value: Any, error: str | None) -> None:
    c = parsed(answer(text), response_format={"type": "json_object"})
    assert c.parsed == value
    if error is None:
        assert c.parse_error is None
    else:
        assert c.parse_error is not None and error in str(c.parse_error)


@pytest.mark.parametrize("fmt", [None, {"type": "text"}, {}, "json_object"])
def test_without_a_json_format_nothing_is_parsed(fmt: Any) -> None:
    c = parsed(answer('{"a": 1}'), response_format=fmt)
    assert (c.parsed, c.parse_error) == (None, None)


def test_parsed_is_a_new_copy_each_time() -> None:
    c = parsed(answer('{"a": [1]}'), response_format={"type": "json_object"})
    value = c.parsed
    value["a"].append(2)
    assert c.parsed == {"a": [1]}


def test_the_stream_parsed_in_one_byte_reads_gives_the_same_value() -> None:
    body = sse(*answer('{"city": "Zürich 😀", "temp": 1}'))
    one = parse_chat([body], response_format=SCHEMA_FORMAT)
    assert (
        parse_chat([body[i : i + 1] for i in range(len(body))], response_format=SCHEMA_FORMAT)
        == one
    )
    assert one[1].choice(0).parsed == {"city": "Zürich 😀", "temp": 1}


@pytest.mark.parametrize(
    "result",
    [
        chunkwise.chat.ChoiceResult(index=0, parsed={"n": 1}),
        chunkwise.responses.Result(parsed={"n": 1}),
    ],
    ids=["chat choice", "responses"],
)
def test_the_repr_names_parsed_as_it_is_given_and_read(result: Any) -> None:
    shown = repr(result)
    assert "parsed={'n': 1}" in shown and " _parsed=" not in shown and "(_parsed=" not in shown
    assert shown.startswith(f"{type(result).__qualname__}(")
    assert "partial_parsed=None" in shown  # every other field still shown

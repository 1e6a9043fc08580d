"""Structured outputs end to end: ``.parsed`` through the real client against ``chunkwise serve``.

A request's ``response_format`` (chat) or ``text.format`` (Responses) makes the
server answer with a JSON document for the schema (``_chat_server`` rule 5);
``chunkwise.chat.complete`` / ``complete_response`` parse and validate it.
The matrix: both APIs x streamed or not x write sizes that split multibyte
characters x the valid, cut (``length``, ``error``) and invalid
(``structured-invalid``) answers.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import jsonschema
import pytest
import trio

import chunkwise
from chunkwise_tools.server import ServerOptions, open_chat_server
from chunkwise_tools.server._schema_documents import document_for_schema
from chunkwise_tools.server._structured_answers import JSON_OBJECT_SCHEMA
from helpers.servers import http_exchange

WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "forecast": {"type": "array", "items": {"$ref": "#/$defs/day"}, "minItems": 1},
        "alert": {"anyOf": [{"type": "string"}, {"type": "null"}]},
    },
    "required": ["city", "unit", "forecast", "alert"],
    "additionalProperties": False,
    "$defs": {
        "day": {
            "type": "object",
            "properties": {
                "high": {"type": "number", "minimum": -50, "maximum": 50},
                "rain": {"type": "integer", "minimum": 0, "maximum": 100, "multipleOf": 5},
                "sunny": {"type": "boolean"},
            },
            "required": ["high", "rain", "sunny"],
            "additionalProperties": False,
        }
    },
}
MESSAGES = [{"role": "user", "content": "Weather in Zürich, as JSON?"}]


def _chat(model: str, schema: dict[str, Any] | None = WEATHER, **extra: Any) -> dict[str, Any]:
    if schema is None:
        response_format: dict[str, Any] = {"type": "json_object"}
    else:
        json_schema = {"name": "weather", "schema": schema, "strict": True}
        response_format = {"type": "json_schema", "json_schema": json_schema}
    return {"model": model, "messages": MESSAGES, "response_format": response_format, **extra}


def _responses(model: str, schema: dict[str, Any] | None = WEATHER, **extra: Any) -> dict[str, Any]:
    if schema is None:
        text_format: dict[str, Any] = {"type": "json_object"}
    else:
        text_format = {"type": "json_schema", "name": "weather", "schema": schema, "strict": True}
    return {"model": model, "input": "Weather, as JSON?", "text": {"format": text_format}, **extra}


def _expected(schema: dict[str, Any] | None) -> Any:
    return document_for_schema(schema if schema is not None else JSON_OBJECT_SCHEMA)


# -- chat ----------------------------------------------------------------------------------


@pytest.mark.parametrize("schema", [WEATHER, None], ids=["json_schema", "json_object"])
@pytest.mark.parametrize("write_size", [None, 2])
@pytest.mark.parametrize("model", ["text", "reasoning", "quirks-crlf", "quirks-usage-last-chunk"])
async def test_chat_parsed_end_to_end(
    model: str, write_size: int | None, schema: dict[str, Any] | None
) -> None:
    async with open_chat_server(ServerOptions(write_size=write_size)) as server:
        result = await chunkwise.chat.complete(server.endpoint(), _chat(model, schema))
    assert result.status == "complete"
    choice = result.choices[0]
    assert choice.parse_error is None
    assert choice.parsed == _expected(schema)
    assert json.loads(choice.content or "") == choice.parsed
    if schema is not None:
        jsonschema.validate(choice.parsed, schema)
    if model == "reasoning":
        assert choice.reasoning  # the rest of the scenario stays


async def test_chat_n_choices_are_each_parsed() -> None:
    async with open_chat_server() as server:
        result = await chunkwise.chat.complete(server.endpoint(), _chat("text", n=3))
    assert [choice.parsed for choice in result.choices] == [_expected(WEATHER)] * 3


@pytest.mark.parametrize(
    ("model", "status", "words"),
    [
        ("length", "complete", "cut short"),
        ("error", "failed", "cut short"),
        ("structured-invalid", "complete", "does not match the schema"),
    ],
)
async def test_chat_answers_that_do_not_parse(model: str, status: str, words: str) -> None:
    async with open_chat_server() as server:
        result = await chunkwise.chat.complete(server.endpoint(), _chat(model))
    choice = result.choices[0]
    assert result.status == status
    assert choice.parsed is None
    if model == "error":
        # Failed mid-stream: the partial JSON is kept, and never taken for an answer.
        assert (
            choice.content and json.dumps(_expected(WEATHER), ensure_ascii=False) != choice.content
        )
        return
    assert choice.parse_error is not None and words in str(choice.parse_error)
    assert choice.parse_error.raw == choice.content


async def test_chat_invalid_json_object_is_not_an_object() -> None:
    async with open_chat_server() as server:
        result = await chunkwise.chat.complete(server.endpoint(), _chat("structured-invalid", None))
    error = result.choices[0].parse_error
    assert error is not None and "not an object" in str(error)


async def test_chat_tool_calls_stay_tool_calls() -> None:
    async with open_chat_server() as server:
        result = await chunkwise.chat.complete(server.endpoint(), _chat("tools"))
    choice = result.choices[0]
    assert len(choice.tool_calls) == 2 and not choice.content and choice.parsed is None


async def test_chat_stream_false_is_one_document_with_the_json() -> None:
    async with open_chat_server() as server:
        status, _, data = await http_exchange(
            server, "POST", "/v1/chat/completions", json.dumps(_chat("text", n=2)).encode()
        )
    document = json.loads(data)
    assert status == 200 and document["object"] == "chat.completion"
    for choice in document["choices"]:
        assert json.loads(choice["message"]["content"]) == _expected(WEATHER)
        assert choice["finish_reason"] == "stop"


async def test_chat_without_response_format_says_its_text() -> None:
    async with open_chat_server() as server:
        result = await chunkwise.chat.complete(
            server.endpoint(), {"model": "text", "messages": MESSAGES}
        )
    assert result.choices[0].parsed is None and "Hello" in (result.content or "")


# -- Responses -------------------------------------------------------------------------------


@pytest.mark.parametrize("schema", [WEATHER, None], ids=["json_schema", "json_object"])
@pytest.mark.parametrize("write_size", [None, 2])
@pytest.mark.parametrize("model", ["text", "reasoning", "quirks-keepalive", "quirks-llamacpp"])
async def test_responses_parsed_end_to_end(
    model: str, write_size: int | None, schema: dict[str, Any] | None
) -> None:
    async with open_chat_server(ServerOptions(write_size=write_size)) as server:
        result = await chunkwise.responses.complete(server.endpoint(), _responses(model, schema))
    assert result.status == "complete"
    assert result.parse_error is None
    assert result.parsed == _expected(schema)
    assert json.loads(result.output_text) == result.parsed


@pytest.mark.parametrize(
    ("model", "status", "words"),
    [
        # Cut by max_output_tokens: "cut short", as chat's length (both APIs alike).
        ("length", "incomplete", "the answer was cut short"),
        # llama.cpp reports a cut answer completed: the JSON itself says it is cut.
        ("quirks-llamacpp-length", "complete", "is not valid JSON"),
        ("structured-invalid", "complete", "does not match the schema"),
    ],
)
async def test_responses_answers_that_do_not_parse(model: str, status: str, words: str) -> None:
    async with open_chat_server() as server:
        result = await chunkwise.responses.complete(server.endpoint(), _responses(model))
    assert result.status == status
    assert result.parsed is None
    assert result.parse_error is not None and words in str(result.parse_error)
    if status == "incomplete":
        # An incomplete response is never parsed; its partial JSON is kept.
        assert result.output_text
        with pytest.raises(json.JSONDecodeError):
            json.loads(result.output_text)


async def test_responses_error_keeps_the_partial_json_unparsed() -> None:
    async with open_chat_server() as server:
        result = await chunkwise.responses.complete(server.endpoint(), _responses("error"))
    assert result.status == "failed" and result.parsed is None
    with pytest.raises(json.JSONDecodeError):
        json.loads(result.output_text)


async def test_responses_stream_false_echoes_the_format() -> None:
    body = _responses("text")
    async with open_chat_server() as server:
        status, _, data = await http_exchange(
            server, "POST", "/v1/responses", json.dumps(body).encode()
        )
    document = json.loads(data)
    assert status == 200 and document["status"] == "completed"
    assert document["text"] == body["text"]
    text = document["output"][0]["content"][0]["text"]
    assert json.loads(text) == _expected(WEATHER)


# -- schemas the generator cannot promise ------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        (
            "/v1/chat/completions",
            _chat("text", {"type": "string", "pattern": "^a$"}),
            "response_format.json_schema.schema",
        ),
        ("/v1/responses", _responses("text", {"not": {}}), "text.format.schema"),
    ],
)
async def test_an_unsupported_schema_is_a_400_saying_so(
    path: str, body: dict[str, Any], param: str
) -> None:
    async with open_chat_server() as server:
        status, _, data = await http_exchange(server, "POST", path, json.dumps(body).encode())
    error = json.loads(data)["error"]
    assert status == 400
    assert (error["type"], error["param"], error["code"]) == (
        "invalid_request_error",
        param,
        "unsupported_schema",
    )
    assert "chunkwise serve cannot generate" in error["message"]


async def test_responses_objects_echo_the_request() -> None:
    tool = {"type": "function", "name": "get_weather", "parameters": {"type": "object"}}
    body = _responses(
        "text",
        instructions="Be brief.",
        temperature=0,
        tools=[tool],
        tool_choice="required",
        metadata={"run": "1"},
        reasoning={"effort": "low"},
        top_p=None,  # null: the default
    )
    async with open_chat_server() as server:
        _, _, data = await http_exchange(server, "POST", "/v1/responses", json.dumps(body).encode())
        result = await chunkwise.responses.complete(server.endpoint(), {**body, "stream": True})
    document = json.loads(data)
    for name in ("instructions", "temperature", "tools", "tool_choice", "metadata", "text"):
        assert document[name] == body[name], name
    assert document["reasoning"] == {"effort": "low", "summary": None}
    defaults = (document["top_p"], document["store"], document["truncation"])
    assert defaults == (1.0, False, "disabled")
    assert result.parsed == _expected(WEATHER)


# -- the official SDK's parse helpers ------------------------------------------------------------


def _sdk_models() -> tuple[Any, Any]:
    pydantic = pytest.importorskip("pydantic")

    class Day(pydantic.BaseModel):  # type: ignore[misc,name-defined]
        high: float
        rain: int
        sunny: bool

    class Weather(pydantic.BaseModel):  # type: ignore[misc,name-defined]
        city: str
        unit: Literal["celsius", "fahrenheit"]
        days: list[Day]
        alert: str | None

    return Weather, Day


async def test_the_openai_sdk_parses_both_apis() -> None:
    openai = pytest.importorskip("openai")
    weather, day = _sdk_models()
    async with open_chat_server() as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0, timeout=10)

        def run() -> tuple[Any, Any]:
            with client:
                chat = client.chat.completions.parse(
                    model="text", messages=MESSAGES, response_format=weather
                )
                response = client.responses.parse(
                    model="text", input="Weather, as JSON?", text_format=weather
                )
            return chat.choices[0].message.parsed, response.output_parsed

        chat, response = await trio.to_thread.run_sync(run)
    for parsed in (chat, response):
        assert isinstance(parsed, weather)
        assert parsed.unit == "celsius" and parsed.days and isinstance(parsed.days[0], day)

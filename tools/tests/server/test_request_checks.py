"""``chunkwise serve`` refuses what OpenAI refuses, with OpenAI's 400, and accepts what it accepts.

Each row is one request body and the ``param``, ``code`` and words of the
error OpenAI answers it with (``_request_checks`` rules 1 to 5).  The bodies
go over HTTP to the real server, so the status and the error's shape are
checked too.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

import chunkwise
from chunkwise_tools.server import open_chat_server
from chunkwise_tools.server._request_checks import check_chat_request, check_responses_request
from helpers.servers import http_exchange

MESSAGES = [{"role": "user", "content": "hi"}]
CALL = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
ASSISTANT = {"role": "assistant", "content": None, "tool_calls": [CALL]}
TOOL_RESULT = {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}
CALL_ITEM = {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"}
CALL_OUTPUT = {"type": "function_call_output", "call_id": "call_1", "output": "sunny"}
FUNCTION = {"name": "get_weather", "parameters": {"type": "object"}}
SCHEMA = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}


def _chat(**extra: Any) -> dict[str, Any]:
    return {"model": "text", "messages": MESSAGES, **extra}


def _responses(**extra: Any) -> dict[str, Any]:
    return {"model": "text", "input": "hi", **extra}


def _without(body: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k != key}


# body, param, code, words of the message
CHAT_REFUSED: list[tuple[Any, str | None, str | None, str]] = [
    (b"{bad", None, None, "could not parse the JSON body"),
    (b"", None, None, "could not parse the JSON body"),
    ([1, 2], None, None, "must be a JSON object"),
    # A Responses body posted to chat (rule 2).
    ({"model": "text", "input": "hi"}, None, None, "Unrecognized request argument supplied: input"),
    (
        _chat(instructions="x", max_output_tokens=20),
        None,
        None,
        "Unrecognized request arguments supplied: instructions, max_output_tokens",
    ),
    (_without(_chat(), "model"), None, None, "you must provide a model parameter"),
    (_chat(model=None), None, None, "you must provide a model parameter"),
    (_chat(model=3), "model", "invalid_type", "expected a string, but got an integer"),
    (_without(_chat(), "messages"), "messages", "missing_required_parameter", "'messages'"),
    (_chat(messages=[]), "messages", "empty_array", "empty array"),
    (_chat(messages="hi"), "messages", "invalid_type", "expected an array, but got a string"),
    (_chat(messages={"role": "user"}), "messages", "invalid_type", "got an object"),
    (_chat(messages=["hi"]), "messages[0]", "invalid_type", "expected an object"),
    (_chat(messages=[{"content": "hi"}]), "messages[0].role", "missing_required_parameter", ""),
    (_chat(messages=[{"role": "robot"}]), "messages[0].role", "invalid_value", "'robot'"),
    (_chat(messages=[{"role": "user"}]), "messages[0].content", "missing_required_parameter", ""),
    # A tool result names its call and answers an assistant's tool_calls (rule 7).
    (
        _chat(messages=[*MESSAGES, ASSISTANT, {"role": "tool", "content": "sunny"}]),
        "messages.[2].tool_call_id",
        None,
        "Missing parameter 'tool_call_id'",
    ),
    (
        _chat(messages=[*MESSAGES, TOOL_RESULT]),
        "messages.[1].role",
        None,
        "must be a response to a preceeding message with 'tool_calls'",
    ),
    (
        _chat(messages=[*MESSAGES, ASSISTANT, TOOL_RESULT, *MESSAGES, TOOL_RESULT]),
        "messages.[4].role",
        None,
        "preceeding message with 'tool_calls'",
    ),
    (_chat(n=0), "n", "integer_below_min_value", "Expected a value >= 1, but got 0"),
    (_chat(n=129), "n", "integer_above_max_value", "Expected a value <= 128, but got 129"),
    (_chat(n="2"), "n", "invalid_type", "expected an integer, but got a string"),
    (_chat(n=2.5), "n", "invalid_type", "expected an integer, but got a decimal"),
    (_chat(n=True), "n", "invalid_type", "expected an integer, but got a boolean"),
    (_chat(max_tokens=0), "max_tokens", "integer_below_min_value", ">= 1"),
    (_chat(max_tokens="9"), "max_tokens", "invalid_type", "expected an integer"),
    (_chat(max_completion_tokens=-1), "max_completion_tokens", "integer_below_min_value", ""),
    (_chat(max_completion_tokens=1.5), "max_completion_tokens", "invalid_type", "integer"),
    (_chat(temperature=2.5), "temperature", "decimal_above_max_value", "<= 2, but got 2.5"),
    (_chat(temperature=-1), "temperature", "decimal_below_min_value", ">= 0, but got -1"),
    (_chat(temperature="hot"), "temperature", "invalid_type", "expected a decimal"),
    (_chat(temperature=False), "temperature", "invalid_type", "got a boolean"),
    (_chat(top_p=1.5), "top_p", "decimal_above_max_value", "<= 1"),
    (_chat(stream="yes"), "stream", "invalid_type", "expected a boolean"),
    (_chat(stream_options=[]), "stream_options", "invalid_type", "expected an object"),
    (_chat(stream_options={"include_usage": True}), "stream_options", None, "only allowed when"),
    # Malformed tools.
    (_chat(tools={}), "tools", "invalid_type", "expected an array"),
    (_chat(tools=[]), "tools", "empty_array", "empty array"),
    (_chat(tools=["get_weather"]), "tools[0]", "invalid_type", "expected an object"),
    (_chat(tools=[{"function": FUNCTION}]), "tools[0].type", "missing_required_parameter", ""),
    (_chat(tools=[{"type": "fn"}]), "tools[0].type", "invalid_value", "'function' and 'custom'"),
    (_chat(tools=[{"type": "function"}]), "tools[0].function", "missing_required_parameter", ""),
    (
        _chat(tools=[{"type": "function", **FUNCTION}]),  # the Responses API's flat shape
        "tools[0].function",
        "missing_required_parameter",
        "",
    ),
    (
        _chat(tools=[{"type": "function", "function": {"parameters": {}}}]),
        "tools[0].function.name",
        "missing_required_parameter",
        "",
    ),
    (
        _chat(tools=[{"type": "function", "function": {"name": "get weather"}}]),
        "tools[0].function.name",
        "invalid_value",
        "does not match pattern",
    ),
    (
        _chat(tools=[{"type": "function", "function": {"name": "f", "parameters": []}}]),
        "tools[0].function.parameters",
        "invalid_type",
        "expected an object",
    ),
    # Malformed response_format.
    (_chat(response_format="json"), "response_format", "invalid_type", "expected an object"),
    (_chat(response_format={"type": "xml"}), "response_format.type", "invalid_value", "'xml'"),
    (
        _chat(response_format={"type": "json_schema"}),
        "response_format.json_schema",
        "missing_required_parameter",
        "",
    ),
    (
        _chat(response_format={"type": "json_schema", "json_schema": {"schema": SCHEMA}}),
        "response_format.json_schema.name",
        "missing_required_parameter",
        "",
    ),
    (_chat(response_format={"type": "json_object"}), "messages", None, "the word 'json'"),
]

RESPONSES_REFUSED: list[tuple[Any, str | None, str | None, str]] = [
    (b"{bad", None, None, "could not parse the JSON body"),
    ("hi", None, None, "must be a JSON object"),
    # A chat body posted to Responses (rule 2).
    ({"model": "text", "messages": MESSAGES}, "messages", "unknown_parameter", "'messages'"),
    (_responses(n=2), "n", "unknown_parameter", "Unknown parameter: 'n'."),
    (_responses(max_tokens=20), "max_tokens", "unknown_parameter", ""),
    (
        _responses(response_format={"type": "json_object"}),
        "response_format",
        "unsupported_parameter",
        "moved to 'text.format'",
    ),
    (_without(_responses(), "model"), "model", "missing_required_parameter", "'model'"),
    (_responses(model=["text"]), "model", "invalid_type", "expected a string"),
    ({"model": "text"}, "input", "missing_required_parameter", "'input'"),
    (_responses(input=None), "input", "missing_required_parameter", "'input'"),
    (_responses(input=[]), "input", "empty_array", "empty array"),
    (_responses(input=3), "input", "invalid_type", "a string or an array of input items"),
    (_responses(input={"role": "user"}), "input", "invalid_type", "got an object"),
    (_responses(input=["hi"]), "input[0]", "invalid_type", "expected an object"),
    (
        _responses(input=[{"type": "function_call_output", "output": "sunny"}]),
        "input[0].call_id",
        "missing_required_parameter",
        "",
    ),
    (
        _responses(input=[{"role": "user", "content": "hi"}, CALL_OUTPUT]),
        "input",
        None,
        "No tool call found for function call output with call_id call_1.",
    ),
    (_responses(stream="yes"), "stream", "invalid_type", "expected a boolean"),
    (_responses(max_output_tokens=15), "max_output_tokens", "integer_below_min_value", ">= 16"),
    (_responses(max_output_tokens=True), "max_output_tokens", "invalid_type", "integer"),
    (_responses(temperature=3), "temperature", "decimal_above_max_value", "<= 2, but got 3"),
    (_responses(top_p=-0.5), "top_p", "decimal_below_min_value", ">= 0"),
    # Malformed tools: a chat-shaped function tool has no top-level name.
    (_responses(tools="all"), "tools", "invalid_type", "expected an array"),
    (_responses(tools=[{"name": "f"}]), "tools[0].type", "missing_required_parameter", ""),
    (
        _responses(tools=[{"type": "function", "function": FUNCTION}]),
        "tools[0].name",
        "missing_required_parameter",
        "",
    ),
    (
        _responses(tools=[{"type": "function", "name": "a.b"}]),
        "tools[0].name",
        "invalid_value",
        "pattern",
    ),
    # Malformed text.format.
    (_responses(text="json"), "text", "invalid_type", "expected an object"),
    (_responses(text={"format": {"type": "yaml"}}), "text.format.type", "invalid_value", ""),
    (
        _responses(text={"format": {"type": "json_schema", "schema": SCHEMA}}),
        "text.format.name",
        "missing_required_parameter",
        "",
    ),
    (
        _responses(text={"format": {"type": "json_schema", "name": "a"}}),
        "text.format.schema",
        "missing_required_parameter",
        "",
    ),
    (_responses(text={"format": {"type": "json_object"}}), "input", None, "the word 'json'"),
]


async def _refused(path: str, body: Any, param: str | None, code: str | None, words: str) -> None:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    async with open_chat_server() as server:
        status, headers, data = await http_exchange(server, "POST", path, raw)
        assert len(server.requests) == 1  # recorded all the same
    assert status == 400
    assert headers["content-type"] == "application/json"
    error = json.loads(data)["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error"
    assert (error["param"], error["code"]) == (param, code)
    assert words in error["message"]


@pytest.mark.parametrize(("body", "param", "code", "words"), CHAT_REFUSED)
async def test_chat_refuses_what_openai_refuses(
    body: Any, param: str | None, code: str | None, words: str
) -> None:
    await _refused("/v1/chat/completions", body, param, code, words)


@pytest.mark.parametrize(("body", "param", "code", "words"), RESPONSES_REFUSED)
async def test_responses_refuses_what_openai_refuses(
    body: Any, param: str | None, code: str | None, words: str
) -> None:
    await _refused("/v1/responses", body, param, code, words)


# What OpenAI accepts is accepted (rule 1: no stricter than the real API).
CHAT_ACCEPTED = [
    _chat(),
    _chat(n=None, temperature=None, max_tokens=None, top_p=None, stream=None),
    _chat(n=128, temperature=2, top_p=0, max_tokens=1, max_completion_tokens=5),
    _chat(temperature=0.7, seed=1, user="u", metadata={"a": "b"}, logprobs=False),
    _chat(stream=True, stream_options={"include_usage": False}),
    _chat(messages=[{"role": r, "content": "x"} for r in ("system", "developer", "user")]),
    _chat(tools=[{"type": "function", "function": {"name": "get_weather"}}]),
    _chat(tools=[{"type": "custom", "custom": {"name": "grammar"}}]),
    _chat(response_format={"type": "text"}),
    _chat(
        messages=[{"role": "system", "content": "Answer in Json."}],
        response_format={"type": "json_object"},
    ),
    _chat(response_format={"type": "json_schema", "json_schema": {"name": "a"}}),
    _chat(vendor_extension={"top_k": 3}),  # unknown parameters pass
    _chat(messages=[*MESSAGES, ASSISTANT, TOOL_RESULT, {**TOOL_RESULT, "tool_call_id": "b"}]),
    _chat(messages=[{"role": "assistant", "content": "Hi."}, *MESSAGES]),
]
RESPONSES_ACCEPTED = [
    _responses(),
    _responses(input=""),
    _responses(input=[{"role": "user", "content": "hi"}]),
    _responses(input=[{"role": "user", "content": "hi"}, CALL_ITEM, CALL_OUTPUT]),
    _responses(input=[CALL_OUTPUT], previous_response_id="resp_1"),
    {"model": "text", "previous_response_id": "resp_1"},
    {"model": "text", "conversation": "conv_1"},
    {"prompt": {"id": "pmpt_1"}},
    _responses(max_output_tokens=16, temperature=0, top_p=1, stream=False, tools=[]),
    _responses(tools=[{"type": "function", **FUNCTION}, {"type": "web_search"}]),
    _responses(text={"format": {"type": "text"}}, instructions="be brief"),
    _responses(text={"format": {"type": "json_schema", "name": "a", "schema": SCHEMA}}),
    _responses(text={"format": {"type": "json_object"}}, instructions="Reply in JSON."),
    _responses(text={"format": {"type": "json_object"}}, input="a JSON list, please"),
    {"model": "text", "previous_response_id": "r", "text": {"format": {"type": "json_object"}}},
    _responses(stream_options={"include_obfuscation": False}, stream=True),
]


@pytest.mark.parametrize("body", CHAT_ACCEPTED)
def test_chat_accepts_what_openai_accepts(body: dict[str, Any]) -> None:
    assert check_chat_request(body) is None


@pytest.mark.parametrize("body", RESPONSES_ACCEPTED)
def test_responses_accepts_what_openai_accepts(body: dict[str, Any]) -> None:
    assert check_responses_request(body) is None


async def test_the_client_sees_a_refusal_as_an_http_status_error() -> None:
    async with open_chat_server() as server:
        with pytest.raises(chunkwise.HTTPStatusError) as caught:
            await chunkwise.chat.complete(server.endpoint(), _chat(n=0))
    error = caught.value
    assert error.status_code == 400
    assert error.error is not None and error.error.param == "n"


# Where a name sits in each shape that carries one: a chat function tool, a Responses
# function tool (flat), and a structured output's schema in either API.
NAMED_SHAPES: dict[str, tuple[str, Callable[[str], dict[str, Any]], str]] = {
    "chat tools": (
        "/v1/chat/completions",
        lambda name: _chat(tools=[{"type": "function", "function": {**FUNCTION, "name": name}}]),
        "tools[0].function.name",
    ),
    "Responses tools": (
        "/v1/responses",
        lambda name: _responses(tools=[{"type": "function", **FUNCTION, "name": name}]),
        "tools[0].name",
    ),
    "chat response_format": (
        "/v1/chat/completions",
        lambda name: _chat(
            messages=[{"role": "user", "content": "JSON, please"}],
            response_format={
                "type": "json_schema",
                "json_schema": {"name": name, "schema": SCHEMA},
            },
        ),
        "response_format.json_schema.name",
    ),
    "Responses text.format": (
        "/v1/responses",
        lambda name: _responses(
            text={"format": {"type": "json_schema", "name": name, "schema": SCHEMA}}
        ),
        "text.format.name",
    ),
}
NO_MATCH = (
    "string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'."
)
# name -> (code, the words of OpenAI's message after "Invalid '<param>': "), or None: accepted.
NAMES: dict[str, tuple[str, str] | None] = {
    "": ("empty_string", "empty string. Expected a string with minimum length 1, but got an "
         "empty string instead."),
    "f": None,
    "a" * 64: None,
    "Az09_-" * 10 + "Az09": None,
    "a" * 65: ("string_above_max_length", "string too long. Expected a string with maximum "
               "length 64, but got a string with length 65 instead."),
    "a" * 200: ("string_above_max_length", "string too long. Expected a string with maximum "
                "length 64, but got a string with length 200 instead."),
    "get weather": ("invalid_value", NO_MATCH),
    "a.b": ("invalid_value", NO_MATCH),
    "météo": ("invalid_value", NO_MATCH),
    "f\n": ("invalid_value", NO_MATCH),
}  # fmt: skip


@pytest.mark.parametrize("name", NAMES, ids=lambda name: f"{len(name)}:{name[:12]!r}")
@pytest.mark.parametrize("shape", NAMED_SHAPES)
async def test_a_function_or_schema_name_is_1_to_64_characters_of_the_api_s_set(
    shape: str, name: str
) -> None:
    """A function's (and a schema's) name is 1 to 64 characters of [a-zA-Z0-9_-]; OpenAI
    answers any other with a 400 naming the place, its own code and its own words."""
    path, body, param = NAMED_SHAPES[shape]
    async with open_chat_server() as server:
        status, _, data = await http_exchange(server, "POST", path, json.dumps(body(name)).encode())
    expected = NAMES[name]
    if expected is None:
        assert status == 200, data
        return
    code, words = expected
    assert status == 400
    assert json.loads(data)["error"] == {
        "message": f"Invalid '{param}': {words}",
        "type": "invalid_request_error",
        "param": param,
        "code": code,
    }


def _call(call_id: str) -> dict[str, Any]:
    return {**CALL_ITEM, "call_id": call_id}


def _output(call_id: str) -> dict[str, Any]:
    return {**CALL_OUTPUT, "call_id": call_id}


USER = {"role": "user", "content": "hi"}
# input items, and the call_id OpenAI names in its 400 (None: accepted).
CALL_ORDERS: list[tuple[list[dict[str, Any]], str | None]] = [
    ([USER, _call("call_1"), _output("call_1")], None),
    ([USER, _output("call_1"), _call("call_1")], "call_1"),
    ([_output("call_1"), _call("call_1")], "call_1"),
    ([USER, _output("call_1")], "call_1"),
    ([USER, _call("call_1"), _output("call_2")], "call_2"),
    ([USER, _call("a"), _call("b"), _output("b"), _output("a")], None),
    ([USER, _call("a"), _output("a"), _output("b"), _call("b")], "b"),
]


@pytest.mark.parametrize(("items", "refused"), CALL_ORDERS)
async def test_a_function_call_output_comes_after_its_function_call_in_the_input(
    items: list[dict[str, Any]], refused: str | None
) -> None:
    """A Responses ``function_call_output`` answers a ``function_call`` earlier in the same
    ``input``: one before its call, or with no call at all, is a 400 naming its call_id."""
    body = json.dumps(_responses(input=items)).encode()
    async with open_chat_server() as server:
        status, _, data = await http_exchange(server, "POST", "/v1/responses", body)
    if refused is None:
        assert status == 200, data
        return
    assert status == 400
    assert json.loads(data)["error"] == {
        "message": f"No tool call found for function call output with call_id {refused}.",
        "type": "invalid_request_error",
        "param": "input",
        "code": None,
    }
    # A request that continues a stored conversation may answer a call made there.
    assert check_responses_request(_responses(input=items, previous_response_id="resp_1")) is None


UNPARSEABLE = (
    "We could not parse the JSON body of your request. (HINT: This likely means you aren't "
    "using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was "
    "sent was not valid JSON.)"
)
ENDPOINTS = {
    "/v1/chat/completions": '{"model": "text", "messages": [{"role": "user", "content": "hi"}]',
    "/v1/responses": '{"model": "text", "input": "hi"',
    "/v1/completions": '{"model": "text", "prompt": "hi"',
}
# Where a constant may sit: a number parameter, nested values, an array, the body itself.
CONSTANT_PLACES = [
    ', "temperature": {}}}',
    ', "top_p": {}}}',
    ', "seed": {}}}',
    ', "metadata": {{"a": [1, {{"b": {}}}]}}}}',
    ', "logit_bias": {{"50256": {}}}}}',
]


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
@pytest.mark.parametrize("place", CONSTANT_PLACES)
@pytest.mark.parametrize("path", ENDPOINTS)
async def test_nan_and_infinity_anywhere_make_a_body_that_is_not_json(
    path: str, place: str, constant: str
) -> None:
    """``NaN``, ``Infinity`` and ``-Infinity`` are not JSON (RFC 8259), so OpenAI refuses a
    body holding one anywhere as unparseable, never reading it as a number."""
    body = (ENDPOINTS[path] + place.format(constant)).encode()
    async with open_chat_server() as server:
        status, _, data = await http_exchange(server, "POST", path, body)
        # The same body without the constant is a request OpenAI answers.
        fine, _, _ = await http_exchange(
            server, "POST", path, body.replace(constant.encode(), b"1")
        )
    assert (status, fine) == (400, 200)
    assert json.loads(data)["error"] == {
        "message": UNPARSEABLE,
        "type": "invalid_request_error",
        "param": None,
        "code": None,
    }


@pytest.mark.parametrize("body", [b"NaN", b"[Infinity]", b"-Infinity"])
async def test_a_body_that_is_only_a_constant_is_not_json_either(body: bytes) -> None:
    """A bare ``NaN`` or ``Infinity`` is no JSON value: unparseable, not "not an object"."""
    async with open_chat_server() as server:
        status, _, data = await http_exchange(server, "POST", "/v1/chat/completions", body)
    assert status == 400
    assert json.loads(data)["error"]["message"] == UNPARSEABLE


@pytest.mark.parametrize("number", ["1e999", "-1e999"])
async def test_a_number_too_large_for_a_decimal_is_named_as_such(number: str) -> None:
    """``1e999`` is JSON, and a float infinity: the refusal of it as a ``temperature`` says
    what it got, not "expected a decimal, but got a decimal"."""
    body = ENDPOINTS["/v1/chat/completions"] + f', "temperature": {number}}}'
    async with open_chat_server() as server:
        status, _, data = await http_exchange(server, "POST", "/v1/chat/completions", body.encode())
    assert status == 400
    assert json.loads(data)["error"] == {
        "message": "Invalid type for 'temperature': expected a decimal, but got a non-finite "
        "number instead.",
        "type": "invalid_request_error",
        "param": "temperature",
        "code": "invalid_type",
    }

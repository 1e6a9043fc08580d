"""What OpenAI refuses: the request checks of the server's endpoints (chat, Responses, completions).

Theory of operation
-------------------
``chunkwise serve`` is the test double clients are built against, so a request
the real API answers with a 400 must get a 400 here too, or a client's bug
passes its tests and fails in production.  :func:`check_chat_request` and
:func:`check_responses_request` take the decoded JSON body and return the first
:class:`RequestProblem` (the ``message``, ``param`` and ``code`` of OpenAI's
``invalid_request_error``) or None.  The server writes the problem as
``{"error": {"message", "type": "invalid_request_error", "param", "code"}}``.

Rules
-----
1. As strict as the real API, no stricter: only what OpenAI refuses is
   refused.  Parameters OpenAI accepts as ``null`` are accepted as ``null``;
   unknown parameters pass, except the other API's own (rule 2).
2. A body meant for the other API is named as such: chat's
   ``Unrecognized request argument supplied: input`` for a Responses body,
   the Responses API's ``Unknown parameter: 'messages'.`` for a chat body
   (and its hint that ``response_format`` has moved to ``text.format``).
3. Messages, params and codes are OpenAI's words: ``Missing required
   parameter: 'messages'.`` / ``missing_required_parameter``, ``Invalid type
   for 'n': expected an integer, but got a string instead.`` /
   ``invalid_type``, ``integer_above_max_value``, ``empty_array``,
   ``invalid_value``; params name nested places as OpenAI does
   (``tools[0].function.name``).  A function's (or a schema's) name is 1 to
   :data:`MAX_NAME` characters of ``[a-zA-Z0-9_-]``: OpenAI answers an empty
   one ``empty_string``, a longer one ``string_above_max_length``, any other
   character ``invalid_value``.
4. One problem is reported, the first in a fixed order: the body, the other
   API's parameters, ``model``, the conversation (``messages`` /
   ``input``), then each parameter, as OpenAI also reports one at a time.
5. A Responses request may leave ``input`` out when ``previous_response_id``,
   ``conversation`` or ``prompt`` carries the conversation, and ``model`` when
   ``prompt`` names one; ``input`` may be a string (even empty) or a non-empty
   array of input items.
6. ``json_object`` output needs the word "json" somewhere in the
   conversation (chat's ``messages``; the Responses API's ``input`` or
   ``instructions``), as OpenAI requires, lest the model write whitespace
   until its limit.
7. A tool result answers a call: a chat ``tool`` message has its
   ``tool_call_id`` and follows an assistant message with ``tool_calls``
   (other tool messages between); a ``function_call_output`` item has its
   ``call_id``, the ``call_id`` of a ``function_call`` earlier in the same
   ``input``, unless the request continues a stored conversation.  A system,
   developer or user message has ``content``.

Pure functions: no I/O, no trio.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

__all__ = [
    "RequestProblem",
    "check_chat_request",
    "check_completions_request",
    "check_messages_request",
    "check_responses_request",
]

#: OpenAI's limit on ``n``.
MAX_N = 128
#: OpenAI's lower bound on the Responses API's ``max_output_tokens``.
MIN_OUTPUT_TOKENS = 16
#: OpenAI's limit on the length of a function's or a schema's name (rule 3).
MAX_NAME = 64

_ROLES = ("system", "assistant", "user", "function", "tool", "developer")
#: The characters of a function's or a schema's name; its length is checked apart
#: (rule 3), as OpenAI words a name too long differently from one with a bad character.
#: fullmatch, since ``$`` would also let a name end in a newline.
_NAME = re.compile(r"[a-zA-Z0-9_-]+")
_FORMATS = ("text", "json_object", "json_schema")
#: What carries a Responses conversation besides ``input`` (rule 5).
_CONTEXT = ("previous_response_id", "conversation", "prompt")

# Parameters only the other API has (rule 2).
_RESPONSES_ONLY = (
    "input",
    "instructions",
    "text",
    "max_output_tokens",
    "previous_response_id",
    "conversation",
    "truncation",
)
_CHAT_ONLY = (
    "messages",
    "n",
    "max_tokens",
    "max_completion_tokens",
    "functions",
    "function_call",
)


@attrs.frozen(kw_only=True)
class RequestProblem:
    """Why OpenAI would refuse a request: an ``invalid_request_error``'s fields."""

    message: str
    param: str | None = None
    code: str | None = None


def _json_type(value: Any) -> str:
    """OpenAI's name for a JSON value's type, with its article."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        # A body's JSON has no NaN, but 1e999 is a number, and a float infinity: calling
        # it "a decimal" made "expected a decimal, but got a decimal instead".
        return "a decimal" if math.isfinite(value) else "a non-finite number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _wrong_type(param: str, expected: str, value: Any) -> RequestProblem:
    return RequestProblem(
        message=f"Invalid type for '{param}': expected {expected}, but got "
        f"{_json_type(value)} instead.",
        param=param,
        code="invalid_type",
    )


def _missing(param: str) -> RequestProblem:
    return RequestProblem(
        message=f"Missing required parameter: '{param}'.",
        param=param,
        code="missing_required_parameter",
    )


def _empty(param: str) -> RequestProblem:
    return RequestProblem(
        message=f"Invalid '{param}': empty array. Expected an array with minimum length 1, "
        "but got an empty array instead.",
        param=param,
        code="empty_array",
    )


def _invalid_value(param: str, value: Any, supported: Sequence[str]) -> RequestProblem:
    quoted = [f"'{s}'" for s in supported]
    listed = ", ".join(quoted[:-1]) + (", and " if len(quoted) > 2 else " and ") + quoted[-1]
    return RequestProblem(
        message=f"Invalid value: '{value}'. Supported values are: {listed}.",
        param=param,
        code="invalid_value",
    )


def _integer(
    body: Mapping[str, Any], param: str, minimum: int, maximum: int | None = None
) -> RequestProblem | None:
    """An optional (nullable) integer parameter within its bounds."""
    value = body.get(param)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        return _wrong_type(param, "an integer", value)
    if value < minimum:
        return RequestProblem(
            message=f"Invalid '{param}': integer below minimum value. Expected a value >= "
            f"{minimum}, but got {value} instead.",
            param=param,
            code="integer_below_min_value",
        )
    if maximum is not None and value > maximum:
        return RequestProblem(
            message=f"Invalid '{param}': integer above maximum value. Expected a value <= "
            f"{maximum}, but got {value} instead.",
            param=param,
            code="integer_above_max_value",
        )
    return None


def _decimal(
    body: Mapping[str, Any], param: str, minimum: float, maximum: float
) -> RequestProblem | None:
    """An optional (nullable) number parameter within its bounds."""
    value = body.get(param)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return _wrong_type(param, "a decimal", value)
    for beyond, limit, side, sign in (
        (value < minimum, minimum, "below", ">="),
        (value > maximum, maximum, "above", "<="),
    ):
        if beyond:
            word = "minimum" if side == "below" else "maximum"
            return RequestProblem(
                message=f"Invalid '{param}': decimal {side} {word} value. Expected a value "
                f"{sign} {limit:g}, but got {value:g} instead.",
                param=param,
                code=f"decimal_{side}_{word[:3]}_value",
            )
    return None


def _boolean(body: Mapping[str, Any], param: str) -> RequestProblem | None:
    value = body.get(param)
    if value is not None and not isinstance(value, bool):
        return _wrong_type(param, "a boolean", value)
    return None


def _common(body: Mapping[str, Any]) -> RequestProblem | None:
    """The checks both APIs make of the parameters they share."""
    return (
        _boolean(body, "stream")
        or _decimal(body, "temperature", 0, 2)
        or _decimal(body, "top_p", 0, 1)
    )


def _model(body: Mapping[str, Any], *, missing: RequestProblem) -> RequestProblem | None:
    model = body.get("model")
    if model is None:
        return missing
    if not isinstance(model, str):
        return _wrong_type("model", "a string", model)
    return None


def _schema_format(spec: Any, param: str, *, nested: bool) -> RequestProblem | None:
    """A ``response_format`` (``nested``: the schema under ``json_schema``) or ``text.format``."""
    if not isinstance(spec, Mapping):
        return _wrong_type(param, "an object", spec)
    kind = spec.get("type")
    if kind is None:
        return _missing(f"{param}.type")
    if kind not in _FORMATS:
        return _invalid_value(f"{param}.type", kind, _FORMATS)
    if kind != "json_schema":
        return None
    where = f"{param}.json_schema" if nested else param
    if nested:
        spec = spec.get("json_schema")
        if spec is None:
            return _missing(where)
        if not isinstance(spec, Mapping):
            return _wrong_type(where, "an object", spec)
    name = spec.get("name")
    if name is None:
        return _missing(f"{where}.name")
    problem = _name_problem(f"{where}.name", name)
    if problem is not None:
        return problem
    schema = spec.get("schema")
    if schema is None and not nested:
        return _missing(f"{where}.schema")
    if schema is not None and not isinstance(schema, Mapping):
        return _wrong_type(f"{where}.schema", "an object", schema)
    return None


def _name_problem(param: str, name: Any) -> RequestProblem | None:
    """What is wrong with a function's or a schema's name, in OpenAI's words, or None (rule 3)."""
    if not isinstance(name, str):
        return _wrong_type(param, "a string", name)
    if not name:
        return RequestProblem(
            message=f"Invalid '{param}': empty string. Expected a string with minimum length "
            "1, but got an empty string instead.",
            param=param,
            code="empty_string",
        )
    if len(name) > MAX_NAME:
        return RequestProblem(
            message=f"Invalid '{param}': string too long. Expected a string with maximum "
            f"length {MAX_NAME}, but got a string with length {len(name)} instead.",
            param=param,
            code="string_above_max_length",
        )
    if _NAME.fullmatch(name):
        return None
    return RequestProblem(
        message=f"Invalid '{param}': string does not match pattern. Expected a string that "
        "matches the pattern '^[a-zA-Z0-9_-]+$'.",
        param=param,
        code="invalid_value",
    )


def _function(spec: Mapping[str, Any], where: str) -> RequestProblem | None:
    """A function's ``name`` and ``parameters``, at ``where`` (``tools[0]`` or ``.function``)."""
    name = spec.get("name")
    if name is None:
        return _missing(f"{where}.name")
    problem = _name_problem(f"{where}.name", name)
    if problem is not None:
        return problem
    parameters = spec.get("parameters")
    if parameters is not None and not isinstance(parameters, Mapping):
        return _wrong_type(f"{where}.parameters", "an object", parameters)
    return None


def _tools(body: Mapping[str, Any], *, chat: bool) -> RequestProblem | None:
    tools = body.get("tools")
    if tools is None:
        return None
    if not isinstance(tools, list):
        return _wrong_type("tools", "an array", tools)
    if chat and not tools:
        return _empty("tools")  # the Responses API takes [] (and echoes it)
    for index, tool in enumerate(tools):
        where = f"tools[{index}]"
        if not isinstance(tool, Mapping):
            return _wrong_type(where, "an object", tool)
        kind = tool.get("type")
        if kind is None:
            return _missing(f"{where}.type")
        if not isinstance(kind, str):
            return _wrong_type(f"{where}.type", "a string", kind)
        if chat:
            if kind not in ("function", "custom"):
                return _invalid_value(f"{where}.type", kind, ("function", "custom"))
            if kind != "function":
                continue
            function = tool.get("function")
            if function is None:
                return _missing(f"{where}.function")
            if not isinstance(function, Mapping):
                return _wrong_type(f"{where}.function", "an object", function)
            problem = _function(function, f"{where}.function")
        else:
            # Built-in tools (web_search, file_search, ...) are the server's own
            # business; a function tool is flat here (no nested "function").
            problem = _function(tool, where) if kind == "function" else None
        if problem is not None:
            return problem
    return None


def _messages(body: Mapping[str, Any]) -> RequestProblem | None:
    messages = body.get("messages")
    if messages is None:
        return _missing("messages")
    if not isinstance(messages, list):
        return _wrong_type("messages", "an array", messages)
    if not messages:
        return _empty("messages")
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, Mapping):
            return _wrong_type(where, "an object", message)
        role = message.get("role")
        if role is None:
            return _missing(f"{where}.role")
        if role not in _ROLES:
            return _invalid_value(f"{where}.role", role, _ROLES)
        if role in ("system", "developer", "user") and message.get("content") is None:
            return _missing(f"{where}.content")
        if role == "tool":
            problem = _tool_message(messages, index)
            if problem is not None:
                return problem
    return None


def _tool_message(messages: Sequence[Any], index: int) -> RequestProblem | None:
    """Rule 7: a tool result names its call, and answers an assistant's ``tool_calls``."""
    if messages[index].get("tool_call_id") is None:
        return RequestProblem(
            message="Missing parameter 'tool_call_id': messages with role 'tool' must have a "
            "'tool_call_id'.",
            param=f"messages.[{index}].tool_call_id",
        )
    for earlier in reversed(messages[:index]):
        role = earlier.get("role")
        if role == "assistant" and earlier.get("tool_calls"):
            return None
        if role != "tool":
            break
    return RequestProblem(
        message="Invalid parameter: messages with role 'tool' must be a response to a "
        "preceeding message with 'tool_calls'.",  # sic: OpenAI's spelling
        param=f"messages.[{index}].role",
    )


def _body_problem(body: Any, foreign: Iterable[str]) -> RequestProblem | None:
    """Not a JSON object, or holding another API's parameters (as OpenAI words both)."""
    if not isinstance(body, dict):
        return RequestProblem(message="The request body must be a JSON object.")
    found = [name for name in foreign if name in body]
    if not found:
        return None
    plural = "s" if len(found) > 1 else ""
    return RequestProblem(
        message=f"Unrecognized request argument{plural} supplied: {', '.join(found)}"
    )


def _stream_options(body: Mapping[str, Any]) -> RequestProblem | None:
    """``stream_options``: an object, and only with ``stream: true`` (chat and completions)."""
    options = body.get("stream_options")
    if options is None:
        return None
    if not isinstance(options, Mapping):
        return _wrong_type("stream_options", "an object", options)
    if body.get("stream") is not True:
        return RequestProblem(
            message="The 'stream_options' parameter is only allowed when 'stream' is enabled.",
            param="stream_options",
        )
    return None


def check_chat_request(body: Any) -> RequestProblem | None:
    """Why OpenAI would refuse this ``POST /v1/chat/completions`` body, or None."""
    problem = _body_problem(body, _RESPONSES_ONLY)
    if problem is not None:
        return problem
    return (
        _model(body, missing=RequestProblem(message="you must provide a model parameter"))
        or _messages(body)
        or _integer(body, "n", 1, MAX_N)
        or _integer(body, "max_tokens", 1)
        or _integer(body, "max_completion_tokens", 1)
        or _common(body)
        or _stream_options(body)
        or _tools(body, chat=True)
        or (
            _schema_format(body["response_format"], "response_format", nested=True)
            if body.get("response_format") is not None
            else None
        )
        or (
            RequestProblem(
                message="'messages' must contain the word 'json' in some form, to use "
                "'response_format' of type 'json_object'.",
                param="messages",
            )
            if _json_object(body.get("response_format")) and not _says_json(body["messages"])
            else None
        )
    )


def _json_object(spec: Any) -> bool:
    return isinstance(spec, Mapping) and spec.get("type") == "json_object"


def _says_json(conversation: Any) -> bool:
    """Rule 6: the word, in any case, anywhere in the conversation (no stricter than OpenAI)."""
    return "json" in json.dumps(conversation, ensure_ascii=False).lower()


def _input(body: Mapping[str, Any]) -> RequestProblem | None:
    items = body.get("input")
    if items is None:
        return None if _continues(body) else _missing("input")
    if isinstance(items, str):
        return None
    if not isinstance(items, list):
        return _wrong_type("input", "a string or an array of input items", items)
    if not items:
        return _empty("input")
    calls: set[Any] = set()
    for index, item in enumerate(items):
        if not isinstance(item, Mapping):
            return _wrong_type(f"input[{index}]", "an object", item)
        if item.get("type") == "function_call":
            calls.add(item.get("call_id"))
        elif item.get("type") == "function_call_output":
            call_id = item.get("call_id")
            if call_id is None:
                return _missing(f"input[{index}].call_id")
            if call_id not in calls and not _continues(body):
                # Rule 7: the call must be in this input, or in what it continues.
                return RequestProblem(
                    message=f"No tool call found for function call output with call_id {call_id}.",
                    param="input",
                )
    return None


def _continues(body: Mapping[str, Any]) -> bool:
    """The request continues a stored conversation (rule 5)."""
    return any(body.get(name) is not None for name in _CONTEXT)


def _text(body: Mapping[str, Any]) -> RequestProblem | None:
    text = body.get("text")
    if text is None:
        return None
    if not isinstance(text, Mapping):
        return _wrong_type("text", "an object", text)
    if text.get("format") is None:
        return None
    return _schema_format(text["format"], "text.format", nested=False)


def check_responses_request(body: Any) -> RequestProblem | None:
    """Why OpenAI would refuse this ``POST /v1/responses`` body, or None."""
    if not isinstance(body, dict):
        return RequestProblem(message="The request body must be a JSON object.")
    if "response_format" in body:
        return RequestProblem(
            message="Unsupported parameter: 'response_format'. In the Responses API, this "
            "parameter has moved to 'text.format'. Try again with the new parameter.",
            param="response_format",
            code="unsupported_parameter",
        )
    for name in _CHAT_ONLY:
        if name in body:
            return RequestProblem(
                message=f"Unknown parameter: '{name}'.", param=name, code="unknown_parameter"
            )
    has_prompt = body.get("prompt") is not None
    return (
        (None if has_prompt and "model" not in body else _model(body, missing=_missing("model")))
        or _input(body)
        or _integer(body, "max_output_tokens", MIN_OUTPUT_TOKENS)
        or _common(body)
        or _tools(body, chat=False)
        or _text(body)
        or (
            RequestProblem(
                message="Response input messages must contain the word 'json' in some form "
                "to use 'text.format' of type 'json_object'.",
                param="input",
            )
            if _json_object((body.get("text") or {}).get("format"))
            and not _says_json([body.get("input"), body.get("instructions")])
            and body.get("input") is not None
            else None
        )
    )


#: OpenAI's limit on the legacy ``logprobs``.
MAX_LOGPROBS = 5
# Parameters of chat or the Responses API that legacy completions do not have.
_NOT_COMPLETIONS = ("messages", *_RESPONSES_ONLY)


def _prompt(body: Mapping[str, Any]) -> RequestProblem | None:
    """A string, an array of strings, an array of token ids or an array of such arrays."""
    prompt = body.get("prompt")
    if prompt is None:
        return _missing("prompt")
    if isinstance(prompt, str):
        return None
    if not isinstance(prompt, list):
        return _wrong_type("prompt", "a string or an array", prompt)
    if not prompt:
        return _empty("prompt")
    tokens = all(isinstance(p, int) and not isinstance(p, bool) for p in prompt)
    strings = all(isinstance(p, str) for p in prompt)
    arrays = all(
        isinstance(p, list) and p and all(isinstance(t, int) and not isinstance(t, bool) for t in p)
        for p in prompt
    )
    if tokens or strings or arrays:
        return None
    return RequestProblem(
        message="Invalid 'prompt': expected a string, an array of strings, an array of "
        "tokens or an array of token arrays.",
        param="prompt",
        code="invalid_type",
    )


def check_completions_request(body: Any) -> RequestProblem | None:
    """Why OpenAI would refuse this ``POST /v1/completions`` body, or None."""
    problem = _body_problem(body, _NOT_COMPLETIONS)
    if problem is not None:
        return problem
    suffix = body.get("suffix")
    return (
        _model(body, missing=RequestProblem(message="you must provide a model parameter"))
        or _prompt(body)
        or _integer(body, "n", 1, MAX_N)
        or _integer(body, "best_of", 0, 20)
        or _integer(body, "max_tokens", 0)
        or _integer(body, "logprobs", 0, MAX_LOGPROBS)
        or _boolean(body, "echo")
        or (
            _wrong_type("suffix", "a string", suffix)
            if suffix is not None and not isinstance(suffix, str)
            else None
        )
        or _common(body)
        or _stream_options(body)
    )


def check_messages_request(body: Any) -> RequestProblem | None:
    """Why Anthropic would refuse this ``POST /v1/messages`` body, or None (its words)."""
    if not isinstance(body, dict):
        return RequestProblem(message="The request body must be a JSON object.")
    for name in ("model", "messages", "max_tokens"):
        if body.get(name) is None:
            return RequestProblem(message=f"{name}: Field required", param=name)
    if not isinstance(body["model"], str):
        return RequestProblem(message="model: Input should be a valid string", param="model")
    messages = body["messages"]
    if not isinstance(messages, list) or not messages:
        return RequestProblem(
            message="messages: at least one message is required", param="messages"
        )
    tokens = body["max_tokens"]
    if type(tokens) is not int or tokens < 1:
        return RequestProblem(
            message="max_tokens: Input should be a valid integer greater than 0", param="max_tokens"
        )
    if body.get("stream") not in (None, True, False):
        return RequestProblem(message="stream: Input should be a valid boolean", param="stream")
    return None

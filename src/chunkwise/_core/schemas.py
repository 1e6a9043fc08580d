"""Tool and structured-output schemas: JSON that streams in pieces, parsed and validated once.

A prefix of valid JSON is not valid JSON, so both kinds are checked only when
whole, and validated with the optional ``jsonschema`` package (imported where
used; without it the JSON is still parsed).

Tool calls
----------
Arguments stream as JSON text fragments; they are parsed once the call
completes (:func:`complete_tool_call`), and validated against the
``parameters`` schema of the request's matching function tool
(:class:`ToolSchemas`), in either API's shape: chat's
``{"type": "function", "function": {"name", "parameters"}}`` or the Responses
API's flat ``{"type": "function", "name", "parameters"}``.  The same
completion serves a chat :class:`~chunkwise.ToolCall` and a Responses
:class:`~chunkwise.responses.FunctionCall`.

Structured outputs
------------------
A request asks for JSON with chat's ``response_format`` or the Responses API's
``text.format``: ``{"type": "json_schema", ...}`` (with a schema) or
``{"type": "json_object"}`` (any JSON object).  :class:`OutputSchema` reads
either shape; :meth:`OutputSchema.check` turns an answer's final text into the
parsed value or a :class:`~chunkwise.StructuredOutputError` that keeps the raw
text.  Rules:

1. Only a finished answer is checked, once, at the end of the stream: a prefix
   of JSON is not JSON, so parsing earlier would only report noise.  A chat
   choice finished by ``data: [DONE]`` without a finish_reason is finished
   (the server said the stream is over): it is checked.
2. An answer the server cut short is never parsed as if complete: it gets an
   error saying so ("the answer was cut short (...)"), the same for both APIs.
   Chat: ``finish_reason`` ``length``, ``content_filter`` or ``error``
   (:data:`CUT_SHORT`).  Responses: a response the server ended
   ``incomplete`` (``incomplete_details.reason`` ``max_output_tokens``,
   ``content_filter``...), or a message whose status is not ``completed``.
3. A refusal (no text, a refusal part) is neither parsed nor an error.
4. Without ``jsonschema`` a ``json_object`` format only requires a JSON
   object, and a schema is not checked.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

import attrs

from .errors import StructuredOutputError, ToolArgumentsError
from .payloads import parse_json
from .results import ToolCall

__all__ = [
    "CUT_SHORT",
    "NO_JSONSCHEMA",
    "NO_TOOLS",
    "OutputSchema",
    "ToolSchemas",
    "complete_tool_call",
]

#: :attr:`ToolCall.validation_skipped` when the request has tools but the
#: optional ``jsonschema`` package is not installed.
NO_JSONSCHEMA = "jsonschema is not installed"
#: :attr:`ToolCall.validation_skipped` when no tools were given to check against.
NO_TOOLS = "no tools were given"


class ToolSchemas:
    """The ``parameters`` schemas of a request's function tools, by name.

    Without the optional ``jsonschema`` package only the names are checked; the
    import is tried here, once, so a missing extra never surfaces mid-stream.
    """

    def __init__(self, tools: Iterable[Mapping[str, Any]]) -> None:
        self._schemas: dict[str, Mapping[str, Any]] = {}
        for tool in tools:
            if not isinstance(tool, Mapping) or tool.get("type", "function") != "function":
                continue
            # Chat nests the function; the Responses API puts it in the tool.
            function = tool.get("function", tool)
            if not isinstance(function, Mapping):
                continue
            name = function.get("name")
            parameters = function.get("parameters")
            if isinstance(name, str):
                self._schemas[name] = parameters if isinstance(parameters, Mapping) else {}
        self._validators: dict[str, Any] = {}
        self._jsonschema = _jsonschema_module()

    @property
    def can_validate(self) -> bool:
        """True when ``jsonschema`` is installed, so schemas are checked."""
        return self._jsonschema is not None

    def __contains__(self, name: object) -> bool:
        return name in self._schemas

    def validate(self, name: str, value: Any) -> str | None:
        """Return a message describing why ``value`` fails ``name``'s schema, or None."""
        validator = self._validators.get(name)
        if validator is None:
            validator = self._validators[name] = _make_validator(self._schemas[name])
        return _schema_problem(validator, value)


def _jsonschema_module() -> Any:
    """The ``jsonschema`` module, or None when the optional extra is not installed."""
    try:
        # Optional dependency (the jsonschema extra): imported only when used.
        import jsonschema
    except ImportError:
        return None
    return jsonschema


def _make_validator(schema: Mapping[str, Any]) -> Any:
    """A ``jsonschema`` validator of ``schema``'s own draft (needs the extra)."""
    jsonschema = _jsonschema_module()
    return jsonschema.validators.validator_for(schema)(schema)


def _schema_problem(validator: Any, value: Any) -> str | None:
    """Where and why ``value`` fails ``validator``'s schema (the first error), or None."""
    error = next(iter(validator.iter_errors(value)), None)
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "(root)"
    return f"{where}: {error.message}"


C = TypeVar("C", bound=ToolCall)


def complete_tool_call(call: C, *, schemas: ToolSchemas | None) -> C:
    """``call`` completed: its arguments parsed (and validated), ``completed`` set.

    ``call`` is the call as streamed, with ``finished`` saying whether the
    server finished it; the result is a new call of the same class.
    """
    name, arguments = call.name, call.arguments
    parsed: Any = None
    message: str | None = None  # why the arguments cannot be used
    validated: bool | None = None
    skipped: str | None = None
    try:
        parsed = parse_json(arguments)
    except ValueError as exc:
        what = "are empty" if not arguments else f"are not valid JSON ({exc})"
        if not call.finished:
            what += "; the stream ended before the call finished"
        message = f"arguments of tool call {name!r} {what}"
    else:
        if schemas is None:
            skipped = NO_TOOLS
        elif name is None or name not in schemas:
            message = f"tool call names {name!r}, which is not among the request's tools"
        elif not schemas.can_validate:
            skipped = NO_JSONSCHEMA
        else:
            problem = schemas.validate(name, parsed)
            validated = problem is None
            if problem is not None:
                message = f"arguments of tool call {name!r} do not match its schema: {problem}"
    error = None if message is None else ToolArgumentsError(message, raw=arguments, tool_name=name)
    call = attrs.evolve(
        call, completed=True, error=error, validated=validated, validation_skipped=skipped
    )
    if error is None:
        object.__setattr__(call, "_parsed", parsed)  # frozen: set before anyone sees it
    return call


#: Chat finish reasons that say the content is not the whole answer (rule 2).
CUT_SHORT = frozenset({"length", "content_filter", "error"})

_JSON_TYPES = ("json_object", "json_schema")


class OutputSchema:
    """The JSON a request asked for: a named schema, or any JSON object."""

    def __init__(self, *, name: str | None, schema: Mapping[str, Any] | None) -> None:
        self.name = name
        self.schema = schema
        self._validator: Any = None

    @classmethod
    def from_response_format(cls, response_format: Any) -> OutputSchema | None:
        """Chat's ``response_format``; None unless it asks for JSON."""
        return cls._of(response_format, nested=True)

    @classmethod
    def from_text_format(cls, text_format: Any) -> OutputSchema | None:
        """The Responses API's ``text.format``; None unless it asks for JSON."""
        return cls._of(text_format, nested=False)

    @classmethod
    def _of(cls, requested: Any, *, nested: bool) -> OutputSchema | None:
        # Chat nests the name and schema in "json_schema"; Responses does not.
        if not isinstance(requested, Mapping) or requested.get("type") not in _JSON_TYPES:
            return None
        if requested["type"] == "json_object":
            return cls(name=None, schema=None)
        spec = requested.get("json_schema") if nested else requested
        if not isinstance(spec, Mapping):
            spec = {}
        name = spec.get("name")
        schema = spec.get("schema")
        return cls(
            name=name if isinstance(name, str) else None,
            schema=schema if isinstance(schema, Mapping) else None,
        )

    def check(
        self, text: str, *, cut_short: str | None = None
    ) -> tuple[Any, StructuredOutputError | None]:
        """``(value, None)`` when ``text`` is what was asked for, else ``(None, error)``.

        ``cut_short`` says why the answer is not whole (rule 2): then the text
        is not parsed at all.
        """
        if cut_short is not None:
            return None, self._error(f"the answer was cut short ({cut_short})", text)
        try:
            value = parse_json(text)
        except ValueError as exc:
            what = "is empty" if not text.strip() else f"is not valid JSON ({exc})"
            return None, self._error(f"the answer {what}", text)
        if self.schema is None:
            if not isinstance(value, dict):
                return None, self._error(
                    f"the answer is a JSON {type(value).__name__}, not an object", text
                )
            return value, None
        problem = self._validate(value)
        if problem is not None:
            return None, self._error(f"the answer does not match the schema: {problem}", text)
        return value, None

    def _validate(self, value: Any) -> str | None:
        if self._validator is None:
            if _jsonschema_module() is None:
                return None  # rule 4: parsed, not checked
            assert self.schema is not None
            self._validator = _make_validator(self.schema)
        return _schema_problem(self._validator, value)

    def _error(self, message: str, text: str) -> StructuredOutputError:
        if self.name is not None:
            message = f"structured output {self.name!r}: {message}"
        return StructuredOutputError(message, raw=text, schema_name=self.name)

"""Tool-call arguments: parsed once the call is over, validated against schemas.

Arguments stream as JSON text fragments; a prefix of valid JSON is not
valid JSON, so parsing waits for the call to complete.  Validation uses the
optional ``jsonschema`` package and the ``parameters`` schema of the request's
matching function tool, in either API's shape: chat's
``{"type": "function", "function": {"name", "parameters"}}`` or the Responses
API's flat ``{"type": "function", "name", "parameters"}``.  The same
completion serves a chat :class:`~chunkwise.ToolCall` and a Responses
:class:`~chunkwise.responses.FunctionCall`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

import attrs

from .errors import ToolArgumentsError
from .payloads import parse_json
from .results import ToolCall

__all__ = [
    "NO_JSONSCHEMA",
    "NO_TOOLS",
    "ToolSchemas",
    "complete_tool_call",
    "jsonschema_module",
    "make_validator",
    "schema_problem",
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
        self._jsonschema = jsonschema_module()

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
            validator = self._validators[name] = make_validator(self._schemas[name])
        return schema_problem(validator, value)


def jsonschema_module() -> Any:
    """The ``jsonschema`` module, or None when the optional extra is not installed."""
    try:
        # Optional dependency (the jsonschema extra): imported only when used.
        import jsonschema
    except ImportError:
        return None
    return jsonschema


def make_validator(schema: Mapping[str, Any]) -> Any:
    """A ``jsonschema`` validator of ``schema``'s own draft (needs the extra)."""
    jsonschema = jsonschema_module()
    return jsonschema.validators.validator_for(schema)(schema)


def schema_problem(validator: Any, value: Any) -> str | None:
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

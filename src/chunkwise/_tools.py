"""Tool-call arguments: parsed once the call is over, validated against schemas.

Arguments stream as JSON text fragments; a prefix of valid JSON is not
valid JSON, so parsing waits for the call to complete.  Validation uses the
optional ``jsonschema`` package and the ``parameters`` schema of the request's
matching function tool.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ._errors import ToolArgumentsError
from ._payloads import parse_json
from ._results import ToolCall

__all__ = ["NO_JSONSCHEMA", "NO_TOOLS", "ToolSchemas", "complete_tool_call"]

#: :attr:`ToolCall.validation_skipped` when the request has tools but the
#: optional ``jsonschema`` package is not installed.
NO_JSONSCHEMA = "jsonschema is not installed"
#: :attr:`ToolCall.validation_skipped` when no tools were given to check against.
NO_TOOLS = "no tools were given"


class ToolSchemas:
    """The ``parameters`` schemas of a request's function tools, by name.

    Without the optional ``jsonschema`` package the schemas are not checked
    (``ToolCall.validated`` stays ``None`` and ``ToolCall.validation_skipped``
    says why); names still are.  The import is tried here, once, so a missing
    extra never surfaces mid-stream.
    """

    def __init__(self, tools: Iterable[Mapping[str, Any]]) -> None:
        self._schemas: dict[str, Mapping[str, Any]] = {}
        for tool in tools:
            function = tool.get("function")
            if tool.get("type", "function") != "function" or not isinstance(function, Mapping):
                continue
            name = function.get("name")
            parameters = function.get("parameters")
            if isinstance(name, str):
                self._schemas[name] = parameters if isinstance(parameters, Mapping) else {}
        self._validators: dict[str, Any] = {}
        try:
            # Optional dependency (the jsonschema extra): imported only when used.
            import jsonschema
        except ImportError:
            self._jsonschema: Any = None
        else:
            self._jsonschema = jsonschema

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
            schema = self._schemas[name]
            cls = self._jsonschema.validators.validator_for(schema)
            validator = self._validators[name] = cls(schema)
        error = next(iter(validator.iter_errors(value)), None)
        if error is None:
            return None
        where = "/".join(str(p) for p in error.absolute_path) or "(root)"
        return f"{where}: {error.message}"


def complete_tool_call(
    *,
    index: int,
    id: str | None,
    type: str | None,
    name: str | None,
    arguments: str,
    finished: bool,
    schemas: ToolSchemas | None,
) -> ToolCall:
    """Parse (and validate) a finished call's arguments into a :class:`ToolCall`."""
    parsed: Any = None
    error: ToolArgumentsError | None = None
    validated: bool | None = None
    skipped: str | None = None
    try:
        parsed = parse_json(arguments)
    except ValueError as exc:
        what = "are empty" if not arguments else f"are not valid JSON ({exc})"
        if not finished:
            what += "; the stream ended before the call finished"
        error = ToolArgumentsError(
            f"arguments of tool call {name!r} {what}", raw=arguments, tool_name=name
        )
    if error is None and schemas is None:
        skipped = NO_TOOLS
    elif error is None and schemas is not None:
        if name not in schemas:
            error = ToolArgumentsError(
                f"tool call names {name!r}, which is not among the request's tools",
                raw=arguments,
                tool_name=name,
            )
        elif schemas.can_validate:
            assert name is not None
            problem = schemas.validate(name, parsed)
            validated = problem is None
            if problem is not None:
                error = ToolArgumentsError(
                    f"arguments of tool call {name!r} do not match its schema: {problem}",
                    raw=arguments,
                    tool_name=name,
                )
        else:
            skipped = NO_JSONSCHEMA
    call = ToolCall(
        index=index,
        id=id,
        type=type,
        name=name,
        arguments=arguments,
        finished=finished,
        completed=True,
        error=error,
        validated=validated,
        validation_skipped=skipped,
    )
    if error is None:
        object.__setattr__(call, "_parsed", parsed)  # frozen: set before anyone sees it
    return call

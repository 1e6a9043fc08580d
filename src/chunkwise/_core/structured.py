"""Structured outputs: the final text of a finished answer, parsed and validated once.

A request asks for JSON with chat's ``response_format`` or the Responses API's
``text.format``: ``{"type": "json_schema", ...}`` (with a schema) or
``{"type": "json_object"}`` (any JSON object).  :class:`OutputSchema` reads
either shape; :meth:`OutputSchema.check` turns an answer's final text into the
parsed value or a :class:`~chunkwise.StructuredOutputError` that keeps the raw
text.

Rules:

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
4. Schemas are checked with the optional ``jsonschema`` package; without it
   the text is still parsed (as for tool-call arguments), and a
   ``json_object`` format only requires a JSON object.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .errors import StructuredOutputError
from .payloads import parse_json
from .tools import jsonschema_module, make_validator, schema_problem

__all__ = ["CUT_SHORT", "OutputSchema"]

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
            if jsonschema_module() is None:
                return None  # rule 4: parsed, not checked
            assert self.schema is not None
            self._validator = make_validator(self.schema)
        return schema_problem(self._validator, value)

    def _error(self, message: str, text: str) -> StructuredOutputError:
        if self.name is not None:
            message = f"structured output {self.name!r}: {message}"
        return StructuredOutputError(message, raw=text, schema_name=self.name)

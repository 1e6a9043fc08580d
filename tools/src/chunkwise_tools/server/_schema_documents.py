"""A JSON document generated from a JSON schema: the answer to a structured-output request.

Theory of operation
-------------------
A request that asks for structured output (chat's ``response_format``, the
Responses API's ``text.format``) gets, from ``chunkwise serve``, what a model
under OpenAI's structured outputs writes: one JSON document valid against the
request's schema.  :func:`document_for_schema` walks the schema depth first and
builds the value; ``$ref`` is followed into the root (``#``, ``#/$defs/...``,
``#/definitions/...``, any JSON pointer), so recursive schemas work.  A schema
it cannot satisfy raises :class:`UnsupportedSchema`, naming the keyword and
where it is, and the server answers that request with a 400.

Rules
-----
1. Deterministic: a schema always gives the same document, so tests and
   recordings are reproducible.
2. Valid or refused: every keyword in :data:`HONOURED` is satisfied, and
   annotations (:data:`ANNOTATIONS`) are ignored; any other keyword
   (``pattern``, ``not``, ``allOf``, ``oneOf``, ``patternProperties``, an
   unknown ``format``...) raises :class:`UnsupportedSchema` rather than give a
   document that might break it.
3. An object has its required properties and, above :data:`OPTIONAL_DEPTH`,
   its optional ones too, in the schema's order; it never has a property the
   schema does not name.  A required property that ``properties`` does not
   describe takes ``additionalProperties`` (a schema) or any value.
4. Strings carry what a streaming parser must get right: a quote, a
   backslash and a newline (escapes), accented letters, CJK and an emoji
   outside the BMP (:data:`SAMPLE_TEXT`); cut to ``maxLength`` and padded to
   ``minLength`` (counted in code points, as JSON Schema counts).
5. ``const`` wins, then ``enum`` (its values of the declared ``type``);
   ``type`` lists take their first non-null type; ``anyOf`` takes its first
   branch that can be generated (below :data:`OPTIONAL_DEPTH`, one without a
   ``$ref`` first, so recursion ends).
6. Numbers respect ``minimum``, ``maximum``, the exclusive bounds and
   ``multipleOf``; an integer is an ``int``, a number a ``float`` when it can.
7. Arrays have ``minItems`` items, or two (above :data:`OPTIONAL_DEPTH`,
   and within ``maxItems``); ``prefixItems`` first.  Items are generated with
   different *variants* (another ``enum`` value, another number, a numbered
   string), so ``uniqueItems`` holds.
8. Recursion without a finite document (a required property that always
   recurses) is refused past :data:`MAX_DEPTH`, not looped on.

Pure functions: no I/O, no trio, no third-party packages.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

__all__ = [
    "ANNOTATIONS",
    "HONOURED",
    "MAX_DEPTH",
    "OPTIONAL_DEPTH",
    "SAMPLE_TEXT",
    "UnsupportedSchema",
    "document_for_schema",
]

#: The text strings are made of (rule 4): a quote, a backslash, a newline,
#: accents, CJK and an emoji outside the BMP.
SAMPLE_TEXT = 'Zürich "grüezi" \\ 東京 🎉\n'
#: Below this depth, optional properties are left out and arrays are as short as allowed.
OPTIONAL_DEPTH = 4
#: Deeper than this, a schema is refused as having no finite document (rule 8).
MAX_DEPTH = 48

#: The keywords a generated document satisfies (rule 2).
HONOURED = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "prefixItems",
        "minItems",
        "maxItems",
        "uniqueItems",
        "enum",
        "const",
        "anyOf",
        "$ref",
        "$defs",
        "definitions",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minLength",
        "maxLength",
        "format",
    }
)
#: Keywords that say nothing about validity.
ANNOTATIONS = frozenset(
    {
        "title",
        "description",
        "default",
        "examples",
        "$schema",
        "$id",
        "$comment",
        "deprecated",
        "readOnly",
        "writeOnly",
        "strict",
    }
)

# A value of each known ``format`` (rule 2): anything else is refused.
_FORMATS: Mapping[str, str] = {
    "date-time": "2025-01-01T12:00:00Z",
    "date": "2025-01-01",
    "time": "12:00:00Z",
    "duration": "P1D",
    "email": "ada@example.com",
    "hostname": "example.com",
    "ipv4": "192.0.2.1",
    "ipv6": "2001:db8::1",
    "uuid": "123e4567-e89b-12d3-a456-426614174000",
    "uri": "https://example.com/",
}


class UnsupportedSchema(ValueError):
    """The schema asks for something the generator cannot promise (rule 2, rule 8).

    Attributes:
        path: where in the schema, as a JSON pointer (``"#/properties/city"``).
    """

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(f"{message} (at {path})")
        self.path = path


def document_for_schema(schema: Mapping[str, Any]) -> Any:
    """A JSON value valid against ``schema`` (rules 1 to 8).

    Raises:
        UnsupportedSchema: the schema uses a keyword the generator does not
            honour, a ``$ref`` it cannot resolve, or has no finite document.
    """
    return _Generator(schema).value(schema, "#", depth=0, variant=0)


class _Generator:
    def __init__(self, root: Mapping[str, Any]) -> None:
        self._root = root

    def value(self, schema: Any, path: str, *, depth: int, variant: int) -> Any:
        if depth > MAX_DEPTH:
            raise UnsupportedSchema(
                "the schema has no finite document (endless recursion)", path=path
            )
        if schema is True or schema == {}:
            return self._string({}, path, variant)
        if schema is False or not isinstance(schema, Mapping):
            raise UnsupportedSchema("no value matches this schema", path=path)
        unknown = sorted(set(schema) - HONOURED - ANNOTATIONS)
        if unknown:
            raise UnsupportedSchema(f"keyword {unknown[0]!r} is not supported", path=path)
        if "$ref" in schema:
            if len(set(schema) - ANNOTATIONS - {"$ref", "$defs", "definitions"}) > 0:
                raise UnsupportedSchema("'$ref' beside other keywords is not supported", path=path)
            ref = schema["$ref"]
            return self.value(self._resolve(ref, path), ref, depth=depth + 1, variant=variant)
        if "const" in schema:
            return schema["const"]
        if "enum" in schema:
            values = schema["enum"]
            if not isinstance(values, list) or not values:
                raise UnsupportedSchema("'enum' must be a non-empty array", path=path)
            if "type" in schema:
                # Only the values of the declared type are valid.
                kinds = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
                values = [v for v in values if any(_is_a(v, kind) for kind in kinds)]
                if not values:
                    raise UnsupportedSchema("no 'enum' value has the declared type", path=path)
            return values[variant % len(values)]
        if "anyOf" in schema:
            return self._any_of(schema, path, depth, variant)
        kind = _kind(schema, path)
        if kind == "object":
            return self._object(schema, path, depth, variant)
        if kind == "array":
            return self._array(schema, path, depth, variant)
        if kind == "string":
            return self._string(schema, path, variant)
        if kind in ("integer", "number"):
            return _number(schema, path, variant, integer=kind == "integer")
        if kind == "boolean":
            return variant % 2 == 0
        return None  # "null"

    def _resolve(self, ref: Any, path: str) -> Any:
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise UnsupportedSchema(f"only local '$ref's are supported, not {ref!r}", path=path)
        target: Any = self._root
        for token in ref[1:].split("/")[1:]:
            token = token.replace("~1", "/").replace("~0", "~")
            if isinstance(target, Mapping) and token in target:
                target = target[token]
            elif isinstance(target, list) and token.isdigit() and int(token) < len(target):
                target = target[int(token)]
            else:
                raise UnsupportedSchema(f"'$ref' {ref!r} does not resolve", path=path)
        return target

    def _any_of(self, schema: Mapping[str, Any], path: str, depth: int, variant: int) -> Any:
        branches = schema["anyOf"]
        if not isinstance(branches, list) or not branches:
            raise UnsupportedSchema("'anyOf' must be a non-empty array", path=path)
        if len(set(schema) - ANNOTATIONS - {"anyOf", "$defs", "definitions"}) > 0:
            raise UnsupportedSchema("'anyOf' beside other keywords is not supported", path=path)
        order = list(range(len(branches)))
        if depth >= OPTIONAL_DEPTH:
            # Ending recursion: branches without a reference first (rule 5).
            order.sort(key=lambda i: "$ref" in json.dumps(branches[i]))
        problem: UnsupportedSchema | None = None
        for index in order:
            try:
                return self.value(
                    branches[index], f"{path}/anyOf/{index}", depth=depth + 1, variant=variant
                )
            except UnsupportedSchema as exc:
                problem = problem or exc
        assert problem is not None
        raise problem

    def _object(
        self, schema: Mapping[str, Any], path: str, depth: int, variant: int
    ) -> dict[str, Any]:
        properties = schema.get("properties") or {}
        required = schema.get("required") or []
        extra = schema.get("additionalProperties", True)
        if not isinstance(properties, Mapping) or not isinstance(required, list):
            raise UnsupportedSchema("malformed 'properties' or 'required'", path=path)
        names = list(properties)
        names += [name for name in required if name not in properties]
        document: dict[str, Any] = {}
        for name in names:
            if name not in required and depth >= OPTIONAL_DEPTH:
                continue  # rule 3
            if name in properties:
                sub, where = properties[name], f"{path}/properties/{name}"
            elif extra is False:
                raise UnsupportedSchema(
                    f"required property {name!r} is not allowed by additionalProperties",
                    path=path,
                )
            else:
                sub, where = extra, f"{path}/additionalProperties"
            document[name] = self.value(sub, where, depth=depth + 1, variant=variant)
        return document

    def _array(self, schema: Mapping[str, Any], path: str, depth: int, variant: int) -> list[Any]:
        prefix = schema.get("prefixItems") or []
        items = schema.get("items", {})
        low = _count(schema, "minItems", path, default=0)
        high = _count(schema, "maxItems", path, default=None)
        if high is not None and high < low:
            raise UnsupportedSchema("'maxItems' is below 'minItems'", path=path)
        wanted = low if depth >= OPTIONAL_DEPTH else max(low, 2)
        if high is not None:
            wanted = min(wanted, high)
        if items is False:
            wanted = min(wanted, len(prefix))
            if wanted < low:
                raise UnsupportedSchema("'minItems' needs more items than allowed", path=path)
        document: list[Any] = []
        for index in range(wanted):
            if index < len(prefix):
                sub, where = prefix[index], f"{path}/prefixItems/{index}"
            else:
                sub, where = items, f"{path}/items"
            document.append(self.value(sub, where, depth=depth + 1, variant=variant + index))
        if schema.get("uniqueItems") is True and not _unique(document):
            unique: list[Any] = []
            for value in document:
                if _unique([*unique, value]):
                    unique.append(value)
            if len(unique) < low or len(prefix) > len(unique):
                raise UnsupportedSchema("cannot make enough unique items", path=path)
            document = unique
        return document

    def _string(self, schema: Mapping[str, Any], path: str, variant: int) -> str:
        low = _count(schema, "minLength", path, default=0)
        high = _count(schema, "maxLength", path, default=None)
        fmt = schema.get("format")
        if fmt is not None:
            if fmt not in _FORMATS:
                raise UnsupportedSchema(f"format {fmt!r} is not supported", path=path)
            text = _FORMATS[fmt]
            if len(text) < low or (high is not None and len(text) > high):
                raise UnsupportedSchema(f"format {fmt!r} does not fit the length", path=path)
            return text
        text = (f"{variant}: " if variant else "") + SAMPLE_TEXT
        while len(text) < low:
            text += SAMPLE_TEXT
        if high is not None:
            if high < low:
                raise UnsupportedSchema("'maxLength' is below 'minLength'", path=path)
            text = text[: max(high, low)]
        return text


def _kind(schema: Mapping[str, Any], path: str) -> str:
    kind = schema.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"] or ["null"]
        kind = kinds[0]
    if kind is None:
        # No type: what the keywords describe, else any value (a string).
        if "properties" in schema or "required" in schema:
            return "object"
        if "items" in schema or "prefixItems" in schema:
            return "array"
        if any(k in schema for k in ("minimum", "maximum", "multipleOf")):
            return "number"
        return "string"
    if kind not in ("object", "array", "string", "integer", "number", "boolean", "null"):
        raise UnsupportedSchema(f"unknown type {kind!r}", path=path)
    return str(kind)


def _is_a(value: Any, kind: Any) -> bool:
    """``value`` is of JSON Schema type ``kind``."""
    if kind == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    types = {"string": str, "boolean": bool, "array": list, "object": dict}
    if kind == "null":
        return value is None
    return kind in types and isinstance(value, types[kind])


def _count(schema: Mapping[str, Any], keyword: str, path: str, *, default: int | None) -> Any:
    value = schema.get(keyword, default)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise UnsupportedSchema(f"{keyword!r} must be a non-negative integer", path=path)
    return value


def _unique(values: list[Any]) -> bool:
    seen = {json.dumps(v, sort_keys=True) for v in values}
    # 1 and 1.0 are equal in JSON Schema, and json.dumps tells them apart: compare numbers too.
    numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return len(seen) == len(values) and len(set(numbers)) == len(numbers)


def _number(schema: Mapping[str, Any], path: str, variant: int, *, integer: bool) -> int | float:
    """A number within the schema's bounds and a multiple of ``multipleOf`` (rule 6)."""
    bounds: list[float | None] = []
    for keyword in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"):
        value = schema.get(keyword)
        if value is not None and (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
        ):
            raise UnsupportedSchema(f"{keyword!r} must be a number", path=path)
        bounds.append(value)
    minimum, maximum, above, below, step = bounds
    if step is not None and step <= 0:
        raise UnsupportedSchema("'multipleOf' must be positive", path=path)
    if integer:
        step = 1 if step is None else step
        if step != int(step):
            # A multiple of 0.5 that is an integer: a multiple of the smallest integer step.
            factor = next((k for k in range(1, 1001) if float(k * step).is_integer()), None)
            if factor is None:
                raise UnsupportedSchema("no integer is a multiple of 'multipleOf'", path=path)
            step = factor * step
        step = int(step)

    def allowed(value: float) -> bool:
        return (
            (minimum is None or value >= minimum)
            and (maximum is None or value <= maximum)
            and (above is None or value > above)
            and (below is None or value < below)
            and (step is None or float(value / step).is_integer())
        )

    # Preferred values first, then the multiples of the step next to the lower bound.
    lowest = max((b for b in (minimum, above) if b is not None), default=None)
    highest = min((b for b in (maximum, below) if b is not None), default=None)
    unit: float = step if step is not None else (1 if integer else 0.5)
    candidates: list[float] = [42 + variant * unit, 7] if integer else [21.5 + variant, 42]
    for anchor in (lowest, highest, 0):
        if anchor is None:
            continue
        base = math.floor(anchor / unit)
        candidates += [(base + k) * unit for k in range(-2, 3 + variant)]
    if lowest is not None and highest is not None:
        candidates.append((lowest + highest) / 2)
    chosen = [c for c in candidates if allowed(c)]
    if variant and len(chosen) > 1:
        chosen = chosen[variant % len(chosen) :] + chosen
    if not chosen:
        raise UnsupportedSchema("no number fits the bounds and 'multipleOf'", path=path)
    value = chosen[0]
    if integer:
        return int(value)
    return float(value) if allowed(float(value)) else value

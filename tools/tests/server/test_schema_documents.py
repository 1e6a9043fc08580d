"""Documents generated from schemas by ``chunkwise serve``, and the fragments it streams.

Every document is checked with ``jsonschema`` against its schema: a table of
the shapes structured outputs use, and hypothesis over generated schemas.
The fragments are checked for the splits rule 3 of ``_structured_answers``
promises, over every key and escape of the text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chunkwise._core.schemas import OutputSchema
from chunkwise_tools.server._schema_documents import (
    OPTIONAL_DEPTH,
    SAMPLE_TEXT,
    UnsupportedSchema,
    document_for_schema,
)
from chunkwise_tools.server._structured_answers import (
    FRAGMENT_SIZE,
    JSON_OBJECT_SCHEMA,
    fragments,
    json_text,
    structured_answer,
)


def _valid(document: Any, schema: Mapping[str, Any]) -> bool:
    return bool(jsonschema.Draft202012Validator(schema).is_valid(document))


def _check(schema: Mapping[str, Any]) -> Any:
    document = document_for_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(document)
    assert document_for_schema(schema) == document  # rule 1: deterministic
    return document


NODE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
    },
    "required": ["name", "children"],
    "additionalProperties": False,
}
WEATHER: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "annotations are ignored"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "temperature": {"type": "number", "minimum": -90, "maximum": 60},
        "days": {"type": "integer", "minimum": 1, "maximum": 7},
        "sunny": {"type": "boolean"},
        "note": {"type": ["string", "null"]},
    },
    "required": ["city", "unit", "temperature"],
    "additionalProperties": False,
}

# Every shape the generator honours (rules 3 to 7), each valid by jsonschema.
SCHEMAS: list[Mapping[str, Any]] = [
    WEATHER,
    {"type": "string"},
    {"type": "string", "minLength": 60},
    {"type": "string", "maxLength": 3},
    {"type": "string", "minLength": 5, "maxLength": 5},
    {"type": "string", "format": "date-time"},
    {"type": "string", "format": "email"},
    {"type": "integer"},
    {"type": "integer", "minimum": 100},
    {"type": "integer", "maximum": -5},
    {"type": "integer", "exclusiveMinimum": 3, "exclusiveMaximum": 5},
    {"type": "integer", "minimum": 1000, "multipleOf": 7},
    {"type": "integer", "multipleOf": 2.5},
    {"type": "number"},
    {"type": "number", "exclusiveMinimum": 0.5, "exclusiveMaximum": 0.6},
    {"type": "number", "multipleOf": 0.25, "minimum": 3},
    {"type": "number", "maximum": -1000.5},
    {"type": "boolean"},
    {"type": "null"},
    {"enum": ["a", 2, None]},
    {"const": {"fixed": [1, "ü"]}},
    {"type": "string", "enum": ["only"]},
    {"type": "array", "items": {"type": "string", "enum": [1, "a", None, "b"]}, "minItems": 3},
    {"type": ["integer", "null"], "enum": ["x", 2.0, None]},
    {"type": "array", "items": {"type": "integer"}},
    {"type": "array", "items": {"type": "string"}, "minItems": 5},
    {"type": "array", "items": {"type": "string"}, "maxItems": 1},
    {"type": "array", "items": {"type": "integer"}, "maxItems": 0},
    {"type": "array", "items": {"enum": ["x", "y", "z"]}, "minItems": 3, "uniqueItems": True},
    {"type": "array", "items": {"type": "boolean"}, "minItems": 2, "uniqueItems": True},
    {"type": "array", "items": {"type": "number"}, "minItems": 4, "uniqueItems": True},
    {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": False},
    {"type": "array", "items": {"type": "array", "items": {"type": "object"}}},
    {"type": "object"},
    {"type": "object", "properties": {}, "additionalProperties": False},
    {"type": "object", "required": ["free"], "additionalProperties": {"type": "integer"}},
    {"type": "object", "properties": {"a": {"type": "string"}}},  # optional only
    {"anyOf": [{"type": "string"}, {"type": "null"}]},
    {"anyOf": [{"type": "string", "format": "no-such-format"}, {"type": "integer"}]},
    {
        "type": "object",
        "properties": {"a": {"anyOf": [{"$ref": "#/$defs/n"}, {"type": "null"}]}},
        "$defs": {"n": {"type": "integer", "minimum": 5}},
    },
    {"$defs": {"node": NODE}, "$ref": "#/$defs/node"},
    {
        "definitions": {"x": {"type": "boolean"}},
        "type": "array",
        "items": {"$ref": "#/definitions/x"},
    },
    {
        "type": "object",
        "properties": {"value": {"type": "integer"}, "next": {"$ref": "#"}},
        "required": ["value"],
    },
    {
        "type": "object",
        "properties": {
            "outer": {
                "type": "object",
                "properties": {
                    "inner": {
                        "type": "object",
                        "properties": {"deep": {"type": "array", "items": {"const": 1}}},
                        "required": ["deep"],
                    }
                },
                "required": ["inner"],
            }
        },
        "required": ["outer"],
    },
    {"title": "only annotations", "description": "any value", "$schema": "x"},
    {},
    JSON_OBJECT_SCHEMA,  # the json_object answer's schema
]


@pytest.mark.parametrize("schema", SCHEMAS, ids=lambda s: json.dumps(s)[:60])
def test_each_schema_gives_a_valid_document(schema: Mapping[str, Any]) -> None:
    _check(schema)


def test_required_and_optional_properties_are_both_there() -> None:
    document = _check(WEATHER)
    assert list(document) == list(WEATHER["properties"])  # rule 3: the schema's order
    assert document["city"] == SAMPLE_TEXT


def test_strings_carry_escapes_and_characters_outside_the_bmp() -> None:
    text = json_text(_check({"type": "string"}))
    for needle in ('\\"', "\\\\", "\\n", "ü", "東京", "\\ud83c\\udf89"):
        assert needle in text


def test_recursion_ends_below_the_optional_depth() -> None:
    document = _check({"$defs": {"node": NODE}, "$ref": "#/$defs/node"})
    depth = 0
    while document["children"]:
        document = document["children"][0]
        depth += 1
    assert 0 < depth <= OPTIONAL_DEPTH


@pytest.mark.parametrize(
    ("schema", "words", "path"),
    [
        ({"type": "string", "pattern": "^a+$"}, "'pattern'", "#"),
        ({"properties": {"a": {"not": {}}}}, "'not'", "#/properties/a"),
        ({"allOf": [{"type": "string"}]}, "'allOf'", "#"),
        ({"oneOf": [{"type": "string"}]}, "'oneOf'", "#"),
        ({"patternProperties": {"^x": {}}}, "'patternProperties'", "#"),
        ({"type": "string", "format": "color"}, "format 'color'", "#"),
        ({"$ref": "#/$defs/missing"}, "does not resolve", "#"),
        ({"$ref": "https://example.com/schema"}, "only local", "#"),
        ({"type": "object", "properties": {"me": {"$ref": "#"}}, "required": ["me"]}, "finite", ""),
        ({"type": "string", "minLength": 4, "maxLength": 2}, "below 'minLength'", "#"),
        ({"type": "integer", "minimum": 1, "maximum": 2, "multipleOf": 5}, "no number", "#"),
        ({"type": "array", "maxItems": 1, "minItems": 2}, "below 'minItems'", "#"),
        (
            {"type": "array", "items": {"const": 1}, "minItems": 2, "uniqueItems": True},
            "unique",
            "#",
        ),
        ({"type": "object", "required": ["a"], "additionalProperties": False}, "not allowed", "#"),
        ({"type": "date"}, "unknown type", "#"),
        ({"enum": []}, "non-empty", "#"),
        ({"type": "string", "enum": [1, 2]}, "declared type", "#"),
        ({"anyOf": [{"type": "string"}], "type": "string"}, "beside other keywords", "#"),
        (False, "no value", "#"),
    ],
)
def test_what_cannot_be_promised_is_refused(schema: Any, words: str, path: str) -> None:
    with pytest.raises(UnsupportedSchema) as caught:
        document_for_schema(schema)
    assert words in str(caught.value)
    assert caught.value.path.startswith(path)


# -- hypothesis: generated schemas ------------------------------------------------------

_LEAVES = st.one_of(
    st.builds(lambda low: {"type": "string", "minLength": low}, st.integers(0, 40)),
    st.builds(lambda fmt: {"type": "string", "format": fmt}, st.sampled_from(["date", "uuid"])),
    st.builds(
        lambda low, width, exclusive, integer, step: {
            "type": "integer" if integer else "number",
            ("exclusiveMinimum" if exclusive else "minimum"): low,
            "maximum": low + width,
            **({"multipleOf": step} if step else {}),
        },
        st.integers(-(10**6), 10**6) | st.floats(-1e6, 1e6, allow_nan=False),
        st.integers(2, 10**4),
        st.booleans(),
        st.booleans(),
        st.sampled_from([None, 1, 2, 0.5]),
    ),
    st.fixed_dictionaries({"type": st.sampled_from(["boolean", "null", "integer", "number"])}),
    st.builds(lambda values: {"enum": values}, st.lists(st.integers() | st.text(), min_size=1)),
    st.builds(lambda value: {"const": value}, st.text() | st.integers() | st.booleans()),
)


def _extend(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    names = st.text(st.characters(codec="utf-8"), min_size=1, max_size=8)
    objects = st.builds(
        lambda props, data, closed: {
            "type": "object",
            "properties": props,
            "required": [name for name in props if data.draw(st.booleans())],
            **({"additionalProperties": False} if closed else {}),
        },
        st.dictionaries(names, children, max_size=4),
        st.data(),
        st.booleans(),
    )
    arrays = st.builds(
        lambda items, low: {"type": "array", "items": items, "minItems": low},
        children,
        st.integers(0, 3),
    )
    any_of = st.builds(
        lambda branches: {"anyOf": branches}, st.lists(children, min_size=1, max_size=3)
    )
    nullable = st.builds(lambda child: {"anyOf": [child, {"type": "null"}]}, children)
    return objects | arrays | any_of | nullable


SCHEMA_TREES = st.recursive(_LEAVES, _extend, max_leaves=12)


@settings(deadline=None)
@given(SCHEMA_TREES)
def test_generated_schemas_give_valid_documents(schema: dict[str, Any]) -> None:
    try:
        document = document_for_schema(schema)
    except UnsupportedSchema:
        # Only numbers without a fitting multiple may be refused here (rule 2).
        assert "multipleOf" in json.dumps(schema)
        return
    jsonschema.Draft202012Validator(schema).validate(document)


@settings(deadline=None)
@given(SCHEMA_TREES)
def test_generated_schemas_behind_a_ref(schema: dict[str, Any]) -> None:
    wrapped = {
        "$defs": {"it": schema},
        "type": "object",
        "properties": {"x": {"$ref": "#/$defs/it"}},
    }
    try:
        document = document_for_schema(wrapped)
    except UnsupportedSchema:
        assert "multipleOf" in json.dumps(schema)
        return
    jsonschema.Draft202012Validator(wrapped).validate(document)


# -- the text and its fragments -----------------------------------------------------------

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4)
    ),
    max_leaves=20,
)


@given(JSON_VALUES)
def test_json_text_reads_back_as_the_document(document: Any) -> None:
    text = json_text(document)
    assert json.loads(text) == document
    assert all(ord(c) < 0x10000 for c in text)  # rule 2: the astral plane is escaped


@given(JSON_VALUES, st.integers(1, 12))
def test_fragments_join_to_the_text(document: Any, size: int) -> None:
    text = json_text(document)
    pieces = fragments(text, size)
    assert "".join(pieces) == text  # rule 4
    assert all(0 < len(piece) <= size for piece in pieces)


def _boundaries(pieces: tuple[str, ...]) -> set[int]:
    ends, position = set(), 0
    for piece in pieces:
        position += len(piece)
        ends.add(position)
    return ends


@given(JSON_VALUES)
def test_every_key_escape_and_surrogate_pair_is_split(document: Any) -> None:
    text = json_text(document)
    cuts = _boundaries(fragments(text))
    string = re.compile(r'"((?:[^"\\]|\\.)*)"(\s*:)?')
    for match in string.finditer(text):
        body_start = match.start(1)
        if match.group(2) and len(match.group(1)) > 1:
            assert any(body_start < cut < match.end(1) for cut in cuts), match.group()
        for escape in re.finditer(r"\\(u[0-9a-f]{4}|.)", match.group(1)):
            at = body_start + escape.start()
            assert at + 1 in cuts  # right after the backslash
            if escape.group(1).startswith("u"):
                assert at + 4 in cuts  # inside the hex digits
    for pair in re.finditer(r"\\ud[89ab][0-9a-f]{2}\\ud[c-f][0-9a-f]{2}", text):
        assert pair.start() + 6 in cuts  # between the two halves of one character


def test_the_default_answer_splits_everything_it_should() -> None:
    pieces = structured_answer(OutputSchema(name=None, schema=None), "valid")
    assert max(len(piece) for piece in pieces) <= FRAGMENT_SIZE
    assert '{"a' in pieces  # a key split
    assert any(piece.endswith("\\") for piece in pieces)  # an escape split
    assert any(piece.endswith("ud8") for piece in pieces)  # inside a surrogate escape


# -- the three answers ------------------------------------------------------------------------


@pytest.mark.parametrize("schema", [WEATHER, None])
def test_valid_cut_and_invalid_answers(schema: dict[str, Any] | None) -> None:
    output = OutputSchema(name="w", schema=schema)
    checked = schema if schema is not None else JSON_OBJECT_SCHEMA
    valid = "".join(structured_answer(output, "valid"))
    assert _valid(json.loads(valid), checked)
    cut = "".join(structured_answer(output, "cut"))
    assert valid.startswith(cut) and len(cut) < len(valid)
    with pytest.raises(json.JSONDecodeError):
        json.loads(cut)
    invalid = json.loads("".join(structured_answer(output, "invalid")))
    if schema is None:
        assert isinstance(invalid, list)  # json_object asked for an object
    else:
        assert "city" not in invalid and not _valid(invalid, schema)


def test_an_invalid_answer_without_a_required_root_is_not_json() -> None:
    output = OutputSchema(name="s", schema={"type": "array", "items": {"type": "integer"}})
    text = "".join(structured_answer(output, "invalid"))
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)

"""Structured answers: the JSON text ``chunkwise serve`` streams when a request asks for JSON.

Theory of operation
-------------------
A request asks for JSON with chat's ``response_format`` or the Responses
API's ``text.format`` (read by :class:`~chunkwise._core.schemas.OutputSchema`,
the same reader the client uses).  The server then replaces the text of the
scenario the model names with :func:`structured_answer`: a JSON document for
the request's schema (:func:`~._schema_documents.document_for_schema`),
written as text (:func:`json_text`) and cut into the fragments a model would
stream (:func:`fragments`).  Tool calls, reasoning, finish reasons and the
rest of the scenario stay as they are.

Rules
-----
1. Three answers: ``"valid"`` (the document; for ``json_object``, the
   document of :data:`JSON_OBJECT_SCHEMA`); ``"cut"`` (the first half of the
   valid answer's fragments, for a scenario cut by the token limit or failed
   mid-stream); ``"invalid"`` (the valid document without its first required
   property, which the schema rejects; without a root ``required``, the valid
   text less its last character, which is not JSON; for ``json_object``, a
   JSON array, which is not the object asked for).
2. The text is what a model writes: ``json.dumps`` spacing, characters as
   they are, except those outside the Basic Multilingual Plane, written as
   surrogate-pair escapes (``\\ud83c\\udf89``), so a client must join one
   character from two escapes.
3. Fragments are at most :data:`FRAGMENT_SIZE` characters and are cut, on
   purpose, inside every key, right after every escape's backslash, inside
   every ``\\uXXXX`` and between the two escapes of a surrogate pair: every
   split a parser can get wrong happens in every answer.  (A multibyte
   character written as itself is whole in a delta, as a JSON string must
   carry it; ``--write-size`` splits its bytes across writes.)
4. Joining the fragments gives the text back exactly.

Pure functions: no I/O, no trio.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

from chunkwise.lowlevel import OutputSchema

from ._schema_documents import document_for_schema

__all__ = [
    "FRAGMENT_SIZE",
    "JSON_OBJECT_SCHEMA",
    "Answer",
    "fragments",
    "json_text",
    "structured_answer",
    "structured_document",
]

Answer = Literal["valid", "cut", "invalid"]

#: The longest fragment (rule 3): about a token or two.
FRAGMENT_SIZE = 6

#: What a ``json_object`` request (no schema) is answered with (rule 1).
JSON_OBJECT_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "answer": {"type": "string"},
        "city": {"type": "string", "enum": ["Zürich", "東京"]},
        "temperature": {"type": "number"},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
        "sunny": {"type": "boolean"},
    },
    "required": ["answer", "city", "temperature", "tags", "sunny"],
    "additionalProperties": False,
}


def structured_document(output: OutputSchema) -> Any:
    """The valid document for ``output`` (rule 1).

    Raises:
        UnsupportedSchema: the schema asks for what the generator cannot promise.
    """
    return document_for_schema(output.schema if output.schema is not None else JSON_OBJECT_SCHEMA)


def structured_answer(output: OutputSchema, answer: Answer) -> tuple[str, ...]:
    """The fragments of the ``answer`` to a request asking for ``output`` (rules 1 to 3).

    Raises:
        UnsupportedSchema: the schema asks for what the generator cannot promise.
    """
    document = structured_document(output)
    valid = fragments(json_text(document))
    if answer == "valid":
        return valid
    if answer == "cut":
        return valid[: max(1, len(valid) // 2)]
    if output.schema is None:
        return fragments(json_text([document]))
    required = output.schema.get("required")
    if isinstance(document, dict) and isinstance(required, list) and required:
        document = {k: v for k, v in document.items() if k != required[0]}
        return fragments(json_text(document))
    return fragments(json_text(document)[:-1])


def json_text(document: Any) -> str:
    """``document`` as a model writes it (rule 2)."""
    text = json.dumps(document, ensure_ascii=False)
    # Outside the BMP only strings hold characters, so escaping them is safe.
    return "".join(c if ord(c) < 0x10000 else json.dumps(c)[1:-1] for c in text)


def _forced_cuts(text: str) -> set[int]:
    """The positions rule 3 cuts at: inside keys, escapes and surrogate pairs."""
    cuts: set[int] = set()
    position, end = 0, len(text)
    while position < end:
        if text[position] != '"':
            position += 1
            continue
        start = position
        position += 1
        while position < end and text[position] != '"':
            if text[position] != "\\":
                position += 1
                continue
            cuts.add(position + 1)  # after the backslash
            if text[position + 1 : position + 2] == "u":
                cuts.add(position + 4)  # inside the hex digits
                if text[position + 6 : position + 8] == "\\u":
                    cuts.add(position + 6)  # between two escapes (a surrogate pair)
                position += 6
            else:
                position += 2
        closing = position
        position += 1
        look = position
        while look < end and text[look] == " ":
            look += 1
        if text[look : look + 1] == ":" and closing - start > 2:
            cuts.add(start + 2)  # inside the key
    return cuts


def fragments(text: str, size: int = FRAGMENT_SIZE) -> tuple[str, ...]:
    """``text`` cut as rule 3 says; joined, the fragments are ``text`` (rule 4)."""
    pieces: list[str] = []
    position = 0
    for cut in [*sorted(_forced_cuts(text)), len(text)]:
        while cut - position > size:
            pieces.append(text[position : position + size])
            position += size
        if cut > position:
            pieces.append(text[position:cut])
            position = cut
    return tuple(pieces)

"""One table of error shapes, read the same way over HTTP and inside a stream.

Each row is a decoded JSON payload and the (message, type, code, param) every
path must find in it: ``parse_error_body`` on the payload as an HTTP error body,
an ``event: error`` with the payload as data, and (for objects that are error
chunks) a ``data:`` chunk.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import chunkwise
from chunkwise import StreamError
from chunkwise._http import parse_error_body

Fields = tuple[str, str | None, int | str | None, str | None]

SHAPES: list[tuple[str, Any, Fields]] = [
    (
        "openai",
        {"error": {"message": "m", "type": "t", "code": "c", "param": "p"}},
        ("m", "t", "c", "p"),
    ),
    ("int code", {"error": {"message": "m", "code": 429}}, ("m", None, 429, None)),
    ("error string", {"error": "upstream timed out"}, ("upstream timed out", None, None, None)),
    (
        "bare object (vLLM)",
        {"object": "error", "message": "no such model", "type": "NotFoundError", "code": 404},
        ("no such model", "NotFoundError", 404, None),
    ),
    (
        "object message",
        {"error": {"message": {"a": "\u00e9", "b": [1]}, "code": "x"}},
        ('{"a":"\u00e9","b":[1]}', None, "x", None),
    ),
    ("no message", {"error": {"code": 500}}, ('{"code":500}', None, 500, None)),
    (
        "non-string type and param",
        {"error": {"message": "m", "type": 3, "param": ["p"], "code": 1.5}},
        ("m", None, None, None),
    ),
    ("msg", {"msg": "bad field"}, ("bad field", None, None, None)),
    ("plain string", "overloaded", ("overloaded", None, None, None)),
    # The three shapes the two old rule sets disagreed on:
    ("detail string (FastAPI)", {"detail": "Not Found"}, ("Not Found", None, None, None)),
    (
        "detail list (FastAPI validation)",
        {"detail": [{"loc": ["body", "model"], "msg": "required"}]},
        ('[{"loc":["body","model"],"msg":"required"}]', None, None, None),
    ),
    (
        "gemini list",
        [{"error": {"code": 400, "message": "API key not valid", "status": "INVALID_ARGUMENT"}}],
        ("API key not valid", None, 400, None),
    ),
    ("bool code", {"error": {"message": "m", "code": True}}, ("m", None, None, None)),
]

IDS = [row[0] for row in SHAPES]


def _fields(error: object) -> Fields:
    assert isinstance(error, StreamError)
    return (error.message, error.type, error.code, error.param)


def _stream_error(data: bytes) -> object:
    parser = chunkwise.ChatStreamParser()
    parser.feed(data)
    parser.end()
    return parser.result.error


@pytest.mark.parametrize(("payload", "expected"), [row[1:] for row in SHAPES], ids=IDS)
def test_http_error_body(payload: Any, expected: Fields) -> None:
    assert _fields(parse_error_body(json.dumps(payload).encode())) == expected


@pytest.mark.parametrize(("payload", "expected"), [row[1:] for row in SHAPES], ids=IDS)
def test_error_event(payload: Any, expected: Fields) -> None:
    data = b"event: error\ndata: " + json.dumps(payload).encode() + b"\n\n"
    assert _fields(_stream_error(data)) == expected


CHUNK_SHAPES = [
    row
    for row in SHAPES
    if isinstance(row[1], dict) and ("error" in row[1] or row[1].get("object") == "error")
]


@pytest.mark.parametrize(
    ("payload", "expected"), [row[1:] for row in CHUNK_SHAPES], ids=[r[0] for r in CHUNK_SHAPES]
)
def test_error_chunk(payload: Any, expected: Fields) -> None:
    data = b"data: " + json.dumps(payload).encode() + b"\n\n"
    assert _fields(_stream_error(data)) == expected


@pytest.mark.parametrize(("payload", "expected"), [row[1:] for row in SHAPES], ids=IDS)
def test_body_is_the_error_object(payload: Any, expected: Fields) -> None:
    error = parse_error_body(json.dumps(payload).encode())
    assert error is not None
    if isinstance(payload, list):
        payload = payload[0]
    if isinstance(payload, dict) and isinstance(payload.get("error"), dict):
        payload = payload["error"]
    assert error.body == (payload if isinstance(payload, dict) else None)


@pytest.mark.parametrize(
    "body", [b"", b"  \r\n", b"<h1>Bad Gateway</h1>", b"\xff\xfe\x00", b"[" * 100_000]
)
def test_http_body_that_is_not_json_has_no_error(body: bytes) -> None:
    assert parse_error_body(body) is None


def test_error_event_that_is_not_json_is_its_text() -> None:
    assert _fields(_stream_error(b"event: error\ndata: boom\n\n")) == ("boom", None, None, None)

"""One table of error shapes, read the same way over HTTP and inside a stream.

Each row is a decoded JSON payload and the (message, type, code, param) every
path must find in it: ``parse_error_body`` on the payload as an HTTP error body,
an ``event: error`` with the payload as data, and (for objects that are error
chunks) a ``data:`` chunk.
"""

from __future__ import annotations

import copy
import json
import pickle
from typing import Any

import pytest

import chunkwise
from chunkwise import StreamError
from chunkwise._net.http import parse_error_body

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
    parser = chunkwise.chat.Parser()
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


# -- result.error answers the same questions whatever went wrong ------------------------

CHAT_HEAD = b'data: {"choices": [{"index": 0, "delta": {"content": "kept"}}]}\n\n'
RESPONSE_HEAD = (
    b'data: {"type": "response.output_item.added", "output_index": 0, '
    b'"item": {"type": "message", "id": "m"}}\n\n'
    b'data: {"type": "response.output_text.delta", "output_index": 0, '
    b'"content_index": 0, "delta": "kept"}\n\n'
)

#: Every way a stream can fail, each with the (error class, type, code) its
#: ``result.error`` must report; the message is never empty.
FAILURES: dict[str, tuple[str, bytes, str, str | None, int | str | None]] = {
    "chat: error chunk": (
        "chat",
        b'data: {"error": {"message": "m", "type": "server_error", "code": 502}}\n\n',
        "StreamError",
        "server_error",
        502,
    ),
    "chat: finish_reason error": (
        "chat",
        b'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "error"}]}\n\n',
        "StreamError",
        None,
        None,
    ),
    "chat: invalid JSON": ("chat", b"data: {not json\n\n", "InvalidChunk", None, None),
    "chat: not an object": ("chat", b"data: [1]\n\n", "InvalidChunk", None, None),
    "chat: event too large": (
        "chat",
        b"data: " + b"x" * 5000 + b"\n\n",
        "EventTooLarge",
        None,
        None,
    ),
    "responses: error event": (
        "responses",
        b'data: {"type": "error", "code": "rate_limit", "message": "slow down"}\n\n',
        "StreamError",
        None,
        "rate_limit",
    ),
    "responses: failed without error": (
        "responses",
        b'data: {"type": "response.failed", "response": {"status": "failed"}}\n\n',
        "StreamError",
        None,
        None,
    ),
    "responses: invalid JSON": ("responses", b"data: {not json\n\n", "InvalidChunk", None, None),
    "responses: event too large": (
        "responses",
        b"data: " + b"x" * 5000 + b"\n\n",
        "EventTooLarge",
        None,
        None,
    ),
}


@pytest.mark.parametrize("name", FAILURES)
def test_every_error_in_a_result_has_message_type_and_code(name: str) -> None:
    api, tail, cls, kind, code = FAILURES[name]
    body = (CHAT_HEAD if api == "chat" else RESPONSE_HEAD) + tail

    def parse(reads: list[bytes]) -> tuple[list[chunkwise.Event], Any]:
        parser: Any = (chunkwise.chat.Parser if api == "chat" else chunkwise.responses.Parser)(
            max_event_size=1000
        )
        events = [e for read in reads for e in parser.feed(read)]
        return events + parser.end(), parser.result

    # The body whole: that a split changes nothing is proven once, for every
    # API, by tests/sansio/test_split_invariance.py.
    _, result = parse([body])
    error = result.error
    assert result.status == "failed"
    assert type(error).__name__ == cls
    assert isinstance(error.message, str) and error.message
    assert (error.type, error.code) == (kind, code)
    assert "kept" in (result.content if api == "chat" else result.output_text)


def test_message_type_and_code_survive_a_copy_and_compare_by_value() -> None:
    error = chunkwise.errors.InvalidChunk("event data is not valid JSON", "{not")
    for twin in (copy.deepcopy(error), pickle.loads(pickle.dumps(error))):
        assert twin == error
        assert (twin.message, twin.type, twin.code, twin.data) == (
            "event data is not valid JSON",
            None,
            None,
            "{not",
        )
    server = StreamError("m", type="t", code=5)
    assert (server.message, server.type, server.code) == ("m", "t", 5)
    assert pickle.loads(pickle.dumps(server)) == server

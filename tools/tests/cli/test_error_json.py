"""The JSON of an error (``chunkwise inspect --json``, ``chat --json``) keeps its message,
type and code, whatever went wrong.

(Moved from the library's ``tests/sansio/test_error_payloads.py``, which checks
the errors themselves.)
"""

from __future__ import annotations

from typing import Any

import pytest

import chunkwise
from chunkwise_tools._convert import exception_to_json

CHAT_HEAD = b'data: {"choices": [{"index": 0, "delta": {"content": "kept"}}]}\n\n'
RESPONSE_HEAD = (
    b'data: {"type": "response.output_item.added", "output_index": 0, '
    b'"item": {"type": "message", "id": "m"}}\n\n'
)

#: name: (api, body, error type, error code)
FAILURES: dict[str, tuple[str, bytes, str | None, int | str | None]] = {
    "chat: error chunk": (
        "chat",
        CHAT_HEAD + b'data: {"error": {"message": "m", "type": "server_error", "code": 500}}\n\n',
        "server_error",
        500,
    ),
    "chat: invalid JSON": ("chat", CHAT_HEAD + b"data: {not json\n\n", None, None),
    "chat: event too large": ("chat", CHAT_HEAD + b"data: " + b"x" * 5000 + b"\n\n", None, None),
    "responses: error event": (
        "responses",
        RESPONSE_HEAD
        + b'data: {"type": "error", "code": "rate_limit", "message": "slow down"}\n\n',
        None,
        "rate_limit",
    ),
}


@pytest.mark.parametrize("name", FAILURES)
def test_the_json_of_an_error_has_its_message_type_and_code(name: str) -> None:
    api, body, kind, code = FAILURES[name]
    parser: Any = (chunkwise.chat.Parser if api == "chat" else chunkwise.responses.Parser)(
        max_event_size=1000
    )
    parser.feed(body)
    parser.end()
    error = parser.result.error
    assert error is not None and (error.type, error.code) == (kind, code)
    document = exception_to_json(error)
    assert (document["message"], document["type"], document["code"]) == (error.message, kind, code)

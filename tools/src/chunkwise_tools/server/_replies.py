"""JSON replies of the OpenAI-compatible server: documents and OpenAI-shaped errors.

Every JSON answer of :mod:`._chat_server` and :mod:`._background` is written
here, once: ``Content-Length`` framing, ``Content-Type: application/json`` and
the request's ``x-request-id``; an error body is ``{"error": {"message",
"type", "param", "code"}}``, as OpenAI's are.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from chunkwise.testing import ResponseWriter

__all__ = ["send_error", "send_json", "send_status_error"]

# OpenAI's error type and code for the statuses a client most often meets.
_STATUS_ERRORS: Mapping[int, tuple[str, str, str | None]] = {
    400: ("Invalid request.", "invalid_request_error", None),
    401: ("Incorrect API key provided", "invalid_request_error", "invalid_api_key"),
    403: ("You are not allowed to use this model.", "invalid_request_error", None),
    404: (
        "The model does not exist or you do not have access to it.",
        "invalid_request_error",
        "model_not_found",
    ),
    429: (
        "Rate limit reached for requests. Please try again in 1s.",
        "requests",
        "rate_limit_exceeded",
    ),
    500: (
        "The server had an error while processing your request. Sorry about that!",
        "server_error",
        None,
    ),
    503: ("The engine is currently overloaded, please try again later.", "server_error", None),
}


async def send_json(
    writer: ResponseWriter,
    status: int,
    document: Any,
    request_id: str,
    headers: Sequence[tuple[str, str]] = (),
) -> None:
    """Send ``document`` as the whole JSON body of a ``status`` response."""
    data = json.dumps(document, ensure_ascii=False).encode()
    await writer.start(
        status,
        (("x-request-id", request_id), *headers),
        content_type="application/json",
        framing="content-length",
        content_length=len(data),
    )
    await writer.write(data)
    await writer.end()


async def send_error(
    writer: ResponseWriter,
    status: int,
    message: str,
    request_id: str,
    *,
    type: str | None,
    code: str | None = None,
    param: str | None = None,
    headers: Sequence[tuple[str, str]] = (),
) -> None:
    """Send an OpenAI-shaped error."""
    error = {"message": message, "type": type, "param": param, "code": code}
    await send_json(writer, status, {"error": error}, request_id, headers)


async def send_status_error(writer: ResponseWriter, status: int, request_id: str) -> None:
    """An error for ``status`` as OpenAI words it (``--status``, a 401)."""
    message, type, code = _STATUS_ERRORS.get(
        status,
        (
            "The server answered with an error." if status >= 500 else "The request was refused.",
            "server_error" if status >= 500 else "invalid_request_error",
            None,
        ),
    )
    # Tell clients how long to back off, as OpenAI does on rate limits.
    headers = (("Retry-After", "1"),) if status in (429, 503) else ()
    await send_error(writer, status, message, request_id, type=type, code=code, headers=headers)

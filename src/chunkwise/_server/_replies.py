"""JSON replies of the OpenAI-compatible server: documents and OpenAI-shaped errors.

Every JSON answer of :mod:`._chat_server` and :mod:`._background` is written
here, once: ``Content-Length`` framing, ``Content-Type: application/json`` and
the request's ``x-request-id``; an error body is ``{"error": {"message",
"type", "param", "code"}}``, as OpenAI's are.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ._responses import ResponseWriter

__all__ = ["send_error", "send_json"]


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

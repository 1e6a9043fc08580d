"""What an error status says: the typed error built from a response, and the hint it carries."""

from __future__ import annotations

import json
import re
from urllib.parse import urlsplit

import attrs

from .._core.endpoint import Endpoint
from .._core.errors import HTTPStatusError, StreamError
from .._core.headers import Headers
from .._core.payloads import parse_error_payload, parse_json
from .._core.retries import retry_after

__all__ = ["StatusHint", "http_status_error", "parse_error_body", "status_hint"]


def http_status_error(
    status_code: int,
    reason: str,
    headers: Headers,
    body: bytes,
    *,
    truncated: bool = False,
    endpoint: Endpoint | None = None,
) -> HTTPStatusError:
    """The :class:`HTTPStatusError` for a non-2xx response with this head and body.

    The one place the error is built from a response: the client raises it, and
    tools reading a recorded response show the same.  ``body`` is used as given
    (already cut and redacted).  With the ``endpoint``, the error also says what
    may fix it (:func:`status_hint`).
    """
    hint = StatusHint() if endpoint is None else status_hint(status_code, endpoint)
    return HTTPStatusError(
        status_code,
        reason=reason,
        error=parse_error_body(body),
        body=body,
        request_id=headers.get("x-request-id"),
        headers=headers,
        retry_after=retry_after(headers),
        truncated=truncated,
        hint=hint.text,
        api_key_sent=hint.api_key_sent,
        suggested_base_url=hint.suggested_base_url,
    )


@attrs.frozen
class StatusHint:
    """What an error status suggests about the request (see :func:`status_hint`)."""

    #: One sentence for the error's message, or ``None``.
    text: str | None = None
    #: Whether the request carried an API key at all (``None``: not known).
    api_key_sent: bool | None = None
    #: For a 404: the base URL with a version segment added, or ``None``.
    suggested_base_url: str | None = None


# A path segment such as v1, v2, v1beta: the API version most servers expect.
_VERSION_SEGMENT_RE = re.compile(r"(?:^|/)v\d+[a-z0-9]*(?:/|$)")
# The headers an API key travels in: OpenAI's, Azure's, and many relays'.
_KEY_HEADERS = frozenset({"authorization", "api-key", "x-api-key"})


def status_hint(status_code: int, endpoint: Endpoint) -> StatusHint:
    """What a newcomer can act on, for an error status from ``endpoint``:

    - 401 says whether a key was sent at all; 403 too, when none was;
    - 404 from a base URL with no version segment (``/v1``, ``/v2beta``...)
      asks "did you mean ``<base>/v1``?": OpenAI-compatible servers almost
      all serve under one, and the base URL is used as given.

    Built from the endpoint's settings only: never a header value or the key.
    """
    key_sent = endpoint.api_key is not None or any(
        name.lower() in _KEY_HEADERS for name, _ in endpoint.headers
    )
    text = None
    suggested = None
    if status_code in (401, 403) and not key_sent:
        text = "no API key was sent: the endpoint has no api_key"
    elif status_code == 401:
        text = "an API key was sent, and the server did not accept it"
    elif status_code == 404 and not _VERSION_SEGMENT_RE.search(urlsplit(endpoint.base_url).path):
        suggested = f"{endpoint.base_url}/v1"
        text = (
            f"did you mean {suggested}? The base URL has no version segment such as /v1, "
            "and chunkwise uses it as given"
        )
    return StatusHint(text=text, api_key_sent=key_sent, suggested_base_url=suggested)


def parse_error_body(body: bytes) -> StreamError | None:
    """The server's error in an HTTP error body, or ``None`` when the body is not JSON.

    Read as errors inside a stream are (:func:`~chunkwise._core.payloads.parse_error_payload`).
    """
    try:
        payload = parse_json(body.decode(json.detect_encoding(body)))
    except ValueError:  # UnicodeDecodeError and JSONDecodeError included
        return None
    return parse_error_payload(payload)

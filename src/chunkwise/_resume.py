"""Background Responses: resuming a lost stream, polling, attaching, cancelling.

Theory of operation
-------------------
A Responses request with ``"background": true`` runs on the server whatever
happens to its connection, and the server keeps its events:
``GET /responses/{id}?stream=true&starting_after=N`` streams them again from
any sequence number, ``GET /responses/{id}`` returns the response object as
it stands, ``POST /responses/{id}/cancel`` stops it.

:class:`Resumer` belongs to one stream (:mod:`chunkwise._stream`).  When the
connection is lost before the terminal event, :meth:`Resumer.resume` gives
what comes next: a new :class:`~chunkwise._net.http.HTTPResponse` streaming the
events after the last sequence number seen (the parser told to drop what it
already has), or the stream's final events (ended from a polled response, or
with an anomaly saying why it could not go on).

Rules
-----
1. Only a stream the server keeps is resumed (``"background": true``, or
   attached to with :class:`Attach`), and only once the response id and a
   sequence number were seen.
2. The endpoint's :class:`~chunkwise.Retries` decide how patiently: each
   resumption's request is retried as any request is; a resumption that
   brought no new event before breaking again is a *miss*, waited for with the
   backoff; after ``max_retries`` misses in a row the stream is ended from a poll.
3. A refusal to stream again (a 4xx other than 408, 409 and 429, or a 2xx that
   is not an event stream) is not retried: ``GET /responses/{id}`` is polled
   until its status is terminal, waiting the server's ``Retry-After``, else the
   backoff (capped at ``max_delay``), for as long as the caller's cancel scope
   allows.  The stream ends from the polled response, with an ``events not
   seen`` anomaly; that ending counts as one resumption (``result.resumes``).
4. A resumption or poll that fails for good ends the stream as it would have
   ended without resuming, with a ``resume failed`` anomaly saying why.
5. Every resumption and every refusal is logged (INFO, ``chunkwise``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Protocol
from urllib.parse import quote

import attrs
import trio

from ._core.checks import non_empty_str, non_negative_int
from ._core.endpoint import Endpoint
from ._core.errors import ChunkwiseError, HTTPStatusError, UnexpectedContentType
from ._core.events import Event
from ._core.results import TERMINAL_STATUSES, Anomaly
from ._core.retries import backoff, retry_after, retryable_status
from ._net.http import HTTPResponse, read_json, send_http_request
from ._net.http11 import Connection
from ._net.pool import ConnectionPool

__all__ = ["Attach", "Resumable", "Resumer", "cancel", "stored_path", "stream_path"]

_log = logging.getLogger("chunkwise")

_RESPONSE_ID = non_empty_str.raising(TypeError)


def stored_path(response_id: str, suffix: str = "") -> str:
    """``/responses/{id}`` (plus ``suffix``), the id quoted for a URL path."""
    return f"/responses/{quote(response_id, safe='')}{suffix}"


def stream_path(response_id: str, starting_after: int | None) -> str:
    """The ``GET`` that streams a stored response's events after ``starting_after``, or all."""
    query = "" if starting_after is None else f"&starting_after={starting_after}"
    return stored_path(response_id, f"?stream=true{query}")


@attrs.frozen
class Attach:
    """Streaming an existing background response: its events after ``starting_after``, or all."""

    response_id: str = attrs.field(validator=_RESPONSE_ID)
    starting_after: int | None = attrs.field(default=None, validator=non_negative_int.or_none())

    @property
    def path(self) -> str:
        """The ``GET`` that streams the events."""
        return stream_path(self.response_id, self.starting_after)


class Resumable(Protocol):
    """What :class:`Resumer` needs of a stream's parser (a Responses parser's methods)."""

    def resume_point(self) -> tuple[str, int] | None: ...

    def resume(self) -> None: ...

    def end_from_response(self, response: Mapping[str, Any]) -> list[Event]: ...

    def note_anomaly(self, anomaly: Anomaly) -> list[Event]: ...

    def start_after(self, sequence_number: int) -> None: ...


class Resumer:
    """What one background stream does when its connection is lost (the module's rules)."""

    __slots__ = ("_after", "_endpoint", "_misses", "_parser", "_pool")

    def __init__(
        self,
        endpoint: Endpoint,
        parser: Resumable,
        pool: ConnectionPool[Connection] | None = None,
    ) -> None:
        self._endpoint = endpoint
        self._parser = parser
        self._pool = pool
        self._after: int | None = None  # where the last resumption started
        self._misses = 0  # resumptions in a row that brought nothing new (rule 2)

    @classmethod
    def for_stream(
        cls,
        endpoint: Endpoint,
        parser: Resumable,
        request: Mapping[str, Any],
        attach: Attach | None,
        pool: ConnectionPool[Connection] | None,
    ) -> Resumer | None:
        """The resumer of a stream the server keeps (rule 1), else None.

        An attached stream's parser is told where it starts.
        """
        if attach is None:
            if request.get("background") is not True:
                return None
        elif attach.starting_after is not None:
            parser.start_after(attach.starting_after)  # nothing was fed yet
        return cls(endpoint, parser, pool)

    async def resume(self, failure: ChunkwiseError | None) -> HTTPResponse | list[Event]:
        """After ``failure`` (None: the body ended early): a new response, or the final events."""
        point = self._parser.resume_point()
        if point is None:
            return self._give_up("no response id and sequence number to resume from yet")
        response_id, after = point
        retries = self._endpoint.retries
        self._misses = self._misses + 1 if after == self._after else 0
        self._after = after
        if self._misses > retries.max_retries:
            _log.info("response %s: %d misses in a row; polling", response_id, self._misses)
            return await self.poll(response_id)
        if self._misses:
            await trio.sleep(backoff(retries, self._misses - 1))
        why = "the body ended" if failure is None else str(failure)
        _log.info("resuming response %s after sequence number %d: %s", response_id, after, why)
        try:
            response = await self._get(stream_path(response_id, after))
        except (HTTPStatusError, UnexpectedContentType) as exc:
            if isinstance(exc, HTTPStatusError) and (
                not 400 <= exc.status_code < 500
                or retryable_status(exc.status_code, exc.headers or {})
            ):
                return self._give_up(str(exc))  # retried already: not a refusal (rule 3)
            _log.info("response %s cannot be streamed again (%s); polling", response_id, exc)
            return await self.poll(response_id)
        except ChunkwiseError as exc:
            return self._give_up(str(exc))
        self._parser.resume()
        return response

    async def poll(self, response_id: str) -> list[Event]:
        """Rule 3: ``GET /responses/{id}`` until a terminal status; the stream's final events."""
        retries = self._endpoint.retries
        polls = 0
        while True:
            try:
                response = await self._get(stored_path(response_id), expect="application/json")
                headers = response.headers
                document = await read_json(response)
            except ChunkwiseError as exc:
                return self._give_up(f"polling failed: {exc}")
            if document.get("status") in TERMINAL_STATUSES:
                return self._parser.end_from_response(document)
            asked = retry_after(headers)
            wait = asked if asked is not None and asked > 0 else backoff(retries, polls)
            polls += 1
            await trio.sleep(min(wait, retries.max_retry_after))

    async def _get(self, path: str, expect: str = "text/event-stream") -> HTTPResponse:
        return await send_http_request(
            self._endpoint, b"", path=path, pool=self._pool, method="GET", expect=expect
        )

    def _give_up(self, why: str) -> list[Event]:
        _log.info("a background stream cannot go on: %s", why)
        return self._parser.note_anomaly(Anomaly(kind="resume failed", detail=why))


async def cancel(
    endpoint: Endpoint, response_id: str, pool: ConnectionPool[Connection] | None = None
) -> dict[str, Any]:
    """``POST /responses/{id}/cancel``: the response object the server answers with."""
    _RESPONSE_ID.check("response_id", response_id)
    path = stored_path(response_id, "/cancel")
    response = await send_http_request(
        endpoint, b"", path=path, pool=pool, method="POST", expect="application/json"
    )
    return await read_json(response)

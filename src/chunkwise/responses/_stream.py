"""The Responses API over trio: :mod:`chunkwise._stream` plus background responses.

Imported on first use by :mod:`chunkwise.responses`, so that its sans-IO half
never imports trio.  Resuming, attaching and cancelling are :mod:`chunkwise._resume`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any

import trio

from .._core.endpoint import Endpoint
from .._core.sse import DEFAULT_MAX_EVENT_SIZE
from .._net.http11 import Connection
from .._net.pool import ConnectionPool
from .._resume import Attach
from .._resume import cancel as _cancel
from .._stream import Api, ClientApi
from .._stream import Stream as _Stream
from .._stream import complete as _complete
from .._stream import open_stream as _open_stream
from .parser import Parser
from .results import Result

__all__ = [
    "API",
    "ClientResponses",
    "Stream",
    "attach",
    "cancel",
    "complete",
    "open_response_stream",
    "open_stream",
]


class Stream(_Stream[Result]):
    """A Responses API answer being streamed; created by :func:`open_stream` or :func:`attach`.

    Subscribers receive :data:`chunkwise.responses.Event` events (text is the
    ``"choice"`` family, function calls the ``"tool_call"`` family); the result
    is a :class:`chunkwise.responses.Result`.
    """

    __slots__ = ()


def _parser(request: Mapping[str, Any], max_event_size: int) -> Parser:
    text = request.get("text")
    return Parser(
        tools=request.get("tools"),
        text_format=text.get("format") if isinstance(text, Mapping) else None,
        max_output_tokens=request.get("max_output_tokens"),
        max_event_size=max_event_size,
    )


API: Api[Stream] = Api("responses", "/responses", _parser, Stream, resumable=True)


def open_stream(
    endpoint: Endpoint,
    request: Mapping[str, Any],
    *,
    max_event_size: int = DEFAULT_MAX_EVENT_SIZE,
    transport: trio.abc.Stream | None = None,
) -> AbstractAsyncContextManager[Stream]:
    """Send a streamed Responses API request (``POST /responses``) and read it in a nursery.

    ``request`` is the JSON body you would send to ``/responses``;
    ``"stream": true`` is set for you.  The request's ``tools``,
    ``text.format`` and ``max_output_tokens`` are checked against the answer.
    Everything else is as :func:`chunkwise.chat.open_stream`.

    With ``"background": true`` in the request, a connection lost before the
    terminal event is resumed after the last event received (or the stream
    ends from a polled response): see :doc:`/reliability`.  Leaving the block
    early stops reading, not the server's work: :func:`cancel` does that.

    Raises:
        InvalidRequest: ``request`` is not a mapping or holds a value JSON
            cannot encode (before anything is sent).
        HTTPStatusError: a non-2xx response (before the block is entered).
        UnexpectedContentType: a 2xx response that is not an event stream.
        TransportError: connecting failed (:class:`~chunkwise.ConnectTimeout`...).
        TypeError: the call was awaited, or used with ``with``: it is an
            ``async with``.
        RuntimeError: not called from a trio task (e.g. from asyncio).
    """
    return _open_stream(API, endpoint, request, max_event_size=max_event_size, transport=transport)


def attach(
    endpoint: Endpoint,
    response_id: str,
    starting_after: int | None = None,
    *,
    max_event_size: int = DEFAULT_MAX_EVENT_SIZE,
    transport: trio.abc.Stream | None = None,
) -> AbstractAsyncContextManager[Stream]:
    """Stream an existing background response (``GET /responses/{id}?stream=true``).

    Its events after ``starting_after`` (a sequence number), or all of them;
    a lost connection is resumed as for :func:`open_stream`.  Leaving the
    block early detaches; it does not cancel.

    Raises:
        TypeError: ``response_id`` is not a non-empty string.
        ValueError: a negative ``starting_after``.
        HTTPStatusError: e.g. 404 for a response the server does not know.
        TransportError: connecting failed.
    """
    return _open_stream(
        API,
        endpoint,
        {},
        max_event_size=max_event_size,
        transport=transport,
        attach=Attach(response_id, starting_after),
    )


async def complete(
    endpoint: Endpoint,
    request: Mapping[str, Any],
    *,
    max_event_size: int = DEFAULT_MAX_EVENT_SIZE,
) -> Result:
    """Stream one Responses API answer to its end and return its :class:`Result`.

    As :func:`chunkwise.chat.complete`: check ``result.status``.
    """
    return await _complete(API, endpoint, request, max_event_size=max_event_size)


async def cancel(endpoint: Endpoint, response_id: str) -> dict[str, Any]:
    """Cancel a background response on the server (``POST /responses/{id}/cancel``).

    Returns the response object the server answers with (its ``status`` is
    ``"cancelled"``).  Streams of it end without a terminal event from the
    server: a resumed one ends from the polled, cancelled response.

    Raises:
        HTTPStatusError: e.g. 400 for a response that already finished, 404
            for one the server does not know (any more).
        TransportError: connecting failed.
        TypeError: ``response_id`` is not a non-empty string.
    """
    return await _cancel(endpoint, response_id)


def _attach_to(
    request: Mapping[str, Any] | None, response_id: str | None, starting_after: int | None
) -> Attach | None:
    # The round-3 signature (chunkwise._core.names.RENAMED): a request or a response id.
    if response_id is None:
        if request is None:
            raise TypeError("open_response_stream() needs a request, or a response_id to attach to")
        if starting_after is not None:
            raise TypeError("starting_after goes with response_id (attaching to a response)")
        return None
    if request is not None:
        raise TypeError("give open_response_stream() a request or a response_id, not both")
    return Attach(response_id, starting_after)


def open_response_stream(
    endpoint: Endpoint,
    request: Mapping[str, Any] | None = None,
    *,
    response_id: str | None = None,
    starting_after: int | None = None,
    max_event_size: int = DEFAULT_MAX_EVENT_SIZE,
    transport: trio.abc.Stream | None = None,
    pool: ConnectionPool[Connection] | None = None,
) -> AbstractAsyncContextManager[Stream]:
    """The round-3 ``open_response_stream``: :func:`open_stream`, or :func:`attach` to an id."""
    return _open_stream(
        API,
        endpoint,
        {} if request is None else request,
        max_event_size=max_event_size,
        transport=transport,
        pool=pool,
        attach=_attach_to(request, response_id, starting_after),
    )


class ClientResponses(ClientApi[Stream, Result]):
    """``client.responses``: this module's functions on the client's connections (polls too)."""

    __slots__ = ()

    def attach(
        self,
        response_id: str,
        starting_after: int | None = None,
        *,
        max_event_size: int = DEFAULT_MAX_EVENT_SIZE,
    ) -> AbstractAsyncContextManager[Stream]:
        """:func:`chunkwise.responses.attach` on the client's connections."""
        return _open_stream(
            API,
            self._endpoint,
            {},
            max_event_size=max_event_size,
            pool=self._pool,
            attach=Attach(response_id, starting_after),
        )

    async def cancel(self, response_id: str) -> dict[str, Any]:
        """:func:`chunkwise.responses.cancel` on the client's connections."""
        return await _cancel(self._endpoint, response_id, self._pool)

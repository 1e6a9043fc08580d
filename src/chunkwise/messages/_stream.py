"""Anthropic Messages over trio: :mod:`chunkwise._stream` with their path, key header and parser.

Imported on first use by :mod:`chunkwise.messages`, so that its sans-IO half never imports trio.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any

import trio

from .._core.endpoint import Endpoint
from .._core.sse import DEFAULT_MAX_EVENT_SIZE
from .._stream import Api
from .._stream import Stream as _Stream
from .._stream import complete as _complete
from .._stream import open_stream as _open_stream
from .parser import Parser
from .results import Result

__all__ = ["API", "Stream", "complete", "open_stream"]


class Stream(_Stream[Result]):
    """A Messages API answer being streamed; created by :func:`open_stream`.

    Subscribers receive :data:`chunkwise.messages.Event` events (blocks' text
    and thinking are the ``"choice"`` family, ``tool_use`` blocks the
    ``"tool_call"`` family); the result is a :class:`chunkwise.messages.Result`.
    """

    __slots__ = ()


def _parser(request: Mapping[str, Any], max_event_size: int) -> Parser:
    return Parser(
        tools=request.get("tools"),
        output_format=request.get("output_format"),
        max_event_size=max_event_size,
    )


API: Api[Stream] = Api("messages", "/messages", _parser, Stream, auth="anthropic")


def open_stream(
    endpoint: Endpoint,
    request: Mapping[str, Any],
    *,
    max_event_size: int = DEFAULT_MAX_EVENT_SIZE,
    transport: trio.abc.Stream | None = None,
) -> AbstractAsyncContextManager[Stream]:
    """Send a streamed Messages API request (``POST /messages``) and read it in a nursery.

    ``request`` is the JSON body you would send to ``/v1/messages``;
    ``"stream": true`` is set for you.  The endpoint's base URL ends with
    ``/v1`` (``Endpoint.from_env(api="messages")`` reads
    ``ANTHROPIC_BASE_URL`` so); the key is sent as ``x-api-key``, with
    ``anthropic-version: 2023-06-01`` unless the endpoint's headers set one.
    The request's ``tools`` (their ``input_schema``) and ``output_format``
    are checked against the answer.  Everything else is as
    :func:`chunkwise.chat.open_stream`.

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


async def complete(
    endpoint: Endpoint,
    request: Mapping[str, Any],
    *,
    max_event_size: int = DEFAULT_MAX_EVENT_SIZE,
) -> Result:
    """Stream one message to its end and return its :class:`~chunkwise.messages.Result`.

    As :func:`chunkwise.chat.complete`: check ``result.status``.
    """
    return await _complete(API, endpoint, request, max_event_size=max_event_size)

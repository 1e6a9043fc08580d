"""Chat completions over trio: :mod:`chunkwise._stream` with the chat path, parser and result.

Imported on first use by :mod:`chunkwise.chat`, so that its sans-IO half never imports trio.
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
    """A chat completion being streamed; created by :func:`open_stream`.

    Subscribers receive :data:`chunkwise.chat.Event` events; the result is a
    :class:`chunkwise.chat.Result`.
    """

    __slots__ = ()


def _parser(request: Mapping[str, Any], max_event_size: int) -> Parser:
    return Parser(
        # A legacy request's functions validate its function_call (accumulator rule 5).
        tools=request.get("tools") or request.get("functions"),
        response_format=request.get("response_format"),
        max_event_size=max_event_size,
    )


API: Api[Stream] = Api("chat", "/chat/completions", _parser, Stream)


def open_stream(
    endpoint: Endpoint,
    request: Mapping[str, Any],
    *,
    max_event_size: int = DEFAULT_MAX_EVENT_SIZE,
    transport: trio.abc.Stream | None = None,
) -> AbstractAsyncContextManager[Stream]:
    """Send a streamed chat-completions request and read it in a nursery (:doc:`/streaming`).

    ``request`` is the JSON body you would send to ``/chat/completions``;
    ``"stream": true`` is set for you.  The request's ``tools`` validate
    tool-call arguments.  Timeouts come from ``endpoint.timeouts``; bound the
    whole stream with your own cancel scope.

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
    """Stream one chat completion to its end and return its :class:`~chunkwise.chat.Result`.

    Check ``result.status``: an incomplete or failed stream is returned, not
    raised, so its partial output stays available.
    """
    return await _complete(API, endpoint, request, max_event_size=max_event_size)

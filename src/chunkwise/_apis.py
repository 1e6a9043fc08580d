"""Layer 5: the entry points of each API, on the one stream implementation.

Each API is an :class:`~chunkwise._stream.Api` value (the path to post to, the
sans-IO parser for a request, the stream class to hand out) and a pair of
public functions, ``open_{name}_stream`` and ``complete_{name}``, over
:func:`~chunkwise._stream.open_stream` and :func:`~chunkwise._stream.complete`.
Nothing else differs between the APIs in the trio layer; an API added later
adds its value and its two functions here.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any

import trio

from ._chat import ChatResult, ChatStreamParser
from ._completions import CompletionResult, CompletionStreamParser
from ._endpoint import Endpoint
from ._parser import StreamParser
from ._responses import ResponseResult, ResponseStreamParser
from ._resume import Attach, cancel
from ._sse import DEFAULT_MAX_EVENT_SIZE
from ._stream import Api, ChatStream, CompletionStream, ResponseStream, complete, open_stream

__all__ = [
    "CHAT",
    "COMPLETIONS",
    "RESPONSES",
    "attach_to",
    "cancel_response",
    "complete_chat",
    "complete_completion",
    "complete_response",
    "open_chat_stream",
    "open_completion_stream",
    "open_response_stream",
]


def _chat_parser(request: Mapping[str, Any], max_event_size: int) -> StreamParser[ChatResult]:
    return ChatStreamParser(
        tools=request.get("tools"),
        response_format=request.get("response_format"),
        max_event_size=max_event_size,
    )


def _response_parser(
    request: Mapping[str, Any], max_event_size: int
) -> StreamParser[ResponseResult]:
    text = request.get("text")
    return ResponseStreamParser(
        tools=request.get("tools"),
        text_format=text.get("format") if isinstance(text, Mapping) else None,
        max_output_tokens=request.get("max_output_tokens"),
        max_event_size=max_event_size,
    )


def _completion_parser(
    request: Mapping[str, Any], max_event_size: int
) -> StreamParser[CompletionResult]:
    return CompletionStreamParser(max_event_size=max_event_size)


CHAT: Api[ChatStream] = Api("chat", "/chat/completions", _chat_parser, ChatStream)
RESPONSES: Api[ResponseStream] = Api("response", "/responses", _response_parser, ResponseStream)
COMPLETIONS: Api[CompletionStream] = Api(
    "completion", "/completions", _completion_parser, CompletionStream
)


def open_chat_stream(
    endpoint: Endpoint,
    request: Mapping[str, Any],
    *,
    max_event_size: int = DEFAULT_MAX_EVENT_SIZE,
    transport: trio.abc.Stream | None = None,
) -> AbstractAsyncContextManager[ChatStream]:
    """Send a streamed chat-completions request and read it in a nursery.

    ``request`` is the JSON body you would send to ``/chat/completions``;
    ``"stream": true`` is set for you.  The request's ``tools`` validate
    tool-call arguments.  Timeouts come from ``endpoint.timeouts`` (connect
    and idle); bound the whole stream with your own cancel scope.

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
    return open_stream(CHAT, endpoint, request, max_event_size=max_event_size, transport=transport)


def attach_to(
    request: Mapping[str, Any] | None, response_id: str | None, starting_after: int | None
) -> Attach | None:
    """What ``open_response_stream`` was asked for: a new request (None) or an existing response.

    Raises:
        TypeError: both or neither of ``request`` and ``response_id``, or
            ``starting_after`` without ``response_id``.
        ValueError: a negative ``starting_after``.
    """
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
) -> AbstractAsyncContextManager[ResponseStream]:
    """Send a streamed Responses API request (``POST /responses``) and read it in a nursery.

    ``request`` is the JSON body you would send to ``/responses``;
    ``"stream": true`` is set for you.  The request's ``tools`` validate
    function-call arguments, its ``text.format`` asks for structured output,
    its ``max_output_tokens`` is checked against the usage.  Everything else
    is as :func:`open_chat_stream`: the same stream object, fan-out, retries,
    timeouts and guarantees.

    With ``"background": true`` in the request, a connection lost before the
    terminal event is resumed after the last event received (or the stream
    ends from a polled response): see :doc:`/reliability`.  Leaving the block
    early stops reading, not the server's work: :func:`cancel_response` does
    that.

    ``response_id`` instead of a request attaches to an existing background
    response (``GET /responses/{id}?stream=true``): its events after
    ``starting_after`` (a sequence number), or all of them; resumed the same
    way.

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
    attach = attach_to(request, response_id, starting_after)
    return open_stream(
        RESPONSES,
        endpoint,
        {} if request is None else request,
        max_event_size=max_event_size,
        transport=transport,
        attach=attach,
    )


def open_completion_stream(
    endpoint: Endpoint,
    request: Mapping[str, Any],
    *,
    max_event_size: int = DEFAULT_MAX_EVENT_SIZE,
    transport: trio.abc.Stream | None = None,
) -> AbstractAsyncContextManager[CompletionStream]:
    """Send a streamed legacy completions request (``POST /completions``) and read it.

    ``request`` is the JSON body you would send to ``/completions``
    (``model``, ``prompt``: a string or a list of them, ``n``, ``echo``,
    ``suffix``, ``logprobs``...); ``"stream": true`` is set for you.
    Everything else is as :func:`open_chat_stream`: the same stream object,
    fan-out, retries, timeouts, timings and guarantees.

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
    return open_stream(
        COMPLETIONS, endpoint, request, max_event_size=max_event_size, transport=transport
    )


async def complete_chat(
    endpoint: Endpoint,
    request: Mapping[str, Any],
    *,
    max_event_size: int = DEFAULT_MAX_EVENT_SIZE,
) -> ChatResult:
    """Stream one chat completion to its end and return the :class:`ChatResult`.

    Check ``result.status``: an incomplete or failed stream is returned, not
    raised, so its partial output stays available.
    """
    return await complete(CHAT, endpoint, request, max_event_size=max_event_size)


async def complete_response(
    endpoint: Endpoint,
    request: Mapping[str, Any],
    *,
    max_event_size: int = DEFAULT_MAX_EVENT_SIZE,
) -> ResponseResult:
    """Stream one Responses API answer to its end and return the :class:`ResponseResult`.

    Check ``result.status``: an incomplete or failed stream is returned, not
    raised, so its partial output stays available.
    """
    return await complete(RESPONSES, endpoint, request, max_event_size=max_event_size)


async def complete_completion(
    endpoint: Endpoint,
    request: Mapping[str, Any],
    *,
    max_event_size: int = DEFAULT_MAX_EVENT_SIZE,
) -> CompletionResult:
    """Stream one legacy completion to its end and return the :class:`CompletionResult`.

    Check ``result.status``: an incomplete or failed stream is returned, not
    raised, so its partial output stays available.
    """
    return await complete(COMPLETIONS, endpoint, request, max_event_size=max_event_size)


async def cancel_response(endpoint: Endpoint, response_id: str) -> dict[str, Any]:
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
    return await cancel(endpoint, response_id)

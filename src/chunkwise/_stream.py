"""Layer 5: one streamed chat completion as a trio resource.

Theory of operation
-------------------
:func:`open_chat_stream` opens the HTTP response (raising a typed error for a
non-2xx status before the block is entered), then owns a nursery with one
reader task.  The reader receives body bytes, feeds the sans-IO
:class:`~chunkwise.ChatStreamParser`, and publishes each read's events through
a :class:`~chunkwise._fanout.Broadcaster` to every subscriber.  Backpressure
is lossless by default: a full subscriber makes the reader wait, which stops
reads from the socket.

The reader publishes nothing until somebody listens: the first
:meth:`ChatStream.subscribe`, ``async for``, or :meth:`ChatStream.result`.  So
subscribers created right after entering the block, before the first
checkpoint, all see every event.  A subscriber created later receives the
events published after it subscribed (one created after the end receives just
the terminal event); :attr:`ChatStream.snapshot` shows what came before.

Whatever ends the stream -- ``[DONE]``, the end of the body, a broken
connection, an idle timeout, :meth:`ChatStream.cancel` -- the parser emits
exactly one terminal event, which every subscriber receives before its channel
ends.  Leaving the block closes the socket before ``__aexit__`` returns: if the
stream is still running it is cancelled; either way the block then waits for
consumer tasks started with :meth:`ChatStream.start_soon` to drain their
channels.  After an early exit each subscriber's last events go through a
delivery of its own, so a subscriber nobody reads holds up nobody, and
deliveries are given up once no consumer task is left to make room.  An
exception from the block or from one consumer task propagates as that one
exception, not wrapped in an :class:`ExceptionGroup`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import trio

from ._endpoint import Endpoint
from ._errors import ConnectionLost, IdleTimeout, RemoteProtocolError, TransportError
from ._events import Event, ResponseStarted
from ._fanout import DEFAULT_BUFFER_SIZE, Broadcaster, Family
from ._http import HTTPResponse, open_http_response
from ._parser import ChatStreamParser
from ._results import Anomaly, ChatResult, IncompleteReason
from ._sse import DEFAULT_MAX_EVENT_SIZE

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

__all__ = ["ChatStream", "complete_chat", "open_chat_stream"]


class ChatStream:
    """A chat completion being streamed; created by :func:`open_chat_stream`."""

    def __init__(self, response: HTTPResponse, parser: ChatStreamParser) -> None:
        self._response = response
        self._parser = parser
        self._broadcaster = Broadcaster()
        self._finished = trio.Event()
        self._reader_scope = trio.CancelScope()
        self._nursery: trio.Nursery | None = None
        self._iterator: trio.MemoryReceiveChannel[Event] | None = None
        self._abandoned = False  # the block was left while the stream ran
        self._consumers = 0  # consumer tasks running (start_soon)
        self._consumers_idle = trio.Event()
        self._consumers_idle.set()

    @property
    def status_code(self) -> int:
        """The HTTP status of the response."""
        return self._response.status_code

    @property
    def headers(self) -> Mapping[str, str]:
        """The HTTP response headers (case-insensitive)."""
        return self._response.headers

    @property
    def snapshot(self) -> ChatResult:
        """What the stream delivered so far (final once it ended)."""
        return self._parser.result

    @property
    def finished(self) -> bool:
        """True once the terminal event was published."""
        return self._finished.is_set()

    def subscribe(
        self,
        family: Family | None = None,
        *,
        buffer_size: int | float = DEFAULT_BUFFER_SIZE,
        lossy: bool = False,
    ) -> trio.MemoryReceiveChannel[Event]:
        """A new channel receiving every event from now on (or one family's).

        Args:
            family: ``"choice"``, ``"tool_call"`` or ``"lifecycle"`` to receive
                only that family; the terminal event reaches every subscriber.
            buffer_size: Events held for this subscriber before the reader
                waits (or, when ``lossy``, drops).
            lossy: Never hold up the stream for this subscriber: events that
                do not fit are dropped and reported by an
                :class:`~chunkwise.EventsDropped` event.

        Close the channel to unsubscribe; the other subscribers are unaffected.
        """
        return self._broadcaster.subscribe(family, buffer_size=buffer_size, lossy=lossy)

    def start_soon(
        self, async_fn: Callable[..., Awaitable[object]], *args: object, name: object = None
    ) -> None:
        """Run a consumer task in the stream's nursery.

        If it raises, the stream is cancelled, the socket closed, and the
        exception propagates out of the ``async with`` on its own.
        """
        if self._nursery is None:
            raise RuntimeError("the stream is not open")
        if not self._consumers:
            self._consumers_idle = trio.Event()
        self._consumers += 1
        self._nursery.start_soon(self._consume, async_fn, args, name=name or async_fn)

    async def _consume(self, async_fn: Callable[..., Awaitable[object]], args: Any) -> None:
        try:
            await async_fn(*args)
        finally:
            self._consumers -= 1
            if not self._consumers:
                self._consumers_idle.set()

    def cancel(self) -> None:
        """Stop reading: the stream ends ``incomplete`` (``cancelled``) and the socket closes."""
        self._reader_scope.cancel()

    async def result(self) -> ChatResult:
        """Wait for the end of the stream and return the final result."""
        self._broadcaster.has_subscribed.set()
        await self._finished.wait()
        return self._parser.result

    def __aiter__(self) -> trio.MemoryReceiveChannel[Event]:
        # Single-consumer convenience: a plain subscription, so no async
        # generator ever yields across the reader's cancel scope.
        if self._iterator is None:
            self._iterator = self.subscribe()
        return self._iterator

    # -- the reader task -------------------------------------------------------

    async def _run(self) -> None:
        parser = self._parser
        broadcaster = self._broadcaster
        reason: IncompleteReason | None = None
        problem: TransportError | None = None
        invalid: RemoteProtocolError | None = None
        try:
            with self._reader_scope:
                await broadcaster.has_subscribed.wait()
                headers = tuple(self._response.headers.items())
                await broadcaster.publish(
                    [ResponseStarted(status_code=self.status_code, headers=headers)]
                )
                while not parser.finished:
                    try:
                        data = await self._response.receive_some()
                    except IdleTimeout as exc:
                        reason, problem = IncompleteReason.IDLE_TIMEOUT, exc
                        break
                    except (ConnectionLost, TransportError) as exc:
                        reason, problem = IncompleteReason.CONNECTION_LOST, exc
                        break
                    except RemoteProtocolError as exc:
                        # Invalid body framing (e.g. a bad chunk size line) after
                        # some events: the stream fails, like a body the parser
                        # cannot interpret, and keeps what arrived before.
                        invalid = exc
                        break
                    if not data:
                        break
                    events = parser.feed(data)
                    if events:
                        await broadcaster.publish(events)
            if self._reader_scope.cancelled_caught:
                reason = IncompleteReason.CANCELLED
            # The parser is done with the socket: close it before anyone
            # learns that the stream ended.
            await self._response.aclose()
            if problem is not None:
                parser_anomaly = Anomaly(kind="transport error", detail=str(problem))
                await broadcaster.publish(parser.note_anomaly(parser_anomaly))
            final = parser.fail(invalid) if invalid is not None else parser.end(reason)
            if self._abandoned:
                # The block was left: deliver to each subscriber on its own, for
                # as long as a consumer task may still make room.
                await broadcaster.finish(final, give_up=self._consumers_idle)
            else:
                await broadcaster.publish(final)
        finally:
            if not parser.finished:
                # Cancelled from outside: record it, though nobody may listen.
                parser.end(IncompleteReason.CANCELLED)
            self._finished.set()
            broadcaster.close()


@asynccontextmanager
async def open_chat_stream(
    endpoint: Endpoint,
    request: Mapping[str, Any],
    *,
    max_event_size: int = DEFAULT_MAX_EVENT_SIZE,
    transport: trio.abc.Stream | None = None,
) -> AsyncIterator[ChatStream]:
    """Send a streamed chat-completions request and read it in a nursery.

    ``request`` is the JSON body you would send to ``/chat/completions``;
    ``"stream": true`` is set for you.  The request's ``tools`` validate
    tool-call arguments.  Timeouts come from ``endpoint.timeouts`` (connect
    and idle); bound the whole stream with your own cancel scope.

    Raises:
        HTTPStatusError: a non-2xx response (before the block is entered).
        UnexpectedContentType: a 2xx response that is not an event stream.
        TransportError: connecting failed (:class:`~chunkwise.ConnectTimeout`...).
    """
    body = json.dumps({**request, "stream": True}, ensure_ascii=False).encode()
    tools = request.get("tools")
    parser = ChatStreamParser(tools=tools, max_event_size=max_event_size)
    async with open_http_response(endpoint, body, transport=transport) as response:
        stream = ChatStream(response, parser)
        try:
            async with trio.open_nursery() as nursery:
                stream._nursery = nursery
                nursery.start_soon(stream._run, name="chunkwise reader")
                try:
                    yield stream
                except BaseException:
                    nursery.cancel_scope.cancel()
                    raise
                if not stream.finished:
                    # The caller is done with an unfinished stream.
                    stream._abandoned = True
                    stream.cancel()
        except BaseExceptionGroup as group:
            raise _single(group) from None
        finally:
            stream._nursery = None


def _single(group: BaseExceptionGroup[BaseException]) -> BaseException | BaseExceptionGroup[Any]:
    """The one real exception in ``group``, or the group when there are several.

    Cancellations caused by that exception are dropped; they are not news.
    """
    real = [exc for exc in _leaves(group) if not isinstance(exc, trio.Cancelled)]
    if len(real) == 1:
        return real[0]
    if not real:
        return next(iter(_leaves(group)))
    return group


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    out: list[BaseException] = []
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            out += _leaves(exc)
        else:
            out.append(exc)
    return out


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
    async with open_chat_stream(endpoint, request, max_event_size=max_event_size) as stream:
        return await stream.result()

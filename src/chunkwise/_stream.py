"""One streamed answer (chat, Responses API or legacy completion) as a trio resource.

Theory of operation
-------------------
Each namespace's ``open_stream`` (:func:`chunkwise.chat.open_stream`...) is
:func:`open_stream` with the API's :class:`Api`: the path to post to, the
sans-IO parser to read the body with, and the stream class to hand out.
Everything else is the same for every API.

:func:`open_stream` returns a :class:`StreamBlock`.  Its ``__aenter__`` checks
what a newcomer gets wrong before anything is sent (not running under trio:
:func:`~chunkwise._net.tasks.require_trio`; a request JSON cannot encode:
:func:`~chunkwise._net.request.encode_request`), opens the HTTP response
(raising a typed error for a non-2xx status before the block is entered), and
enters a nursery with one reader task; its ``__aexit__`` leaves them.  Awaiting
the block, or entering it with a plain ``with``, raises a :class:`TypeError`
saying to use ``async with``.

The reader receives body bytes, feeds the API's parser, and publishes each
read's events through a :class:`~chunkwise._fanout.Broadcaster`.  Backpressure
is lossless by default: a full subscriber makes the reader wait, which stops
reads from the socket.  Nothing is published until somebody listens (the first
:meth:`Stream.subscribe`, ``async for``, or :meth:`Stream.result`), so
subscribers created right after entering the block all see every event; a
later one receives the events published after it subscribed (after the end,
just the terminal event), and :attr:`Stream.snapshot` shows what came before.

Reading runs in ``_reader_scope``, which :meth:`Stream.cancel` and leaving the
block cancel.  Ending runs once, whatever stopped the reading: it closes the
socket, lets the parser produce the terminal event, enters ENDED, and hands
the rest to :meth:`Broadcaster.finish`; a cancel loses nothing the
broadcaster holds.

Each read is stamped once, by the trace hook (:class:`~chunkwise._net.trace.Timed`),
and the terminal event's result gets the final figures as its ``timings``.
The same hook feeds the endpoint's telemetry, if any, which entering ENDED
ends with the final result (:mod:`chunkwise._core.telemetry`).
With ``Timeouts(stall=...)``, from the first output on, each wait for the next
read is bounded by the last output's time plus the timeout, moved on by the
time the reader spent waiting for its own subscribers; a read without output
does not move it, and while no output is awaited (every started choice
finished, or a hosted tool runs:
:attr:`~chunkwise._core.parser.StreamParser.awaiting_output`) the wait is
bounded by the idle timeout alone; when a tool ends it counts from then.
Expiry ends the reading like an idle timeout: reason ``stalled``, the
:class:`~chunkwise.StallTimeout` as the result's ``error`` (status
``incomplete``), and a ``transport error`` anomaly.

States
------
The reader is in one :class:`StreamState` at a time; these transitions are
all there are (:attr:`Stream.finished` is ``state is ENDED``):

============ =========================================================== ==========
from         on                                                          to
============ =========================================================== ==========
OPENING      somebody listens (then ``HeadReceived`` is published)      STREAMING
STREAMING    the body stopped early, on a stream kept (rule 6)           RESUMING
RESUMING     the server gave the stream back on a new connection         STREAMING
not ENDED    the reading stopped (rule 2): socket closed, terminal event ENDED
============ =========================================================== ==========

Rules
-----
The promises of the trio layer, each tested in every cell of
``tests/test_stream_matrix.py``:

1. Leaving the ``async with`` returns promptly on every path: it never waits
   on a subscriber that no running consumer task reads.  Once the block is
   left, the only readers are the consumer tasks of :meth:`Stream.start_soon`;
   when none runs, the broadcaster is told to give up (``_nobody_reads``),
   and every other wait of the reader is in ``_reader_scope``, which leaving
   the block cancels.
2. The socket is closed before ``__aexit__`` returns, on every path, and
   before the terminal event is published: the ending phase closes it, and
   :class:`StreamBlock` closes it again on the way out.  With a
   :class:`~chunkwise.Client`, a stream that reached its clean end gives its
   connection back to the pool instead (after reading the end of the body for
   at most a second), also before the terminal event.
3. Every subscriber whose channel is open and whose consumer is still running
   receives, in order, every event published after it subscribed (lossless)
   or the drop report in their place (lossy), then exactly one terminal
   event, then :class:`trio.EndOfChannel`.  :meth:`Stream.cancel` and leaving
   the block early only end the *reading*: events already parsed are still
   delivered, so a subscriber from the start has deltas adding up to the
   text of the result in its terminal event.
4. An exception from the block or from one consumer task propagates alone,
   with its own ``__cause__``, ``__context__`` and traceback
   (:func:`~chunkwise._net.tasks.exceptions_unwrapped`).  Two at once propagate
   as an :class:`ExceptionGroup`.
5. A result never changes after it was handed out: results are frozen, and
   the parser builds a new one for each change.
6. Nothing is sent again once output has arrived (:mod:`chunkwise._core.retries`,
   rule 1), with one exception: a background Responses stream (``"background":
   true``, or attached to) whose connection is lost before its terminal event
   is resumed by :class:`~chunkwise._resume.Resumer` after the last sequence
   number, or ended from a polled response.  The parser drops any event it
   already has, and rules 1 to 5 hold across the connections (one
   :class:`HeadReceived`, one terminal event, one reading phase).
7. Before the first output, a stream that fails in a transient way is sent
   again (``Retries.before_output``; :mod:`chunkwise._core.retries`, rule 7),
   unless it came over a given ``transport`` (which cannot be opened again)
   or is a background response (sending it again would start a second one).
   While that may still happen, an attempt's events are held back until its
   first output event, which releases them; an attempt sent again gives its
   subscribers its :class:`HeadReceived` and one :class:`Retrying`, nothing
   else, and a fresh parser: the result is the last attempt's.  Its
   connection goes back to the pool when its body ended cleanly, and is
   closed otherwise, before the wait.
"""

from __future__ import annotations

import enum
import logging
import math
from collections.abc import Awaitable, Callable, Generator, Mapping
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any, Generic, Literal, NoReturn, TypeVar, overload

import attrs
import trio

from ._core.endpoint import Endpoint
from ._core.errors import (
    ChunkwiseError,
    ConnectionLost,
    IdleTimeout,
    RemoteProtocolError,
    StallTimeout,
    StreamError,
    TransportError,
)
from ._core.events import Batch, Event, Family, HeadReceived, Retrying
from ._core.parser import StreamParser
from ._core.results import Anomaly, IncompleteReason
from ._core.retries import retry_delay
from ._core.sse import DEFAULT_MAX_EVENT_SIZE
from ._core.timings import TimingRecorder, Timings
from ._fanout import DEFAULT_BUFFER_SIZE, Broadcaster
from ._net.http import HTTPResponse, send_http_request
from ._net.http11 import Connection
from ._net.pool import ConnectionPool
from ._net.request import Auth, encode_request
from ._net.tasks import exceptions_unwrapped, require_trio
from ._net.trace import Timed, traced
from ._resume import Attach, Resumer

__all__ = [
    "Api",
    "ClientApi",
    "Stream",
    "StreamBlock",
    "StreamState",
    "complete",
    "open_stream",
]

#: The result type of a stream: the API's ``Result``.
R = TypeVar("R")

_log = logging.getLogger("chunkwise")


class StreamState(enum.Enum):
    """The reader's phase (the transitions are in the module's table)."""

    OPENING = "opening"
    STREAMING = "streaming"
    RESUMING = "resuming"
    ENDED = "ended"


class Stream(Generic[R]):
    """An answer being streamed: the one implementation behind both APIs' streams."""

    __slots__ = (
        "_again",
        "_block_left",
        "_broadcaster",
        "_consumers",
        "_ended",
        "_held",
        "_iterator",
        "_nobody_reads",
        "_nursery",
        "_parser",
        "_reader_scope",
        "_response",
        "_resumer",
        "_stall",
        "_state",
        "_timings",
    )

    def __init__(
        self,
        response: HTTPResponse,
        parser: StreamParser[R],
        timings: Timed[R],
        stall: StallTimeout | None = None,
        resumer: Resumer | None = None,
        again: _Again | None = None,
    ) -> None:
        self._response = response
        self._resumer = resumer  # a background response's (rule 6)
        # Rule 7: what sending the request again takes, while it may be (no
        # output yet, retries left), and the current attempt's events held.
        self._again = again
        self._held: list[Event] = []
        self._parser = parser
        self._timings = timings
        self._stall = stall  # the error a stall ends the stream with (Timeouts.stall)
        self._broadcaster = Broadcaster()
        self._state = StreamState.OPENING
        self._ended = trio.Event()  # set on entering ENDED: wakes result()
        self._reader_scope = trio.CancelScope()  # the reading phase (rule 1)
        self._nursery: trio.Nursery | None = None
        self._iterator: trio.MemoryReceiveChannel[Event] | None = None
        self._block_left = False
        self._consumers = 0  # consumer tasks running (start_soon)
        # Set once the block is left and no consumer runs; made only when the
        # reading ends (nothing waits for it before): one event fewer per stream.
        self._nobody_reads: trio.Event | None = None

    @property
    def status_code(self) -> int:
        """The HTTP status of the response."""
        return self._response.status_code

    @property
    def headers(self) -> Mapping[str, str]:
        """The HTTP response headers (case-insensitive)."""
        return self._response.headers

    @property
    def snapshot(self) -> R:
        """What the stream delivered so far (final once :attr:`finished`)."""
        return self._timings.result

    @property
    def timings(self) -> Timings:
        """When each part arrived so far; final (the result's) once :attr:`finished`."""
        return self._timings.timings

    @property
    def state(self) -> StreamState:
        """The reader's phase: opening, streaming, resuming, or ended (see :attr:`finished`)."""
        return self._state

    @property
    def finished(self) -> bool:
        """True once the stream ended: the socket is closed and the result is final.

        Subscribers may still be receiving their last events.
        """
        return self._state is StreamState.ENDED

    def _enter(self, state: StreamState) -> None:
        """A transition of the module's table."""
        self._state = state
        if state is StreamState.ENDED:
            self._timings.close()  # the telemetry's end, once
            self._ended.set()

    @overload
    def subscribe(
        self,
        family: Family | None = None,
        *,
        buffer_size: int | float = DEFAULT_BUFFER_SIZE,
        lossy: bool = False,
        batched: Literal[False] = False,
    ) -> trio.MemoryReceiveChannel[Event]: ...

    @overload
    def subscribe(
        self,
        family: Family | None = None,
        *,
        buffer_size: int | float = DEFAULT_BUFFER_SIZE,
        lossy: bool = False,
        batched: Literal[True],
    ) -> trio.MemoryReceiveChannel[Batch]: ...

    def subscribe(
        self,
        family: Family | None = None,
        *,
        buffer_size: int | float = DEFAULT_BUFFER_SIZE,
        lossy: bool = False,
        batched: bool = False,
    ) -> trio.MemoryReceiveChannel[Event] | trio.MemoryReceiveChannel[Batch]:
        """A new channel receiving every event from now on (or one family's).

        Args:
            family: ``"choice"``, ``"tool_call"`` or ``"lifecycle"`` to receive
                only that family; the terminal event reaches every subscriber.
                ``"raw"``: every server-sent event as received
                (:class:`~chunkwise.RawEvent`), which no other subscriber
                receives; the stream's parser makes them from the first
                raw subscription on.
            buffer_size: Events (batches, when ``batched``) held for this
                subscriber before the reader waits (or, when ``lossy``, drops):
                an ``int`` or :data:`math.inf`.
            lossy: Never hold up the stream for this subscriber: events that
                do not fit are dropped and reported by an
                :class:`~chunkwise.EventsDropped` event.
            batched: Receive tuples of events, one per network read, instead
                of single events: one channel operation per read instead of
                one per event, for consumers that keep up with fast streams.
                The last tuple ends with the terminal event.

        Close the channel to unsubscribe; the other subscribers are unaffected.

        Raises:
            ValueError: an unknown family, a negative ``buffer_size``, or a
                lossy subscriber without a finite ``buffer_size`` of at least 1.
            TypeError: ``buffer_size`` is neither an ``int`` nor :data:`math.inf`.
        """
        channel = self._broadcaster.subscribe(
            family, buffer_size=buffer_size, lossy=lossy, batched=batched
        )
        if family == "raw" and not self._parser.raw:
            self._parser.emit_raw()
        return channel

    def start_soon(
        self, async_fn: Callable[..., Awaitable[object]], *args: object, name: object = None
    ) -> None:
        """Run a consumer task in the stream's nursery.

        Leaving the block waits for consumer tasks; each still receives the
        rest of its events.  If one raises, the stream is cancelled, the socket
        closed, and the exception propagates out of the ``async with`` on its
        own.
        """
        if self._nursery is None:
            raise RuntimeError("the stream is not open")
        self._consumers += 1
        self._nursery.start_soon(self._consume, async_fn, args, name=name or async_fn)

    async def _consume(self, async_fn: Callable[..., Awaitable[object]], args: Any) -> None:
        try:
            await async_fn(*args)
        finally:
            self._consumers -= 1
            self._check_readers()

    def _nobody_left(self) -> bool:
        return self._block_left and not self._consumers

    def _check_readers(self) -> None:
        if self._nobody_reads is not None and self._nobody_left():
            self._nobody_reads.set()

    def cancel(self) -> None:
        """Stop reading: the stream ends ``incomplete`` (``cancelled``) and the socket closes.

        Events already parsed still reach every subscriber, then the terminal
        event.  Does nothing once the stream ended.
        """
        self._reader_scope.cancel()

    async def result(self) -> R:
        """Wait for the end of the stream and return the final result."""
        self._broadcaster.listen()
        await self._ended.wait()
        return self._timings.result

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
        final: list[Event] = []  # the last events, the terminal one at the end
        error: ChunkwiseError | None = None  # what broke the body off
        clean_end = False
        timings = self._timings
        stall = self._stall
        # The stall timeout's deadline: from the first output on, the last
        # output plus the timeout, moved on by the time spent publishing.
        deadline = math.inf
        try:
            with self._reader_scope:
                await broadcaster.wait_for_listener()
                self._enter(StreamState.STREAMING)
                headers = tuple(self._response.headers.items())
                await broadcaster.publish(
                    [HeadReceived(status_code=self.status_code, headers=headers)]
                )
                while True:
                    final, error = await self._read(deadline)
                    clean_end = error is None
                    if self._again is not None:
                        if await self._send_again(error):
                            parser, timings = self._parser, self._timings
                            deadline = math.inf  # the stall timeout starts at output
                            continue
                        final = self._release_held(final)
                    resumer = self._resumer
                    if resumer is None or parser.finished:
                        break  # the end, or a stream the server does not keep (rule 6)
                    # Rule 6: the old connection is closed before the new one opens.
                    clean_end = False
                    await self._response.aclose()
                    self._enter(StreamState.RESUMING)
                    resumed = await resumer.resume(error)
                    if isinstance(resumed, list):  # ended from a poll, or given up
                        final = timings.carried(resumed, read=False)
                        if parser.finished:
                            error = None
                        break
                    resumed.trace = traced(timings.hook)  # its reads are this stream's
                    self._response = resumed
                    self._enter(StreamState.STREAMING)
                    deadline = math.inf if stall is None else trio.current_time() + stall.timeout
                timings.recorder.end()
                if clean_end:
                    await self._response.release()
            if self._held:  # cancelled waiting to send again (rule 7)
                final = self._release_held(final)
            reason = _incomplete_reason(error)
            if self._reader_scope.cancelled_caught:
                reason = IncompleteReason.CANCELLED
            timings.recorder.end()
            await self._response.aclose()
            if isinstance(error, RemoteProtocolError):
                # Invalid body framing (e.g. a bad chunk size line): the stream
                # fails, like a body the parser cannot interpret.
                final += timings.carried(parser.fail(error), read=False)
            else:
                if error is not None:
                    final += parser.note_anomaly(Anomaly(kind="transport error", detail=str(error)))
                final += timings.carried(parser.end(reason, error=error), read=False)
            self._enter(StreamState.ENDED)
            give_up = self._nobody_reads = trio.Event()
            if self._nobody_left():
                give_up.set()
            await broadcaster.finish(final, give_up=give_up)
        finally:
            # Torn down from outside (the block raised, a consumer failed, an
            # outer deadline): record it, hand over what fits, end every channel.
            if self._held:  # torn down waiting to send again (rule 7)
                final = self._release_held(final)
            timings.recorder.end()  # the reading stopped now, not at the last read
            if not parser.finished:
                final += timings.carried(parser.end(IncompleteReason.CANCELLED), read=False)
            self._enter(StreamState.ENDED)
            broadcaster.close(final)

    async def _read(self, deadline: float) -> tuple[list[Event], ChunkwiseError | None]:
        """Read one response's body until it ends: its final events, and what broke it off.

        ``deadline`` is the stall timeout's (see :func:`_run`).
        """
        parser = self._parser
        broadcaster = self._broadcaster
        timings = self._timings
        recorder = timings.recorder
        stall = self._stall
        while True:
            try:
                if deadline == math.inf:
                    data = await self._response.receive_some()
                else:
                    with trio.move_on_at(deadline) as waiting:
                        data = await self._response.receive_some()
                    if waiting.cancelled_caught:
                        return [], stall
            except (TransportError, RemoteProtocolError) as exc:
                return [], exc
            if not data:
                return [], None
            # One stamp per read, by the trace hook, shared by its events.
            stamp = recorder.read_at
            events = timings.carried(parser.feed(data))
            if self._again is not None:
                events = self._hold(events)
            # Neither the read nor its events are kept through the next wait: with
            # thousands of open streams that is most of their memory (bench/load.py).
            del data
            if parser.finished:
                return events, None  # published after the socket is released (rule 2)
            if stall is None:
                if events:
                    await broadcaster.publish(events)
            elif recorder.last_output == stamp:
                await broadcaster.publish(events)
                deadline = trio.current_time() + stall.timeout
            elif events:
                # Waiting for our own subscribers is not the server stalling.
                before = trio.current_time()
                await broadcaster.publish(events)
                deadline += trio.current_time() - before
            if stall is not None and not parser.awaiting_output:
                # Every started choice finished: what may come (usage, [DONE])
                # is bounded by the idle timeout alone, until output comes again;
                # or a hosted tool runs, for as long as it takes.
                deadline = math.inf
            elif stall is not None and deadline == math.inf and recorder.last_output is not None:
                deadline = trio.current_time() + stall.timeout  # a hosted tool ended: from now
            del events

    def _hold(self, events: list[Event]) -> list[Event]:
        """Rule 7: an attempt's events wait for its first output, then go out at once."""
        self._held += events
        if self._timings.recorder.first_output is None:
            return []
        return self._release_held([])

    def _release_held(self, events: list[Event]) -> list[Event]:
        """The held events, then ``events``: the attempt is the stream's for good."""
        events = self._held + events
        self._held = []
        self._again = None  # let go of the request: nothing is sent again
        return events

    async def _send_again(self, error: ChunkwiseError | None) -> bool:
        """Rule 7: send the request again if the attempt that just ended failed before output.

        Returns whether the stream goes on with a new response and parser.
        ``error``: what broke the attempt's body off, if anything.
        """
        again = self._again
        assert again is not None
        parser, recorder = self._parser, self._timings.recorder
        reason: ChunkwiseError | None
        if parser.finished:
            answer = parser.result
            ended = getattr(answer, "reason", None)
            reason = getattr(answer, "error", None)
            if ended in (IncompleteReason.EMPTY_STREAM, IncompleteReason.UNFINISHED):
                reason = ConnectionLost(f"the answer ended before any output ({ended})")
            elif not isinstance(reason, StreamError):
                reason = None  # complete, or not for a reason worth asking again
        elif error is None:
            reason = ConnectionLost("the body ended before any output")
        else:
            reason = error if isinstance(error, TransportError) else None
        if reason is None:
            return False
        retries, retried = again.endpoint.retries, recorder.attempts - 1
        delay = retry_delay(reason, retries, retried, before_output=True)
        if delay is None:
            return False
        if error is None:
            await self._response.release()  # a whole body: its connection may serve again
        await self._response.aclose()
        self._enter(StreamState.RESUMING)
        attempt = retried + 2
        what = f"{type(reason).__name__}: {reason}"
        _log.info("%s: attempt %d failed before any output (%s)", again.label, attempt - 1, what)
        # The trace hook's retry step, as the transport's retries give it (not logged twice).
        info = {"target": again.label, "delay": delay, "retry": attempt - 1, "error": reason}
        self._timings.hook("retry.started", {**info, "of": retries.max_retries})
        await self._broadcaster.publish([Retrying(attempt=attempt, delay=delay, reason=reason)])
        await trio.sleep(delay)
        try:
            self._response = await again.send(self._timings.hook, retried + 1)
        except ChunkwiseError as exc:
            # The attempt that failed stays the stream's outcome, saying why.
            anomaly = Anomaly(kind="retry failed", detail=f"{type(exc).__name__}: {exc}")
            self._held += parser.note_anomaly(anomaly)
            self._enter(StreamState.STREAMING)
            return False
        self._held = []
        self._parser = again.api.make_parser(again.request, again.max_event_size)
        if parser.raw:
            self._parser.emit_raw()
        self._timings = self._timings.again(self._parser)
        self._enter(StreamState.STREAMING)
        if recorder.attempts > retries.max_retries:
            self._release_held([])  # the last attempt: nothing to hold back for
        head = HeadReceived(status_code=self.status_code, headers=tuple(self.headers.items()))
        await self._broadcaster.publish([head])
        return True

    def _leave(self) -> None:
        """The block is over: nobody but consumer tasks can read any more."""
        self._block_left = True
        if not self.finished:
            self.cancel()  # the caller is done with an unfinished stream
        self._check_readers()


def _incomplete_reason(error: ChunkwiseError | None) -> IncompleteReason | None:
    """Why a body that ``error`` broke off ended early; ``None`` for a body that ended."""
    if isinstance(error, StallTimeout):
        return IncompleteReason.STALLED
    if isinstance(error, IdleTimeout):
        return IncompleteReason.IDLE_TIMEOUT
    return None if error is None else IncompleteReason.CONNECTION_LOST


S = TypeVar("S", bound=Stream[Any], covariant=True)


@attrs.frozen
class Api(Generic[S]):
    """What differs between the APIs: where to post, how to parse, what to hand out."""

    #: The API's namespace: ``chunkwise.{name}.open_stream`` and ``.complete``.
    name: str
    #: Appended to the endpoint's base URL.
    path: str
    #: The sans-IO parser for a request body (which tools, which schema...).
    make_parser: Callable[[Mapping[str, Any], int], StreamParser[Any]]
    #: The stream class handed to the caller.
    stream_class: type[S]
    #: The server may keep the answer (a background Responses answer): a lost
    #: connection is resumed (:mod:`chunkwise._resume`), and the parser is a
    #: :class:`~chunkwise._resume.Resumable`.
    resumable: bool = False
    #: How the key is sent (:data:`~chunkwise._net.request.Auth`): Anthropic's
    #: ``x-api-key`` for the Messages API.
    auth: Auth = "bearer"


def open_stream(
    api: Api[S],
    endpoint: Endpoint,
    request: Mapping[str, Any],
    *,
    max_event_size: int = DEFAULT_MAX_EVENT_SIZE,
    transport: trio.abc.Stream | None = None,
    pool: ConnectionPool[Connection] | None = None,
    attach: Attach | None = None,
) -> AbstractAsyncContextManager[S]:
    """Open a stream of ``api``, on ``pool``'s connections when one is given (a Client's).

    With ``attach``, ``request`` is not sent: the stream is the stored
    response's, streamed again (``GET``) from ``attach.starting_after`` on.
    """
    return StreamBlock(api, endpoint, request, max_event_size, transport, pool, attach)


@attrs.frozen
class _Again:
    """What sending a stream's request again takes (rule 7): kept until its first output."""

    api: Api[Any]
    endpoint: Endpoint
    request: Mapping[str, Any]
    body: bytes
    max_event_size: int
    pool: ConnectionPool[Connection] | None

    @property
    def label(self) -> str:
        return f"POST {self.endpoint.host}:{self.endpoint.port}{self.api.path}"

    async def send(self, trace: Any, retried: int) -> HTTPResponse:
        """The request once more, with what is left of the retry budget."""
        return await send_http_request(
            self.endpoint,
            self.body,
            path=self.api.path,
            pool=self.pool,
            auth=self.api.auth,
            trace=trace,
            retried=retried,
        )


class StreamBlock(Generic[S]):
    """The ``async with`` of :func:`open_stream`.

    A class rather than an ``@asynccontextmanager`` generator: every open
    stream holds one for as long as it is open, and this one keeps three
    references, where a generator would keep its frame, the context manager
    its arguments, keywords and docstring (``bench/load.py``).
    """

    __slots__ = ("_manager", "_opening", "_stream")

    def __init__(
        self,
        api: Api[S],
        endpoint: Endpoint,
        request: Mapping[str, Any],
        max_event_size: int,
        transport: trio.abc.Stream | None,
        pool: ConnectionPool[Connection] | None,
        attach: Attach | None = None,
    ) -> None:
        # What the request needs, let go of once it is sent.
        self._opening: tuple[Any, ...] | None = (
            api,
            endpoint,
            request,
            max_event_size,
            transport,
            pool,
            attach,
        )
        self._stream: S | None = None
        self._manager: AbstractAsyncContextManager[trio.Nursery] | None = None

    async def __aenter__(self) -> S:
        if self._opening is None:
            raise RuntimeError("a stream's async with can be entered only once")
        api, endpoint, request, max_event_size, transport, pool, attach = self._opening
        require_trio(f"chunkwise.{api.name}.open_stream()")
        self._opening = None
        # InvalidRequest before anything is sent; attaching sends no body.
        body = b"" if attach is not None else encode_request(request)
        parser = api.make_parser(request, max_event_size)
        telemetry = endpoint.telemetry
        watch = None
        if telemetry is not None:
            watch = telemetry.start(
                api.name, endpoint.host, endpoint.port, request, trio.current_time
            )
        timings = Timed(parser, TimingRecorder(trio.current_time), watch)
        method, path = ("POST", api.path) if attach is None else ("GET", attach.path)
        try:
            response = await send_http_request(
                endpoint,
                body,
                path=path,
                transport=transport,
                pool=pool,
                trace=timings.hook,
                method=method,
                auth=api.auth,
            )
        except BaseException as exc:
            if watch is not None:
                watch.fail(exc)
            raise
        stall = endpoint.timeouts.stall
        stalled = None if stall is None else StallTimeout(endpoint.host, endpoint.port, stall)
        resumer = (
            Resumer.for_stream(endpoint, parser, request, attach, pool) if api.resumable else None
        )
        again = None
        retries = endpoint.retries
        if (
            transport is None
            and resumer is None
            and attach is None
            and retries.before_output
            and timings.recorder.attempts <= retries.max_retries
        ):
            again = _Again(api, endpoint, request, body, max_event_size, pool)  # rule 7
        del body  # kept by again alone, until the first output
        stream: S = api.stream_class(response, parser, timings, stalled, resumer, again)
        manager = trio.open_nursery()
        try:
            nursery = await manager.__aenter__()
        except BaseException:  # pragma: no cover - entering a nursery does not checkpoint
            await response.aclose()
            raise
        stream._nursery = nursery
        nursery.start_soon(stream._run, name="chunkwise reader")
        self._stream, self._manager = stream, manager
        return stream

    def _misuse(self, how: str) -> TypeError:
        name = "chat" if self._opening is None else self._opening[0].name
        return TypeError(
            f"chunkwise.{name}.open_stream() is an async context manager: {how}; use "
            f"'async with chunkwise.{name}.open_stream(...) as stream:' (or "
            f"'await chunkwise.{name}.complete(...)' for the result alone)"
        )

    def __await__(self) -> Generator[Any, None, NoReturn]:
        raise self._misuse("it cannot be awaited")

    def __enter__(self) -> NoReturn:
        raise self._misuse("it cannot be entered with a plain 'with'")

    def __exit__(self, *exc_info: object) -> None:  # pragma: no cover - __enter__ raises
        pass

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        stream, manager = self._stream, self._manager
        if stream is None or manager is None or stream._nursery is None:
            raise RuntimeError("a stream's async with was left without being entered")
        self._stream = self._manager = None
        try:
            with exceptions_unwrapped():
                try:
                    if exc is not None:
                        stream._nursery.cancel_scope.cancel()
                finally:
                    stream._leave()
                return bool(await manager.__aexit__(exc_type, exc, traceback))
        except BaseException as raised:
            if raised is not exc:
                raise
            # The block's own exception, back out of the nursery: let it go on
            # as it came, with its own traceback (as contextlib does).
            raised.__traceback__ = traceback
            return False
        finally:
            stream._nursery = None
            await stream._response.aclose()  # nothing to do once released (rule 2)


async def complete(
    api: Api[Stream[R]],
    endpoint: Endpoint,
    request: Mapping[str, Any],
    *,
    max_event_size: int = DEFAULT_MAX_EVENT_SIZE,
    pool: ConnectionPool[Connection] | None = None,
) -> R:
    """Stream ``api``'s answer to its end, on ``pool``'s connections when one is given."""
    require_trio(f"chunkwise.{api.name}.complete()")
    async with open_stream(
        api, endpoint, request, max_event_size=max_event_size, pool=pool
    ) as stream:
        return await stream.result()


class ClientApi(Generic[S, R]):
    """An API's namespace on a client's connections: ``client.chat``, ``client.messages``..."""

    __slots__ = ("_api", "_endpoint", "_pool")

    def __init__(self, api: Api[S], endpoint: Endpoint, pool: ConnectionPool[Connection]) -> None:
        self._api = api
        self._endpoint = endpoint
        self._pool = pool

    def open_stream(
        self, request: Mapping[str, Any], *, max_event_size: int = DEFAULT_MAX_EVENT_SIZE
    ) -> AbstractAsyncContextManager[S]:
        """The namespace's ``open_stream`` on the client's connections."""
        return open_stream(
            self._api, self._endpoint, request, max_event_size=max_event_size, pool=self._pool
        )

    async def complete(
        self, request: Mapping[str, Any], *, max_event_size: int = DEFAULT_MAX_EVENT_SIZE
    ) -> R:
        """The namespace's ``complete`` on the client's connections."""
        return await complete(
            self._api, self._endpoint, request, max_event_size=max_event_size, pool=self._pool
        )

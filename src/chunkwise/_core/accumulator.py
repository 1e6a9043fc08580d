"""The one accumulator skeleton every API fills in, sans-IO.

Theory of operation
-------------------
An accumulator takes a stream one unit at a time -- a chunk of chat or
legacy completions, an event of the Responses API -- either decoded
(:meth:`~BaseAccumulator.feed`, e.g. the official SDK's ``model_dump()``) or as
a server-sent event (:meth:`~BaseAccumulator.feed_sse`), and returns the
stream events each unit causes.  :class:`BaseAccumulator` holds what is the
same for every API: the terminal event and its status, the server's error,
usage, the server's own timings, the anomalies, the result snapshot and the
public methods.  Each API fills in the methods under "what an API fills in",
its one path from a unit to its effects (``_take``) among them.  The chunk
APIs share one more layer (:class:`~chunkwise._core.chunks.ChunkAccumulator`);
each module lists its own rules after these.

Rules
-----
1. The stream has one terminal event: :class:`~chunkwise.StreamCompleted`,
   :class:`~chunkwise.StreamIncomplete` or :class:`~chunkwise.StreamFailed`,
   produced by the API's end of stream, by data that cannot be interpreted
   (:meth:`~BaseAccumulator.fail`), or by :meth:`~BaseAccumulator.end`.
   Anything fed after it is ignored, with one counted anomaly (``data after
   end``; ``data after [DONE]`` once ``[DONE]`` arrived), unless the API
   says the data is the server's normal close.
2. The status is derived, never asserted: ``failed`` when an error is known
   at the end (the server's, or the input that could not be interpreted);
   else ``complete`` when the API's rules say the answer finished; else
   ``incomplete``, with a reason: the server's own
   (:attr:`~chunkwise.IncompleteReason.SERVER_REPORTED`), or why the stream
   stopped -- the ``reason`` given to :meth:`~BaseAccumulator.end`, else
   ``empty stream`` when nothing started, else ``unfinished``.
3. An error from outside the data (a lost connection, a timeout: the
   ``error`` given to :meth:`~BaseAccumulator.end`) becomes the result's
   error only when the stream stopped early (``incomplete``, not reported
   by the server): a complete stream, or one that failed for its own
   reasons, keeps its own status and error.
4. The server's error payloads are read by
   :func:`~chunkwise._core.payloads.parse_error_payload`, the one reading of every
   error shape; each is announced (:class:`~chunkwise.StreamErrorReceived`)
   and the first is the stream's error.  A chunk API's stream ends there;
   a Responses stream goes on to its terminal event.
5. Usage and the server's own timings are replaced, never updated; each
   usage is announced (:class:`~chunkwise.UsageReported`).
6. Anomalies are recorded rather than hidden (:mod:`chunkwise._core.anomalies`):
   each one, or once per kind and counted for what a misbehaving server
   repeats on every event.
7. A result never changes once handed out: :attr:`~BaseAccumulator.result`
   is a new snapshot after every change (and the same object until one),
   and what is kept from a caller's mapping is copied.
8. Nothing fed raises because of what the *server* sent: input that cannot be
   interpreted ends the stream ``failed`` with a typed error, and everything
   received before it stays in the result.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping
from typing import Any, Generic, TypeVar, cast

from .anomalies import AnomalyLog
from .errors import ChunkwiseError, InvalidChunk, StreamError
from .events import (
    Event,
    StreamCompleted,
    StreamErrorReceived,
    StreamFailed,
    StreamIncomplete,
    UsageReported,
)
from .names import RENAMED, warn_renamed
from .payloads import copy_json, load_object
from .results import Anomaly, IncompleteReason, Status
from .sse import ServerSentEvent

__all__ = ["DONE", "BaseAccumulator", "TypedEventAccumulator"]

#: The data of the SSE event that ends an OpenAI stream.
DONE = "[DONE]"

R = TypeVar("R")


class BaseAccumulator(Generic[R]):
    """The skeleton of every API's accumulator, with results of type ``R``."""

    #: The public name of the API's accumulator, for the deprecation warnings.
    _public_name = "chunkwise.chat.Accumulator"
    #: What the API calls one unit of its stream, for error messages.
    _unit = "a chunk"
    #: Rule 4: whether the server's error ends the stream (the chunk APIs).
    _error_ends = True

    def __init__(self) -> None:
        self._usage: Mapping[str, Any] | None = None
        self._server_timings: Mapping[str, Any] | None = None
        self._error: ChunkwiseError | None = None
        self._anomalies = AnomalyLog()
        self._status: Status = "streaming"
        self._reason: IncompleteReason | None = None
        self._done = False  # [DONE] arrived (a chunk API's end of stream)
        self._ended = False
        self._cache: R | None = None

    # -- what an API fills in ------------------------------------------------

    @abstractmethod
    def _special(self, kind: str, data: str) -> list[Event] | None:
        """An ``error`` event, ``[DONE]`` or empty data: its events, or None to take it as JSON."""

    def _not_an_object(self, kind: str, data: str, error: InvalidChunk) -> list[Event]:
        """``data`` is not a JSON object: the stream failed, unless the API knows better."""
        return self.fail(error)

    @abstractmethod
    def _take(self, unit: Mapping[str, Any], kind: str | None, data: str | None) -> list[Event]:
        """Take one decoded unit, before the stream ended.

        ``kind`` is its SSE event type and ``data`` its JSON text, both None
        for the caller's mapping, whatever is kept of which is copied (rule 7).
        """

    @abstractmethod
    def _close(self, events: list[Event], by_server: bool) -> None:
        """The stream ends (``by_server``: by the server's own end): close what is open."""

    @abstractmethod
    def _settle(self, events: list[Event], by_server: bool) -> bool:
        """The stream ended without an error: True when it is complete (rule 2)."""

    def _reported(self, by_server: bool) -> IncompleteReason | None:
        """The server's own reason for an incomplete stream, if it gave one."""
        return None

    @abstractmethod
    def _started(self) -> bool:
        """True once the answer started (else an incomplete stream is ``empty stream``)."""

    @abstractmethod
    def _snapshot(self) -> R:
        """The API's result, of everything received so far."""

    # -- public API --------------------------------------------------------

    @property
    def result(self) -> R:
        """A snapshot of everything received so far."""
        if self._cache is None:
            self._cache = self._snapshot()
        return self._cache

    @property
    def finished(self) -> bool:
        """True once the terminal event was produced."""
        return self._ended

    @property
    def awaiting_output(self) -> bool:
        """True while more output may come: what the stall timeout bounds.

        Until the end by default; the chunk APIs say False once every started
        choice finished (what may still come is usage and ``[DONE]``).
        """
        return not self._ended

    def feed(self, unit: Mapping[str, Any]) -> list[Event]:
        """Accumulate one decoded unit (any mapping): a chunk, or a Responses event.

        What the result keeps from ``unit`` is copied: changing it afterwards
        changes no result.
        """
        if self._ended:
            return self._ignore()
        if not isinstance(unit, Mapping):
            return self.fail(
                InvalidChunk(f"{self._unit} must be a mapping, not {type(unit).__name__}")
            )
        return self._take(unit, None, None)

    def feed_sse(self, event: ServerSentEvent) -> list[Event]:
        """Interpret one server-sent event."""
        return self.feed_data(event.event, event.data)

    def feed_data(self, kind: str, data: str) -> list[Event]:
        """:meth:`feed_sse` for an SSE event given as its type and data."""
        if self._ended:
            return [] if self._closing(data) else self._ignore()
        if kind == "error" or data == DONE or not data:
            events = self._special(kind, data)
            if events is not None:
                return events
        try:
            unit = load_object(data)
        except InvalidChunk as exc:
            return self._not_an_object(kind, data, exc)
        return self._take(unit, kind, data)

    def end(
        self, reason: IncompleteReason | None = None, *, error: ChunkwiseError | None = None
    ) -> list[Event]:
        """The stream is over: produce the terminal event (unless already produced).

        What is still open stays unfinished (open tool calls are completed
        with ``finished=False``).  ``reason`` (e.g.
        :attr:`~chunkwise.IncompleteReason.CONNECTION_LOST`) and ``error`` (a
        lost connection, a timeout) say why the stream stopped early, when
        that is known from outside the data; they become the result's only if
        it turns out ``incomplete`` without the server saying so.
        """
        if self._ended:
            return []
        return self._finish(reason, outside=error)

    def note_anomaly(self, anomaly: Anomaly) -> list[Event]:
        """Record an anomaly seen outside the stream's data (e.g. by the SSE layer)."""
        events: list[Event] = []
        self._anomaly(events, anomaly.kind, anomaly.detail, anomaly.choice_index)
        return events

    def fail(self, error: ChunkwiseError) -> list[Event]:
        """End the stream as ``failed`` with ``error`` (e.g. a protocol error)."""
        if self._ended:
            return self._ignore()
        self._error = error
        return self._finish()

    # -- the round-3 spellings (chunkwise._core.names.RENAMED) ----------------------

    def feed_event(self, event: Any) -> list[Event]:
        """Deprecated: :meth:`feed_sse` (chat, completions) or :meth:`feed` (responses)."""
        return self._renamed("feed_event", event)

    def _renamed(self, old: str, argument: Any) -> list[Event]:
        # The deprecation table says what each old spelling is now.
        name = f"{self._public_name}.{old}"
        warn_renamed(name, stacklevel=4)
        method = getattr(self, RENAMED[name].rpartition(".")[2])
        events: list[Event] = method(argument)
        return events

    # -- what every API does -------------------------------------------------

    def _closing(self, data: str) -> bool:
        """Rule 1: True when ``data`` after the terminal event is the server's normal close."""
        return False

    def _server_error(self, error: StreamError) -> list[Event]:
        # Rule 4.
        self._cache = None
        if self._error is None:
            self._error = error
        events: list[Event] = [StreamErrorReceived(error=error)]
        if self._error_ends:
            events += self._finish()
        return events

    def _take_usage(self, usage: Mapping[str, Any], events: list[Event]) -> None:
        # Rule 5.
        self._usage = usage
        self._cache = None
        events.append(UsageReported(usage=usage))

    def _take_timings(self, timings: Mapping[str, Any] | None) -> None:
        # Rule 5: a new mapping when the payload had figures (take_server_timings).
        if timings is not self._server_timings:
            self._server_timings, self._cache = timings, None

    def _anomaly(
        self, events: list[Event], kind: str, detail: str, choice_index: int | None = None
    ) -> None:
        self._anomalies.add(events, kind, detail, choice_index)
        self._cache = None

    def _counted_anomaly(
        self, events: list[Event], kind: str, detail: str, choice_index: int | None = None
    ) -> None:
        self._anomalies.count(events, kind, detail, choice_index)
        self._cache = None

    def _ignore(self) -> list[Event]:
        # Rule 1: counted in the result, no event after the terminal one.
        kind = "data after [DONE]" if self._done else "data after end"
        self._counted_anomaly([], kind, "events after the terminal event are ignored")
        return []

    def _finish(
        self,
        reason: IncompleteReason | None = None,
        *,
        by_server: bool = False,
        outside: ChunkwiseError | None = None,
    ) -> list[Event]:
        # Rules 1-3: the one terminal event.
        events: list[Event] = []
        self._close(events, by_server)
        self._ended = True
        self._cache = None  # and nothing reads self.result before the terminal event
        if self._error is not None:
            self._status = "failed"
            events.append(StreamFailed(result=self.result, error=self._error))
        elif self._settle(events, by_server):
            self._status = "complete"
            events.append(StreamCompleted(result=self.result))
        else:
            self._status = "incomplete"
            self._reason = self._reported(by_server)
            if self._reason is None:  # rule 3: the stream stopped early
                stopped = IncompleteReason.UNFINISHED if self._started() else None
                self._reason = reason or stopped or IncompleteReason.EMPTY_STREAM
                self._error = outside
            events.append(StreamIncomplete(result=self.result, reason=self._reason))
        return events


class TypedEventAccumulator(BaseAccumulator[R]):
    """The skeleton of the APIs whose events name their own type (Responses, Messages).

    What they share of their rule 1: ``data: [DONE]`` (a proxy's) and empty data
    prove nothing, before the end or after it; an ``error`` event whose data is
    not a JSON object is the server's error, its text the message; a decoded
    event is a dict of the accumulator's own (:meth:`_own`).
    """

    _unit = "an event"

    def _closing(self, data: str) -> bool:
        return not data or data == DONE

    def _special(self, kind: str, data: str) -> list[Event] | None:
        return [] if not data or data == DONE else None

    def _not_an_object(self, kind: str, data: str, error: InvalidChunk) -> list[Event]:
        if kind == "error":
            return self._server_error(StreamError(data))
        return self.fail(error)

    def _own(self, unit: Mapping[str, Any], data: str | None) -> dict[str, Any]:
        """The event as a dict of our own: decoded from ``data`` by load_object, or copied."""
        self._cache = None
        return copy_json(dict(unit)) if data is None else cast("dict[str, Any]", unit)

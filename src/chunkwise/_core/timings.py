"""When each part of a streamed answer arrived: :class:`Timings`, its gap statistics, its clock.

Theory of operation
-------------------
The trio layer owns one :class:`TimingRecorder` per stream, fed by the
transport's trace hook (:meth:`TimingRecorder.trace`): the attempt that
streams (its start, the connection, the request sent, the response head, the
first byte) and each read of the body, stamped once.  The recorder is told
which reads carried *output* (text, refusal, reasoning or tool-argument deltas)
and which visible answer text; it keeps the first and last of those and the
statistics of the gaps between consecutive output reads.  When the parser
returns the terminal event, :class:`chunkwise._net.trace.Timed` puts the final
:class:`Timings` on that event's result, the one place it is attached.  The
clock is given (the trio layer's :func:`trio.current_time`), so tests get exact
figures under ``MockClock``.  The user's view is :doc:`/timings`.

Rules
-----
1. Every figure but ``started`` is seconds since ``started``, the start of the
   attempt that streamed, or ``None`` when the stream never got that far.
   Retries, their waits and the wait for a pool's slot happen before it.
2. A read has one stamp: when its last bytes reached this host where the
   transport knows (:mod:`chunkwise._net.arrivals`), else when the read
   returned; never before the response head or the previous read.  A gap is
   between two *reads* that carried output, never two events of one read.
3. Memory per stream is bounded: the gaps are kept as a count, a sum, an
   exact minimum and maximum, and at most :data:`GapHistogram.BUCKETS` buckets.
4. Quantiles are nearest-rank, read from that histogram: the bucket holding the
   ``q``-quantile is reported by its geometric middle, clamped to the exact
   minimum and maximum, so within :data:`GapHistogram.RELATIVE_ERROR` (2.5 %)
   for gaps of at least :data:`GapHistogram.SMALLEST` (1 µs), and within that
   microsecond below it.
5. Once the recorder produced the final :class:`Timings`
   (:meth:`TimingRecorder.final`) it is frozen: later calls give the same
   object.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from .payloads import copy_json

__all__ = [
    "SERVER_TIMING_KEYS",
    "GapHistogram",
    "GapStatistics",
    "TimingRecorder",
    "Timings",
    "event_server_timings",
    "output_tokens_of",
    "take_server_timings",
]


@attrs.frozen(kw_only=True)
class GapStatistics:
    """The gaps between consecutive reads that carried output, in seconds (see :doc:`/timings`).

    ``count``, ``mean`` and ``max`` are exact; the quantiles within 2.5 %.
    """

    count: int
    mean: float
    p50: float
    p90: float
    p99: float
    max: float


class GapHistogram:
    """Bounded statistics of a stream of gaps (rule 3 and 4 of the module)."""

    #: Bucket ``k`` holds gaps in ``[SMALLEST * RATIO**k, SMALLEST * RATIO**(k+1))``.
    RATIO = 1.05
    #: Gaps below this (zero included) share bucket ``-1``.
    SMALLEST = 1e-6
    #: Buckets up to a gap of a day; longer gaps share the last one.
    BUCKETS = math.ceil(math.log(86_400 / SMALLEST) / math.log(RATIO)) + 1
    #: The largest relative error of a quantile of gaps of at least SMALLEST.
    RELATIVE_ERROR = math.sqrt(RATIO) - 1

    __slots__ = ("_buckets", "count", "max", "min", "total")

    _LOG_RATIO = math.log(RATIO)

    def __init__(self) -> None:
        self._buckets: dict[int, int] = {}
        self.count: int = 0
        self.total: float = 0.0
        self.min: float = math.inf
        self.max: float = 0.0

    def add(self, gap: float) -> None:
        """Record one gap (seconds, at least 0)."""
        self.count += 1
        self.total += gap
        if gap > self.max:
            self.max = gap
        if gap < self.min:
            self.min = gap
        if gap < self.SMALLEST:
            key = -1
        else:
            key = min(int(math.log(gap / self.SMALLEST) / self._LOG_RATIO), self.BUCKETS - 1)
        buckets = self._buckets
        buckets[key] = buckets.get(key, 0) + 1

    @property
    def buckets_used(self) -> int:
        """Buckets holding a gap: at most :data:`BUCKETS` (rule 3)."""
        return len(self._buckets)

    def quantile(self, q: float) -> float:
        """The nearest-rank ``q``-quantile (``0 < q <= 1``), within the stated error."""
        if not self.count:
            raise ValueError("no gaps recorded")
        rank = max(1, math.ceil(q * self.count))
        seen = 0
        for value, count in self.values():
            seen += count
            if seen >= rank:
                return value
        raise AssertionError("unreachable: the buckets hold every gap")  # pragma: no cover

    def values(self) -> list[tuple[float, int]]:
        """Each bucket as ``(gap, count)``, shortest first (for telemetry's histograms).

        The gap is the bucket's geometric middle clamped to the exact minimum
        and maximum: within the stated error, and exact when all gaps are equal.
        """
        found = []
        for key, count in sorted(self._buckets.items()):
            middle = 0.0 if key < 0 else self.SMALLEST * self.RATIO ** (key + 0.5)
            found.append((min(max(middle, self.min), self.max), count))
        return found

    def statistics(self) -> GapStatistics | None:
        """The statistics so far, or ``None`` when no gap was recorded."""
        if not self.count:
            return None
        return GapStatistics(
            count=self.count,
            mean=self.total / self.count,
            p50=self.quantile(0.5),
            p90=self.quantile(0.9),
            p99=self.quantile(0.99),
            max=self.max,
        )


@attrs.frozen(kw_only=True)
class Timings:
    """When each part of a streamed answer arrived, on trio's clock (see :doc:`/timings`).

    Every figure but ``started`` is in seconds since ``started``, or ``None``
    when the stream never got there; a read's events share the read's stamp.

    Attributes:
        started: When the attempt that streamed began (after retries and the
            wait for a connection slot).
        connected: The connection was open; ``None`` on a reused connection
            or a transport the caller gave.
        request_sent: The request was handed to the socket completely.
        response_head: The response's status line and headers were read.
        first_byte: The first byte of the response arrived.
        first_event: The first read completing an event that carries data.
        first_output: The first read carrying output (text, refusal,
            reasoning or tool-argument delta): the time to first token.
        first_content: The first read carrying visible answer text.
        last_output: The last read carrying output.
        ended: The stream ended, or the reading stopped.
        connection_reused: The request went out on a pooled connection.
        attempts: Attempts made, the one that streamed included.
        output_tokens: The usage's output token count, when reported.
        gaps: :class:`~chunkwise.types.GapStatistics` of the gaps between
            reads carrying output (``None`` with fewer than two).
    """

    started: float
    connected: float | None = None
    request_sent: float | None = None
    response_head: float | None = None
    first_byte: float | None = None
    first_event: float | None = None
    first_output: float | None = None
    first_content: float | None = None
    last_output: float | None = None
    ended: float | None = None
    connection_reused: bool = False
    attempts: int = 1
    output_tokens: int | None = None
    gaps: GapStatistics | None = None

    @property
    def time_to_first_token(self) -> float | None:
        """Seconds to the first output (``first_output``): the usual TTFT."""
        return self.first_output

    @property
    def time_per_output_token(self) -> float | None:
        """vLLM's TPOT: ``(last_output - first_output) / (output_tokens - 1)``, or ``None``."""
        tokens = self.output_tokens
        if self.first_output is None or self.last_output is None or not tokens or tokens < 2:
            return None
        return (self.last_output - self.first_output) / (tokens - 1)

    @property
    def output_tokens_per_second(self) -> float | None:
        """GuideLLM's decoding speed after the first token: ``1 / time_per_output_token``."""
        tpot = self.time_per_output_token
        return 1 / tpot if tpot else None


def output_tokens_of(usage: Mapping[str, Any] | None) -> int | None:
    """The output token count of a chat (``completion_tokens``) or Responses usage."""
    if usage is None:
        return None
    for key in ("completion_tokens", "output_tokens"):
        value = usage.get(key)
        if type(value) is int and value >= 0:
            return value
    return None


class TimingRecorder:
    """The stamps of one stream, taken with ``clock`` (see the module's rules).

    :meth:`trace` takes the request's steps and each :meth:`read`; then
    :meth:`event` and :meth:`output` say what that read carried, :meth:`end`
    that the reading stopped.  :meth:`timings` gives the figures so far.
    """

    __slots__ = (
        "_final",
        "_output_read",
        "attempts",
        "clock",
        "connected",
        "connection_reused",
        "ended",
        "first_byte",
        "first_content",
        "first_event",
        "first_output",
        "gaps",
        "last_output",
        "read_at",
        "reads",
        "request_sent",
        "response_head",
        "started",
    )

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock: Callable[[], float] = clock
        self.attempts: int = 0
        self.started: float = clock()
        self._reset()
        self._final: Timings | None = None

    def _reset(self) -> None:
        self.connection_reused: bool = False
        self.connected: float | None = None
        self.request_sent: float | None = None
        self.response_head: float | None = None
        self.first_byte: float | None = None
        self.first_event: float | None = None
        self.first_output: float | None = None
        self.first_content: float | None = None
        self.last_output: float | None = None
        self.ended: float | None = None
        self.read_at: float | None = None  # the stamp of the current read
        self.reads: int = 0  # reads stamped
        self._output_read = 0  # the last read counted as output
        self.gaps: GapHistogram = GapHistogram()

    # -- the request (chunkwise._net.http) ------------------------------------------

    def start_attempt(self) -> None:
        """An attempt begins: what earlier attempts stamped is forgotten (rule 1).

        Also their final figures: an answer that failed before its output is
        asked for again (:mod:`chunkwise._stream`, rule 7).
        """
        self.attempts += 1
        self.started = self.clock()
        self._final = None
        self._reset()

    def reused(self) -> None:
        self.connection_reused = True

    def connected_now(self) -> None:
        self.connected = self.clock()

    def request_sent_now(self) -> None:
        self.request_sent = self.clock()

    def response_head_now(self, first_byte: float | None) -> None:
        """The head was read; ``first_byte`` is the connection's stamp of its first byte."""
        self.response_head = self.clock()
        self.first_byte = first_byte if first_byte is not None else self.response_head
        if self.request_sent is not None and self.request_sent > self.first_byte:
            # On loopback the kernel stamps the reply's arrival before the
            # sender reads its clock after the send: the request was out by then.
            self.request_sent = self.first_byte

    def trace(self, name: str, info: Mapping[str, Any]) -> None:
        """A trace hook (:mod:`chunkwise._net.trace`): each transport step's stamp, taken now."""
        if name == "receive_body.complete":
            self.read(info["arrived"])
        elif name == "attempt.started":
            self.start_attempt()
        elif name == "connect.complete":
            self.connected_now()
        elif name == "reuse.complete":
            self.reused()
        elif name == "send_request.complete":
            self.request_sent_now()
        elif name == "receive_head.complete":
            self.response_head_now(info["first_byte"])

    # -- the body (chunkwise._stream) -------------------------------------------

    def read(self, arrived: float | None = None) -> float:
        """Stamp a read of the body at ``arrived``, when the transport knows it (rule 2)."""
        self.reads += 1
        if arrived is None:
            now = self.clock()
        else:
            floor = self.read_at if self.read_at is not None else self.response_head
            now = arrived if floor is None else max(arrived, floor)
        self.read_at = now
        return now

    def event(self) -> None:
        """The current read completed a server-sent event carrying data."""
        if self.first_event is None and self._final is None:
            self.first_event = self.read_at

    def output(self, content: bool) -> None:
        """The current read carried output (``content``: visible answer text); it counts once."""
        now = self.read_at
        if now is None:
            raise RuntimeError("output() before read()")
        if self._final is not None:
            return
        if self._output_read != self.reads:
            self._output_read = self.reads
            last = self.last_output
            if last is None:
                self.first_output = now
            else:
                self.gaps.add(now - last)
        if content and self.first_content is None:
            self.first_content = now
        self.last_output = now

    def end(self) -> None:
        """The reading stopped now (unless the stream already ended: the first end counts)."""
        if self.ended is None:
            self.ended = self.clock()

    # -- the figures -----------------------------------------------------------

    def final(self, usage: Mapping[str, Any] | None = None) -> Timings:
        """The final figures, frozen from now on (rule 5); the stream ends at the last read."""
        if self._final is None:
            if self.ended is None:
                self.ended = self.read_at if self.read_at is not None else self.clock()
            self._final = self.timings(usage)
        return self._final

    def timings(self, usage: Mapping[str, Any] | None = None) -> Timings:
        """The figures so far (final once :meth:`final` was called)."""
        if self._final is not None:
            return self._final
        start = self.started

        def since(stamp: float | None) -> float | None:
            return None if stamp is None else stamp - start

        return Timings(
            started=start,
            connected=since(self.connected),
            request_sent=since(self.request_sent),
            response_head=since(self.response_head),
            first_byte=since(self.first_byte),
            first_event=since(self.first_event),
            first_output=since(self.first_output),
            first_content=since(self.first_content),
            last_output=since(self.last_output),
            ended=since(self.ended),
            connection_reused=self.connection_reused,
            attempts=max(self.attempts, 1),
            output_tokens=output_tokens_of(usage),
            gaps=self.gaps.statistics(),
        )


#: The fields in which servers report their own timings: llama.cpp's
#: ``timings`` (prompt and predicted counts and milliseconds) and vLLM's ``metrics``.
SERVER_TIMING_KEYS = ("timings", "metrics")


def take_server_timings(
    payload: Mapping[str, Any], kept: Mapping[str, Any] | None, *, copy: bool
) -> Mapping[str, Any] | None:
    """``kept`` with the server-timing objects of ``payload`` (a chunk, an event) in it.

    ``kept`` itself when there are none, else a new mapping (a result holding
    the old one never changes); ``copy``: copy them, from a caller's mapping.
    """
    found: dict[str, Any] | None = None
    for key in SERVER_TIMING_KEYS:
        value = payload.get(key)
        if isinstance(value, Mapping):
            if found is None:
                found = dict(kept) if kept is not None else {}
            found[key] = copy_json(value) if copy else value
    return kept if found is None else found


def event_server_timings(
    event: Mapping[str, Any], kept: Mapping[str, Any] | None
) -> Mapping[str, Any] | None:
    """``kept`` with a Responses event's figures: beside its ``response`` (llama.cpp) or in it."""
    if "timings" in event or "metrics" in event:
        kept = take_server_timings(event, kept, copy=False)
    response = event.get("response")
    if type(response) is dict and ("timings" in response or "metrics" in response):
        kept = take_server_timings(response, kept, copy=False)
    return kept

"""One trace hook around each transport step, and the timings computed from it.

Theory of operation
-------------------
httpcore's ``_trace.py`` is the model.  Each step of the transport runs inside
a :class:`Trace`, which calls one hook, ``hook(event_name, info)``, as the step
starts (``"<step>.started"``) and as it ends (``"<step>.complete"``, or
``"<step>.failed"`` with the exception in ``info["exception"]``).  The steps:

=================== ================================== =============================
step                where                              info when complete
=================== ================================== =============================
``attempt``         an attempt begins (slot held)      ``{}``
``connect_tcp``     TCP to the origin or the proxy     ``{}``
``proxy_tunnel``    an https origin's CONNECT          ``{}``
``start_tls``       the TLS handshake                  ``{}``
``connect``         the three above, as one            ``{}``
``reuse``           a pooled connection taken instead  ``{}``
``send_request``    the request handed to the socket   ``{}``
``receive_head``    the final response head read       ``{"first_byte": stamp}``
``receive_body``    one read of the body               ``{"bytes": n, "arrived": stamp}``
``retry``           the wait before the next attempt   ``{"delay", "retry", "of",
                                                       "error", "target"}``
``close``           the response given up              ``{"reused": bool}``
=================== ================================== =============================

A stamp is trio's clock, or ``None`` where the transport knows no better
(:mod:`chunkwise._net.arrivals`).  Every event goes to the logging first
(:func:`log_event`: retries at ``INFO`` on ``chunkwise``, the rest at ``DEBUG``
on ``chunkwise.trace``), then to the caller's hook, if any.

The stream's timings are computed here: :class:`Timed`'s recorder is the hook,
and :meth:`Timed.carried` notes what each read carried (an event, output,
answer text).  They reach the final result in one place: :meth:`Timed.carried`
replaces the terminal event's result by ``attrs.evolve(result, timings=...)``,
and :attr:`Timed.result` is that result from then on.  Parsers and
accumulators know nothing of timings: a sans-IO result keeps ``timings=None``.

Telemetry (:mod:`chunkwise._core.telemetry`), when the endpoint has some, is
fed by the same hook (:attr:`Timed.hook`: the recorder, then the stream's
span) and ended by :meth:`Timed.close` with the final result and figures,
when the stream ends: no second stamping path.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, Generic, TypeVar

import attrs

from .._core.events import Event, StreamCompleted, StreamFailed, StreamIncomplete
from .._core.parser import StreamParser
from .._core.telemetry import StreamTelemetry
from .._core.timings import TimingRecorder, Timings

__all__ = ["Timed", "Trace", "TraceHook", "log_event", "traced"]

#: ``hook(event_name, info)``: called as each step starts and ends.
TraceHook = Callable[[str, Mapping[str, Any]], None]
R = TypeVar("R")

_log = logging.getLogger("chunkwise")
#: Every step, at DEBUG, apart from the pool's own log on ``chunkwise``.
_steps = logging.getLogger("chunkwise.trace")
_TERMINAL = (StreamCompleted, StreamIncomplete, StreamFailed)


def log_event(name: str, info: Mapping[str, Any]) -> None:
    """The logging the trace feeds: retries at ``INFO``, every other event at ``DEBUG``."""
    if name == "retry.started":
        _log.info(
            "retrying %s in %.2f s (retry %d of %d): %s",
            info["target"],
            info["delay"],
            info["retry"],
            info["of"],
            info["error"],
        )
    elif _steps.isEnabledFor(logging.DEBUG):
        _steps.debug("%s %s", name, dict(info))


def traced(hook: TraceHook | None) -> TraceHook:
    """The hook a step calls: the logging, then ``hook`` when one is given."""
    if hook is None:
        return log_event

    def both(name: str, info: Mapping[str, Any]) -> None:
        log_event(name, info)
        hook(name, info)

    return both


class Trace:
    """``with Trace("step", hook) as trace:``; the step puts what it learned in ``trace.info``."""

    __slots__ = ("hook", "info", "name")

    def __init__(self, name: str, hook: TraceHook, **info: Any) -> None:
        self.name = name
        self.hook = hook
        self.info: dict[str, Any] = info

    def __enter__(self) -> Trace:
        self.hook(f"{self.name}.started", self.info)
        self.info = {}
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exc is None:
            self.hook(f"{self.name}.complete", self.info)
        else:
            self.hook(f"{self.name}.failed", {"exception": exc})


class Timed(Generic[R]):
    """One stream's timings: stamped by the trace hook, attached to the final result once."""

    __slots__ = ("_final", "_parser", "_raw", "hook", "recorder", "telemetry")

    def __init__(
        self,
        parser: StreamParser[R],
        recorder: TimingRecorder,
        telemetry: StreamTelemetry | None = None,
    ) -> None:
        self._parser = parser
        self.recorder: TimingRecorder = recorder
        self.telemetry = telemetry
        #: The stream's trace hook: the recorder's, then the telemetry's.
        self.hook: TraceHook = recorder.trace
        if telemetry is not None:
            # A closure, not a bound method: no cycle keeps the stream's parser alive.
            record, watch = recorder.trace, telemetry.trace

            def both(name: str, info: Mapping[str, Any]) -> None:
                record(name, info)
                watch(name, info)

            self.hook = both
        self._final: Timings | None = None  # once the terminal event was produced
        self._raw: tuple[object, Any] | None = None  # (parser's result, with timings)

    def again(self, parser: StreamParser[R]) -> Timed[R]:
        """The timings of the same stream for a new attempt's ``parser`` (a stream sent again)."""
        return Timed(parser, self.recorder, self.telemetry)

    def close(self) -> None:
        """The stream ended: its telemetry, if any, gets the final result and figures, once."""
        telemetry, self.telemetry = self.telemetry, None
        if telemetry is not None:
            telemetry.end(self.result, self.timings, self.recorder.gaps)

    @property
    def timings(self) -> Timings:
        """The figures so far (the final ones once the stream ended)."""
        if self._final is not None:
            return self._final
        return self.recorder.timings(getattr(self._parser.result, "usage", None))

    @property
    def result(self) -> R:
        """The parser's result, with the final timings once there are any."""
        result = self._parser.result
        if self._final is None:
            return result
        if self._raw is None or self._raw[0] is not result:
            # After the end only the anomalies can change (data after the end).
            self._raw = (result, attrs.evolve(result, timings=self._final))  # type: ignore[misc]
        return self._raw[1]

    def carried(self, events: list[Event], *, read: bool = True) -> list[Event]:
        """``events`` (what the parser gave), the terminal one given the final timings.

        ``read``: they came from the read the hook stamped last, so they count;
        events of ``end()`` or ``fail()`` do not.
        """
        if read:
            self._observe(events)
        if self._final is None and self._parser.finished:
            for at in range(len(events) - 1, -1, -1):
                event = events[at]
                if isinstance(event, _TERMINAL):
                    result = event.result
                    self._final = self.recorder.final(getattr(result, "usage", None))
                    timed = attrs.evolve(result, timings=self._final)
                    self._raw = (self._parser.result, timed)
                    events[at] = attrs.evolve(event, result=timed)
                    break
        return events

    def _observe(self, events: list[Event]) -> None:
        """Note what the current read carried: an event, output, answer text."""
        recorder = self.recorder
        if recorder.first_event is None and self._parser.events_received:
            recorder.event()
        need_content = recorder.first_content is None
        for event in events:
            if event.is_output:
                if need_content and not event.is_content:
                    content = any(e.is_content for e in events)
                else:
                    content = need_content
                recorder.output(content)
                return

"""OpenTelemetry for streams: one span and the GenAI client metrics per stream (:doc:`/telemetry`).

Theory of operation
-------------------
:func:`chunkwise.telemetry.instrument` imports opentelemetry-api, the one
place it is imported, and makes a :class:`Telemetry`: a tracer, the
instruments, and the two API values a span needs.  This module calls those
objects and imports nothing of opentelemetry.  An ``Endpoint(telemetry=...)``
gives each stream a :class:`StreamTelemetry` (:meth:`Telemetry.start`) just
before its request is sent.  The stream's trace hook
(:class:`chunkwise._net.trace.Timed`) feeds it the transport's steps, and it
is ended once: with the stream's final result and :class:`Timings` when the
stream ends, or with the exception that kept the stream from opening.

Rules
-----
1. One span per stream (``{operation} {model}``, kind ``CLIENT``), from the
   first send to the end: retries before the output happen inside it, each a
   ``chunkwise.retry`` event, and ``chunkwise.attempts`` counts them.
2. Nothing is stamped here but the operation's start, on the stream's clock:
   every figure is read at the end from :class:`Timings` (rule 1 there: its
   figures count from the attempt that streamed, ``Timings.started``), moved to
   count from the operation's start.  The span's end is its start plus the
   duration recorded, so the two agree, as the conventions ask.
3. The span ends and the metrics are recorded exactly once, whatever the path.
4. Telemetry never breaks or holds a stream: what the SDK or an exporter
   raises is logged on ``chunkwise`` and dropped, and nothing of the stream
   is kept but the span and the request's attributes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from .errors import HTTPStatusError
from .timings import GapHistogram, Timings

__all__ = ["LEGACY_METRICS", "METRICS", "MetricNames", "StreamTelemetry", "Telemetry"]

_log = logging.getLogger("chunkwise")


@attrs.frozen
class MetricNames:
    """The metric names of one version of the GenAI semantic conventions."""

    duration: str
    time_to_first_chunk: str
    time_per_output_chunk: str
    #: Input and output token counters; ``None``: one histogram ``tokens`` instead.
    input_tokens: str | None
    output_tokens: str | None
    tokens: str | None = None


#: semantic-conventions-genai (``gen_ai.client.inference.*``), the default.
METRICS = MetricNames(
    duration="gen_ai.client.inference.duration",
    time_to_first_chunk="gen_ai.client.inference.time_to_first_chunk",
    time_per_output_chunk="gen_ai.client.inference.time_per_output_chunk",
    input_tokens="gen_ai.client.inference.usage.input_tokens",
    output_tokens="gen_ai.client.inference.usage.output_tokens",
)
#: semantic-conventions v1.41.0 (``gen_ai.client.operation.*``): ``legacy_names=True``.
LEGACY_METRICS = MetricNames(
    duration="gen_ai.client.operation.duration",
    time_to_first_chunk="gen_ai.client.operation.time_to_first_chunk",
    time_per_output_chunk="gen_ai.client.operation.time_per_output_chunk",
    input_tokens=None,
    output_tokens=None,
    tokens="gen_ai.client.token.usage",
)
#: The conventions' bucket advice for the durations, and for token counts.
SECONDS_BUCKETS = tuple(0.01 * 2**k for k in range(14))  # 0.01 to 81.92
TOKEN_BUCKETS = tuple(4**k for k in range(14))
#: ``gen_ai.operation.name`` by API; another API's name is its own.
OPERATIONS = {"chat": "chat", "responses": "chat", "completions": "text_completion"}
#: Request fields copied on the span: (attribute, the request's keys, in order).
REQUEST_ATTRIBUTES = (
    ("gen_ai.request.max_tokens", ("max_completion_tokens", "max_tokens", "max_output_tokens")),
    ("gen_ai.request.temperature", ("temperature",)),
    ("gen_ai.request.top_p", ("top_p",)),
    ("gen_ai.request.seed", ("seed",)),
    ("gen_ai.request.frequency_penalty", ("frequency_penalty",)),
    ("gen_ai.request.presence_penalty", ("presence_penalty",)),
)
#: The transport's steps (:mod:`chunkwise._net.trace`) that become span events.
EVENTS = {
    "connect.complete": "chunkwise.connect",
    "start_tls.complete": "chunkwise.start_tls",
    "reuse.complete": "chunkwise.reuse",
    "send_request.complete": "chunkwise.send_request",
    "receive_head.complete": "chunkwise.receive_head",
    "retry.started": "chunkwise.retry",
}


class Telemetry:
    """What :func:`chunkwise.telemetry.instrument` made; give it as ``Endpoint(telemetry=...)``."""

    def __init__(
        self,
        tracer: Any,
        meter: Any,
        *,
        names: MetricNames,
        provider_name: str,
        client_kind: Any,
        error_status: Any,
    ) -> None:
        self.names = names
        self.provider_name = provider_name
        self._tracer = tracer
        self._kind = client_kind
        self.error_status = error_status

        def seconds(name: str, what: str) -> Any:
            advice = list(SECONDS_BUCKETS)
            return meter.create_histogram(
                name, unit="s", description=what, explicit_bucket_boundaries_advisory=advice
            )

        # The instruments are opentelemetry's (Histogram, Counter): Any here, so
        # that this module imports nothing of it (rule 1).
        self.duration: Any = seconds(names.duration, "GenAI client inference operation duration.")
        self.time_to_first_chunk: Any = seconds(
            names.time_to_first_chunk, "Time to receive the first chunk of the response stream."
        )
        self.time_per_output_chunk: Any = seconds(
            names.time_per_output_chunk, "Time between reads carrying output, after the first."
        )
        counter = meter.create_counter
        self.input_tokens: Any = None
        self.output_tokens: Any = None
        self.tokens: Any = None
        if names.input_tokens is not None and names.output_tokens is not None:
            self.input_tokens = counter(names.input_tokens, unit="{token}", description="Input.")
            self.output_tokens = counter(names.output_tokens, unit="{token}", description="Output.")
        if names.tokens is not None:
            self.tokens = meter.create_histogram(
                names.tokens,
                unit="{token}",
                description="Number of input and output tokens used.",
                explicit_bucket_boundaries_advisory=list(TOKEN_BUCKETS),
            )

    def start(
        self, api: str, host: str, port: int, request: Mapping[str, Any], clock: Callable[[], float]
    ) -> StreamTelemetry:
        """A stream's span, started now (its request is about to be sent)."""
        operation = OPERATIONS.get(api, api)
        model = request.get("model")
        common: dict[str, Any] = {
            "gen_ai.operation.name": operation,
            "gen_ai.provider.name": self.provider_name,
            "server.address": host,
            "server.port": port,
        }
        if isinstance(model, str):
            common["gen_ai.request.model"] = model
        span_attributes = {**common, "gen_ai.request.stream": True}
        for attribute, keys in REQUEST_ATTRIBUTES:
            for key in keys:
                value = request.get(key)
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    span_attributes[attribute] = value
                    break
        stop = request.get("stop")
        if isinstance(stop, str):
            stop = [stop]
        if isinstance(stop, list) and all(isinstance(s, str) for s in stop):
            span_attributes["gen_ai.request.stop_sequences"] = stop
        choices = request.get("n")
        if type(choices) is int and choices != 1:
            span_attributes["gen_ai.request.choice.count"] = choices
        name = f"{operation} {model}" if isinstance(model, str) else operation
        return StreamTelemetry(self, name, common, span_attributes, clock)

    def start_span(self, name: str, attributes: Mapping[str, Any], start_ns: int) -> Any:
        return self._tracer.start_span(
            name, kind=self._kind, attributes=attributes, start_time=start_ns
        )


class StreamTelemetry:
    """One stream's span and figures; fed by the trace hook, ended once (the module's rules)."""

    __slots__ = ("_attributes", "_began", "_clock", "_span", "_start_ns", "_telemetry")

    def __init__(
        self,
        telemetry: Telemetry,
        name: str,
        attributes: dict[str, Any],
        span_attributes: Mapping[str, Any],
        clock: Callable[[], float],
    ) -> None:
        self._telemetry: Telemetry | None = telemetry
        self._attributes = attributes  # the metrics' attributes known at the start
        self._clock = clock
        self._began = clock()
        self._start_ns = time.time_ns()
        self._span: Any = None
        try:
            self._span = telemetry.start_span(name, span_attributes, self._start_ns)
        except Exception:
            _log.warning("chunkwise telemetry: the span could not be started", exc_info=True)

    def _at(self, since: float) -> int:
        """The span's time (ns since the epoch) ``since`` seconds after the operation began."""
        return self._start_ns + round(since * 1e9)

    def trace(self, name: str, info: Mapping[str, Any]) -> None:
        """A trace hook: the transport's steps as span events (rule 1)."""
        event = EVENTS.get(name)
        if event is None or self._span is None:
            return
        attributes: dict[str, Any] = {}
        if event == "chunkwise.retry":
            attributes = {
                "chunkwise.retry": info["retry"],
                "chunkwise.retry.delay": info["delay"],
                "error.type": error_type(info["error"]),
            }
        try:
            self._span.add_event(event, attributes, self._at(self._clock() - self._began))
        except Exception:
            _log.warning("chunkwise telemetry: a span event was lost", exc_info=True)

    def fail(self, error: BaseException) -> None:
        """The stream never opened: ``error`` ends the span, and the operation (rule 3)."""
        self._end(self._clock() - self._began, None, None, None, error_type(error), str(error))

    def end(self, result: Any, timings: Timings, gaps: GapHistogram) -> None:
        """The stream ended with ``result`` (its final ``timings``): the figures, once (rule 2)."""
        moved = timings.started - self._began  # retries and waits before the attempt
        duration = moved + (timings.ended or 0.0)
        first = None if timings.first_event is None else moved + timings.first_event
        status = getattr(result, "status", None)
        kind = description = None
        if status == "failed":
            error = getattr(result, "error", None)
            kind = error_type(error) if error is not None else "failed"
            description = str(error) if error is not None else "failed"
        elif status != "complete":
            reason = getattr(result, "reason", None)
            kind = reason.name.lower() if reason is not None else "incomplete"
            description = f"incomplete: {reason}"
        self._end(duration, result, first, (timings, gaps), kind, description)

    def _end(
        self,
        duration: float,
        result: Any,
        first_chunk: float | None,
        figures: tuple[Timings, GapHistogram] | None,
        error: str | None,
        description: str | None,
    ) -> None:
        span, self._span = self._span, None
        telemetry = self._telemetry
        if telemetry is None:
            return  # ended already (rule 3)
        self._telemetry = None
        attributes = dict(self._attributes)
        model = getattr(result, "model", None)
        if isinstance(model, str):
            attributes["gen_ai.response.model"] = model
        usage = getattr(result, "usage", None)
        tokens = _tokens(usage if isinstance(usage, Mapping) else None)
        try:
            if span is not None:
                span.set_attributes(
                    _span_attributes(attributes, result, tokens, first_chunk, figures)
                )
                if error is not None:
                    span.set_attribute("error.type", error)
                    span.set_status(telemetry.error_status, description)
                span.end(end_time=self._at(duration))
            timed = attributes if error is None else {**attributes, "error.type": error}
            telemetry.duration.record(duration, timed)
            if first_chunk is not None:
                telemetry.time_to_first_chunk.record(first_chunk, attributes)
            if figures is not None:
                for gap, count in figures[1].values():
                    for _ in range(count):
                        telemetry.time_per_output_chunk.record(gap, attributes)
            _record_tokens(telemetry, attributes, tokens)
        except Exception:
            _log.warning("chunkwise telemetry: the stream's figures were lost", exc_info=True)


def error_type(error: object) -> str:
    """``error.type``: an HTTP status code, else the exception's canonical class name."""
    if isinstance(error, HTTPStatusError):
        return str(error.status_code)
    kind = type(error)
    return f"{kind.__module__}.{kind.__qualname__}"


def _tokens(usage: Mapping[str, Any] | None) -> tuple[int | None, int | None]:
    """(input, output) of a chat, completions or Responses usage."""
    if usage is None:
        return None, None
    found: list[int | None] = []
    for keys in (("prompt_tokens", "input_tokens"), ("completion_tokens", "output_tokens")):
        values = [usage.get(key) for key in keys]
        found.append(next((v for v in values if type(v) is int and v >= 0), None))
    return found[0], found[1]


def _finish_reasons(result: Any) -> list[str]:
    """Each choice's finish reason (chat, completions); a Responses answer's status."""
    choices = getattr(result, "choices", None)
    if choices is not None:
        return [c.finish_reason for c in choices if isinstance(c.finish_reason, str)]
    reason = getattr(result, "incomplete_reason", None) or getattr(result, "response_status", None)
    return [reason] if isinstance(reason, str) else []


def _span_attributes(
    attributes: Mapping[str, Any],
    result: Any,
    tokens: tuple[int | None, int | None],
    first_chunk: float | None,
    figures: tuple[Timings, GapHistogram] | None,
) -> dict[str, Any]:
    found = {k: v for k, v in attributes.items() if k == "gen_ai.response.model"}
    response_id = getattr(result, "id", None)
    if isinstance(response_id, str):
        found["gen_ai.response.id"] = response_id
    reasons = _finish_reasons(result)
    if reasons:
        found["gen_ai.response.finish_reasons"] = reasons
    for key, value in zip(
        ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"), tokens, strict=True
    ):
        if value is not None:
            found[key] = value
    if first_chunk is not None:
        found["gen_ai.response.time_to_first_chunk"] = first_chunk
    if figures is not None:
        found["chunkwise.attempts"] = figures[0].attempts
    return found


def _record_tokens(
    telemetry: Telemetry, attributes: Mapping[str, Any], tokens: tuple[int | None, int | None]
) -> None:
    """The usage, as counters (every operation, 0 without usage) or the legacy histogram."""
    if telemetry.tokens is not None:
        for kind, value in zip(("input", "output"), tokens, strict=True):
            if value is not None:
                telemetry.tokens.record(value, {**attributes, "gen_ai.token.type": kind})
        return
    counted = {**attributes, "gen_ai.token.modality": "unknown"}
    for counter, value in zip(
        (telemetry.input_tokens, telemetry.output_tokens), tokens, strict=True
    ):
        if counter is not None:
            counter.add(value or 0, counted)

"""Layers 1-3 together: bytes of an SSE body in, stream events out, for every API.

:class:`StreamParser` composes a :class:`~chunkwise._core.sse.PairDecoder` and
an accumulator through their public methods (wsproto's ``WSConnection`` is the
model); each API package's ``Parser`` gives it its accumulator.  Whatever the
server sends, ``feed()`` and ``end()`` do not raise: a stream that cannot be
interpreted ends with :class:`~chunkwise.StreamFailed`, and ``result`` keeps
everything received before.

A body that carries no server-sent event at all but is a JSON error document
(``{"error": {...}}``, vLLM's ``{"object": "error", ...}``, Gemini's
``[{"error": {...}}]``: what a relay or a server sends for a refused request,
sometimes with a 200 and an event-stream type) ends ``failed`` with that
error, as the same document in an ``error`` event would: the parser keeps the
first :data:`ERROR_DOCUMENT_LIMIT` bytes of a body until its first event.
"""

from __future__ import annotations

from typing import Any, Generic, Protocol, TypeVar

from .errors import ChunkwiseError, EventTooLarge, InvalidChunk, LocalProtocolError
from .events import Event, RawEvent
from .json_patches import freeze
from .payloads import dump_json, load_json
from .results import Anomaly, IncompleteReason
from .sse import DEFAULT_MAX_EVENT_SIZE, PairDecoder

__all__ = ["ERROR_DOCUMENT_LIMIT", "Accumulator", "StreamParser"]

#: The longest body read as a JSON error document when it held no event.
ERROR_DOCUMENT_LIMIT = 65536

R = TypeVar("R", covariant=True)


class Accumulator(Protocol[R]):
    """What :class:`StreamParser` needs of an accumulator (both APIs' have it)."""

    @property
    def result(self) -> R: ...

    @property
    def finished(self) -> bool: ...

    @property
    def awaiting_output(self) -> bool: ...

    def feed_data(self, kind: str, data: str) -> list[Event]: ...

    def end(
        self, reason: IncompleteReason | None = None, *, error: ChunkwiseError | None = None
    ) -> list[Event]: ...

    def fail(self, error: ChunkwiseError) -> list[Event]: ...

    def note_anomaly(self, anomaly: Anomaly) -> list[Event]: ...


class StreamParser(Generic[R]):
    """Sans-IO parser of a streamed body: ``feed()`` bytes, get events; ``end()``.

    Args:
        accumulator: What the SSE events mean (chat or Responses).
        max_event_size: Passed to the :class:`~chunkwise.SSEDecoder`.
        raw: Emit a :class:`~chunkwise.RawEvent` for every server-sent event,
            ahead of the events it produced (:meth:`emit_raw` turns it on later).
    """

    def __init__(
        self,
        accumulator: Accumulator[R],
        *,
        max_event_size: int = DEFAULT_MAX_EVENT_SIZE,
        raw: bool = False,
    ) -> None:
        self._max_event_size = max_event_size
        self._raw = False
        self._decoder = self._new_decoder()
        self._accumulator = accumulator
        if raw:
            self.emit_raw()
        self._ended = False
        self._events = 0  # server-sent events with data decoded so far
        # The body's first bytes, until its first event: it may be an error document.
        self._head: list[bytes] | None = []
        self._head_size = 0

    @property
    def result(self) -> R:
        """A snapshot of everything received so far.

        After the terminal event only the result's ``anomalies`` can still
        change, to note data that arrived after the end.
        """
        return self._accumulator.result

    @property
    def finished(self) -> bool:
        """True once the terminal event was produced."""
        return self._accumulator.finished

    @property
    def awaiting_output(self) -> bool:
        """True while more output may come (the stall timeout applies only then).

        False once the stream ended, and in chat and legacy completions once
        every started choice finished: the usage chunk and ``[DONE]`` may still
        come, bounded by the idle timeout alone.
        """
        return self._accumulator.awaiting_output

    @property
    def events_received(self) -> int:
        """Server-sent events carrying data decoded so far (comments and empty events not)."""
        return self._events

    def feed(self, data: bytes | bytearray | memoryview) -> list[Event]:
        """Parse the next bytes of the body; return the events they complete."""
        if self._ended:
            raise LocalProtocolError("feed() called after end()")
        if self._decoder.error is not None:
            return []  # the stream already failed; it is over
        if self._head is not None:
            self._keep_head(self._head, data)
        return self._decode(data)

    def _keep_head(self, head: list[bytes], data: bytes | bytearray | memoryview) -> None:
        if self._events or self._head_size + len(data) > ERROR_DOCUMENT_LIMIT:
            self._head = None  # events came, or too long for an error document
        else:
            head.append(bytes(data))
            self._head_size += len(data)

    @property
    def raw(self) -> bool:
        """True when every server-sent event is also emitted as a :class:`~chunkwise.RawEvent`."""
        return self._raw

    def emit_raw(self) -> None:
        """From the next event on, emit each server-sent event as a :class:`~chunkwise.RawEvent`.

        What a stream does for its first raw subscriber; the hot path of
        a parser without raw events pays nothing for them.
        """
        self._raw = True
        self._decoder.whole_events()

    def _new_decoder(self) -> PairDecoder:
        decoder = PairDecoder(max_event_size=self._max_event_size, legacy_error_field=True)
        if self._raw:
            decoder.whole_events()
        return decoder

    def restart(self) -> None:
        """The body goes on in a new HTTP response: forget the old one's unfinished event.

        The events of the old body were all delivered; the bytes of an event
        it cut are dropped (the new body starts at an event's beginning).
        """
        self._decoder = self._new_decoder()

    def fail(self, error: ChunkwiseError) -> list[Event]:
        """End the stream as ``failed`` with ``error``, e.g. a broken body framing.

        Everything received before stays in :attr:`result`.
        """
        self._ended = True
        return self._accumulator.fail(error)

    def note_anomaly(self, anomaly: Anomaly) -> list[Event]:
        """Record an anomaly seen outside the body (e.g. by the transport)."""
        return self._accumulator.note_anomaly(anomaly)

    def end(
        self, reason: IncompleteReason | None = None, *, error: ChunkwiseError | None = None
    ) -> list[Event]:
        """The body is over; return the remaining events, ending with the terminal one.

        ``reason`` and ``error`` say why the transport stopped early, as for
        the accumulator's ``end()``.
        """
        if self._ended:
            return []
        self._ended = True
        accumulator = self._accumulator
        if accumulator.finished or self._decoder.error is not None:
            return []
        events = self._decode(None)
        document = self._error_document()
        if document is not None:  # its lines were no event: nothing was discarded
            events += accumulator.feed_data("error", document)
        elif self._decoder.unterminated:
            events += accumulator.note_anomaly(
                Anomaly(
                    kind="unterminated event",
                    detail="the stream stopped inside an event, which was discarded",
                )
            )
        if accumulator.finished:
            return events
        events += accumulator.end(reason, error=error)
        return events

    def _error_document(self) -> str | None:
        """The error of a body that held no event and is a JSON error document.

        As the data of an ``error`` event every API reads alike: ``{"error": ...}``.
        """
        if self._events or not self._head:
            return None
        text = b"".join(self._head).decode("utf-8", "replace")
        try:
            value = load_json(text)
        except InvalidChunk:
            return None
        if isinstance(value, list) and value:
            value = value[0]  # Gemini's form
        if not isinstance(value, dict):
            return None
        if "error" in value:
            return dump_json({"error": value["error"]})
        if value.get("object") == "error":  # vLLM's: the document is the error object
            return dump_json({"error": value})
        return None

    def _decode(self, data: bytes | bytearray | memoryview | None) -> list[Event]:
        # The one path from the decoder to the accumulator, for feed() and end()
        # (data None): the decoder's only error, EventTooLarge, ends the stream
        # as failed, after the events completed before it.
        decoder = self._decoder
        try:
            sse_events = decoder.feed(data) if data is not None else decoder.end()
        except EventTooLarge as exc:
            return self._accumulator.fail(exc)
        feed = self._accumulator.feed_data  # after the end too: it notes what still comes
        if not sse_events:
            return []
        if len(sse_events) == 1 and decoder.error is None and not self._raw:
            # The hot path, one event a read, given as a pair (no raw events).
            kind, text = sse_events[0]  # type: ignore[misc]
            if text:
                self._events += 1
            return feed(kind, text)
        events: list[Event] = []
        for item in sse_events:
            if isinstance(item, tuple):
                kind, text = item
            else:  # whole events: a raw subscriber's
                kind, text = item.event, item.data
                events.append(RawEvent(event=item, data=_json_object(text)))
            if text:
                self._events += 1
            events += feed(kind, text)
        if decoder.error is not None:
            events += self._accumulator.fail(decoder.error)
        return events


def _json_object(text: str) -> Any:
    """``text`` as a read-only JSON object, or None when it is not one."""
    try:
        value = load_json(text)
    except InvalidChunk:
        return None
    return freeze(value) if type(value) is dict else None

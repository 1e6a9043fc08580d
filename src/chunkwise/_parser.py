"""Layers 1-3 together: bytes of a chat-completion SSE body in, stream events out."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ._accumulator import ChatAccumulator
from ._errors import ChunkwiseError, EventTooLarge, LocalProtocolError
from ._events import Event
from ._results import Anomaly, ChatResult, IncompleteReason
from ._sse import DEFAULT_MAX_EVENT_SIZE, SSEDecoder

__all__ = ["ChatStreamParser"]


class ChatStreamParser:
    """Sans-IO parser of a streamed chat completion: ``feed()`` bytes, get events.

    Combines an :class:`~chunkwise.SSEDecoder` (with llama.cpp's legacy
    ``error:`` field enabled) and a :class:`~chunkwise.ChatAccumulator`.
    Whatever the server sends, ``feed()`` and ``end()`` do not raise: a stream
    that cannot be interpreted ends with :class:`~chunkwise.StreamFailed`, and
    :attr:`result` keeps everything received before.

    Args:
        tools: The request's ``tools``, to validate tool-call arguments.
        max_event_size: Passed to the :class:`~chunkwise.SSEDecoder`.
    """

    def __init__(
        self,
        *,
        tools: Iterable[Mapping[str, Any]] | None = None,
        max_event_size: int = DEFAULT_MAX_EVENT_SIZE,
    ) -> None:
        self._decoder = SSEDecoder(max_event_size=max_event_size, legacy_error_field=True)
        self._decoder._pairs = True  # (event type, data) pairs; see SSEDecoder
        self._accumulator = ChatAccumulator(tools=tools)
        self._ended = False

    @property
    def result(self) -> ChatResult:
        """A snapshot of everything received so far.

        After the terminal event only :attr:`ChatResult.anomalies` can still
        change, to note data that arrived after the end.
        """
        return self._accumulator.result

    @property
    def finished(self) -> bool:
        """True once the terminal event was produced."""
        return self._accumulator.finished

    def feed(self, data: bytes | bytearray | memoryview) -> list[Event]:
        """Parse the next bytes of the body; return the events they complete."""
        if self._ended:
            raise LocalProtocolError("feed() called after end()")
        if self._decoder.error is not None:
            return []  # the stream already failed; it is over
        return self._decode(data)

    def fail(self, error: ChunkwiseError) -> list[Event]:
        """End the stream as ``failed`` with ``error``, e.g. a broken body framing.

        Everything received before stays in :attr:`result`.
        """
        self._ended = True
        return self._accumulator.fail(error)

    def note_anomaly(self, anomaly: Anomaly) -> list[Event]:
        """Record an anomaly seen outside the body (e.g. by the transport)."""
        return self._accumulator.note_anomaly(anomaly)

    def end(self, reason: IncompleteReason | None = None) -> list[Event]:
        """The body is over; return the remaining events, ending with the terminal one.

        ``reason`` tells why the transport stopped early (e.g.
        :attr:`IncompleteReason.CONNECTION_LOST`); it is used only when the
        stream turns out incomplete.
        """
        if self._ended:
            return []
        self._ended = True
        accumulator = self._accumulator
        if accumulator.finished or self._decoder.error is not None:
            return []
        events = self._decode(None)
        if self._decoder.unterminated:
            events += accumulator.note_anomaly(
                Anomaly(
                    kind="unterminated event",
                    detail="the stream stopped inside an event, which was discarded",
                )
            )
        if accumulator.finished:
            return events
        events += accumulator.end(reason)
        return events

    def _decode(self, data: bytes | bytearray | memoryview | None) -> list[Event]:
        # The one path from the decoder to the accumulator, for feed() and for
        # end() (data None) alike: whatever the server sent, the decoder's only
        # error (EventTooLarge, which end() raises too when the line the body
        # cut off is too large) ends the stream as failed instead of escaping,
        # and the events completed before it are delivered first.
        decoder = self._decoder
        try:
            # (event type, data) pairs; see __init__
            sse_events: list[Any] = decoder._feed(data) if data is not None else decoder.end()
        except EventTooLarge as exc:
            return self._accumulator.fail(exc)
        # After the terminal event the accumulator ignores events but notes
        # that they came, whichever read they arrived in.
        feed = self._accumulator._feed_data
        if len(sse_events) == 1 and decoder.error is None:
            return feed(*sse_events[0])
        events: list[Event] = []
        for kind, text in sse_events:
            events += feed(kind, text)
        if decoder.error is not None:
            events += self._accumulator.fail(decoder.error)
        return events

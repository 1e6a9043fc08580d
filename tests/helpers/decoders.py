"""Every SSE decoder the library uses, run the same way, and a naive WHATWG to check them.

:data:`DECODERS` are the public :class:`chunkwise.SSEDecoder` and the pair
decoder every stream parser uses (``chunkwise._core.sse.PairDecoder``: the same
machine, giving ``(event type, data)`` pairs).  Each :class:`Decoder` writes
an expected event the way its decoder gives it (:meth:`Decoder.ev`,
:meth:`Decoder.seen`), so one expectation checks both: the pair decoder is
held to the event type and data, and to the same end-of-stream state
(``unterminated``, ``last_event_id``, ``retry``, the error).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import attrs

import chunkwise

# The parsers' decoder has no public name (it is SSEDecoder giving pairs); it
# is tested here because it is the one every parser runs.
from chunkwise._core.sse import PairDecoder

#: What the pair decoder gives for one event.
Pair = tuple[str, str]


@attrs.frozen
class Decoder:
    """One decoder class the library uses, and how to write what it gives."""

    name: str
    cls: type[chunkwise.SSEDecoder] | type[PairDecoder]

    @property
    def pairs(self) -> bool:
        """True for the parsers' decoder, which gives ``(event type, data)`` pairs."""
        return self.cls is PairDecoder

    def ev(
        self, data: str, *, event: str = "message", id: str = "", retry: int | None = None
    ) -> Any:
        """An expected event, as this decoder gives it."""
        if self.pairs:
            return (event, data)
        return chunkwise.ServerSentEvent(event=event, data=data, id=id, retry=retry)

    def seen(self, events: Iterable[Any]) -> list[Any]:
        """Expected events (:class:`~chunkwise.ServerSentEvent` or pairs) as this decoder
        gives them: the pair decoder keeps the event type and data."""
        return [
            (e.event, e.data) if self.pairs and isinstance(e, chunkwise.ServerSentEvent) else e
            for e in events
        ]

    def __str__(self) -> str:
        return self.name


def data_of(event: Any) -> str:
    """The data of an event a decoder gave (a :class:`~chunkwise.ServerSentEvent` or a pair)."""
    return event.data if isinstance(event, chunkwise.ServerSentEvent) else str(event[1])


#: Every decoder the library uses.
DECODERS = (Decoder("SSEDecoder", chunkwise.SSEDecoder), Decoder("PairDecoder", PairDecoder))

BOM = "\ufeff"
_LINE_END = re.compile(r"\r\n|\r|\n")
_ASCII_DIGITS = frozenset("0123456789")


@attrs.frozen(kw_only=True)
class SSEOutcome:
    """Everything observable after a whole stream has been decoded and ended."""

    #: ServerSentEvents, or (event type, data) pairs from the pair decoder.
    events: tuple[Any, ...]
    unterminated: bool
    last_event_id: str
    retry: int | None


def decode_sse(
    reads: Iterable[bytes | bytearray | memoryview],
    *,
    legacy_error_field: bool = False,
    max_event_size: int | None = None,
    decoder: type[chunkwise.SSEDecoder] | type[PairDecoder] = chunkwise.SSEDecoder,
) -> SSEOutcome:
    """Feed every read to a fresh ``decoder`` (:class:`chunkwise.SSEDecoder` unless
    told), then ``end()`` it."""
    kwargs: dict[str, Any] = {"legacy_error_field": legacy_error_field}
    if max_event_size is not None:
        kwargs["max_event_size"] = max_event_size
    dec = decoder(**kwargs)
    events: list[Any] = []
    for read in reads:
        events.extend(dec.feed(read))
    events.extend(dec.end())
    return SSEOutcome(
        events=tuple(events),
        unterminated=dec.unterminated,
        last_event_id=dec.last_event_id,
        retry=dec.retry,
    )


def ev(
    data: str, *, event: str = "message", id: str = "", retry: int | None = None
) -> chunkwise.ServerSentEvent:
    """Shorthand for an expected event."""
    return chunkwise.ServerSentEvent(event=event, data=data, id=id, retry=retry)


def reference_decode_sse(data: bytes, *, legacy_error_field: bool = False) -> SSEOutcome:
    """The WHATWG "Interpreting an event stream" algorithm, transcribed naively.

    It decodes the whole stream, splits it into lines and walks them: slow and
    unbounded, but obviously correct, so the incremental decoder is compared
    with it (``max_event_size`` does not exist here).
    """
    text = data.decode("utf-8", errors="replace")
    if text.startswith(BOM):
        text = text[1:]
    *lines, partial = _LINE_END.split(text)

    events: list[chunkwise.ServerSentEvent] = []
    data_lines: list[str] = []
    error_lines: list[str] = []
    event_type = ""
    last_event_id = ""
    id_buffer = ""  # WHATWG's "last event ID buffer": committed at each blank line
    retry: int | None = None
    block_retry: int | None = None
    pending_fields = False  # any non-comment line since the last blank line
    for line in lines:
        if line == "":
            last_event_id = id_buffer
            if data_lines:
                events.append(
                    chunkwise.ServerSentEvent(
                        event=event_type or "message",
                        data="\n".join(data_lines),
                        id=last_event_id,
                        retry=block_retry,
                    )
                )
            elif legacy_error_field and error_lines:
                events.append(
                    chunkwise.ServerSentEvent(
                        event="error",
                        data="\n".join(error_lines),
                        id=last_event_id,
                        retry=block_retry,
                    )
                )
            data_lines, error_lines = [], []
            event_type, block_retry, pending_fields = "", None, False
            continue
        if line.startswith(":"):
            continue
        pending_fields = True
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            data_lines.append(value)
        elif name == "event":
            event_type = value
        elif name == "id":
            if "\0" not in value:
                id_buffer = value
        elif name == "retry":
            if value and set(value) <= _ASCII_DIGITS:
                retry = block_retry = int(value)
        elif name == "error" and legacy_error_field:
            error_lines.append(value)

    # A partial line or any field line (known or not) not yet followed by a
    # blank line is discarded: "unterminated".  Comments never count.
    partial_is_field = bool(partial) and not partial.startswith(":")
    return SSEOutcome(
        events=tuple(events),
        unterminated=pending_fields or partial_is_field,
        last_event_id=last_event_id,
        retry=retry,
    )

"""Running the SSE decoder, and a naive transcription of WHATWG to check it against."""

from __future__ import annotations

import re
from collections.abc import Iterable

import attrs

import chunkwise

BOM = "\ufeff"
_LINE_END = re.compile(r"\r\n|\r|\n")
_ASCII_DIGITS = frozenset("0123456789")


@attrs.frozen(kw_only=True)
class SSEOutcome:
    """Everything observable after a whole stream has been decoded and ended."""

    events: tuple[chunkwise.ServerSentEvent, ...]
    unterminated: bool
    last_event_id: str
    retry: int | None


def decode_sse(
    reads: Iterable[bytes | bytearray | memoryview],
    *,
    legacy_error_field: bool = False,
    max_event_size: int | None = None,
) -> SSEOutcome:
    """Feed every read to a fresh :class:`chunkwise.SSEDecoder`, then ``end()`` it."""
    if max_event_size is None:
        decoder = chunkwise.SSEDecoder(legacy_error_field=legacy_error_field)
    else:
        decoder = chunkwise.SSEDecoder(
            max_event_size=max_event_size, legacy_error_field=legacy_error_field
        )
    events: list[chunkwise.ServerSentEvent] = []
    for read in reads:
        events.extend(decoder.feed(read))
    events.extend(decoder.end())
    return SSEOutcome(
        events=tuple(events),
        unterminated=decoder.unterminated,
        last_event_id=decoder.last_event_id,
        retry=decoder.retry,
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

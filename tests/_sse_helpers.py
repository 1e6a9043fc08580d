"""Shared helpers for the SSE decoder tests.

``parse`` drives a real :class:`chunkwise.SSEDecoder` over a sequence of reads
and captures everything observable at the end.  ``reference_parse`` is a
deliberately naive, whole-stream transcription of the WHATWG "Interpreting an
event stream" algorithm (decode everything, split into lines, walk the lines):
it is slow and unbounded, but obviously correct, so the incremental decoder
can be compared with it.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Sequence

import attrs

import chunkwise

ServerSentEvent = chunkwise.ServerSentEvent

BOM = "\ufeff"
_LINE_END = re.compile(r"\r\n|\r|\n")
_ASCII_DIGITS = frozenset("0123456789")


@attrs.frozen(kw_only=True)
class Outcome:
    """Everything observable after feeding a whole stream and calling ``end()``."""

    events: tuple[ServerSentEvent, ...]
    unterminated: bool
    last_event_id: str
    retry: int | None


def parse(
    reads: Iterable[bytes | bytearray | memoryview],
    *,
    legacy_error_field: bool = False,
    max_event_size: int | None = None,
) -> Outcome:
    """Feed every read to a fresh decoder, then ``end()`` it."""
    if max_event_size is None:
        dec = chunkwise.SSEDecoder(legacy_error_field=legacy_error_field)
    else:
        dec = chunkwise.SSEDecoder(
            max_event_size=max_event_size, legacy_error_field=legacy_error_field
        )
    events: list[ServerSentEvent] = []
    for read in reads:
        events.extend(dec.feed(read))
    events.extend(dec.end())
    return Outcome(
        events=tuple(events),
        unterminated=dec.unterminated,
        last_event_id=dec.last_event_id,
        retry=dec.retry,
    )


def split_at(data: bytes, cuts: Iterable[int]) -> list[bytes]:
    """Split ``data`` at the given offsets (any order, duplicates give empty reads)."""
    points = [0, *sorted(cuts), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(points)]


def byte_reads(data: bytes) -> list[bytes]:
    """``data`` as one-byte reads."""
    return [data[i : i + 1] for i in range(len(data))]


def ev(
    data: str, *, event: str = "message", id: str = "", retry: int | None = None
) -> ServerSentEvent:
    """Shorthand for an expected event."""
    return ServerSentEvent(event=event, data=data, id=id, retry=retry)


@attrs.frozen(kw_only=True)
class ReferenceOutcome:
    """What the naive reference parser says."""

    events: tuple[ServerSentEvent, ...]
    unterminated: bool
    last_event_id: str
    retry: int | None


def reference_parse(data: bytes, *, legacy_error_field: bool = False) -> ReferenceOutcome:
    """A direct transcription of the WHATWG algorithm over the whole stream."""
    text = data.decode("utf-8", errors="replace")
    if text.startswith(BOM):
        text = text[1:]
    *lines, partial = _LINE_END.split(text)

    events: list[ServerSentEvent] = []
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
                    ServerSentEvent(
                        event=event_type or "message",
                        data="\n".join(data_lines),
                        id=last_event_id,
                        retry=block_retry,
                    )
                )
            elif legacy_error_field and error_lines:
                events.append(
                    ServerSentEvent(
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
    return ReferenceOutcome(
        events=tuple(events),
        unterminated=pending_fields or partial_is_field,
        last_event_id=last_event_id,
        retry=retry,
    )


def as_buffers(
    reads: Sequence[bytes], kinds: Sequence[int]
) -> list[bytes | bytearray | memoryview]:
    """Turn each read into bytes, a bytearray or a memoryview (cycling through ``kinds``)."""
    out: list[bytes | bytearray | memoryview] = []
    for i, read in enumerate(reads):
        kind = kinds[i % len(kinds)] if kinds else 0
        if kind == 1:
            out.append(bytearray(read))
        elif kind == 2:
            # A view into the middle of a larger buffer, not offset 0.
            out.append(memoryview(b"#" + read + b"#")[1:-1])
        else:
            out.append(read)
    return out

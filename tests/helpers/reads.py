"""Cutting bytes (or text) into reads, and feeding reads or decoded payloads to the parsers.

``parse_*`` feed bytes to a fresh API parser and end it; ``accumulate*`` feed
decoded payloads to a fresh accumulator and end it; both return the events and
the result, so two ways of feeding compare with ``==``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import chunkwise

# --- cutting ---------------------------------------------------------------------------


def split_text(text: str, cuts: Iterable[int]) -> list[str]:
    """``text`` cut at the given offsets (clamped, any order; repeats give empty pieces)."""
    points = [0, *sorted(min(max(cut, 0), len(text)) for cut in cuts), len(text)]
    return [text[a:b] for a, b in itertools.pairwise(points)]


def split_at(data: bytes, cuts: Iterable[int]) -> list[bytes]:
    """``data`` cut at the given offsets, which may come in any order.

    Offsets are clamped to ``0..len(data)``; a repeated offset, or one at
    either end, gives an empty read, which every layer must also accept.
    """
    points = [0, *sorted(min(max(cut, 0), len(data)) for cut in cuts), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(points)]


def pieces_of(data: bytes, size: int) -> list[bytes]:
    """``data`` as reads of ``size`` bytes (the last one may be shorter)."""
    return [data[i : i + size] for i in range(0, len(data), size)]


def byte_reads(data: bytes) -> list[bytes]:
    """``data`` as one-byte reads."""
    return pieces_of(data, 1)


def as_buffers(
    reads: Sequence[bytes], kinds: Sequence[int]
) -> list[bytes | bytearray | memoryview]:
    """Each read as bytes (0), a bytearray (1) or a memoryview (2), cycling through ``kinds``."""
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


# --- feeding the parsers ---------------------------------------------------------------


def parse_chat(
    reads: Iterable[bytes], **kwargs: Any
) -> tuple[list[chunkwise.Event], chunkwise.chat.Result]:
    """Feed every read to a fresh :class:`chunkwise.chat.Parser`; its events and result."""
    parser = chunkwise.chat.Parser(**kwargs)
    events: list[chunkwise.Event] = []
    for read in reads:
        events += parser.feed(read)
    events += parser.end()
    return events, parser.result


def accumulate(
    chunks: Sequence[Mapping[str, Any]], **kwargs: Any
) -> tuple[list[chunkwise.Event], chunkwise.chat.Result]:
    """Feed decoded chunks to a fresh :class:`chunkwise.chat.Accumulator`."""
    accumulator = chunkwise.chat.Accumulator(**kwargs)
    events: list[chunkwise.Event] = []
    for c in chunks:
        events += accumulator.feed(c)
    events += accumulator.end()
    return events, accumulator.result


def parse_completion(
    reads: Iterable[bytes],
) -> tuple[list[chunkwise.Event], chunkwise.completions.Result]:
    """Feed every read to a fresh :class:`chunkwise.completions.Parser`."""
    parser = chunkwise.completions.Parser()
    events: list[chunkwise.Event] = []
    for read in reads:
        events += parser.feed(read)
    events += parser.end()
    return events, parser.result


def accumulate_completion(
    chunks: Sequence[Mapping[str, Any]],
) -> tuple[list[chunkwise.Event], chunkwise.completions.Result]:
    """Feed decoded chunks to a fresh :class:`chunkwise.completions.Accumulator`."""
    accumulator = chunkwise.completions.Accumulator()
    events: list[chunkwise.Event] = []
    for c in chunks:
        events += accumulator.feed(c)
    events += accumulator.end()
    return events, accumulator.result


def terminal(events: Sequence[chunkwise.Event]) -> chunkwise.Event:
    """The one terminal event, checked to be the last one."""
    terminals = [e for e in events if isinstance(e, chunkwise.TerminalEvent)]
    assert len(terminals) == 1, terminals
    assert events[-1] is terminals[0]
    return terminals[0]


def parse_response(
    reads: Iterable[bytes], **kwargs: Any
) -> tuple[list[chunkwise.Event], chunkwise.responses.Result]:
    """Feed every read to a fresh :class:`chunkwise.responses.Parser`; its events and result."""
    parser = chunkwise.responses.Parser(**kwargs)
    events: list[chunkwise.Event] = []
    for read in reads:
        events += parser.feed(read)
    events += parser.end()
    return events, parser.result


def accumulate_response(
    events: Iterable[Mapping[str, Any]], **kwargs: Any
) -> tuple[list[chunkwise.Event], chunkwise.responses.Result]:
    """Feed decoded events to a fresh :class:`chunkwise.responses.Accumulator`, then end it."""
    accumulator = chunkwise.responses.Accumulator(**kwargs)
    out: list[chunkwise.Event] = []
    for event in events:
        out += accumulator.feed(event)
    out += accumulator.end()
    return out, accumulator.result


def parse_message(
    reads: Iterable[bytes], **kwargs: Any
) -> tuple[list[chunkwise.Event], chunkwise.messages.Result]:
    """Feed every read to a fresh :class:`chunkwise.messages.Parser`; its events and result."""
    parser = chunkwise.messages.Parser(**kwargs)
    events: list[chunkwise.Event] = []
    for read in reads:
        events += parser.feed(read)
    events += parser.end()
    return events, parser.result


def accumulate_message(
    events: Iterable[Mapping[str, Any]], **kwargs: Any
) -> tuple[list[chunkwise.Event], chunkwise.messages.Result]:
    """Feed decoded events to a fresh :class:`chunkwise.messages.Accumulator`, then end it."""
    accumulator = chunkwise.messages.Accumulator(**kwargs)
    out: list[chunkwise.Event] = []
    for event in events:
        out += accumulator.feed(event)
    out += accumulator.end()
    return out, accumulator.result

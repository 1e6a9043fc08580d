"""Layers 1-3 for legacy completions: bytes of a ``/completions`` SSE body in, events out."""

from __future__ import annotations

from .._core.parser import StreamParser
from .._core.sse import DEFAULT_MAX_EVENT_SIZE
from .accumulator import Accumulator
from .results import Result

__all__ = ["Parser"]


class Parser(StreamParser[Result]):
    """Sans-IO parser of a streamed legacy completion, as :class:`~chunkwise.chat.Parser`."""

    def __init__(self, *, max_event_size: int = DEFAULT_MAX_EVENT_SIZE, raw: bool = False) -> None:
        super().__init__(Accumulator(), max_event_size=max_event_size, raw=raw)

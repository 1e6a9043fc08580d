"""Layers 1-3 for Anthropic Messages: bytes of a ``/v1/messages`` SSE body in, events out."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .._core.parser import StreamParser
from .._core.sse import DEFAULT_MAX_EVENT_SIZE
from .accumulator import Accumulator
from .results import Result

__all__ = ["Parser"]


class Parser(StreamParser[Result]):
    """Sans-IO parser of a streamed Messages API body: ``feed()`` bytes, get events.

    An :class:`~chunkwise.SSEDecoder` given ``max_event_size``, and a
    :class:`~chunkwise.messages.Accumulator` given ``tools`` and
    ``output_format``, as for :class:`~chunkwise.chat.Parser`.
    """

    def __init__(
        self,
        *,
        tools: Iterable[Mapping[str, Any]] | None = None,
        output_format: Mapping[str, Any] | None = None,
        max_event_size: int = DEFAULT_MAX_EVENT_SIZE,
        raw: bool = False,
    ) -> None:
        accumulator = Accumulator(tools=tools, output_format=output_format)
        super().__init__(accumulator, max_event_size=max_event_size, raw=raw)

"""Layers 1-3 for chat completions: bytes of a ``/chat/completions`` SSE body in, events out."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .._core.parser import StreamParser
from .._core.sse import DEFAULT_MAX_EVENT_SIZE
from .accumulator import Accumulator
from .results import Result

__all__ = ["Parser"]


class Parser(StreamParser[Result]):
    """Sans-IO parser of a streamed chat completion: ``feed()`` bytes, get events.

    An :class:`~chunkwise.SSEDecoder` (with llama.cpp's legacy ``error:``
    field enabled) given ``max_event_size``, and a
    :class:`~chunkwise.chat.Accumulator` given the other arguments.
    """

    def __init__(
        self,
        *,
        tools: Iterable[Mapping[str, Any]] | None = None,
        response_format: Mapping[str, Any] | None = None,
        max_event_size: int = DEFAULT_MAX_EVENT_SIZE,
    ) -> None:
        super().__init__(
            Accumulator(tools=tools, response_format=response_format),
            max_event_size=max_event_size,
        )

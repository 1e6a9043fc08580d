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
    :class:`~chunkwise.chat.Accumulator` given ``tools`` and
    ``response_format``.  With ``raw=True`` every server-sent event is also
    emitted as a :class:`~chunkwise.RawEvent`, ahead of its events.
    """

    def __init__(
        self,
        *,
        tools: Iterable[Mapping[str, Any]] | None = None,
        response_format: Mapping[str, Any] | None = None,
        max_event_size: int = DEFAULT_MAX_EVENT_SIZE,
        raw: bool = False,
    ) -> None:
        super().__init__(
            Accumulator(tools=tools, response_format=response_format),
            max_event_size=max_event_size,
            raw=raw,
        )

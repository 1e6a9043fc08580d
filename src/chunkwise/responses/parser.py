"""Layers 1-3 for the Responses API: bytes of a ``/responses`` SSE body in, events out."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .._core.events import Event
from .._core.parser import StreamParser
from .._core.sse import DEFAULT_MAX_EVENT_SIZE
from .accumulator import Accumulator
from .results import Result

__all__ = ["Parser"]


class Parser(StreamParser[Result]):
    """Sans-IO parser of a streamed Responses API body: ``feed()`` bytes, get events.

    An :class:`~chunkwise.SSEDecoder` given ``max_event_size``, and a
    :class:`~chunkwise.responses.Accumulator` given the other arguments
    but ``raw``, as for :class:`~chunkwise.chat.Parser`.
    """

    def __init__(
        self,
        *,
        tools: Iterable[Mapping[str, Any]] | None = None,
        text_format: Mapping[str, Any] | None = None,
        max_output_tokens: int | None = None,
        max_event_size: int = DEFAULT_MAX_EVENT_SIZE,
        raw: bool = False,
    ) -> None:
        self._responses = Accumulator(
            tools=tools, text_format=text_format, max_output_tokens=max_output_tokens
        )
        super().__init__(self._responses, max_event_size=max_event_size, raw=raw)

    # -- a background response over several connections (chunkwise._resume) ---------

    def resume_point(self) -> tuple[str, int] | None:
        """The response id and the last sequence number, once both are known; else None.

        A stream can be resumed (``GET /responses/{id}?stream=true&starting_after=N``)
        only from there: without an id there is nothing to ask for, without a
        number nothing to start after.
        """
        result, number = self.result, self._responses.last_sequence_number
        return None if result.id is None or number is None else (result.id, number)

    def resume(self) -> None:
        """The body goes on in a new response, after :meth:`resume_point`'s number."""
        self.restart()
        self._responses.resume()

    def start_after(self, sequence_number: int) -> None:
        """The body starts after event ``sequence_number`` (attached mid-way)."""
        self._responses.start_after(sequence_number)

    def end_from_response(self, response: Mapping[str, Any]) -> list[Event]:
        """End with a response object fetched whole (polled), not streamed to its end."""
        self._ended = True
        return self._responses.end_from_response(response)

"""Layer 3 for legacy completions: ``text_completion`` chunks to events and a result, sans-IO.

Theory of operation
-------------------
:class:`Accumulator` is the chunk accumulator
(:class:`~chunkwise._core.chunks.ChunkAccumulator`) for ``POST /completions``,
as :class:`~chunkwise.chat.Accumulator` is for chat.  A chunk's choices carry
``text`` directly (no ``delta``), kept per ``index``: several prompts, and
``n``, give several choices.

Rules
-----
Those of :mod:`chunkwise._core.accumulator` and :mod:`chunkwise._core.chunks`
come first.  Legacy completions' own:

1. ``text`` is appended when it is a non-empty string; a non-string is an
   anomaly, text after the choice finished is an anomaly and not appended.
   A choice that carries neither ``text`` nor a ``finish_reason`` (a filter
   annotation) starts nothing.
2. ``data: null`` (llama-server's first event when given several prompts)
   is one counted ``null event`` anomaly, not a failed stream.
"""

from __future__ import annotations

from typing import Any

from .._core.chunks import ChunkAccumulator, frozen_extra
from .._core.errors import InvalidChunk
from .._core.events import Event
from .._core.payloads import preview
from .._core.text import Fragments
from .events import TextDelta
from .results import ChoiceResult, Result

__all__ = ["Accumulator"]


class ChoiceText:
    """One choice of a completion while it streams."""

    __slots__ = (
        "extra",
        "finish_reason",
        "finished",
        "index",
        "logprobs",
        "logprobs_shared",
        "text",
    )

    def __init__(self, index: int) -> None:
        self.index: int = index
        self.text: Fragments = Fragments()
        self.finish_reason: str | None = None
        self.finished: bool = False
        self.logprobs: dict[str, Any] | None = None
        self.logprobs_shared: bool = False
        self.extra: dict[str, Any] | None = None

    def to_result(self) -> ChoiceResult:
        self.logprobs_shared = True
        return ChoiceResult(
            index=self.index,
            text=self.text.text(),
            finish_reason=self.finish_reason,
            finished=self.finished,
            logprobs=self.logprobs,
            extra=frozen_extra(self.extra),
        )


class Accumulator(ChunkAccumulator[ChoiceText, Result]):
    """Accumulate legacy ``text_completion`` chunks into events and a :class:`Result`."""

    _public_name = "chunkwise.completions.Accumulator"
    _result_class = Result
    _choice_keys = frozenset(("index", "text", "finish_reason", "logprobs"))
    _choice_known = _choice_keys.issuperset

    def _not_an_object(self, kind: str, data: str, error: InvalidChunk) -> list[Event]:
        if data.strip() != "null":
            return self.fail(error)
        # Rule 2: llama-server opens a multi-prompt stream with it.
        events: list[Event] = []
        self._counted_anomaly(events, "null event", "data: null carries nothing")
        return events

    def _choice(
        self, index: int, choice: dict[str, Any], events: list[Event]
    ) -> ChoiceText | InvalidChunk | None:
        text = choice.get("text")
        finish_reason = choice.get("finish_reason")
        state = self._choices.get(index)
        if state is None:
            if "text" not in choice and finish_reason is None:
                return None  # rule 1: a filter annotation starts nothing
            state = self._choices[index] = ChoiceText(index)
        if text:
            if type(text) is not str:
                self._anomaly(events, "non-string text", preview(text), index)
            elif state.finished:
                self._anomaly(events, "text after finish", text, index)
            else:
                state.text.append(text)
                events.append(TextDelta(choice_index=index, text=text))
        return state

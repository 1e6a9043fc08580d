"""Results of a legacy completion stream: immutable snapshots of what it delivered."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from .._core.json_patches import ReadOnlyDict
from .._core.results import ChunkResult, choices_of

__all__ = ["ChoiceResult", "Result"]


@attrs.frozen(kw_only=True)
class ChoiceResult:
    """What one choice of a legacy completion delivered (:doc:`/completions`).

    ``text`` is the fragments concatenated exactly (with ``echo``, the prompt
    first); ``finish_reason`` and ``finished`` are as a chat choice's
    (:class:`~chunkwise.chat.ChoiceResult`); ``logprobs`` are merged across
    chunks by extending their lists, ``None`` when none arrived; ``extra``
    holds the choice's fields chunkwise does not model (vLLM's
    ``stop_reason``...), the last value of each, read-only.
    """

    index: int
    text: str = ""
    finish_reason: str | None = None
    finished: bool = False
    logprobs: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = attrs.field(factory=ReadOnlyDict)


@attrs.frozen(kw_only=True, field_transformer=choices_of("ChoiceResult"))
class Result(ChunkResult[ChoiceResult]):
    """A snapshot of a legacy completion stream, with :class:`~chunkwise.chat.Result`'s status."""

    @property
    def text(self) -> str:
        """Choice 0's text, the common single-prompt case (``""`` if absent)."""
        for choice in self.choices:
            if choice.index == 0:
                return choice.text
        return ""

"""Results of a legacy completion stream: immutable snapshots of what it delivered."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from .._core.results import ChunkResult, choices_of

__all__ = ["ChoiceResult", "Result"]


@attrs.frozen(kw_only=True)
class ChoiceResult:
    """What one choice of a legacy completion delivered.

    Attributes:
        index: The choice's ``index`` as sent (several prompts and ``n``
            give several).
        text: The text fragments concatenated exactly (``""`` when none);
            with ``echo`` the prompt comes first, as the server sent it.
        finish_reason: The raw string sent (``stop``, ``length``, ``eos``...),
            or ``None`` while unfinished and for a choice the server finished
            with ``data: [DONE]`` without ever sending one (a ``missing
            finish_reason`` anomaly says so; :attr:`finished` is then true).
            An empty string is "not sent": kept, but it does not finish.
        finished: True once a non-empty finish_reason arrived, or ``[DONE]``
            ended the stream.
        logprobs: As sent, merged across chunks by extending their lists:
            OpenAI's legacy ``tokens``, ``token_logprobs``, ``top_logprobs``,
            ``text_offset``, or llama.cpp's chat-style ``content`` list.
            ``None`` when none arrived.
    """

    index: int
    text: str = ""
    finish_reason: str | None = None
    finished: bool = False
    logprobs: Mapping[str, Any] | None = None


@attrs.frozen(kw_only=True, field_transformer=choices_of("ChoiceResult"))
class Result(ChunkResult[ChoiceResult]):
    """A snapshot of a legacy completion stream (``POST /completions``).

    The same honest status as :class:`~chunkwise.chat.Result`: ``complete``
    when no error arrived and every choice that started finished,
    ``failed`` when the server reported an error (or the stream could not be
    interpreted), ``incomplete`` otherwise (``reason`` says why, and
    ``error`` what stopped it from outside the data, if anything did: a lost
    connection, an idle or stall timeout).
    """

    @property
    def text(self) -> str:
        """Choice 0's text, the common single-prompt case (``""`` if absent)."""
        for choice in self.choices:
            if choice.index == 0:
                return choice.text
        return ""

"""Chat results: immutable snapshots of what a chat completion stream has delivered so far."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from .._core.errors import StructuredOutputError
from .._core.json_patches import ReadOnlyDict
from .._core.payloads import copy_json
from .._core.results import ChunkResult, ToolCall, choices_of, repr_by_alias

__all__ = ["Audio", "ChoiceResult", "Result"]


@attrs.frozen(kw_only=True)
class Audio:
    """The spoken answer of one choice (``modalities: ["text", "audio"]``).

    ``data`` is the base64 fragments of ``delta.audio.data`` joined (PCM16
    when streamed by OpenAI: decode the whole with :func:`base64.b64decode`),
    ``transcript`` its transcript's fragments joined; ``id`` (to refer to it
    in a later request) and ``expires_at`` (Unix seconds) are the first valid
    values sent, ``None`` until then.
    """

    id: str | None = None
    data: str = ""
    transcript: str = ""
    expires_at: int | None = None


@attrs.frozen(kw_only=True, repr=False)
class ChoiceResult:
    """What one choice delivered (:doc:`/chat`).

    ``content`` is ``""`` when no text arrived, ``refusal`` and ``reasoning``
    ``None``.  ``finish_reason`` is the raw string sent, or ``None`` while
    unfinished and when ``[DONE]`` alone finished the choice (:attr:`finished`
    is then true).  When ``response_format`` asked for JSON, :attr:`parsed` and
    ``parse_error`` hold the finished content, checked once at the end
    (:doc:`/chat`, "Structured outputs"), and ``partial_parsed`` its read-only
    live preview (:doc:`/live_values`).  ``audio`` is the spoken answer, None
    when no ``delta.audio`` arrived; ``function_call`` the legacy
    ``delta.function_call`` (``functions=`` requests), completed like a tool
    call, with ``type`` ``"function_call"``; ``extra`` the choice's fields
    chunkwise does not model (vLLM's ``stop_reason``, Azure's
    ``content_filter_results``...), the last value of each, read-only.
    """

    index: int
    role: str | None = None
    content: str = ""
    refusal: str | None = None
    reasoning: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str | None = None
    logprobs: Mapping[str, Any] | None = None
    # Given as ``parsed=``; read through the property, which copies, so that
    # a result never changes even if a caller edits the value it was given.
    _parsed: Any = attrs.field(default=None, alias="parsed")
    parse_error: StructuredOutputError | None = None
    #: True once the choice finished: a non-empty finish_reason arrived, or
    #: ``data: [DONE]`` ended the stream (then ``finish_reason`` may be None).
    #: By default, whether ``finish_reason`` is non-empty.
    finished: bool = attrs.field(
        default=attrs.Factory(lambda self: bool(self.finish_reason), takes_self=True)
    )
    partial_parsed: Any = None
    audio: Audio | None = None
    function_call: ToolCall | None = None
    extra: Mapping[str, Any] = attrs.field(factory=ReadOnlyDict)

    __repr__ = repr_by_alias  # parsed=, as given and read

    @property
    def parsed(self) -> Any:
        """The structured output (a new copy on each access), or None; see the class."""
        return copy_json(self._parsed)


@attrs.frozen(kw_only=True, field_transformer=choices_of("ChoiceResult"))
class Result(ChunkResult[ChoiceResult]):
    """A snapshot of a chat-completion stream, readable at any time; it never changes.

    ``status``, ``reason`` and ``error``: :doc:`/chat` and :doc:`/streaming`
    ("Results").  ``timings`` (set on the final result of a stream read by the
    trio layer) and ``server_timings`` (what the server reported): :doc:`/timings`.
    ``extra``: the chunk fields chunkwise does not model (``service_tier``,
    ``moderation``, Perplexity's ``citations``...), the last value of each.
    """

    @property
    def content(self) -> str:
        """Choice 0's content, the common single-choice case (``""`` if absent)."""
        for choice in self.choices:
            if choice.index == 0:
                return choice.content
        return ""

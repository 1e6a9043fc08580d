"""Chat results: immutable snapshots of what a chat completion stream has delivered so far."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from .._core.errors import StructuredOutputError
from .._core.payloads import copy_json
from .._core.results import ChunkResult, ToolCall, choices_of

__all__ = ["ChoiceResult", "Result"]


@attrs.frozen(kw_only=True)
class ChoiceResult:
    """What one choice delivered.

    ``content`` is ``""`` when no text arrived; ``refusal`` and ``reasoning``
    are ``None`` when none arrived.  ``finish_reason`` is the raw string sent,
    or ``None`` while the choice is unfinished -- and for a choice the server
    finished with ``data: [DONE]`` without ever sending one (a ``missing
    finish_reason`` anomaly says so): :attr:`finished` is then true.

    When the request's ``response_format`` asked for JSON, a finished
    choice's content is parsed and validated once, at the end of the stream:
    :attr:`parsed` holds the value, :attr:`parse_error` a
    :class:`~chunkwise.StructuredOutputError` (raw text in ``.raw``); both
    are None when no JSON was asked for, the choice did not finish, or it
    refused.  A choice finished by ``[DONE]`` alone is parsed: the server
    said the stream is over.
    Meanwhile :attr:`partial_parsed` previews the content as it
    streams: a read-only live value (see :doc:`/live_values`), None before
    the value starts or when no JSON was asked for; never validated.
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

    @property
    def parsed(self) -> Any:
        """The structured output (a new copy on each access), or None; see the class."""
        return copy_json(self._parsed)


@attrs.frozen(kw_only=True, field_transformer=choices_of("ChoiceResult"))
class Result(ChunkResult[ChoiceResult]):
    """A snapshot of a chat-completion stream, readable at any time.

    A result, and everything in it, never changes after it was handed out:
    later chunks give a new snapshot.

    ``status`` is ``"streaming"`` until the terminal event, then
    ``"complete"`` (no error and every choice finished: by its finish_reason,
    or by ``data: [DONE]``), ``"failed"`` (``error`` says why) or
    ``"incomplete"`` (``reason`` says why).

    ``error`` is a :class:`~chunkwise.StreamError` (the server's own error),
    or the error chunkwise found (:class:`~chunkwise.errors.InvalidChunk`,
    :class:`~chunkwise.errors.EventTooLarge`, a broken body...); on an
    ``"incomplete"`` stream it is what stopped it from outside the data, if
    anything did (:class:`~chunkwise.ConnectionLost`,
    :class:`~chunkwise.IdleTimeout`, :class:`~chunkwise.StallTimeout`).
    Whichever it is, it has ``message``, ``type`` and ``code`` (the last two
    ``None`` where they do not apply).

    ``timings`` (a :class:`~chunkwise.Timings`) says when each part arrived;
    it is set on the final result of a stream read by the trio layer
    (:func:`~chunkwise.chat.open_stream`, :class:`~chunkwise.Client`), and
    ``None`` on snapshots taken while streaming and on results of the sans-IO
    parsers alone.  ``server_timings`` holds what the server itself reported,
    raw, by the name it used: llama.cpp's ``timings`` object, vLLM's
    ``metrics`` (the last one sent of each); ``None`` when it sent none.
    """

    @property
    def content(self) -> str:
        """Choice 0's content, the common single-choice case (``""`` if absent)."""
        for choice in self.choices:
            if choice.index == 0:
                return choice.content
        return ""

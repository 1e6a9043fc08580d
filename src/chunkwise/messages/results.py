"""Results of an Anthropic Messages stream: immutable snapshots of what it delivered so far.

A :class:`Result` holds the message's content blocks by ``index``, each a
:class:`ContentBlock`; a ``tool_use`` block's call is a :class:`~chunkwise.ToolCall`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from .._core.errors import ChunkwiseError, StreamError, StructuredOutputError
from .._core.payloads import copy_json
from .._core.results import Anomaly, IncompleteReason, Status, ToolCall
from .._core.timings import Timings

__all__ = ["ContentBlock", "Result"]


@attrs.frozen(kw_only=True)
class ContentBlock:
    """One content block, in the state the stream left it.

    ``index`` is its ``index`` as sent; ``type`` as sent (``"text"``,
    ``"thinking"``, ``"redacted_thinking"``, ``"tool_use"``,
    ``"server_tool_use"``, ``"web_search_tool_result"``...).  ``text`` is a
    text block's deltas concatenated, ``thinking`` and ``signature`` a
    thinking block's, ``citations`` a text block's citations in order
    (read-only); ``call`` a ``tool_use`` block's call (``id``, ``name``, the
    input as ``arguments``); ``done`` is true once ``content_block_stop``
    arrived.

    Attributes:
        data: The block as ``content_block_start`` sent it, read-only, with
            ``input`` replaced by the streamed input once the block stopped
            and its input parsed: every field of block types chunkwise does
            not interpret (server tools' blocks, ``redacted_thinking``'s
            ``data``...).
    """

    index: int
    type: str | None = None
    text: str = ""
    thinking: str = ""
    signature: str | None = None
    citations: tuple[Mapping[str, Any], ...] = ()
    call: ToolCall | None = None
    data: Mapping[str, Any] | None = None
    done: bool = False


@attrs.frozen(kw_only=True)
class Result:
    """A snapshot of a Messages stream, readable at any time; it never changes.

    ``id``, ``model`` and ``role`` are ``message_start``'s; ``content`` the
    blocks by index; ``stop_reason`` and ``stop_sequence`` as
    ``message_delta`` sent them (``"end_turn"``, ``"max_tokens"``,
    ``"tool_use"``, ``"refusal"``..., never interpreted).  ``usage`` is
    ``message_start``'s merged with each ``message_delta``'s (the later
    non-null values win: output tokens, and the input and cache counts when
    sent again), read-only.  ``status``, ``reason``, ``error`` and
    ``anomalies`` are as a chat result's (:doc:`/streaming`): complete only
    with ``message_stop``; ``timings`` and ``server_timings``: :doc:`/timings`.

    Attributes:
        partial_parsed: The same text as far as it has streamed, a read-only
            live value (:doc:`/live_values`); never validated.
        message: The message object of ``message_start``, read-only: every
            field chunkwise does not model.
    """

    id: str | None = None
    model: str | None = None
    role: str | None = None
    status: Status = "streaming"
    reason: IncompleteReason | None = None
    content: tuple[ContentBlock, ...] = ()
    stop_reason: str | None = None
    stop_sequence: str | None = None
    usage: Mapping[str, Any] | None = None
    error: ChunkwiseError | None = None
    anomalies: tuple[Anomaly, ...] = ()
    _parsed: Any = attrs.field(default=None, alias="parsed")
    parse_error: StructuredOutputError | None = None
    timings: Timings | None = attrs.field(default=None, eq=False)
    server_timings: Mapping[str, Any] | None = None
    partial_parsed: Any = None
    message: Mapping[str, Any] | None = None

    @property
    def parsed(self) -> Any:
        """The text parsed and validated, when ``output_format`` asked for JSON, else None.

        See :attr:`parse_error`; a new copy on each access.
        """
        return copy_json(self._parsed)

    @property
    def text(self) -> str:
        """The ``text`` blocks' text, joined in index order (``""`` when none)."""
        return "".join(block.text for block in self.content if block.type == "text")

    @property
    def thinking(self) -> str | None:
        """The ``thinking`` blocks' text, joined by blank lines, or None when none."""
        parts = [block.thinking for block in self.content if block.type == "thinking"]
        return "\n\n".join(parts) if parts else None

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The ``tool_use`` blocks' calls, in index order."""
        return tuple(block.call for block in self.content if block.call is not None)

    @property
    def server_error(self) -> StreamError | None:
        """The error the server reported, if that is why the stream failed."""
        return self.error if isinstance(self.error, StreamError) else None

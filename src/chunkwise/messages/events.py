"""The events of an Anthropic Messages stream (beside the shared lifecycle events).

The choice family follows one content block, by its ``index``:
:class:`BlockStarted`, :class:`TextDelta`, :class:`ThinkingDelta`,
:class:`CitationAdded`, :class:`BlockStopped`; the tool-call family one
``tool_use`` block: :class:`ToolCallStarted`, :class:`ToolCallArgumentsDelta`
(also a ``server_tool_use`` block's input), :class:`ToolCallCompleted`.  The
same names as chat's and the Responses API's for the same concepts.  What each
of the API's event types becomes: :doc:`/messages`, "Every event type".
:data:`Event` is every event a Messages stream's subscriber may receive.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, TypeAlias

import attrs

from .._core.events import Event, Family, LifecycleEvent, RawEvent
from .._core.json_patches import Patch
from .._core.results import ToolCall
from .results import ContentBlock

__all__ = [
    "BlockStarted",
    "BlockStopped",
    "CitationAdded",
    "MessageEvent",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallArgumentsDelta",
    "ToolCallCompleted",
    "ToolCallStarted",
]


@attrs.frozen(kw_only=True)
class BlockStarted(Event):
    """A content block began (``content_block_start``): its ``index`` and ``type`` as sent."""

    family: ClassVar[Family] = "choice"

    index: int
    type: str | None


@attrs.frozen(kw_only=True)
class TextDelta(Event):
    """Text appended to a ``text`` block (``text_delta``), exactly as sent.

    ``patches``: how it changed :attr:`Result.partial_parsed` when the request
    asks for JSON (``output_format``; :doc:`/live_values`); else empty.
    """

    family: ClassVar[Family] = "choice"
    is_output: ClassVar[bool] = True
    is_content: ClassVar[bool] = True

    index: int
    text: str
    patches: tuple[Patch, ...] = ()


@attrs.frozen(kw_only=True)
class ThinkingDelta(Event):
    """Text appended to a ``thinking`` block (``thinking_delta``)."""

    family: ClassVar[Family] = "choice"
    is_output: ClassVar[bool] = True

    index: int
    text: str


@attrs.frozen(kw_only=True)
class CitationAdded(Event):
    """A citation appended to a ``text`` block's citations (``citations_delta``), read-only."""

    family: ClassVar[Family] = "choice"

    index: int
    citation: Mapping[str, Any]


@attrs.frozen(kw_only=True)
class BlockStopped(Event):
    """A content block finished (``content_block_stop``); ``block`` is its final state."""

    family: ClassVar[Family] = "choice"

    index: int
    block: ContentBlock


@attrs.frozen(kw_only=True)
class ToolCallStarted(Event):
    """A ``tool_use`` block began: its ``id`` and ``name`` as sent (maybe None)."""

    family: ClassVar[Family] = "tool_call"

    index: int
    id: str | None
    name: str | None


@attrs.frozen(kw_only=True)
class ToolCallArgumentsDelta(Event):
    """A fragment of a tool's input (``input_json_delta``), unparsed JSON text.

    For a ``tool_use`` block and a ``server_tool_use`` block alike.
    ``patches``: how it changed the call's ``partial_arguments``, a preview
    never to act on (:doc:`/live_values`).
    """

    family: ClassVar[Family] = "tool_call"
    is_output: ClassVar[bool] = True

    index: int
    fragment: str
    patches: tuple[Patch, ...] = ()


@attrs.frozen(kw_only=True)
class ToolCallCompleted(Event):
    """A ``tool_use`` block is over: its input assembled, parsed and (given tools) validated.

    Sent once per call, at its ``content_block_stop`` (``call.finished``
    true), or at the end of a stream that stopped first (false).
    ``call.error`` says why the input cannot be used.
    """

    family: ClassVar[Family] = "tool_call"

    index: int
    call: ToolCall


ChoiceEvent: TypeAlias = BlockStarted | TextDelta | ThinkingDelta | CitationAdded | BlockStopped
ToolCallEvent: TypeAlias = ToolCallStarted | ToolCallArgumentsDelta | ToolCallCompleted
#: Every event a Messages stream's subscriber may receive.
MessageEvent: TypeAlias = ChoiceEvent | ToolCallEvent | LifecycleEvent | RawEvent

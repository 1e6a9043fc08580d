"""The events of a Responses API stream (beside the shared lifecycle events).

The choice family follows one output item: :class:`OutputItemAdded`,
:class:`TextDelta`, :class:`RefusalDelta`, :class:`ReasoningDelta`,
:class:`ReasoningSummaryDelta`, :class:`OutputItemDone`; the tool-call family
one function call: :class:`ToolCallStarted`, :class:`ToolCallArgumentsDelta`,
:class:`ToolCallCompleted`; :class:`StatusChanged` is a lifecycle event.
:data:`Event` is every event a Responses stream's subscriber may receive.
"""

from __future__ import annotations

from typing import ClassVar, TypeAlias

import attrs

from .._core.events import Event, Family, LifecycleEvent, RawEvent
from .._core.json_patches import Patch
from .results import FunctionCall, OutputItem

__all__ = [
    "OutputEvent",
    "OutputItemAdded",
    "OutputItemDone",
    "ReasoningDelta",
    "ReasoningSummaryDelta",
    "RefusalDelta",
    "ResponseEvent",
    "StatusChanged",
    "TextDelta",
    "ToolCallArgumentsDelta",
    "ToolCallCompleted",
    "ToolCallEvent",
    "ToolCallStarted",
]


@attrs.frozen(kw_only=True)
class OutputItemAdded(Event):
    """A new output item began (``response.output_item.added``).

    ``output_index`` is its position (its arrival position when none was sent).
    """

    family: ClassVar[Family] = "choice"

    output_index: int
    item_id: str | None
    item_type: str | None


@attrs.frozen(kw_only=True)
class TextDelta(Event):
    """Text appended to a message part (``response.output_text.delta``).

    ``patches``: how it changed :attr:`Result.partial_parsed` when
    ``text.format`` asks for JSON (:doc:`/live_values`); else empty.
    """

    family: ClassVar[Family] = "choice"
    is_output: ClassVar[bool] = True
    is_content: ClassVar[bool] = True

    output_index: int
    content_index: int
    item_id: str | None
    text: str
    patches: tuple[Patch, ...] = ()


@attrs.frozen(kw_only=True)
class RefusalDelta(Event):
    """Refusal text appended to a message part (``response.refusal.delta``)."""

    family: ClassVar[Family] = "choice"
    is_output: ClassVar[bool] = True

    output_index: int
    content_index: int
    item_id: str | None
    text: str


@attrs.frozen(kw_only=True)
class ReasoningDelta(Event):
    """Text appended to a reasoning item's text (``response.reasoning_text.delta``)."""

    family: ClassVar[Family] = "choice"
    is_output: ClassVar[bool] = True

    output_index: int
    content_index: int
    item_id: str | None
    text: str


@attrs.frozen(kw_only=True)
class ReasoningSummaryDelta(Event):
    """Text appended to a reasoning summary (``response.reasoning_summary_text.delta``)."""

    family: ClassVar[Family] = "choice"
    is_output: ClassVar[bool] = True

    output_index: int
    summary_index: int
    item_id: str | None
    text: str


@attrs.frozen(kw_only=True)
class OutputItemDone(Event):
    """An output item finished; ``item`` is its final state.

    The server's finished item replaces what the deltas built; when its text
    differs from the deltas an :class:`AnomalyDetected` says so first.
    """

    family: ClassVar[Family] = "choice"

    output_index: int
    item: OutputItem


@attrs.frozen(kw_only=True)
class ToolCallStarted(Event):
    """A ``function_call`` item began: ``call_id`` and ``name`` as sent (maybe None)."""

    family: ClassVar[Family] = "tool_call"

    output_index: int
    item_id: str | None
    call_id: str | None
    name: str | None


@attrs.frozen(kw_only=True)
class ToolCallArgumentsDelta(Event):
    """A fragment of a function call's arguments (unparsed JSON text).

    ``patches``: how it changed the call's ``partial_arguments``, a preview
    never to act on (:doc:`/live_values`).
    """

    family: ClassVar[Family] = "tool_call"
    is_output: ClassVar[bool] = True

    output_index: int
    item_id: str | None
    fragment: str
    patches: tuple[Patch, ...] = ()


@attrs.frozen(kw_only=True)
class ToolCallCompleted(Event):
    """A function call is over: arguments final, parsed and (given tools) validated.

    Sent once per call, when the server finishes it, or at the end of the
    stream with ``call.finished`` false.  ``call.error`` says why the
    arguments cannot be used.
    """

    family: ClassVar[Family] = "tool_call"

    output_index: int
    call: FunctionCall


@attrs.frozen(kw_only=True)
class StatusChanged(Event):
    """A lifecycle event (``response.created``, ``.queued``, ``.in_progress``) changed the status.

    The terminal status is in the terminal event's ``result.response_status``.
    """

    status: str


OutputEvent: TypeAlias = (
    OutputItemAdded
    | TextDelta
    | RefusalDelta
    | ReasoningSummaryDelta
    | ReasoningDelta
    | OutputItemDone
)
ToolCallEvent: TypeAlias = ToolCallStarted | ToolCallArgumentsDelta | ToolCallCompleted
#: Every event a Responses stream's subscriber may receive.
ResponseEvent: TypeAlias = OutputEvent | ToolCallEvent | StatusChanged | LifecycleEvent | RawEvent

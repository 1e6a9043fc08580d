"""The events of a Responses API stream (beside the shared lifecycle events).

The choice family follows one output item: :class:`OutputItemAdded`,
:class:`TextDelta`, :class:`RefusalDelta`, :class:`ReasoningDelta`,
:class:`ReasoningSummaryDelta`, :class:`OutputItemDone`; the tool-call family
one function call: :class:`ToolCallStarted`, :class:`ToolCallArgumentsDelta`,
:class:`ToolCallCompleted`, and the other tools: :class:`ToolProgress`,
:class:`ToolInputDelta`, :class:`PartialImage`; audio output is in the
choice family (:class:`AudioDelta`, :class:`AudioTranscriptDelta`);
:class:`StatusChanged` is a lifecycle event.  What each of the API's event
types becomes: :doc:`/responses`, "Every event type".
:data:`Event` is every event a Responses stream's subscriber may receive.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, TypeAlias

import attrs

from .._core.events import Event, Family, LifecycleEvent, RawEvent
from .._core.json_patches import Patch
from .results import FunctionCall, OutputItem

__all__ = [
    "AudioDelta",
    "AudioTranscriptDelta",
    "OutputEvent",
    "OutputItemAdded",
    "OutputItemDone",
    "PartialImage",
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
    "ToolInputDelta",
    "ToolProgress",
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
    ``logprobs``: the delta's, as sent (read-only), when the request asked
    for them (``include: ["message.output_text.logprobs"]``).
    """

    family: ClassVar[Family] = "choice"
    is_output: ClassVar[bool] = True
    is_content: ClassVar[bool] = True

    output_index: int
    content_index: int
    item_id: str | None
    text: str
    patches: tuple[Patch, ...] = ()
    logprobs: tuple[Mapping[str, Any], ...] = ()


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
class ToolProgress(Event):
    """A hosted tool's call moved on: ``response.<item_type>.<phase>``.

    ``phase`` as sent (``in_progress``, ``searching``, ``interpreting``,
    ``generating``, ``compacting``, ``completed``, ``failed``...; ``output``
    for each ``response.shell_call_output_content.delta``).  From the first
    progress event to its item's end (or its ``completed``/``failed``) the
    tool runs, and the stall timeout waits for it (:doc:`/reliability`).
    """

    family: ClassVar[Family] = "tool_call"

    output_index: int
    item_id: str | None
    item_type: str
    phase: str


@attrs.frozen(kw_only=True)
class ToolInputDelta(Event):
    """A fragment of a tool's input that is not a function call's arguments.

    A custom tool call's ``input``, an MCP call's ``arguments`` (JSON:
    ``patches`` preview it, :doc:`/live_values`), a code interpreter's
    ``code``, a shell call's command number ``index``, an ``apply_patch``
    call's diff; the item's :attr:`~OutputItem.input` holds them joined.
    """

    family: ClassVar[Family] = "tool_call"
    is_output: ClassVar[bool] = True

    output_index: int
    item_id: str | None
    item_type: str
    fragment: str
    patches: tuple[Patch, ...] = ()
    index: int = 0


@attrs.frozen(kw_only=True)
class PartialImage(Event):
    """An image generation call's partial image number ``index``, base64 as sent."""

    family: ClassVar[Family] = "tool_call"
    is_output: ClassVar[bool] = True

    output_index: int
    item_id: str | None
    index: int
    b64: str


@attrs.frozen(kw_only=True)
class AudioDelta(Event):
    """Base64 audio appended to the answer's :attr:`Result.audio` (``response.audio.delta``)."""

    family: ClassVar[Family] = "choice"
    is_output: ClassVar[bool] = True

    data: str


@attrs.frozen(kw_only=True)
class AudioTranscriptDelta(Event):
    """Text appended to the audio's transcript (``response.audio.transcript.delta``)."""

    family: ClassVar[Family] = "choice"
    is_output: ClassVar[bool] = True

    text: str


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
    | AudioDelta
    | AudioTranscriptDelta
    | OutputItemDone
)
ToolCallEvent: TypeAlias = (
    ToolCallStarted
    | ToolCallArgumentsDelta
    | ToolCallCompleted
    | ToolProgress
    | ToolInputDelta
    | PartialImage
)
#: Every event a Responses stream's subscriber may receive.
ResponseEvent: TypeAlias = OutputEvent | ToolCallEvent | StatusChanged | LifecycleEvent | RawEvent

"""Stream events: what the chat layer tells its consumers, in three families.

* choice events describe one choice's text: :class:`ContentDelta`,
  :class:`RefusalDelta`, :class:`ReasoningDelta`, :class:`ChoiceFinished`;
* tool-call events follow one tool call: :class:`ToolCallStarted`,
  :class:`ToolCallArgumentsDelta`, :class:`ToolCallCompleted`;
* lifecycle events describe the stream: :class:`ResponseStarted`,
  :class:`UsageReported`, :class:`StreamErrorReceived`,
  :class:`AnomalyDetected`, :class:`EventsDropped`, and exactly one terminal
  event per stream: :class:`StreamCompleted`, :class:`StreamIncomplete` or
  :class:`StreamFailed`.

All are small frozen attrs classes, compared by value; dispatch with
``match`` or ``type(event) is ...``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias

import attrs

from ._errors import ChunkwiseError, StreamError
from ._results import Anomaly, ChatResult, IncompleteReason, ToolCall

__all__ = [
    "AnomalyDetected",
    "ChoiceEvent",
    "ChoiceFinished",
    "ContentDelta",
    "Event",
    "EventsDropped",
    "LifecycleEvent",
    "ReasoningDelta",
    "RefusalDelta",
    "ResponseStarted",
    "StreamCompleted",
    "StreamErrorReceived",
    "StreamFailed",
    "StreamIncomplete",
    "TerminalEvent",
    "ToolCallArgumentsDelta",
    "ToolCallCompleted",
    "ToolCallEvent",
    "ToolCallStarted",
    "UsageReported",
]


# -- choice family ------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ContentDelta:
    """Text appended to a choice's ``content``, exactly as sent."""

    choice_index: int
    text: str


@attrs.frozen(kw_only=True)
class RefusalDelta:
    """Text appended to a choice's ``refusal``."""

    choice_index: int
    text: str


@attrs.frozen(kw_only=True)
class ReasoningDelta:
    """Text appended to a choice's ``reasoning`` (``reasoning_content`` or ``reasoning``)."""

    choice_index: int
    text: str


@attrs.frozen(kw_only=True)
class ChoiceFinished:
    """A choice received its ``finish_reason``, kept exactly as sent."""

    choice_index: int
    finish_reason: str


# -- tool-call family ---------------------------------------------------------


@attrs.frozen(kw_only=True)
class ToolCallStarted:
    """A new tool call appeared in a choice.  ``id``/``name`` may still be ``None``."""

    choice_index: int
    tool_index: int
    id: str | None
    name: str | None


@attrs.frozen(kw_only=True)
class ToolCallArgumentsDelta:
    """A fragment of a tool call's arguments (unparsed JSON text)."""

    choice_index: int
    tool_index: int
    fragment: str


@attrs.frozen(kw_only=True)
class ToolCallCompleted:
    """A tool call is over: arguments assembled, parsed and (given tools) validated.

    Sent once per call, when its choice finishes, or at the end of the stream
    with ``call.finished`` false.  ``call.error`` says why the arguments cannot
    be used; :meth:`chunkwise.ToolCall.parse_arguments` gives them.
    """

    choice_index: int
    tool_index: int
    call: ToolCall


# -- lifecycle family ---------------------------------------------------------


@attrs.frozen(kw_only=True)
class ResponseStarted:
    """The HTTP response head arrived (transport only)."""

    status_code: int
    headers: Sequence[tuple[str, str]]


@attrs.frozen(kw_only=True)
class UsageReported:
    """Token usage arrived (all keys kept, e.g. ``cost``, ``*_details``)."""

    usage: Mapping[str, Any]


@attrs.frozen(kw_only=True)
class StreamErrorReceived:
    """The server reported an error inside the stream."""

    error: StreamError


@attrs.frozen(kw_only=True)
class AnomalyDetected:
    """The stream broke a rule in a way we could recover from; see :class:`Anomaly`."""

    anomaly: Anomaly


@attrs.frozen(kw_only=True)
class EventsDropped:
    """A lossy subscriber's buffer overflowed and ``count`` events were dropped."""

    count: int


@attrs.frozen(kw_only=True)
class StreamCompleted:
    """Terminal: no error, and every choice finished."""

    result: ChatResult


@attrs.frozen(kw_only=True)
class StreamIncomplete:
    """Terminal: the stream ended before every choice finished; partial output kept."""

    result: ChatResult
    reason: IncompleteReason


@attrs.frozen(kw_only=True)
class StreamFailed:
    """Terminal: the server sent an error, or the stream could not be interpreted.

    ``error`` is a :class:`~chunkwise.StreamError` for server-reported errors,
    or the :class:`~chunkwise.RemoteProtocolError` that stopped parsing.
    """

    result: ChatResult
    error: ChunkwiseError


ChoiceEvent: TypeAlias = ContentDelta | RefusalDelta | ReasoningDelta | ChoiceFinished
ToolCallEvent: TypeAlias = ToolCallStarted | ToolCallArgumentsDelta | ToolCallCompleted
TerminalEvent: TypeAlias = StreamCompleted | StreamIncomplete | StreamFailed
LifecycleEvent: TypeAlias = (
    ResponseStarted
    | UsageReported
    | StreamErrorReceived
    | AnomalyDetected
    | EventsDropped
    | StreamCompleted
    | StreamIncomplete
    | StreamFailed
)
Event: TypeAlias = ChoiceEvent | ToolCallEvent | LifecycleEvent

"""Stream events: what the parsers tell their consumers, in three families.

* choice events describe text.  For chat, one choice's: :class:`ContentDelta`,
  :class:`RefusalDelta`, :class:`ReasoningDelta`, :class:`ChoiceFinished`;
  for legacy completions (:data:`CompletionEvent`): :class:`TextDelta`, then
  the same :class:`ChoiceFinished`;
  for the Responses API, one output item's (:data:`OutputEvent`):
  :class:`OutputItemAdded`, :class:`OutputTextDelta`,
  :class:`OutputRefusalDelta`, :class:`ReasoningSummaryDelta`,
  :class:`ReasoningTextDelta`, :class:`OutputItemDone`;
* tool-call events follow one call.  For chat: :class:`ToolCallStarted`,
  :class:`ToolCallArgumentsDelta`, :class:`ToolCallCompleted`; for the
  Responses API (:data:`FunctionCallEvent`): :class:`FunctionCallStarted`,
  :class:`FunctionCallArgumentsDelta`, :class:`FunctionCallCompleted`;
* lifecycle events describe the stream, the same for both APIs:
  :class:`ResponseStarted`, :class:`ResponseStatusChanged` (Responses),
  :class:`UsageReported`, :class:`StreamErrorReceived`,
  :class:`AnomalyDetected`, :class:`EventsDropped`, and exactly one terminal
  event per stream: :class:`StreamCompleted`, :class:`StreamIncomplete` or
  :class:`StreamFailed`, carrying the final :class:`~chunkwise.ChatResult`
  or :class:`~chunkwise.ResponseResult` (they are generic in it:
  ``StreamCompleted[ResponseResult]``).

All are small frozen attrs classes, compared by value; dispatch with
``match`` or ``type(event) is ...``.  :data:`ChatEvent` and
:data:`ResponseEvent` are the events each parser produces; :data:`Event`
is every event a stream's subscriber may receive.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Generic, TypeAlias, TypeVar

import attrs

from ._errors import ChunkwiseError, StreamError
from ._json_patches import Patch
from ._results import Anomaly, FunctionCall, IncompleteReason, OutputItem, ToolCall

__all__ = [
    "AnomalyDetected",
    "ChatEvent",
    "ChoiceEvent",
    "ChoiceFinished",
    "CompletionEvent",
    "ContentDelta",
    "Event",
    "EventsDropped",
    "FunctionCallArgumentsDelta",
    "FunctionCallCompleted",
    "FunctionCallEvent",
    "FunctionCallStarted",
    "LifecycleEvent",
    "OutputEvent",
    "OutputItemAdded",
    "OutputItemDone",
    "OutputRefusalDelta",
    "OutputTextDelta",
    "ReasoningDelta",
    "ReasoningSummaryDelta",
    "ReasoningTextDelta",
    "RefusalDelta",
    "ResponseEvent",
    "ResponseStarted",
    "ResponseStatusChanged",
    "StreamCompleted",
    "StreamErrorReceived",
    "StreamFailed",
    "StreamIncomplete",
    "TerminalEvent",
    "TextDelta",
    "ToolCallArgumentsDelta",
    "ToolCallCompleted",
    "ToolCallEvent",
    "ToolCallStarted",
    "UsageReported",
]


# -- choice family ------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ContentDelta:
    """Text appended to a choice's ``content``, exactly as sent.

    ``patches``: when the request's ``response_format`` asks for JSON, how
    this text changed :attr:`ChoiceResult.partial_parsed
    <chunkwise.ChoiceResult.partial_parsed>` (see :doc:`/live_values`); empty
    otherwise, and once the content cannot become JSON.
    """

    choice_index: int
    text: str
    patches: tuple[Patch, ...] = ()


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
class TextDelta:
    """Text appended to a legacy completion choice's ``text``, exactly as sent."""

    choice_index: int
    text: str


@attrs.frozen(kw_only=True)
class ChoiceFinished:
    """A choice received its ``finish_reason``, kept exactly as sent."""

    choice_index: int
    finish_reason: str


# -- choice family, Responses API ---------------------------------------------


@attrs.frozen(kw_only=True)
class OutputItemAdded:
    """A new output item began (``response.output_item.added``).

    ``output_index`` is the item's position (its arrival position when the
    server sent none); ``item_type`` is ``"message"``, ``"function_call"``,
    ``"reasoning"``...
    """

    output_index: int
    item_id: str | None
    item_type: str | None


@attrs.frozen(kw_only=True)
class OutputTextDelta:
    """Text appended to a message part (``response.output_text.delta``).

    ``patches``: when the request's ``text.format`` asks for JSON, how this
    text changed :attr:`ResponseResult.partial_parsed
    <chunkwise.ResponseResult.partial_parsed>` (see :doc:`/live_values`);
    empty otherwise, and once the text cannot become JSON.
    """

    output_index: int
    content_index: int
    item_id: str | None
    text: str
    patches: tuple[Patch, ...] = ()


@attrs.frozen(kw_only=True)
class OutputRefusalDelta:
    """Refusal text appended to a message part (``response.refusal.delta``)."""

    output_index: int
    content_index: int
    item_id: str | None
    text: str


@attrs.frozen(kw_only=True)
class ReasoningSummaryDelta:
    """Text appended to a reasoning summary (``response.reasoning_summary_text.delta``)."""

    output_index: int
    summary_index: int
    item_id: str | None
    text: str


@attrs.frozen(kw_only=True)
class ReasoningTextDelta:
    """Text appended to a reasoning item's text (``response.reasoning_text.delta``)."""

    output_index: int
    content_index: int
    item_id: str | None
    text: str


@attrs.frozen(kw_only=True)
class OutputItemDone:
    """An output item finished; ``item`` is its final state.

    The server's finished item replaces what the deltas built; when its text
    differs from the deltas an :class:`AnomalyDetected` says so first.
    """

    output_index: int
    item: OutputItem


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
    """A fragment of a tool call's arguments (unparsed JSON text).

    ``patches``: how the fragment changed the call's
    :attr:`~chunkwise.ToolCall.partial_arguments` (see :doc:`/live_values`);
    empty once the arguments cannot become JSON.  A preview: never act on it.
    """

    choice_index: int
    tool_index: int
    fragment: str
    patches: tuple[Patch, ...] = ()


@attrs.frozen(kw_only=True)
class ToolCallCompleted:
    """A tool call is over: arguments assembled, parsed and (given tools) validated.

    Sent once per call, when its choice finishes (its finish_reason, or
    ``[DONE]`` ending the stream: ``call.finished`` true), or at the end of a
    stream that stopped first, with ``call.finished`` false.  ``call.error``
    says why the arguments cannot be used;
    :meth:`chunkwise.ToolCall.parse_arguments` gives them.
    """

    choice_index: int
    tool_index: int
    call: ToolCall


# -- tool-call family, Responses API ------------------------------------------


@attrs.frozen(kw_only=True)
class FunctionCallStarted:
    """A ``function_call`` item began: ``call_id`` and ``name`` as sent (maybe None)."""

    output_index: int
    item_id: str | None
    call_id: str | None
    name: str | None


@attrs.frozen(kw_only=True)
class FunctionCallArgumentsDelta:
    """A fragment of a function call's arguments (unparsed JSON text).

    ``patches``: how the fragment changed the call's
    :attr:`~chunkwise.ToolCall.partial_arguments` (see :doc:`/live_values`);
    empty once the arguments cannot become JSON.  A preview: never act on it.
    """

    output_index: int
    item_id: str | None
    fragment: str
    patches: tuple[Patch, ...] = ()


@attrs.frozen(kw_only=True)
class FunctionCallCompleted:
    """A function call is over: arguments final, parsed and (given tools) validated.

    Sent once per call, when the server finishes it
    (``function_call_arguments.done`` or the finished item), or at the end
    of the stream with ``call.finished`` false.  ``call.error`` says why the
    arguments cannot be used; :meth:`~chunkwise.ToolCall.parse_arguments`
    gives them.
    """

    output_index: int
    call: FunctionCall


# -- lifecycle family ---------------------------------------------------------


@attrs.frozen(kw_only=True)
class ResponseStarted:
    """The HTTP response head arrived (transport only)."""

    status_code: int
    headers: Sequence[tuple[str, str]]


@attrs.frozen(kw_only=True)
class ResponseStatusChanged:
    """The server's ``response.status`` changed (``queued``, ``in_progress``...).

    Sent for the lifecycle events of a Responses stream
    (``response.created``, ``response.queued``, ``response.in_progress``)
    when they carry a new status; the terminal status is in the terminal
    event's result (:attr:`~chunkwise.ResponseResult.response_status`).
    """

    status: str


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


#: The result a terminal event carries: a ChatResult or a ResponseResult.
R = TypeVar("R")


@attrs.frozen(kw_only=True)
class StreamCompleted(Generic[R]):
    """Terminal: the answer is complete.

    Chat: no error, and every choice finished.  Responses: no error, and the
    server's terminal response says ``completed``.
    """

    result: R


@attrs.frozen(kw_only=True)
class StreamIncomplete(Generic[R]):
    """Terminal: the answer is not complete; ``reason`` says why, partial output kept."""

    result: R
    reason: IncompleteReason


@attrs.frozen(kw_only=True)
class StreamFailed(Generic[R]):
    """Terminal: the server sent an error, or the stream could not be interpreted.

    ``error`` is a :class:`~chunkwise.StreamError` for server-reported errors,
    or the :class:`~chunkwise.RemoteProtocolError` that stopped parsing.
    """

    result: R
    error: ChunkwiseError


ChoiceEvent: TypeAlias = ContentDelta | RefusalDelta | ReasoningDelta | ChoiceFinished
OutputEvent: TypeAlias = (
    OutputItemAdded
    | OutputTextDelta
    | OutputRefusalDelta
    | ReasoningSummaryDelta
    | ReasoningTextDelta
    | OutputItemDone
)
ToolCallEvent: TypeAlias = ToolCallStarted | ToolCallArgumentsDelta | ToolCallCompleted
FunctionCallEvent: TypeAlias = (
    FunctionCallStarted | FunctionCallArgumentsDelta | FunctionCallCompleted
)
# The terminal events are generic in their result.  The unions name the bare
# classes (StreamCompleted[Any] to a type checker), so that one subscriber
# type serves both APIs and isinstance(event, TerminalEvent) keeps working,
# which a union of subscripted generics would refuse.
TerminalEvent: TypeAlias = StreamCompleted | StreamIncomplete | StreamFailed  # type: ignore[type-arg]
LifecycleEvent: TypeAlias = (
    ResponseStarted
    | ResponseStatusChanged
    | UsageReported
    | StreamErrorReceived
    | AnomalyDetected
    | EventsDropped
    | StreamCompleted  # type: ignore[type-arg]
    | StreamIncomplete  # type: ignore[type-arg]
    | StreamFailed  # type: ignore[type-arg]
)
# A completion's text (TextDelta) is its "choice" family, as OutputEvent is
# the Responses API's.
Event: TypeAlias = (
    ChoiceEvent | TextDelta | OutputEvent | ToolCallEvent | FunctionCallEvent | LifecycleEvent
)
ChatEvent: TypeAlias = ChoiceEvent | ToolCallEvent | LifecycleEvent
ResponseEvent: TypeAlias = OutputEvent | FunctionCallEvent | LifecycleEvent
CompletionEvent: TypeAlias = TextDelta | ChoiceFinished | LifecycleEvent

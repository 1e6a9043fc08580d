"""Stream events: what every API's parser tells its consumers.

Theory of operation
-------------------
Every event is a small frozen attrs class, compared by value, and a subclass of
:class:`Event`, whose class attributes (its family, whether it carries output
or visible answer text, whether it ends the stream) say what the stream, the
timings and the subscribers need to know of it, so that nothing else keeps a
list of event types.  Dispatch with ``match`` or ``type(event) is ...``.

This module holds the events every API shares: the lifecycle family (ending
with exactly one terminal event per stream, generic in the result it carries)
and :class:`ChoiceFinished`, which chat and legacy completions share.  Each
API's own events are in its namespace, with the same name for the same
concept: ``TextDelta`` is "answer text appended" in all three.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Generic, Literal, TypeAlias, TypeVar

import attrs

from .errors import ChunkwiseError, StreamError
from .results import Anomaly, IncompleteReason
from .sse import ServerSentEvent

__all__ = [
    "AnomalyDetected",
    "Batch",
    "ChoiceFinished",
    "Event",
    "EventsDropped",
    "Family",
    "HeadReceived",
    "LifecycleEvent",
    "RawEvent",
    "Retrying",
    "StreamCompleted",
    "StreamErrorReceived",
    "StreamFailed",
    "StreamIncomplete",
    "TerminalEvent",
    "UsageReported",
]

#: The families a subscriber may ask for.
Family = Literal["choice", "tool_call", "lifecycle", "raw"]


@attrs.frozen(kw_only=True)
class Event:
    """The base of every stream event of every API.

    The class attributes describe the event type, not one event.
    """

    #: The family a subscriber asks for to receive this event
    #: (``stream.subscribe("choice")``): ``"choice"`` for a choice's or an
    #: output item's text, ``"tool_call"`` for one tool call's progress,
    #: ``"lifecycle"`` for the stream itself.
    family: ClassVar[Family] = "lifecycle"
    #: The event carries output: text, refusal, reasoning or tool-call
    #: arguments (timings' ``first_output``, the stall timeout).  Never empty.
    is_output: ClassVar[bool] = False
    #: The output is the visible answer text (timings' ``first_content``).
    is_content: ClassVar[bool] = False
    #: The event ends the stream: every subscriber receives it, then
    #: :class:`trio.EndOfChannel`.
    is_terminal: ClassVar[bool] = False


# -- shared by the choice APIs (chat, legacy completions) ----------------------


@attrs.frozen(kw_only=True)
class ChoiceFinished(Event):
    """A choice received its ``finish_reason``, kept exactly as sent."""

    family: ClassVar[Family] = "choice"

    choice_index: int
    finish_reason: str


# -- lifecycle family ---------------------------------------------------------


@attrs.frozen(kw_only=True)
class HeadReceived(Event):
    """The HTTP response head arrived (the trio layer only).

    ``headers`` are the response's header lines, names lower-cased, in order.
    """

    status_code: int
    headers: Sequence[tuple[str, str]]


@attrs.frozen(kw_only=True)
class UsageReported(Event):
    """Token usage arrived (all keys kept, e.g. ``cost``, ``*_details``)."""

    usage: Mapping[str, Any]


@attrs.frozen(kw_only=True)
class StreamErrorReceived(Event):
    """The server reported an error inside the stream."""

    error: StreamError


@attrs.frozen(kw_only=True)
class AnomalyDetected(Event):
    """The stream broke a rule in a way we could recover from; see :class:`Anomaly`."""

    anomaly: Anomaly


@attrs.frozen(kw_only=True)
class Retrying(Event):
    """The answer failed before its first output and is asked for again (the trio layer).

    ``attempt`` is the attempt about to be made (2 for the first retry),
    after ``delay`` seconds; ``reason`` is how the last one failed: a
    :class:`~chunkwise.TransportError` (the connection lost, the idle or
    stall timeout, a body that ended before any output) or the server's
    transient :class:`~chunkwise.StreamError`.  Nothing else of a failed
    attempt reaches subscribers (:doc:`/reliability`).
    """

    attempt: int
    delay: float
    reason: ChunkwiseError


@attrs.frozen(kw_only=True)
class EventsDropped(Event):
    """A lossy subscriber's buffer overflowed and ``count`` events were dropped."""

    count: int


@attrs.frozen(kw_only=True)
class RawEvent(Event):
    """One server-sent event as received, before any API read it (the ``"raw"`` family).

    Every event of the body, in order, for every API: what chunkwise does not
    model is here.  ``data`` is the event's data decoded as a JSON object,
    read-only as a live JSON snapshot is (dicts that refuse to change, tuples
    for arrays), or ``None`` when it is not one (``[DONE]``, text, an array).  A parser emits them
    only when asked (``Parser(raw=True)``, or a stream's first
    ``subscribe("raw")``), each ahead of the events it produced; a subscriber
    of every family (``family=None``) does not receive them.
    """

    family: ClassVar[Family] = "raw"

    event: ServerSentEvent
    data: Mapping[str, Any] | None


#: The result a terminal event carries: ``chat.Result``, ``responses.Result``...
R = TypeVar("R")


@attrs.frozen(kw_only=True)
class StreamCompleted(Event, Generic[R]):
    """Terminal: the answer is complete.

    Chat and completions: no error, and every choice finished.  Responses: no
    error, and the server's terminal response says ``completed``.
    """

    is_terminal: ClassVar[bool] = True

    result: R


@attrs.frozen(kw_only=True)
class StreamIncomplete(Event, Generic[R]):
    """Terminal: the answer is not complete; ``reason`` says why, partial output kept."""

    is_terminal: ClassVar[bool] = True

    result: R
    reason: IncompleteReason


@attrs.frozen(kw_only=True)
class StreamFailed(Event, Generic[R]):
    """Terminal: the server sent an error, or the stream could not be interpreted.

    ``error`` is a :class:`~chunkwise.StreamError` for server-reported errors,
    or the :class:`~chunkwise.RemoteProtocolError` that stopped parsing.
    """

    is_terminal: ClassVar[bool] = True

    result: R
    error: ChunkwiseError


# The unions name the bare generic classes, so that one subscriber type serves
# every API and isinstance(event, TerminalEvent) works (a union of
# subscripted generics would refuse it).
TerminalEvent: TypeAlias = StreamCompleted | StreamIncomplete | StreamFailed  # type: ignore[type-arg]
LifecycleEvent: TypeAlias = (
    HeadReceived
    | UsageReported
    | StreamErrorReceived
    | AnomalyDetected
    | EventsDropped
    | Retrying
    | StreamCompleted  # type: ignore[type-arg]
    | StreamIncomplete  # type: ignore[type-arg]
    | StreamFailed  # type: ignore[type-arg]
)

#: What a batched subscriber receives: the events of one network read for it.
Batch: TypeAlias = tuple[Event, ...]

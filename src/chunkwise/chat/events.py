"""The events of a chat completions stream (beside the shared lifecycle events).

The choice family: :class:`TextDelta`, :class:`RefusalDelta`,
:class:`ReasoningDelta`, :class:`AudioDelta`, then the shared
:class:`~chunkwise.chat.ChoiceFinished`;
the tool-call family: :class:`ToolCallStarted`, :class:`ToolCallArgumentsDelta`,
:class:`ToolCallCompleted`.  :data:`Event` is every event a chat stream's
subscriber may receive.
"""

from __future__ import annotations

from typing import ClassVar, TypeAlias

import attrs

from .._core.events import ChoiceFinished, Event, Family, LifecycleEvent, RawEvent
from .._core.json_patches import Patch
from .._core.results import ToolCall

__all__ = [
    "AudioDelta",
    "ChoiceEvent",
    "Event",
    "ReasoningDelta",
    "RefusalDelta",
    "TextDelta",
    "ToolCallArgumentsDelta",
    "ToolCallCompleted",
    "ToolCallEvent",
    "ToolCallStarted",
]


@attrs.frozen(kw_only=True)
class TextDelta(Event):
    """Text appended to a choice's ``content``, exactly as sent.

    ``patches``: how it changed the choice's ``partial_parsed`` when
    ``response_format`` asks for JSON (:doc:`/live_values`); else empty.
    """

    family: ClassVar[Family] = "choice"
    is_output: ClassVar[bool] = True
    is_content: ClassVar[bool] = True

    choice_index: int
    text: str
    patches: tuple[Patch, ...] = ()


@attrs.frozen(kw_only=True)
class RefusalDelta(Event):
    """Text appended to a choice's ``refusal``."""

    family: ClassVar[Family] = "choice"
    is_output: ClassVar[bool] = True

    choice_index: int
    text: str


@attrs.frozen(kw_only=True)
class ReasoningDelta(Event):
    """Text appended to a choice's ``reasoning`` (``reasoning_content`` or ``reasoning``)."""

    family: ClassVar[Family] = "choice"
    is_output: ClassVar[bool] = True

    choice_index: int
    text: str


@attrs.frozen(kw_only=True)
class AudioDelta(Event):
    """Spoken output appended to a choice's ``audio``: one event per ``delta.audio`` that adds some.

    ``data`` is the base64 fragment of the audio, ``transcript`` the
    fragment of its transcript, each ``""`` when that delta carries none.  An
    update carrying only ``id`` or ``expires_at`` adds no output and sends no
    event: read it on :attr:`ChoiceResult.audio <chunkwise.chat.ChoiceResult.audio>`.
    """

    family: ClassVar[Family] = "choice"
    is_output: ClassVar[bool] = True

    choice_index: int
    data: str
    transcript: str


@attrs.frozen(kw_only=True)
class ToolCallStarted(Event):
    """A new tool call appeared in a choice.  ``id``/``name`` may still be ``None``.

    A choice's legacy ``function_call`` streams with the same events, as
    ``tool_index`` 0 (:doc:`/chat`, "Tool calls").
    """

    family: ClassVar[Family] = "tool_call"

    choice_index: int
    tool_index: int
    id: str | None
    name: str | None


@attrs.frozen(kw_only=True)
class ToolCallArgumentsDelta(Event):
    """A fragment of a tool call's arguments (unparsed JSON text).

    ``patches``: how it changed the call's ``partial_arguments``, a preview
    never to act on (:doc:`/live_values`).
    """

    family: ClassVar[Family] = "tool_call"
    is_output: ClassVar[bool] = True

    choice_index: int
    tool_index: int
    fragment: str
    patches: tuple[Patch, ...] = ()


@attrs.frozen(kw_only=True)
class ToolCallCompleted(Event):
    """A tool call is over: arguments assembled, parsed and (given tools) validated.

    Sent once per call, when its choice finishes (``call.finished`` true), or
    at the end of a stream that stopped first (false).  ``call.error`` says
    why the arguments cannot be used.
    """

    family: ClassVar[Family] = "tool_call"

    choice_index: int
    tool_index: int
    call: ToolCall


ChoiceEvent: TypeAlias = TextDelta | RefusalDelta | ReasoningDelta | AudioDelta | ChoiceFinished
ToolCallEvent: TypeAlias = ToolCallStarted | ToolCallArgumentsDelta | ToolCallCompleted
#: Every event a chat stream's subscriber may receive.
ChatEvent: TypeAlias = ChoiceEvent | ToolCallEvent | LifecycleEvent | RawEvent

"""Chat completions (``POST /chat/completions``): parse, accumulate and stream them.

The shape of every API namespace (:doc:`/api`): :class:`Parser` (body bytes
in) and :class:`Accumulator` (decoded chunks in), both sans-IO, the immutable
:class:`Result`, the events of :mod:`chunkwise.chat.events`, and over trio
:func:`open_stream`, :func:`complete` and their :class:`Stream`, imported on
first use: ``from chunkwise.chat import Parser`` imports neither trio nor h11.
"""

from typing import TYPE_CHECKING

from .._core.events import ChoiceFinished
from .._core.names import public_face
from .accumulator import Accumulator
from .events import (
    AudioDelta,
    ChoiceEvent,
    ReasoningDelta,
    RefusalDelta,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallCompleted,
    ToolCallEvent,
    ToolCallStarted,
)
from .events import ChatEvent as Event
from .parser import Parser
from .results import Audio, ChoiceResult, Result

if TYPE_CHECKING:
    from ._stream import Stream, complete, open_stream

__all__ = [
    "Accumulator",
    "Audio",
    "AudioDelta",
    "ChoiceEvent",
    "ChoiceFinished",
    "ChoiceResult",
    "Event",
    "Parser",
    "ReasoningDelta",
    "RefusalDelta",
    "Result",
    "Stream",
    "TextDelta",
    "ToolCallArgumentsDelta",
    "ToolCallCompleted",
    "ToolCallEvent",
    "ToolCallStarted",
    "complete",
    "open_stream",
]

_LAZY = {name: "chunkwise.chat._stream" for name in ("Stream", "complete", "open_stream")}
public_face(globals(), _LAZY)

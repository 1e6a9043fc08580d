"""The Responses API (``POST /responses``): parse, accumulate, stream and resume it.

The shape of every API namespace, as :mod:`chunkwise.chat`'s, with two more
functions over trio: :func:`attach` (an existing background response) and
:func:`cancel`.  The trio half is imported on first use.
"""

from typing import TYPE_CHECKING

from .._core.names import public_face
from .accumulator import Accumulator
from .events import (
    AudioDelta,
    AudioTranscriptDelta,
    OutputEvent,
    OutputItemAdded,
    OutputItemDone,
    PartialImage,
    ReasoningDelta,
    ReasoningSummaryDelta,
    RefusalDelta,
    StatusChanged,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallCompleted,
    ToolCallEvent,
    ToolCallStarted,
    ToolInputDelta,
    ToolProgress,
)
from .events import ResponseEvent as Event
from .parser import Parser
from .results import Audio, ContentPart, CustomToolCall, FunctionCall, OutputItem, Result

if TYPE_CHECKING:
    from ._stream import Stream, attach, cancel, complete, open_stream

__all__ = [
    "Accumulator",
    "Audio",
    "AudioDelta",
    "AudioTranscriptDelta",
    "ContentPart",
    "CustomToolCall",
    "Event",
    "FunctionCall",
    "OutputEvent",
    "OutputItem",
    "OutputItemAdded",
    "OutputItemDone",
    "Parser",
    "PartialImage",
    "ReasoningDelta",
    "ReasoningSummaryDelta",
    "RefusalDelta",
    "Result",
    "StatusChanged",
    "Stream",
    "TextDelta",
    "ToolCallArgumentsDelta",
    "ToolCallCompleted",
    "ToolCallEvent",
    "ToolCallStarted",
    "ToolInputDelta",
    "ToolProgress",
    "attach",
    "cancel",
    "complete",
    "open_stream",
]

_LAZY = {
    name: "chunkwise.responses._stream"
    for name in ("Stream", "attach", "cancel", "complete", "open_stream")
}
public_face(globals(), _LAZY)

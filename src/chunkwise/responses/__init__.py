"""The Responses API (``POST /responses``): parse, accumulate, stream and resume it.

The same shape as every API namespace of chunkwise (see :mod:`chunkwise.chat`):

* :class:`Parser`: bytes of a streamed body in, events out, ``.result`` at any
  time; sans-IO.
* :class:`Accumulator`: events already decoded by someone else
  (``feed(mapping)``, e.g. the official SDK's ``event.model_dump()``;
  ``feed_sse(event)``; ``end()``); sans-IO.
* :class:`Result`, its :class:`OutputItem` objects with their
  :class:`ContentPart` objects, and :class:`FunctionCall`: immutable snapshots.
* The events a Responses stream adds to the shared lifecycle events:
  :class:`OutputItemAdded`, :class:`TextDelta`, :class:`RefusalDelta`,
  :class:`ReasoningDelta`, :class:`ReasoningSummaryDelta`,
  :class:`OutputItemDone` (the ``"choice"`` family), :class:`ToolCallStarted`,
  :class:`ToolCallArgumentsDelta`, :class:`ToolCallCompleted` (the
  ``"tool_call"`` family) and :class:`StatusChanged`; :data:`Event` is any
  event a Responses stream's subscriber may receive.
* Over trio: :func:`open_stream`, :func:`complete`, :func:`attach` (an
  existing background response), :func:`cancel`, and the :class:`Stream`
  they hand out (``client.responses`` has the same on a
  :class:`~chunkwise.Client`'s connections).  They are imported on first use:
  ``from chunkwise.responses import Parser`` imports neither trio nor h11.

The modules behind it: ``accumulator`` (events to typed events and a result),
``items`` (the output items and their parts while the stream runs),
``events``, ``results``, ``parser``, and ``_stream`` (the trio half).
"""

from typing import TYPE_CHECKING

from .._core.names import fixup_module_metadata, lazy_getattr
from .accumulator import Accumulator
from .events import (
    OutputEvent,
    OutputItemAdded,
    OutputItemDone,
    ReasoningDelta,
    ReasoningSummaryDelta,
    RefusalDelta,
    StatusChanged,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallCompleted,
    ToolCallEvent,
    ToolCallStarted,
)
from .events import ResponseEvent as Event
from .parser import Parser
from .results import ContentPart, FunctionCall, OutputItem, Result

if TYPE_CHECKING:
    from ._stream import Stream, attach, cancel, complete, open_stream

__all__ = [
    "Accumulator",
    "ContentPart",
    "Event",
    "FunctionCall",
    "OutputEvent",
    "OutputItem",
    "OutputItemAdded",
    "OutputItemDone",
    "Parser",
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
    "attach",
    "cancel",
    "complete",
    "open_stream",
]

_LAZY = {
    name: "chunkwise.responses._stream"
    for name in ("Stream", "attach", "cancel", "complete", "open_stream")
}
# Hidden from type checkers, which would take any attribute for a lazy one.
if not TYPE_CHECKING:
    __getattr__ = lazy_getattr(__name__, globals(), _LAZY)
fixup_module_metadata(__name__, globals())

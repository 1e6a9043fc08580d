"""Chat completions (``POST /chat/completions``): parse, accumulate and stream them.

The same shape as every API namespace of chunkwise:

* :class:`Parser`: bytes of a streamed body in (``feed()``, ``end()``), events
  out, and ``.result`` at any time; sans-IO.
* :class:`Accumulator`: chunks already decoded by someone else (``feed(mapping)``,
  e.g. the official SDK's ``chunk.model_dump()``; ``feed_sse(event)`` for a
  :class:`~chunkwise.ServerSentEvent`; ``end()``); sans-IO.
* :class:`Result` and its :class:`ChoiceResult` objects: immutable snapshots.
* The events a chat stream adds to the shared lifecycle events:
  :class:`TextDelta`, :class:`RefusalDelta`, :class:`ReasoningDelta`,
  :class:`ChoiceFinished` (the ``"choice"`` family), :class:`ToolCallStarted`,
  :class:`ToolCallArgumentsDelta`, :class:`ToolCallCompleted` (the
  ``"tool_call"`` family); :data:`Event` is any event a chat stream's
  subscriber may receive.
* Over trio: :func:`open_stream`, :func:`complete` and the :class:`Stream`
  they hand out (``client.chat`` has the same on a :class:`~chunkwise.Client`'s
  connections).  They are imported on first use: ``from chunkwise.chat
  import Parser`` imports neither trio nor h11.

The modules behind it: ``accumulator`` (chunks to events and a result),
``choices`` (one choice's state while the stream runs), ``events``,
``results``, ``parser``, and ``_stream`` (the trio half).
"""

from typing import TYPE_CHECKING

from .._core.events import ChoiceFinished
from .._core.names import fixup_module_metadata, lazy_getattr
from .accumulator import Accumulator
from .events import ChatEvent as Event
from .events import (
    ChoiceEvent,
    ReasoningDelta,
    RefusalDelta,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallCompleted,
    ToolCallEvent,
    ToolCallStarted,
)
from .parser import Parser
from .results import ChoiceResult, Result

if TYPE_CHECKING:
    from ._stream import Stream, complete, open_stream

__all__ = [
    "Accumulator",
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
# Hidden from type checkers, which would take any attribute for a lazy one.
if not TYPE_CHECKING:
    __getattr__ = lazy_getattr(__name__, globals(), _LAZY)
fixup_module_metadata(__name__, globals())

"""Anthropic Messages (``POST /v1/messages``): parse, accumulate and stream them.

The shape of every API namespace, as :mod:`chunkwise.chat`'s; the trio half
(:func:`open_stream`, :func:`complete`, :class:`Stream`) is imported on first use.
"""

from typing import TYPE_CHECKING

from .._core.names import public_face
from .accumulator import Accumulator
from .events import (
    BlockStarted,
    BlockStopped,
    CitationAdded,
    TextDelta,
    ThinkingDelta,
    ToolCallArgumentsDelta,
    ToolCallCompleted,
    ToolCallStarted,
)
from .events import MessageEvent as Event
from .parser import Parser
from .results import ContentBlock, Result

if TYPE_CHECKING:
    from ._stream import Stream, complete, open_stream

__all__ = [
    "Accumulator",
    "BlockStarted",
    "BlockStopped",
    "CitationAdded",
    "ContentBlock",
    "Event",
    "Parser",
    "Result",
    "Stream",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallArgumentsDelta",
    "ToolCallCompleted",
    "ToolCallStarted",
    "complete",
    "open_stream",
]

_LAZY = {name: "chunkwise.messages._stream" for name in ("Stream", "complete", "open_stream")}
public_face(globals(), _LAZY)

"""Legacy completions (``POST /completions``): parse, accumulate and stream them.

The shape of every API namespace, as :mod:`chunkwise.chat`'s; the trio half
(:func:`open_stream`, :func:`complete`, :class:`Stream`) is imported on first use.
"""

from typing import TYPE_CHECKING

from .._core.events import ChoiceFinished
from .._core.names import public_face
from .accumulator import Accumulator
from .events import CompletionEvent as Event
from .events import TextDelta
from .parser import Parser
from .results import ChoiceResult, Result

if TYPE_CHECKING:
    from ._stream import Stream, complete, open_stream

__all__ = [
    "Accumulator",
    "ChoiceFinished",
    "ChoiceResult",
    "Event",
    "Parser",
    "Result",
    "Stream",
    "TextDelta",
    "complete",
    "open_stream",
]

_LAZY = {name: "chunkwise.completions._stream" for name in ("Stream", "complete", "open_stream")}
public_face(globals(), _LAZY)

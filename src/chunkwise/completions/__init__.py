"""Legacy completions (``POST /completions``): parse, accumulate and stream them.

The same shape as every API namespace of chunkwise (see :mod:`chunkwise.chat`):

* :class:`Parser`: bytes of a streamed body in, events out, ``.result`` at any
  time; sans-IO.
* :class:`Accumulator`: chunks already decoded by someone else
  (``feed(mapping)``, ``feed_sse(event)``, ``end()``); sans-IO.
* :class:`Result` and its :class:`ChoiceResult` objects: immutable snapshots.
* The events a completions stream adds to the shared lifecycle events:
  :class:`TextDelta` and :class:`ChoiceFinished` (the ``"choice"`` family);
  :data:`Event` is any event a completions stream's subscriber may receive.
* Over trio: :func:`open_stream`, :func:`complete` and the :class:`Stream`
  they hand out (``client.completions`` has the same on a
  :class:`~chunkwise.Client`'s connections).  They are imported on first
  use: ``from chunkwise.completions import Parser`` imports neither trio nor
  h11.

The modules behind it: ``accumulator``, ``events``, ``results``, ``parser``,
and ``_stream`` (the trio half).
"""

from typing import TYPE_CHECKING

from .._core.events import ChoiceFinished
from .._core.names import fixup_module_metadata, lazy_getattr
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
# Hidden from type checkers, which would take any attribute for a lazy one.
if not TYPE_CHECKING:
    __getattr__ = lazy_getattr(__name__, globals(), _LAZY)
fixup_module_metadata(__name__, globals())

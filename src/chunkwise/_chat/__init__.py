"""Chat completions (``POST /chat/completions``): accumulator, choices and results, sans-IO.

The same kinds of module as every API package: ``accumulator`` (chunks to
events and a result), ``results`` (the frozen snapshots), ``parser`` (bytes
in, through the shared :class:`~chunkwise._parser.StreamParser`), and the
state the accumulator keeps while a stream runs (``choices``: one choice's
text, tool calls and finish).  Its events live with every family's in
:mod:`chunkwise._events`, and the values they carry in :mod:`chunkwise._results`.
"""

from .accumulator import ChatAccumulator
from .parser import ChatStreamParser
from .results import ChatResult, ChoiceResult

__all__ = ["ChatAccumulator", "ChatResult", "ChatStreamParser", "ChoiceResult"]

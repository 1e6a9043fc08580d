"""Legacy completions (``POST /completions``): accumulator, parser and results, sans-IO.

The same kinds of module as every API package: ``accumulator`` (chunks to
events and a result), ``results`` (the frozen snapshots) and ``parser`` (bytes
in, through the shared :class:`~chunkwise._parser.StreamParser`).  Its one
event of its own, :class:`~chunkwise.TextDelta`, lives with the others in
:mod:`chunkwise._events`, so that every family is defined in one place.
"""

from .accumulator import CompletionAccumulator
from .parser import CompletionStreamParser
from .results import CompletionChoice, CompletionResult

__all__ = [
    "CompletionAccumulator",
    "CompletionChoice",
    "CompletionResult",
    "CompletionStreamParser",
]

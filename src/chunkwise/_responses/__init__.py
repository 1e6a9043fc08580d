"""The Responses API (``POST /responses``): accumulator, items and results, sans-IO.

The same kinds of module as every API package: ``accumulator`` (events to
typed events and a result), ``results`` (the frozen snapshot), ``parser``
(bytes in, through the shared :class:`~chunkwise._parser.StreamParser`), and
the state the accumulator keeps while a stream runs (``items``: the output
items and their parts, and the sequence numbers seen).  Its events live with every family's
in :mod:`chunkwise._events`, and the values they carry (:class:`~chunkwise.OutputItem`,
:class:`~chunkwise.ContentPart`, :class:`~chunkwise.FunctionCall`) in
:mod:`chunkwise._results`.
"""

from .accumulator import ResponseAccumulator
from .parser import ResponseStreamParser
from .results import ResponseResult

__all__ = ["ResponseAccumulator", "ResponseResult", "ResponseStreamParser"]

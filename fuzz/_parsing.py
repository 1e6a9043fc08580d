"""Feeding a parser the reads a harness chose: one loop for every parser harness."""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

import attrs

import chunkwise

TERMINALS = (chunkwise.StreamCompleted, chunkwise.StreamIncomplete, chunkwise.StreamFailed)


class Result(Protocol):
    @property
    def status(self) -> str: ...


R = TypeVar("R", bound=Result, covariant=True)


class Parser(Protocol[R]):
    """What ``ChatStreamParser`` and ``ResponseStreamParser`` have in common here."""

    @property
    def result(self) -> R: ...

    def feed(self, data: bytes) -> list[chunkwise.Event]: ...

    def end(self) -> list[chunkwise.Event]: ...


def feed_all(parser: Parser[R], reads: list[bytes]) -> tuple[list[chunkwise.Event], R]:
    """Every event ``parser`` makes of ``reads`` and of their end, and its final result.

    The result's status is checked to be a known one after every read.
    """
    events: list[chunkwise.Event] = []
    for read in reads:
        events += parser.feed(read)
        assert parser.result.status in ("streaming", "complete", "incomplete", "failed")
    events += parser.end()
    return events, parser.result


def check_end(events: list[chunkwise.Event], result: Any) -> None:
    """What the end of every stream must be, whichever parser made ``events``.

    One terminal event, the last one, carrying the final result; a final
    status; a typed error when the stream failed.
    """
    terminals = [e for e in events if isinstance(e, TERMINALS)]
    assert len(terminals) == 1, terminals
    assert events[-1] is terminals[0], events[-1]
    # Only anomalies may be added to the result after the terminal event
    # ("data after [DONE]", "data after end": what the parser ignored).
    final = terminals[0].result
    assert final.anomalies == result.anomalies[: len(final.anomalies)]
    assert attrs.evolve(result, anomalies=final.anomalies) == final
    assert result.status in ("complete", "incomplete", "failed"), result.status
    if result.status == "failed":
        assert isinstance(result.error, chunkwise.ChunkwiseError), result.error

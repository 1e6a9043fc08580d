"""Feeding a parser the reads a harness chose: one loop for every parser harness."""

from __future__ import annotations

from typing import Protocol, TypeVar

import chunkwise


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

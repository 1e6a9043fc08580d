"""The anomalies of one stream (:class:`~chunkwise.Anomaly`), as every accumulator records them.

Most are recorded and announced (:class:`~chunkwise.AnomalyDetected`) each time.
What a misbehaving server repeats on every event is *counted*: recorded and
announced once per kind (and choice), so that a long stream neither floods the
consumer with events nor grows its result by one anomaly per event.
"""

from __future__ import annotations

import attrs

from .events import AnomalyDetected, Event
from .results import Anomaly

__all__ = ["AnomalyLog"]


class AnomalyLog:
    """The anomalies recorded so far, in the order they first happened."""

    __slots__ = ("_anomalies", "_counted")

    def __init__(self) -> None:
        self._anomalies: list[Anomaly] = []
        # (kind, choice index) -> position in _anomalies, for counted kinds.
        self._counted: dict[tuple[str, int | None], int] = {}

    def add(
        self, events: list[Event], kind: str, detail: str, choice_index: int | None = None
    ) -> None:
        """Record one anomaly and announce it."""
        anomaly = Anomaly(kind=kind, detail=detail, choice_index=choice_index)
        self._anomalies.append(anomaly)
        events.append(AnomalyDetected(anomaly=anomaly))

    def count(
        self, events: list[Event], kind: str, detail: str, choice_index: int | None = None
    ) -> None:
        """Record ``kind`` the first time (and announce it); afterwards only count it."""
        position = self._counted.get((kind, choice_index))
        if position is None:
            self._counted[kind, choice_index] = len(self._anomalies)
            self.add(events, kind, detail, choice_index)
            return
        # A new object: a snapshot holding the old one never changes.
        first = self._anomalies[position]
        self._anomalies[position] = attrs.evolve(first, count=first.count + 1)

    def snapshot(self) -> tuple[Anomaly, ...]:
        return tuple(self._anomalies)

"""Fan-out: every subscriber gets every event, each through its own channel.

Theory of operation
-------------------
One publisher (the stream's reader task) calls :meth:`Broadcaster.publish`
with the events one network read produced.  Each subscriber owns a trio memory
channel.  A lossless subscriber (the default) applies backpressure: when its
buffer is full the publisher waits, so the reader stops reading and TCP flow
control reaches the server.  A lossy subscriber never makes the publisher wait;
events that do not fit are counted and, as soon as there is room again, the
subscriber first receives :class:`~chunkwise.EventsDropped` with the count.
Terminal events are never dropped: the publisher waits for room for them even
on a lossy subscriber.

A subscriber that closes its receive channel is dropped quietly; the others
carry on.  When the stream ends every send channel is closed, so consumers see
:class:`trio.EndOfChannel` after the terminal event.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any, Literal

import trio

from ._events import (
    AnomalyDetected,
    ChoiceFinished,
    ContentDelta,
    Event,
    EventsDropped,
    ReasoningDelta,
    RefusalDelta,
    StreamCompleted,
    StreamFailed,
    StreamIncomplete,
    ToolCallArgumentsDelta,
    ToolCallCompleted,
    ToolCallStarted,
)

__all__ = ["DEFAULT_BUFFER_SIZE", "Broadcaster", "Family"]

#: Events a subscriber may hold unread before the publisher waits (or, for a
#: lossy subscriber, drops).  A 64 KiB read of short content chunks yields
#: about 300: room for a few reads, so a consumer that keeps up never stalls
#: the reader (bench/e2e.py).  Memory is used only while events wait.
DEFAULT_BUFFER_SIZE = 1024

Family = Literal["choice", "tool_call", "lifecycle"]

_CHOICE: frozenset[type[Any]] = frozenset(
    (ContentDelta, RefusalDelta, ReasoningDelta, ChoiceFinished)
)
_TOOL_CALL: frozenset[type[Any]] = frozenset(
    (ToolCallStarted, ToolCallArgumentsDelta, ToolCallCompleted)
)
_TERMINAL: frozenset[type[Any]] = frozenset((StreamCompleted, StreamIncomplete, StreamFailed))


def family_of(event: Event) -> Family:
    """The family an event belongs to."""
    kind = type(event)
    if kind in _CHOICE:
        return "choice"
    if kind in _TOOL_CALL:
        return "tool_call"
    return "lifecycle"


class _Subscriber:
    __slots__ = ("dropped", "family", "limit", "lossy", "send")

    def __init__(
        self,
        send: trio.MemorySendChannel[Event],
        family: Family | None,
        lossy: bool,
        limit: int | float,
    ) -> None:
        self.send = send
        self.family = family
        self.lossy = lossy
        self.limit = limit
        self.dropped = 0

    def wants(self, event: Event) -> bool:
        return (
            self.family is None
            or family_of(event) == self.family
            or type(event) in _TERMINAL
            or (self.family == "lifecycle" and type(event) is AnomalyDetected)
        )


class Broadcaster:
    """Deliver published events to every subscriber (see the module docstring)."""

    def __init__(self) -> None:
        self._subscribers: list[_Subscriber] = []
        self._terminal: Event | None = None
        self._closed = False
        self.has_subscribed = trio.Event()

    def subscribe(
        self,
        family: Family | None = None,
        *,
        buffer_size: int | float = DEFAULT_BUFFER_SIZE,
        lossy: bool = False,
    ) -> trio.MemoryReceiveChannel[Event]:
        if family not in (None, "choice", "tool_call", "lifecycle"):
            raise ValueError(f"unknown event family {family!r}")
        if lossy and not 1 <= buffer_size < math.inf:
            raise ValueError("a lossy subscriber needs a finite buffer_size of at least 1")
        if self._closed:
            # Joining after the end: the terminal event, then EndOfChannel.
            late_send, late_receive = trio.open_memory_channel[Event](1)
            with late_send:
                if self._terminal is not None:
                    late_send.send_nowait(self._terminal)
            return late_receive
        # A lossy channel has two slots beyond its limit, kept for a drop
        # report and the terminal event, so the end never waits for it.
        send, receive = trio.open_memory_channel[Event](buffer_size + 2 if lossy else buffer_size)
        self._subscribers.append(_Subscriber(send, family, lossy, buffer_size))
        self.has_subscribed.set()
        return receive

    async def publish(self, events: Iterable[Event]) -> None:
        """Deliver ``events`` in order; waits for room on lossless subscribers."""
        for event in events:
            if type(event) in _TERMINAL:
                self._terminal = event
            for subscriber in list(self._subscribers):
                if subscriber.wants(event):
                    await self._deliver(subscriber, event)
        await trio.lowlevel.checkpoint()

    async def finish(self, events: Sequence[Event], *, give_up: trio.Event) -> None:
        """Deliver the last events to every subscriber at once, then end each channel.

        For a stream whose block was left while it ran.  Each subscriber gets
        its own delivery, so one that is never read holds up no other;
        deliveries still waiting when ``give_up`` is set (no consumer task is
        left to make room) are abandoned, and those channels just end.
        """
        for event in events:
            if type(event) in _TERMINAL:
                self._terminal = event
        subscribers = list(self._subscribers)
        if not subscribers:
            return
        async with trio.open_nursery() as nursery:
            waiting = len(subscribers)

            async def deliver(subscriber: _Subscriber) -> None:
                nonlocal waiting
                try:
                    with subscriber.send:
                        for event in events:
                            if subscriber.wants(event):
                                await self._deliver(subscriber, event)
                finally:
                    waiting -= 1
                    if not waiting:
                        nursery.cancel_scope.cancel()

            async def watch() -> None:
                await give_up.wait()
                nursery.cancel_scope.cancel()

            nursery.start_soon(watch)
            for subscriber in subscribers:
                nursery.start_soon(deliver, subscriber)

    async def _deliver(self, subscriber: _Subscriber, event: Event) -> None:
        send = subscriber.send
        try:
            if not subscriber.lossy:
                try:
                    send.send_nowait(event)
                except trio.WouldBlock:
                    await send.send(event)
                return
            pending = 1 if subscriber.dropped else 0
            used = send.statistics().current_buffer_used
            if type(event) not in _TERMINAL and used + pending >= subscriber.limit:
                subscriber.dropped += 1
                return
            if pending:
                send.send_nowait(EventsDropped(count=subscriber.dropped))
                subscriber.dropped = 0
            send.send_nowait(event)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            # The consumer closed its channel: it wants no more events.
            self._subscribers.remove(subscriber)
            send.close()

    def close(self) -> None:
        """End every subscriber's channel (they see :class:`trio.EndOfChannel`)."""
        self._closed = True
        for subscriber in self._subscribers:
            subscriber.send.close()
        self._subscribers.clear()

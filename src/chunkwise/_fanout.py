"""Fan-out: every subscriber gets every event, each through its own channel.

Theory of operation
-------------------
One publisher (the stream's reader task) hands :meth:`Broadcaster.publish`
the events one network read produced, and finally hands
:meth:`Broadcaster.finish` the last events, ending with the terminal one.
Each subscriber owns a trio memory channel and a *pending* queue: the events
meant for it that its channel has not accepted yet.  Publishing first moves a
read's events into every subscriber (straight into the channel while there is
room, into the pending queue after that), then waits until every lossless
subscriber's queue is empty.  The pending queue is the record of what each
subscriber already got, so cancelling a wait loses nothing: whatever was not
delivered is still queued, in order, ahead of the end.

A lossy subscriber never queues: an event that does not fit is dropped and
counted, and as soon as there is room again the subscriber first receives
:class:`~chunkwise.EventsDropped` with the count, just ahead of the event
that found room.  ``buffer_size`` bounds what the channel holds before events
are dropped; beyond it the channel keeps three slots: one for a report riding
with the event after it (so a subscriber with ``buffer_size=1`` that keeps
reading receives events again after a drop), and two for a last report and
the terminal event, so the end always fits.  A *batched* subscriber receives
one tuple per publish (the events of one network read for it), with the same
rules counted in batches.

Rules
-----
1. Events reach each subscriber in the order they were published, with no gap:
   every event after the first one it was subscribed for, except the ones a
   lossy subscriber is told were dropped.
2. :meth:`Broadcaster.finish` is the only way the end reaches a subscriber.
   It queues the last events behind what is pending, delivers to every
   subscriber concurrently (one never read holds up no other), and closes each
   channel right after its terminal event, so the terminal event arrives
   exactly once and is followed by :class:`trio.EndOfChannel`.
3. Every wait on a subscriber is either cancellable (the publisher's cancel
   scope, for :meth:`publish`) or bounded by ``give_up`` (for
   :meth:`finish`): the caller sets it once nobody is left who could read.  A
   delivery given up, or a stream torn down by :meth:`close`, hands over what
   fits without waiting and then ends the channel.
4. A subscriber that closed its receive channel is dropped quietly; the others
   carry on.  One that subscribes once the end is known receives just the
   terminal event, then :class:`trio.EndOfChannel`.
5. A subscriber of every family (``family=None``) receives every event but
   the ``"raw"`` family's: those mirror the others, and only a ``"raw"``
   subscriber asked for them.
"""

from __future__ import annotations

import typing
from collections.abc import Sequence
from typing import Any

import trio

from ._core.checks import instance_of, one_of, positive_int, size_or_inf
from ._core.events import Event, EventsDropped, Family

__all__ = ["DEFAULT_BUFFER_SIZE", "Broadcaster"]

#: Events a subscriber may hold unread before the publisher waits (or, for a
#: lossy subscriber, drops).  A 64 KiB read of short content chunks yields
#: about 300: room for a few reads, so a consumer that keeps up never stalls
#: the reader (bench/e2e.py).  Memory is used only while events wait.
DEFAULT_BUFFER_SIZE = 1024

_FAMILIES = typing.get_args(Family)

# subscribe()'s arguments: a wrong type is a TypeError, as trio's channels say.
_FAMILY = one_of(*_FAMILIES).or_none()
_BUFFER_SIZE = size_or_inf.raising(ValueError, wrong_type=TypeError)
_FLAG = instance_of(bool, "a bool").raising(TypeError)


class _Subscriber:
    __slots__ = ("batched", "dropped", "lossy", "pending", "send", "size", "wanted")

    def __init__(
        self,
        send: trio.MemorySendChannel[Any],
        family: Family | None,
        *,
        lossy: bool,
        batched: bool,
        size: int | float,
    ) -> None:
        self.send = send
        self.wanted = family
        self.lossy = lossy
        self.batched = batched
        self.size = size
        self.dropped = 0  # events dropped since the last report (lossy)
        # Items the channel has not accepted: at most one read's worth, so a list will do.
        self.pending: list[Any] = []

    def offer(self, events: Sequence[Event]) -> None:
        """Hand over ``events`` without waiting: into the channel, else pending.

        Raises trio.BrokenResourceError when the consumer closed its channel.
        """
        wanted = self.wanted
        if wanted is not None:
            # A family subscriber receives its family, and the terminal event.
            events = [event for event in events if event.family == wanted or event.is_terminal]
            if not events:
                return
        if self.batched:
            self._put(tuple(events), len(events), terminal=events[-1].is_terminal)
            return
        if not self.lossy and not self.pending:
            # The hot path: everything fits, nothing waits.
            send_nowait = self.send.send_nowait
            for i, event in enumerate(events):
                try:
                    send_nowait(event)
                except trio.WouldBlock:
                    self.pending.extend(events[i:])
                    return
            return
        for event in events:
            self._put(event, 1, terminal=event.is_terminal)

    def _put(self, item: Any, count: int, *, terminal: bool) -> None:
        if not self.lossy:
            if self.pending:
                self.pending.append(item)
                return
            try:
                self.send.send_nowait(item)
            except trio.WouldBlock:
                self.pending.append(item)
            return
        # At most size + 1 held here (an event and the report ahead of it), so
        # the end (a report and the terminal event) always fits in size + 3.
        if not terminal and self.send.statistics().current_buffer_used >= self.size:
            self.dropped += count
            return
        if self.dropped:
            dropped = EventsDropped(count=self.dropped)
            self.send.send_nowait((dropped,) if self.batched else dropped)
            self.dropped = 0
        self.send.send_nowait(item)

    async def drain(self) -> None:
        """Wait until the channel took every pending item (cancellable, loses nothing)."""
        pending = self.pending
        send = self.send
        while pending:
            await send.send(pending[0])
            del pending[0]

    def drain_nowait(self) -> None:
        """Hand over what fits now; what does not is given up."""
        pending = self.pending
        try:
            while pending:
                self.send.send_nowait(pending[0])
                del pending[0]
        except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        pending.clear()


class Broadcaster:
    """Deliver published events to every subscriber (see the module docstring)."""

    # One per open stream, thousands at once: no instance dict.
    __slots__ = ("_listened", "_listener", "_raw", "_subscribers", "_terminal")

    def __init__(self) -> None:
        self._subscribers: list[_Subscriber] = []
        # A "raw" subscriber came: events may hold RawEvents, which only
        # raw subscribers receive (rule 5).
        self._raw = False
        self._terminal: Event | None = None
        self._listened = False
        # Made only while the publisher waits for a first listener: usually
        # somebody subscribes before the publisher starts, and then no stream
        # needs an event of its own for it.
        self._listener: trio.Event | None = None

    def listen(self) -> None:
        """Somebody listens (a subscriber, or a wait for the result): publishing may start."""
        self._listened = True
        if self._listener is not None:
            self._listener.set()

    async def wait_for_listener(self) -> None:
        """Wait until :meth:`listen` was called (without a checkpoint if it was: a read follows)."""
        if not self._listened:
            self._listener = trio.Event()
            try:
                await self._listener.wait()
            finally:
                self._listener = None

    def subscribe(
        self,
        family: Family | None = None,
        *,
        buffer_size: int | float = DEFAULT_BUFFER_SIZE,
        lossy: bool = False,
        batched: bool = False,
    ) -> trio.MemoryReceiveChannel[Any]:
        _FAMILY.check("family", family)
        _BUFFER_SIZE.check("buffer_size", buffer_size)
        _FLAG.check("lossy", lossy)
        _FLAG.check("batched", batched)
        if lossy:
            # A lossy channel drops the oldest event to make room: it needs room.
            positive_int.check("a lossy subscriber's buffer_size", buffer_size)
        if self._terminal is not None:
            # Joining once the end is known: the terminal event, then EndOfChannel.
            late_send, late_receive = trio.open_memory_channel[Any](1)
            with late_send:
                late_send.send_nowait((self._terminal,) if batched else self._terminal)
            return late_receive
        # Rule 3: a lossy channel's three extra slots hold a drop report riding
        # with an event, then a last report and the terminal event, so the end
        # never waits for it.
        send, receive = trio.open_memory_channel[Any](buffer_size + 3 if lossy else buffer_size)
        self._subscribers.append(
            _Subscriber(send, family, lossy=lossy, batched=batched, size=buffer_size)
        )
        if family == "raw":
            self._raw = True
        self.listen()
        return receive

    async def publish(self, events: Sequence[Event]) -> None:
        """Deliver ``events`` (never the terminal one); waits for lossless subscribers.

        Cancelling the wait loses nothing: undelivered events stay pending
        (rule 1) and go out ahead of the end.
        """
        self._offer(events)
        for subscriber in list(self._subscribers):
            if subscriber.pending:
                try:
                    await subscriber.drain()
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    self._drop(subscriber)
        await trio.lowlevel.checkpoint()

    async def finish(self, events: Sequence[Event], *, give_up: trio.Event) -> None:
        """Deliver the last events (ending with the terminal one) and end every channel.

        Each subscriber gets its own delivery (rule 2); deliveries still
        waiting when ``give_up`` is set hand over what fits and end (rule 3).
        """
        self._end(events)
        waiting = []
        for subscriber in self._subscribers:
            if subscriber.pending:
                waiting.append(subscriber)
            else:
                subscriber.send.close()  # its terminal event is in the channel
        if waiting and not give_up.is_set():
            async with trio.open_nursery() as nursery:
                left = len(waiting)

                async def deliver(subscriber: _Subscriber) -> None:
                    nonlocal left
                    try:
                        await subscriber.drain()
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        self._drop(subscriber)
                    subscriber.send.close()  # right after the terminal event
                    left -= 1
                    if not left:
                        nursery.cancel_scope.cancel()

                async def watch() -> None:
                    await give_up.wait()
                    nursery.cancel_scope.cancel()

                nursery.start_soon(watch)
                for subscriber in waiting:
                    nursery.start_soon(deliver, subscriber)
        self.close()

    def close(self, events: Sequence[Event] = ()) -> None:
        """End every channel now, handing over what fits of ``events`` first.

        For a stream torn down from outside; ``events`` are ignored when
        :meth:`finish` already queued the end.
        """
        if self._terminal is None:
            self._end(events)
        for subscriber in self._subscribers:
            subscriber.drain_nowait()
            subscriber.send.close()
        self._subscribers.clear()

    def _end(self, events: Sequence[Event]) -> None:
        # Queue the last events once; from now on subscribe() hands out the
        # terminal event alone (rule 4).
        for event in events:
            if event.is_terminal:
                self._terminal = event
        self._offer(events)

    def _offer(self, events: Sequence[Event]) -> None:
        if not events:
            return
        cooked: Sequence[Event] | None = None if self._raw else events
        for subscriber in list(self._subscribers):
            offered = events
            if subscriber.wanted is None:
                if cooked is None:  # rule 5: every family but "raw"
                    cooked = [event for event in events if event.family != "raw"]
                if not cooked:
                    continue
                offered = cooked
            try:
                subscriber.offer(offered)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self._drop(subscriber)

    def _drop(self, subscriber: _Subscriber) -> None:
        # The consumer closed its channel: it wants no more events.
        subscriber.pending.clear()
        subscriber.send.close()
        if subscriber in self._subscribers:
            self._subscribers.remove(subscriber)

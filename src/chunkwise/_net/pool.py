"""Keep-alive connections, kept for the next request to the same place.

Theory of operation
-------------------
A :class:`ConnectionPool` holds *idle* connections by key (scheme, host, port,
proxy) and counts the connections *in use*.  A request takes a slot
(:meth:`ConnectionPool.slot`, cancellable while it waits), then an idle
connection for its key (:meth:`ConnectionPool.take`) or a new one it opens
itself, and gives the connection back at the end
(:meth:`ConnectionPool.give_back`), reusable or not.  The pool never opens a
connection and never runs a task: every wait is in the caller's task and
cancel scope.

Rules
-----
1. At most ``max_connections`` connections are open at once, idle ones included:
   a request that needs a new connection at the limit first closes the
   longest-idle one; when every connection is in use it waits for a slot.
2. A connection is given back as reusable only when the HTTP exchange finished
   cleanly on both sides and neither side asked to close (the caller's verdict);
   everything else is closed at once, without blocking.
3. At most ``max_idle_connections`` are kept idle; the longest-idle goes first.
4. Before an idle connection is handed out it is checked: idle longer than
   ``idle_expiry`` seconds, or readable while idle (the server closed it, or sent
   something it should not have), means it is closed and the next one is tried.
5. After :meth:`ConnectionPool.aclose` nothing is kept: idle connections are
   closed, and connections given back later are closed too.
6. Every connection is accounted for, once each way: *in use* from
   :meth:`ConnectionPool.add` (a new one) or :meth:`ConnectionPool.take` until
   :meth:`ConnectionPool.give_back`, then idle or closed.
   :meth:`ConnectionPool.stats` counts them, and each step is logged at DEBUG on
   ``chunkwise`` (opened, reused, given back, discarded and why), naming the
   connection by its number and the label the caller gave, never the key.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any, Generic, Protocol, TypeVar

import attrs
import trio

from .._core.checks import non_negative_int, non_negative_seconds, positive_int
from .tasks import close_now

__all__ = ["ConnectionPool", "PoolSettings", "PoolStats", "Poolable", "Slot"]

_log = logging.getLogger("chunkwise")


class Poolable(Protocol):
    """What the pool needs of a connection."""

    def readable_while_idle(self) -> bool: ...

    async def aclose(self) -> None:
        """Close at once: never blocks (the pool shields it: ``close_now``)."""


C = TypeVar("C", bound=Poolable)


@attrs.frozen
class PoolSettings:
    """The limits of a :class:`ConnectionPool` (see its rules)."""

    max_connections: int = attrs.field(default=100, validator=positive_int)
    max_idle_connections: int = attrs.field(default=20, validator=non_negative_int)
    idle_expiry: float = attrs.field(default=5.0, validator=non_negative_seconds)


class Slot:
    """One request's slot: ``async with pool.slot():``, or acquired and released by hand.

    A plain class, not a generator: it lives as long as the request.
    """

    __slots__ = ("_pool",)

    def __init__(self, pool: ConnectionPool[Any]) -> None:
        self._pool = pool

    async def acquire(self) -> None:
        """Wait for a free slot (cancellable)."""
        if self._pool._closed:
            raise trio.ClosedResourceError("the client is closed")
        await self._pool._slots.acquire()

    def release(self) -> None:
        self._pool._slots.release()

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(self, *exc_info: object) -> None:
        self.release()


@attrs.frozen(kw_only=True)
class PoolStats:
    """A snapshot of a :class:`~chunkwise.Client`'s connections (``client.stats``).

    ``open`` is ``idle + in_use``.  ``opened_total`` counts every connection
    ever opened, ``reused_total`` every request sent on a kept-alive one instead.
    """

    open: int
    idle: int
    in_use: int
    opened_total: int
    reused_total: int


@attrs.define
class _Entry(Generic[C]):
    """A connection the pool knows: its number and label (for the log), idle since when."""

    connection: C
    number: int
    label: str
    since: float = 0.0

    def __str__(self) -> str:
        return f"connection {self.number} to {self.label}"


class ConnectionPool(Generic[C]):
    """Idle keep-alive connections by key, and a bound on connections open at once."""

    def __init__(self, settings: PoolSettings | None = None) -> None:
        self.settings: PoolSettings = settings if settings is not None else PoolSettings()
        # max_value: giving a slot back twice is a bug, and raises instead of
        # quietly raising the limit.
        limit = self.settings.max_connections
        self._slots = trio.Semaphore(limit, max_value=limit)
        # Oldest first, across keys, so rule 1 and rule 3 evict in one place.
        self._idle: OrderedDict[int, tuple[Hashable, _Entry[C]]] = OrderedDict()
        self._in_use: dict[int, _Entry[C]] = {}  # by id(connection) (rule 6)
        self._opened_total = 0  # also the number of the last connection added
        self._reused_total = 0
        self._closed = False

    @property
    def idle_count(self) -> int:
        """How many connections are idle in the pool."""
        return len(self._idle)

    @property
    def slots_taken(self) -> int:
        """How many slots are taken (requests connecting, sending or being answered)."""
        return self.settings.max_connections - self._slots.value

    def stats(self) -> PoolStats:
        """How many connections are open, idle and in use; opened and reused so far."""
        idle, in_use = len(self._idle), len(self._in_use)
        return PoolStats(
            open=idle + in_use,
            idle=idle,
            in_use=in_use,
            opened_total=self._opened_total,
            reused_total=self._reused_total,
        )

    def add(self, connection: C, label: str) -> None:
        """Count a connection the caller just opened as in use (rule 6); ``label`` names it."""
        entry = self._entry(connection, label)
        self._in_use[id(connection)] = entry
        _log.debug("%s opened", entry)

    def _entry(self, connection: C, label: str) -> _Entry[C]:
        self._opened_total += 1
        return _Entry(connection, self._opened_total, label)

    def slot(self) -> Slot:
        """Hold one of ``max_connections`` slots for an ``async with`` block (cancellable wait)."""
        return Slot(self)

    async def take(self, key: Hashable) -> C | None:
        """An idle connection for ``key`` that passed rule 4; else ``None``, room made (rule 1)."""
        now = trio.current_time()
        for ident, (entry_key, entry) in reversed(list(self._idle.items())):
            if entry_key != key:
                continue
            del self._idle[ident]
            idle_for = now - entry.since
            if idle_for > self.settings.idle_expiry:
                why = (
                    f"idle for {idle_for:.3g} s, longer than idle_expiry "
                    f"({self.settings.idle_expiry:g} s)"
                )
                await _discard(entry, why)
                continue
            if entry.connection.readable_while_idle():
                why = "the server closed it (or sent something) while it was idle"
                await _discard(entry, why)
                continue
            self._in_use[ident] = entry
            self._reused_total += 1
            _log.debug("%s reused after %.3g s idle", entry, idle_for)
            return entry.connection
        # A new connection is about to be opened under the caller's slot.
        while self._idle and self.slots_taken + len(self._idle) > self.settings.max_connections:
            await self._evict_oldest("making room for a new connection (max_connections)")
        return None

    async def give_back(
        self, key: Hashable, connection: C, *, reusable: bool, why: str = "not reusable"
    ) -> None:
        """Keep ``connection`` for ``key`` if it is reusable, else close it, logging ``why``."""
        entry = self._in_use.pop(id(connection), None)
        if entry is None:  # not added: count it now, so it is accounted for all the same
            entry = self._entry(connection, repr(key))
        if not reusable:
            await _discard(entry, why)
        elif self._closed:
            await _discard(entry, "the client is closed")
        elif self.settings.max_idle_connections == 0:
            await _discard(entry, "max_idle_connections is 0")
        else:
            entry.since = trio.current_time()
            self._idle[id(connection)] = (key, entry)
            _log.debug("%s given back (%d idle)", entry, len(self._idle))
            while len(self._idle) > self.settings.max_idle_connections:
                await self._evict_oldest("more idle connections than max_idle_connections")

    async def _evict_oldest(self, why: str) -> None:
        _, (_, entry) = self._idle.popitem(last=False)
        await _discard(entry, why)

    async def aclose(self) -> None:
        """Close every idle connection; later ones are closed when given back (rule 5)."""
        self._closed = True
        while self._idle:
            await self._evict_oldest("the client is closed")


async def _discard(entry: _Entry[Any], why: str) -> None:
    _log.debug("%s discarded: %s", entry, why)
    await close_now(entry.connection)

"""Keep-alive connections, kept for the next request to the same place.

Theory of operation
-------------------
A :class:`ConnectionPool` holds *idle* connections by key (scheme, host, port,
proxy) and counts the connections *in use*.  A request takes a slot
(:meth:`ConnectionPool.slot`, cancellable while it waits), then either an idle
connection for its key (:meth:`ConnectionPool.take`) or a new one it opens
itself, and gives the connection back at the end (:meth:`ConnectionPool.give_back`)
with a verdict: reusable or not.  The pool never opens a connection and never
runs a task: it is bookkeeping around the caller's own I/O, so every wait is in
the caller's task and cancel scope (trio's rule of no hidden background work).

Rules
-----
1. At most ``max_connections`` connections are open at once, idle ones included:
   a request that needs a new connection when the limit is reached first closes
   the longest-idle one; when every connection is in use it waits for a slot.
2. A connection is given back as reusable only when the HTTP exchange finished
   cleanly on both sides and neither side asked to close (the caller's verdict,
   from h11's states); everything else is closed at once, without blocking.
3. At most ``max_idle_connections`` are kept idle; the longest-idle goes first.
4. Before an idle connection is handed out it is checked: idle longer than
   ``idle_expiry`` seconds, or readable while idle (the server closed it, or sent
   something it should not have), means it is closed and the next one is tried.
5. After :meth:`ConnectionPool.aclose` nothing is kept: idle connections are
   closed, and connections given back later are closed too.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Any, Generic, Protocol, TypeVar

import attrs
import trio

from ._checks import non_negative_int, non_negative_seconds, positive_int

__all__ = ["ConnectionPool", "PoolSettings", "Poolable", "Slot"]


class Poolable(Protocol):
    """What the pool needs of a connection."""

    def readable_while_idle(self) -> bool:
        """True when bytes or an EOF arrived although no response is expected."""
        ...

    async def aclose(self) -> None:
        """Close at once: never blocks (the pool shields it from cancellation)."""
        ...


async def _close(connection: Poolable) -> None:
    # Shielded like _util.close_now: a forceful close never blocks, and a cancel
    # arriving here must not leave the connection open.
    with trio.CancelScope(shield=True):
        await connection.aclose()


C = TypeVar("C", bound=Poolable)


@attrs.frozen
class PoolSettings:
    """The limits of a :class:`ConnectionPool` (see its rules)."""

    max_connections: int = attrs.field(default=100, validator=positive_int)
    max_idle_connections: int = attrs.field(default=20, validator=non_negative_int)
    idle_expiry: float = attrs.field(default=5.0, validator=non_negative_seconds)


class Slot:
    """One request's slot: a plain class, not a generator, as it lives as long as the request.

    Used as ``async with pool.slot():``, or acquired and released by hand by a
    response that outlives the call which sent its request.
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


@attrs.define
class _Idle(Generic[C]):
    connection: C
    since: float


class ConnectionPool(Generic[C]):
    """Idle keep-alive connections by key, and a bound on connections open at once."""

    def __init__(self, settings: PoolSettings | None = None) -> None:
        self.settings = settings if settings is not None else PoolSettings()
        # max_value: giving a slot back twice is a bug, and raises instead of
        # quietly raising the limit.
        limit = self.settings.max_connections
        self._slots = trio.Semaphore(limit, max_value=limit)
        # Oldest first, across keys, so rule 1 and rule 3 evict in one place.
        self._idle: OrderedDict[int, tuple[Hashable, _Idle[C]]] = OrderedDict()
        self._closed = False

    @property
    def idle_count(self) -> int:
        """How many connections are idle in the pool."""
        return len(self._idle)

    @property
    def in_use(self) -> int:
        """How many slots are taken (connections in use or being opened)."""
        return self.settings.max_connections - self._slots.value

    def slot(self) -> Slot:
        """Hold one of ``max_connections`` slots for an ``async with`` block (cancellable wait)."""
        return Slot(self)

    async def take(self, key: Hashable) -> C | None:
        """An idle connection for ``key`` that passed rule 4, or ``None``.

        When ``None`` is returned the caller opens a new connection, so room is
        made for it first (rule 1).
        """
        now = trio.current_time()
        for ident, (entry_key, entry) in reversed(list(self._idle.items())):
            if entry_key != key:
                continue
            del self._idle[ident]
            connection = entry.connection
            if now - entry.since > self.settings.idle_expiry or connection.readable_while_idle():
                await _close(connection)
                continue
            return connection
        # A new connection is about to be opened under the caller's slot.
        while self._idle and self.in_use + len(self._idle) > self.settings.max_connections:
            await self._evict_oldest()
        return None

    async def give_back(self, key: Hashable, connection: C, *, reusable: bool) -> None:
        """Keep ``connection`` for ``key`` if it is reusable, else close it (rules 2, 3, 5)."""
        if not reusable or self._closed or self.settings.max_idle_connections == 0:
            await _close(connection)
            return
        self._idle[id(connection)] = (key, _Idle(connection, trio.current_time()))
        while len(self._idle) > self.settings.max_idle_connections:
            await self._evict_oldest()

    async def _evict_oldest(self) -> None:
        _, (_, entry) = self._idle.popitem(last=False)
        await _close(entry.connection)

    async def aclose(self) -> None:
        """Close every idle connection; later ones are closed when given back (rule 5)."""
        self._closed = True
        while self._idle:
            await self._evict_oldest()

"""The bookkeeping rules of ``chunkwise._net.pool.ConnectionPool``, with stand-in connections.

The pool does no I/O of its own, so its rules are checked here against objects that
only record being closed; the tests of ``chunkwise.Client`` check the same rules
over real sockets.
"""

from __future__ import annotations

import pytest
import trio
import trio.testing

from chunkwise._net.pool import ConnectionPool, PoolSettings
from chunkwise.types import PoolStats


class StandIn:
    def __init__(self, name: str) -> None:
        self.name = name
        self.closed = False
        self.readable = False

    def readable_while_idle(self) -> bool:
        return self.readable

    async def aclose(self) -> None:
        self.closed = True
        await trio.lowlevel.checkpoint()

    def __repr__(self) -> str:
        return f"StandIn({self.name})"


KEY = ("https", "api.example", 443, None)
OTHER = ("https", "other.example", 443, None)
Pool = ConnectionPool[StandIn]


async def use(pool: Pool, key: object, name: str, *, reusable: bool = True) -> StandIn:
    """One request: a slot, an idle connection or a new one, given back at the end."""
    async with pool.slot():
        connection = await pool.take(key)
        if connection is None:
            connection = StandIn(name)
            pool.add(connection, name)
        await pool.give_back(key, connection, reusable=reusable)
    return connection


async def test_a_reusable_connection_is_used_again_for_the_same_key() -> None:
    pool: Pool = ConnectionPool()
    first = await use(pool, KEY, "a")
    assert [await use(pool, KEY, f"n{i}") for i in range(5)] == [first] * 5
    assert not first.closed and pool.idle_count == 1


async def test_another_key_gets_another_connection() -> None:
    pool: Pool = ConnectionPool()
    first = await use(pool, KEY, "a")
    other = await use(pool, OTHER, "b")
    assert other is not first and pool.idle_count == 2


async def test_a_connection_that_is_not_reusable_is_closed_not_kept() -> None:
    pool: Pool = ConnectionPool()
    first = await use(pool, KEY, "a", reusable=False)
    assert first.closed and pool.idle_count == 0
    assert await use(pool, KEY, "b") is not first


async def test_an_expired_idle_connection_is_closed_not_used(
    autojump_clock: trio.testing.MockClock,
) -> None:
    pool: Pool = ConnectionPool(PoolSettings(idle_expiry=5.0))
    first = await use(pool, KEY, "a")
    await trio.sleep(4.9)
    assert await use(pool, KEY, "b") is first  # still fresh
    await trio.sleep(5.1)
    second = await use(pool, KEY, "c")
    assert second is not first and first.closed


async def test_an_idle_connection_the_server_closed_is_not_used() -> None:
    pool: Pool = ConnectionPool()
    first = await use(pool, KEY, "a")
    first.readable = True  # FIN, reset or stray bytes while idle
    second = await use(pool, KEY, "b")
    assert second is not first and first.closed


async def test_at_most_max_idle_connections_are_kept_oldest_closed_first() -> None:
    pool: Pool = ConnectionPool(PoolSettings(max_idle_connections=2))
    connections: list[StandIn] = []
    async with pool.slot(), pool.slot(), pool.slot():
        for name in "abc":
            assert await pool.take(KEY) is None
            connections.append(StandIn(name))
        for connection in connections:
            await pool.give_back(KEY, connection, reusable=True)
    assert [c.closed for c in connections] == [True, False, False]
    assert pool.idle_count == 2


async def test_zero_idle_connections_means_no_reuse() -> None:
    pool: Pool = ConnectionPool(PoolSettings(max_idle_connections=0))
    first = await use(pool, KEY, "a")
    assert first.closed and await use(pool, KEY, "b") is not first


async def test_max_connections_makes_a_request_wait_for_a_slot(
    autojump_clock: trio.testing.MockClock,
) -> None:
    pool: Pool = ConnectionPool(PoolSettings(max_connections=2))
    started: list[float] = []

    async def request() -> None:
        async with pool.slot():
            started.append(trio.current_time())
            await trio.sleep(1)

    async with trio.open_nursery() as nursery:
        for _ in range(5):
            nursery.start_soon(request)
    assert started == [0, 0, 1, 1, 2]


async def test_waiting_for_a_slot_is_cancellable(autojump_clock: trio.testing.MockClock) -> None:
    pool: Pool = ConnectionPool(PoolSettings(max_connections=1))
    async with pool.slot():
        with trio.move_on_after(3) as scope:
            async with pool.slot():
                pytest.fail("got a second slot")  # pragma: no cover
        assert scope.cancelled_caught
    assert pool.slots_taken == 0


async def test_a_slot_given_back_twice_raises_rather_than_raising_the_limit() -> None:
    pool: Pool = ConnectionPool(PoolSettings(max_connections=1))
    slot = pool.slot()
    await slot.acquire()
    slot.release()
    with pytest.raises(ValueError, match="released too many times"):
        slot.release()
    assert pool.slots_taken == 0


async def test_a_new_connection_at_the_limit_closes_the_longest_idle_one() -> None:
    pool: Pool = ConnectionPool(PoolSettings(max_connections=2, max_idle_connections=2))
    old = await use(pool, OTHER, "old")
    newer = await use(pool, OTHER, "newer")
    assert newer is old  # same key: reused
    second_key = await use(pool, KEY, "k")
    assert not old.closed and pool.idle_count == 2
    # Two in use at once, for a third key: both idle connections must make room.
    async with pool.slot(), pool.slot():
        assert await pool.take(("http", "third", 80, None)) is None
        assert pool.idle_count + pool.slots_taken <= 2
    assert old.closed and second_key.closed


async def test_after_aclose_nothing_is_kept() -> None:
    pool: Pool = ConnectionPool()
    idle = await use(pool, KEY, "a")
    async with pool.slot():
        in_use = StandIn("b")
        await pool.aclose()
        assert idle.closed and not in_use.closed
        await pool.give_back(KEY, in_use, reusable=True)
    assert in_use.closed and pool.idle_count == 0
    with pytest.raises(trio.ClosedResourceError):
        async with pool.slot():
            pass  # pragma: no cover


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_connections": 0},
        {"max_connections": True},
        {"max_idle_connections": -1},
        {"idle_expiry": -1.0},
        {"idle_expiry": float("inf")},
    ],
)
def test_bad_pool_settings_are_refused(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        PoolSettings(**kwargs)  # type: ignore[arg-type]


async def test_stats_count_every_connection_once_each_way() -> None:
    pool: Pool = ConnectionPool(PoolSettings(max_idle_connections=1))
    assert pool.stats() == PoolStats(open=0, idle=0, in_use=0, opened_total=0, reused_total=0)
    first = await use(pool, KEY, "a")
    await use(pool, KEY, "unused")  # reuses a
    assert pool.stats() == PoolStats(open=1, idle=1, in_use=0, opened_total=1, reused_total=1)
    async with pool.slot(), pool.slot():
        assert await pool.take(KEY) is first
        assert await pool.take(KEY) is None
        second = StandIn("b")
        pool.add(second, "b")
        assert pool.stats() == PoolStats(open=2, idle=0, in_use=2, opened_total=2, reused_total=2)
        await pool.give_back(KEY, first, reusable=False)
        await pool.give_back(KEY, second, reusable=True)
    assert first.closed and not second.closed
    assert pool.stats() == PoolStats(open=1, idle=1, in_use=0, opened_total=2, reused_total=2)
    await pool.aclose()
    assert pool.stats() == PoolStats(open=0, idle=0, in_use=0, opened_total=2, reused_total=2)


async def test_a_connection_given_back_without_being_added_is_counted_all_the_same() -> None:
    pool: Pool = ConnectionPool()
    async with pool.slot():
        await pool.give_back(KEY, StandIn("stray"), reusable=True)
    assert pool.stats() == PoolStats(open=1, idle=1, in_use=0, opened_total=1, reused_total=0)

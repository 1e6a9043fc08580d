"""Helpers for trio tasks: one exception out of a nursery, closing at once, the trio check.

Exception groups
----------------
A nursery wraps whatever its tasks and its body raise in a
:class:`BaseExceptionGroup`.  Our context managers own nurseries as an
implementation detail, so a caller who raised ``ValueError`` in the block, or
whose consumer task did, must get that ``ValueError`` back: not a group, and
not a copy whose chain we rewrote.  :func:`exceptions_unwrapped` is the one
place where that happens: it re-raises the single real exception *as itself*
(:func:`~chunkwise._core.errors.raise_itself`), its ``__cause__``,
``__traceback__`` and ``__context__`` as they were (``raise exc from None``
would erase the cause; a bare ``raise exc`` inside ``except`` would chain the
group as context).  Cancellations next to a real exception are its
consequence, so they are dropped; two real exceptions stay a group.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Protocol

import trio

from .._core.errors import raise_itself

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

__all__ = ["Closable", "close_now", "exceptions_unwrapped", "require_trio", "sole_exception"]


def sole_exception(group: BaseExceptionGroup[BaseException]) -> BaseException | None:
    """The one exception that matters in ``group`` (nested groups flattened).

    That is the only leaf which is not :class:`trio.Cancelled`, or the only
    leaf at all; ``None`` when several real exceptions happened at once.
    """
    leaves = list(_leaves(group))
    real = [exc for exc in leaves if not isinstance(exc, trio.Cancelled)]
    if len(real) == 1:
        return real[0]
    if not real:
        return leaves[0]  # only cancellations: any one stands for them all
    return None


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc


class exceptions_unwrapped:  # lower case: used like the function it was
    """Re-raise a group's :func:`sole_exception` as itself; other groups propagate unchanged.

    A class rather than a generator: every open stream holds one, and this one has no state.
    """

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: object,
    ) -> None:
        if isinstance(exc, BaseExceptionGroup):
            sole = sole_exception(exc)
            if sole is not None:
                raise_itself(sole)


class Closable(Protocol):
    """A trio stream or listener, a pooled connection: anything with ``aclose``."""

    async def aclose(self) -> None: ...


async def close_now(resource: Closable) -> None:
    """Close ``resource`` at once, without blocking and without raising ``Cancelled``.

    For ``finally`` blocks and the pool: :func:`trio.aclose_forcefully` alone
    raises ``Cancelled`` when an enclosing scope is cancelled, which would
    replace the exception that is on its way out, or leave a connection open.
    A forceful close never blocks, so shielding it is safe.
    """
    with trio.CancelScope(shield=True), trio.CancelScope() as forceful:
        forceful.cancel()  # trio.aclose_forcefully, which takes only an AsyncResource
        await resource.aclose()


def require_trio(what: str) -> None:
    """Raise a :class:`RuntimeError` saying how to run chunkwise unless a trio task runs this.

    Under asyncio the first trio call would fail with a message about trio's
    internals.  asyncio is asked only when it was imported: chunkwise never imports it.
    """
    try:
        trio.lowlevel.current_task()
    except RuntimeError:
        pass
    else:
        return
    asyncio = sys.modules.get("asyncio")
    if asyncio is not None:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise RuntimeError(
                f"{what} was called from asyncio, but chunkwise runs under trio: run your "
                "program with trio.run() (from an asyncio program, trio-asyncio can "
                "call it)"
            ) from None
    raise RuntimeError(f"{what} must be called from a trio task (inside trio.run())") from None

"""Small helpers shared by the trio layer and :mod:`chunkwise.testing`.

Exception groups
----------------
A nursery wraps whatever its tasks and its body raise in a
:class:`BaseExceptionGroup` (trio's strict exception groups).  Our context
managers own nurseries as an implementation detail, so a caller who raised
``ValueError`` in the block, or whose consumer task did, must get that
``ValueError`` back: not a group, and not a copy whose chain we rewrote.
:func:`exceptions_unwrapped` is the one place where that happens.  It re-raises
the single real exception *as itself* (:func:`~chunkwise._errors.raise_itself`):
its ``__cause__``, ``__traceback__`` and ``__context__`` are what they were when
it was raised (``raise exc from None`` would erase the cause; a bare
``raise exc`` inside ``except`` would chain the group as context).
Cancellations next to a real exception are its consequence, not news, so they
are dropped; two real exceptions stay a group.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from typing import Any, TypeVar

import trio

from ._errors import raise_itself

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

__all__ = [
    "MIN_KEY_PREFIX",
    "MIN_SECRET_LENGTH",
    "authority",
    "close_now",
    "exceptions_unwrapped",
    "fixup_module_metadata",
    "redact",
    "require_trio",
    "secret",
    "sole_exception",
    "url_host",
]

#: A key shorter than this is not treated as a secret to mask.  Local servers
#: accept any key and people type ``x``, ``e`` or ``test``: replacing every
#: ``e`` in received text with ``***`` destroys output and hides nothing.  Real
#: provider keys are several times longer.
MIN_SECRET_LENGTH = 16


def secret(key: str | None) -> str | None:
    """``key`` when it is long enough to be a secret worth masking, else ``None``."""
    return key if key is not None and len(key) >= MIN_SECRET_LENGTH else None


#: The shortest start of a key masked at the end of a cut text (see :func:`redact`).
MIN_KEY_PREFIX = 4

AnyText = TypeVar("AnyText", str, bytes)


def redact(text: AnyText, key: str | None, *, cut: bool = False) -> AnyText:
    """``text`` with every occurrence of ``key`` replaced by ``***``, if ``key`` is a secret.

    The one redaction rule of the library and the command line (see
    :data:`MIN_SECRET_LENGTH`): for messages, printed documents and the start
    of an error body a server quoted the key in, never for the bytes a
    recording keeps.  ``cut=True`` says ``text`` was cut short (by a size
    limit, or a connection that broke), so it may end inside an echo of the
    key: that start of the key (at least :data:`MIN_KEY_PREFIX` characters) is
    masked too.
    """
    secret_key = secret(key)
    if not secret_key:
        return text
    needle: Any = secret_key.encode() if isinstance(text, bytes) else secret_key
    mask: Any = b"***" if isinstance(text, bytes) else "***"
    text = text.replace(needle, mask)
    if cut:
        for length in range(len(needle) - 1, MIN_KEY_PREFIX - 1, -1):
            if text.endswith(needle[:length]):
                cut_text: AnyText = text[:-length] + mask
                return cut_text
    return text


def url_host(host: str) -> str:
    """``host`` as it is written in a URL or a ``Host`` header: IPv6 in brackets."""
    return f"[{host}]" if ":" in host else host


def authority(host: str, port: int) -> str:
    """``host:port``, with an IPv6 address in brackets (``[::1]:8000``)."""
    return f"{url_host(host)}:{port}"


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
    """Re-raise a group's :func:`sole_exception` as itself, chain untouched.

    Groups with several real exceptions propagate unchanged.  A class rather
    than a generator: every open stream holds one for as long as it is open,
    and this one has no instance state at all.
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


async def close_now(resource: trio.abc.AsyncResource) -> None:
    """Close ``resource`` at once, without blocking and without raising ``Cancelled``.

    For ``finally`` blocks: :func:`trio.aclose_forcefully` alone raises ``Cancelled``
    when an enclosing scope is cancelled, which would replace the exception that
    is on its way out.  A forceful close never blocks, so shielding it is safe.
    """
    with trio.CancelScope(shield=True):
        await trio.aclose_forcefully(resource)


def fixup_module_metadata(module_name: str, namespace: Mapping[str, Any]) -> None:
    """Make the public names in ``namespace["__all__"]`` report ``module_name``.

    Classes and functions defined in private modules would otherwise show up as
    ``chunkwise._stream.ChatStream`` in reprs, tracebacks and documentation;
    users should see the name they import (trio does the same).  Methods of
    the classes are fixed too.
    """
    seen: set[int] = set()

    def fix(obj: Any, qualname: str) -> None:
        if id(obj) in seen:
            return
        seen.add(id(obj))
        module = getattr(obj, "__module__", None)
        if not isinstance(module, str) or not module.startswith("chunkwise."):
            return
        obj.__module__ = module_name
        if isinstance(obj, type):
            for attr_name, value in list(vars(obj).items()):
                if isinstance(value, (type, staticmethod, classmethod, property)):
                    continue
                if callable(value) and getattr(value, "__qualname__", "").startswith(qualname):
                    fix(value, f"{qualname}.{attr_name}")

    for name in namespace["__all__"]:
        obj = namespace[name]
        if isinstance(obj, type) or callable(obj):
            fix(obj, getattr(obj, "__qualname__", name))


def require_trio(what: str) -> None:
    """Raise a :class:`RuntimeError` saying how to run chunkwise unless a trio task runs this.

    chunkwise's I/O is trio's: under asyncio (or any other loop) the first
    trio call would fail with a message about trio's internals.  Whether an
    asyncio loop runs is asked only when asyncio was imported, so chunkwise
    never imports it.
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

"""A client: connections kept alive and reused across requests to one endpoint.

:class:`Client` is a resource in trio's sense: ``async with Client(endpoint) as
client`` owns a :class:`~chunkwise._pool.ConnectionPool`, and leaving the block
closes every idle connection.  Requests made through it are the module-level
ones (:func:`~chunkwise.open_chat_stream`, :func:`~chunkwise.complete_chat`,
:func:`~chunkwise.open_response_stream`, :func:`~chunkwise.complete_response`,
:func:`~chunkwise.open_completion_stream`, :func:`~chunkwise.complete_completion`),
with the same stream object, fan-out, retries and guarantees; the only
difference is where their connection comes from and where it goes afterwards.
No task runs in the background: an idle connection the server closed is
noticed, and discarded, when the next request looks at it.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any

from ._apis import CHAT, COMPLETIONS, RESPONSES, attach_to
from ._chat import ChatResult
from ._completions import CompletionResult
from ._endpoint import Endpoint
from ._http11 import Connection
from ._pool import ConnectionPool, PoolSettings, PoolStats
from ._responses import ResponseResult
from ._resume import cancel
from ._sse import DEFAULT_MAX_EVENT_SIZE
from ._stream import ChatStream, CompletionStream, ResponseStream, complete, open_stream
from ._util import require_trio

__all__ = ["Client"]


class Client:
    """Requests to ``endpoint`` over kept-alive connections.

    Args:
        endpoint: where requests go, with its key, timeouts, retries and proxy.
        max_connections: connections open at once, idle ones included; a
            request beyond it waits (cancellably) for one to be free.
        max_idle_connections: idle connections kept for reuse (0: none).
        idle_expiry: seconds an idle connection is kept; an older one is closed
            instead of being used (servers close idle connections too, often
            after 5 to 60 seconds).

    Use it as ``async with chunkwise.Client(endpoint) as client:``; leaving the
    block closes the idle connections.  Streams must have ended by then (they
    are the caller's: each closes or returns its own connection when its
    ``async with`` block is left).
    """

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        max_connections: int = 100,
        max_idle_connections: int = 20,
        idle_expiry: float = 5.0,
    ) -> None:
        if not isinstance(endpoint, Endpoint):
            raise TypeError(f"endpoint must be an Endpoint, not {type(endpoint).__name__}")
        self.endpoint = endpoint
        self._pool: ConnectionPool[Connection] = ConnectionPool(
            PoolSettings(
                max_connections=max_connections,
                max_idle_connections=max_idle_connections,
                idle_expiry=idle_expiry,
            )
        )

    @property
    def idle_connections(self) -> int:
        """How many kept-alive connections are waiting for the next request."""
        return self._pool.idle_count

    @property
    def stats(self) -> PoolStats:
        """A snapshot of this client's connections: open, idle, in use, opened and reused.

        ``stats.reused_total`` growing while ``stats.opened_total`` stays put is
        connection reuse at work; each step is also logged at DEBUG on the
        ``chunkwise`` logger (see :doc:`client`).
        """
        return self._pool.stats()

    def open_chat_stream(
        self, request: Mapping[str, Any], *, max_event_size: int = DEFAULT_MAX_EVENT_SIZE
    ) -> AbstractAsyncContextManager[ChatStream]:
        """:func:`chunkwise.open_chat_stream` on this client's connections."""
        return open_stream(
            CHAT, self.endpoint, request, max_event_size=max_event_size, pool=self._pool
        )

    async def complete_chat(
        self, request: Mapping[str, Any], *, max_event_size: int = DEFAULT_MAX_EVENT_SIZE
    ) -> ChatResult:
        """:func:`chunkwise.complete_chat` on this client's connections."""
        return await complete(
            CHAT, self.endpoint, request, max_event_size=max_event_size, pool=self._pool
        )

    def open_response_stream(
        self,
        request: Mapping[str, Any] | None = None,
        *,
        response_id: str | None = None,
        starting_after: int | None = None,
        max_event_size: int = DEFAULT_MAX_EVENT_SIZE,
    ) -> AbstractAsyncContextManager[ResponseStream]:
        """:func:`chunkwise.open_response_stream` on this client's connections.

        Resumptions and polls of a background response use them too.
        """
        attach = attach_to(request, response_id, starting_after)
        return open_stream(
            RESPONSES,
            self.endpoint,
            {} if request is None else request,
            max_event_size=max_event_size,
            pool=self._pool,
            attach=attach,
        )

    async def cancel_response(self, response_id: str) -> dict[str, Any]:
        """:func:`chunkwise.cancel_response` on this client's connections."""
        return await cancel(self.endpoint, response_id, self._pool)

    async def complete_response(
        self, request: Mapping[str, Any], *, max_event_size: int = DEFAULT_MAX_EVENT_SIZE
    ) -> ResponseResult:
        """:func:`chunkwise.complete_response` on this client's connections."""
        return await complete(
            RESPONSES, self.endpoint, request, max_event_size=max_event_size, pool=self._pool
        )

    def open_completion_stream(
        self, request: Mapping[str, Any], *, max_event_size: int = DEFAULT_MAX_EVENT_SIZE
    ) -> AbstractAsyncContextManager[CompletionStream]:
        """:func:`chunkwise.open_completion_stream` on this client's connections."""
        return open_stream(
            COMPLETIONS, self.endpoint, request, max_event_size=max_event_size, pool=self._pool
        )

    async def complete_completion(
        self, request: Mapping[str, Any], *, max_event_size: int = DEFAULT_MAX_EVENT_SIZE
    ) -> CompletionResult:
        """:func:`chunkwise.complete_completion` on this client's connections."""
        return await complete(
            COMPLETIONS, self.endpoint, request, max_event_size=max_event_size, pool=self._pool
        )

    async def aclose(self) -> None:
        """Close every idle connection; connections given back later are closed too."""
        await self._pool.aclose()

    async def __aenter__(self) -> Client:
        require_trio("chunkwise.Client")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        settings = self._pool.settings
        return (
            f"Client({self.endpoint!r}, max_connections={settings.max_connections}, "
            f"max_idle_connections={settings.max_idle_connections}, "
            f"idle_expiry={settings.idle_expiry!r})"
        )

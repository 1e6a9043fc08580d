"""A client: connections kept alive and reused across requests to one endpoint.

Requests made through a :class:`Client` are the namespaces' own functions on
its :class:`~chunkwise._net.pool.ConnectionPool`: only where their connection
comes from and where it goes afterwards differ.  No task runs in the
background: an idle connection the server closed is noticed, and discarded,
when the next request looks at it.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any

from ._core.checks import instance_of
from ._core.endpoint import Endpoint
from ._core.names import warn_renamed
from ._core.sse import DEFAULT_MAX_EVENT_SIZE
from ._net.http11 import Connection
from ._net.pool import ConnectionPool, PoolSettings, PoolStats
from ._net.tasks import require_trio
from ._stream import ClientApi
from .chat import Result as ChatResult
from .chat._stream import API as CHAT
from .chat._stream import Stream as ChatStream
from .completions import Result as CompletionResult
from .completions._stream import API as COMPLETIONS
from .completions._stream import Stream as CompletionStream
from .messages import Result as MessageResult
from .messages._stream import API as MESSAGES
from .messages._stream import Stream as MessageStream
from .responses import Result as ResponseResult
from .responses._stream import API as RESPONSES
from .responses._stream import ClientResponses, open_response_stream
from .responses._stream import Stream as ResponseStream

__all__ = ["Client"]

_ENDPOINT = instance_of(Endpoint, "a chunkwise.Endpoint").raising(TypeError)


class Client:
    """Requests to ``endpoint`` over kept-alive connections (:doc:`/client`).

    Args:
        endpoint: where requests go, with its key, timeouts, retries and proxy.
        max_connections: connections open at once, idle ones included; a
            request beyond it waits (cancellably) for one to be free.
        max_idle_connections: idle connections kept for reuse (0: none).
        idle_expiry: seconds an idle connection is kept; an older one is closed
            instead of being used (servers close idle connections too, often
            after 5 to 60 seconds).

    Use it as ``async with chunkwise.Client(endpoint) as client:``, then
    ``client.chat.open_stream(request)`` and so on.  Leaving the block closes
    the idle connections; streams must have ended by then.
    """

    #: :func:`chunkwise.chat.open_stream` and :func:`~chunkwise.chat.complete`
    #: on this client's connections.
    chat: ClientApi[ChatStream, ChatResult]
    #: :func:`chunkwise.responses.open_stream`, :func:`~chunkwise.responses.complete`,
    #: :func:`~chunkwise.responses.attach` and :func:`~chunkwise.responses.cancel`
    #: on this client's connections (resumptions and polls too).
    responses: ClientResponses
    #: :func:`chunkwise.completions.open_stream` and
    #: :func:`~chunkwise.completions.complete` on this client's connections.
    completions: ClientApi[CompletionStream, CompletionResult]
    #: :func:`chunkwise.messages.open_stream` and
    #: :func:`~chunkwise.messages.complete` on this client's connections.
    messages: ClientApi[MessageStream, MessageResult]

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        max_connections: int = 100,
        max_idle_connections: int = 20,
        idle_expiry: float = 5.0,
    ) -> None:
        _ENDPOINT.check("endpoint", endpoint)
        self.endpoint = endpoint
        self._pool: ConnectionPool[Connection] = ConnectionPool(
            PoolSettings(
                max_connections=max_connections,
                max_idle_connections=max_idle_connections,
                idle_expiry=idle_expiry,
            )
        )
        self.chat = ClientApi(CHAT, endpoint, self._pool)
        self.responses = ClientResponses(RESPONSES, endpoint, self._pool)
        self.completions = ClientApi(COMPLETIONS, endpoint, self._pool)
        self.messages = ClientApi(MESSAGES, endpoint, self._pool)

    @property
    def idle_connections(self) -> int:
        """How many kept-alive connections are waiting for the next request."""
        return self._pool.idle_count

    @property
    def stats(self) -> PoolStats:
        """A snapshot of this client's connections: open, idle, in use, opened and reused."""
        return self._pool.stats()

    # -- the round-3 spellings (chunkwise._core.names.RENAMED) --------------------

    def open_chat_stream(
        self, request: Mapping[str, Any], *, max_event_size: int = DEFAULT_MAX_EVENT_SIZE
    ) -> AbstractAsyncContextManager[ChatStream]:
        """Deprecated: ``client.chat.open_stream``."""
        warn_renamed("chunkwise.Client.open_chat_stream")
        return self.chat.open_stream(request, max_event_size=max_event_size)

    async def complete_chat(
        self, request: Mapping[str, Any], *, max_event_size: int = DEFAULT_MAX_EVENT_SIZE
    ) -> ChatResult:
        """Deprecated: ``client.chat.complete``."""
        warn_renamed("chunkwise.Client.complete_chat")
        return await self.chat.complete(request, max_event_size=max_event_size)

    def open_response_stream(
        self,
        request: Mapping[str, Any] | None = None,
        *,
        response_id: str | None = None,
        starting_after: int | None = None,
        max_event_size: int = DEFAULT_MAX_EVENT_SIZE,
    ) -> AbstractAsyncContextManager[ResponseStream]:
        """Deprecated: ``client.responses.open_stream`` (``client.responses.attach``)."""
        warn_renamed("chunkwise.Client.open_response_stream")
        return open_response_stream(
            self.endpoint,
            request,
            response_id=response_id,
            starting_after=starting_after,
            max_event_size=max_event_size,
            pool=self._pool,
        )

    async def cancel_response(self, response_id: str) -> dict[str, Any]:
        """Deprecated: ``client.responses.cancel``."""
        warn_renamed("chunkwise.Client.cancel_response")
        return await self.responses.cancel(response_id)

    async def complete_response(
        self, request: Mapping[str, Any], *, max_event_size: int = DEFAULT_MAX_EVENT_SIZE
    ) -> ResponseResult:
        """Deprecated: ``client.responses.complete``."""
        warn_renamed("chunkwise.Client.complete_response")
        return await self.responses.complete(request, max_event_size=max_event_size)

    def open_completion_stream(
        self, request: Mapping[str, Any], *, max_event_size: int = DEFAULT_MAX_EVENT_SIZE
    ) -> AbstractAsyncContextManager[CompletionStream]:
        """Deprecated: ``client.completions.open_stream``."""
        warn_renamed("chunkwise.Client.open_completion_stream")
        return self.completions.open_stream(request, max_event_size=max_event_size)

    async def complete_completion(
        self, request: Mapping[str, Any], *, max_event_size: int = DEFAULT_MAX_EVENT_SIZE
    ) -> CompletionResult:
        """Deprecated: ``client.completions.complete``."""
        warn_renamed("chunkwise.Client.complete_completion")
        return await self.completions.complete(request, max_event_size=max_event_size)

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

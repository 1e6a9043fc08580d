"""Types and defaults a program receives from chunkwise more often than it names them.

* :class:`DecoderState`: an :class:`~chunkwise.SSEDecoder`'s
  :attr:`~chunkwise.SSEDecoder.state`;
* :class:`GapStatistics`: :attr:`Timings.gaps <chunkwise.Timings.gaps>`;
* :class:`Headers`: a stream's response headers (``stream.headers``);
* :class:`PoolStats`: a :class:`~chunkwise.Client`'s ``stats``;
* :data:`Family`: what ``stream.subscribe(family)`` takes; :data:`Batch`: what a
  batched subscriber receives; :data:`LifecycleEvent`: the events every API
  shares;
* the defaults: :data:`DEFAULT_BASE_URL` (an :class:`~chunkwise.Endpoint`'s),
  :data:`DEFAULT_MAX_EVENT_SIZE` (an :class:`~chunkwise.SSEDecoder`'s),
  :data:`DEFAULT_BUFFER_SIZE` (a subscriber's).

``PoolStats`` and ``DEFAULT_BUFFER_SIZE`` belong to the trio layer and are
imported on first use.
"""

from typing import TYPE_CHECKING

from ._core.endpoint import DEFAULT_BASE_URL
from ._core.events import Batch, Family, LifecycleEvent
from ._core.headers import Headers
from ._core.names import public_face
from ._core.sse import DEFAULT_MAX_EVENT_SIZE, DecoderState
from ._core.timings import GapStatistics

if TYPE_CHECKING:
    from ._fanout import DEFAULT_BUFFER_SIZE
    from ._net.pool import PoolStats

__all__ = [
    "DEFAULT_BASE_URL",
    "DEFAULT_BUFFER_SIZE",
    "DEFAULT_MAX_EVENT_SIZE",
    "Batch",
    "DecoderState",
    "Family",
    "GapStatistics",
    "Headers",
    "LifecycleEvent",
    "PoolStats",
]

public_face(
    globals(), {"DEFAULT_BUFFER_SIZE": "chunkwise._fanout", "PoolStats": "chunkwise._net.pool"}
)

"""chunkwise: OpenAI-style model output streams, parsed correctly at every chunk boundary.

One namespace per API, each with the same shape (``Parser``, ``Accumulator``,
``Result``, its events, ``open_stream``, ``complete``):
:mod:`chunkwise.chat` (``/chat/completions``), :mod:`chunkwise.responses`
(``/responses``), :mod:`chunkwise.completions` (legacy ``/completions``) and
:mod:`chunkwise.messages` (Anthropic's ``/v1/messages``).  This module holds
what they share: the client and its settings, the layer-1 SSE decoder, live
partial JSON, the values and lifecycle events every API has, and the
exceptions (all of them in :mod:`chunkwise.errors`; the types a program rarely
names in :mod:`chunkwise.types`).

The parsers are sans-IO and need no trio: the trio layer (:class:`Client` and
each namespace's ``open_stream``...) is imported on first use, so
``import chunkwise`` and ``from chunkwise.chat import Parser`` import neither
trio nor h11.  The names of the previous release keep working for one more,
with a :class:`DeprecationWarning` that names the new spelling
(``chunkwise.ChatStreamParser`` is ``chunkwise.chat.Parser``).
"""

from typing import TYPE_CHECKING

from . import chat as chat
from . import completions as completions
from . import messages as messages
from . import responses as responses
from ._core.endpoint import Endpoint, Timeouts
from ._core.errors import (
    ChunkwiseError,
    ConnectionLost,
    ConnectTimeout,
    HTTPStatusError,
    IdleTimeout,
    InvalidEndpoint,
    InvalidJSON,
    InvalidRequest,
    LocalProtocolError,
    ProtocolError,
    ProxyError,
    RemoteProtocolError,
    StallTimeout,
    StreamError,
    StructuredOutputError,
    ToolArgumentsError,
    TransportError,
)
from ._core.events import (
    AnomalyDetected,
    Event,
    EventsDropped,
    HeadReceived,
    RawEvent,
    Retrying,
    StreamCompleted,
    StreamErrorReceived,
    StreamFailed,
    StreamIncomplete,
    TerminalEvent,
    UsageReported,
)
from ._core.json_patches import Patch, apply_patches
from ._core.names import public_face
from ._core.partial_json import PartialJSON, partial_json
from ._core.results import Anomaly, IncompleteReason, Status, ToolCall
from ._core.retries import Retries
from ._core.sse import ServerSentEvent, SSEDecoder
from ._core.timings import Timings
from ._core.version import __version__

if TYPE_CHECKING:
    from ._client import Client

__all__ = [
    "Anomaly",
    "AnomalyDetected",
    "ChunkwiseError",
    "Client",
    "ConnectTimeout",
    "ConnectionLost",
    "Endpoint",
    "Event",
    "EventsDropped",
    "HTTPStatusError",
    "HeadReceived",
    "IdleTimeout",
    "IncompleteReason",
    "InvalidEndpoint",
    "InvalidJSON",
    "InvalidRequest",
    "LocalProtocolError",
    "PartialJSON",
    "Patch",
    "ProtocolError",
    "ProxyError",
    "RawEvent",
    "RemoteProtocolError",
    "Retries",
    "Retrying",
    "SSEDecoder",
    "ServerSentEvent",
    "StallTimeout",
    "Status",
    "StreamCompleted",
    "StreamError",
    "StreamErrorReceived",
    "StreamFailed",
    "StreamIncomplete",
    "StructuredOutputError",
    "TerminalEvent",
    "Timeouts",
    "Timings",
    "ToolArgumentsError",
    "ToolCall",
    "TransportError",
    "UsageReported",
    "__version__",
    "apply_patches",
    "partial_json",
]

public_face(globals(), {"Client": "chunkwise._client"})

# After public_face above, so that the exceptions both modules offer report
# ``chunkwise``; the narrower ones report ``chunkwise.errors``.
from . import errors as errors  # noqa: E402
from . import types as types  # noqa: E402

del TYPE_CHECKING, public_face

"""chunkwise: OpenAI-style chat completion streams, parsed correctly at every chunk boundary.

Layers 1-3 (bytes to SSE events to chat events) are sans-IO: they do no I/O and
need no trio.  Layers 4-5 (HTTP over trio, fan-out to subscribers) build on them.
"""

from ._accumulator import ChatAccumulator
from ._client import Client
from ._endpoint import DEFAULT_BASE_URL, Endpoint, Timeouts
from ._errors import (
    ChunkwiseError,
    ConnectionLost,
    ConnectTimeout,
    EventTooLarge,
    HTTPStatusError,
    IdleTimeout,
    IncompleteBody,
    InvalidChunk,
    InvalidEndpoint,
    LocalProtocolError,
    ProtocolError,
    ProxyError,
    RemoteProtocolError,
    StreamError,
    ToolArgumentsError,
    TransportError,
    UnexpectedContentEncoding,
    UnexpectedContentType,
)
from ._events import (
    AnomalyDetected,
    ChoiceEvent,
    ChoiceFinished,
    ContentDelta,
    Event,
    EventsDropped,
    LifecycleEvent,
    ReasoningDelta,
    RefusalDelta,
    ResponseStarted,
    StreamCompleted,
    StreamErrorReceived,
    StreamFailed,
    StreamIncomplete,
    TerminalEvent,
    ToolCallArgumentsDelta,
    ToolCallCompleted,
    ToolCallEvent,
    ToolCallStarted,
    UsageReported,
)
from ._fanout import DEFAULT_BUFFER_SIZE, Batch, Family
from ._headers import Headers
from ._parser import ChatStreamParser
from ._results import Anomaly, ChatResult, ChoiceResult, IncompleteReason, Status, ToolCall
from ._retries import Retries
from ._sse import DEFAULT_MAX_EVENT_SIZE, ServerSentEvent, SSEDecoder
from ._stream import ChatStream, complete_chat, open_chat_stream
from ._util import fixup_module_metadata
from ._version import __version__

__all__ = [
    "DEFAULT_BASE_URL",
    "DEFAULT_BUFFER_SIZE",
    "DEFAULT_MAX_EVENT_SIZE",
    "Anomaly",
    "AnomalyDetected",
    "Batch",
    "ChatAccumulator",
    "ChatResult",
    "ChatStream",
    "ChatStreamParser",
    "ChoiceEvent",
    "ChoiceFinished",
    "ChoiceResult",
    "ChunkwiseError",
    "Client",
    "ConnectTimeout",
    "ConnectionLost",
    "ContentDelta",
    "Endpoint",
    "Event",
    "EventTooLarge",
    "EventsDropped",
    "Family",
    "HTTPStatusError",
    "Headers",
    "IdleTimeout",
    "IncompleteBody",
    "IncompleteReason",
    "InvalidChunk",
    "InvalidEndpoint",
    "LifecycleEvent",
    "LocalProtocolError",
    "ProtocolError",
    "ProxyError",
    "ReasoningDelta",
    "RefusalDelta",
    "RemoteProtocolError",
    "ResponseStarted",
    "Retries",
    "SSEDecoder",
    "ServerSentEvent",
    "Status",
    "StreamCompleted",
    "StreamError",
    "StreamErrorReceived",
    "StreamFailed",
    "StreamIncomplete",
    "TerminalEvent",
    "Timeouts",
    "ToolArgumentsError",
    "ToolCall",
    "ToolCallArgumentsDelta",
    "ToolCallCompleted",
    "ToolCallEvent",
    "ToolCallStarted",
    "TransportError",
    "UnexpectedContentEncoding",
    "UnexpectedContentType",
    "UsageReported",
    "__version__",
    "complete_chat",
    "open_chat_stream",
]

fixup_module_metadata(__name__, globals())
del fixup_module_metadata

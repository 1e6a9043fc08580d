"""chunkwise: OpenAI-style chat completion streams, parsed correctly at every chunk boundary.

Layers 1-3 (bytes to SSE events to chat events) are sans-IO and import no trio.
"""

from ._accumulator import ChatAccumulator
from ._errors import (
    ChunkwiseError,
    EventTooLarge,
    HTTPStatusError,
    InvalidChunk,
    LocalProtocolError,
    ProtocolError,
    RemoteProtocolError,
    StreamError,
    ToolArgumentsError,
    TransportError,
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
from ._parser import ChatStreamParser
from ._results import Anomaly, ChatResult, ChoiceResult, IncompleteReason, Status, ToolCall
from ._sse import DEFAULT_MAX_EVENT_SIZE, ServerSentEvent, SSEDecoder
from ._version import __version__

__all__ = [
    "DEFAULT_MAX_EVENT_SIZE",
    "Anomaly",
    "AnomalyDetected",
    "ChatAccumulator",
    "ChatResult",
    "ChatStreamParser",
    "ChoiceEvent",
    "ChoiceFinished",
    "ChoiceResult",
    "ChunkwiseError",
    "ContentDelta",
    "Event",
    "EventTooLarge",
    "EventsDropped",
    "HTTPStatusError",
    "IncompleteReason",
    "InvalidChunk",
    "LifecycleEvent",
    "LocalProtocolError",
    "ProtocolError",
    "ReasoningDelta",
    "RefusalDelta",
    "RemoteProtocolError",
    "ResponseStarted",
    "SSEDecoder",
    "ServerSentEvent",
    "Status",
    "StreamCompleted",
    "StreamError",
    "StreamErrorReceived",
    "StreamFailed",
    "StreamIncomplete",
    "TerminalEvent",
    "ToolArgumentsError",
    "ToolCall",
    "ToolCallArgumentsDelta",
    "ToolCallCompleted",
    "ToolCallEvent",
    "ToolCallStarted",
    "TransportError",
    "UsageReported",
    "__version__",
]

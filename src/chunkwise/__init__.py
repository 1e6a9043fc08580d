"""chunkwise: OpenAI-style model output streams, parsed correctly at every chunk boundary.

Both APIs: chat completions (``/chat/completions``) and the Responses API
(``/responses``).  Layers 1-3 (bytes to SSE events to typed events and a
result) are sans-IO: they do no I/O and need no trio.  Layers 4-5 (HTTP over
trio, fan-out to subscribers) build on them.
"""

from ._accumulator import ChatAccumulator
from ._apis import complete_chat, complete_response, open_chat_stream, open_response_stream
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
    UnexpectedContentEncoding,
    UnexpectedContentType,
)
from ._events import (
    AnomalyDetected,
    ChatEvent,
    ChoiceEvent,
    ChoiceFinished,
    ContentDelta,
    Event,
    EventsDropped,
    FunctionCallArgumentsDelta,
    FunctionCallCompleted,
    FunctionCallEvent,
    FunctionCallStarted,
    LifecycleEvent,
    OutputEvent,
    OutputItemAdded,
    OutputItemDone,
    OutputRefusalDelta,
    OutputTextDelta,
    ReasoningDelta,
    ReasoningSummaryDelta,
    ReasoningTextDelta,
    RefusalDelta,
    ResponseEvent,
    ResponseStarted,
    ResponseStatusChanged,
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
from ._json_patches import Patch, apply_patches
from ._parser import ChatStreamParser, ResponseStreamParser
from ._partial_json import PartialJSON, partial_json
from ._pool import PoolStats
from ._response_accumulator import ResponseAccumulator
from ._response_results import ContentPart, FunctionCall, OutputItem, ResponseResult
from ._results import Anomaly, ChatResult, ChoiceResult, IncompleteReason, Status, ToolCall
from ._retries import Retries
from ._sse import DEFAULT_MAX_EVENT_SIZE, ServerSentEvent, SSEDecoder
from ._stream import ChatStream, ResponseStream
from ._timings import GapStatistics, Timings
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
    "ChatEvent",
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
    "ContentPart",
    "Endpoint",
    "Event",
    "EventTooLarge",
    "EventsDropped",
    "Family",
    "FunctionCall",
    "FunctionCallArgumentsDelta",
    "FunctionCallCompleted",
    "FunctionCallEvent",
    "FunctionCallStarted",
    "GapStatistics",
    "HTTPStatusError",
    "Headers",
    "IdleTimeout",
    "IncompleteBody",
    "IncompleteReason",
    "InvalidChunk",
    "InvalidEndpoint",
    "InvalidJSON",
    "InvalidRequest",
    "LifecycleEvent",
    "LocalProtocolError",
    "OutputEvent",
    "OutputItem",
    "OutputItemAdded",
    "OutputItemDone",
    "OutputRefusalDelta",
    "OutputTextDelta",
    "PartialJSON",
    "Patch",
    "PoolStats",
    "ProtocolError",
    "ProxyError",
    "ReasoningDelta",
    "ReasoningSummaryDelta",
    "ReasoningTextDelta",
    "RefusalDelta",
    "RemoteProtocolError",
    "ResponseAccumulator",
    "ResponseEvent",
    "ResponseResult",
    "ResponseStarted",
    "ResponseStatusChanged",
    "ResponseStream",
    "ResponseStreamParser",
    "Retries",
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
    "ToolCallArgumentsDelta",
    "ToolCallCompleted",
    "ToolCallEvent",
    "ToolCallStarted",
    "TransportError",
    "UnexpectedContentEncoding",
    "UnexpectedContentType",
    "UsageReported",
    "__version__",
    "apply_patches",
    "complete_chat",
    "complete_response",
    "open_chat_stream",
    "open_response_stream",
    "partial_json",
]

fixup_module_metadata(__name__, globals())
del fixup_module_metadata

"""Every exception chunkwise raises or reports, in one hierarchy.

The ones most code names are also at the top level (``chunkwise.TransportError``);
the narrower ones are here alone: :class:`EventTooLarge`, :class:`InvalidChunk`,
:class:`IncompleteBody`, :class:`UnexpectedContentType` and
:class:`UnexpectedContentEncoding`.  Two axes, as httpcore's: what went wrong
(:class:`ProtocolError`: :class:`LocalProtocolError` is the caller's mistake,
:class:`RemoteProtocolError` the peer's; :class:`TransportError`: the
connection; :class:`HTTPStatusError`: a non-2xx answer; :class:`StreamError`:
an error the server reported inside the stream), and, for the transport,
whether it was a timeout (:class:`ConnectTimeout`, :class:`IdleTimeout`,
:class:`StallTimeout`).  Every one has ``message``, ``type`` and ``code``, as an
OpenAI error object does.
"""

from ._core.errors import (
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
from ._core.names import public_face

__all__ = [
    "ChunkwiseError",
    "ConnectTimeout",
    "ConnectionLost",
    "EventTooLarge",
    "HTTPStatusError",
    "IdleTimeout",
    "IncompleteBody",
    "InvalidChunk",
    "InvalidEndpoint",
    "InvalidJSON",
    "InvalidRequest",
    "LocalProtocolError",
    "ProtocolError",
    "ProxyError",
    "RemoteProtocolError",
    "StallTimeout",
    "StreamError",
    "StructuredOutputError",
    "ToolArgumentsError",
    "TransportError",
    "UnexpectedContentEncoding",
    "UnexpectedContentType",
]

public_face(globals())

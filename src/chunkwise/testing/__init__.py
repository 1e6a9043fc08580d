"""Test support: a real loopback HTTP/1.1 server and scripted responses.

Tests of a streaming client are only convincing against real sockets: the kernel
splits and merges writes, a peer that closes early produces a real EOF or reset,
and a client that forgets to close its socket leaks a real file descriptor.
This package is the public face of the server engine chunkwise's own tests use
(and ``chunkwise-tools``' emulator stands on), as :mod:`trio.testing` is a face
over trio's private modules:

* :func:`open_test_server` / :func:`serve_test_server`: a loopback server that
  answers with a :class:`ScriptedResponse` (status, headers, body, framing,
  write sizes, delays, a cut-off), a list of them, or a handler coroutine
  writing through a :class:`ResponseWriter`; every request is recorded.
* :func:`serve_stream`: the same server on one connected stream, e.g. an end of
  :func:`trio.testing.memory_stream_pair`, for virtual-time tests.
* :func:`tls_contexts`: a throwaway CA (needs ``trustme``, the ``test`` extra).

The OpenAI-compatible emulator that ``chunkwise serve`` runs is not here: it is
``chunkwise_tools.server`` (the ``chunkwise-tools`` distribution), a handler
for this server.

Everything runs in the caller's task tree: leaving an ``async with`` cancels the
server and closes every connection, and a handler that raises fails the test.
"""

from .._core.names import public_face
from ._http_server import (
    Handler,
    LoopbackServer,
    Script,
    ServerConnection,
    open_test_server,
    serve_stream,
    serve_test_server,
    tls_contexts,
)
from ._responses import Framing, RecordedRequest, ResponseWriter, ScriptedResponse

__all__ = [
    "Framing",
    "Handler",
    "LoopbackServer",
    "RecordedRequest",
    "ResponseWriter",
    "Script",
    "ScriptedResponse",
    "ServerConnection",
    "open_test_server",
    "serve_stream",
    "serve_test_server",
    "tls_contexts",
]

public_face(globals())
del public_face

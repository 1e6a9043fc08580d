"""Test support: a real loopback HTTP/1.1 server, scripted responses, and the OpenAI server.

Tests of a streaming client are only convincing against real sockets: the kernel
splits and merges writes, a peer that closes early produces a real EOF or reset,
and a client that forgets to close its socket leaks a real file descriptor.
This module is the public face of the servers chunkwise itself uses (its own
tests, ``chunkwise serve`` and ``chunkwise demo``), as :mod:`trio.testing` is a
face over trio's private modules:

* :func:`open_test_server` / :func:`serve_test_server`: a loopback server that
  answers with a :class:`ScriptedResponse` (status, headers, body, framing,
  write sizes, delays, a cut-off), a list of them, or a handler coroutine
  writing through a :class:`ResponseWriter`; every request is recorded.
* :func:`serve_stream`: the same server on one connected stream, e.g. an end of
  :func:`trio.testing.memory_stream_pair`, for virtual-time tests.
* :func:`open_chat_server`: the OpenAI-compatible server that ``chunkwise
  serve`` runs (``/v1/chat/completions`` and ``/v1/responses``), with
  :data:`SCENARIOS`, :data:`RESPONSE_SCENARIOS` and :class:`ServerOptions`.
  Its background Responses run in a nursery it owns; a bare
  :class:`ChatServer` (e.g. under :func:`serve_stream`) takes one as
  ``nursery=``, and :meth:`ChatServer.retained` shows a stored response.
* :func:`tls_contexts`: a throwaway CA (needs ``trustme``, the ``test`` extra).

Everything runs in the caller's task tree: leaving an ``async with`` cancels the
server and closes every connection, and a handler that raises fails the test.
"""

from ._names import fixup_module_metadata
from ._server._chat_server import ChatServer, open_chat_server
from ._server._http_server import (
    Handler,
    LoopbackServer,
    Script,
    ServerConnection,
    open_test_server,
    serve_stream,
    serve_test_server,
    tls_contexts,
)
from ._server._options import ServerOptions
from ._server._response_scenarios import RESPONSE_SCENARIOS, ResponseScenario, ResponseStyle
from ._server._responses import Framing, RecordedRequest, ResponseWriter, ScriptedResponse
from ._server._scenarios import SCENARIOS, Scenario, ToolCallScript, WireStyle

__all__ = [
    "RESPONSE_SCENARIOS",
    "SCENARIOS",
    "ChatServer",
    "Framing",
    "Handler",
    "LoopbackServer",
    "RecordedRequest",
    "ResponseScenario",
    "ResponseStyle",
    "ResponseWriter",
    "Scenario",
    "Script",
    "ScriptedResponse",
    "ServerConnection",
    "ServerOptions",
    "ToolCallScript",
    "WireStyle",
    "open_chat_server",
    "open_test_server",
    "serve_stream",
    "serve_test_server",
    "tls_contexts",
]

fixup_module_metadata(__name__, globals())
del fixup_module_metadata

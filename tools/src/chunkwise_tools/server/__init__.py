"""The OpenAI-compatible emulator behind ``chunkwise serve`` and ``chunkwise demo``.

It answers ``/v1/chat/completions``, ``/v1/responses`` and ``/v1/completions``
as OpenAI (and vLLM, llama.cpp, TGI...) stream them, and ``/v1/messages`` as
Anthropic does, from scripted scenarios,
on the generic loopback server of :mod:`chunkwise.testing`; a test may run it
like any server:

* :func:`open_chat_server`: the emulator on a loopback port, with
  :data:`SCENARIOS`, :data:`RESPONSE_SCENARIOS` and :class:`ServerOptions`.
  Its background Responses run in a nursery it owns; a bare
  :class:`ChatServer` (e.g. under :func:`chunkwise.testing.serve_stream`)
  takes one as ``nursery=``, and :meth:`ChatServer.retained` shows a stored
  response.

It imports neither the command line nor anything of chunkwise but its public
faces (:mod:`chunkwise`, :mod:`chunkwise.testing`, :mod:`chunkwise.lowlevel`).
Its private modules:

* :mod:`._scenarios`: pure data and pure functions saying what a scripted chat
  stream holds and how it is written;
* :mod:`._response_scenarios`: the same data for Responses API streams,
  saying the chat scenarios' words; :mod:`._response_wire`: how they are
  written (events and bytes);
* :mod:`._completion_wire`: legacy completions (``/v1/completions``) answers
  from the chat scenarios, in OpenAI's, vLLM's, llama.cpp's and TGI's styles;
* :mod:`._messages_wire`: Anthropic Messages answers (``/v1/messages``) from
  the chat scenarios' words, with an ``overloaded_error`` or a cut;
* :mod:`._request_checks`: what OpenAI (and Anthropic) refuse with a 400;
* :mod:`._schema_documents`: a JSON document generated from a JSON schema;
  :mod:`._structured_answers`: the structured answers made of it (valid, cut,
  invalid) and the fragments they stream in;
* :mod:`._pacing`: when each write goes out (token pacing, recorded times);
  :mod:`._background`: stored and background Responses;
  :mod:`._replies`: JSON and error replies; :mod:`._faults`: answers that
  fail on purpose before or after their first output;
* :mod:`._chat_server`: the OpenAI-compatible handler (chat completions,
  Responses and legacy completions) on top of them; :mod:`._options`: its
  settings.
"""

from ._chat_server import ChatServer, open_chat_server
from ._faults import FAULT_HEADER, FAULT_WAYS, Faults
from ._options import ServerOptions
from ._response_scenarios import RESPONSE_SCENARIOS, ResponseScenario, ResponseStyle
from ._scenarios import SCENARIOS, Scenario, ToolCallScript, WireStyle

__all__ = [
    "FAULT_HEADER",
    "FAULT_WAYS",
    "RESPONSE_SCENARIOS",
    "SCENARIOS",
    "ChatServer",
    "Faults",
    "ResponseScenario",
    "ResponseStyle",
    "Scenario",
    "ServerOptions",
    "ToolCallScript",
    "WireStyle",
    "open_chat_server",
]

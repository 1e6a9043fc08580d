"""The low-level face for tools built on chunkwise (``chunkwise-tools`` is the first).

:mod:`chunkwise` is the face for applications; this module re-exports the few
pieces under it that a tool measuring, recording or serving streams cannot
reasonably do without, so such a tool never imports an underscore module (a
rule ``tests/test_architecture.py`` holds ``chunkwise-tools`` to).  These
names may change between minor releases more freely than those of
:mod:`chunkwise`.  The list is short on purpose: a helper only a tool needs
belongs to that tool.  Each name, and why it is here:

* ``Api``, ``CHAT``, ``RESPONSES``, ``COMPLETIONS``, ``open_stream``: what
  differs between the APIs (path, request-aware parser, stream class), so a
  command can open whichever stream ``--api`` names.
* ``StreamParser``: the API-agnostic sans-IO parser every API's derives from
  (bytes in, events and a result out), for code that handles all three.
* ``TimingRecorder``, ``output_tokens_of``, ``Timed``: read stamps and figures
  with the definitions of ``result.timings``, and a parser's events carried
  into them as the trio layer does, for bench and record.
* ``send_http_request``, ``open_http_response``, ``HTTPResponse``: one HTTP
  exchange without a parser: record keeps the raw bytes, bench times them.
* ``http_status_error``, ``status_hint``: an error response, and the hint it
  carries, as the library reports them.
* ``ConnectionPool``, ``PoolSettings``: bench runs its requests over one pool,
  as a :class:`~chunkwise.Client` does.
* ``encode_request``: the library's own validation and encoding of a body.
* ``OutputSchema``: a structured-output ``json_schema``, as the library checks
  it; the emulator answers with and checks against it.
* ``load_json``, ``parse_json``: strict JSON as the library reads payloads.
* ``NO_JSONSCHEMA``: the message a schema check gives without ``jsonschema``,
  so a tool can say how to install it.
* ``exceptions_unwrapped``: the one place a nursery's exception group becomes
  the exception itself.
* ``redact``, ``secret``: the one redaction rule for API keys.
"""

from __future__ import annotations

from ._core.parser import StreamParser
from ._core.payloads import load_json, parse_json
from ._core.structured import OutputSchema
from ._core.timings import TimingRecorder, output_tokens_of
from ._core.tools import NO_JSONSCHEMA
from ._core.util import redact, secret
from ._net.http import (
    HTTPResponse,
    http_status_error,
    open_http_response,
    send_http_request,
    status_hint,
)
from ._net.pool import ConnectionPool, PoolSettings
from ._net.request import encode_request
from ._net.tasks import exceptions_unwrapped
from ._net.trace import Timed
from ._stream import Api, open_stream
from .chat._stream import API as CHAT
from .completions._stream import API as COMPLETIONS
from .responses._stream import API as RESPONSES

__all__ = [
    "CHAT",
    "COMPLETIONS",
    "NO_JSONSCHEMA",
    "RESPONSES",
    "Api",
    "ConnectionPool",
    "HTTPResponse",
    "OutputSchema",
    "PoolSettings",
    "StreamParser",
    "Timed",
    "TimingRecorder",
    "encode_request",
    "exceptions_unwrapped",
    "http_status_error",
    "load_json",
    "open_http_response",
    "open_stream",
    "output_tokens_of",
    "parse_json",
    "redact",
    "secret",
    "send_http_request",
    "status_hint",
]

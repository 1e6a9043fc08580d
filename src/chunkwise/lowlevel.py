"""The low-level face for tools built on chunkwise (``chunkwise-tools`` is the first).

:mod:`chunkwise` is the face for applications; this module re-exports the few
pieces under it that a tool measuring, recording or serving streams cannot do
without, so such a tool never imports an underscore module (a rule
``tests/test_architecture.py`` holds ``chunkwise-tools`` to).  These names may
change between minor releases more freely than those of :mod:`chunkwise`; a
helper only a tool needs belongs to that tool.  Each name, and why:

* ``Api``, ``CHAT``, ``RESPONSES``, ``COMPLETIONS``, ``MESSAGES``, ``open_stream``: open
  whichever API's stream a command's ``--api`` names.
* ``StreamParser``: the sans-IO parser every API's derives from.
* ``TimingRecorder``, ``output_tokens_of``, ``Timed``: stamps and figures as
  ``result.timings`` defines them, for bench and record.
* ``send_http_request``, ``open_http_response``, ``HTTPResponse``: one HTTP
  exchange without a parser (record keeps the raw bytes, bench times them).
* ``http_status_error``, ``status_hint``: an error response as the library reports it.
* ``ConnectionPool``, ``PoolSettings``: a pool, as a :class:`~chunkwise.Client` uses.
* ``encode_request``: the library's validation and encoding of a body.
* ``OutputSchema``: a structured-output ``json_schema``, as the library checks it.
* ``load_json``, ``parse_json``: strict JSON as the library reads payloads.
* ``TERMINAL_STATUSES``: the statuses a Responses response ends with (the emulator's store).
* ``NO_JSONSCHEMA``: the message a schema check gives without ``jsonschema``.
* ``exceptions_unwrapped``: a nursery's exception group back to the exception itself.
* ``redact``, ``secret``: the one redaction rule for API keys.
"""

from __future__ import annotations

from ._core.parser import StreamParser
from ._core.payloads import load_json, parse_json
from ._core.results import TERMINAL_STATUSES
from ._core.schemas import NO_JSONSCHEMA, OutputSchema
from ._core.timings import TimingRecorder, output_tokens_of
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
from .messages._stream import API as MESSAGES
from .responses._stream import API as RESPONSES

__all__ = [
    "CHAT",
    "COMPLETIONS",
    "MESSAGES",
    "NO_JSONSCHEMA",
    "RESPONSES",
    "TERMINAL_STATUSES",
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

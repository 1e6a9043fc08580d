"""The servers: the loopback HTTP/1.1 engine, scripted streams, the OpenAI-compatible server.

``chunkwise serve``, ``chunkwise demo`` and :mod:`chunkwise.testing` stand on
this package; it imports neither the command line nor :mod:`chunkwise.testing`.

* :mod:`._http_server`: the engine (sockets, h11 request parsing, scripted
  responses written byte by byte, TLS helpers, ``serve_stream`` for memory
  streams);
* :mod:`._scenarios`: pure data and pure functions saying what a scripted chat
  stream holds and how it is written;
* :mod:`._response_scenarios`: the same for Responses API streams, saying
  the chat scenarios' words;
* :mod:`._chat_server`: the OpenAI-compatible handler (chat completions and
  Responses) on top of them.
"""

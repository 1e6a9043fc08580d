"""The servers: the loopback HTTP/1.1 engine, scripted streams, the OpenAI-compatible server.

``chunkwise serve``, ``chunkwise demo`` and :mod:`chunkwise.testing` stand on
this package; it imports neither the command line nor :mod:`chunkwise.testing`.

* :mod:`._http_server`: the engine (sockets, h11 request parsing, scripted
  responses written byte by byte, TLS helpers, ``serve_stream`` for memory
  streams);
* :mod:`._scenarios`: pure data and pure functions saying what a scripted chat
  stream holds and how it is written;
* :mod:`._response_scenarios`: the same data for Responses API streams,
  saying the chat scenarios' words; :mod:`._response_wire`: how they are
  written (events and bytes);
* :mod:`._completion_wire`: legacy completions (``/v1/completions``) answers
  from the chat scenarios, in OpenAI's, vLLM's, llama.cpp's and TGI's styles;
* :mod:`._request_checks`: what OpenAI refuses with a 400, and its words;
* :mod:`._schema_documents`: a JSON document generated from a JSON schema;
  :mod:`._structured_answers`: the structured answers made of it (valid, cut,
  invalid) and the fragments they stream in;
* :mod:`._chat_server`: the OpenAI-compatible handler (chat completions,
  Responses and legacy completions) on top of them.
"""

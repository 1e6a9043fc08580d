"""The helpers the test modules share (pytest puts ``tests/`` on ``sys.path``).

One module a purpose; import from the module, not from here (this re-exports
nothing):

* :mod:`helpers.data`: recorded streams, provider vectors, the repository, the test API key;
* :mod:`helpers.bodies`: chunk, choice, Responses event builders, framed as SSE;
* :mod:`helpers.strategies`: hypothesis strategies for chunks, JSON and Responses streams;
* :mod:`helpers.reads`: cutting bytes into reads; feeding the parsers and accumulators;
* :mod:`helpers.decoders`: every SSE decoder the library uses, and a WHATWG reference;
* :mod:`helpers.json_values`: JSON compared bit for bit; live-value growth rules;
* :mod:`helpers.servers`: scripted servers and transports for the trio client;
* :mod:`helpers.emulator`: the tools' emulator on a memory network (needs ``chunkwise-tools``);
* :mod:`helpers.processes`: running and interrupting Python processes;
* :mod:`helpers.cli`: for the command-line tests (needs ``chunkwise-tools``).

Kept small on purpose, as h11's ``h11/tests/helpers.py`` is: anything used by
one test module lives in that module.
"""

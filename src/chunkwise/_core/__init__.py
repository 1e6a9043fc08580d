"""The sans-IO core: everything the parsers, accumulators and settings need, and no I/O.

What is here
------------
The values every API shares (errors, results, events, timings, headers), the
readings of the wire's text (payloads, sse, text, partial_json and its
json_patches), tool calls and structured outputs (tools, structured), the
accumulator skeleton and the chunk APIs' layer over it (accumulator, chunks),
the decoder feeding an accumulator (parser), the anomaly log, the face's name
machinery (names), small helpers (util) and the version.

The settings an :class:`~chunkwise.Endpoint` holds are here too (endpoint,
retries, proxy, and their validators, checks), although only the transport acts
on them: they are values that need no trio, and in :mod:`chunkwise._net` they
would make the sans-IO face (which exports ``Endpoint``) import the transport's
folder.

The import rule (``tests/test_architecture.py``, rule 1)
--------------------------------------------------------
A module here imports only the standard library, attrs and this folder.  An
optional extra (``jsonschema``) is imported inside the function that uses it,
with a comment.  Nothing here knows an API namespace or the transport, so
``import chunkwise`` and every namespace's sans-IO half run without trio or h11.

This ``__init__`` exports nothing: each module is imported by its own name.
"""

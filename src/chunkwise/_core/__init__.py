"""The sans-IO core: everything the parsers, accumulators and settings need, and no I/O.

What is here
------------
The values every API shares (:mod:`.errors`, :mod:`.results`, :mod:`.events`,
:mod:`.timings`, :mod:`.headers`), the readings of the wire's text
(:mod:`.payloads`, :mod:`.sse`, :mod:`.text`, :mod:`.partial_json` with
:mod:`.json_patches`), tool calls and structured outputs
(:mod:`.tools`, :mod:`.structured`), the chunk accumulator the chunk APIs fill in
(:mod:`.chunks`), the decoder feeding an accumulator (:mod:`.parser`), the
anomaly log (:mod:`.anomalies`), the face's name machinery (:mod:`.names`), small
helpers (:mod:`.util`) and the version (:mod:`.version`).

The settings an :class:`~chunkwise.Endpoint` holds are here too
(:mod:`.endpoint`, :mod:`.retries`, :mod:`.proxy`, and their validators,
:mod:`.checks`), although only the transport acts on them: they are values,
validated when built, and they import nothing but the standard library and attrs.
In :mod:`chunkwise._net` they would make the sans-IO face (``import chunkwise``,
which exports ``Endpoint``, ``Timeouts`` and ``Retries``) import the transport's
folder, and the rule "the face imports only the core and the namespaces" would
need a list of the transport's modules that happen to need no trio -- the list
this folder replaces.

The import rule (``tests/test_architecture.py``, rule 1)
--------------------------------------------------------
A module here imports only the standard library, attrs and this folder.  An
optional extra (``jsonschema``) is imported inside the function that uses it,
with a comment.  Nothing here knows an API namespace or the transport, so
``import chunkwise`` and every namespace's sans-IO half run without trio or h11.

This ``__init__`` exports nothing: each module is imported by its own name.
"""

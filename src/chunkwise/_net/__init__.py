"""The transport: HTTP/1.1 over trio, through public trio, h11 and ssl APIs only.

What is here
------------
Opening a connection, directly, through a proxy's tunnel or with TLS
(:mod:`.connect`); the connection itself, h11 with an explicit state
(:mod:`.http11`), and its plain-TCP reader stamping each read with the kernel's
arrival time (:mod:`.arrivals`); the pool of idle connections (:mod:`.pool`); the
bytes a request puts on the wire (:mod:`.request`); one exchange and its retries
(:mod:`.http`); what an error status says (:mod:`.status`); the one trace hook
around each transport step (:mod:`.trace`); and the task helpers every trio
module shares (:mod:`.tasks`).  :mod:`.request`, :mod:`.status` and
:mod:`.trace` need no trio themselves; they are here because only the transport
uses them (and their tests drive them without a network all the same).

The settings the transport acts on (:class:`~chunkwise.Endpoint`, its timeouts,
retries and proxy) are values, in :mod:`chunkwise._core` (its docstring says why).
Transport errors (``OSError``, ``ssl``, ``h11``) become chunkwise's in the
modules that call trio, ssl and h11 (:mod:`.connect`, :mod:`.http11`,
:mod:`.arrivals`): :mod:`.http`'s "Where errors are converted".

The import rule (``tests/test_architecture.py``, rule 1)
--------------------------------------------------------
A module here imports the standard library (``ssl`` and ``socket`` included),
attrs, trio, h11, :mod:`chunkwise._core` and this folder: never an API
namespace nor the stream above it (``chunkwise._stream``, ``_fanout``,
``_resume``, ``_client``).  Only the trio layer imports this folder, so
``import chunkwise`` never does.

This ``__init__`` exports nothing: each module is imported by its own name.
"""

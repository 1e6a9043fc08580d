"""The transport: HTTP/1.1 over trio, through public trio, h11 and ssl APIs only.

Opening a connection (:mod:`.connect`); the connection, h11 with an explicit
state (:mod:`.http11`), reading plain TCP with the kernel's arrival stamps
(:mod:`.arrivals`); the pool of idle connections (:mod:`.pool`); the bytes a
request puts on the wire (:mod:`.request`); one attempt and the retry loop
(:mod:`.http`, which also says where errors are converted); what an error
status says (:mod:`.status`); the one trace hook (:mod:`.trace`); task helpers
(:mod:`.tasks`).  The settings it acts on are values in :mod:`chunkwise._core`.

Import rule (``tests/test_architecture.py``, rule 1): a module here imports the
standard library, attrs, trio, h11, :mod:`chunkwise._core` and this folder, never
an API namespace nor the stream above it.  Only the trio layer imports this
folder, so ``import chunkwise`` never does.  This ``__init__`` exports nothing.
"""

"""Reading a plain TCP connection: straight from its socket, stamped as its bytes arrived.

Theory of operation
-------------------
A reader that stamps a read with the clock when ``receive_some`` returned
stamps *when the reader ran*: behind every other task that woke in the same
batch, and behind whatever the process was busy with.  With a few hundred
streams whose tokens are due at the same instant, that delay varies from one
read to the next by milliseconds, and every inter-token gap carried it.

On Linux the kernel stamps each TCP segment as it arrives; ``SO_TIMESTAMPNS``
hands the stamp of the last segment a ``recvmsg`` returned as ancillary data.
:func:`open_reader` gives a plain TCP connection a :class:`SocketReader`, which
reads with ``recvmsg`` and converts the stamp to trio's clock, so a read's stamp
is *when its last bytes reached this host*.

The same reader makes a read cheap.  trio's socket *tries* each call first and
waits for readiness only when it fails: right for a bulk download, wrong for a
stream of tokens, where the next one is almost never there yet.  Each read then
cost a ``recvmsg`` that failed with ``EAGAIN`` and the ``BlockingIOError`` it
raised, a sixth of a reader's CPU at 300 streams a token every 20 ms
(``bench/read_cost.py``).  :class:`SocketReader` waits first, then reads once.

Rules
-----
1. Only a plain :class:`trio.SocketStream` gets a reader (``http``, or ``http``
   through a proxy): under TLS a read returns what OpenSSL decrypted, not what
   one ``recvmsg`` brought, so there trio reads and the reader's clock stays
   the stamp.
2. Only on 64-bit Linux (``SO_TIMESTAMPNS`` and its 16-byte ``timespec``).
   Reads are stamped only under trio's own clock: a test's virtual clock
   (``MockClock``) has no relation to the kernel's, and its times must stay
   exact.  Under such a clock the reader still reads, unstamped.
3. The kernel's stamp is on the real-time clock.  It is converted by the delay
   since it, read at once from the real-time clock in integer nanoseconds, taken
   off trio's clock read at the same moment; so the conversion never drifts,
   and a negative delay (the real-time clock stepped back) counts as none.
4. A read without the stamp (stamping off or refused, a message without it)
   has ``None``: the caller falls back to its clock.
5. A read waits for readability (:func:`trio.lowlevel.wait_readable`), then
   calls ``recvmsg`` once, and again after another wait if the wake was
   spurious.  Only after a read that filled its buffer, when more is probably
   waiting, is the call tried before any wait.  Every read is a checkpoint, as
   trio's are: the wait is one; a read that does not wait checks for a cancel
   before the call and ends with a shielded checkpoint, so a cancel never loses
   bytes already taken.
6. The standard-library socket is trio's private ``SocketType._sock``, reached
   through ``getattr`` and checked, never assigned.  When it is missing or not
   a :class:`socket.socket` (another trio), there is no reader: trio reads,
   unstamped.  The reader never closes anything; closing stays trio's, whose
   ``notify_closing`` wakes a waiting read with :exc:`trio.ClosedResourceError`.
"""

from __future__ import annotations

import socket
import struct
import sys
import time

import trio

__all__ = ["SocketReader", "open_reader"]

#: Linux's SO_TIMESTAMPNS, also the type of its control message; Python does not name it.
SO_TIMESTAMPNS = 35
_TIMESPEC = struct.Struct("@qq")  # struct timespec on 64-bit Linux
_ANCILLARY_SIZE = socket.CMSG_SPACE(_TIMESPEC.size) if sys.platform == "linux" else 0
SUPPORTED = sys.platform == "linux" and struct.calcsize("P") == 8


class SocketReader:
    """Reads one plain TCP connection straight from its socket (rules 5 and 6)."""

    # One per open connection, thousands at once: no instance dict.
    __slots__ = ("_ready", "_sock", "stamped")

    def __init__(self, sock: socket.socket, *, stamped: bool) -> None:
        self._sock = sock
        #: Reads carry the kernel's arrival stamp (rule 2).
        self.stamped = stamped
        self._ready = False  # the last read filled its buffer: try before waiting

    async def receive(self, max_bytes: int) -> tuple[bytes, float | None]:
        """Up to ``max_bytes`` bytes (``b""`` at EOF), and when the last of them arrived.

        The arrival is on trio's clock (rule 3), or ``None`` (rule 4).
        """
        sock = self._sock
        waited = False
        if self._ready:
            await trio.lowlevel.checkpoint_if_cancelled()  # the first half of a checkpoint
        else:
            await trio.lowlevel.wait_readable(sock)
            waited = True
        while True:
            try:
                data, ancillary, _, _ = sock.recvmsg(max_bytes, _ANCILLARY_SIZE)
            except BlockingIOError:
                await trio.lowlevel.wait_readable(sock)
                waited = True
            else:
                break
        self._ready = len(data) == max_bytes
        if not waited:
            # Shielded: the bytes are taken from the kernel and must not be lost.
            await trio.lowlevel.cancel_shielded_checkpoint()
        if not self.stamped:
            return data, None
        now = trio.current_time()
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(payload) >= 16:
                seconds, nanoseconds = _TIMESPEC.unpack_from(payload)
                delay = time.time_ns() - (seconds * 1_000_000_000 + nanoseconds)
                return data, now - max(delay, 0) / 1e9
        return data, None


def open_reader(stream: trio.abc.Stream) -> SocketReader | None:
    """A :class:`SocketReader` for ``stream`` when rules 1, 2 and 6 allow one, else ``None``.

    Turns the kernel's receive timestamps on when rule 2 allows them.
    """
    if not SUPPORTED or not isinstance(stream, trio.SocketStream):
        return None
    # Private to trio (rule 6): read through getattr, checked.
    sock = getattr(stream.socket, "_sock", None)
    if not isinstance(sock, socket.socket):
        return None
    # trio's default clock is not public; a test's clock is any other (rule 2).
    stamped = type(trio.lowlevel.current_clock()).__name__ == "SystemClock"
    if stamped:
        try:
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        except OSError:
            stamped = False
    return SocketReader(sock, stamped=stamped)

"""Reading a plain TCP connection through its trio socket, stamped as its bytes arrived.

Theory of operation
-------------------
A read stamped with the clock when ``receive_some`` returned is stamped *when
the reader ran*: behind every other task woken in the same batch.  With a few
hundred streams whose tokens are due at the same instant, that delay varies by
milliseconds from one read to the next, and every inter-token gap carried it.
On Linux the kernel stamps each TCP segment as it arrives, and
``SO_TIMESTAMPNS`` hands the stamp of the last segment a ``recvmsg`` returned
as ancillary data: :class:`SocketReader` reads with it, so a read's stamp is
*when its last bytes reached this host*, on trio's clock.

Rules
-----
1. Only a plain :class:`trio.SocketStream` gets a reader: under TLS a read
   returns what OpenSSL decrypted, not what one ``recvmsg`` brought.
2. Only on 64-bit Linux (``SO_TIMESTAMPNS`` and its 16-byte ``timespec``).
   Reads are stamped unless the run's clock is a :class:`trio.testing.MockClock`
   (a test's virtual times must stay exact; the reader still reads, unstamped);
   any other clock is taken to run at the real rate, which is all rule 3 needs.
3. The kernel's stamp is on the real-time clock.  It is converted by the delay
   since it, read from the real-time clock in integer nanoseconds, taken off
   trio's clock read at the same moment; so the conversion never drifts, and a
   negative delay (the real-time clock stepped back) counts as none.
4. A read without the stamp has ``None``: the caller falls back to its clock.
5. Only public trio APIs: ``SocketStream.socket`` and one ``await
   socket.recvmsg(...)`` a read.  The cost: trio *tries* the call before it
   waits, so most reads of a token stream cost a ``recvmsg`` failing with
   ``EAGAIN`` first.  An earlier reader waited on trio's private socket to save
   it (a sixth of a reader's CPU at 300 streams, ``bench/read_cost.py``); it is
   gone on purpose, as a trio release could break it silently.  The reader
   never closes anything: closing stays trio's.
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
    """Reads one plain TCP connection through its trio socket (rule 5)."""

    # One per open connection, thousands at once: no instance dict.
    __slots__ = ("socket", "stamped")

    def __init__(self, sock: trio.socket.SocketType, *, stamped: bool) -> None:
        self.socket = sock
        #: Reads carry the kernel's arrival stamp (rule 2).
        self.stamped = stamped

    async def receive(self, max_bytes: int) -> tuple[bytes, float | None]:
        """Up to ``max_bytes`` bytes (``b""`` at EOF), and when the last arrived (rules 3, 4)."""
        data, ancillary, _, _ = await self.socket.recvmsg(max_bytes, _ANCILLARY_SIZE)
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
    """A :class:`SocketReader` for ``stream``, stamping if it may, when rules 1 and 2 allow one."""
    if not SUPPORTED or not isinstance(stream, trio.SocketStream):
        return None
    sock = stream.socket
    # A MockClock is trio.testing's, which a run without one never imported (nor
    # should we: it imports pytest when installed, a tenth of a second).
    testing = sys.modules.get("trio.testing")
    clock = trio.lowlevel.current_clock()
    stamped = testing is None or not isinstance(clock, testing.MockClock)
    if stamped:
        try:
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        except OSError:
            stamped = False
    return SocketReader(sock, stamped=stamped)

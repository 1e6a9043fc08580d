"""When received bytes reached this host: the kernel's receive timestamp, on trio's clock.

Theory of operation
-------------------
A reader that stamps a read with the clock when ``receive_some`` returned
stamps *when the reader ran*: behind every other task that woke in the same
batch, and behind whatever the process was busy with.  With a few hundred
streams whose tokens are due at the same instant, that delay varies from one
read to the next by milliseconds, and every inter-token gap carries it.

On Linux the kernel stamps each TCP segment as it arrives; ``SO_TIMESTAMPNS``
hands the stamp of the last segment a ``recvmsg`` returned as ancillary data.
:func:`stamp_arrivals` turns that on for a plain TCP connection, and
:func:`receive_with_arrival` reads with ``recvmsg`` and converts the stamp to
trio's clock, so a read's stamp is *when its last bytes reached this host*.

Rules
-----
1. Only a plain :class:`trio.SocketStream` is stamped (``http``, or ``http``
   through a proxy): under TLS a read returns what OpenSSL decrypted, not what
   one ``recvmsg`` brought, so there the reader's clock stays the stamp.
2. Only on Linux (``SO_TIMESTAMPNS`` and its 16-byte ``timespec``), and only
   under trio's own clock: a test's virtual clock (``MockClock``) has no
   relation to the kernel's, and its times must stay exact.
3. The kernel's stamp is on the real-time clock.  It is converted by the delay
   since it, read at once from the real-time clock in integer nanoseconds, taken
   off trio's clock read at the same moment; so the conversion never drifts,
   and a negative delay (the real-time clock stepped back) counts as none.
4. A read without the stamp (the option refused, a message without it) has
   ``None``: the caller falls back to its clock.
"""

from __future__ import annotations

import socket
import struct
import sys
import time

import trio

__all__ = ["receive_with_arrival", "stamp_arrivals"]

#: Linux's SO_TIMESTAMPNS, also the type of its control message; Python does not name it.
SO_TIMESTAMPNS = 35
_TIMESPEC = struct.Struct("@qq")  # struct timespec on 64-bit Linux
_ANCILLARY_SIZE = socket.CMSG_SPACE(_TIMESPEC.size) if sys.platform == "linux" else 0
SUPPORTED = sys.platform == "linux" and struct.calcsize("P") == 8


def stamp_arrivals(stream: trio.abc.Stream) -> trio.socket.SocketType | None:
    """The socket to read ``stream`` from with :func:`receive_with_arrival`, or ``None``.

    Turns the kernel's receive timestamps on when rules 1 and 2 allow it.
    """
    if not SUPPORTED or not isinstance(stream, trio.SocketStream):
        return None
    # trio's default clock is not public; a test's clock is any other (rule 2).
    if type(trio.lowlevel.current_clock()).__name__ != "SystemClock":
        return None
    try:
        stream.socket.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError:
        return None
    return stream.socket


async def receive_with_arrival(
    sock: trio.socket.SocketType, max_bytes: int
) -> tuple[bytes, float | None]:
    """Up to ``max_bytes`` bytes, and when the last of them arrived on trio's clock (rule 3)."""
    data, ancillary, _, _ = await sock.recvmsg(max_bytes, _ANCILLARY_SIZE)
    now = trio.current_time()
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(payload) >= 16:
            seconds, nanoseconds = _TIMESPEC.unpack_from(payload)
            delay = time.time_ns() - (seconds * 1_000_000_000 + nanoseconds)
            return data, now - max(delay, 0) / 1e9
    return data, None

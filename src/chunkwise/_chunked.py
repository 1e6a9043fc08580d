"""The data of a chunked response body, read without h11's event per chunk.

Theory of operation
-------------------
A streamed answer is a chunked body whose every chunk is one event, and a
reader that keeps up gets one chunk a read.  h11 turns each chunk into a
``Data`` event through its state machine, then answers ``NEED_DATA``: about
five microseconds a read, the largest single share of what ``chunkwise bench``
spent per token at a few hundred streams.  :class:`ChunkedBody` reads the same framing in
one pass over each read, and hands back the data, partial chunks included, as
soon as it arrives.

It reads only the chunks.  h11 still parses the response head, and everything
from the last chunk's line on: the trailer section, the final blank line, the
end of the message, and so the connection's state for reuse.
:mod:`chunkwise._http11` gives h11 those bytes (:attr:`ChunkedBody.rest`) once
the last chunk's line is seen; h11 never saw the chunks, so its chunked reader
is where it was after the head, at the start of a chunk line.

Rules
-----
1. The grammar is h11's (0.16), checked against h11 in the tests over
   generated and corrupted bodies split every way: a chunk line is 1 to 20 hex
   digits, optionally ``;`` and anything but a line feed, optional spaces and
   tabs, then CRLF; the line ends at its first CRLF; a chunk's data is followed
   by exactly CRLF; an incomplete line longer than :data:`MAX_LINE` bytes is an
   error, as h11's limit on an incomplete event makes it.
2. :meth:`ChunkedBody.feed` returns every data byte its input completed or
   continued, and keeps only an incomplete chunk line.  It stops at a chunk
   line of size zero: :attr:`ChunkedBody.rest` then holds the bytes from that
   line on, untouched.
3. A framing error does not lose the data before it: ``feed`` returns that
   data and sets :attr:`ChunkedBody.error`, a message in h11's words; the body
   takes nothing more.
"""

from __future__ import annotations

import re

__all__ = ["MAX_LINE", "ChunkedBody"]

#: h11's default limit on the bytes of an incomplete event (max_incomplete_event_size).
MAX_LINE = 16 * 1024
# h11's chunk_header (h11/_abnf.py), matched against the whole line with its CRLF.
_CHUNK_LINE = re.compile(rb"([0-9A-Fa-f]{1,20})(?:;.*)?[ \t]*\r\n")
_FOOTER = b"\r\n"


class ChunkedBody:
    """The chunks of one chunked body: ``feed()`` the bytes read, get the data back."""

    # One per streaming response, thousands at once: no instance dict.
    __slots__ = ("_footer", "_left", "_line", "error", "rest")

    def __init__(self) -> None:
        self._line = b""  # an incomplete chunk line, kept for the next feed
        self._left = 0  # data bytes of the current chunk still to come
        self._footer = 0  # bytes of the CRLF after a chunk's data still to come
        #: The bytes from the last chunk's line on, once it was seen (rule 2).
        self.rest: bytes | None = None
        #: What was wrong with the framing, once something was (rule 3).
        self.error: str | None = None

    @property
    def ended(self) -> bool:
        """The last chunk's line was seen: :attr:`rest` is for h11."""
        return self.rest is not None

    def feed(self, data: bytes) -> bytes:
        """The data bytes in ``data``, after what earlier calls were given (rules 2 and 3)."""
        if self.rest is not None or self.error is not None:
            raise RuntimeError("the chunked body has ended or failed")
        if self._line:
            data = self._line + data
            self._line = b""
        out: list[bytes] = []
        pos = 0
        size = len(data)
        while pos < size:
            if self._left:
                piece = data[pos : pos + self._left]
                out.append(piece)
                pos += len(piece)
                self._left -= len(piece)
                if not self._left:
                    self._footer = 2
            elif self._footer:
                expected = _FOOTER[2 - self._footer :]
                got = data[pos : pos + self._footer]
                if got != expected[: len(got)]:
                    self.error = f"malformed chunk footer: {got!r} (expected {expected!r})"
                    break
                pos += len(got)
                self._footer -= len(got)
            else:
                end = data.find(b"\r\n", pos)
                if end < 0:
                    line = data[pos:]
                    if len(line) > MAX_LINE:
                        self.error = "Receive buffer too long"
                    else:
                        self._line = line
                    break
                line = data[pos : end + 2]
                match = _CHUNK_LINE.fullmatch(line)
                if match is None:
                    self.error = f"illegal chunk header: {line!r}"
                    break
                self._left = int(match[1], 16)
                if not self._left:
                    self.rest = data[pos:]
                    break
                pos = end + 2
        if len(out) == 1:
            return out[0]
        return b"".join(out)

"""Turn fuzzer bytes into decisions, with or without atheris.

atheris has ``FuzzedDataProvider``, but the harnesses must also run in the test
suite where atheris is not installed, so they draw their decisions from this
small, deterministic reader instead.  Running out of bytes gives zeros, so
every input is valid.
"""

from __future__ import annotations

#: The longest body a harness takes from its input: two input bytes choose the
#: size, and bodies must hold nesting past the recursion limit and integers
#: past the digit limit (see _seeds.py).
MAX_BODY = 1 << 14


class ByteReader:
    """Consume ``data`` from the front: integers, choices, byte strings."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    @property
    def remaining(self) -> int:
        return len(self._data) - self._pos

    def byte(self) -> int:
        if self._pos >= len(self._data):
            return 0
        value = self._data[self._pos]
        self._pos += 1
        return value

    def int_below(self, bound: int) -> int:
        """An int in ``range(bound)`` (two bytes of entropy at most)."""
        if bound <= 1:
            return 0
        return ((self.byte() << 8) | self.byte()) % bound

    def choice(self, options: list[object] | tuple[object, ...]) -> object:
        return options[self.int_below(len(options))]

    def take(self, size: int) -> bytes:
        piece = self._data[self._pos : self._pos + size]
        self._pos += len(piece)
        return piece

    def rest(self) -> bytes:
        return self.take(self.remaining)


def split_reads(reader: ByteReader, data: bytes) -> list[bytes]:
    """``data`` cut into reads whose sizes the fuzzer chooses (0-64 bytes each)."""
    reads: list[bytes] = []
    pos = 0
    while pos < len(data):
        size = reader.byte() % 65
        reads.append(data[pos : pos + size])  # empty reads are legal too
        pos += size
        if reader.remaining == 0:
            reads.append(data[pos:])
            break
    return reads

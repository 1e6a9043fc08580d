"""Turn fuzzer bytes into decisions, with or without atheris.

atheris has ``FuzzedDataProvider``, but the harnesses must also run in the test
suite where atheris is not installed, so they draw their decisions from this
small, deterministic reader instead.  Running out of bytes gives zeros, so
every input is valid.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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


class JsonShapes:
    """JSON values of every type, drawn from a reader: the harnesses' one generator.

    ``strings`` are the strings worth trying (besides random ones) and
    ``keys`` the object keys of nested values; each harness gives its own.
    """

    def __init__(self, strings: tuple[object, ...], keys: tuple[object, ...]) -> None:
        self.strings = strings
        self.keys = keys

    def scalar(self, reader: ByteReader) -> Any:
        kind = reader.int_below(8)
        if kind == 0:
            return None
        if kind == 1:
            return bool(reader.byte() & 1)
        if kind == 2:
            return reader.int_below(5) - 1
        if kind == 3:
            return reader.byte() / 7
        if kind == 4:
            return reader.take(reader.int_below(6)).decode("utf-8", "replace")
        return reader.choice(self.strings)

    def value(self, reader: ByteReader, depth: int) -> Any:
        kind = reader.int_below(10)
        if depth > 3 or kind < 6:
            return self.scalar(reader)
        if kind < 8:
            return [self.value(reader, depth + 1) for _ in range(reader.int_below(3))]
        return {
            str(reader.choice(self.keys)): self.value(reader, depth + 1)
            for _ in range(reader.int_below(3))
        }

    def mapping(
        self, reader: ByteReader, keys: tuple[object, ...], make: Callable[[str], Any]
    ) -> Any:
        """Usually an object of some of ``keys``, each made by ``make``; sometimes not one."""
        if reader.int_below(8) == 0:
            return self.value(reader, 2)  # the wrong type altogether
        return {str(key): make(str(key)) for key in keys if reader.byte() & 1}


def fuzz_main(test_one_input: Callable[[bytes], None]) -> None:  # pragma: no cover - atheris
    """Run ``test_one_input`` under atheris, with libFuzzer's command line (``sys.argv``)."""
    import sys

    import atheris  # type: ignore[import-untyped]  # optional: only for long runs

    atheris.instrument_all()
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()

"""HTTP header fields as received: one class, shared by the client and the servers."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

import attrs

__all__ = ["Headers"]


def _pairs(items: Iterable[tuple[bytes, bytes]]) -> tuple[tuple[bytes, bytes], ...]:
    return tuple(items)


@attrs.frozen
class Headers(Mapping[str, str]):
    """HTTP header fields as received: order and spelling kept, lookup case-insensitive.

    ``headers["x-request-id"]`` gives the value; a field sent several times gives
    its values joined with ``", "`` (RFC 9110 5.3), and :meth:`get_all` gives them
    separately.  Iteration yields each lower-cased name once.  ``raw`` holds the
    ``(name, value)`` byte pairs exactly as h11 delivered them.
    """

    raw: tuple[tuple[bytes, bytes], ...] = attrs.field(converter=_pairs)

    def get_all(self, name: str) -> list[str]:
        """Every value of ``name``, in order; ``[]`` when absent."""
        key = name.lower().encode("latin-1")
        return [value.decode("latin-1") for n, value in self.raw if n.lower() == key]

    def __getitem__(self, name: str) -> str:
        values = self.get_all(name)
        if not values:
            raise KeyError(name)
        return ", ".join(values)

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys(n.lower().decode("latin-1") for n, _ in self.raw))

    def __len__(self) -> int:
        return len({n.lower() for n, _ in self.raw})

"""Streamed text: the one place where fragments of a string are put together.

Theory of operation
-------------------
An answer arrives as thousands of small fragments, a token or two each:
content, refusals, reasoning, tool-call arguments, Responses parts.  Joining
on every fragment would be quadratic, and keeping every fragment until the end
costs a string object (about 50 bytes besides the text) per fragment, which
for thousands of open streams is much of their memory (``bench/load.py``).
:class:`Fragments` does neither.  Fragments collect at the end of one list;
once :data:`BATCH` of them have collected they are joined into one *run*, and
runs are merged like the digits of a binary counter: a run is merged into the
one before it while that one is no longer than it.

Rules
-----
1. :meth:`Fragments.text` is exactly the concatenation, in order, of what was
   appended since the last :meth:`Fragments.replace` (or since creation).
2. Each character is copied O(log n) times over n characters appended: runs at
   least double in size from the last to the first.
3. At most ``BATCH`` fragments plus about log2(n) runs are alive at once.
4. :meth:`Fragments.text` joins once and keeps the result: a second snapshot
   with nothing appended in between costs nothing.
"""

from __future__ import annotations

__all__ = ["BATCH", "Fragments"]

#: Fragments joined into one run at a time: small enough that a long answer
#: holds few string objects, large enough that joining is rare.
BATCH = 16


class Fragments:
    """Text arriving in fragments (see the module docstring).

    True once anything was appended (an empty fragment included) or set.
    """

    # Several per answer (content, refusal, reasoning, each call's arguments),
    # thousands of answers at once: no instance dict.
    __slots__ = ("_parts", "_runs")

    def __init__(self) -> None:
        # The runs (oldest, longest first), then the fragments not joined yet.
        self._parts: list[str] = []
        self._runs = 0

    def __bool__(self) -> bool:
        return bool(self._parts)

    def __repr__(self) -> str:
        return f"Fragments({self.text()!r})"

    @property
    def strings(self) -> int:
        """How many string objects are held (rule 3)."""
        return len(self._parts)

    def append(self, fragment: str) -> None:
        """Add ``fragment`` at the end."""
        parts = self._parts
        parts.append(fragment)
        if len(parts) - self._runs >= BATCH:
            self._merge()

    def replace(self, text: str) -> None:
        """Make the whole text ``text`` (a final value replacing what the fragments built)."""
        self._parts[:] = [text]
        self._runs = 1

    def text(self) -> str:
        """Everything appended so far, joined (rule 4: joined once)."""
        parts = self._parts
        if len(parts) > 1:
            parts[:] = ["".join(parts)]
            self._runs = 1
        return parts[0] if parts else ""

    def _merge(self) -> None:
        parts = self._parts
        runs = self._runs
        run = "".join(parts[runs:])
        del parts[runs:]
        # Rule 2: merge while the run before is no longer than this one.
        while runs and len(parts[-1]) <= len(run):
            run = parts.pop() + run
            runs -= 1
        parts.append(run)
        self._runs = runs + 1

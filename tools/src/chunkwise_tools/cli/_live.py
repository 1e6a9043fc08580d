"""Live values on a terminal: JSON that grows in place, at the bottom of the output.

Theory of operation
-------------------
A tool call's arguments and a structured answer stream as JSON text; the
stream's events carry :class:`~chunkwise.Patch` lists, which a consumer
applies to its own mirror (:func:`~chunkwise.apply_patches`).  On a terminal,
``chunkwise chat`` and ``chunkwise demo`` show each mirror while it grows: a
:class:`LiveRegion` keeps the values being streamed in the last lines of the
output and redraws them in place with ANSI cursor movement (up, then erase to
the end of the screen).  Output that stays (text, a finished call) is written
above the region: the region is erased first and drawn again after.

Rules
-----
1. The region owns the rows it drew, and only those: the cursor is at the
   start of the line below them, so ``ESC [ n A`` then ``ESC [ J`` erases them
   exactly.  A caller writes nothing while the region is drawn except through
   :meth:`LiveRegion.clear` first.
2. Every row fits the terminal: a line wider than the terminal is cut (at
   display width, wide characters counting two) and ends with ``…``, since a
   wrapped line would take rows the region cannot count.  A region taller than
   the terminal shows its last lines under a ``… N lines above`` row, since
   the cursor cannot move above the top of the screen.
3. Redraws are paced (``interval`` seconds apart; every update is kept, and
   the next draw shows the newest): drawing is linear in the value's size, so
   drawing at every delta of a large value would be quadratic.
4. What is shown is a preview: the final value is written by the caller, in
   full, once the stream says it is complete.
5. :func:`render_json` is JSON: a container that fits the width (in display
   columns) on one line, others one item a line, indented by two; the final
   output can be pasted into a JSON parser.
"""

from __future__ import annotations

import json
import shutil
import time
import unicodedata
from collections.abc import Callable, Hashable, Mapping
from typing import Any, TextIO

from ._common import printable

__all__ = ["REDRAW_INTERVAL", "LiveRegion", "display_width", "render_json", "terminal_size"]

#: Seconds between two redraws of the region (rule 3): about twenty a second.
REDRAW_INTERVAL = 0.05

_UP = "\x1b[{}A"
_ERASE_DOWN = "\r\x1b[J"


def render_json(value: Any, width: int = 80) -> list[str]:
    """``value`` as JSON lines: a container that fits in ``width`` on one line, others opened."""
    return _render(value, "", "", width)


def _render(value: Any, indent: str, prefix: str, width: int) -> list[str]:
    flat = indent + prefix + _dumps(value)
    if not isinstance(value, (Mapping, list, tuple)) or not value or _fits(flat, width):
        return [flat]
    inner = indent + "  "
    if isinstance(value, Mapping):
        opener, closer = "{", "}"
        parts = [(_dumps(key) + ": ", item) for key, item in value.items()]
    else:
        opener, closer = "[", "]"
        parts = [("", item) for item in value]
    lines = [indent + prefix + opener]
    for number, (key, item) in enumerate(parts):
        child = _render(item, inner, key, width)
        if number < len(parts) - 1:
            child[-1] += ","
        lines += child
    lines.append(indent + closer)
    return lines


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def _fits(line: str, width: int) -> bool:
    # A wide character takes two columns: a line longer than ``width`` never fits.
    return len(line) <= width and display_width(line) <= width


def display_width(text: str) -> int:
    """Terminal columns ``text`` takes: wide and full-width characters count two, marks none."""
    return sum(_char_width(char) for char in text)


def _char_width(char: str) -> int:
    if unicodedata.combining(char) or char == "\u200d":
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def _fit(line: str, width: int) -> str:
    """``line`` cut to ``width`` columns, ending with ``…`` when cut (rule 2)."""
    if len(line) <= width // 2 or display_width(line) <= width:
        return line
    used = 0
    for end, char in enumerate(line):
        used += _char_width(char)
        if used > width - 1:
            return line[:end] + "…"
    return line  # pragma: no cover - the width check above returned it


class LiveRegion:
    """The values being streamed, redrawn in place in the last lines of ``out``.

    ``show(key, title, value)`` adds or updates a value (drawn when the pace
    allows, rule 3); ``remove(key)`` takes it away (the caller then writes its
    final form); ``clear()`` erases the region before other output and
    ``draw()`` draws it now.  ``escape`` makes a row writable to ``out`` (the
    demo's console escapes what its encoding cannot show).
    """

    def __init__(
        self,
        out: TextIO,
        *,
        interval: float = REDRAW_INTERVAL,
        size: Callable[[], tuple[int, int]] | None = None,
        clock: Callable[[], float] = time.monotonic,
        escape: Callable[[str], str] = printable,
    ) -> None:
        self._out = out
        self._escape = escape
        self._interval = interval
        self._size = size if size is not None else terminal_size
        self._clock = clock
        self._values: dict[Hashable, tuple[str, Any]] = {}
        self._rows = 0  # rows drawn and not erased (rule 1)
        self._drawn_at = -float("inf")
        self.draws = 0

    def __bool__(self) -> bool:
        """True while a value is shown (or waiting to be)."""
        return bool(self._values)

    def show(self, key: Hashable, title: str, value: Any) -> None:
        """Add or update ``key``'s value; drawn now if the last draw is old enough."""
        self._values[key] = (title, value)
        if self._clock() - self._drawn_at >= self._interval:
            self.draw()

    def remove(self, key: Hashable) -> None:
        """Stop showing ``key`` (erased at once; the others are drawn again by :meth:`draw`)."""
        if self._values.pop(key, None) is not None:
            self.clear()

    def clear(self) -> None:
        """Erase the rows drawn, leaving the cursor where the region began."""
        if self._rows:
            self._out.write(_UP.format(self._rows) + _ERASE_DOWN)
            self._rows = 0
            self._out.flush()

    def draw(self) -> None:
        """Erase the region and draw every value again (nothing when there is none)."""
        self.clear()
        if not self._values:
            return
        columns, lines = self._size()
        width = max(columns - 1, 10)
        rows: list[str] = []
        for title, value in self._values.values():
            rows.append(title)
            if value is not None:
                rows += ["  " + line for line in render_json(value, width - 2)]
        room = max(lines - 1, 3)
        if len(rows) > room:
            hidden = len(rows) - room + 1
            rows = [f"  … {hidden} lines above", *rows[hidden:]]
        self._out.write("".join(_fit(self._escape(printable(row)), width) + "\n" for row in rows))
        self._out.flush()
        self._rows = len(rows)
        self._drawn_at = self._clock()
        self.draws += 1


def terminal_size() -> tuple[int, int]:
    """The terminal's columns and lines (``$COLUMNS`` / ``$LINES`` first; 80 x 24 if unknown)."""
    size = shutil.get_terminal_size()
    return size.columns, size.lines

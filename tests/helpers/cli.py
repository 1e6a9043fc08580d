"""For the command-line tests (``tools/tests/cli``): ``main()`` in-process, a slow stream,
a tool with a schema, and a terminal to play the live output on."""

from __future__ import annotations

import re
from typing import Any, AnyStr

import pytest
import trio

from chunkwise.testing import ScriptedResponse
from chunkwise_tools.cli import main
from helpers.bodies import choice, chunk, sse

#: A tool with a schema: ``{"city": str}``, ``city`` required.
WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


async def run_main(capsys: pytest.CaptureFixture[AnyStr], *argv: str) -> tuple[int, AnyStr, AnyStr]:
    """Run ``chunkwise *argv`` in-process: its exit status and what it wrote to stdout and stderr.

    ``main()`` runs its own ``trio.run``, so it runs in a worker thread while the
    test's trio loop goes on (serving the requests it sends, say).  ``capsys``
    or ``capsysbinary`` says whether the output is text or bytes.
    """
    status = await trio.to_thread.run_sync(main, list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def slow_words(count: int = 200, delay: float = 0.05) -> ScriptedResponse:
    """``count`` words (``"word0 "``, ``"word1 "``...), an event a write, ``delay`` s apart."""
    words = [chunk(choice(content=f"word{i} ")) for i in range(count)]
    body = sse(*words, chunk(choice(finish_reason="stop")))
    sizes = [len(event) + 2 for event in body.split(b"\n\n")[:-1]]
    return ScriptedResponse(body=body, write_sizes=sizes, delay=delay)


_CSI = re.compile(r"\x1b\[(\d*)([A-Za-z])")


class Terminal:
    """The few escapes ``chunkwise chat`` / ``demo`` write, played on a grid of lines.

    Text, ``\\n``, ``\\r``, cursor up (``ESC [ n A``), erase to the end of the
    screen (``ESC [ J``) and SGR (``ESC [ ... m``, ignored).  Any other escape
    fails the test; lines are never wrapped (a live row that would wrap is a
    bug the region's own tests catch).  ``frames`` is the screen as it was
    before each erase: what a person saw between two redraws.
    """

    def __init__(self) -> None:
        self.lines: list[str] = [""]
        self.row = 0
        self.column = 0
        self.frames: list[list[str]] = []

    def feed(self, output: str) -> Terminal:
        position = 0
        for match in _CSI.finditer(output):
            self._text(output[position : match.start()])
            count, command = match.groups()
            if command == "A":
                self.row = max(self.row - int(count or "1"), 0)
            elif command == "J":
                self.frames.append(self.screen)
                del self.lines[self.row + 1 :]
                self.lines[self.row] = self.lines[self.row][: self.column]
            else:
                assert command == "m", f"unexpected escape {match.group()!r}"
            position = match.end()
        self._text(output[position:])
        return self

    def _text(self, text: str) -> None:
        for char in text:
            if char == "\n":
                self.row += 1
                self.column = 0
                if self.row == len(self.lines):
                    self.lines.append("")
            elif char == "\r":
                self.column = 0
            else:
                line = self.lines[self.row].ljust(self.column)
                self.lines[self.row] = line[: self.column] + char + line[self.column + 1 :]
                self.column += 1

    @property
    def screen(self) -> list[str]:
        """The lines shown, the empty last line (where the cursor waits) left off."""
        return self.lines[:-1] if self.lines[-1] == "" else list(self.lines)

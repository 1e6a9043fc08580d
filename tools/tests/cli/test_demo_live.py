"""``chunkwise demo`` shows a tool call's arguments and a structured answer growing live.

On a terminal the ``preview`` consumer's values grow in place below the other
consumers' lines and leave when complete; on a pipe nothing moves and the
consumer says how many live updates it showed.  The terminal is played by
``helpers.cli.Terminal``.
"""

from __future__ import annotations

import io
import itertools
import json
from typing import Any

import pytest

from chunkwise_tools.cli.demo import _Console, run_demo
from helpers.cli import Terminal
from helpers.json_values import as_snapshot, grows

CALL = "call 0 arguments, streaming: get_weather"
ANSWER = "answer, streaming"


def _values(frame: list[str], title: str) -> Any:
    """The live value under ``title`` in a frame (its lines indented by two), or None."""
    if title not in frame:
        return None
    lines = []
    for line in frame[frame.index(title) + 1 :]:
        if not line.startswith("  ") or "│" in line:
            break
        lines.append(line[2:])
    return as_snapshot(json.loads("\n".join(lines)))


async def test_on_a_terminal_the_values_grow_in_place_and_leave() -> None:
    out = io.StringIO()
    assert await run_demo(fast=True, console=_Console(out, live=True, interval=0)) == 0
    terminal = Terminal().feed(out.getvalue())
    screen = "\n".join(terminal.screen)
    # What stays: the other consumers' lines and the preview's count; no live row.
    assert CALL not in screen and ANSWER not in screen and "\x1b" not in screen
    assert "preview   │ call 0 arguments: shown live in 5 updates (display only)" in screen
    assert "preview   │ the structured answer: shown live in 15 updates (display only)" in screen
    # On a terminal the answer's JSON text is not streamed as text: its preview shows it.
    third = screen.split("3. A structured answer, parsed")[1]
    assert "text      │" not in third
    parsed = json.loads(third.split("choice.parsed: ", 1)[1].splitlines()[0])
    for title, final in [(CALL, {"city": "Zürich", "unit": "celsius"}), (ANSWER, parsed)]:
        shown = [v for frame in terminal.frames if (v := _values(frame, title)) is not None]
        assert len(shown) >= 5
        assert all(grows(old, new) for old, new in itertools.pairwise(shown))
        assert shown[-1] == as_snapshot(final)


@pytest.mark.parametrize("live", [False, None], ids=["pipe", "auto"])
async def test_on_a_pipe_nothing_moves(live: bool | None) -> None:
    out = io.StringIO()  # not a terminal: auto is off
    assert await run_demo(fast=True, console=_Console(out, live=live)) == 0
    text = out.getvalue()
    assert "\x1b" not in text and "streaming:" not in text
    assert "preview   │ the structured answer: shown live in 15 updates (display only)" in text
    third = text.split("3. A structured answer, parsed")[1]
    assert 'text      │ {"city": "Zürich"' in third

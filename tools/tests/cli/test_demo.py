"""``chunkwise demo``: in-process through ``main()`` and as a real process."""

from __future__ import annotations

import io
import json

import jsonschema
import pytest
import trio

from chunkwise_tools.cli import main
from chunkwise_tools.cli.demo import DEMO_SCHEMA, SECONDS, _Console, run_demo
from chunkwise_tools.server import SCENARIOS
from helpers.processes import interrupt, run_python

DEMO = SCENARIOS["demo"]
_TEXT = "  text      │ "


def _check_output(out: str) -> None:
    # Request 1: live text, the validated tool call, usage and the final status.
    assert "1. One request, four independent consumers" in out
    first, rest = out.split("2. The server hangs up mid-answer")
    second, third = rest.split("3. A structured answer, parsed")
    # Consumers run concurrently: another one's line may interrupt the text,
    # which then goes on in a new line under its tag.
    text = "".join(
        line.removeprefix(_TEXT) for line in first.splitlines() if line.startswith(_TEXT)
    )
    assert text == DEMO.text
    assert "tools     │ call 0 complete: get_weather" in out
    assert 'arguments: {"city": "Zürich", "unit": "celsius"}' in out
    assert "validated: yes" in out
    assert "lifecycle │ choice 0 finished: tool_calls" in out
    assert "lifecycle │ usage: 19 prompt + 31 completion = 50 tokens" in out
    assert "lifecycle │ status: complete" in out
    # Request 2: cut off, incomplete, partial text kept.
    assert "status: complete" in first and "incomplete" not in first
    assert "lifecycle │ status: incomplete (connection lost)" in second
    assert 'The result keeps the partial text: "Hello! This reply streams' in second
    # Request 3: the structured answer streams as JSON text and is parsed.
    parsed = json.loads(third.split("choice.parsed: ", 1)[1].splitlines()[0])
    jsonschema.validate(parsed, DEMO_SCHEMA)
    assert "lifecycle │ status: complete" in third
    assert "(validated against the weather_report schema)" in third
    assert "All three requests behaved as expected" in out
    assert "Traceback" not in out


def test_demo_in_process(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--fast"]) == 0
    captured = capsys.readouterr()
    _check_output(captured.out)
    assert captured.err == ""


async def test_demo_as_a_process() -> None:
    status, out, err = await run_python("-m", "chunkwise", "demo", "--fast")
    assert status == 0, err
    _check_output(out)
    assert err == ""


async def test_demo_with_delays_streams_visibly(autojump_clock: trio.testing.MockClock) -> None:
    out = io.StringIO()
    start = trio.current_time()
    assert await run_demo(out=out) == 0
    elapsed = trio.current_time() - start
    _check_output(out.getvalue())
    # Delays between events make the streaming visible, and the demo takes what
    # its help says: a second of it start-up and real sockets.
    assert SECONDS - 1 <= elapsed < SECONDS


def test_demo_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--fast" in out
    assert f"Takes about {SECONDS} seconds" in " ".join(out.split())


async def test_ctrl_c_ends_the_half_written_line_and_says_so() -> None:
    status, out, err = await interrupt(["demo"], after_stdout=_TEXT.encode(), wait=0.2)
    assert (status, err) == (130, "")
    assert out.endswith("\n\nInterrupted.\n")  # the half-written line ended first


def test_console_keeps_lines_whole() -> None:
    out = io.StringIO()
    console = _Console(out)
    console.stream("text", "Hello, ")
    console.line("tools", "a tool line")
    console.stream("text", "world\nsecond line")
    console.end_line()
    assert out.getvalue().splitlines() == [
        "  text      │ Hello, ",
        "  tools     │ a tool line",
        "  text      │ world",
        "  text      │ second line",
    ]


def test_console_escapes_what_the_output_cannot_encode() -> None:
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="ascii")
    console = _Console(out)
    console.line("text", "café 日本語")
    out.flush()
    assert raw.getvalue() == b"  text      | caf\\xe9 \\u65e5\\u672c\\u8a9e\n"

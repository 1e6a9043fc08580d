"""``chunkwise chat`` shows tool-call arguments and a structured answer growing live.

On a terminal the values are redrawn in place at the bottom of the output
(``chunkwise_tools/cli/_live.py``), then written in their final form; on a pipe nothing
moves.  The terminal is played by ``helpers.cli.Terminal`` (every frame a person
saw), the region's rules are checked alone, and one test runs the command on
a real pseudo-terminal.
"""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

import chunkwise
from chunkwise_tools.cli._common import describe_tool_call
from chunkwise_tools.cli._live import LiveRegion, display_width, render_json
from chunkwise_tools.cli.chat import TextRenderer, add_schema
from chunkwise_tools.server import ServerOptions, open_chat_server
from helpers.bodies import choice, chunk, sse, tool
from helpers.cli import Terminal, run_main
from helpers.data import KEY_VAR, REPO
from helpers.json_values import as_snapshot, grows, same_json
from helpers.processes import run_python
from helpers.strategies import json_texts

pytestmark = pytest.mark.usefixtures("api_key")

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "days": {
            "type": "array",
            "minItems": 3,
            "items": {
                "type": "object",
                "properties": {"high": {"type": "number"}, "note": {"type": "string"}},
                "required": ["high", "note"],
            },
        },
    },
    "required": ["city", "days"],
}
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
WIDE = (200, 100)
TITLE = "answer (JSON, streaming)"


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``weather.json`` (a schema) and ``tools.json`` in ``tmp_path``; a 200 x 100 terminal."""
    (tmp_path / "weather.json").write_text(json.dumps(SCHEMA))
    (tmp_path / "tools.json").write_text(json.dumps(TOOLS))
    monkeypatch.setenv("COLUMNS", str(WIDE[0]))
    monkeypatch.setenv("LINES", str(WIDE[1]))
    return tmp_path


def args_for(files: Path, api: str, model: str) -> list[str]:
    if model == "tools":
        return ["--api", api, "--model", model, "--tools", str(files / "tools.json")]
    return ["--api", api, "--model", model, "--schema", str(files / "weather.json")]


def request_for(files: Path, api: str, model: str) -> dict[str, Any]:
    responses = api == "responses"
    request: dict[str, Any]
    if responses:
        request = {"model": model, "input": "Weather?"}
    else:
        request = {"model": model, "messages": [{"role": "user", "content": "Weather?"}]}
    if model == "tools":
        tool = TOOLS[0]["function"]
        request["tools"] = [{"type": "function", **tool}] if responses else TOOLS
    else:
        add_schema(request, str(files / "weather.json"), responses)
    return request


def final_lines(result: chunkwise.chat.Result | chunkwise.responses.Result) -> list[str]:
    """What stays on the terminal: each call as on a pipe, the answer as indented JSON."""
    calls: tuple[chunkwise.ToolCall, ...]
    if isinstance(result, chunkwise.responses.Result):
        calls, parsed = result.function_calls, result.parsed
    else:
        calls, parsed = result.choices[0].tool_calls, result.choices[0].parsed
    if calls:
        return [line for call in calls for line in describe_tool_call(call)]
    return render_json(parsed, WIDE[0] - 1)


def region_values(frame: list[str], titles: tuple[str, ...]) -> dict[str, Any]:
    """The live values a frame shows, by title (the lines under it, indented by two)."""
    values: dict[str, Any] = {}
    title: str | None = None
    for line in frame:
        if line.startswith("  ") and title is not None:
            values[title] += line[2:] + "\n"
        elif line.startswith(titles):
            title = line
            values[title] = ""
        else:
            title = None
    return {t: json.loads(text) if text else None for t, text in values.items()}


# -- the renderer, every delta drawn -------------------------------------------------


@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize("model", ["text", "tools"])
async def test_every_frame_grows_and_the_final_form_stays(
    files: Path, api: str, model: str
) -> None:
    out, err = io.StringIO(), io.StringIO()
    live = LiveRegion(out, interval=0, size=lambda: WIDE)
    renderer = TextRenderer(out, err, live=live, json_content=model == "text")
    opener = chunkwise.responses.open_stream if api == "responses" else chunkwise.chat.open_stream
    async with open_chat_server(ServerOptions(write_size=3)) as server:
        async with opener(server.endpoint(), request_for(files, api, model)) as stream:
            async for event in stream:
                renderer.event(event)
            result = await stream.result()
    terminal = Terminal().feed(out.getvalue())
    assert terminal.screen == final_lines(result)
    # Every delta was drawn (interval 0), and every value only grew from frame to frame.
    assert live.draws > 10
    titles = (TITLE, "[tool call", "[function call")
    seen: dict[str, Any] = {}
    for frame in terminal.frames:
        for title, value in region_values(frame, titles).items():
            if "(call_" in title:
                continue  # a finished call's line, above the region
            old = seen.get(title)
            assert old is None or grows(as_snapshot(old), as_snapshot(value)), (old, value)
            seen[title] = value
    assert seen  # the region showed something
    if model == "text":
        assert same_json(seen[TITLE], final := json.loads("\n".join(terminal.screen)))
        assert len(final["days"]) == 3


def test_interrupted_the_live_values_give_way_to_what_arrived() -> None:
    # Ctrl-C mid-answer: the region is erased, the answer's raw text so far stays
    # (it is not JSON yet), and the unfinished call's preview leaves with the region.
    out, err = io.StringIO(), io.StringIO()
    live = LiveRegion(out, interval=0, size=lambda: WIDE)
    renderer = TextRenderer(out, err, live=live, json_content=True)
    parser = chunkwise.chat.Parser(response_format={"type": "json_object"}, tools=TOOLS)
    body = sse(
        chunk(choice(role="assistant", content='{"city": "Zü')),
        chunk(choice(content='rich", "days": [1, ')),
        chunk(choice(tool_calls=[tool(0, id="call_1", name="get_weather", arguments='{"ci')])),
        done=False,
    )
    for event in parser.feed(body):
        renderer.event(event)
    frame = Terminal().feed(out.getvalue()).screen
    assert frame == [
        TITLE,
        '  {"city": "Zürich", "days": [1]}',
        "[tool call 0] get_weather",
        "  {}",
    ]
    renderer.interrupted(parser.result)
    assert Terminal().feed(out.getvalue()).screen == ['{"city": "Zürich", "days": [1, ']
    assert "status: incomplete (interrupted)" in err.getvalue()
    assert not live


# -- through the command -------------------------------------------------------------


@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize("model", ["text", "tools"])
async def test_live_always_ends_on_the_final_form(
    capsys: pytest.CaptureFixture[str], files: Path, api: str, model: str
) -> None:
    async with open_chat_server(ServerOptions(delay=0.001)) as server:
        argv = ["chat", "--base-url", server.base_url, "--api-key-env", KEY_VAR, "Weather?"]
        status, out, err = await run_main(
            capsys, *argv, "--live", "always", *args_for(files, api, model)
        )
        result = await _result(server.endpoint(), request_for(files, api, model), api)
    assert status == 0, err
    assert "\x1b[J" in out  # drawn in place at least once
    assert Terminal().feed(out).screen == final_lines(result)
    assert "status: complete" in err


@pytest.mark.parametrize("live", [[], ["--live", "never"]], ids=["pipe", "never"])
@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize("model", ["text", "tools"])
async def test_on_a_pipe_nothing_moves(
    capsys: pytest.CaptureFixture[str], files: Path, api: str, model: str, live: list[str]
) -> None:
    async with open_chat_server() as server:
        argv = ["chat", "--base-url", server.base_url, "--api-key-env", KEY_VAR, "Weather?"]
        status, out, _ = await run_main(capsys, *argv, *live, *args_for(files, api, model))
        result = await _result(server.endpoint(), request_for(files, api, model), api)
    assert status == 0
    assert "\x1b" not in out
    if model == "text":
        # The answer's text as it streamed: JSON a pipe can take (jq, a file).
        parsed = result.parsed if isinstance(result, chunkwise.responses.Result) else None
        if isinstance(result, chunkwise.chat.Result):
            parsed = result.choices[0].parsed
        assert same_json(json.loads(out), parsed)
    else:
        assert out.splitlines() == final_lines(result)


async def _result(
    endpoint: chunkwise.Endpoint, request: dict[str, Any], api: str
) -> chunkwise.chat.Result | chunkwise.responses.Result:
    """The same answer read again: what the output must show."""
    if api == "responses":
        return await chunkwise.responses.complete(endpoint, request)
    return await chunkwise.chat.complete(endpoint, request)


@pytest.mark.skipif(sys.platform == "win32", reason="a POSIX pseudo-terminal")
async def test_on_a_real_terminal_the_answer_grows_in_place(files: Path) -> None:
    import pty  # POSIX only: imported where the skip has ruled Windows out

    main_fd, child_fd = pty.openpty()
    async with open_chat_server(ServerOptions(delay=0.001)) as server:
        argv = [sys.executable, "-m", "chunkwise", "chat", "--base-url", server.base_url]
        argv += ["--api-key-env", KEY_VAR, "Weather?", *args_for(files, "chat", "text")]
        env = {**os.environ, "PYTHONUTF8": "1", "TERM": "xterm"}
        received = bytearray()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_drain, main_fd, received)
            with trio.fail_after(120):
                process = await trio.run_process(
                    argv, cwd=REPO, env=env, stdin=child_fd, stdout=child_fd, check=False
                )
            os.close(child_fd)
        result = await _result(server.endpoint(), request_for(files, "chat", "text"), "chat")
    os.close(main_fd)
    assert process.returncode == 0
    output = received.decode().replace("\r\n", "\n")  # the terminal's own newline translation
    assert "\x1b[J" in output
    screen = Terminal().feed(output).screen
    assert screen[: len(final_lines(result))] == final_lines(result)


async def _drain(fd: int, into: bytearray) -> None:
    """Read the pseudo-terminal until the child's side is closed (EIO on Linux)."""
    while True:
        try:
            data = await trio.to_thread.run_sync(os.read, fd, 65536)
        except OSError:
            return
        if not data:
            return
        into.extend(data)


async def test_piped_the_real_command_writes_no_escape(files: Path) -> None:
    async with open_chat_server() as server:
        status, out, _ = await run_python(
            "-m",
            "chunkwise",
            "chat",
            "--base-url",
            server.base_url,
            "--api-key-env",
            KEY_VAR,
            "Weather?",
            *args_for(files, "chat", "text"),
        )
    assert status == 0 and "\x1b" not in out
    assert json.loads(out)["city"]


# -- --schema ------------------------------------------------------------------------


def test_schema_alone_is_named_after_its_file(tmp_path: Path) -> None:
    path = tmp_path / "my weather.v2.json"
    path.write_text(json.dumps(SCHEMA))
    chat: dict[str, Any] = {}
    add_schema(chat, str(path), responses=False)
    spec = {"schema": SCHEMA, "name": "my_weather_v2"}
    assert chat == {"response_format": {"type": "json_schema", "json_schema": spec}}
    responses: dict[str, Any] = {}
    add_schema(responses, str(path), responses=True)
    assert responses == {"text": {"format": {"type": "json_schema", **spec}}}


def test_schema_object_is_sent_as_written(tmp_path: Path) -> None:
    spec = {"name": "weather", "schema": SCHEMA, "strict": True, "description": "a report"}
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    request: dict[str, Any] = {}
    add_schema(request, str(path), responses=False)
    assert request["response_format"]["json_schema"] == spec


@pytest.mark.parametrize(
    ("content", "words"),
    [("[1, 2]", "must hold a JSON schema"), ("{", "is not valid JSON"), (None, "cannot read")],
)
async def test_schema_that_cannot_be_used_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: str | None, words: str
) -> None:
    path = tmp_path / "schema.json"
    if content is not None:
        path.write_text(content)
    argv = ["chat", "--base-url", "http://127.0.0.1:9/v1", "--api-key-env", KEY_VAR, "hi"]
    status, out, err = await run_main(capsys, *argv, "--schema", str(path))
    assert status == 2 and out == "" and words in err


# -- the region ----------------------------------------------------------------------


@given(json_texts, st.integers(min_value=4, max_value=120))
def test_render_json_is_the_value_and_opens_only_what_does_not_fit(text: str, width: int) -> None:
    value = json.loads(text)
    lines = render_json(value, width)
    assert same_json(json.loads("\n".join(lines)), value)
    flat = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    fits = display_width(flat) <= width
    assert (len(lines) == 1) == (fits or not isinstance(value, (dict, list)) or not value)


def test_rows_are_cut_to_the_terminal_width() -> None:
    out = io.StringIO()
    region = LiveRegion(out, interval=0, size=lambda: (20, 24))
    region.show("k", "a title much wider than twenty columns", {"city": "東京東京東京東京東京東京"})
    rows = Terminal().feed(out.getvalue()).screen
    assert rows and all(display_width(row) <= 19 for row in rows)
    assert rows[0].endswith("…") and rows[0].startswith("a title much")
    assert display_width("東京") == 4 and display_width("e\u0301") == 1


def test_a_region_taller_than_the_terminal_shows_its_end() -> None:
    out = io.StringIO()
    region = LiveRegion(out, interval=0, size=lambda: (40, 8))
    region.show("k", "numbers", list(range(100, 130)))
    rows = Terminal().feed(out.getvalue()).screen
    assert len(rows) == 7
    assert rows[0] == f"  … {33 - 6} lines above"  # a title, 32 lines of the array
    assert rows[-2:] == ["    129", "  ]"]


def test_redraws_are_paced_and_show_the_newest() -> None:
    now = [0.0]
    out = io.StringIO()
    region = LiveRegion(out, interval=0.05, size=lambda: (80, 24), clock=lambda: now[0])
    region.show("k", "value", [1])  # the first is drawn at once
    now[0] = 0.01
    region.show("k", "value", [1, 2])  # too soon: kept, not drawn
    assert region.draws == 1
    now[0] = 0.07
    region.show("k", "value", [1, 2, 3])
    assert region.draws == 2
    assert Terminal().feed(out.getvalue()).screen == ["value", "  [1, 2, 3]"]


def test_clear_erases_exactly_the_region() -> None:
    out = io.StringIO()
    region = LiveRegion(out, interval=0, size=lambda: (80, 24))
    out.write("before\n")
    region.show("a", "first", {"x": 1})
    region.show("b", "second", None)
    region.clear()
    out.write("after\n")
    region.draw()
    region.remove("a")
    region.remove("missing")  # nothing to erase
    assert Terminal().feed(out.getvalue()).screen == ["before", "after"]
    assert bool(region) and region.draws == 3
    region.remove("b")
    assert not region

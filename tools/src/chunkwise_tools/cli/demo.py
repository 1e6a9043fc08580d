"""``chunkwise demo``: the library's first minute, with no network and no API key.

Theory of operation
-------------------
The demo starts the embedded OpenAI-compatible server (:mod:`chunkwise_tools.server`)
in this process, on an ephemeral loopback port, and sends it two requests
through the real client, :func:`chunkwise.chat.open_stream`, so every byte
crosses a real socket.

The first request uses the ``demo`` scenario (multibyte text, then one
``get_weather`` tool call, usage).  Inside the stream's block four consumers
subscribe -- before the block's first checkpoint, so each sees every event --
and run as tasks in the stream's own nursery (:meth:`ChatStream.start_soon`):

* ``text`` subscribes to the choice family and prints content as it arrives;
* ``tools`` subscribes to the tool-call family and prints each call once its
  arguments are complete, parsed and validated against the request's JSON
  schema (validation needs the optional ``jsonschema`` package; without it the
  call says so in :attr:`~chunkwise.ToolCall.validation_skipped`, and the demo
  shows it);
* ``lifecycle`` subscribes to everything and prints the HTTP status, finish
  reasons, usage and the terminal status;
* ``preview`` subscribes to everything and mirrors each JSON value being
  streamed (a tool call's arguments, the third request's structured answer)
  from the patches of its delta events (:func:`~chunkwise.apply_patches`).
  On a terminal the mirror grows in place at the bottom of the output
  (:class:`~._live.LiveRegion`); once the value is complete, and on a pipe,
  it prints how many live updates it showed: a preview, never acted on.

The second request goes to a second server that hangs up part-way through the
body, and shows that the stream ends ``incomplete (connection lost)`` with its
partial text kept rather than raising.

The third asks for structured output (``response_format`` with a JSON schema,
:data:`DEMO_SCHEMA`): the server answers with a JSON document for the schema,
streamed in fragments that split keys and escapes, and the demo prints the
text as it arrives, then :attr:`~chunkwise.chat.ChoiceResult.parsed`, checked
against the schema (with ``jsonschema``; parsed only without it).

Consumers run concurrently, so their output would interleave mid-line; they
all write through one :class:`_Console`, which ends a half-written text line
before another consumer prints and labels every line with its consumer, and
keeps the live values below everything else.  On a terminal the structured
answer's text is not streamed as text: its live value shows it.
"""

from __future__ import annotations

import argparse
import codecs
import importlib.util
import json
import os
import sys
from collections.abc import Hashable, Mapping
from typing import Any, TextIO

import trio

from chunkwise import (
    AnomalyDetected,
    Event,
    HeadReceived,
    IncompleteReason,
    StreamCompleted,
    StreamErrorReceived,
    StreamFailed,
    StreamIncomplete,
    UsageReported,
    apply_patches,
    chat,
)
from chunkwise.lowlevel import NO_JSONSCHEMA

from ..server._chat_server import open_chat_server
from ..server._options import ServerOptions
from ..server._scenarios import SCENARIOS, scenario_events
from ._commands import COMMANDS
from ._common import (
    EXIT_INTERRUPTED,
    INSTALL_JSONSCHEMA,
    CommandsAction,
    anomaly_text,
    status_text,
)
from ._live import REDRAW_INTERVAL, LiveRegion

__all__ = ["DEMO_SCHEMA", "DEMO_TOOLS", "add_demo_command", "run_demo", "run_demo_command"]

#: The tools the demo request declares; chunkwise validates calls against them.
DEMO_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The current weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                },
                "required": ["city", "unit"],
                "additionalProperties": False,
            },
        },
    }
]

#: The JSON schema of the demo's structured answer (the third request).
DEMO_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "enum": ["Zürich", "東京"]},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "high": {"type": "number", "minimum": -50, "maximum": 50},
        "sunny": {"type": "boolean"},
        "note": {"type": "string", "maxLength": 40},
    },
    "required": ["city", "unit", "high", "sunny", "note"],
    "additionalProperties": False,
}

#: Seconds between events: slow enough to watch the text arrive, and the
#: whole demo short: its events' delays add up to a second less than
#: :data:`SECONDS` (the rest is start-up and the real sockets).
_DELAY = 0.08
#: How long the demo takes, as its help says.
SECONDS = 5
#: The whole demo never takes longer than this, whatever goes wrong.
_DEADLINE = 30.0
#: The second request is cut after this many events of the text scenario,
#: plus a few bytes, so the cut falls inside an event.
_EVENTS_BEFORE_CUT = 6
_BYTES_INTO_EVENT = 25

_TAG_WIDTH = 9


class _Console:
    """Line-safe output for concurrent consumers.

    Streamed text leaves a line open; a whole line from another consumer first
    closes it, and the text consumer re-opens its own line when it continues.
    Characters the output's encoding cannot show are escaped, never fatal.
    """

    def __init__(
        self, out: TextIO, *, live: bool | None = None, interval: float = REDRAW_INTERVAL
    ) -> None:
        self._out = out
        self._open: str | None = None  # the tag of the half-written line
        if live is None:
            live = out.isatty() and os.environ.get("TERM") != "dumb"
        self.region = LiveRegion(out, escape=self._safe, interval=interval) if live else None
        encoding = getattr(out, "encoding", None) or "utf-8"
        try:
            self._encoding: str | None = codecs.lookup(encoding).name
        except LookupError:
            self._encoding = None
        if self._encoding == "utf-8":
            self._encoding = None  # everything is representable
        self._bar = "│" if self._encoding is None else "|"

    def _safe(self, text: str) -> str:
        if self._encoding is None:
            return text
        return text.encode(self._encoding, "backslashreplace").decode(self._encoding)

    def _prefix(self, tag: str) -> str:
        return f"  {tag:<{_TAG_WIDTH}} {self._bar} "

    def stream(self, tag: str, text: str) -> None:
        """Append ``text`` to ``tag``'s open line (newlines continue under the tag)."""
        for number, part in enumerate(text.split("\n")):
            if number:
                self._write("\n")
                self._open = None
            if self._open != tag:
                self.end_line()
                self._write(self._prefix(tag))
                self._open = tag
            self._write(self._safe(part))
        self._out.flush()

    def line(self, tag: str, text: str) -> None:
        """Print one whole line under ``tag``."""
        self.end_line()
        self._write(self._prefix(tag) + self._safe(text) + "\n")
        self._out.flush()

    def say(self, text: str = "") -> None:
        """Print narration (no tag)."""
        self.end_line()
        self._write(self._safe(text) + "\n")
        self._out.flush()

    def end_line(self) -> None:
        if self._open is not None:
            self._write("\n")
            self._open = None

    def live(self, key: Hashable, title: str, value: Any) -> None:
        """Show ``value`` growing in place, below everything else (on a terminal)."""
        if self.region is not None:
            self.end_line()
            self.region.show(key, title, value)

    def done(self, key: Hashable) -> None:
        """``key``'s value is complete: it leaves the live values."""
        if self.region is not None:
            self.region.remove(key)
            self._redraw()

    def _write(self, text: str) -> None:
        if self.region is not None:
            self.region.clear()  # what stays goes above the live values
        self._out.write(text)
        if text.endswith("\n"):
            self._redraw()

    def _redraw(self) -> None:
        if self.region and self._open is None:
            self.region.draw()


def _heading(console: _Console, title: str) -> None:
    console.say()
    console.say(title)
    console.say("─" * len(title) if console._encoding is None else "-" * len(title))


# -- the four consumers -------------------------------------------------------------


async def _text_consumer(
    channel: trio.MemoryReceiveChannel[Event], console: _Console, json_answer: bool
) -> None:
    # A JSON answer on a terminal is not streamed as text: the preview shows it growing.
    show_content = not (json_answer and console.region is not None)
    with channel:
        async for event in channel:
            if type(event) is chat.TextDelta:
                if show_content:
                    console.stream("text", event.text)
            elif type(event) is chat.ReasoningDelta:
                console.stream("reasoning", event.text)
            elif type(event) is chat.ChoiceFinished:
                console.end_line()


async def _tool_consumer(channel: trio.MemoryReceiveChannel[Event], console: _Console) -> None:
    with channel:
        async for event in channel:
            if type(event) is chat.ToolCallStarted:
                console.line("tools", f"call {event.tool_index} started: {event.name} ({event.id})")
            elif type(event) is chat.ToolCallCompleted:
                call = event.call
                console.line("tools", f"call {event.tool_index} complete: {call.name}")
                if call.error is not None:
                    console.line("tools", f"  arguments rejected: {call.error}")
                    continue
                console.line("tools", f"  arguments: {_json(call.parse_arguments())}")
                if call.validated:
                    console.line("tools", f"  validated: yes (matches the {call.name} schema)")
                elif call.validation_skipped == NO_JSONSCHEMA:
                    console.line(
                        "tools",
                        f"  validated: no, {NO_JSONSCHEMA} ({INSTALL_JSONSCHEMA} to check)",
                    )
                else:
                    console.line("tools", f"  validated: no, {call.validation_skipped}")


async def _lifecycle_consumer(channel: trio.MemoryReceiveChannel[Event], console: _Console) -> None:
    with channel:
        async for event in channel:
            match event:
                case HeadReceived(status_code=status, headers=headers):
                    content_type = next(
                        (value for name, value in headers if name.lower() == "content-type"), "?"
                    )
                    console.line("lifecycle", f"HTTP {status}, {content_type}")
                case chat.ChoiceFinished(choice_index=index, finish_reason=reason):
                    console.line("lifecycle", f"choice {index} finished: {reason}")
                case UsageReported(usage=usage):
                    console.line("lifecycle", f"usage: {_usage_text(usage)}")
                case StreamErrorReceived(error=error):
                    console.line("lifecycle", f"server error: {error}")
                case AnomalyDetected(anomaly=anomaly):
                    console.line("lifecycle", f"note: {anomaly_text(anomaly)}")
                case StreamCompleted() | StreamIncomplete() | StreamFailed():
                    console.line("lifecycle", f"status: {status_text(event.result)}")


async def _preview_consumer(channel: trio.MemoryReceiveChannel[Event], console: _Console) -> None:
    mirrors: dict[Hashable, Any] = {}
    updates: dict[Hashable, int] = {}
    titles: dict[Hashable, str] = {}

    def update(key: Hashable, patches: tuple[Any, ...], title: str) -> None:
        mirrors[key] = apply_patches(mirrors.get(key), patches)
        updates[key] = updates.get(key, 0) + 1
        console.live(key, titles.setdefault(key, title), mirrors[key])

    def complete(key: Hashable, what: str) -> None:
        if key in updates:
            console.done(key)
            console.line(
                "preview", f"{what}: shown live in {updates.pop(key)} updates (display only)"
            )

    with channel:
        async for event in channel:
            if type(event) is chat.ToolCallStarted:
                key = ("call", event.choice_index, event.tool_index)
                titles[key] = f"call {event.tool_index} arguments, streaming: {event.name}"
            elif type(event) is chat.ToolCallArgumentsDelta and event.patches:
                key = ("call", event.choice_index, event.tool_index)
                update(key, event.patches, f"call {event.tool_index} arguments, streaming")
            elif type(event) is chat.TextDelta and event.patches:
                update(("answer", event.choice_index), event.patches, "answer, streaming")
            elif type(event) is chat.ToolCallCompleted:
                key = ("call", event.choice_index, event.tool_index)
                complete(key, f"call {event.tool_index} arguments")
            elif type(event) is chat.ChoiceFinished:
                complete(("answer", event.choice_index), "the structured answer")


def _usage_text(usage: Mapping[str, Any]) -> str:
    try:
        return (
            f"{usage['prompt_tokens']} prompt + {usage['completion_tokens']} completion "
            f"= {usage['total_tokens']} tokens"
        )
    except KeyError:
        return _json(dict(usage))


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _start_consumers(stream: chat.Stream, console: _Console, *, json_answer: bool = False) -> None:
    # Subscribe before the block's first checkpoint, so no consumer misses an event.
    text = stream.subscribe("choice")
    stream.start_soon(_text_consumer, text, console, json_answer, name="text")
    stream.start_soon(_tool_consumer, stream.subscribe("tool_call"), console, name="tools")
    stream.start_soon(_lifecycle_consumer, stream.subscribe(), console, name="lifecycle")
    stream.start_soon(_preview_consumer, stream.subscribe(), console, name="preview")


# -- the demo --------------------------------------------------------------------


async def run_demo(
    *, fast: bool = False, out: TextIO | None = None, console: _Console | None = None
) -> int:
    """Run the requests, printing to ``out`` (stdout) or ``console``; 0 when all behaved."""
    if console is None:
        console = _Console(sys.stdout if out is None else out)
    delay = 0.0 if fast else _DELAY
    with trio.fail_after(_DEADLINE):
        first = await _first_request(console, delay)
        second = await _second_request(console, delay)
        third = await _third_request(console, delay)
    calls = first.choices[0].tool_calls if first.choices else ()
    first_ok = (
        first.status == "complete"
        and len(calls) == 1
        and calls[0].error is None
        # Without the jsonschema extra the call is parsed, and says why it is not validated.
        and (calls[0].validated is True or calls[0].validation_skipped == NO_JSONSCHEMA)
    )
    second_ok = (
        second.status == "incomplete"
        and second.reason == IncompleteReason.CONNECTION_LOST
        and bool(second.content)
    )
    third_ok = (
        third.status == "complete"
        and bool(third.choices)
        and third.choices[0].parse_error is None
        and isinstance(third.choices[0].parsed, dict)
    )
    console.say()
    if first_ok and second_ok and third_ok:
        console.say("All three requests behaved as expected:")
        validated = "validated" if calls[0].validated else f"not validated ({NO_JSONSCHEMA})"
        console.say(f"  1. complete, with its tool call parsed and {validated}")
        console.say("  2. incomplete (connection lost), with its partial text kept")
        console.say("  3. complete, with its structured answer parsed")
        return 0
    console.say("Something went wrong: the requests did not end as expected (see above).")
    return 1


async def _first_request(console: _Console, delay: float) -> chat.Result:
    async with open_chat_server(ServerOptions(scenario="demo", delay=delay)) as server:
        console.say("chunkwise demo: streaming chat completions, parsed as they arrive")
        console.say(f"A local OpenAI-compatible server is running at {server.base_url}")
        console.say("(in this process: no network, no API key).")
        _heading(console, "1. One request, four independent consumers")
        console.say("chunkwise.chat.open_stream sends the request; four consumers subscribe")
        console.say("and each receives every event it asked for, in its own task:")
        console.say("  text       prints the reply as it streams in")
        console.say("  tools      prints each tool call once its arguments are complete,")
        console.say("             parsed and checked against the tool's JSON schema")
        console.say("  lifecycle  prints the HTTP status, finish reasons, usage and the status")
        console.say("  preview    shows JSON as it grows (on a terminal, in place), from the")
        console.say("             patches of each delta: a live preview, never acted on")
        console.say()
        request: dict[str, Any] = {
            "model": "demo",
            "messages": [{"role": "user", "content": "What's the weather in Zürich?"}],
            "stream_options": {"include_usage": True},
            "tools": DEMO_TOOLS,
        }
        if importlib.util.find_spec("jsonschema") is None:
            console.say(f"({NO_JSONSCHEMA}: tool arguments are parsed, not validated)")
        async with chat.open_stream(server.endpoint(), request) as stream:
            _start_consumers(stream, console)
            return await stream.result()


async def _second_request(console: _Console, delay: float) -> chat.Result:
    events = scenario_events(SCENARIOS["text"])
    cut = sum(len(event) for event in events[:_EVENTS_BEFORE_CUT]) + _BYTES_INTO_EVENT
    options = ServerOptions(scenario="text", delay=delay, disconnect_after=cut)
    async with open_chat_server(options) as server:
        _heading(console, "2. The server hangs up mid-answer")
        console.say(f"A second local server closes the connection after {cut} bytes of the")
        console.say("body. The stream ends incomplete instead of raising, and keeps its text.")
        console.say()
        request = {"model": "text", "messages": [{"role": "user", "content": "Say hello."}]}
        async with chat.open_stream(server.endpoint(), request) as stream:
            _start_consumers(stream, console)
            result = await stream.result()
    console.say()
    console.say(f"The result keeps the partial text: {_json(result.content)}")
    return result


async def _third_request(console: _Console, delay: float) -> chat.Result:
    async with open_chat_server(ServerOptions(scenario="text", delay=delay)) as server:
        _heading(console, "3. A structured answer, parsed")
        console.say("The request's response_format asks for JSON matching a schema. The server")
        console.say("streams a document for it in fragments that split keys and escapes;")
        console.say("each delta's patches grow a live preview of it, and chunkwise parses it")
        console.say("once, at the end, into choice.parsed.")
        console.say()
        request = {
            "model": "text",
            "messages": [{"role": "user", "content": "The weather in Zürich, as JSON."}],
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "weather_report", "schema": DEMO_SCHEMA, "strict": True},
            },
        }
        async with chat.open_stream(server.endpoint(), request) as stream:
            _start_consumers(stream, console, json_answer=True)
            result = await stream.result()
    choice = result.choices[0] if result.choices else None
    console.say()
    if choice is not None and choice.parse_error is None:
        console.say(f"choice.parsed: {_json(choice.parsed)}")
        if importlib.util.find_spec("jsonschema") is None:
            console.say(f"(parsed, not validated: {NO_JSONSCHEMA})")
        else:
            console.say("(validated against the weather_report schema)")
    elif choice is not None:
        console.say(f"choice.parse_error: {choice.parse_error}")
    return result


# -- the command line --------------------------------------------------------------


def add_demo_command(commands: CommandsAction) -> None:
    """Register ``chunkwise demo``."""
    demo = commands.add_parser(
        "demo",
        help=COMMANDS["demo"],
        description=(
            "Start a local OpenAI-compatible server in this process and stream three "
            "requests through chunkwise: one with text, a validated tool call and usage, "
            "shown by four independent consumers (one previews the tool call live); one "
            "whose server hangs up mid-answer, which ends incomplete with its partial text; "
            "one asking for structured output, whose JSON answer grows live and is parsed.  "
            f"Takes about {SECONDS} seconds (--fast: one)."
        ),
        epilog="exit status: 0 when all requests behave as expected, 1 otherwise, 130 interrupted",
    )
    demo.add_argument("--fast", action="store_true", help="no delays between events")
    demo.set_defaults(handler=run_demo_command)


def run_demo_command(args: argparse.Namespace) -> int:
    """``chunkwise demo``; Ctrl-C ends the half-written line and says so."""
    console = _Console(sys.stdout)
    try:
        status: int = trio.run(lambda: run_demo(fast=args.fast, console=console))
    except KeyboardInterrupt:
        if console.region is not None:
            console.region.clear()
        console.say()
        console.say("Interrupted.")
        return EXIT_INTERRUPTED
    return status

"""``chunkwise chat``: stream one answer from a real endpoint to the terminal.

``--api chat`` (the default) posts to ``/chat/completions``; ``--api
responses`` posts the same options, translated, to the Responses API's
``/responses`` (:func:`~._options.build_response_request`), and ``--api
completions`` a ``{"model", "prompt"}`` body to legacy ``/completions``
(:func:`~._options.build_completion_request`), ``--api messages`` a
``{"model", "max_tokens", "messages"}`` body to Anthropic's ``/messages``
(:func:`~._options.build_messages_request`).  Each is read with its own
parser, chosen from :data:`~._options.COMMAND_APIS`.  Everything below holds
for all four (a completion has only text: no reasoning, refusals or calls; a
message's thinking blocks are reasoning, its ``tool_use`` blocks tool calls,
and it has no refusals, audio or ``--schema``).

Output
------
The answer goes to stdout as it arrives, one flush per delta: the text,
reasoning (ANSI dim on a terminal, otherwise prefixed ``[reasoning]``),
refusals (prefixed ``[refusal]``) and each tool call once it is complete (a
Responses reasoning summary is reasoning, a function call a tool call, chat's
legacy ``function_call`` a ``[function_call]``).  What the Responses API's
hosted and custom tools do is shown in stream order too:

- a hosted tool's progress, one line a phase *change* (a shell's output
  deltas are one ``output`` phase): ``[web_search_call 0: searching]``, dim
  on a terminal, like every line about the stream rather than of the answer;
- a partial image, one such line: ``[partial image 0: 327 bytes]``;
- a tool's input that is text (a custom tool's, code, shell commands, a
  patch) under a ``[custom_tool_call 0] input:`` line, as it streams, or once
  whole when the server sent no delta; an MCP call's arguments, which are
  JSON, as a function call's are: growing in the live region on a terminal,
  and on one line once the item is done.

An audio answer's transcript is its text, shown as text unless the answer
streams text of its own (the Responses API may send both, saying the same).
The summary -- finish reasons (Responses: the server's status, Messages: the
``stop_reason``), tool items
and custom tool calls, audio, a structured answer that failed, usage and the
``status:`` line -- goes to stderr, so ``chunkwise chat ... > answer.txt``
keeps only the answer.  ``--audio-out`` writes the audio to a file at the end
(:mod:`._audio`).  ``--json`` prints one JSON object a line on stdout instead
(the same conversion as ``chunkwise inspect --json``: every event, tools' and
audio's included), the last one being the terminal event; it is UTF-8 and
unescaped, like the text.

The exit status is 0 only when the stream is complete, a structured answer
asked for parsed and matched its schema, and ``--audio-out`` got audio.

Live values
-----------
``--schema FILE.json`` asks for a structured answer (chat's
``response_format``, the Responses API's ``text.format``).  On a terminal
(``--live auto``, the default, or ``--live always``), a tool call's arguments
and a structured answer are shown while they grow, from the patches of their
delta events, in a region at the bottom of the output redrawn in place
(:class:`~._live.LiveRegion`); once complete, a call is written as on a pipe
and the answer as indented JSON (its ``parsed`` value, or the raw text when it
does not parse).  On a pipe (or ``--live never``) nothing moves: the answer's
text streams as it arrives and each call is written once complete.

Ctrl-C is left to trio: ``KeyboardInterrupt`` is delivered into the stream's
block, which cancels the reader and closes the socket before it propagates
out of :func:`trio.run`.  What arrived until then (:attr:`ChatStream.snapshot`)
is then reported as incomplete (its audio written to ``--audio-out``), and the
exit status is 130.

The API key never reaches the output: it is only read from the environment
variable named by ``--api-key-env``, and every error or JSON line is passed
through :func:`~chunkwise._core.util.redact` in case a server quotes it back.  A
failed request is explained by :func:`~._common.describe_failure`, with a hint
when the cause is a likely slip (no key sent, a base URL without ``/v1``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import sys
from collections.abc import Hashable, Mapping
from pathlib import Path
from typing import Any, TextIO

import trio

from chunkwise import (
    ChunkwiseError,
    Endpoint,
    Event,
    RawEvent,
    StreamCompleted,
    StreamFailed,
    StreamIncomplete,
    UsageReported,
    apply_patches,
    chat,
    completions,
    messages,
    responses,
)
from chunkwise.lowlevel import Api, OutputSchema, open_stream, redact

from .._convert import event_to_json, to_json
from ._audio import add_audio_options, ask_for_audio, audio_summary, decode_base64, save_audio
from ._commands import COMMANDS
from ._common import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_STREAM,
    INSTALL_JSONSCHEMA,
    PROG,
    CommandsAction,
    Failure,
    UsageError,
    anomaly_text,
    describe_custom_call,
    describe_failure,
    describe_tool_call,
    item_name,
    json_text,
    one_line,
    prepare_json_output,
    print_failure,
    printable,
    status_text,
)
from ._live import LiveRegion, render_json, terminal_size
from ._options import (
    COMMAND_APIS,
    ApiName,
    add_api_option,
    add_endpoint_options,
    add_request_options,
    api_of_event,
    command_api,
    endpoint_from_args,
    read_json_file,
)

__all__ = [
    "TextRenderer",
    "add_chat_command",
    "add_schema",
    "message_summary_lines",
    "response_summary_lines",
    "run_chat",
    "summary_lines",
]

Result = chat.Result | responses.Result | completions.Result | messages.Result

Stream = chat.Stream | responses.Stream | completions.Stream | messages.Stream

_DIM = "\x1b[2m"
_RESET = "\x1b[0m"


def add_chat_command(commands: CommandsAction) -> None:
    """Register ``chunkwise chat``."""
    chat = commands.add_parser(
        "chat",
        help=COMMANDS["chat"],
        description=(
            "Send PROMPT to an OpenAI-compatible /chat/completions endpoint (with --api "
            "responses: /responses, --api completions: /completions, as the prompt to "
            "complete, --api messages: Anthropic's /messages) and stream the answer as it "
            "arrives: text, reasoning "
            "(dimmed on a terminal, otherwise prefixed [reasoning]), tool or function "
            "calls once their arguments are complete, a hosted tool's progress (one line "
            "a phase, e.g. [web_search_call 0: searching]), a tool's input as it streams "
            "(custom tools, code, shell commands, patches; MCP arguments as tool-call "
            "arguments are), "
            "partial images as a note and an audio answer's transcript as text; on a "
            "terminal, tool-call arguments and a structured answer (--schema) grow in place "
            "as they stream.  The summary (finish reason or the server's status, tool items, "
            "custom tool calls, audio, usage, status line) goes to stderr.  "
            "Ctrl-C stops the stream and shows what arrived, marked incomplete."
        ),
        epilog=(
            "exit status: 0 complete, 1 incomplete, failed or an HTTP/connection error, a "
            "structured answer that does not parse or match its schema, or no audio for "
            "--audio-out, 2 bad usage or an unwritable --audio-out, 130 interrupted"
        ),
    )
    chat.add_argument(
        "prompt", metavar="PROMPT", help="the user message (--api completions: the prompt)"
    )
    add_endpoint_options(chat)
    add_api_option(chat)
    add_request_options(chat)
    chat.add_argument(
        "--schema",
        metavar="FILE.json",
        help=(
            "ask for a structured answer: a JSON schema, or a json_schema object "
            '({"name": ..., "schema": ..., "strict": ...}); sent as response_format '
            "(Responses API: text.format; not for --api completions)"
        ),
    )
    chat.add_argument(
        "--live",
        choices=("auto", "always", "never"),
        default="auto",
        help=(
            "show tool-call (and MCP) arguments and a structured answer growing in place (ANSI "
            "cursor movement): auto (the default) on a terminal, always, or never"
        ),
    )
    chat.add_argument(
        "--json",
        action="store_true",
        help="print the stream events, one JSON object a line, instead of text",
    )
    add_audio_options(chat, request=True)
    chat.set_defaults(handler=run_chat)


class _Session:
    """What outlives :func:`trio.run`: the stream, for its snapshot after Ctrl-C."""

    def __init__(self) -> None:
        self.stream: Stream | None = None
        self.result: Result | None = None
        #: The API the server's events belong to, when it is not the one asked for.
        self.other_api: ApiName | None = None


def run_chat(args: argparse.Namespace) -> int:
    """The ``chat`` command: returns the exit status."""
    endpoint = endpoint_from_args(args)
    api = command_api(args)
    request = api.build(args, args.prompt)
    if args.schema is not None:
        if api.name in ("completions", "messages"):
            raise UsageError(f"--schema is for --api chat or responses, not --api {api.name}")
        add_schema(request, args.schema, api.name == "responses")
    if args.audio_out is not None:
        ask_for_audio(request, args, api.name)
    if "tools" in request and importlib.util.find_spec("jsonschema") is None:
        # The stream validates tool-call arguments against the tools' schemas.
        raise UsageError(
            f"--tools needs the jsonschema extra to validate tool calls: {INSTALL_JSONSCHEMA}"
        )
    key = endpoint.api_key
    renderer: _Renderer
    if args.json:
        prepare_json_output()
        renderer = _JSONRenderer(sys.stdout, key)
    else:
        live = None
        if args.live == "always" or (args.live == "auto" and _is_terminal(sys.stdout)):
            live = LiveRegion(sys.stdout)
        renderer = TextRenderer(sys.stdout, sys.stderr, live=live, json_content=_asks_json(request))
    session = _Session()
    try:
        trio.run(_chat, endpoint, request, renderer, session, api.api)
    except KeyboardInterrupt:
        snapshot = session.stream.snapshot if session.stream is not None else None
        renderer.interrupted(snapshot)
        if args.audio_out is not None:
            save_audio("chat", args.audio_out, snapshot, args.audio_format, interrupted=True)
        return EXIT_INTERRUPTED
    except ChunkwiseError as exc:
        failure = describe_failure(exc, endpoint, args.api_key_env)
        renderer.error(exc, failure)
        print_failure(failure, f"{PROG} chat: error: ")
        return EXIT_STREAM
    assert session.result is not None
    if session.other_api is not None:
        title = COMMAND_APIS[session.other_api].title
        sys.stdout.flush()
        print(
            f"{PROG} chat: note: the server answered with a {title} stream, not "
            f"{COMMAND_APIS[api.name].title} events (try --api {session.other_api})",
            file=sys.stderr,
        )
    status = EXIT_OK if _answered(session.result) else EXIT_STREAM
    if args.audio_out is not None:
        status = max(status, save_audio("chat", args.audio_out, session.result, args.audio_format))
    return status


def _answered(result: Result) -> bool:
    """The stream is complete, and a structured answer asked for parsed and matched its schema."""
    if isinstance(result, completions.Result):
        errors = []
    elif isinstance(result, (responses.Result, messages.Result)):
        errors = [result.parse_error]
    else:
        errors = [choice.parse_error for choice in result.choices]
    return result.status == "complete" and not any(errors)


def add_schema(request: dict[str, Any], name: str, responses: bool) -> None:
    """Ask for a structured answer: the JSON schema in the file ``name``.

    The file holds a schema, or the ``json_schema`` object itself (``name``,
    ``schema``, ``strict``, ``description``).  A schema alone is named after
    the file (the API requires a name: letters, digits, ``_`` and ``-``).
    """
    document = read_json_file(name)
    if not isinstance(document, dict):
        raise UsageError(f"{name!r} must hold a JSON schema (an object)")
    spec = dict(document) if isinstance(document.get("schema"), dict) else {"schema": document}
    if not isinstance(spec.get("name"), str):
        spec["name"] = re.sub(r"[^A-Za-z0-9_-]", "_", Path(name).stem)[:64] or "answer"
    if responses:
        request["text"] = {"format": {"type": "json_schema", **spec}}
    else:
        request["response_format"] = {"type": "json_schema", "json_schema": spec}


def _asks_json(request: Mapping[str, Any]) -> bool:
    text = request.get("text")
    text_format = text.get("format") if isinstance(text, Mapping) else None
    return (
        OutputSchema.from_response_format(request.get("response_format")) is not None
        or OutputSchema.from_text_format(text_format) is not None
    )


def _is_terminal(out: TextIO) -> bool:
    """A terminal that moves its cursor (not ``TERM=dumb``)."""
    return out.isatty() and os.environ.get("TERM") != "dumb"


async def _chat(
    endpoint: Endpoint,
    request: Mapping[str, Any],
    renderer: _Renderer,
    session: _Session,
    api: Api[Stream],
) -> None:
    async with open_stream(api, endpoint, request) as stream:
        session.stream = stream
        # The first few events as sent, to tell a chat server answering a
        # Responses request (lossy: the rest are dropped, nobody waits for them).
        raw = stream.subscribe("raw", buffer_size=4, lossy=True)
        async for event in stream:
            renderer.event(event)
        session.result = await stream.result()
    session.other_api = _other_api(api.name, raw)


def _other_api(name: str, raw: trio.MemoryReceiveChannel[Event]) -> ApiName | None:
    """The API the first raw events belong to, when it is not ``name``."""
    while True:
        try:
            event = raw.receive_nowait()
        except (trio.WouldBlock, trio.EndOfChannel):
            return None
        if isinstance(event, RawEvent):
            seen = api_of_event(event.event.event, event.event.data)
            if seen is not None:
                return None if seen == name else seen


class _Renderer:
    def event(self, event: Event) -> None:
        raise NotImplementedError

    def error(self, exc: ChunkwiseError, failure: Failure) -> None:
        """A request that failed before (or instead of) streaming."""

    def interrupted(self, snapshot: Result | None) -> None:
        raise NotImplementedError


class _JSONRenderer(_Renderer):
    def __init__(self, out: TextIO, key: str | None) -> None:
        self._out = out
        self._key = key

    def _write(self, document: Mapping[str, Any]) -> None:
        self._out.write(redact(json_text(document), self._key) + "\n")
        self._out.flush()

    def event(self, event: Event) -> None:
        self._write(event_to_json(event))

    def error(self, exc: ChunkwiseError, failure: Failure) -> None:
        document: dict[str, Any] = {"type": "error", "error": to_json(exc)}
        if failure.hint is not None:
            document["hint"] = failure.hint
        self._write(document)

    def interrupted(self, snapshot: Result | None) -> None:
        self._write(
            {
                "type": "interrupted",
                "status": "incomplete",
                "result": None if snapshot is None else to_json(snapshot),
            }
        )


class TextRenderer(_Renderer):
    """Live text on ``out``; the summary on ``err``.

    With ``live``, tool-call arguments (and the answer, when ``json_content``
    says the request asked for JSON) are mirrored from their patches and shown
    in the region while they grow; everything else is written above it.
    """

    def __init__(
        self,
        out: TextIO,
        err: TextIO,
        *,
        live: LiveRegion | None = None,
        json_content: bool = False,
    ) -> None:
        self._out = out
        self._err = err
        self._tty = out.isatty() and not os.environ.get("NO_COLOR")
        self._mode: str | None = None  # "content", "reasoning", "refusal", "tool"
        self._choice = 0
        self._at_line_start = True
        self._live = live
        self._json_content = json_content and live is not None
        self._texts: dict[int, list[str]] = {}  # a JSON answer's deltas, by choice (live only)
        self._mirrors: dict[Hashable, Any] = {}
        self._titles: dict[Hashable, str] = {}
        self._phases: dict[int, str] = {}  # a hosted tool's last phase shown, by output index
        self._inputs: set[int] = set()  # the items whose input was shown as it streamed
        self._worded: set[int] = set()  # the choices whose text streamed (a transcript is not)

    def _write(self, text: str) -> None:
        if text:
            if self._live is not None:
                self._live.clear()  # what stays goes above the live values
            self._out.write(text)
            self._at_line_start = text.endswith("\n")
            self._out.flush()

    def _newline(self) -> None:
        if not self._at_line_start:
            self._write("\n")

    def _enter(self, mode: str, choice_index: int) -> None:
        """Switch to writing ``mode`` text of choice ``choice_index``."""
        if mode == self._mode and choice_index == self._choice:
            return
        self._leave()
        if choice_index != self._choice:
            self._newline()
            self._write(f"[choice {choice_index}]\n")
            self._choice = choice_index
        if mode == "reasoning":
            if self._tty:
                self._write(_DIM)
            else:
                self._newline()
                self._write("[reasoning] ")
        elif mode == "refusal":
            self._newline()
            self._write("[refusal] ")
        elif mode.startswith("["):  # a tool's input: its header on a line of its own
            self._newline()
            self._write(mode + "\n")
        elif mode == "content" and self._mode is not None:
            self._newline()
        self._mode = mode

    def _leave(self) -> None:
        if self._mode == "reasoning" and self._tty:
            self._out.write(_RESET)
            self._newline()
        elif self._mode not in (None, "content", "tool"):
            self._newline()

    def _note(self, text: str) -> None:
        """A line about the stream, not of the answer (tool progress, images): dim on a terminal."""
        self._leave()
        self._mode = None
        self._newline()
        self._write(f"{_DIM}{text}{_RESET}\n" if self._tty else text + "\n")

    def _show(self, key: Hashable, patches: tuple[Any, ...], title: str) -> None:
        """Apply a delta's patches to ``key``'s mirror and show it live."""
        assert self._live is not None
        self._mirrors[key] = apply_patches(self._mirrors.get(key), patches)
        if self._mode == "reasoning":
            self._leave()
            self._mode = None
        self._newline()
        self._live.show(key, self._titles.setdefault(key, title), self._mirrors[key])

    def _done(self, key: Hashable, lines: list[str]) -> None:
        """``key`` is complete: it leaves the region and ``lines`` stay in its place."""
        if self._live is not None:
            self._live.remove(key)
            self._mirrors.pop(key, None)
        self._newline()
        self._write("".join(line + "\n" for line in lines))
        if self._live:
            self._live.draw()

    def _live_event(self, event: Event) -> bool:
        """Show ``event`` in the live region; false when it is not a live value's."""
        assert self._live is not None
        if isinstance(event, (chat.TextDelta, responses.TextDelta)) and self._json_content:
            index = getattr(event, "choice_index", 0)
            self._texts.setdefault(index, []).append(event.text)
            where = f"[choice {index}] " if index else ""
            self._show(("answer", index), event.patches, f"{where}answer (JSON, streaming)")
        elif isinstance(event, chat.ToolCallStarted):
            key = ("tool", event.choice_index, event.tool_index)
            self._titles[key] = f"[tool call {event.tool_index}] {printable(event.name or '')}"
        elif isinstance(event, messages.ToolCallStarted):
            key = ("tool", 0, event.index)
            self._titles[key] = f"[tool call {event.index}] {printable(event.name or '')}"
        elif isinstance(event, messages.ToolCallArgumentsDelta):
            key = ("tool", 0, event.index)
            self._show(key, event.patches, f"[tool call {event.index}]")
        elif isinstance(event, responses.ToolCallStarted):
            key = ("tool", 0, event.output_index)
            self._titles[key] = (
                f"[function call {event.output_index}] {printable(event.name or '')}"
            )
        elif isinstance(event, chat.ToolCallArgumentsDelta):
            key = ("tool", event.choice_index, event.tool_index)
            self._show(key, event.patches, f"[tool call {event.tool_index}]")
        elif isinstance(event, responses.ToolCallArgumentsDelta):
            key = ("tool", 0, event.output_index)
            self._show(key, event.patches, f"[function call {event.output_index}]")
        elif isinstance(event, responses.ToolInputDelta) and event.item_type in _JSON_INPUTS:
            title = f"[{printable(event.item_type)} {event.output_index}] arguments"
            self._show(("tool", 0, event.output_index), event.patches, title)
        else:
            return False
        return True

    def event(self, event: Event) -> None:
        if self._live is not None and self._live_event(event):
            return
        # A Responses stream has one answer: its events are choice 0's.
        if isinstance(event, _TEXT_DELTAS):
            self._enter("content", getattr(event, "choice_index", 0))
            self._worded.add(self._choice)
            self._write(printable(event.text))
        elif isinstance(event, (chat.AudioDelta, responses.AudioTranscriptDelta)):
            # The transcript is the answer's text, unless the answer streams text too.
            index = getattr(event, "choice_index", 0)
            text = event.transcript if isinstance(event, chat.AudioDelta) else event.text
            if text and index not in self._worded:
                self._enter("content", index)
                self._write(printable(text))
        elif isinstance(event, responses.ToolProgress):
            if self._phases.get(event.output_index) != event.phase:
                self._phases[event.output_index] = event.phase
                where = f"{printable(event.item_type)} {event.output_index}"
                self._note(f"[{where}: {printable(event.phase)}]")
        elif isinstance(event, responses.ToolInputDelta):
            if event.item_type not in _JSON_INPUTS:  # JSON is shown once complete
                self._inputs.add(event.output_index)
                self._enter(_input_header(event.item_type, event.output_index, event.index), 0)
                self._write(printable(event.fragment))
        elif isinstance(event, responses.PartialImage):
            raw = decode_base64(event.b64)
            size = "not base64" if raw is None else f"{len(raw)} bytes"
            self._note(f"[partial image {event.index}: {size}]")
        elif isinstance(event, responses.OutputItemDone):
            self._item_done(event.item)
        elif isinstance(
            event,
            (
                chat.ReasoningDelta,
                responses.ReasoningSummaryDelta,
                responses.ReasoningDelta,
                messages.ThinkingDelta,
            ),
        ):
            self._enter("reasoning", getattr(event, "choice_index", 0))
            self._write(printable(event.text))
        elif isinstance(event, (chat.RefusalDelta, responses.RefusalDelta)):
            self._enter("refusal", getattr(event, "choice_index", 0))
            self._write(printable(event.text))
        elif isinstance(event, chat.ToolCallCompleted):
            self._enter("tool", event.choice_index)
            self._done(
                ("tool", event.choice_index, event.tool_index), describe_tool_call(event.call)
            )
        elif isinstance(event, responses.ToolCallCompleted):
            self._enter("tool", 0)
            self._done(("tool", 0, event.output_index), describe_tool_call(event.call))
        elif isinstance(event, messages.ToolCallCompleted):
            self._enter("tool", 0)
            self._done(("tool", 0, event.index), describe_tool_call(event.call))
        elif isinstance(event, (StreamCompleted, StreamIncomplete, StreamFailed)):
            self._finish(event.result, None)
        elif isinstance(event, (chat.ChoiceFinished, UsageReported)):
            pass  # in the result, summarised at the end

    def _item_done(self, item: responses.OutputItem) -> None:
        """A tool item's input that was not shown as it streamed: JSON, or sent whole."""
        if item.input is None or item.call is not None or item.index in self._inputs:
            return
        kind = printable(item.type or "item")
        if item.type in _JSON_INPUTS:
            title = f"[{kind} {item.index}] {printable(item_name(item) or '')}"
            self._enter("tool", 0)
            self._done(("tool", 0, item.index), [f"{title}: {_json_line(item.input)}"])
        elif item.input:
            self._enter(_input_header(item.type or "item", item.index, 0), 0)
            self._write(printable(item.input))

    def _finish(self, result: Result, status: str | None) -> None:
        self._leave()
        self._mode = None
        for index, parts in self._texts.items():
            self._done(("answer", index), _final_answer(result, index, "".join(parts)))
        self._texts.clear()
        if self._live is not None:
            for key in list(self._mirrors):  # calls cut short: the result has them
                self._live.remove(key)
        self._newline()
        self._out.flush()
        if isinstance(result, responses.Result):
            lines = response_summary_lines(result)
        elif isinstance(result, messages.Result):
            lines = message_summary_lines(result)
        else:
            lines = summary_lines(result)
        for line in lines:
            print(line, file=self._err)
        print(status or f"status: {status_text(result)}", file=self._err)
        self._err.flush()

    def interrupted(self, snapshot: Result | None) -> None:
        if snapshot is None:
            self._newline()
            print("status: incomplete (interrupted before the response began)", file=self._err)
            return
        status = "status: complete" if snapshot.status == "complete" else None
        self._finish(snapshot, status or "status: incomplete (interrupted)")


_TEXT_DELTAS = (chat.TextDelta, responses.TextDelta, completions.TextDelta, messages.TextDelta)

#: The tool inputs that are JSON (MCP arguments): shown like a function call's
#: arguments, growing in the live region on a terminal, else once complete.
_JSON_INPUTS = frozenset({"mcp_call"})


def _input_header(item_type: str, output_index: int, index: int) -> str:
    """The line above a tool's input as it streams: ``[shell_call 0] input 1:``."""
    number = f" {index}" if index else ""
    return f"[{printable(item_type)} {output_index}] input{number}:"


def _json_line(text: str) -> str:
    """JSON text on one line, as tool-call arguments are shown; quoted when it is not JSON."""
    try:
        value = json.loads(text)
    except ValueError:
        return f"(not JSON) {printable(json.dumps(text, ensure_ascii=False))}"
    return printable(json.dumps(value, ensure_ascii=False))


def _final_answer(result: Result, index: int, text: str) -> list[str]:
    """A JSON answer as it stays on the terminal: ``parsed``, indented, else the raw text."""
    if isinstance(result, responses.Result):
        parsed, error = result.parsed, result.parse_error
    elif isinstance(result, chat.Result) and index < len(result.choices):
        parsed, error = result.choices[index].parsed, result.choices[index].parse_error
    else:
        parsed, error = None, None
    where = f"[choice {index}] " if index else ""
    if parsed is not None and error is None:
        return [where + line for line in render_json(parsed, terminal_size()[0] - 1)]
    return [where + printable(text)]


def summary_lines(result: chat.Result | completions.Result) -> list[str]:
    """Finish reasons, usage and anomalies (the status line comes separately)."""
    lines: list[str] = []
    several = len(result.choices) > 1
    for choice in result.choices:
        where = f" (choice {choice.index})" if several else ""
        reason = choice.finish_reason if choice.finish_reason else "none"
        lines.append(f"finish_reason{where}: {printable(reason)}")
        if isinstance(choice, chat.ChoiceResult):
            if choice.parse_error is not None:
                lines.append(f"structured answer{where}: {one_line(str(choice.parse_error))}")
            if choice.audio is not None:
                lines.append(
                    f"audio{where}: {audio_summary(choice.audio.data, choice.audio.transcript)}"
                )
    if result.usage is not None:
        lines.append(f"usage: {_format_usage(result.usage)}")
    lines += [f"note: {anomaly_text(anomaly)}" for anomaly in result.anomalies]
    return lines


def response_summary_lines(result: responses.Result) -> list[str]:
    """The server's status (and reason), usage and anomalies of a Responses answer."""
    status = result.response_status or "none"
    if result.incomplete_reason is not None:
        status += f" ({result.incomplete_reason})"
    lines = []
    for item in result.output:
        if item.custom_call is not None:
            lines.append(describe_custom_call(item.custom_call))
        elif item.type not in (None, "message", "reasoning", "function_call"):
            title = printable(" ".join(filter(None, (item.type, item_name(item)))))
            state = printable(item.status or ("done" if item.done else "unfinished"))
            state += " (unfinished)" if item.status and not item.done else ""
            lines.append(f"tool item {item.index}: {title}, {state}")
    if result.parse_error is not None:
        lines.append(f"structured answer: {one_line(str(result.parse_error))}")
    if result.audio is not None:
        lines.append(f"audio: {audio_summary(result.audio.data, result.audio.transcript)}")
    lines.append(f"response_status: {printable(status)}")
    if result.usage is not None:
        lines.append(f"usage: {_format_usage(result.usage)}")
    lines += [f"note: {anomaly_text(anomaly)}" for anomaly in result.anomalies]
    return lines


def message_summary_lines(result: messages.Result) -> list[str]:
    """The ``stop_reason`` (and sequence), usage and anomalies of a Messages answer."""
    reason = printable(result.stop_reason or "none")
    if result.stop_sequence is not None:
        reason += f" ({printable(json.dumps(result.stop_sequence, ensure_ascii=False))})"
    lines = [f"stop_reason: {reason}"]
    if result.usage is not None:
        lines.append(f"usage: {_format_usage(result.usage)}")
    lines += [f"note: {anomaly_text(anomaly)}" for anomaly in result.anomalies]
    return lines


def _format_usage(usage: Mapping[str, Any]) -> str:
    parts = []
    for key, value in usage.items():
        if isinstance(value, Mapping):
            continue  # *_details: --json has them
        parts.append(f"{key}={json.dumps(value, ensure_ascii=False)}")
    return printable(" ".join(parts))

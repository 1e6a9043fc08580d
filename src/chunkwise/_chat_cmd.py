"""``chunkwise chat``: stream one chat completion from a real endpoint to the terminal.

Also home of the options shared by the commands that send a request (``chat``,
``record``): where the endpoint is and which key to use, and how the request
body is built from the command line.

Output
------
The answer goes to stdout as it arrives, one flush per delta: the text,
reasoning (ANSI dim on a terminal, otherwise prefixed ``[reasoning]``),
refusals (prefixed ``[refusal]``) and each tool call once it is complete.  The
summary -- finish reasons, usage and the ``status:`` line -- goes to stderr, so
``chunkwise chat ... > answer.txt`` keeps only the answer.  ``--json`` prints
one JSON object a line on stdout instead (the same conversion as
``chunkwise inspect --json``), the last one being the terminal event.

Ctrl-C is left to trio: ``KeyboardInterrupt`` is delivered into the stream's
block, which cancels the reader and closes the socket before it propagates
out of :func:`trio.run`.  What arrived until then (:attr:`ChatStream.snapshot`)
is then reported as incomplete, and the exit status is 130.

The API key never reaches the output: it is only read from the environment
variable named by ``--api-key-env``, and every error or JSON line is passed
through :func:`~chunkwise._util.redact` in case a server quotes it back.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from collections.abc import Mapping
from typing import Any, TextIO, TypeAlias

import trio

from ._cli import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_STREAM,
    _positive_int,
    _printable,
    _status_line,
    _to_json,
    _UsageError,
)
from ._endpoint import DEFAULT_BASE_URL, Endpoint
from ._errors import ChunkwiseError, InvalidEndpoint, ToolArgumentsError
from ._events import (
    ChoiceFinished,
    ContentDelta,
    Event,
    ReasoningDelta,
    RefusalDelta,
    StreamCompleted,
    StreamFailed,
    StreamIncomplete,
    ToolCallCompleted,
    UsageReported,
)
from ._results import ChatResult, ToolCall
from ._stream import ChatStream, open_chat_stream
from ._util import redact

__all__ = [
    "add_chat_command",
    "add_endpoint_options",
    "add_request_options",
    "build_request",
    "endpoint_from_args",
    "event_to_json",
]

DEFAULT_MODEL = "gpt-4o-mini"
DEFAULT_KEY_VARIABLE = "OPENAI_API_KEY"

_DIM = "\x1b[2m"
_RESET = "\x1b[0m"

_CommandsAction: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


# -- shared options ---------------------------------------------------------------


def add_endpoint_options(parser: argparse.ArgumentParser) -> None:
    """``--base-url`` and ``--api-key-env``."""
    parser.add_argument(
        "--base-url",
        metavar="URL",
        help=(
            "the API base URL; /chat/completions is appended "
            f"(default: $OPENAI_BASE_URL, else {DEFAULT_BASE_URL})"
        ),
    )
    parser.add_argument(
        "--api-key-env",
        metavar="NAME",
        default=DEFAULT_KEY_VARIABLE,
        help=(
            "name of the environment variable holding the API key "
            f"(default: {DEFAULT_KEY_VARIABLE}); unset or empty sends no Authorization"
        ),
    )


def add_request_options(parser: argparse.ArgumentParser) -> None:
    """The options that build the request body (model, system prompt, ...)."""
    parser.add_argument(
        "--model",
        metavar="MODEL",
        default=None,
        help=f"the model (default: $CHUNKWISE_MODEL, else {DEFAULT_MODEL})",
    )
    parser.add_argument("--system", metavar="TEXT", help="a system message before the prompt")
    parser.add_argument("--max-tokens", metavar="N", type=_positive_int, help="max_tokens")
    parser.add_argument("--temperature", metavar="T", type=float, help="temperature")
    parser.add_argument(
        "--tools",
        metavar="FILE.json",
        help="a JSON list of tool definitions to send",
    )
    parser.add_argument(
        "--include-usage",
        action="store_true",
        help="ask for a usage chunk (stream_options.include_usage)",
    )


def endpoint_from_args(
    args: argparse.Namespace, environ: Mapping[str, str] | None = None
) -> Endpoint:
    """The endpoint named by ``--base-url`` / ``--api-key-env`` or the environment.

    Raises:
        _UsageError: the URL or the key cannot be used (the key is never quoted).
    """
    env = os.environ if environ is None else environ
    base_url = args.base_url if args.base_url is not None else env.get("OPENAI_BASE_URL", "")
    try:
        return Endpoint.from_env(
            {"OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": env.get(args.api_key_env, "")}
        )
    except InvalidEndpoint as exc:
        raise _UsageError(str(exc)) from None


def build_request(
    args: argparse.Namespace, prompt: str, environ: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The chat-completions request body the options describe (without ``stream``)."""
    env = os.environ if environ is None else environ
    model = args.model or env.get("CHUNKWISE_MODEL", "").strip() or DEFAULT_MODEL
    messages: list[dict[str, str]] = []
    if args.system is not None:
        messages.append({"role": "system", "content": args.system})
    messages.append({"role": "user", "content": prompt})
    request: dict[str, Any] = {"model": model, "messages": messages}
    if args.max_tokens is not None:
        request["max_tokens"] = args.max_tokens
    if args.temperature is not None:
        request["temperature"] = args.temperature
    if args.tools is not None:
        request["tools"] = _read_tools(args.tools)
    if args.include_usage:
        request["stream_options"] = {"include_usage": True}
    return request


def _read_tools(name: str) -> list[Any]:
    try:
        with open(name, "rb") as file:
            tools = json.load(file)
    except OSError as exc:
        raise _UsageError(f"cannot read {name!r}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise _UsageError(f"{name!r} is not valid JSON: {exc}") from None
    if not isinstance(tools, list) or not all(isinstance(tool, dict) for tool in tools):
        raise _UsageError(f"{name!r} must hold a JSON list of tool definitions (objects)")
    return tools


def one_line(text: str) -> str:
    """``text`` on one printable line."""
    return _printable(" ".join(text.split()))


def event_to_json(event: Event) -> dict[str, Any]:
    """``{"type": <event class>, ...its fields}``, JSON-compatible."""
    document = _to_json(event)
    assert isinstance(document, dict)
    return {"type": type(event).__name__, **document}


# -- chat -------------------------------------------------------------------------


def add_chat_command(commands: _CommandsAction) -> None:
    """Register ``chunkwise chat``."""
    chat = commands.add_parser(
        "chat",
        help="stream a chat completion from an OpenAI-compatible endpoint",
        description=(
            "Send PROMPT to an OpenAI-compatible /chat/completions endpoint and stream the "
            "answer as it arrives: text, reasoning (dimmed on a terminal, otherwise "
            "prefixed [reasoning]) and tool calls once their arguments are complete.  The "
            "summary (finish reason, usage, status line) goes to stderr.  Ctrl-C stops "
            "the stream and shows what arrived, marked incomplete."
        ),
        epilog=(
            "exit status: 0 complete, 1 incomplete, failed or an HTTP/connection error, "
            "2 bad usage, 130 interrupted"
        ),
    )
    chat.add_argument("prompt", metavar="PROMPT", help="the user message")
    add_endpoint_options(chat)
    add_request_options(chat)
    chat.add_argument(
        "--json",
        action="store_true",
        help="print the stream events, one JSON object a line, instead of text",
    )
    chat.set_defaults(handler=run_chat)


class _Session:
    """What outlives :func:`trio.run`: the stream, for its snapshot after Ctrl-C."""

    def __init__(self) -> None:
        self.stream: ChatStream | None = None
        self.result: ChatResult | None = None


def run_chat(args: argparse.Namespace) -> int:
    """The ``chat`` command: returns the exit status."""
    endpoint = endpoint_from_args(args)
    request = build_request(args, args.prompt)
    if "tools" in request and importlib.util.find_spec("jsonschema") is None:
        # The stream validates tool-call arguments against the tools' schemas.
        raise _UsageError("--tools needs the jsonschema extra: pip install 'chunkwise[jsonschema]'")
    key = endpoint.api_key
    renderer: _Renderer = (
        _JSONRenderer(sys.stdout, key) if args.json else _TextRenderer(sys.stdout, sys.stderr)
    )
    session = _Session()
    try:
        trio.run(_chat, endpoint, request, renderer, session)
    except KeyboardInterrupt:
        snapshot = session.stream.snapshot if session.stream is not None else None
        renderer.interrupted(snapshot)
        return EXIT_INTERRUPTED
    except ChunkwiseError as exc:
        message = one_line(redact(str(exc), key))
        renderer.error(exc, message)
        print(f"chunkwise chat: error: {message}", file=sys.stderr)
        return EXIT_STREAM
    assert session.result is not None
    return EXIT_OK if session.result.status == "complete" else EXIT_STREAM


async def _chat(
    endpoint: Endpoint, request: Mapping[str, Any], renderer: _Renderer, session: _Session
) -> None:
    async with open_chat_stream(endpoint, request) as stream:
        session.stream = stream
        async for event in stream:
            renderer.event(event)
        session.result = await stream.result()


class _Renderer:
    def event(self, event: Event) -> None:
        raise NotImplementedError

    def error(self, exc: ChunkwiseError, message: str) -> None:
        """A request that failed before (or instead of) streaming."""

    def interrupted(self, snapshot: ChatResult | None) -> None:
        raise NotImplementedError


class _JSONRenderer(_Renderer):
    def __init__(self, out: TextIO, key: str | None) -> None:
        self._out = out
        self._key = key

    def _write(self, document: Mapping[str, Any]) -> None:
        self._out.write(redact(json.dumps(document), self._key) + "\n")
        self._out.flush()

    def event(self, event: Event) -> None:
        self._write(event_to_json(event))

    def error(self, exc: ChunkwiseError, message: str) -> None:
        self._write({"type": "error", "error": _to_json(exc)})

    def interrupted(self, snapshot: ChatResult | None) -> None:
        self._write(
            {
                "type": "interrupted",
                "status": "incomplete",
                "result": None if snapshot is None else _to_json(snapshot),
            }
        )


class _TextRenderer(_Renderer):
    """Live text on ``out``; the summary on ``err``."""

    def __init__(self, out: TextIO, err: TextIO) -> None:
        self._out = out
        self._err = err
        self._tty = out.isatty() and not os.environ.get("NO_COLOR")
        self._mode: str | None = None  # "content", "reasoning", "refusal", "tool"
        self._choice = 0
        self._at_line_start = True

    def _write(self, text: str) -> None:
        if text:
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
        elif mode == "content" and self._mode is not None:
            self._newline()
        self._mode = mode

    def _leave(self) -> None:
        if self._mode == "reasoning" and self._tty:
            self._out.write(_RESET)
            self._newline()
        elif self._mode in ("reasoning", "refusal"):
            self._newline()

    def event(self, event: Event) -> None:
        if isinstance(event, ContentDelta):
            self._enter("content", event.choice_index)
            self._write(_printable(event.text))
        elif isinstance(event, ReasoningDelta):
            self._enter("reasoning", event.choice_index)
            self._write(_printable(event.text))
        elif isinstance(event, RefusalDelta):
            self._enter("refusal", event.choice_index)
            self._write(_printable(event.text))
        elif isinstance(event, ToolCallCompleted):
            self._enter("tool", event.choice_index)
            self._newline()
            self._write("".join(line + "\n" for line in describe_tool_call(event.call)))
        elif isinstance(event, (StreamCompleted, StreamIncomplete, StreamFailed)):
            self._finish(event.result, None)
        elif isinstance(event, (ChoiceFinished, UsageReported)):
            pass  # in the result, summarised at the end

    def _finish(self, result: ChatResult, status: str | None) -> None:
        self._leave()
        self._mode = None
        self._newline()
        self._out.flush()
        for line in summary_lines(result):
            print(line, file=self._err)
        print(status or _status_line(result), file=self._err)
        self._err.flush()

    def interrupted(self, snapshot: ChatResult | None) -> None:
        if snapshot is None:
            self._newline()
            print("status: incomplete (interrupted before the response began)", file=self._err)
            return
        status = "status: complete" if snapshot.status == "complete" else None
        self._finish(snapshot, status or "status: incomplete (interrupted)")


def describe_tool_call(call: ToolCall) -> list[str]:
    """A completed tool call: its name, then its parsed arguments or why they are unusable."""
    ident = f" ({_printable(call.id)})" if call.id else ""
    state = "" if call.finished else " (unfinished)"
    head = f"[tool call] {_printable(call.name or '(no name)')}{ident}{state}"
    try:
        arguments = call.parse_arguments()
    except ToolArgumentsError as exc:
        return [
            head,
            f"  arguments error: {one_line(str(exc))}",
            f"  raw arguments: {_printable(json.dumps(exc.raw, ensure_ascii=False))}",
        ]
    text = json.dumps(arguments, ensure_ascii=False)
    return [f"{head}: {_printable(text)}"]


def summary_lines(result: ChatResult) -> list[str]:
    """Finish reasons, usage and anomalies (the status line comes separately)."""
    lines: list[str] = []
    several = len(result.choices) > 1
    for choice in result.choices:
        where = f" (choice {choice.index})" if several else ""
        reason = choice.finish_reason if choice.finish_reason else "none"
        lines.append(f"finish_reason{where}: {_printable(reason)}")
    if result.usage is not None:
        lines.append(f"usage: {_format_usage(result.usage)}")
    for anomaly in result.anomalies:
        where = "" if anomaly.choice_index is None else f" (choice {anomaly.choice_index})"
        lines.append(f"note: {anomaly.kind}{where}: {one_line(anomaly.detail)}")
    return lines


def _format_usage(usage: Mapping[str, Any]) -> str:
    parts = []
    for key, value in usage.items():
        if isinstance(value, Mapping):
            continue  # *_details: --json has them
        parts.append(f"{key}={json.dumps(value, ensure_ascii=False)}")
    return _printable(" ".join(parts))

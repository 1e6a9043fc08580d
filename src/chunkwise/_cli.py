"""The ``chunkwise`` command line.

Every subcommand is a function ``(args) -> exit status`` registered on one
argparse parser, so new subcommands slot in beside ``inspect``.  Exit statuses
are shared by all of them: 0 the stream was complete, 1 it was incomplete or
failed, 2 bad usage or an unreadable input, 130 interrupted, 141 stdout was
closed early (as a shell reports a process killed by SIGPIPE).

``main()`` returns the status instead of raising :class:`SystemExit`, so it can
be called in-process (``chunkwise.__main__`` and the console script turn it
into the process status).
"""

from __future__ import annotations

import argparse
import enum
import json
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import attrs

from ._errors import ChunkwiseError, EventTooLarge, ToolArgumentsError
from ._parser import ChatStreamParser
from ._results import ChatResult, ChoiceResult, ToolCall
from ._sse import SSEDecoder
from ._version import __version__

__all__ = ["main", "result_to_json", "split_http_head"]

_PROG = "chunkwise"
_DEFAULT_READ_SIZE = 65536

EXIT_OK = 0
EXIT_STREAM = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141

# How much of an error's field (e.g. the offending data) the summary shows;
# --json has all of it.
_FIELD_LIMIT = 300

_Handler = Callable[[argparse.Namespace], int]


class _UsageError(Exception):
    """A problem with what the user asked for, reported in one line with status 2."""


# -- entry point ----------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    parser = _build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        # argparse exits for --help, --version and usage errors; callers of
        # main() get a status either way.
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    handler: _Handler = args.handler
    try:
        status = handler(args)
        # Flush here, so a closed pipe is noticed while we can still handle it
        # rather than at interpreter exit.
        sys.stdout.flush()
    except _UsageError as exc:
        print(f"{_PROG} {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    return status


def _silence_stdout() -> None:
    # The reader went away (e.g. ``| head``).  Python flushes stdout again at
    # exit and would print an "Exception ignored" message, so point the file
    # descriptor at devnull, as the signal-handling docs recommend.
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass  # no real file descriptor (e.g. a captured stdout): nothing to flush later


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=_PROG,
        description="Parse and inspect OpenAI-style chat-completion streams.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_inspect(commands)
    _add_chat(commands)
    _add_record(commands)
    _add_probe(commands)
    _add_serve(commands)
    _add_demo(commands)
    return parser


# -- chat, record, probe (in their own modules) ---------------------------------


def _add_chat(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from ._chat_cmd import add_chat_command

    add_chat_command(commands)


def _add_record(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from ._record import add_record_command

    add_record_command(commands)


def _add_probe(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from ._probe import add_probe_command

    add_probe_command(commands)


def _add_serve(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from ._server import add_serve_command

    add_serve_command(commands)


def _add_demo(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from ._demo import add_demo_command

    add_demo_command(commands)


# -- inspect --------------------------------------------------------------------


def _add_inspect(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    inspect = commands.add_parser(
        "inspect",
        help="parse a recorded stream and show what a client reconstructs",
        description=(
            "Parse a recorded raw chat-completion SSE body and print the reconstruction: "
            "each choice's text, reasoning, refusal and tool calls, the usage, anomalies "
            "and the stream's status.  A recording that starts with an HTTP status line "
            "and headers is accepted; the head is skipped."
        ),
        epilog=(
            "exit status: 0 complete, 1 incomplete or failed (with --sse: the body ended "
            "inside an event), 2 bad usage or unreadable FILE"
        ),
    )
    inspect.add_argument("file", metavar="FILE", help="the recorded body, or - for stdin")
    inspect.add_argument(
        "--read-size",
        metavar="N",
        type=_positive_int,
        default=_DEFAULT_READ_SIZE,
        help=f"feed the parser N bytes at a time (default {_DEFAULT_READ_SIZE})",
    )
    output = inspect.add_mutually_exclusive_group()
    output.add_argument(
        "--sse",
        action="store_true",
        help="print the server-sent events, one JSON object a line, instead",
    )
    output.add_argument("--json", action="store_true", help="print the result as one JSON document")
    inspect.set_defaults(handler=_inspect)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _inspect(args: argparse.Namespace) -> int:
    status_line, body = split_http_head(_read_input(args.file))
    if args.sse:
        return _print_sse(body, args.read_size)
    parser = ChatStreamParser()
    for piece in _pieces(body, args.read_size):
        parser.feed(piece)
    parser.end()
    result = parser.result
    if args.json:
        document = result_to_json(result)
        if status_line is not None:
            document["http_status_line"] = status_line
        # ASCII escapes keep the document valid whatever stdout's encoding is.
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
    else:
        sys.stdout.write("".join(line + "\n" for line in _describe(result, status_line)))
    return EXIT_OK if result.status == "complete" else EXIT_STREAM


def _read_input(name: str) -> bytes:
    try:
        if name != "-":
            with open(name, "rb") as file:
                return file.read()
        if sys.stdin is None:
            raise _UsageError("cannot read stdin: there is none")
        return sys.stdin.buffer.read()
    except OSError as exc:
        what = "stdin" if name == "-" else repr(name)
        raise _UsageError(f"cannot read {what}: {exc.strerror or exc}") from None


def _pieces(data: bytes, size: int) -> Iterator[memoryview]:
    view = memoryview(data)
    for start in range(0, len(view), size):
        yield view[start : start + size]


def split_http_head(data: bytes) -> tuple[str | None, bytes]:
    """Split a recording into (HTTP status line or None, body).

    A recording that starts with ``HTTP/`` holds the response head first; it
    ends at the first blank line, written CRLF CRLF or LF LF.  A head that
    never ends leaves an empty body.
    """
    if not data.startswith(b"HTTP/"):
        return None, data
    ends = [(found, len(sep)) for sep in (b"\r\n\r\n", b"\n\n") if (found := data.find(sep)) >= 0]
    head_end, sep_len = min(ends) if ends else (len(data), 0)
    status_line = data[:head_end].split(b"\n", 1)[0].rstrip(b"\r")
    # Header bytes are ISO-8859-1 in HTTP/1.1, and latin-1 never fails.
    return status_line.decode("latin-1"), data[head_end + sep_len :]


def _print_sse(body: bytes, read_size: int) -> int:
    # The same decoder settings as ChatStreamParser, so these are the events it sees.
    decoder = SSEDecoder(legacy_error_field=True)
    write = sys.stdout.write
    try:
        for piece in _pieces(body, read_size):
            for event in decoder.feed(piece):
                write(json.dumps(attrs.asdict(event)) + "\n")
        for event in decoder.end():
            write(json.dumps(attrs.asdict(event)) + "\n")
    except EventTooLarge as exc:
        sys.stdout.flush()
        print(f"{_PROG} inspect: {exc}", file=sys.stderr)
        return EXIT_STREAM
    if decoder.unterminated:
        sys.stdout.flush()
        print(
            f"{_PROG} inspect: note: the body ended inside an event, which was discarded",
            file=sys.stderr,
        )
        return EXIT_STREAM
    return EXIT_OK


# -- human-readable description -------------------------------------------------


def _describe(result: ChatResult, status_line: str | None) -> Iterator[str]:
    if status_line is not None:
        yield f"http: {_printable(status_line)}"
        yield ""
    if not result.choices:
        yield "no choices"
        yield ""
    for choice in result.choices:
        yield from _describe_choice(choice)
        yield ""
    if result.usage is None:
        yield "usage: none"
    else:
        yield "usage:"
        yield from _describe_mapping(result.usage, "  ")
    if result.anomalies:
        yield ""
        yield "anomalies:"
        for anomaly in result.anomalies:
            where = "" if anomaly.choice_index is None else f" (choice {anomaly.choice_index})"
            yield f"  - {anomaly.kind}{where}: {_printable(anomaly.detail)}"
    yield ""
    yield f"id: {_optional(result.id)}"
    yield f"model: {_optional(result.model)}"
    if result.system_fingerprint is not None:
        yield f"system_fingerprint: {_printable(result.system_fingerprint)}"
    yield f"[DONE]: {'received' if result.done_received else 'not received'}"
    if result.error is not None:
        yield from _describe_error(result.error)
    yield _status_line(result)


def _describe_choice(choice: ChoiceResult) -> Iterator[str]:
    yield f"choice {choice.index}"
    yield f"  role: {_optional(choice.role)}"
    if choice.reasoning is not None:
        yield "  reasoning:"
        yield from _block(choice.reasoning, "    ")
    if choice.content:
        yield "  content:"
        yield from _block(choice.content, "    ")
    else:
        yield "  content: (empty)"
    if choice.refusal is not None:
        yield "  refusal:"
        yield from _block(choice.refusal, "    ")
    for call in choice.tool_calls:
        yield from _describe_tool_call(call)
    if choice.logprobs:
        counts = [
            f"{key} {len(value)} tokens"
            for key, value in choice.logprobs.items()
            if isinstance(value, list)
        ]
        if counts:
            yield f"  logprobs: {', '.join(counts)}"
    if choice.finish_reason is None:
        yield "  finish_reason: none (unfinished)"
    elif not choice.finish_reason:
        yield '  finish_reason: "" (unfinished)'
    else:
        yield f"  finish_reason: {_printable(choice.finish_reason)}"


def _describe_tool_call(call: ToolCall) -> Iterator[str]:
    state = "" if call.finished else "  (unfinished)"
    yield f"  tool call {call.index}: {_optional(call.name)}{state}"
    yield f"    id: {_optional(call.id)}"
    if call.type is not None and call.type != "function":
        yield f"    type: {_printable(call.type)}"
    try:
        arguments = call.parse_arguments()
    except ToolArgumentsError as exc:
        yield f"    arguments error: {_printable(str(exc))}"
        # JSON-quoted, so an empty or whitespace-only text is visible.
        yield f"    raw arguments: {_printable(json.dumps(exc.raw, ensure_ascii=False))}"
    else:
        yield "    arguments:"
        yield from _block(json.dumps(arguments, indent=2, ensure_ascii=False), "      ")


def _describe_mapping(mapping: Mapping[Any, Any], indent: str) -> Iterator[str]:
    for key, value in mapping.items():
        if isinstance(value, Mapping) and value:
            yield f"{indent}{_printable(str(key))}:"
            yield from _describe_mapping(value, indent + "  ")
        else:
            text = json.dumps(value, ensure_ascii=False, default=repr)
            yield f"{indent}{_printable(str(key))}: {_printable(text)}"


def _describe_error(error: ChunkwiseError) -> Iterator[str]:
    yield f"error: {type(error).__name__}"
    for key, value in _exception_fields(error).items():
        if key in ("message", "body") or value is None:
            continue  # the message is on the status line; the body repeats the fields
        if isinstance(value, str):
            text = value
        elif isinstance(value, bytes):
            text = value.decode("utf-8", "replace")
        else:
            text = json.dumps(_to_json(value), ensure_ascii=False)
        if len(text) > _FIELD_LIMIT:
            text = text[:_FIELD_LIMIT] + "..."
        yield f"  {key}: {_printable(text)}"


def _status_line(result: ChatResult) -> str:
    if result.status == "failed":
        message = str(result.error) if result.error is not None else "unknown error"
        return f"status: failed: {_printable(message)}"
    if result.status == "incomplete":
        return f"status: incomplete ({result.reason})"
    return f"status: {result.status}"


def _block(text: str, indent: str) -> Iterator[str]:
    for line in text.split("\n"):
        yield f"{indent}{_printable(line)}" if line else ""


def _optional(value: str | None) -> str:
    return "(none)" if value is None else _printable(value)


# C0 and C1 controls except tab, plus DEL: a recording is untrusted input, and
# raw escape sequences would drive the terminal instead of being shown.
_CONTROLS = {
    code: f"\\x{code:02x}"
    for code in (*range(0x00, 0x20), *range(0x7F, 0xA0))
    if code not in (0x09, 0x0A)
}


def _printable(text: str) -> str:
    return text.translate(_CONTROLS)


# -- JSON -------------------------------------------------------------------------


def result_to_json(result: ChatResult) -> dict[str, Any]:
    """Convert a :class:`ChatResult` into JSON-compatible data.

    attrs classes become objects of their public fields; exceptions become
    ``{"exception": class name, "message": ..., ...fields}`` (``"exception"``
    rather than ``"type"``, which a :class:`StreamError` uses for the
    server's error type); enums become their values.  Each tool call also has
    ``"parsed_arguments"`` when its arguments are valid, and a non-null
    ``"error"`` when they are not.
    """
    document = _to_json(result)
    assert isinstance(document, dict)
    return document


def _to_json(value: Any) -> Any:
    # Enums first: IncompleteReason is also a str.
    if isinstance(value, enum.Enum):
        return _to_json(value.value)
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, ToolCall):
        return _tool_call_to_json(value)
    if attrs.has(type(value)):
        return {
            field.name: _to_json(getattr(value, field.name))
            for field in attrs.fields(type(value))
            if not field.name.startswith("_")
        }
    if isinstance(value, BaseException):
        return _exception_to_json(value)
    if isinstance(value, Mapping):
        return {str(key): _to_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_to_json(item) for item in value]
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    return repr(value)


def _tool_call_to_json(call: ToolCall) -> dict[str, Any]:
    document: dict[str, Any] = {
        field.name: _to_json(getattr(call, field.name))
        for field in attrs.fields(ToolCall)
        if not field.name.startswith("_")
    }
    try:
        # Present only when valid: JSON null is itself a valid parse.
        document["parsed_arguments"] = call.parse_arguments()
    except ToolArgumentsError as exc:
        document["error"] = _exception_to_json(exc)
    return document


def _exception_to_json(exc: BaseException) -> dict[str, Any]:
    document: dict[str, Any] = {"exception": type(exc).__name__, "message": str(exc)}
    for key, value in _exception_fields(exc).items():
        if key != "message":
            document[key] = _to_json(value)
    return document


def _exception_fields(exc: BaseException) -> dict[str, Any]:
    return {key: value for key, value in vars(exc).items() if not key.startswith("_")}

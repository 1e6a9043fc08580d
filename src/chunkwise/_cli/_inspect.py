"""``chunkwise inspect``: parse a recorded stream and show what a client reconstructs.

The recording is a raw SSE body, optionally preceded by the HTTP head that
``chunkwise record`` writes.  The summary, ``--json`` and ``--sse`` views all
come from the same parse: :class:`~chunkwise.ChatStreamParser` fed the body in
``--read-size`` pieces (so a recording can be replayed at any split).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Mapping
from typing import Any

import attrs

from .._convert import exception_fields, result_to_json, to_json
from .._errors import ChunkwiseError, EventTooLarge
from .._parser import ChatStreamParser
from .._results import ChatResult, ChoiceResult
from .._sse import SSEDecoder
from ._common import (
    EXIT_OK,
    EXIT_STREAM,
    PROG,
    CommandsAction,
    describe_tool_call,
    positive_int,
    printable,
    read_input,
    split_http_head,
    status_text,
)

__all__ = ["add_inspect_command", "run_inspect"]

_DEFAULT_READ_SIZE = 65536

# How much of an error's field (e.g. the offending data) the summary shows;
# --json has all of it.
_FIELD_LIMIT = 300


def add_inspect_command(commands: CommandsAction) -> None:
    """Register ``chunkwise inspect``."""
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
        type=positive_int,
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
    inspect.set_defaults(handler=run_inspect)


def run_inspect(args: argparse.Namespace) -> int:
    """``chunkwise inspect``: returns the exit status."""
    status_line, body = split_http_head(read_input(args.file))
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


def _pieces(data: bytes, size: int) -> Iterator[memoryview]:
    view = memoryview(data)
    for start in range(0, len(view), size):
        yield view[start : start + size]


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
        print(f"{PROG} inspect: {exc}", file=sys.stderr)
        return EXIT_STREAM
    if decoder.unterminated:
        sys.stdout.flush()
        print(
            f"{PROG} inspect: note: the body ended inside an event, which was discarded",
            file=sys.stderr,
        )
        return EXIT_STREAM
    return EXIT_OK


# -- human-readable description -------------------------------------------------


def _describe(result: ChatResult, status_line: str | None) -> Iterator[str]:
    if status_line is not None:
        yield f"http: {printable(status_line)}"
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
            yield f"  - {anomaly.kind}{where}: {printable(anomaly.detail)}"
    yield ""
    yield f"id: {_optional(result.id)}"
    yield f"model: {_optional(result.model)}"
    if result.system_fingerprint is not None:
        yield f"system_fingerprint: {printable(result.system_fingerprint)}"
    yield f"[DONE]: {'received' if result.done_received else 'not received'}"
    if result.error is not None:
        yield from _describe_error(result.error)
    yield f"status: {status_text(result)}"


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
        yield from ("  " + line for line in describe_tool_call(call))
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
        yield f"  finish_reason: {printable(choice.finish_reason)}"


def _describe_mapping(mapping: Mapping[Any, Any], indent: str) -> Iterator[str]:
    for key, value in mapping.items():
        if isinstance(value, Mapping) and value:
            yield f"{indent}{printable(str(key))}:"
            yield from _describe_mapping(value, indent + "  ")
        else:
            text = json.dumps(value, ensure_ascii=False, default=repr)
            yield f"{indent}{printable(str(key))}: {printable(text)}"


def _describe_error(error: ChunkwiseError) -> Iterator[str]:
    yield f"error: {type(error).__name__}"
    for key, value in exception_fields(error).items():
        if key in ("message", "body") or value is None:
            continue  # the message is on the status line; the body repeats the fields
        if isinstance(value, str):
            text = value
        elif isinstance(value, bytes):
            text = value.decode("utf-8", "replace")
        else:
            text = json.dumps(to_json(value), ensure_ascii=False)
        if len(text) > _FIELD_LIMIT:
            text = text[:_FIELD_LIMIT] + "..."
        yield f"  {key}: {printable(text)}"


def _block(text: str, indent: str) -> Iterator[str]:
    for line in text.split("\n"):
        yield f"{indent}{printable(line)}" if line else ""


def _optional(value: str | None) -> str:
    return "(none)" if value is None else printable(value)

"""What every command shares: exit statuses, usage errors, argument types, text.

Exit statuses are shared by all commands: 0 the stream was complete, 1 it was
incomplete or failed (or the request failed), 2 bad usage or an unreadable
input, 130 interrupted, 141 stdout was closed early (as a shell reports a
process killed by SIGPIPE).

Everything that turns received text into terminal output goes through
:func:`printable`: a recording or a server's answer is untrusted input, and
raw escape sequences would drive the terminal instead of being shown.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable
from typing import TypeAlias

from .._errors import ToolArgumentsError
from .._results import ChatResult, ToolCall

__all__ = [
    "EXIT_BROKEN_PIPE",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_STREAM",
    "EXIT_USAGE",
    "PROG",
    "CommandsAction",
    "UsageError",
    "describe_tool_call",
    "error_status",
    "non_negative_int",
    "one_line",
    "port",
    "positive_int",
    "printable",
    "read_input",
    "seconds",
    "split_http_head",
    "status_text",
]

PROG = "chunkwise"

EXIT_OK = 0
EXIT_STREAM = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141

CommandsAction: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


class UsageError(Exception):
    """A problem with what the user asked for, reported in one line with status 2."""


# -- argument types ------------------------------------------------------------


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None


def positive_int(text: str) -> int:
    value = _integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def non_negative_int(text: str) -> int:
    value = _integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {value}")
    return value


def port(text: str) -> int:
    value = non_negative_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"must be a port number (0-65535), not {value}")
    return value


def error_status(text: str) -> int:
    value = _integer(text)
    if not 400 <= value <= 599:
        raise argparse.ArgumentTypeError(f"must be an HTTP error status (400-599), not {value}")
    return value


def seconds(low: float, high: float, *, allow_low: bool = True) -> Callable[[str], float]:
    """An argument type for a number of seconds in ``[low, high]`` (``(low, high]``).

    NaN and infinity are refused whatever the bounds.
    """

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        above = value >= low if allow_low else value > low
        if not (above and value <= high) or math.isnan(value):
            opening = "[" if allow_low else "("
            raise argparse.ArgumentTypeError(
                f"must be a number of seconds in {opening}{low:g}, {high:g}], not {text}"
            )
        return value

    parse.__name__ = "seconds"  # argparse names the type in its messages
    return parse


# -- input ---------------------------------------------------------------------


def read_input(name: str) -> bytes:
    """The bytes of file ``name``, or of stdin for ``-``."""
    try:
        if name != "-":
            with open(name, "rb") as file:
                return file.read()
        if sys.stdin is None:
            raise UsageError("cannot read stdin: there is none")
        return sys.stdin.buffer.read()
    except OSError as exc:
        what = "stdin" if name == "-" else repr(name)
        raise UsageError(f"cannot read {what}: {exc.strerror or exc}") from None


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


# -- text ----------------------------------------------------------------------

# C0 and C1 controls except tab and newline, plus DEL.
_CONTROLS = {
    code: f"\\x{code:02x}"
    for code in (*range(0x00, 0x20), *range(0x7F, 0xA0))
    if code not in (0x09, 0x0A)
}


def printable(text: str) -> str:
    """``text`` with control characters (except tab and newline) shown as escapes."""
    return text.translate(_CONTROLS)


def one_line(text: str) -> str:
    """``text`` on one printable line."""
    return printable(" ".join(text.split()))


def status_text(result: ChatResult) -> str:
    """``complete``, ``incomplete (<reason>)`` or ``failed: <error>``, on one line."""
    if result.status == "failed":
        message = str(result.error) if result.error is not None else "unknown error"
        return f"failed: {one_line(message)}"
    if result.status == "incomplete":
        return f"incomplete ({result.reason})"
    return result.status


def describe_tool_call(call: ToolCall) -> list[str]:
    """A tool call: its name and id, then its parsed arguments or why they are unusable."""
    ident = f" ({printable(call.id)})" if call.id else ""
    state = "" if call.finished else " (unfinished)"
    head = f"[tool call {call.index}] {printable(call.name or '(no name)')}{ident}{state}"
    try:
        arguments = call.parse_arguments()
    except ToolArgumentsError as exc:
        return [
            head,
            f"  arguments error: {one_line(str(exc))}",
            # JSON-quoted, so an empty or whitespace-only text is visible.
            f"  raw arguments: {printable(json.dumps(exc.raw, ensure_ascii=False))}",
        ]
    return [f"{head}: {printable(json.dumps(arguments, ensure_ascii=False))}"]

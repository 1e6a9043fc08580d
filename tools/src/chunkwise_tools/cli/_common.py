"""What every command shares: exit statuses, usage errors, argument types, text.

Exit statuses are shared by all commands: 0 the stream was complete, 1 it was
incomplete or failed (or the request failed), 2 bad usage or an unreadable
input, 3 ``probe`` could not start (the endpoint unreachable, a wrong URL or
key: nothing said about its streaming), 130 interrupted, 141 stdout was closed
early (as a shell reports a process killed by SIGPIPE).

Everything that turns received text into terminal output goes through
:func:`printable`: a recording or a server's answer is untrusted input, and
raw escape sequences would drive the terminal instead of being shown.

JSON output (``--json``, ``--sse``) is UTF-8 and unescaped, like the text
output: :func:`prepare_json_output` switches a stdout in another encoding to
UTF-8 (RFC 8259 requires UTF-8 between systems), and :func:`json_text` escapes
only when that was impossible.  Text output on a stdout that cannot encode a
character shows it as an escape instead of failing (:func:`tolerate_stdout`).

A request that failed is explained by :func:`describe_failure`: the library's
error says what went wrong and what it suggests (no key was sent, did you mean
``<base>/v1``?, see :func:`chunkwise._net.http.status_hint`); the command line adds
which of its options or variables to change.

:func:`probe_exchange` is the one probe request (``probe`` of either API):
its status, head, timings, raw body and what a parser makes of it.
"""

from __future__ import annotations

import argparse
import codecs
import gc
import json
import math
import re
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any, Generic, Literal, TypeAlias, TypeVar

import attrs
import trio

from chunkwise import (
    Anomaly,
    ChunkwiseError,
    Endpoint,
    HTTPStatusError,
    ToolArgumentsError,
    ToolCall,
    chat,
    completions,
    messages,
    responses,
)
from chunkwise.errors import UnexpectedContentType
from chunkwise.lowlevel import (
    NO_JSONSCHEMA,
    StreamParser,
    encode_request,
    open_http_response,
    redact,
    status_hint,
)
from chunkwise.types import Headers

from ..server._pacing import TIMES_SUFFIX, RecordedTimes, TimesFormatError
from ._commands import (
    EXIT_BROKEN_PIPE,
    EXIT_INTERRUPTED,
    EXIT_NOT_PROBED,
    EXIT_OK,
    EXIT_STREAM,
    EXIT_USAGE,
    PROG,
)

__all__ = [
    "COLLECTOR_THRESHOLDS",
    "EXIT_BROKEN_PIPE",
    "EXIT_INTERRUPTED",
    "EXIT_NOT_PROBED",
    "EXIT_OK",
    "EXIT_STREAM",
    "EXIT_USAGE",
    "INSTALL_JSONSCHEMA",
    "PROG",
    "CommandsAction",
    "Exchange",
    "Failure",
    "RecordedHead",
    "UsageError",
    "anomaly_text",
    "comments_cell",
    "describe_custom_call",
    "describe_failure",
    "describe_tool_call",
    "error_status",
    "exchange_summary",
    "item_name",
    "json_text",
    "list_cell",
    "ms_cell",
    "non_negative_int",
    "one_line",
    "parse_http_head",
    "port",
    "positive_int",
    "prepare_json_output",
    "print_failure",
    "printable",
    "probe_exchange",
    "quiet_collector",
    "read_input",
    "read_times",
    "render_probe_report",
    "request_lines",
    "seconds",
    "setup_failure",
    "split_http_head",
    "status_text",
    "tolerate_stdout",
    "yes_no",
]

#: How to get tool-argument validation, as the docs say it (from a clone).
INSTALL_JSONSCHEMA = "pip install -e '.[jsonschema]'"

CommandsAction: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


class UsageError(Exception):
    """A problem with what the user asked for, reported in one line with status 2."""


# -- argument types ------------------------------------------------------------


#: The collector's thresholds while ``serve`` or ``bench`` runs: Python's own
#: for the young generations, a tenth as many full collections (see quiet_collector).
COLLECTOR_THRESHOLDS = (700, 10, 100)


def quiet_collector() -> None:
    """Keep the garbage collector's pauses short, for the commands whose timing is their point.

    For ``serve`` and ``bench``, once set up, just before their run:

    - everything allocated so far (modules, scenarios, plans) lives as long as
      the process: :func:`gc.freeze` leaves it out of every later pass.  A full
      collection walking it paused a 300-stream ``bench`` for 22 to 31 ms, long
      enough for the next token of every stream to arrive before the last one
      was read;
    - a full collection still walks every live object of every stream in
      flight (6 to 25 ms at 300 streams, every 2 to 3 seconds), so the oldest
      generation is collected a tenth as often (:data:`COLLECTOR_THRESHOLDS`).
      A stream's objects are freed by reference counting (no cycles: see
      ``tests/sansio/test_timing_figures.py``), so what waits longer for a full
      collection is little.
    """
    gc.freeze()
    gc.set_threshold(*COLLECTOR_THRESHOLDS)


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


def read_times(name: str) -> RecordedTimes | None:
    """The timing sidecar of recording ``name`` (``name.times.json``), or ``None`` if absent.

    Raises:
        UsageError: the sidecar exists but cannot be read, or is not a times
            document this version reads.
    """
    if name == "-":
        return None
    path = name + TIMES_SUFFIX
    try:
        with open(path, "rb") as file:
            data = file.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UsageError(f"cannot read {path!r}: {exc.strerror or exc}") from None
    try:
        return RecordedTimes.loads(data)
    except TimesFormatError as exc:
        raise UsageError(f"{path!r} is not a timing sidecar: {exc}") from None


@attrs.frozen
class RecordedHead:
    """The HTTP response head at the start of a recording (as ``chunkwise record`` writes).

    ``status_code`` is ``None`` when the status line has no three-digit code.
    """

    status_line: str
    status_code: int | None
    reason: str
    headers: Headers


_STATUS_LINE_RE = re.compile(r"HTTP/\S+ +(\d{3})(?: +(.*))?")


def parse_http_head(data: bytes) -> tuple[RecordedHead | None, bytes]:
    """Split a recording into its HTTP head (or ``None``) and its body.

    A recording that starts with ``HTTP/`` holds the response head first; it
    ends at the first blank line, written CRLF CRLF or LF LF.  A head that
    never ends leaves an empty body.  Header lines without a colon are skipped.
    """
    if not data.startswith(b"HTTP/"):
        return None, data
    ends = [(found, len(sep)) for sep in (b"\r\n\r\n", b"\n\n") if (found := data.find(sep)) >= 0]
    head_end, sep_len = min(ends) if ends else (len(data), 0)
    first, *lines = (line.rstrip(b"\r") for line in data[:head_end].split(b"\n"))
    # Header bytes are ISO-8859-1 in HTTP/1.1, and latin-1 never fails.
    status_line = first.decode("latin-1")
    match = _STATUS_LINE_RE.fullmatch(status_line)
    fields = [
        (name.strip(), value.strip())
        for name, colon, value in (line.partition(b":") for line in lines)
        if colon and name.strip()
    ]
    head = RecordedHead(
        status_line=status_line,
        status_code=int(match.group(1)) if match else None,
        reason=(match.group(2) or "") if match else "",
        headers=Headers(fields),
    )
    return head, data[head_end + sep_len :]


def split_http_head(data: bytes) -> tuple[str | None, bytes]:
    """Split a recording into (HTTP status line or None, body); see :func:`parse_http_head`."""
    head, body = parse_http_head(data)
    return (None if head is None else head.status_line), body


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


def anomaly_text(anomaly: Anomaly) -> str:
    """``kind (choice N) (×count): detail``, on one printable line, for every command."""
    where = "" if anomaly.choice_index is None else f" (choice {anomaly.choice_index})"
    times = "" if anomaly.count == 1 else f" (×{anomaly.count})"
    return f"{anomaly.kind}{where}{times}: {one_line(anomaly.detail)}"


def status_text(
    result: chat.Result | responses.Result | completions.Result | messages.Result,
) -> str:
    """``complete``, ``incomplete (<reason>)`` or ``failed: <error>``, on one line.

    A Responses answer the server itself called incomplete also names the
    server's reason (``incomplete (reported by the server: max_output_tokens)``).
    """
    if result.status == "failed":
        message = str(result.error) if result.error is not None else "unknown error"
        return f"failed: {one_line(message)}"
    if result.status == "incomplete":
        detail = result.incomplete_reason if isinstance(result, responses.Result) else None
        return f"incomplete ({result.reason}{': ' + one_line(detail) if detail else ''})"
    return result.status


def describe_tool_call(call: ToolCall) -> list[str]:
    """A tool call: its name and id, then its parsed arguments or why they are unusable.

    A Responses :class:`~chunkwise.responses.FunctionCall` is shown as a ``function
    call`` with its ``call_id``, the id the next request answers with (its
    item id is in ``--json``); a chat choice's legacy ``function_call`` (one a
    choice, no id) as ``[function_call]``.
    """
    if isinstance(call, responses.FunctionCall):
        kind, ident_value = f"function call {call.index}", call.call_id or call.id
    elif call.type == "function_call":
        kind, ident_value = "function_call", call.id
    else:
        kind, ident_value = f"tool call {call.index}", call.id
    ident = f" ({printable(ident_value)})" if ident_value else ""
    state = "" if call.finished else " (unfinished)"
    if call.validation_skipped == NO_JSONSCHEMA:
        state += f" (not validated: {NO_JSONSCHEMA})"
    head = f"[{kind}] {printable(call.name or '(no name)')}{ident}{state}"
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


def describe_custom_call(call: responses.CustomToolCall) -> str:
    """``[custom tool call 0] apply_patch (call_id), finished``: its input is shown apart."""
    ident = f" ({printable(call.call_id)})" if call.call_id else ""
    state = "finished" if call.finished else "unfinished"
    return f"[custom tool call {call.index}] {printable(call.name or '(no name)')}{ident}, {state}"


def item_name(item: responses.OutputItem) -> str | None:
    """The ``name`` a Responses tool item was sent with (an MCP call's tool...), or None."""
    name = item.data.get("name") if item.data is not None else None
    return name if isinstance(name, str) else None


# -- JSON documents ----------------------------------------------------------------


# -- probe table cells (both probes) ------------------------------------------------


def yes_no(value: bool | None) -> str:
    """A probe table cell: yes, no, or unknown."""
    return "unknown" if value is None else "yes" if value else "no"


def ms_cell(value: float | None) -> str:
    """A probe table cell: milliseconds, or - when not measured."""
    return "-" if value is None else f"{value:.0f} ms"


def comments_cell(comments: Mapping[str, Any] | None) -> str:
    """A probe table cell: the SSE comments seen (count and examples)."""
    if comments is None:
        return "unknown"
    if not comments["count"]:
        return "none"
    examples = ", ".join(json.dumps(e, ensure_ascii=False) for e in comments["examples"])
    return f"yes ({comments['count']}, e.g. {examples})"


def list_cell(values: list[str] | None, empty: str) -> str:
    """A probe table cell: the values seen; ``unknown`` when nothing could be seen (``None``)."""
    if values is None:
        return "unknown"
    return ", ".join(values) or empty


def render_probe_report(what: str, rows: list[tuple[str, str]], findings: Mapping[str, Any]) -> str:
    """A probe's human-readable report: its table, the problems, then each request's outcome."""
    width = max(len(label) for label, _ in rows)
    lines = [f"probe of {findings['base_url']} ({what})", ""]
    lines += [f"{label:<{width}}  {one_line(value)}" for label, value in rows]
    if findings["problems"]:
        lines += ["", "problems:"]
        lines += [f"  - {one_line(problem)}" for problem in findings["problems"]]
    lines += ["", "requests:", *request_lines(findings["requests"])]
    return "\n".join(lines)


def request_lines(requests: list[dict[str, Any]]) -> list[str]:
    """Each probe request's outcome (:func:`exchange_summary`), numbered, with its hint."""
    lines = []
    for number, request in enumerate(requests, 1):
        status = request["status_code"]
        parts = [f"HTTP {status}" if status is not None else "no response"]
        if request["stream_status"] is not None:
            parts.append(request["stream_status"])
        if request["error"]:
            if request["error"].startswith(f"{parts[0]}:"):
                parts.pop(0)  # the error names the status itself
            parts.append(request["error"])
        lines.append(f"  {number}. {request['label']}: {one_line(', '.join(parts))}")
        if request["hint"]:
            lines.append(f"     hint: {one_line(request['hint'])}")
    return lines


#: Statuses that refuse the request itself (key, URL, rate), whatever it asked for.
_REFUSED = (401, 403, 404, 429)


def setup_failure(findings: Mapping[str, Any]) -> Failure | None:
    """Why a probe could not start, when it could not: nothing streamed, and the first
    request got no answer or one refusing any request (a wrong URL or key, a rate limit),
    which says nothing about the endpoint's streaming."""
    first, *_ = findings["requests"]
    if any(r["stream_status"] is not None for r in findings["requests"]):
        return None
    if first["status_code"] is not None and first["status_code"] not in _REFUSED:
        return None
    return Failure(message=first["error"] or "no response", hint=first["hint"])


# -- failures --------------------------------------------------------------------


@attrs.frozen
class Failure:
    """A failed request explained: the error on one line, and what may fix it."""

    message: str
    hint: str | None = None


def describe_failure(exc: ChunkwiseError, endpoint: Endpoint, key_variable: str) -> Failure:
    """``exc`` on one line (the key masked), with a hint when the cause is a likely slip.

    The library decides what a status suggests (:func:`~chunkwise._net.http.status_hint`,
    also for an error rebuilt from a recording); the hint says it in the
    command's terms: a 401 or 403 when no key was sent names the unset
    variable, a 404 from a base URL without a version segment the
    ``--base-url`` to try.
    """
    message = one_line(redact(str(exc), endpoint.api_key))
    hint = None
    if isinstance(exc, HTTPStatusError):
        suggests = status_hint(exc.status_code, endpoint)
        if exc.status_code in (401, 403) and not suggests.api_key_sent:
            hint = (
                f"no API key was sent, because ${key_variable} is unset or empty "
                "(set it, or name another variable with --api-key-env)"
            )
        elif suggests.suggested_base_url is not None:
            hint = f"try --base-url {printable(suggests.suggested_base_url)}"
    return Failure(message=message, hint=hint)


def print_failure(failure: Failure, prefix: str) -> None:
    """``failure`` on stderr: ``<prefix><message>``, then ``hint: <hint>`` if there is one."""
    print(f"{prefix}{failure.message}", file=sys.stderr)
    if failure.hint is not None:
        print(f"hint: {failure.hint}", file=sys.stderr)


# -- output encodings ------------------------------------------------------------


def _is_utf8(encoding: str | None) -> bool:
    if encoding is None:
        return True  # a text buffer such as io.StringIO takes any character
    try:
        return codecs.lookup(encoding).name == "utf-8"
    except LookupError:
        return False


def tolerate_stdout() -> None:
    """Let text output show what stdout's encoding cannot hold as escapes, not fail."""
    stdout = sys.stdout
    if stdout is not None and not _is_utf8(getattr(stdout, "encoding", None)):
        reconfigure = getattr(stdout, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")


def prepare_json_output() -> None:
    """Make stdout UTF-8, the encoding of JSON between systems, if it is not already."""
    stdout = sys.stdout
    if stdout is not None and not _is_utf8(getattr(stdout, "encoding", None)):
        reconfigure = getattr(stdout, "reconfigure", None)
        if reconfigure is not None:
            stdout.flush()
            reconfigure(encoding="utf-8", errors="strict")


def json_text(document: Any, *, indent: int | None = None) -> str:
    """``document`` as JSON text for stdout: unescaped UTF-8, like the text output.

    Escapes non-ASCII only when stdout is in another encoding and could not be
    switched to UTF-8 (:func:`prepare_json_output`): the text stays valid JSON.
    """
    ascii_only = not _is_utf8(getattr(sys.stdout, "encoding", None))
    return json.dumps(document, ensure_ascii=ascii_only, indent=indent)


# -- one probe request -------------------------------------------------------------

R = TypeVar("R")

# The endpoint's connect and idle timeouts are the time limit too, and their
# errors say where the time went (the TCP connect, the TLS handshake, a silent
# server); the overall limit of a request is checked this much later, so that
# they win a tie.
_OVERALL_SLACK = 0.25

#: Raw bytes kept per response for the wire analysis.
_MAX_BODY = 8 * 1024 * 1024
#: Seconds the rest of a body is read for once its stream ended (see probe_exchange).
_TAIL_GRACE = 1.0


@attrs.define
class Exchange(Generic[R]):
    """One probe request and what came back."""

    label: str
    status_code: int | None = None
    content_type: str | None = None
    error: str | None = None  # one line: the server's message, or what went wrong
    hint: str | None = None  # what may fix it (see describe_failure)
    ttfb_ms: float | None = None
    first_token_ms: float | None = None
    body: bytearray = attrs.field(factory=bytearray)
    result: R | None = None

    @property
    def streamed(self) -> bool:
        """A 2xx event stream arrived (whatever it contained)."""
        return self.result is not None


async def probe_exchange(
    endpoint: Endpoint,
    request: Mapping[str, Any],
    label: str,
    time_limit: float,
    key_variable: str,
    *,
    path: str,
    parser: StreamParser[R],
    first_token: tuple[type[Any], ...],
    auth: Literal["bearer", "anthropic"] = "bearer",
) -> Exchange[R]:
    """POST ``request`` (streamed) to ``path``; read the answer with ``parser`` until it ends.

    ``first_token`` are the event classes whose first arrival is the time to
    first token; ``auth`` how the key is sent (the API's ``auth``).  Never
    raises for what the server does: the error is kept.
    """
    exchange: Exchange[R] = Exchange(label=label)
    body = encode_request(request)
    start = time.perf_counter()

    def elapsed() -> float:
        return round((time.perf_counter() - start) * 1000, 1)

    try:
        with trio.fail_after(time_limit + _OVERALL_SLACK):
            async with open_http_response(endpoint, body, path=path, auth=auth) as response:
                exchange.ttfb_ms = elapsed()
                exchange.status_code = response.status_code
                exchange.content_type = response.headers.get("content-type")
                exchange.result = parser.result
                while not parser.finished:
                    data = await response.receive_some()
                    if not data:
                        break
                    if len(exchange.body) < _MAX_BODY:
                        exchange.body += data
                    for event in parser.feed(data):
                        if exchange.first_token_ms is None and isinstance(event, first_token):
                            exchange.first_token_ms = elapsed()
                # What follows the terminal event (a Responses stream's [DONE], or
                # anything after chat's) is part of what the server does: read the
                # rest of the body too, briefly, without parsing it.
                with trio.move_on_after(_TAIL_GRACE):
                    while len(exchange.body) < _MAX_BODY and (
                        data := await response.receive_some()
                    ):
                        exchange.body += data
    except ChunkwiseError as exc:
        if isinstance(exc, HTTPStatusError):
            exchange.status_code = exc.status_code
        elif isinstance(exc, UnexpectedContentType):
            exchange.status_code = exc.status_code
            exchange.content_type = exc.content_type
            exchange.body += exc.body_start
        failure = describe_failure(exc, endpoint, key_variable)
        exchange.error = failure.message
        exchange.hint = failure.hint
    except trio.TooSlowError:
        exchange.error = f"no complete response within {time_limit:g} s"
    if exchange.result is not None:
        parser.end()
        exchange.result = parser.result
    return exchange


def exchange_summary(exchange: Exchange[Any]) -> dict[str, Any]:
    """One request of a probe as JSON-compatible data (the findings' ``requests``)."""
    return {
        "label": exchange.label,
        "status_code": exchange.status_code,
        "content_type": exchange.content_type,
        "stream_status": None if exchange.result is None else exchange.result.status,
        "error": exchange.error,
        "hint": exchange.hint,
        "ttfb_ms": exchange.ttfb_ms,
        "first_token_ms": exchange.first_token_ms,
    }

"""``chunkwise inspect``: parse a recorded stream and show what a client reconstructs.

The recording is a raw SSE body, optionally preceded by the HTTP head that
``chunkwise record`` writes.  The summary, ``--json`` and ``--sse`` views all
come from the same parse: :class:`~chunkwise.chat.Parser` (or
:class:`~chunkwise.responses.Parser`, :class:`~chunkwise.completions.Parser`
or :class:`~chunkwise.messages.Parser`) fed the body in ``--read-size``
pieces (so a recording can be replayed at any split).

Which API recorded the stream is read from the stream itself
(:func:`detect_api`), since a recording keeps no request; ``--api`` overrides
it.  When the file looks like another API's stream, a note on stderr says
so (and that every event was ignored, when nothing was reconstructed), since
the summary of a stream read with the wrong parser is just an empty one.

Two recordings are not streams, and say so rather than passing for an empty
one: a non-2xx response (its result is ``failed`` with the
:class:`~chunkwise.HTTPStatusError` the client would have raised, built by
the same function from the recorded head and body), and a file in which no
server-sent event is found at all (an HTML page, a JSON document).

When ``FILE.times.json`` (the timing sidecar ``chunkwise record`` writes) is
beside ``FILE``, a timeline follows the summary (``--json``: a ``timeline``
member): the body is parsed a second time, read by read as recorded, with a
:class:`~chunkwise._core.timings.TimingRecorder` whose clock is the recorded
times, so every figure (time to first token, the gap statistics) has the very
definition a live stream's ``result.timings`` has.  The longest stalls
(gaps between reads carrying output) are listed with where in the answer's
text they fell.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import attrs

from chunkwise import (
    ChunkwiseError,
    HTTPStatusError,
    SSEDecoder,
    Timings,
    chat,
    completions,
    messages,
    responses,
)
from chunkwise.errors import EventTooLarge
from chunkwise.lowlevel import StreamParser, Timed, TimingRecorder, http_status_error
from chunkwise.types import DEFAULT_MAX_EVENT_SIZE

from .._convert import exception_fields, to_json
from ..server._pacing import TIMES_SUFFIX, RecordedTimes
from ._audio import add_audio_options, audio_summary, decode_base64, save_audio
from ._commands import COMMANDS
from ._common import (
    EXIT_OK,
    EXIT_STREAM,
    PROG,
    CommandsAction,
    RecordedHead,
    anomaly_text,
    describe_custom_call,
    describe_tool_call,
    item_name,
    json_text,
    one_line,
    parse_http_head,
    positive_int,
    prepare_json_output,
    printable,
    read_input,
    read_times,
    status_text,
)
from ._options import COMMAND_APIS, ApiName, api_of_event

__all__ = ["add_inspect_command", "detect_api", "run_inspect"]

Api = ApiName
Result = chat.Result | responses.Result | completions.Result | messages.Result

_DEFAULT_READ_SIZE = 65536

# How much of a body that holds no event is quoted.
_PREVIEW = 60

# How much of an error's field (e.g. the offending data) the summary shows;
# --json has all of it.
_FIELD_LIMIT = 300


def add_inspect_command(commands: CommandsAction) -> None:
    """Register ``chunkwise inspect``."""
    inspect = commands.add_parser(
        "inspect",
        help=COMMANDS["inspect"],
        description=(
            "Parse a recorded raw SSE body (chat completions, Responses API, legacy "
            "completions or Anthropic's Messages, told apart by its events) and print the "
            "reconstruction: each choice's (output item's, content block's) "
            "text, reasoning, refusal and tool or function calls, the usage, anomalies "
            "and the stream's status.  A recording that starts with an HTTP status line "
            "and headers (as 'chunkwise record' writes) is accepted; a non-2xx status "
            "shows the server's error, as the client would have raised it.  When "
            "FILE.times.json (written by 'chunkwise record') is beside FILE, a timeline "
            "follows: time to first byte and token, the gaps between reads carrying output "
            "(mean, p50, p90, p99, max) and the longest stalls, with where in the text "
            "they fell.  Responses tool items show their progress, their input (custom "
            "tools, MCP arguments, code, shell commands, patches) and partial images; "
            "audio shows its size and transcript; chat also shows the legacy function_call "
            "and the chunk and choice fields chunkwise does not model (extra)."
        ),
        epilog=(
            "exit status: 0 complete, 1 incomplete or failed, an error response, no "
            "server-sent events found (with --sse: also the body ended inside an event), "
            "or no audio for --audio-out, 2 bad usage, unreadable FILE or unwritable "
            "--audio-out"
        ),
    )
    inspect.add_argument(
        "file",
        metavar="FILE",
        help="the recorded body, or - for stdin (FILE.times.json beside it adds a timeline)",
    )
    inspect.add_argument(
        "--read-size",
        metavar="N",
        type=positive_int,
        default=_DEFAULT_READ_SIZE,
        help=f"feed the parser N bytes at a time (default {_DEFAULT_READ_SIZE})",
    )
    inspect.add_argument(
        "--api",
        choices=("auto", *COMMAND_APIS),
        default="auto",
        help=(
            "which API's stream this is (default auto: a Responses stream if an event "
            "says response.*, Messages if one is message_start, content_block_delta..., "
            "legacy completions if a chunk is a text_completion or its choices carry "
            "text, else chat completions)"
        ),
    )
    output = inspect.add_mutually_exclusive_group()
    output.add_argument(
        "--sse",
        action="store_true",
        help="print the server-sent events, one JSON object a line, instead",
    )
    output.add_argument("--json", action="store_true", help="print the result as one JSON document")
    add_audio_options(inspect, request=False)
    inspect.set_defaults(handler=run_inspect)


def run_inspect(args: argparse.Namespace) -> int:
    """``chunkwise inspect``: returns the exit status."""
    head, body = parse_http_head(read_input(args.file))
    if args.json or args.sse:
        prepare_json_output()
    error = _recorded_http_error(head, body)
    if error is None and not _is_event_stream(body):
        _no_events(args.file, head, body)
        return EXIT_STREAM
    if args.sse:
        if error is not None:
            print(
                f"{PROG} inspect: {one_line(str(error))} (an error response, not a stream)",
                file=sys.stderr,
            )
            return EXIT_STREAM
        return _print_sse(body, args.read_size)
    api: Api = detect_api(body) if args.api == "auto" else args.api
    parser = _parser(api)
    seen = _Seen()
    if error is not None:
        # The body is the server's error, not a stream: the result is that failure.
        parser.fail(error)
    else:
        for piece in _pieces(body, args.read_size):
            seen.add(parser.feed(piece))
        seen.add(parser.end())
    result = parser.result
    if args.api != "auto" and error is None:
        _note_other_api(api, result, body)
    status_line = None if head is None else head.status_line
    times = read_times(args.file)
    timeline = None
    if times is not None and error is None:
        timeline = _timeline(body, times, api)
    if args.json:
        document = to_json(result)
        if status_line is not None:
            document["http_status_line"] = status_line
        if timeline is not None:
            document["timeline"] = timeline.to_json()
        sys.stdout.write(json_text(document, indent=2) + "\n")
    else:
        if isinstance(result, responses.Result):
            lines = _describe_response(result, status_line, seen)
        elif isinstance(result, messages.Result):
            lines = _describe_message(result, status_line)
        else:
            lines = _describe(result, status_line)
        sys.stdout.write("".join(line + "\n" for line in lines))
        if timeline is not None:
            where = args.file + TIMES_SUFFIX
            sys.stdout.write("".join(line + "\n" for line in timeline.describe(where)))
    status = EXIT_OK if result.status == "complete" else EXIT_STREAM
    if args.audio_out is not None:
        sys.stdout.flush()
        status = max(status, save_audio("inspect", args.audio_out, result, args.audio_format))
    return status


class _Seen:
    """What a Responses stream said only in events: each tool item's progress and partial images."""

    def __init__(self) -> None:
        self.phases: dict[int, list[str]] = {}
        self.images: dict[int, list[str]] = {}

    def add(self, events: Iterable[object]) -> None:
        for event in events:
            if isinstance(event, responses.ToolProgress):
                phases = self.phases.setdefault(event.output_index, [])
                if not phases or phases[-1] != event.phase:  # one a phase, as chat shows them
                    phases.append(event.phase)
            elif isinstance(event, responses.PartialImage):
                raw = decode_base64(event.b64)
                size = "not base64" if raw is None else f"{len(raw)} bytes"
                self.images.setdefault(event.output_index, []).append(
                    f"partial image {event.index}: {size}"
                )


#: Events read before :func:`detect_api` settles for chat completions.
_DETECT_EVENTS = 64


def _parser(api: Api) -> StreamParser[Result]:
    """``api``'s parser, as the client makes it for a request without tools or schema."""
    parser: StreamParser[Result] = COMMAND_APIS[api].api.make_parser({}, DEFAULT_MAX_EVENT_SIZE)
    return parser


def _note_other_api(api: Api, result: Result, body: bytes) -> None:
    """On stderr: the file looks like another API's stream (``--api`` chose ``api``)."""
    seen = _detected_api(body)
    if seen is None or seen == api:
        return
    items: Sequence[object]
    if isinstance(result, responses.Result):
        items = result.output
    elif isinstance(result, messages.Result):
        items = result.content
    else:
        items = result.choices
    nothing = not items and result.usage is None and result.id is None and result.error is None
    names = {name: entry.title for name, entry in COMMAND_APIS.items()}
    what = f"this file looks like a {names[seen]} stream"
    advice = f"try --api {seen}, or leave --api out to tell from the stream"
    if nothing:
        message = (
            f"every event was ignored: --api {api} reads {names[api]} "
            f"streams, and {what} ({advice})"
        )
    else:
        message = f"note: {what}, not {names[api]} ({advice})"
    sys.stdout.flush()
    print(f"{PROG} inspect: {message}", file=sys.stderr)


def detect_api(body: bytes) -> Api:
    """Which API a recorded event-stream body comes from: ``"responses"``, ``"messages"``,
    ``"completions"`` or ``"chat"``.

    The first event that tells decides: an ``event:`` field or a data
    ``type`` starting with ``response.`` (every Responses stream opens with
    ``response.created``; llama.cpp's too), a data ``object`` naming a
    response; ``message_start`` and the other Messages event types (an
    ``event:`` field or the data's ``type``) for Messages; ``text_completion``,
    or a choice with ``text`` and no ``delta``, for legacy completions
    (llama.cpp, vLLM and TGI send the object too); ``chat.completion.chunk``
    or other ``choices`` for chat.  Events
    that tell nothing are skipped -- comments, keep-alive events, ``[DONE]``
    (some proxies add it to Responses streams), errors, data that is not
    JSON -- and the SSE decoder already takes a BOM and any line ending.  A
    body that never tells is chat, what chunkwise inspected before the
    Responses API existed.
    """
    return _detected_api(body) or "chat"


def _detected_api(body: bytes) -> Api | None:
    """:func:`detect_api`, or ``None`` when no event tells."""
    decoder = SSEDecoder(legacy_error_field=True)
    seen = 0
    try:
        for piece in _pieces(body, 4096):
            for event in decoder.feed(piece):
                verdict = api_of_event(event.event, event.data)
                if verdict is not None:
                    return verdict
                seen += 1
                if seen >= _DETECT_EVENTS:
                    return None
        for event in decoder.end():
            verdict = api_of_event(event.event, event.data)
            if verdict is not None:
                return verdict
    except EventTooLarge:
        pass  # the parser reports it; nothing more can be read here
    return None


def _recorded_http_error(head: RecordedHead | None, body: bytes) -> HTTPStatusError | None:
    """The error a client raises for this recorded response, if it is not a 2xx."""
    if head is None or head.status_code is None or 200 <= head.status_code < 300:
        return None
    return http_status_error(head.status_code, head.reason, head.headers, body)


# The first line of an event stream: a field the chat layer uses, or a comment.
_SSE_START_RE = re.compile(rb"(?:\xef\xbb\xbf)?(?::|(?:data|event|id|retry|error)(?::|\r|\n|$))")


def _is_event_stream(body: bytes) -> bool:
    """Whether the body is server-sent events: it holds one, or starts like a stream.

    A stream cut inside its first event holds no event, but it starts with a
    field such as ``data:``: that is an empty stream, which the parser
    reports, not a file of another kind.
    """
    if _SSE_START_RE.match(body):
        return True
    decoder = SSEDecoder(legacy_error_field=True)
    try:
        for piece in _pieces(body, _DEFAULT_READ_SIZE):
            if decoder.feed(piece):
                return True
        return bool(decoder.end())
    except EventTooLarge:
        return True  # an event, too large to take: the parser reports it


def _no_events(name: str, head: RecordedHead | None, body: bytes) -> None:
    what = "stdin" if name == "-" else repr(name)
    if not body:
        detail = "it is empty" if head is None else "the body after the HTTP head is empty"
    else:
        start = body[:_PREVIEW].decode("utf-8", "replace")
        quoted = json.dumps(start, ensure_ascii=False) + ("..." if len(body) > _PREVIEW else "")
        if head is None:
            detail = f"it starts with {quoted}"
        else:
            content_type = head.headers.get("content-type", "none")
            detail = f"content-type {content_type}; the body starts with {quoted}"
    print(
        f"{PROG} inspect: no server-sent events found in {what} ({printable(detail)})",
        file=sys.stderr,
    )


def _pieces(data: bytes, size: int) -> Iterator[memoryview]:
    view = memoryview(data)
    for start in range(0, len(view), size):
        yield view[start : start + size]


def _print_sse(body: bytes, read_size: int) -> int:
    # The same decoder settings as chunkwise.chat.Parser, so these are the events it sees.
    decoder = SSEDecoder(legacy_error_field=True)
    write = sys.stdout.write
    try:
        for piece in _pieces(body, read_size):
            for event in decoder.feed(piece):
                write(json_text(attrs.asdict(event)) + "\n")
        for event in decoder.end():
            write(json_text(attrs.asdict(event)) + "\n")
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


def _describe(result: chat.Result | completions.Result, status_line: str | None) -> Iterator[str]:
    if status_line is not None:
        yield f"http: {printable(status_line)}"
        yield ""
    if not result.choices:
        yield "no choices"
        yield ""
    for choice in result.choices:
        if isinstance(choice, completions.ChoiceResult):
            yield f"choice {choice.index}"
            yield "  text:" if choice.text else "  text: (empty)"
            yield from _block(choice.text, "    ") if choice.text else ()
        else:
            yield from _describe_choice(choice)
        yield from _choice_end(choice)
        yield ""
    yield from _describe_common(result)
    if isinstance(result, chat.Result) and result.extra:
        yield "extra:"
        yield from _describe_mapping(result.extra, "  ")
    if result.system_fingerprint is not None:
        yield f"system_fingerprint: {printable(result.system_fingerprint)}"
    yield f"[DONE]: {'received' if result.done_received else 'not received'}"
    if result.error is not None:
        yield from _describe_error(result.error)
    yield f"status: {status_text(result)}"


def _describe_choice(choice: chat.ChoiceResult) -> Iterator[str]:
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
    if choice.function_call is not None:
        yield from ("  " + line for line in describe_tool_call(choice.function_call))
    if choice.audio is not None:
        audio = choice.audio
        yield f"  audio: {audio_summary(audio.data, audio.transcript)}"
        yield f"    id: {_optional(audio.id)}"
        if audio.expires_at is not None:
            yield f"    expires_at: {audio.expires_at}"
        if audio.transcript:
            yield "    transcript:"
            yield from _block(audio.transcript, "      ")
    if choice.extra:
        yield "  extra:"
        yield from _describe_mapping(choice.extra, "    ")


def _choice_end(choice: chat.ChoiceResult | completions.ChoiceResult) -> Iterator[str]:
    """Both chat and completion choices: logprobs counts and the finish reason."""
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


def _describe_common(result: Result) -> Iterator[str]:
    # What both APIs' results have: usage, anomalies, id and model.
    if result.usage is None:
        yield "usage: none"
    else:
        yield "usage:"
        yield from _describe_mapping(result.usage, "  ")
    if result.anomalies:
        yield ""
        yield "anomalies:"
        for anomaly in result.anomalies:
            yield f"  - {anomaly_text(anomaly)}"
    yield ""
    yield f"id: {_optional(result.id)}"
    yield f"model: {_optional(result.model)}"


def _block(text: str, indent: str) -> Iterator[str]:
    for line in text.split("\n"):
        yield f"{indent}{printable(line)}" if line else ""


def _optional(value: str | None) -> str:
    return "(none)" if value is None else printable(value)


# -- a Messages answer -----------------------------------------------------------


def _describe_message(result: messages.Result, status_line: str | None) -> Iterator[str]:
    if status_line is not None:
        yield f"http: {printable(status_line)}"
        yield ""
    if not result.content:
        yield "no content"
        yield ""
    for block in result.content:
        unfinished = "" if block.done else " (unfinished)"
        yield f"block {block.index}: {_optional(block.type)}{unfinished}"
        if block.thinking or block.type == "thinking":
            yield "  thinking:"
            yield from _block(block.thinking, "    ")
            yield f"  signature: {'yes' if block.signature else 'none'}"
        if block.text or block.type == "text":
            yield "  text:" if block.text else "  text: (empty)"
            yield from _block(block.text, "    ")
        for citation in block.citations:
            yield f"  citation: {printable(json.dumps(citation, ensure_ascii=False))}"
        if block.call is not None:
            yield from ("  " + line for line in describe_tool_call(block.call))
        yield ""
    yield from _describe_common(result)
    yield f"role: {_optional(result.role)}"
    yield f"stop_reason: {_optional(result.stop_reason)}"
    if result.stop_sequence is not None:
        yield f"stop_sequence: {printable(json.dumps(result.stop_sequence, ensure_ascii=False))}"
    if result.error is not None:
        yield from _describe_error(result.error)
    yield f"status: {status_text(result)}"


# -- a Responses answer -----------------------------------------------------------


def _describe_response(
    result: responses.Result, status_line: str | None, seen: _Seen
) -> Iterator[str]:
    if status_line is not None:
        yield f"http: {printable(status_line)}"
        yield ""
    if not result.output:
        yield "no output"
        yield ""
    for item in result.output:
        yield from _describe_item(item, seen)
        yield ""
    if result.audio is not None:
        yield f"audio: {audio_summary(result.audio.data, result.audio.transcript)}"
        if result.audio.transcript:
            yield "  transcript:"
            yield from _block(result.audio.transcript, "    ")
        yield ""
    yield from _describe_common(result)
    yield f"response_status: {_optional(result.response_status)}"
    if result.incomplete_reason is not None:
        yield f"incomplete_reason: {printable(result.incomplete_reason)}"
    if result.error is not None:
        yield from _describe_error(result.error)
    yield f"status: {status_text(result)}"


def _describe_item(item: responses.OutputItem, seen: _Seen) -> Iterator[str]:
    ident = f" ({printable(item.id)})" if item.id else ""
    yield f"item {item.index}: {_optional(item.type)}{ident}"
    if item.role is not None:
        yield f"  role: {printable(item.role)}"
    if item.index in seen.phases:
        yield f"  progress: {printable(', '.join(seen.phases[item.index]))}"
    if item.custom_call is not None:
        yield f"  {describe_custom_call(item.custom_call)}"
    elif item.call is None and item_name(item) is not None:
        yield f"  name: {printable(item_name(item) or '')}"
    if item.input is not None and item.call is None:
        yield "  input:" if item.input else "  input: (empty)"
        yield from _block(item.input, "    ")
    for image in seen.images.get(item.index, ()):
        yield f"  {image}"
    for part in item.summary:
        yield "  summary:"
        yield from _block(part.text, "    ")
    for part in item.content:
        label = {"output_text": "text", "reasoning_text": "reasoning"}.get(part.type, part.type)
        yield f"  {printable(label)}:" + ("" if part.text else " (empty)")
        yield from _block(part.text, "    ") if part.text else ()
    if item.call is not None:
        yield from ("  " + line for line in describe_tool_call(item.call))
    status = item.status or "none"
    yield f"  status: {printable(status)}" + ("" if item.done else " (unfinished)")


# -- the timeline (FILE.times.json) ---------------------------------------------

#: How many stalls the timeline lists, and how much text it quotes either side.
_STALLS = 5
_CONTEXT = 24


@attrs.frozen(kw_only=True)
class Stall:
    """A gap before a read carrying output: how long, when it ended, where in the text."""

    gap: float
    at: float
    text_offset: int
    before: str
    after: str


@attrs.frozen(kw_only=True)
class Timeline:
    """What the recorded times say about a recording."""

    timings: Timings | None
    reads: int
    output_reads: int
    stalls: tuple[Stall, ...]
    complete: bool
    mismatch: str | None = None

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "clock": "seconds since the request was sent",
            "complete": self.complete,
            "reads": self.reads,
            "output_reads": self.output_reads,
            "timings": to_json(self.timings),
            "stalls": [to_json(stall) for stall in self.stalls],
        }
        if self.mismatch is not None:
            document["mismatch"] = self.mismatch
        return document

    def describe(self, where: str) -> Iterator[str]:
        yield ""
        yield f"timeline (from {where}; seconds since the request was sent):"
        if self.mismatch is not None or self.timings is None:
            yield f"  not shown: {self.mismatch}"
            return
        t = self.timings
        rows = (
            ("response head", t.response_head, ""),
            ("first event", t.first_event, ""),
            ("first token", t.first_output, "  (time to first token)"),
            ("first text", t.first_content, ""),
            ("last token", t.last_output, ""),
            ("end", t.ended, "" if self.complete else "  (the recording stopped here)"),
        )
        for name, value, note in rows:
            if value is not None:
                yield f"  {name + ':':<15}{value:9.3f} s{note}"
        yield f"  {'reads:':<16}{self.reads}, {self.output_reads} carrying output"
        gaps = t.gaps
        if gaps is None:
            yield "  gaps:           none (fewer than two reads carried output)"
            return
        yield (
            f"  gaps:           {gaps.count}, mean {_ms(gaps.mean)}, p50 {_ms(gaps.p50)}, "
            f"p90 {_ms(gaps.p90)}, p99 {_ms(gaps.p99)}, max {_ms(gaps.max)}"
        )
        yield "  longest stalls:"
        for stall in self.stalls:
            yield (
                f"    {_ms(stall.gap):>10} before {stall.at:.3f} s, at text offset "
                f"{stall.text_offset}: {json_text(stall.before)} | {json_text(stall.after)}"
            )


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def _timeline(body: bytes, times: RecordedTimes, api: Api) -> Timeline:
    """Parse ``body`` read by read as recorded, on a clock that reads the recorded times."""
    if times.body_bytes != len(body):
        return Timeline(
            timings=None,
            reads=len(times.reads),
            output_reads=0,
            stalls=(),
            complete=times.complete,
            mismatch=f"the times are of a {times.body_bytes}-byte body, this one has {len(body)}",
        )
    now = 0.0
    recorder = TimingRecorder(lambda: now)
    recorder.request_sent_now()
    if times.response_head is not None:
        now = times.response_head
        recorder.response_head_now(None)
    parser = _parser(api)
    timed = Timed(parser, recorder)
    text_length = 0
    tail = ""  # the last characters of the text so far
    stalls: list[Stall] = []
    output_reads = 0
    position = 0
    for size, seconds in times.pieces():
        now = seconds
        stamp = recorder.read()
        previous = recorder.last_output
        events = timed.carried(parser.feed(body[position : position + size]))
        position += size
        added = "".join(
            event.text
            for event in events
            if isinstance(
                event,
                (chat.TextDelta, responses.TextDelta, completions.TextDelta, messages.TextDelta),
            )
        )
        if recorder.last_output == stamp:
            output_reads += 1
            if previous is not None:
                stall = Stall(
                    gap=stamp - previous,
                    at=stamp,
                    text_offset=text_length,
                    before=tail[-_CONTEXT:],
                    after=added[:_CONTEXT],
                )
                stalls.append(stall)
                stalls.sort(key=lambda s: -s.gap)
                del stalls[_STALLS:]
        text_length += len(added)
        tail = (tail + added)[-_CONTEXT:]
        if parser.finished:
            break
    if not parser.finished:
        timed.carried(parser.end(), read=False)
    return Timeline(
        timings=timed.result.timings,
        reads=len(times.reads),
        output_reads=output_reads,
        stalls=tuple(stalls),
        complete=times.complete,
    )

"""``chunkwise record``: save a raw streamed response for a bug report.

The file holds the response exactly as chunkwise received it: the status line,
the header fields (names spelled as sent), a blank line, then the body bytes in
the order they arrived, each read written and flushed at once, so a stream cut
off by a crash or Ctrl-C keeps everything before the cut.  ``chunkwise inspect
FILE`` reads such a file (it skips the head).

Two things are not byte for byte what crossed the wire: the head is rebuilt
from h11's parse (``name: value`` with CRLF line endings), and the body is
stored after transfer decoding (without the chunked framing), because the body
is what a client parses.  Non-2xx responses are recorded the same way, error
body included.  Nothing else is changed: a recording is evidence.

Nothing of the request is ever written -- no request line, no request header --
so the ``Authorization`` header cannot end up in the file.  A server may still
quote the key back (a careless relay's "invalid key" message): the bytes are
written unchanged all the same, and a warning on stderr says that the file
holds the key (without printing it), for a key long enough to be a secret
(:data:`~chunkwise._core.util.MIN_SECRET_LENGTH`).

Beside ``FILE`` goes ``FILE.times.json``, the recording's timing: the response
head's time and each read's byte offset and time, in seconds since the request
was sent (the versioned times format of :mod:`chunkwise_tools.server._pacing`).
``chunkwise inspect`` shows it as a timeline, ``chunkwise serve --replay``
replays the body with it.  It is written once the recording ends, whatever
ended it, with ``complete`` false unless the body ended; a recording to stdout
has none.

``--api responses`` posts to the Responses API's ``/responses`` instead of
``/chat/completions`` (the request built from the same options, see
:func:`~._options.build_response_request`), ``--api completions`` to legacy
``/completions`` (:func:`~._options.build_completion_request`), ``--api
messages`` to Anthropic's ``/messages`` (the key as ``x-api-key``,
:func:`~._options.build_messages_request`); the recording
is made the same way, and only the status line on stderr reads the stream, with
that API's parser (:data:`~._options.COMMAND_APIS`).

The request goes through the client's one request lifecycle,
:func:`~chunkwise._net.http.open_http_response`, with ``check=False`` so that an
error status or another content type is handed over to be recorded instead of
raised.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Iterator
from typing import IO, Any

import attrs
import trio

from chunkwise import ChunkwiseError, Endpoint, Retries, chat, completions, messages, responses
from chunkwise.lowlevel import (
    CHAT,
    Api,
    HTTPResponse,
    StreamParser,
    TimingRecorder,
    http_status_error,
    redact,
    secret,
    send_http_request,
)
from chunkwise.types import DEFAULT_MAX_EVENT_SIZE, Headers

from ..server._pacing import TIMES_SUFFIX, RecordedTimes
from ._commands import COMMANDS
from ._common import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_STREAM,
    PROG,
    CommandsAction,
    UsageError,
    describe_failure,
    one_line,
    print_failure,
    status_text,
)
from ._options import (
    add_api_option,
    add_endpoint_options,
    add_request_options,
    command_api,
    endpoint_from_args,
)

__all__ = ["add_record_command", "format_head", "record_response", "recorded_times"]

#: How much of an error response's body is kept to explain it (all of it is recorded).
_MAX_ERROR_BODY = 1024 * 1024


def add_record_command(commands: CommandsAction) -> None:
    """Register ``chunkwise record``."""
    record = commands.add_parser(
        "record",
        help=COMMANDS["record"],
        description=(
            "Send a streaming chat-completions request (with --api responses: a Responses "
            "API request, --api completions: a legacy completions request, --api messages: "
            "an Anthropic Messages request) and save the "
            "response as received: "
            "the status line, the headers, a blank line, then the body bytes as they "
            "arrive (after transfer decoding), never changed.  Error responses are saved "
            "too.  Beside FILE goes FILE.times.json: when the head and each read of the "
            "body arrived (seconds since the request was sent), for 'chunkwise inspect' "
            "and 'chunkwise serve --replay'.  No request header is written, so the API "
            "key does not reach the file unless the server quotes it back, which a "
            "warning then says.  Read the file back with 'chunkwise inspect FILE'."
        ),
        epilog=(
            "exit status: 0 a 2xx response whose stream is complete, 1 anything else "
            "(what was received is in the file; when nothing was, e.g. the connection "
            "failed, no file is left behind), 2 bad usage, 130 interrupted (what was "
            "received is kept)"
        ),
    )
    record.add_argument(
        "prompt",
        metavar="PROMPT",
        nargs="?",
        help="the user message (--api completions: the prompt), or --request-json",
    )
    record.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        required=True,
        help="where to save the response (- for stdout)",
    )
    record.add_argument(
        "--request-json",
        metavar="FILE",
        help="send this file's bytes as the request body instead of building one from PROMPT",
    )
    add_endpoint_options(record)
    add_api_option(record)
    add_request_options(record)
    record.set_defaults(handler=run_record)


@attrs.define
class Recording:
    """What :func:`record_response` saw."""

    key_watch: KeyWatch
    status_line: str | None = None
    status_code: int | None = None
    reason: str = ""
    headers: Headers = attrs.field(factory=lambda: Headers(()))
    body_bytes: int = 0
    #: When the request was sent and the head arrived (trio's clock), and each read.
    request_sent: float | None = None
    response_head: float | None = None
    reads: list[tuple[int, float]] = attrs.field(factory=list)
    body_ended: bool = False
    error: ChunkwiseError | None = None
    error_body: bytearray = attrs.field(factory=bytearray)
    # Reads the stream only for the status line on stderr: no tools, no schema.
    parser: StreamParser[chat.Result | responses.Result | completions.Result | messages.Result] = (
        attrs.field(factory=chat.Parser)
    )


class KeyWatch:
    """Notices the API key in bytes fed piece by piece (a key split across reads too).

    Only watches a key long enough to be a secret: a short one ("e", "test")
    is in every recording.  Changes nothing; :attr:`seen` says whether it came.
    """

    def __init__(self, key: str | None) -> None:
        key = secret(key)
        self._key = key.encode("utf-8") if key else b""
        self._tail = b""
        self.seen = False

    def feed(self, data: bytes) -> None:
        if not self._key or self.seen:
            return
        window = self._tail + data
        self.seen = self._key in window
        self._tail = window[-(len(self._key) - 1) :] if len(self._key) > 1 else b""


def run_record(args: argparse.Namespace) -> int:
    """The ``record`` command: returns the exit status."""
    # No retries: a recording is what the server answered to one request.
    endpoint = attrs.evolve(endpoint_from_args(args), retries=Retries(max_retries=0))
    body = _request_body(args)
    api = command_api(args).api
    recording = Recording(
        key_watch=KeyWatch(endpoint.api_key),
        parser=api.make_parser({}, DEFAULT_MAX_EVENT_SIZE),
    )
    name = "stdout" if args.output == "-" else repr(args.output)
    interrupted = False
    with _open_output(args.output) as out:
        try:
            trio.run(record_response, endpoint, body, out, recording, api)
        except KeyboardInterrupt:
            interrupted = True
        except ChunkwiseError as exc:
            if recording.status_line is None:
                # Nothing was received: say so, and leave no empty file behind.
                print_failure(
                    describe_failure(exc, endpoint, args.api_key_env), f"{PROG} record: error: "
                )
                _remove_empty(args.output)
                return EXIT_STREAM
            recording.error = exc
    if interrupted and recording.status_line is None:
        _remove_empty(args.output)
    if args.output != "-" and recording.status_line is not None:
        _write_times(args.output + TIMES_SUFFIX, recording)
    status = _report(recording, name, endpoint, args.api_key_env, interrupted=interrupted)
    return EXIT_INTERRUPTED if interrupted else status


def _report(
    recording: Recording, name: str, endpoint: Endpoint, key_variable: str, *, interrupted: bool
) -> int:
    """Print what was recorded on stderr; return the exit status."""
    key = endpoint.api_key
    if recording.status_line is None:
        print(
            "status: incomplete (interrupted before the response began; nothing was recorded)"
            if interrupted
            else "nothing was received",
            file=sys.stderr,
        )
        return EXIT_STREAM
    print(
        f"recorded {one_line(recording.status_line)}, {recording.body_bytes} body bytes, to {name}",
        file=sys.stderr,
    )
    if recording.key_watch.seen:
        print(
            f"warning: the server quoted the API key back: {name} holds it (recorded "
            "unchanged); remove it before sharing the file",
            file=sys.stderr,
        )
    status_code = recording.status_code or 0
    if not 200 <= status_code < 300:
        error = http_status_error(
            status_code,
            recording.reason,
            recording.headers,
            bytes(recording.error_body),
            endpoint=endpoint,  # what the status suggests, as chat says it
        )
        print_failure(describe_failure(error, endpoint, key_variable), "error: ")
        return EXIT_STREAM
    parser = recording.parser
    if recording.error is not None:
        failure = describe_failure(recording.error, endpoint, key_variable)
        print(f"transport error: {failure.message}", file=sys.stderr)
    if not parser.finished:
        parser.end()
    result = parser.result
    if interrupted:
        print("status: incomplete (interrupted)", file=sys.stderr)
        return EXIT_STREAM
    print(redact(f"status: {status_text(result)}", key), file=sys.stderr)
    return EXIT_OK if result.status == "complete" and recording.error is None else EXIT_STREAM


def _request_body(args: argparse.Namespace) -> bytes:
    """The request body to send."""
    if args.request_json is not None:
        if args.prompt is not None:
            raise UsageError("give either PROMPT or --request-json, not both")
        try:
            with open(args.request_json, "rb") as file:
                body = file.read()
        except OSError as exc:
            raise UsageError(f"cannot read {args.request_json!r}: {exc.strerror or exc}") from None
        # Sent as is, even if it is not JSON: the server's reaction may be the point;
        # but a slip should not pass for the server's fault.
        try:
            json.loads(body)
        except ValueError as exc:  # UnicodeDecodeError included
            print(
                f"warning: {args.request_json!r} is not JSON ({exc}); sending it as is",
                file=sys.stderr,
            )
        return body
    if args.prompt is None:
        raise UsageError("give PROMPT or --request-json FILE")
    request = {**command_api(args).build(args, args.prompt), "stream": True}
    return json.dumps(request, ensure_ascii=False).encode()


@contextlib.contextmanager
def _open_output(name: str) -> Iterator[IO[bytes]]:
    if name == "-":
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    try:
        file = open(name, "wb")  # noqa: SIM115 - closed below, after the run
    except OSError as exc:
        raise UsageError(f"cannot write {name!r}: {exc.strerror or exc}") from None
    with file:
        yield file


def recorded_times(recording: Recording) -> RecordedTimes:
    """The timing of ``recording`` in the times format (seconds since the request was sent)."""
    sent = recording.request_sent or 0.0
    head = None if recording.response_head is None else recording.response_head - sent
    return RecordedTimes(
        response_head=head,
        body_bytes=recording.body_bytes,
        reads=tuple((offset, max(0.0, at - sent)) for offset, at in recording.reads),
        complete=recording.body_ended,
    )


def _write_times(name: str, recording: Recording) -> None:
    try:
        with open(name, "w", encoding="utf-8") as file:
            file.write(recorded_times(recording).dumps())
    except OSError as exc:
        print(f"warning: cannot write {name!r}: {exc.strerror or exc}", file=sys.stderr)


def _remove_empty(name: str) -> None:
    if name != "-":
        with contextlib.suppress(OSError):
            if os.path.getsize(name) == 0:
                os.remove(name)


def format_head(response: HTTPResponse) -> bytes:
    """The status line and header fields of ``response``, then a blank line (CRLF endings)."""
    status_line = f"HTTP/{response.http_version} {response.status_code} {response.reason}"
    lines = [status_line.encode("latin-1") + b"\r\n"]
    lines.extend(name + b": " + value + b"\r\n" for name, value in response.headers.raw)
    lines.append(b"\r\n")
    return b"".join(lines)


async def record_response(
    endpoint: Endpoint,
    body: bytes,
    out: IO[bytes],
    recording: Recording,
    api: Api[Any] = CHAT,
    *,
    transport: trio.abc.Stream | None = None,
) -> None:
    """POST ``body`` to ``api``'s path (the key sent as ``api`` sends it); write the
    response head and body bytes to ``out`` as they arrive.

    ``transport`` (tests) is an already connected stream, as for
    :func:`~chunkwise._net.http.send_http_request`.  Fills in ``recording`` as it
    goes, so a caller interrupted halfway still knows what was written.
    Raises the transport's errors; errors after the head arrived leave ``out``
    holding everything received before.
    """
    timings = TimingRecorder(trio.current_time)
    response = await send_http_request(
        endpoint,
        body,
        path=api.path,
        check=False,
        trace=timings.trace,
        transport=transport,
        auth=api.auth,
    )
    recording.request_sent = timings.request_sent
    recording.response_head = timings.response_head
    try:
        head = format_head(response)
        out.write(head)
        out.flush()
        recording.key_watch.feed(head)
        recording.status_line = (
            f"HTTP/{response.http_version} {response.status_code} {response.reason}"
        ).rstrip()
        recording.status_code = response.status_code
        recording.reason = response.reason
        recording.headers = response.headers
        success = 200 <= response.status_code < 300
        async for data in response:
            # Stamped by the trace as the read returned (or when its bytes arrived).
            assert timings.read_at is not None
            recording.reads.append((recording.body_bytes, timings.read_at))
            out.write(data)
            out.flush()
            recording.key_watch.feed(data)
            recording.body_bytes += len(data)
            if success:
                recording.parser.feed(data)
            elif len(recording.error_body) < _MAX_ERROR_BODY:
                recording.error_body += data
        recording.body_ended = True
    finally:
        await response.aclose()

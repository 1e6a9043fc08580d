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
body included.

Nothing of the request is ever written -- no request line, no request header --
so the ``Authorization`` header cannot end up in the file.  A server may still
quote the key back (OpenAI's 401 message does, masked; a careless relay might
not): every occurrence of the key in the head or the body is written as
``***``, the one change made to the bytes received, and only for a key long
enough to be a secret (:data:`~chunkwise._util.MIN_SECRET_LENGTH`): a short
key such as ``e`` or ``test`` would otherwise rewrite ordinary bytes.  To catch a key split
across two reads, the last ``len(key) - 1`` bytes of a read are held back
while they could begin the key.

This uses the HTTP layer's connection object directly: the client's
:func:`~chunkwise._http.open_http_response` refuses non-2xx responses and
does not show their headers, but a recording must keep both.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Iterator
from typing import IO

import attrs
import h11
import trio

from .._endpoint import Endpoint
from .._errors import ChunkwiseError
from .._http import Connection, connect, parse_error_body
from .._parser import ChatStreamParser
from .._util import redact, secret
from ._common import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_STREAM,
    CommandsAction,
    UsageError,
    one_line,
    status_text,
)
from ._options import add_endpoint_options, add_request_options, build_request, endpoint_from_args

__all__ = ["add_record_command", "format_head", "record_response"]


def add_record_command(commands: CommandsAction) -> None:
    """Register ``chunkwise record``."""
    record = commands.add_parser(
        "record",
        help="save a raw streamed response (status, headers, body) for a bug report",
        description=(
            "Send a streaming chat-completions request and save the response as received: "
            "the status line, the headers, a blank line, then the body bytes as they "
            "arrive (after transfer decoding).  Error responses are saved too.  No request "
            "header is written, so the API key never reaches the file.  Read the file back "
            "with 'chunkwise inspect FILE'."
        ),
        epilog=(
            "exit status: 0 a 2xx response whose stream is complete, 1 anything else "
            "(the file is still written), 2 bad usage, 130 interrupted"
        ),
    )
    record.add_argument(
        "prompt", metavar="PROMPT", nargs="?", help="the user message (or --request-json)"
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
    add_request_options(record)
    record.set_defaults(handler=run_record)


@attrs.define
class Recording:
    """What :func:`record_response` saw."""

    status_line: str | None = None
    status_code: int | None = None
    body_bytes: int = 0
    error: ChunkwiseError | None = None
    error_body: bytearray = attrs.field(factory=bytearray)
    parser: ChatStreamParser = attrs.field(factory=ChatStreamParser)
    redactor: KeyRedactor = attrs.field(factory=lambda: KeyRedactor(None))


class KeyRedactor:
    """Replaces every occurrence of ``key`` in a byte stream fed piece by piece by ``***``.

    :meth:`feed` returns what can be written now; bytes that might be the
    start of the key are held back until the next piece, or :meth:`end`.
    """

    def __init__(self, key: str | None) -> None:
        # Only a key long enough to be a secret: a short one ("e", "test")
        # would turn every occurrence of those letters in the body into ***.
        key = secret(key)
        self._key = key.encode("ascii") if key else b""
        self._held = b""

    def feed(self, data: bytes) -> bytes:
        """The redacted bytes that are safe to write after ``data``."""
        key = self._key
        if not key:
            return data
        buffer = (self._held + data).replace(key, b"***")
        keep = 0
        for size in range(min(len(key) - 1, len(buffer)), 0, -1):
            if key.startswith(buffer[-size:]):
                keep = size
                break
        self._held = buffer[len(buffer) - keep :]
        return buffer[: len(buffer) - keep]

    def end(self) -> bytes:
        """The bytes held back.  A long start of the key is written as ``***`` too."""
        held, self._held = self._held, b""
        return b"***" if len(held) >= 4 else held


def run_record(args: argparse.Namespace) -> int:
    """The ``record`` command: returns the exit status."""
    endpoint = endpoint_from_args(args)
    body = _request_body(args)
    # The parser only gives the summary's status line: no tool validation, which
    # would need the optional jsonschema.
    key = endpoint.api_key
    recording = Recording(redactor=KeyRedactor(key))
    name = "stdout" if args.output == "-" else repr(args.output)
    interrupted = False
    with _open_output(args.output) as out:
        try:
            trio.run(record_response, endpoint, body, out, recording)
        except KeyboardInterrupt:
            interrupted = True
        except ChunkwiseError as exc:
            if recording.status_line is None:
                # Nothing was received: say so, and leave no empty file behind.
                message = one_line(redact(str(exc), key))
                print(f"chunkwise record: error: {message}", file=sys.stderr)
                _remove_empty(args.output)
                return EXIT_STREAM
            recording.error = exc
        out.write(recording.redactor.end())
    status = _report(recording, name, key, interrupted=interrupted)
    return EXIT_INTERRUPTED if interrupted else status


def _report(recording: Recording, name: str, key: str | None, *, interrupted: bool) -> int:
    """Print what was recorded on stderr; return the exit status."""
    if recording.status_line is None:
        print(
            "status: incomplete (interrupted)" if interrupted else "nothing was received",
            file=sys.stderr,
        )
        return EXIT_STREAM
    print(
        f"recorded {one_line(recording.status_line)}, {recording.body_bytes} body bytes, to {name}",
        file=sys.stderr,
    )
    status_code = recording.status_code or 0
    if not 200 <= status_code < 300:
        error = parse_error_body(bytes(recording.error_body))
        detail = f": {one_line(redact(error.message, key))}" if error is not None else ""
        print(f"error: HTTP {status_code}{detail}", file=sys.stderr)
        return EXIT_STREAM
    parser = recording.parser
    if recording.error is not None:
        print(f"transport error: {one_line(redact(str(recording.error), key))}", file=sys.stderr)
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
        # Sent as is, even if it is not JSON: the server's reaction may be the point.
        return body
    if args.prompt is None:
        raise UsageError("give PROMPT or --request-json FILE")
    request = {**build_request(args, args.prompt), "stream": True}
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


def _remove_empty(name: str) -> None:
    if name != "-":
        with contextlib.suppress(OSError):
            if os.path.getsize(name) == 0:
                os.remove(name)


def format_head(head: h11.Response) -> bytes:
    """The status line and header fields of ``head``, then a blank line (CRLF endings)."""
    lines = [b"HTTP/%s %d %s\r\n" % (head.http_version, head.status_code, head.reason)]
    lines.extend(name + b": " + value + b"\r\n" for name, value in head.headers.raw_items())
    lines.append(b"\r\n")
    return b"".join(lines)


async def record_response(
    endpoint: Endpoint, body: bytes, out: IO[bytes], recording: Recording
) -> None:
    """POST ``body`` and write the response head and body bytes to ``out`` as they arrive.

    Fills in ``recording`` as it goes, so a caller interrupted halfway still
    knows what was written.  Raises the transport's errors; errors after the
    head arrived leave ``out`` holding everything received before.
    """
    conn = Connection(await connect(endpoint), endpoint)
    try:
        await conn.send_request(endpoint, body)
        head = await conn.receive_head()
        redactor = recording.redactor
        out.write(redactor.feed(format_head(head)) + redactor.end())
        out.flush()
        recording.status_line = (
            f"HTTP/{head.http_version.decode('ascii')} {head.status_code} "
            f"{head.reason.decode('latin-1')}"
        ).rstrip()
        recording.status_code = head.status_code
        success = 200 <= head.status_code < 300
        while True:
            data = await conn.receive_some()
            if not data:
                break
            out.write(redactor.feed(data))
            out.flush()
            recording.body_bytes += len(data)
            if success:
                recording.parser.feed(data)
            elif len(recording.error_body) < 1024 * 1024:
                recording.error_body += data
    finally:
        await conn.aclose()

"""``chunkwise serve``: the chat and Responses server on a port, until Ctrl-C.

Pacing (:mod:`chunkwise_tools.server._pacing`) has its own options, read by
:func:`pacing_from_args`: ``--replay FILE`` replays with the recorded timing
when ``FILE.times.json`` is beside it (``--pace recorded``, the default then;
``--pace fast`` ignores it), and ``--first-token``, ``--per-token``,
``--tokens`` and ``--jitter`` script a known timing, for checking a load
tester (``chunkwise bench``) against the truth.  A pacing excludes
``--write-size`` and ``--delay``, which shape writes another way.

Only binding the port can fail as "cannot listen" (status 2): the error is
caught around entering :func:`~chunkwise.testing.open_chat_server`, which
binds before it yields, and nowhere else.  Anything later propagates: a closed
stdout (``chunkwise serve | head -1``) is a :class:`BrokenPipeError`, which
``main()`` turns into status 141 like every command's; Ctrl-C is status 130.

The request log (one line a request, one more as a paced answer ends:
:class:`RequestLog`) is written by a worker thread, never on trio's: a stdout
that is not being read (a pipe whose reader only wanted the first line) fills
up and blocks the write, and a blocking write on trio's thread stopped every
connection at once.  While stdout does not keep up, up to :data:`LOG_BACKLOG`
lines wait; later ones are counted and the count is logged once stdout takes
lines again.  When the server stops, the lines still waiting get
:data:`LOG_LAST_WRITE` seconds to go out.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import math
import os
import sys
import threading
from typing import TextIO

import trio

from chunkwise import ChunkwiseError, SSEDecoder
from chunkwise.testing import LoopbackServer

from ..server._background import DEFAULT_RESUME_WINDOW, DEFAULT_RETENTION
from ..server._chat_server import open_chat_server
from ..server._faults import FAULT_WAYS, IDLE_SILENCE, Faults
from ..server._options import DEFAULT_HOST, DEFAULT_PORT, ServerOptions
from ..server._pacing import (
    LATE_GAP,
    Pacing,
    RecordedPacing,
    TimesFormatError,
    TokenPacing,
    check_pacing,
)
from ..server._response_scenarios import RESPONSE_SCENARIOS
from ..server._scenarios import DEFAULT_SCENARIO, SCENARIOS
from ._commands import COMMANDS
from ._common import (
    CommandsAction,
    UsageError,
    error_status,
    non_negative_int,
    port,
    positive_int,
    quiet_collector,
    read_input,
    read_times,
    seconds,
    split_http_head,
)

__all__ = [
    "LOG_BACKLOG",
    "LOG_LAST_WRITE",
    "RequestLog",
    "add_serve_command",
    "describe_pacing",
    "options_from_args",
    "pacing_from_args",
    "run_serve",
    "serve",
]


def add_serve_command(commands: CommandsAction) -> None:
    """Register ``chunkwise serve``."""
    scenarios = "\n".join(f"  {s.name:<25}{s.summary}" for s in SCENARIOS.values())
    responses = "\n".join(f"  {s.name:<27}{s.summary}" for s in RESPONSE_SCENARIOS.values())
    serve = commands.add_parser(
        "serve",
        help=COMMANDS["serve"],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Run an OpenAI-compatible server (POST /v1/chat/completions, /v1/responses,\n"
            "/v1/completions and Anthropic's /v1/messages; GET /v1/models) with scripted\n"
            "streams, for trying chunkwise or testing any client.  The request's model\n"
            "names the scenario; other models get\n"
            "--scenario (chat) and --response-scenario (Responses).  Chat honours\n"
            "stream_options.include_usage, n and stream: false; Responses honours stream,\n"
            "max_output_tokens and function_call_output input.  Both answer a\n"
            "response_format / text.format (json_schema, json_object) with a JSON document\n"
            "valid against the schema (cut by the length scenarios, breaking the schema in\n"
            "structured-invalid), and refuse what OpenAI refuses with its 400 (missing\n"
            "model or messages/input, n, token limits or temperature out of range,\n"
            "malformed tools, the other API's body).  --replay, --write-size, --delay,\n"
            "--disconnect-after, --status and --api-key apply to both APIs.\n\n"
            'Background Responses ("background": true) run in a server task that outlives\n'
            "the connection: GET /v1/responses/{id} polls one, GET /v1/responses/{id}?stream=\n"
            "true&starting_after=N streams its events after sequence number N, POST\n"
            "/v1/responses/{id}/cancel cancels it.  --cut-after-events, --cut-seed and\n"
            "--disconnect-after cut every streaming connection, so resuming can be tried;\n"
            "--resume-window 0 refuses every re-stream, so polling can be tried too."
        ),
        epilog=(
            f"chat scenarios (model names):\n{scenarios}\n\n"
            f"Responses scenarios (model names):\n{responses}\n\n"
            "example:\n"
            "  chunkwise serve --port 8000 --write-size 7 --delay 0.05\n"
            '  OPENAI_BASE_URL=http://127.0.0.1:8000/v1 chunkwise chat --model tools "hi"\n'
            "  curl http://127.0.0.1:8000/v1/chat/completions \\\n"
            "    -H 'Content-Type: application/json' \\\n"
            '    -d \'{"model": "text", "messages": [{"role": "user", "content": "JSON?"}],\n'
            '         "response_format": {"type": "json_object"}}\'\n'
            "  curl -N http://127.0.0.1:8000/v1/responses -H 'Content-Type: application/json' \\\n"
            '    -d \'{"model": "tools", "input": "hi", "stream": true}\'\n\n'
            "Runs until Ctrl-C (exit status 130)."
        ),
    )
    serve.add_argument(
        "--host",
        default=DEFAULT_HOST,
        help=f"address to listen on (default {DEFAULT_HOST}: this machine only)",
    )
    serve.add_argument(
        "--port",
        type=port,
        default=DEFAULT_PORT,
        metavar="N",
        help=f"TCP port (default {DEFAULT_PORT}; 0 picks a free one)",
    )
    serve.add_argument(
        "--scenario",
        choices=list(SCENARIOS),
        default=DEFAULT_SCENARIO,
        metavar="NAME",
        help=f"chat scenario for models that name none (default {DEFAULT_SCENARIO})",
    )
    serve.add_argument(
        "--response-scenario",
        choices=list(RESPONSE_SCENARIOS),
        metavar="NAME",
        help="Responses scenario for models that name none (default: --scenario when it "
        "names a Responses scenario too, else text)",
    )
    serve.add_argument(
        "--replay",
        metavar="FILE",
        help="answer every chat and Responses request with this recorded SSE body (an "
        "HTTP head, as 'chunkwise record' writes, is skipped)",
    )
    serve.add_argument(
        "--write-size", type=positive_int, metavar="N", help="send the body N bytes per write"
    )
    serve.add_argument(
        "--delay",
        type=seconds(0, 3600),
        default=0.0,
        metavar="S",
        help="wait S seconds between writes: between events, or between --write-size "
        "pieces when given (default 0)",
    )
    serve.add_argument(
        "--disconnect-after",
        type=non_negative_int,
        metavar="N",
        help="close the connection after N body bytes, without finishing the response",
    )
    serve.add_argument(
        "--cut-after-events",
        type=non_negative_int,
        metavar="N",
        help="close each streaming connection after N events, without finishing the response",
    )
    serve.add_argument(
        "--cut-seed",
        type=int,
        metavar="SEED",
        help="cut each streaming connection at random (after a random number of events, "
        "inside the next one, or not at all); the same SEED cuts the same way",
    )
    serve.add_argument(
        "--retention",
        type=seconds(0, 7 * 24 * 3600),
        default=DEFAULT_RETENTION,
        metavar="S",
        help=f"keep a finished response retrievable for S seconds (default {DEFAULT_RETENTION:g}); "
        "then GET /v1/responses/{id} answers 404",
    )
    serve.add_argument(
        "--resume-window",
        type=seconds(0, 7 * 24 * 3600),
        default=DEFAULT_RESUME_WINDOW,
        metavar="S",
        help="refuse to stream a background response again once it is S seconds old (400, as "
        f"OpenAI after five minutes; default {DEFAULT_RESUME_WINDOW:g}; 0 refuses every re-stream)",
    )
    serve.add_argument(
        "--status",
        type=error_status,
        metavar="CODE",
        help="answer every chat and Responses request with this HTTP error status and an "
        "OpenAI-shaped error (429 and 503 add Retry-After: 1)",
    )
    serve.add_argument(
        "--api-key",
        metavar="K",
        help="require 'Authorization: Bearer K'; other requests get 401",
    )
    serve.add_argument(
        "--api-key-env",
        metavar="NAME",
        help="like --api-key, with the key read from environment variable NAME "
        "(keeps it out of the process list)",
    )
    add_pacing_options(serve)
    add_fault_options(serve)
    serve.set_defaults(handler=run_serve)


def _share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"expected a share from 0 to 1, not {text!r}")
    return value


def add_fault_options(serve: argparse.ArgumentParser) -> None:
    """``--fail-before-output``, ``--fail-after-output`` and ``--fail-way``."""
    faults = serve.add_argument_group(
        "faults",
        "Fail a share of streamed answers (chat, completions, Responses; not background "
        "ones) before or after their first output event, drawn with --seed; each failed "
        "answer's head says how, in x-chunkwise-fault.  A client that retries before "
        "output (chunkwise's default) completes the first kind and never retries the "
        "second.",
    )
    faults.add_argument(
        "--fail-before-output",
        type=_share,
        default=0.0,
        metavar="SHARE",
        help="fail this share (0 to 1) of answers before their first output",
    )
    faults.add_argument(
        "--fail-after-output",
        type=_share,
        default=0.0,
        metavar="SHARE",
        help="fail this share (0 to 1) of answers just after their first output",
    )
    faults.add_argument(
        "--fail-way",
        action="append",
        choices=list(FAULT_WAYS),
        help="how (repeat for several; each fault draws one; default all): cut the "
        "connection, end the body, send an in-stream server_error, overloaded_error or "
        f"rate_limit_exceeded, or go silent ({IDLE_SILENCE:g} s: the client's idle timeout)",
    )


def add_pacing_options(serve: argparse.ArgumentParser) -> None:
    """``--pace`` and the scripted timing's options."""
    pacing = serve.add_argument_group(
        "pacing",
        "A recorded timing (FILE.times.json beside --replay FILE) or a known one, "
        "scripted: the first output event --first-token seconds after the request, then "
        "one output event (one token) every --per-token seconds.  Each paced answer "
        "ends with a log line saying how late its writes went out: how many of its gaps "
        f"were more than {LATE_GAP * 1000:g} ms longer than scripted.",
    )
    pacing.add_argument(
        "--pace",
        choices=("recorded", "fast"),
        help="recorded: replay --replay FILE with the timing in FILE.times.json (the "
        "default when it is there); fast: ignore it",
    )
    pacing.add_argument(
        "--first-token",
        type=seconds(0, 3600),
        metavar="S",
        help="send the first token S seconds after the request",
    )
    pacing.add_argument(
        "--per-token",
        type=seconds(0, 3600),
        metavar="S",
        help="then one token every S seconds",
    )
    pacing.add_argument(
        "--tokens",
        type=positive_int,
        metavar="N",
        help="answer with N tokens (one delta each; usage says N) instead of the scenario's text",
    )
    pacing.add_argument(
        "--jitter",
        type=seconds(0, 3600),
        metavar="S",
        help="move each token's time by up to S seconds either way (seeded by --seed)",
    )
    pacing.add_argument(
        "--seed",
        type=int,
        default=0,
        metavar="N",
        help="seed of --jitter and of the --fail-* draws (default 0)",
    )


def pacing_from_args(args: argparse.Namespace, replay: bytes | None) -> Pacing | None:
    """The pacing ``chunkwise serve``'s arguments ask for, or ``None``."""
    scripted = [
        name
        for name, value in (
            ("--first-token", args.first_token),
            ("--per-token", args.per_token),
            ("--tokens", args.tokens),
            ("--jitter", args.jitter),
        )
        if value is not None
    ]
    shaped = args.write_size is not None or args.delay
    times = None
    if args.replay is not None and args.pace != "fast":
        times = read_times(args.replay)
        if args.pace == "recorded" and times is None:
            raise UsageError(f"--pace recorded: {args.replay + '.times.json'!r} does not exist")
        if times is not None and (scripted or shaped) and args.pace is None:
            times = None  # other pacing was asked for: the recorded one gives way
    if times is not None:
        if scripted:
            raise UsageError(f"--pace recorded excludes {', '.join(scripted)}")
        if shaped:
            raise UsageError("--pace recorded excludes --write-size and --delay")
        pacing: Pacing = RecordedPacing(times=times)
        try:
            check_pacing(pacing, replay)
        except TimesFormatError as exc:
            raise UsageError(f"--replay {args.replay}: {exc}") from None
        return pacing
    if args.pace == "recorded" and args.replay is None:
        raise UsageError("--pace recorded needs --replay FILE")
    if not scripted:
        return None
    if shaped:
        raise UsageError(f"{', '.join(scripted)} exclude --write-size and --delay")
    if args.tokens is not None and args.replay is not None:
        raise UsageError("--tokens cannot change a replayed answer")
    return TokenPacing(
        first_token=args.first_token or 0.0,
        per_token=args.per_token or 0.0,
        tokens=args.tokens,
        jitter=args.jitter or 0.0,
        seed=args.seed,
    )


def _warn_unless_events(name: str, body: bytes) -> None:
    """Say so when a --replay file holds no server-sent event (an HTML page, say).

    Served all the same: a broken body may be what a client is tested with.
    """
    decoder = SSEDecoder()
    try:
        events = decoder.feed(body) + decoder.end()
    except ChunkwiseError:
        return  # events too large or malformed: an event stream, if a broken one
    if not events:
        print(
            f"warning: --replay {name} holds no server-sent event (no data: line); "
            "serving it as is",
            file=sys.stderr,
        )


def options_from_args(args: argparse.Namespace) -> ServerOptions:
    """The :class:`ServerOptions` that ``chunkwise serve``'s arguments ask for."""
    api_key = args.api_key
    if args.api_key_env is not None:
        if api_key is not None:
            raise UsageError("give --api-key or --api-key-env, not both")
        api_key = os.environ.get(args.api_key_env)
        if not api_key:
            raise UsageError(f"environment variable {args.api_key_env} is not set or empty")
    replay = None
    if args.replay is not None:
        _, replay = split_http_head(read_input(args.replay))
        _warn_unless_events(args.replay, replay)
    pacing = pacing_from_args(args, replay)
    faults = None
    if args.fail_before_output or args.fail_after_output:
        if args.fail_before_output + args.fail_after_output > 1:
            raise UsageError("--fail-before-output and --fail-after-output add up to more than 1")
        faults = Faults(
            before_output=args.fail_before_output,
            after_output=args.fail_after_output,
            ways=args.fail_way or tuple(FAULT_WAYS),
            seed=args.seed,
        )
    return ServerOptions(
        scenario=args.scenario,
        response_scenario=args.response_scenario,
        replay=replay,
        write_size=args.write_size,
        delay=args.delay,
        disconnect_after=args.disconnect_after,
        status=args.status,
        api_key=api_key,
        cut_after_events=args.cut_after_events,
        cut_seed=args.cut_seed,
        retention=args.retention,
        resume_window=args.resume_window,
        pacing=pacing,
        faults=faults,
    )


def run_serve(args: argparse.Namespace) -> int:
    """``chunkwise serve``: serve until Ctrl-C (``KeyboardInterrupt`` reaches ``main``)."""
    options = options_from_args(args)
    quiet_collector()
    trio.run(functools.partial(serve, options, host=args.host, port=args.port))
    return 0


async def serve(
    options: ServerOptions,
    *,
    host: str,
    port: int,
    task_status: trio.TaskStatus[LoopbackServer] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve until cancelled, announcing the base URL and logging each request on stdout.

    Under ``nursery.start`` it starts with the running server, once announced.

    Raises:
        UsageError: the port cannot be bound (in use, no such address...).
    """

    log = RequestLog(sys.stdout)
    async with contextlib.AsyncExitStack() as stack:
        try:
            server = await stack.enter_async_context(
                # It may answer millions of requests: it keeps none of them.
                open_chat_server(options, host=host, port=port, log=log, record=False)
            )
        except OSError as exc:
            where = _authority(host, port)
            raise UsageError(f"cannot listen on {where}: {exc.strerror or exc}") from None
        print(f"serving on {server.base_url}")
        if options.replay is not None:
            print(f"replaying a recorded body ({len(options.replay)} bytes)")
        else:
            print(
                f"scenario: chosen by the request's model (default {options.scenario!r}); "
                f"models: {', '.join(SCENARIOS)}"
            )
            print(
                "Responses scenario (POST /v1/responses): chosen by the request's model "
                f"(default {options.default_response_scenario!r}); "
                f"models: {', '.join(RESPONSE_SCENARIOS)}"
            )
        describe_pacing(options.pacing)
        print("press Ctrl-C to stop")
        sys.stdout.flush()
        task_status.started(server)
        await log.write_lines()


#: Request log lines held while stdout does not keep up; later ones are counted, not kept.
LOG_BACKLOG = 10_000
#: Seconds the lines still waiting get, once the server is stopping, to reach stdout.
LOG_LAST_WRITE = 1.0


class RequestLog:
    """``log(line)`` for :func:`open_chat_server`: never blocks, whatever stdout does.

    Lines are queued; :meth:`write_lines` writes them from a worker thread, as
    many as are waiting in one write.  Past ``backlog`` waiting lines, a line is
    counted instead, and the count is written after the lines that were kept.
    """

    def __init__(self, out: TextIO, backlog: int = LOG_BACKLOG) -> None:
        self._out = out
        self._send, self._receive = trio.open_memory_channel[str](backlog)
        self._dropped = 0
        self._lock = threading.Lock()

    def __call__(self, line: str) -> None:
        try:
            self._send.send_nowait(line)
        except trio.WouldBlock:
            self._dropped += 1

    async def write_lines(self) -> None:
        """Write the log until cancelled (a closed stdout raises :class:`BrokenPipeError`).

        When cancelled (Ctrl-C, the end of a test), the lines already logged are
        still written, if stdout takes them within :data:`LOG_LAST_WRITE` seconds.
        """
        # The text being handed to a thread: taken (list.pop, atomic) either by
        # the thread or, when the thread never started, by the last write.
        batch: list[str] = []
        try:
            while True:
                batch = [self._waiting(await self._receive.receive())]
                # Abandoned on cancel: a write into a pipe nobody reads never returns.
                await trio.to_thread.run_sync(self._write, batch, abandon_on_cancel=True)
        except trio.Cancelled:
            with trio.CancelScope(shield=True, deadline=trio.current_time() + LOG_LAST_WRITE):
                try:
                    unsent = batch.pop()
                except IndexError:  # the thread took it: written, or being written
                    unsent = ""
                batch = [unsent + self._waiting()]
                if batch[0]:
                    await trio.to_thread.run_sync(self._write, batch, abandon_on_cancel=True)
            raise

    def _waiting(self, first: str | None = None) -> str:
        """The lines waiting (after ``first``), and the count of those dropped, as text."""
        lines = [] if first is None else [first]
        while True:
            try:
                lines.append(self._receive.receive_nowait())
            except trio.WouldBlock:
                break
        if self._dropped:
            lines.append(f"({self._dropped} request lines not logged: stdout was not read)")
            self._dropped = 0
        return "".join(line + "\n" for line in lines)

    def _write(self, batch: list[str]) -> None:
        # In order: the last write, on cancel, may start while an abandoned one blocks.
        with self._lock:
            try:
                text = batch.pop()
            except IndexError:  # the last write took it: this thread started too late
                return
            self._write_now(text)

    def _write_now(self, text: str) -> None:
        try:
            descriptor = self._out.fileno()
        except (OSError, ValueError):  # no descriptor (a captured stdout)
            self._out.write(text)
            self._out.flush()
            return
        # Straight to the descriptor: a thread blocked inside the text file would
        # hold its lock, and the interpreter's last flush at exit would wait for it.
        data = memoryview(text.encode(self._out.encoding or "utf-8", "backslashreplace"))
        while data:
            data = data[os.write(descriptor, data) :]


def describe_pacing(pacing: Pacing | None) -> None:
    """Say on stdout how answers are paced, when they are."""
    if isinstance(pacing, RecordedPacing):
        times = pacing.times
        last = times.reads[-1][1] if times.reads else 0.0
        print(f"pacing: as recorded ({len(times.reads)} reads over {last:.3f} s)")
    elif isinstance(pacing, TokenPacing):
        tokens = "the scenario's" if pacing.tokens is None else str(pacing.tokens)
        jitter = f", jitter +-{pacing.jitter * 1000:g} ms" if pacing.jitter else ""
        print(
            f"pacing: first token after {pacing.first_token * 1000:g} ms, then one every "
            f"{pacing.per_token * 1000:g} ms, {tokens} tokens an answer{jitter}"
        )


def _authority(host: str, port: int) -> str:
    """``host:port``, with an IPv6 address in brackets (``[::1]:8000``), as in a URL."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

"""``chunkwise bench``: the command; the run and its report are :mod:`chunkwise_tools.bench`'s.

It turns the arguments into a :class:`~chunkwise_tools.bench.BenchPlan`
(endpoint without retries, ``--timeout`` as the idle timeout, the bodies of
the prompts), runs it, prints the report document as text or ``--json`` and
writes ``--report FILE.html``.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import attrs
import trio

from chunkwise import (
    Retries,
)
from chunkwise.lowlevel import exceptions_unwrapped

from ..bench import (
    GIVE_UP_AFTER,
    BenchPlan,
    RunState,
    bench_document,
    describe_document,
    run_plan,
    write_report,
)
from ._commands import COMMANDS
from ._common import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_STREAM,
    PROG,
    CommandsAction,
    Failure,
    UsageError,
    describe_failure,
    json_text,
    positive_int,
    prepare_json_output,
    print_failure,
    quiet_collector,
    seconds,
)
from ._options import (
    COMMAND_APIS,
    CommandApi,
    add_api_option,
    add_endpoint_options,
    add_request_options,
    command_api,
    endpoint_from_args,
)

__all__ = ["DEFAULT_TIMEOUT", "add_bench_command", "plan_from_args", "read_prompts", "run_bench"]

#: ``--timeout``: far above any gap of a working stream, far below a run's patience.
DEFAULT_TIMEOUT = 60.0

_DEFAULT_REQUESTS = 100


def add_bench_command(commands: CommandsAction) -> None:
    """Register ``chunkwise bench``."""
    bench = commands.add_parser(
        "bench",
        help=COMMANDS["bench"],
        description=(
            "Send streaming requests to an OpenAI-compatible endpoint (chat completions, the\n"
            "Responses API with --api responses, legacy completions with --api completions,\n"
            "Anthropic's Messages with --api messages) from --concurrency workers or at --rate\n"
            "requests a second (Poisson arrivals), and report the requests ok and failed by\n"
            "kind, time to first token (TTFT), time per output token (TPOT), the gaps between\n"
            "reads carrying output and end-to-end latency (mean, p50, p90, p99, max), output\n"
            "tokens a second and requests a second.  A progress line shows on a terminal\n"
            "(stderr), nothing on a pipe.  --json prints the report as JSON; --report writes\n"
            "a self-contained HTML page with charts."
        ),
        epilog=(
            "example:\n"
            "  chunkwise serve --first-token 0.2 --per-token 0.02 --tokens 100 &\n"
            "  chunkwise bench --base-url http://127.0.0.1:8000/v1 --model text \\\n"
            "    --requests 200 --concurrency 50 --report bench.html\n\n"
            f"When the first {GIVE_UP_AFTER} requests all fail the same way (a wrong URL, a\n"
            "closed port, a missing key), bench stops and says why.  Ctrl-C reports the\n"
            "requests that finished (and writes --report).\n\n"
            "exit status: 0 every request completed, 1 some failed, 2 bad usage,\n"
            "130 interrupted"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    load = bench.add_argument_group("load")
    load.add_argument(
        "--requests",
        type=positive_int,
        metavar="N",
        help=f"send N requests (default {_DEFAULT_REQUESTS}, or no limit with --duration)",
    )
    mode = load.add_mutually_exclusive_group()
    mode.add_argument(
        "--concurrency",
        type=positive_int,
        metavar="C",
        help="keep C requests in flight (default 1)",
    )
    mode.add_argument(
        "--rate",
        type=seconds(0, 1e6, allow_low=False),
        metavar="R",
        help="issue R requests a second on average, at Poisson arrivals",
    )
    load.add_argument(
        "--duration",
        type=seconds(0, 1e6, allow_low=False),
        metavar="S",
        help="stop issuing requests after S seconds (those in flight finish)",
    )
    load.add_argument(
        "--seed", type=int, default=0, metavar="N", help="seed of --rate's arrivals (default 0)"
    )
    load.add_argument(
        "--timeout",
        type=seconds(0, 86400, allow_low=False),
        default=DEFAULT_TIMEOUT,
        metavar="S",
        help="fail a request (IdleTimeout) when nothing arrives for S seconds: for the "
        f"response head or the next bytes of its stream (default {DEFAULT_TIMEOUT:g})",
    )
    prompts = bench.add_argument_group("prompts")
    prompts.add_argument(
        "--prompt",
        metavar="TEXT",
        action="append",
        help="a user message (repeat for several, used in turn; default 'Hello')",
    )
    prompts.add_argument(
        "--prompts",
        metavar="FILE.jsonl",
        help="one prompt a line, used in turn: a JSON string, or an object with "
        '"prompt" (a string; completions: any prompt) or "messages" (chat, Messages) / '
        '"input" (Responses)',
    )
    add_endpoint_options(bench)
    add_api_option(bench)
    add_request_options(bench)
    output = bench.add_argument_group("output")
    output.add_argument("--json", action="store_true", help="print the report as JSON")
    output.add_argument(
        "--report",
        metavar="FILE.html",
        help="also write a self-contained HTML page with charts of the run",
    )
    bench.set_defaults(handler=run_bench)


def run_bench(args: argparse.Namespace) -> int:
    """``chunkwise bench``: returns the exit status."""
    plan = plan_from_args(args)
    if args.json:
        prepare_json_output()
    progress = sys.stderr if sys.stderr is not None and sys.stderr.isatty() else None
    quiet_collector()
    state = RunState()
    try:
        with exceptions_unwrapped():
            trio.run(run_plan, plan, progress, state)
    except KeyboardInterrupt:
        state.interrupted = True  # report what finished (rule 7 of the runner)
    if state.gave_up:
        print_failure(_first_failure(args, plan, state), f"{PROG} bench: error: ")
    document = bench_document(plan, state, model=_model_of(plan))
    if args.json:
        sys.stdout.write(json_text(document, indent=2) + "\n")
    else:
        sys.stdout.write("".join(line + "\n" for line in describe_document(document)))
    if args.report is not None:
        try:
            write_report(document, args.report)
        except OSError as exc:
            raise UsageError(f"cannot write {args.report!r}: {exc.strerror or exc}") from None
    if state.interrupted:
        return EXIT_INTERRUPTED
    return EXIT_OK if state.errors == 0 else EXIT_STREAM


def _first_failure(args: argparse.Namespace, plan: BenchPlan, state: RunState) -> Failure:
    """Why a run gave up: the first failure, explained as ``chat`` explains it."""
    done = state.done
    if state.first_error is not None:
        failure = describe_failure(state.first_error, plan.endpoint, args.api_key_env)
    else:
        failure = Failure(message=str(state.records[0].error))
    message = f"all {done} requests failed the same way, so no more were sent: {failure.message}"
    return attrs.evolve(failure, message=message)


def _model_of(plan: BenchPlan) -> str | None:
    model = json.loads(plan.bodies[0]).get("model") if plan.bodies else None
    return model if isinstance(model, str) else None


def plan_from_args(args: argparse.Namespace) -> BenchPlan:
    """The :class:`BenchPlan` of ``chunkwise bench``'s arguments (usage errors raised)."""
    # No retries: a benchmark measures what the server answered.
    endpoint = endpoint_from_args(args)
    endpoint = attrs.evolve(
        endpoint,
        retries=Retries(max_retries=0),
        timeouts=attrs.evolve(endpoint.timeouts, idle=args.timeout),
    )
    api = command_api(args)
    if args.prompt and args.prompts:
        raise UsageError("give --prompt or --prompts, not both")
    prompts: list[Any] = read_prompts(args.prompts) if args.prompts else args.prompt or ["Hello"]
    bodies = tuple(_body(args, prompt, api) for prompt in prompts)
    requests = args.requests
    if requests is None and args.duration is None:
        requests = _DEFAULT_REQUESTS
    concurrency = args.concurrency if args.rate is None else None
    return BenchPlan(
        endpoint=endpoint,
        path=api.api.path,
        bodies=bodies,
        api=api.name,
        requests=requests,
        concurrency=concurrency or (None if args.rate is not None else 1),
        rate=args.rate,
        duration=args.duration,
        seed=args.seed,
    )


#: Where a prompt object may hold its prompt: each API's member.
_PROMPT_KEYS = tuple(entry.prompt_key for entry in COMMAND_APIS.values())


def read_prompts(name: str) -> list[Any]:
    """A JSONL file's prompts: strings, or objects with ``prompt``, ``messages`` or ``input``."""
    try:
        with open(name, encoding="utf-8") as file:
            lines = file.read().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        message = exc.strerror if isinstance(exc, OSError) else str(exc)
        raise UsageError(f"cannot read {name!r}: {message or exc}") from None
    prompts: list[Any] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError:
            raise UsageError(f"{name}:{number}: not JSON") from None
        if isinstance(value, dict) and isinstance(value.get("prompt"), str):
            value = value["prompt"]
        if not (
            isinstance(value, str)
            or (isinstance(value, dict) and any(key in value for key in _PROMPT_KEYS))
        ):
            raise UsageError(
                f'{name}:{number}: expected a string or an object with "prompt", '
                '"messages" or "input"'
            )
        prompts.append(value)
    if not prompts:
        raise UsageError(f"{name}: no prompts")
    return prompts


def _body(args: argparse.Namespace, prompt: Any, api: CommandApi) -> bytes:
    request = api.build(args, prompt if isinstance(prompt, str) else "")
    if isinstance(prompt, dict):
        if api.prompt_key not in prompt:
            raise UsageError(f'--api {api.name}: a prompt object needs "{api.prompt_key}"')
        request[api.prompt_key] = prompt[api.prompt_key]
    if api.usage_on_request:
        # TPOT needs the output token count (the runner's rule 1).
        request["stream_options"] = {"include_usage": True}
    request["stream"] = True
    return json.dumps(request, ensure_ascii=False).encode()

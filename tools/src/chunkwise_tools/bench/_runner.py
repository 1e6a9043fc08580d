"""The ``chunkwise bench`` runner: load and latency against any OpenAI-compatible endpoint.

Theory of operation
-------------------
Requests are issued either by ``--concurrency C`` workers, each sending its
next request as soon as its last one ended (a closed loop), or at ``--rate R``
requests a second with Poisson arrivals (exponential gaps from a generator
seeded by ``--seed``: an open loop, so a slow server meets the same load).
Issuing stops after ``--requests N`` or once ``--duration S`` has passed,
whichever comes first; requests in flight then finish.  Every wait for
progress (the connection, the response head, each read) is bounded by
``--timeout``, the endpoint's idle timeout: a server that stops answering
gives a report of failed requests (``IdleTimeout``), never a silent hang.

Each request runs the client's own layers without the fan-out: the HTTP
request lifecycle (:func:`chunkwise.lowlevel.send_http_request`, over one
connection pool) and the API's sans-IO parser, with a
:class:`chunkwise.lowlevel.TimingRecorder` stamping each read as a stream's
reader does.  So the figures have the definitions of ``result.timings``
(:doc:`timings`): a read has one stamp, a gap is between two reads carrying
output, and nothing but the parse runs between a read and its stamp.

Rules
-----
1. Times are on trio's clock, from the moment a request is issued (a
   worker's turn, or its Poisson arrival): TTFT to the first read carrying
   output, latency to the end of the stream.  TPOT is vLLM's definition
   (``(last - first) / (tokens - 1)``, tokens from the usage, which a chat
   request is asked for with ``stream_options.include_usage``; a Responses
   or Messages stream always has it).
2. Inter-token gaps are pooled over every request, kept exactly (8 bytes a
   gap); quantiles are nearest-rank over the exact values, as are those of
   every per-request figure.  A gap is between two reads, so tokens that came
   in one read are one gap: the report counts the reads that carried more
   than one output event (``reads``), the tokens a server sent together, or
   that arrived while bench was too busy to read them apart.
3. A request fails by *kind*: an HTTP status (``HTTP 429``), a transport
   error (its class name) or a stream that did not complete (``incomplete:
   <reason>``, ``failed: <error type>``).  Failed requests count in the
   error table and in no latency figure: not even their gaps or reads.
4. The live progress line is written to stderr only when it is a terminal,
   and erased before the report; on a pipe nothing but the report is written.
5. The report is one document (``--json``); the text view and the HTML page
   (``--report``, :mod:`._report`) are views of it.
6. A run gives up (``gave_up``) once its first :data:`GIVE_UP_AFTER` requests
   have all failed the same way: a wrong URL, a closed port or a missing key
   would fail the rest too.  It stops issuing, lets those in flight finish, and
   keeps the first failure's error (``first_error``) to be explained.
7. A run interrupted (Ctrl-C: the caller passes its own :class:`RunState` and
   sets ``interrupted``) reports the requests that finished; those cut off
   count nowhere.
"""

from __future__ import annotations

import array
import itertools
import math
import random
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TextIO

import attrs
import trio

from chunkwise import (
    ChunkwiseError,
    Endpoint,
    HTTPStatusError,
    chat,
    completions,
    messages,
    responses,
)
from chunkwise.lowlevel import (
    CHAT,
    COMPLETIONS,
    MESSAGES,
    RESPONSES,
    Api,
    ConnectionPool,
    PoolSettings,
    StreamParser,
    Timed,
    TimingRecorder,
    output_tokens_of,
    send_http_request,
)
from chunkwise.types import DEFAULT_MAX_EVENT_SIZE

__all__ = [
    "GIVE_UP_AFTER",
    "BenchPlan",
    "RequestRecord",
    "RunState",
    "bench_document",
    "describe_document",
    "progress_line",
    "quantiles",
    "reads_line",
    "run_plan",
]

#: The parser of each ``--api`` name (``chunkwise bench``'s choices).
_APIS: dict[str, Api[Any]] = {
    "chat": CHAT,
    "responses": RESPONSES,
    "completions": COMPLETIONS,
    "messages": MESSAGES,
}

_PROGRESS_INTERVAL = 0.5

#: Requests that all failed the same way before a run gives up (rule 6).
GIVE_UP_AFTER = 5


@attrs.frozen(kw_only=True)
class BenchPlan:
    """What to send, how often, to whom."""

    endpoint: Endpoint
    path: str
    bodies: tuple[bytes, ...]
    #: The API: ``"chat"``, ``"responses"``, ``"completions"`` or ``"messages"``
    #: (``--api``); its parser, and how the key is sent (Messages: ``x-api-key``).
    api: str
    requests: int | None
    concurrency: int | None
    rate: float | None
    duration: float | None
    seed: int = 0


@attrs.define(kw_only=True)
class RequestRecord:
    """One request's figures, in seconds from its issue (``start`` from the run's start)."""

    start: float
    ok: bool = False
    error: str | None = None
    ttft: float | None = None
    latency: float | None = None
    tpot: float | None = None
    tokens: int | None = None
    #: When the first output and the end came, seconds from the run's start (for the charts).
    first: float | None = None
    ended: float | None = None


@attrs.define
class RunState:
    """A run as it goes: the records so far and the pooled gaps (rule 2)."""

    records: list[RequestRecord] = attrs.field(factory=list)
    gaps: array.array[float] = attrs.field(factory=lambda: array.array("d"))
    #: Reads that carried output, and those of them that carried more than one
    #: output event (rule 2).
    output_reads: int = 0
    crowded_reads: int = 0
    in_flight: int = 0
    done: int = 0
    errors: int = 0
    started: float = 0.0
    finished: float = 0.0
    #: The first failed request's error, when it raised one (rule 6).
    first_error: ChunkwiseError | None = None
    gave_up: bool = False
    interrupted: bool = False  # set by the caller (rule 7)


# -- the run -----------------------------------------------------------------------


async def run_plan(
    plan: BenchPlan, progress: TextIO | None = None, state: RunState | None = None
) -> RunState:
    """Run ``plan`` into ``state`` (a new one by default); ``progress`` (a terminal) gets the
    live line (rule 4).  A caller that passes ``state`` keeps what finished when the run is
    interrupted (rule 7)."""
    state = RunState() if state is None else state
    state.started = trio.current_time()
    settings = PoolSettings(max_connections=1_000_000, max_idle_connections=1_000_000)
    pool: ConnectionPool[Any] = ConnectionPool(settings)
    numbers = itertools.count()
    deadline = math.inf if plan.duration is None else state.started + plan.duration

    def next_number() -> int | None:
        number = next(numbers)
        if plan.requests is not None and number >= plan.requests:
            return None
        if state.gave_up:
            return None
        if trio.current_time() >= deadline:
            return None
        return number

    try:
        async with trio.open_nursery() as outer:
            if progress is not None:
                outer.start_soon(_show_progress, state, plan, progress)
            async with trio.open_nursery() as nursery:
                if plan.rate is not None:
                    nursery.start_soon(_arrivals, plan, state, pool, next_number, nursery)
                else:
                    for _ in range(plan.concurrency or 1):
                        nursery.start_soon(_worker, plan, state, pool, next_number)
            outer.cancel_scope.cancel()
    finally:
        state.finished = trio.current_time()
        with trio.CancelScope(shield=True):
            await pool.aclose()
        if progress is not None:
            progress.write("\r\x1b[K")
            progress.flush()
    return state


async def _worker(
    plan: BenchPlan,
    state: RunState,
    pool: ConnectionPool[Any],
    next_number: Callable[[], int | None],
) -> None:
    while (number := next_number()) is not None:
        await _one_request(plan, state, pool, number, trio.current_time())


async def _arrivals(
    plan: BenchPlan,
    state: RunState,
    pool: ConnectionPool[Any],
    next_number: Callable[[], int | None],
    nursery: trio.Nursery,
) -> None:
    rng = random.Random(plan.seed)
    rate = plan.rate or 1.0
    due = trio.current_time()
    while True:
        due += rng.expovariate(rate)
        await trio.sleep_until(due)
        number = next_number()
        if number is None:
            return
        # Timed from its arrival (rule 1), even if the loop woke late.
        nursery.start_soon(_one_request, plan, state, pool, number, due)


async def _one_request(
    plan: BenchPlan, state: RunState, pool: ConnectionPool[Any], number: int, issued: float
) -> None:
    record = RequestRecord(start=issued - state.started)
    state.records.append(record)
    state.in_flight += 1
    try:
        record.error = await _measure(plan, state, pool, number, issued, record)
    finally:
        state.in_flight -= 1
        state.done += 1
    record.ok = record.error is None
    if not record.ok:
        state.errors += 1
        if state.done == state.errors == GIVE_UP_AFTER:  # the first to finish all failed
            kinds = {r.error for r in state.records if r.error is not None}
            state.gave_up = len(kinds) == 1  # rule 6


async def _measure(
    plan: BenchPlan,
    state: RunState,
    pool: ConnectionPool[Any],
    number: int,
    issued: float,
    record: RequestRecord,
) -> str | None:
    """Send request ``number``; fill in ``record``; return the failure's kind or ``None``."""
    parser: StreamParser[chat.Result | responses.Result | completions.Result | messages.Result]
    api = _APIS[plan.api]
    parser = api.make_parser({}, DEFAULT_MAX_EVENT_SIZE)
    timed = Timed(parser, TimingRecorder(trio.current_time))
    recorder = timed.recorder
    body = plan.bodies[number % len(plan.bodies)]
    # Kept apart until the request completes: a failed one's count nowhere (rule 3).
    gaps: list[float] = []
    reads = crowded = 0
    try:
        response = await send_http_request(
            plan.endpoint, body, path=plan.path, pool=pool, trace=recorder.trace, auth=api.auth
        )
        try:
            while not parser.finished:
                data = await response.receive_some()
                if not data:
                    break
                stamp = recorder.read_at  # stamped by the trace, as a stream's reads are
                previous = recorder.last_output
                events = timed.carried(parser.feed(data))
                if stamp is not None and recorder.last_output == stamp:  # carried output
                    reads += 1
                    if len(events) > 1 and sum(e.is_output for e in events) > 1:
                        crowded += 1
                    if previous is not None:
                        gaps.append(stamp - previous)
            if parser.finished:
                await response.release()
        finally:
            recorder.end()
            await response.aclose()
    except ChunkwiseError as exc:
        if state.first_error is None and state.errors == 0:
            state.first_error = exc
        if isinstance(exc, HTTPStatusError):
            return f"HTTP {exc.status_code}"
        return type(exc).__name__
    if not parser.finished:
        timed.carried(parser.end(), read=False)
    result = timed.result
    timings = recorder.final(result.usage)
    if recorder.first_output is not None:
        record.ttft = recorder.first_output - issued
        record.first = recorder.first_output - state.started
    end = recorder.ended if recorder.ended is not None else trio.current_time()
    record.latency = end - issued
    record.ended = end - state.started
    record.tpot = timings.time_per_output_token
    record.tokens = output_tokens_of(result.usage)
    if result.status == "complete":
        state.gaps.extend(gaps)
        state.output_reads += reads
        state.crowded_reads += crowded
        return None
    if result.status == "incomplete":
        reason = result.reason
        return f"incomplete: {reason.value if reason is not None else 'unknown'}"
    error = result.error
    return f"failed: {getattr(error, 'type', None) or type(error).__name__}"


async def _show_progress(state: RunState, plan: BenchPlan, out: TextIO) -> None:
    while True:
        out.write("\r\x1b[K" + progress_line(state, plan))
        out.flush()
        await trio.sleep(_PROGRESS_INTERVAL)


def progress_line(state: RunState, plan: BenchPlan) -> str:
    """The live line: done, in flight, errors, running TTFT p50 (rule 4)."""
    total = f"/{plan.requests}" if plan.requests is not None else ""
    ttfts = [r.ttft for r in state.records if r.ok and r.ttft is not None]
    ttft = f"{quantiles(ttfts)['p50'] * 1000:.1f} ms" if ttfts else "-"
    return (
        f"done {state.done}{total}  in flight {state.in_flight}  errors {state.errors}  "
        f"TTFT p50 {ttft}"
    )


# -- the report --------------------------------------------------------------------


def quantiles(values: Sequence[float]) -> dict[str, float]:
    """``mean``, nearest-rank ``p50``, ``p90``, ``p99``, and ``max`` of ``values`` (not empty)."""
    ordered = sorted(values)
    count = len(ordered)

    def rank(q: float) -> float:
        return ordered[max(1, math.ceil(q * count)) - 1]

    return {
        "mean": math.fsum(ordered) / count,
        "p50": rank(0.5),
        "p90": rank(0.9),
        "p99": rank(0.99),
        "max": ordered[-1],
    }


def _stats(values: Sequence[float]) -> dict[str, Any] | None:
    if not values:
        return None
    return {"count": len(values), **quantiles(values)}


_HISTOGRAM_BINS = 40


def _histogram(values: Sequence[float]) -> dict[str, Any] | None:
    """Equal bins from the smallest value to the 99.9th percentile; the rest in the last bin."""
    if not values:
        return None
    ordered = sorted(values)
    low = ordered[0]
    high = ordered[min(len(ordered) - 1, math.ceil(0.999 * len(ordered)) - 1)]
    if high <= low:
        high = low + max(abs(low) * 0.01, 1e-6)
    width = (high - low) / _HISTOGRAM_BINS
    counts = [0] * _HISTOGRAM_BINS
    for value in ordered:
        counts[min(int((value - low) / width), _HISTOGRAM_BINS - 1)] += 1
    return {
        "edges": [low + i * width for i in range(_HISTOGRAM_BINS + 1)],
        "counts": counts,
        "beyond_last_edge": sum(1 for value in ordered if value > high),
    }


def _per_second(state: RunState, elapsed: float) -> dict[str, list[float]]:
    """Output tokens and completed requests in each second of the run.

    A request's tokens are spread evenly from its first output to its end (a
    throughput, not a count of endings); a request counts in the second it ended.
    """
    seconds_ = max(1, math.ceil(elapsed))
    tokens = [0.0] * seconds_
    completed = [0.0] * seconds_
    for record in state.records:
        if record.ended is None or not record.ok:
            continue
        completed[min(int(record.ended), seconds_ - 1)] += 1
        count = record.tokens or 0
        first = record.first if record.first is not None else record.ended
        span = record.ended - first
        if span <= 0:
            tokens[min(int(record.ended), seconds_ - 1)] += count
            continue
        for second in range(int(first), min(int(record.ended), seconds_ - 1) + 1):
            overlap = min(record.ended, second + 1) - max(first, second)
            tokens[second] += count * max(overlap, 0.0) / span
    return {
        "second": [float(i) for i in range(seconds_)],
        "output_tokens": tokens,
        "requests": completed,
    }


def bench_document(plan: BenchPlan, state: RunState, *, model: str | None = None) -> dict[str, Any]:
    """The report (rule 5): the ``--json`` document, seconds throughout."""
    elapsed = max(state.finished - state.started, 1e-9)
    records = [r for r in state.records if r.ok or r.error is not None]  # rule 7
    ok = [r for r in records if r.ok]
    errors: dict[str, int] = {}
    for record in records:
        if record.error is not None:
            errors[record.error] = errors.get(record.error, 0) + 1
    ttft = [r.ttft for r in ok if r.ttft is not None]
    tpot = [r.tpot for r in ok if r.tpot is not None]
    latency = [r.latency for r in ok if r.latency is not None]
    tokens = sum(r.tokens or 0 for r in ok)
    gaps = list(state.gaps)
    return {
        "format": "chunkwise-bench",
        "version": 1,
        "endpoint": plan.endpoint.base_url + plan.path,
        "api": plan.api,
        "model": model,
        "load": {
            "requests": plan.requests,
            "concurrency": plan.concurrency,
            "rate": plan.rate,
            "duration": plan.duration,
            "seed": plan.seed if plan.rate is not None else None,
        },
        "requests": {"total": len(records), "ok": len(ok), "failed": errors},
        "interrupted": state.interrupted,
        "gave_up": state.gave_up,
        "elapsed": elapsed,
        "requests_per_second": len(ok) / elapsed,
        "output_tokens": tokens,
        "output_tokens_per_second": tokens / elapsed,
        "reads": {"output": state.output_reads, "several_outputs": state.crowded_reads},
        "ttft": _stats(ttft),
        "tpot": _stats(tpot),
        "inter_token_gap": _stats(gaps),
        "latency": _stats(latency),
        "histograms": {"ttft": _histogram(ttft), "inter_token_gap": _histogram(gaps)},
        "per_second": _per_second(state, elapsed),
        "samples": [
            {"start": r.start, "ok": r.ok, "ttft": r.ttft, "latency": r.latency, "error": r.error}
            for r in sorted(records, key=lambda r: r.start)
        ],
    }


_ROWS = (
    ("TTFT", "ttft"),
    ("TPOT", "tpot"),
    ("inter-token gap", "inter_token_gap"),
    ("latency", "latency"),
)


def describe_document(document: dict[str, Any]) -> Iterator[str]:
    """The text view of a report."""
    load = document["load"]
    if load["rate"] is not None:
        how = f"at {load['rate']:g} requests/s (Poisson)"
    else:
        how = f"concurrency {load['concurrency']}"
    model = f", model {document['model']}" if document["model"] else ""
    yield f"bench: {document['endpoint']} ({document['api']}{model}), {how}"
    counts = document["requests"]
    failed = sum(counts["failed"].values())
    cut = ", interrupted: those that finished" if document.get("interrupted") else ""
    yield f"requests: {counts['total']}, ok {counts['ok']}, failed {failed}{cut}"
    for kind, count in sorted(counts["failed"].items(), key=lambda item: (-item[1], item[0])):
        yield f"  {count:>6}  {kind}"
    yield (
        f"elapsed {document['elapsed']:.2f} s, {document['requests_per_second']:.2f} requests/s, "
        f"{document['output_tokens_per_second']:.1f} output tokens/s"
    )
    yield ""
    yield f"{'(ms)':<16}{'count':>8}{'mean':>10}{'p50':>10}{'p90':>10}{'p99':>10}{'max':>10}"
    for label, key in _ROWS:
        stats = document[key]
        if stats is None:
            yield f"{label:<16}{0:>8}{'-':>10}{'-':>10}{'-':>10}{'-':>10}{'-':>10}"
            continue
        figures = "".join(
            f"{stats[name] * 1000:>10.2f}" for name in ("mean", "p50", "p90", "p99", "max")
        )
        yield f"{label:<16}{stats['count']:>8}{figures}"
    yield ""
    yield reads_line(document["reads"])


def reads_line(reads: dict[str, int]) -> str:
    """The reads carrying output, and how many of them carried several outputs (rule 2)."""
    return (
        f"reads carrying output: {reads['output']}, {reads['several_outputs']} of them with "
        "more than one output event (their tokens are one gap)"
    )

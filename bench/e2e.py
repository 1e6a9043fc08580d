"""End to end: chunkwise over a real loopback socket against the official ``openai`` SDK.

Run from the repository root::

    .venv/bin/python bench/e2e.py            # full run (about a minute on 2 cores)
    .venv/bin/python bench/e2e.py --quick    # smaller sizes, one round: a smoke run

Everything runs in one process, under one ``trio.run``, against one
:mod:`chunkwise.testing` loopback server (trio + h11, plain HTTP on
``127.0.0.1``, chunked framing).  The server picks what to send from the
request's ``model``, so every contender gets the same bytes in the same writes.
The server shares the process and the event loop with the clients, so its cost
is in every figure; the raw-socket floor shows how much that is.

Contenders
----------
chunkwise, 1 / 3 subscribers
    ``open_chat_stream`` with one or three ``stream.subscribe()`` channels,
    each drained with ``async for`` by a consumer task started with
    ``stream.start_soon``, while the block awaits ``stream.result()``.  Every
    consumer collects the text of every ``ContentDelta``.
sdk
    ``openai.AsyncOpenAI(base_url=..., api_key="k").chat.completions.create(...,
    stream=True)`` iterated under ``trio.run`` (the SDK's async client runs on
    anyio, which supports trio), collecting ``choices[i].delta.content``.
chunkwise, 1 / 3 subscribers, batched
    The same with ``stream.subscribe(batched=True)``: each consumer receives
    one tuple of events per network read, so it pays one channel operation
    (and one trip through the scheduler) per read instead of per event.
chunkwise, 1 subscriber, drain (information only)
    One subscriber whose consumer takes what is buffered with
    ``receive_nowait()`` and awaits ``receive()`` only when the buffer is empty.
    ``receive()`` is a trio checkpoint, so ``async for`` costs one trip through
    the scheduler per event; the difference shows what that costs.
floor (information only)
    A raw ``trio.open_tcp_stream`` that sends the request and reads the response
    until the server closes, parsing nothing: the cost of the server and the
    loopback socket, which every contender pays too.

Measurements
------------
throughput
    (1) ``--chunks`` content chunks (default 20,000) of realistic
    ``chat.completion.chunk`` JSON, about 220 bytes an event, plus a role chunk,
    a finish chunk, a usage chunk and ``[DONE]``, sent in 64 KiB writes (one
    HTTP chunk each); (2) a quarter as many chunks, one event per write, as a
    model streams them.  Content deltas per second, the best of ``--repeat``
    interleaved rounds; every run's reconstructed text is checked.  With three
    subscribers, events/s counts the stream's deltas once (each is delivered
    three times).
latency
    A handler writes content events one per write (one HTTP chunk each),
    sleeping between writes, and puts ``time.perf_counter_ns()`` taken just
    before each write into the event's content.  A consumer subtracts it from
    ``perf_counter_ns()`` when the delta reaches it (same process, same clock).
    Two runs: ``--latency-events`` (default 2,000) events ``--gap`` (1 ms)
    apart for the median and p99, and 50 events ``--probe-gap`` (20 ms) apart.
    Also counted: the share of events that reached the consumer before the
    server wrote the next one.  A client that waited for further bytes could
    never receive an event before the next write; with a 1 ms gap a stall of
    the machine can also make an event late, with 20 ms it takes a long one.
concurrency
    ``--streams`` (default 1,000) chunkwise streams at once, each a small body
    of 50 content chunks written one event per write.  The server sends every
    response head at once but holds back the bodies until all requests have
    arrived, so every stream is open at the same time.  Checks that every
    stream completes with the right text.  Reports the total time (and, for
    information, the same with raw sockets) and the growth of peak RSS
    (``ru_maxrss``) divided by the number of streams.  Both ends of every
    connection are in this process, so the figure includes the server's side.
    This runs first, so that the larger runs do not set the peak.

Targets are reported, not asserted: chunkwise at least 3x the SDK's
throughput on body (1) with 1 and with 3 subscribers, at least 10x with one
batched subscriber and 6x with three; every chunkwise event received before the
server's next write (20 ms gap); every concurrent stream open at once and
complete.
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import os
import platform
import resource
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import openai
import trio
from _workload import head_event, make_chunk, make_events, print_table, sse_event, tail_events

import chunkwise
from chunkwise.testing import RecordedRequest, ResponseWriter, open_test_server

KIB = 1024

MESSAGES = [{"role": "user", "content": "Say something long."}]


# -- bodies -------------------------------------------------------------------


# -- the server -----------------------------------------------------------------


class Server:
    """What the loopback server's handler sends, chosen by the request's ``model``.

    ``bulk``: the throughput body in 64 KiB writes.  ``drip``: the second
    throughput body, one event per write.  ``timed``: the latency stream, one
    event per write.  ``small``: the concurrency body, one event per write,
    after every expected request has arrived.
    """

    def __init__(self, bulk: bytes, drip: list[bytes], small: list[bytes]) -> None:
        self.bulk = bulk
        self.drip = drip
        self.small = small
        self.timed_events, self.timed_gap = 0, 0.0  # set before each latency run
        self.write_times: list[int] = []  # perf_counter_ns before each timed write
        self.small_expected = 0
        self.small_arrived = 0
        self.all_arrived = trio.Event()
        prefix, _, suffix = sse_event(make_chunk({"content": "@"})).partition(b"@")
        self._timed_prefix, self._timed_suffix = prefix + b" ", suffix

    def expect_small(self, count: int) -> None:
        self.small_expected, self.small_arrived = count, 0
        self.all_arrived = trio.Event()

    async def handle(self, request: RecordedRequest, writer: ResponseWriter) -> None:
        model = request.json()["model"]
        await writer.start()
        if model == "bulk":
            body = self.bulk
            for i in range(0, len(body), 64 * KIB):
                await writer.write(body[i : i + 64 * KIB])
        elif model == "drip":
            for event in self.drip:
                await writer.write(event)
        elif model == "timed":
            await self._timed(writer)
        elif model == "small":
            self.small_arrived += 1
            if self.small_arrived == self.small_expected:
                self.all_arrived.set()
            await self.all_arrived.wait()
            for event in self.small:
                await writer.write(event)
        else:
            raise ValueError(f"unknown model {model!r}")
        await writer.end()

    async def _timed(self, writer: ResponseWriter) -> None:
        times = self.write_times = []
        count, gap = self.timed_events, self.timed_gap
        now = time.perf_counter_ns
        prefix, suffix = self._timed_prefix, self._timed_suffix
        await writer.write(head_event())
        for _ in range(count):
            await trio.sleep(gap)
            t = now()
            times.append(t)
            await writer.write(b"%s%d%s" % (prefix, t, suffix))
        await trio.sleep(gap)
        times.append(now())  # the time of the write after the last timed event
        await writer.write(b"".join(tail_events(count)))


# -- contenders -----------------------------------------------------------------


_NO_STAMPS: list[int] = []


async def _collect(
    channel: trio.MemoryReceiveChannel[chunkwise.Event], parts: list[str], stamps: list[int]
) -> None:
    """The plain consumer: ``async for`` over the channel."""
    content_delta = chunkwise.chat.TextDelta
    timed = stamps is not _NO_STAMPS
    now = time.perf_counter_ns
    async with channel:
        async for event in channel:
            if type(event) is content_delta:
                if timed:
                    stamps.append(now())
                parts.append(event.text)


async def _drain(
    channel: trio.MemoryReceiveChannel[chunkwise.Event], parts: list[str], stamps: list[int]
) -> None:
    """A consumer that empties the buffer with ``receive_nowait`` and awaits only when it is empty.

    ``receive()`` is a checkpoint, so ``async for`` costs a trip through the
    scheduler per event; this costs one per batch.  Information only.
    """
    content_delta = chunkwise.chat.TextDelta
    async with channel:
        while True:
            try:
                event = channel.receive_nowait()
            except trio.WouldBlock:
                try:
                    event = await channel.receive()
                except trio.EndOfChannel:
                    break
            except trio.EndOfChannel:
                break
            if type(event) is content_delta:
                parts.append(event.text)


async def _collect_batches(
    channel: trio.MemoryReceiveChannel[chunkwise.types.Batch], parts: list[str], stamps: list[int]
) -> None:
    """The batched consumer: ``async for`` over tuples, one per network read."""
    content_delta = chunkwise.chat.TextDelta
    timed = stamps is not _NO_STAMPS
    now = time.perf_counter_ns
    async with channel:
        async for batch in channel:
            if timed:
                received = now()
            for event in batch:
                if type(event) is content_delta:
                    if timed:
                        stamps.append(received)
                    parts.append(event.text)


async def run_chunkwise(
    endpoint: chunkwise.Endpoint,
    model: str,
    subscribers: int,
    *,
    timed: bool = False,
    drain: bool = False,
    batched: bool = False,
) -> list[tuple[list[str], list[int]]]:
    """One stream with ``subscribers`` consumers; each one's texts and receive times."""
    out: list[tuple[list[str], list[int]]] = [
        ([], [] if timed else _NO_STAMPS) for _ in range(subscribers)
    ]
    request = {"model": model, "messages": MESSAGES}
    async with chunkwise.chat.open_stream(endpoint, request) as stream:
        for parts, stamps in out:
            if batched:
                channel = stream.subscribe(batched=True)
                stream.start_soon(_collect_batches, channel, parts, stamps)
            else:
                consumer = _drain if drain else _collect
                stream.start_soon(consumer, stream.subscribe(), parts, stamps)
        result = await stream.result()
    if result.status != "complete":
        raise AssertionError(f"chunkwise: stream ended {result.status}: {result.error}")
    return out


async def run_sdk(
    client: openai.AsyncOpenAI, model: str, timed: bool = False
) -> list[tuple[list[str], list[int]]]:
    """One stream through the SDK's async client; its texts and receive times."""
    parts: list[str] = []
    stamps: list[int] = [] if timed else _NO_STAMPS
    now = time.perf_counter_ns
    stream = await client.chat.completions.create(model=model, messages=MESSAGES, stream=True)
    async with stream:
        async for chunk in stream:
            for choice in chunk.choices:
                text = choice.delta.content
                if text:
                    if timed:
                        stamps.append(now())
                    parts.append(text)
    return [(parts, stamps)]


async def run_floor(host: str, port: int, request: bytes) -> int:
    """Send ``request`` on a raw socket and read until the server closes; bytes read."""
    total = 0
    async with await trio.open_tcp_stream(host, port) as sock:
        await sock.send_all(request)
        while data := await sock.receive_some(64 * KIB):
            total += len(data)
    return total


def _raw_request(host: str, port: int, model: str) -> bytes:
    body = json.dumps({"model": model, "messages": MESSAGES, "stream": True}).encode()
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode() + body


# -- measurements ---------------------------------------------------------------


Job = Callable[[], Awaitable[Any]]


async def best_of_interleaved(
    repeat: int, jobs: dict[str, Job], check: Callable[[str, Any], None]
) -> dict[str, float]:
    """Best time of each job over ``repeat`` rounds; each round runs every job once."""
    best = dict.fromkeys(jobs, float("inf"))
    for _ in range(repeat):
        for name, job in jobs.items():
            gc.collect()
            start = time.perf_counter()
            got = await job()
            best[name] = min(best[name], time.perf_counter() - start)
            check(name, got)
    return best


def _percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    rank = max(1, min(len(sorted_values), round(q / 100 * len(sorted_values) + 0.5)))
    return sorted_values[rank - 1]


class Latency:
    def __init__(self, stamps: list[list[int]], write_times: list[int], n: int) -> None:
        lat: list[float] = []
        before_next = 0
        self.complete = all(len(s) == n for s in stamps) and len(write_times) == n + 1
        for received in stamps:
            for i, got in enumerate(received[:n]):
                lat.append((got - write_times[i]) / 1000)
                before_next += got < write_times[i + 1]
        lat.sort()
        self.samples = len(lat)
        self.median = statistics.median(lat)
        self.p99 = _percentile(lat, 99)
        self.max = lat[-1]
        self.before_next = before_next / len(lat)


async def measure_concurrency(
    endpoint: chunkwise.Endpoint, server: Server, n_streams: int, expected: str
) -> dict[str, Any]:
    open_now = peak_open = completed = wrong = 0
    server.expect_small(n_streams)

    async def one() -> None:
        nonlocal open_now, peak_open, completed, wrong
        parts: list[str] = []
        request = {"model": "small", "messages": MESSAGES}
        async with chunkwise.chat.open_stream(endpoint, request) as stream:
            open_now += 1
            peak_open = max(peak_open, open_now)
            async for event in stream:
                if type(event) is chunkwise.chat.TextDelta:
                    parts.append(event.text)
            result = stream.snapshot
            open_now -= 1
        if result.status == "complete" and "".join(parts) == expected == result.content:
            completed += 1
        else:
            wrong += 1

    gc.collect()
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for _ in range(n_streams):
            nursery.start_soon(one)
    seconds = time.perf_counter() - start
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "completed": completed,
        "wrong": wrong,
        "peak_open": peak_open,
        "seconds": seconds,
        "rss_before_kib": rss_before,
        "rss_after_kib": rss_after,
    }


async def measure_floor_concurrency(
    host: str, port: int, server: Server, n_streams: int, size: int
) -> float:
    """The same as :func:`measure_concurrency` with raw sockets that parse nothing; seconds."""
    server.expect_small(n_streams)
    raw = _raw_request(host, port, "small")
    short = 0

    async def one() -> None:
        nonlocal short
        short += await run_floor(host, port, raw) < size

    gc.collect()
    start = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for _ in range(n_streams):
            nursery.start_soon(one)
    if short:
        raise AssertionError(f"floor: {short} responses shorter than the body")
    return time.perf_counter() - start


def raise_nofile(needed: int) -> str:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        new = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
        return f"RLIMIT_NOFILE soft limit raised from {soft} to {new}"
    return f"RLIMIT_NOFILE soft limit {soft} (enough)"


# -- report -----------------------------------------------------------------------


SDK = "sdk AsyncOpenAI"
CW1 = "chunkwise, 1 subscriber"
CW3 = "chunkwise, 3 subscribers"
CW1B = "chunkwise, 1 subscriber, batched"
CW3B = "chunkwise, 3 subscribers, batched"
CW1_DRAIN = "chunkwise, 1 sub., drain (info)"
FLOOR = "floor: raw socket (info)"


async def amain(args: argparse.Namespace) -> int:
    quick = args.quick
    repeat = 1 if quick and args.repeat == 3 else args.repeat
    n_chunks = args.chunks or (2_000 if quick else 20_000)
    n_drip = max(1, n_chunks // 4)
    n_latency = args.latency_events or (200 if quick else 2_000)
    n_probe = 20 if quick else 50
    n_streams = args.streams or (200 if quick else 1_000)
    gap = args.gap

    events, expected = make_events(n_chunks)
    bulk = b"".join(events)
    drip, drip_expected = make_events(n_drip, seed=11)
    small_events, small_expected = make_events(50, seed=7)
    server = Server(bulk, drip, small_events)

    versions = (chunkwise.__version__, openai.__version__, trio.__version__)
    print("chunkwise {}, openai {}, trio {}".format(*versions))
    print(
        f"Python {platform.python_version()} ({platform.python_implementation()}), "
        f"{platform.platform()}, {os.cpu_count()} CPUs"
    )
    print(raise_nofile(2 * n_streams + 256))
    print(
        f"throughput (1): {n_chunks:,} content chunks, {len(events):,} events, "
        f"{len(bulk):,} bytes ({len(bulk) / len(events):.0f} bytes/event), "
        f"{-(-len(bulk) // (64 * KIB)):,} writes of 64 KiB"
    )
    print(f"throughput (2): {n_drip:,} content chunks, {len(drip):,} events, one per write")
    print(
        f"latency: {n_latency:,} content events, one per write, {gap * 1000:g} ms apart, "
        f"and {n_probe} events {args.probe_gap * 1000:g} ms apart"
    )
    print(f"concurrency: {n_streams:,} streams of 50 content chunks, one event per write")
    print()

    async with open_test_server(server.handle) as srv:
        endpoint = srv.endpoint()
        host, port = srv.host, srv.port

        # -- concurrency first: ru_maxrss is a high-water mark -----------------
        conc = await measure_concurrency(endpoint, server, n_streams, small_expected)
        small_size = len(b"".join(small_events))
        conc_floor = await measure_floor_concurrency(host, port, server, n_streams, small_size)

        # -- throughput ------------------------------------------------------
        sdk_client = openai.AsyncOpenAI(base_url=srv.base_url, api_key="k", max_retries=0)
        # model -> (body bytes, content deltas, text)
        bodies = {
            "bulk": (len(bulk), n_chunks, expected),
            "drip": (len(b"".join(drip)), n_drip, drip_expected),
        }
        jobs: dict[str, Job] = {}
        for model in bodies:
            raw = _raw_request(host, port, model)
            jobs |= {
                f"{model}|{CW1}": functools.partial(run_chunkwise, endpoint, model, 1),
                f"{model}|{CW3}": functools.partial(run_chunkwise, endpoint, model, 3),
                f"{model}|{CW1B}": functools.partial(
                    run_chunkwise, endpoint, model, 1, batched=True
                ),
                f"{model}|{CW3B}": functools.partial(
                    run_chunkwise, endpoint, model, 3, batched=True
                ),
                f"{model}|{SDK}": functools.partial(run_sdk, sdk_client, model),
                f"{model}|{CW1_DRAIN}": functools.partial(
                    run_chunkwise, endpoint, model, 1, drain=True
                ),
                f"{model}|{FLOOR}": functools.partial(run_floor, host, port, raw),
            }

        def check(name: str, got: Any) -> None:
            size, count, text = bodies[name.partition("|")[0]]
            if isinstance(got, int):
                if got < size:
                    raise AssertionError(f"{name}: read {got} bytes, fewer than the body")
                return
            for parts, _ in got:
                if "".join(parts) != text or len(parts) != count:
                    raise AssertionError(f"{name}: wrong content")

        best = await best_of_interleaved(repeat, jobs, check)

        # -- latency ---------------------------------------------------------------
        latency: dict[tuple[str, str], Latency] = {}
        for count, pause in ((n_latency, gap), (n_probe, args.probe_gap)):
            server.timed_events, server.timed_gap = count, pause
            for name, job in (
                (CW1, functools.partial(run_chunkwise, endpoint, "timed", 1, timed=True)),
                (CW3, functools.partial(run_chunkwise, endpoint, "timed", 3, timed=True)),
                (
                    CW3B,
                    functools.partial(
                        run_chunkwise, endpoint, "timed", 3, timed=True, batched=True
                    ),
                ),
                (SDK, functools.partial(run_sdk, sdk_client, "timed", True)),
            ):
                gc.collect()
                out = await job()
                stamps = [s for _, s in out]
                latency[f"{pause * 1000:g} ms", name] = Latency(stamps, server.write_times, count)
        await sdk_client.close()

    # -- report ----------------------------------------------------------------------
    print(f"Throughput (best of {repeat}, interleaved; events = content deltas)")
    rows = []
    labels = {"bulk": "(1) 64 KiB writes", "drip": "(2) one event/write"}
    for model, (size, count, _) in bodies.items():
        label = labels[model]
        t_sdk = best[f"{model}|{SDK}"]
        for contender in (CW1, CW3, CW1B, CW3B, SDK, CW1_DRAIN, FLOOR):
            t = best[f"{model}|{contender}"]
            rows.append(
                (
                    label,
                    contender,
                    f"{t:.3f}",
                    f"{size / t / 1e6:.1f}",
                    f"{count / t:,.0f}",
                    f"{t_sdk / t:.2f}x",
                )
            )
    print_table(("body", "contender", "seconds", "MB/s", "events/s", "vs sdk"), rows, left=2)
    print()
    print("Latency, server write -> consumer receives (one event per write; microseconds)")
    rows = [
        (
            pause,
            name,
            f"{lat.samples:,}",
            f"{lat.median:,.0f}",
            f"{lat.p99:,.0f}",
            f"{lat.max:,.0f}",
            f"{lat.before_next:.1%}",
        )
        for (pause, name), lat in latency.items()
    ]
    head = ("gap", "contender", "samples", "median", "p99", "max", "before next write")
    print_table(head, rows, left=2)
    print()
    rss_growth = conc["rss_after_kib"] - conc["rss_before_kib"]
    per_stream = rss_growth / n_streams
    print(f"Concurrency: {n_streams:,} chunkwise streams at once, 50 content chunks each")
    print(
        f"  completed {conc['completed']:,}/{n_streams:,} with the right text "
        f"({conc['wrong']} wrong), {conc['peak_open']:,} open at the same time, "
        f"{conc['seconds']:.2f} s in all"
    )
    print(
        f"  floor (info): the same with {n_streams:,} raw sockets that parse nothing: "
        f"{conc_floor:.2f} s"
    )
    print(
        f"  peak RSS {conc['rss_before_kib'] / 1024:.1f} -> {conc['rss_after_kib'] / 1024:.1f} "
        f"MiB: {per_stream:.1f} KiB per stream (client and server sides together)"
    )

    # -- targets ---------------------------------------------------------------------
    print()
    print("targets (reported, not asserted):")
    checks: list[tuple[str, str, bool]] = []
    for name, target in ((CW1, 3), (CW3, 3), (CW1B, 10), (CW3B, 6)):
        ratio = best[f"bulk|{SDK}"] / best[f"bulk|{name}"]
        checks.append(
            (f"{name}: >= {target}x the SDK's events/s, (1)", f"{ratio:.2f}x", ratio >= target)
        )
    probe = f"{args.probe_gap * 1000:g} ms"
    for name in (CW1, CW3, CW3B):
        lat = latency[probe, name]
        checks.append(
            (
                f"{name}: every event received before the next write ({probe} gap)",
                f"{lat.before_next:.1%}",
                lat.complete and lat.before_next == 1.0,
            )
        )
    ok = conc["completed"] == n_streams == conc["peak_open"]
    checks.append(
        (
            f"{n_streams:,} concurrent streams: all open at once and complete",
            f"{conc['completed']:,}",
            ok,
        )
    )
    width = max(len(c[0]) for c in checks)
    for text, value, passed in checks:
        print(f"  {text.ljust(width)}  {value:>7}  {'PASS' if passed else 'MISS'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, one round: a smoke run")
    ap.add_argument("--repeat", type=int, default=3, help="best of N throughput rounds (3)")
    ap.add_argument("--chunks", type=int, help="content chunks, throughput (default 20000)")
    ap.add_argument("--latency-events", type=int, help="timed events, latency (default 2000)")
    ap.add_argument("--gap", type=float, default=0.001, help="seconds between timed writes")
    ap.add_argument(
        "--probe-gap",
        type=float,
        default=0.02,
        help="seconds between writes in the wide-gap latency run (default 0.02)",
    )
    ap.add_argument("--streams", type=int, help="concurrent streams (default 1000)")
    args = ap.parse_args(argv)
    return trio.run(amain, args)


if __name__ == "__main__":
    sys.exit(main())

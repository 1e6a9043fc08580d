"""End to end: chunkwise over a real loopback socket against the official ``openai`` SDK.

Run from the repository root::

    .venv/bin/python bench/e2e.py            # full run (about a minute on 2 cores)
    .venv/bin/python bench/e2e.py --quick    # smaller sizes, one round: a smoke run

Everything runs in one process, under one ``trio.run``, against one
:mod:`chunkwise.testing` loopback server (trio + h11, plain HTTP on
``127.0.0.1``).  The server picks what to send from the request's ``model``,
so every contender gets the same bytes in the same writes.

Contenders
----------
chunkwise, 1 / 3 subscribers
    ``open_chat_stream`` with one or three ``stream.subscribe()`` channels,
    each drained by a consumer task started with ``stream.start_soon``, while
    the block awaits ``stream.result()``.  Every consumer collects the text of
    every ``ContentDelta``.
sdk
    ``openai.AsyncOpenAI(base_url=..., api_key="k").chat.completions.create(...,
    stream=True)`` iterated under ``trio.run`` (the SDK's async client runs on
    anyio, which supports trio), collecting ``choices[i].delta.content``.
floor (information only)
    A raw ``trio.open_tcp_stream`` that sends the request and reads the response
    until the server closes, parsing nothing: the cost of the server and the
    loopback socket, which every contender pays too.

Measurements
------------
throughput
    ``--chunks`` content chunks (default 20,000) of realistic
    ``chat.completion.chunk`` JSON, about 220 bytes an event, plus a role chunk,
    a finish chunk, a usage chunk and ``[DONE]``, sent in 64 KiB writes (one
    HTTP chunk each).  Content deltas per second, the best of ``--repeat``
    interleaved rounds; every run's reconstructed text is checked.  With three
    subscribers, events/s counts the stream's deltas once (each is delivered
    three times).
latency
    A handler writes ``--latency-events`` content events one per write (one
    HTTP chunk each), sleeping ``--gap`` (default 1 ms) between writes, and
    puts ``time.perf_counter_ns()`` taken just before each write into the
    event's content.  A consumer subtracts it from ``perf_counter_ns()`` when
    the delta reaches it (same process, same clock).  Also counted: the share
    of events that reached the consumer before the server wrote the next one.
    A client that waited for further bytes could not receive an event before
    the next write.
concurrency
    ``--streams`` (default 1,000) chunkwise streams at once, each a small body
    of 50 content chunks written one event per write.  The server sends every
    response head at once but holds back the bodies until all requests have
    arrived, so every stream is open at the same time.  Checks that every
    stream completes with the right text.  Reports the total time and the
    growth of peak RSS (``ru_maxrss``) divided by the number of streams.  Both
    ends of every connection are in this process, so the figure includes the
    server's side.  This runs first, so that the larger runs do not set the
    peak.

Targets are reported, not asserted: chunkwise at least 3x the SDK's
throughput with 1 and with 3 subscribers; every chunkwise event received
before the server's next write; every concurrent stream complete.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import resource
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import openai
import trio

import chunkwise
from chunkwise.testing import RecordedRequest, ResponseWriter, open_test_server

KIB = 1024

_WORDS = (
    "the of and to a in is that it for you on with as are this be was have not "
    "stream token chunk parse reply model answer question value result "
    "café naïve über façade 東京 データ 🙂"
).split()

_BASE = {
    "id": "chatcmpl-B9mZpQ4vT1sXyL2kR7nHcW3eJ0aFd",
    "object": "chat.completion.chunk",
    "created": 1764633600,
    "model": "gpt-4o-2024-08-06",
}

MESSAGES = [{"role": "user", "content": "Say something long."}]


# -- bodies -------------------------------------------------------------------


def _event(chunk: dict[str, Any]) -> bytes:
    text = json.dumps(chunk, ensure_ascii=False, separators=(",", ":"))
    return b"data: " + text.encode("utf-8") + b"\n\n"


def _chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    return {**_BASE, "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}


def _head_event() -> bytes:
    return _event(_chunk({"role": "assistant", "content": "", "refusal": None}))


def _tail_events(n_chunks: int) -> list[bytes]:
    usage = {"prompt_tokens": 17, "completion_tokens": n_chunks, "total_tokens": n_chunks + 17}
    return [
        _event(_chunk({}, "stop")),
        _event({**_BASE, "choices": [], "usage": usage}),
        b"data: [DONE]\n\n",
    ]


def make_events(n_chunks: int, *, seed: int = 2026) -> tuple[list[bytes], str]:
    """The events of a stream with ``n_chunks`` content chunks, and its text."""
    rnd = random.Random(seed)
    events = [_head_event()]
    parts: list[str] = []
    for _ in range(n_chunks):
        text = " " + " ".join(rnd.choice(_WORDS) for _ in range(rnd.randint(1, 4)))
        parts.append(text)
        events.append(_event(_chunk({"content": text})))
    return events + _tail_events(n_chunks), "".join(parts)


# -- the server -----------------------------------------------------------------


class Server:
    """What the loopback server's handler sends, chosen by the request's ``model``.

    ``bulk``: the throughput body in 64 KiB writes.  ``timed``: the latency
    stream, one event per write.  ``small``: the concurrency body, one event
    per write, after every expected request has arrived.
    """

    def __init__(self, bulk: bytes, small: list[bytes], latency_events: int, gap: float) -> None:
        self.bulk = bulk
        self.small = small
        self.latency_events = latency_events
        self.gap = gap
        self.write_times: list[int] = []  # perf_counter_ns before each timed write
        self.small_expected = 0
        self.small_arrived = 0
        self.all_arrived = trio.Event()
        prefix, _, suffix = _event(_chunk({"content": "@"})).partition(b"@")
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
        now = time.perf_counter_ns
        prefix, suffix = self._timed_prefix, self._timed_suffix
        await writer.write(_head_event())
        for _ in range(self.latency_events):
            await trio.sleep(self.gap)
            t = now()
            times.append(t)
            await writer.write(b"%s%d%s" % (prefix, t, suffix))
        await trio.sleep(self.gap)
        times.append(now())  # the time of the write after the last timed event
        await writer.write(b"".join(_tail_events(self.latency_events)))


# -- contenders -----------------------------------------------------------------


async def _collect(
    channel: trio.MemoryReceiveChannel[chunkwise.Event], parts: list[str], stamps: list[int]
) -> None:
    content_delta = chunkwise.ContentDelta
    timed = stamps is not _NO_STAMPS
    now = time.perf_counter_ns
    async with channel:
        async for event in channel:
            if type(event) is content_delta:
                if timed:
                    stamps.append(now())
                parts.append(event.text)


_NO_STAMPS: list[int] = []


async def run_chunkwise(
    endpoint: chunkwise.Endpoint, model: str, subscribers: int, timed: bool = False
) -> list[tuple[list[str], list[int]]]:
    """One stream with ``subscribers`` consumers; each one's texts and receive times."""
    out = [([], [] if timed else _NO_STAMPS) for _ in range(subscribers)]
    request = {"model": model, "messages": MESSAGES}
    async with chunkwise.open_chat_stream(endpoint, request) as stream:
        for parts, stamps in out:
            stream.start_soon(_collect, stream.subscribe(), parts, stamps)
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
        async with chunkwise.open_chat_stream(endpoint, request) as stream:
            open_now += 1
            peak_open = max(peak_open, open_now)
            async for event in stream:
                if type(event) is chunkwise.ContentDelta:
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


def raise_nofile(needed: int) -> str:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        new = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
        return f"RLIMIT_NOFILE soft limit raised from {soft} to {new}"
    return f"RLIMIT_NOFILE soft limit {soft} (enough)"


# -- report -----------------------------------------------------------------------


def print_table(head: tuple[str, ...], rows: list[tuple[str, ...]], left: int = 1) -> None:
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    for n, row in enumerate([head, *rows]):
        cells = [
            c.ljust(w) if i < left else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        print("  ".join(cells).rstrip())
        if n == 0:
            print("  ".join("-" * w for w in widths))


async def amain(args: argparse.Namespace) -> int:
    quick = args.quick
    repeat = 1 if quick and args.repeat == 3 else args.repeat
    n_chunks = args.chunks or (2_000 if quick else 20_000)
    n_latency = args.latency_events or (200 if quick else 2_000)
    n_streams = args.streams or (200 if quick else 1_000)
    gap = args.gap

    events, expected = make_events(n_chunks)
    bulk = b"".join(events)
    small_events, small_expected = make_events(50, seed=7)
    server = Server(bulk, small_events, n_latency, gap)

    print(f"chunkwise {chunkwise.__version__}, openai {openai.__version__}, trio {trio.__version__}")
    print(
        f"Python {platform.python_version()} ({platform.python_implementation()}), "
        f"{platform.platform()}, {os.cpu_count()} CPUs"
    )
    print(raise_nofile(2 * n_streams + 256))
    print(
        f"throughput body: {n_chunks:,} content chunks, {len(events):,} events, "
        f"{len(bulk):,} bytes ({len(bulk) / len(events):.0f} bytes/event), "
        f"{-(-len(bulk) // (64 * KIB)):,} writes of 64 KiB"
    )
    print(
        f"latency body: {n_latency:,} content events, one per write, {gap * 1000:g} ms apart; "
        f"concurrency: {n_streams:,} streams of 50 content chunks, one event per write"
    )
    print()

    async with open_test_server(server.handle) as srv:
        endpoint = srv.endpoint()
        host, port = srv.host, srv.port

        # -- concurrency first: ru_maxrss is a high-water mark -----------------
        conc = await measure_concurrency(endpoint, server, n_streams, small_expected)

        # -- throughput ------------------------------------------------------
        sdk_client = openai.AsyncOpenAI(base_url=srv.base_url, api_key="k", max_retries=0)
        raw = _raw_request(host, port, "bulk")
        jobs: dict[str, Job] = {
            "chunkwise, 1 subscriber": lambda: run_chunkwise(endpoint, "bulk", 1),
            "chunkwise, 3 subscribers": lambda: run_chunkwise(endpoint, "bulk", 3),
            "sdk AsyncOpenAI": lambda: run_sdk(sdk_client, "bulk"),
            "floor: raw socket (info)": lambda: run_floor(host, port, raw),
        }

        def check(name: str, got: Any) -> None:
            if isinstance(got, int):
                if got < len(bulk):
                    raise AssertionError(f"{name}: read {got} bytes, fewer than the body")
                return
            for parts, _ in got:
                if "".join(parts) != expected or len(parts) != n_chunks:
                    raise AssertionError(f"{name}: wrong content")

        best = await best_of_interleaved(repeat, jobs, check)

        # -- latency ---------------------------------------------------------------
        latency: dict[str, Latency] = {}
        for name, job in (
            ("chunkwise, 1 subscriber", lambda: run_chunkwise(endpoint, "timed", 1, True)),
            ("chunkwise, 3 subscribers", lambda: run_chunkwise(endpoint, "timed", 3, True)),
            ("sdk AsyncOpenAI", lambda: run_sdk(sdk_client, "timed", True)),
        ):
            gc.collect()
            out = await job()
            latency[name] = Latency([s for _, s in out], server.write_times, n_latency)
        await sdk_client.close()

    # -- report ----------------------------------------------------------------------
    t_sdk = best["sdk AsyncOpenAI"]
    print(f"Throughput (best of {repeat}, interleaved; events = content deltas)")
    rows = [
        (
            name,
            f"{t:.3f}",
            f"{len(bulk) / t / 1e6:.1f}",
            f"{n_chunks / t:,.0f}",
            f"{t_sdk / t:.2f}x",
        )
        for name, t in best.items()
    ]
    print_table(("contender", "seconds", "MB/s", "events/s", "vs sdk"), rows)
    print()
    print(
        f"Latency, server write -> consumer receives ({n_latency:,} events, one per write, "
        f"{gap * 1000:g} ms apart; microseconds)"
    )
    rows = [
        (
            name,
            f"{lat.samples:,}",
            f"{lat.median:,.0f}",
            f"{lat.p99:,.0f}",
            f"{lat.max:,.0f}",
            f"{lat.before_next:.1%}",
        )
        for name, lat in latency.items()
    ]
    print_table(("contender", "samples", "median", "p99", "max", "before next write"), rows)
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
        f"  peak RSS {conc['rss_before_kib'] / 1024:.1f} -> {conc['rss_after_kib'] / 1024:.1f} MiB: "
        f"{per_stream:.1f} KiB per stream (client and server sides together)"
    )

    # -- targets ---------------------------------------------------------------------
    print()
    print("targets (reported, not asserted):")
    checks: list[tuple[str, str, bool]] = []
    for name in ("chunkwise, 1 subscriber", "chunkwise, 3 subscribers"):
        ratio = t_sdk / best[name]
        checks.append((f"{name}: >= 3x the SDK's events/s", f"{ratio:.2f}x", ratio >= 3))
    for name in ("chunkwise, 1 subscriber", "chunkwise, 3 subscribers"):
        lat = latency[name]
        checks.append(
            (
                f"{name}: every event received before the next write",
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
    ap.add_argument("--streams", type=int, help="concurrent streams (default 1000)")
    args = ap.parse_args(argv)
    return trio.run(amain, args)


if __name__ == "__main__":
    sys.exit(main())

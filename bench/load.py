"""Load: many concurrent streams in one client process, the server in another.

Run from the repository root::

    .venv/bin/python bench/load.py                   # 10,000 streams x 3 subscribers
    .venv/bin/python bench/load.py --streams 500     # a quicker run
    .venv/bin/python bench/load.py --subscribers 1   # one subscriber a stream
    .venv/bin/python bench/load.py --batched         # subscribe(batched=True)
    .venv/bin/python bench/load.py --buffer-size 8   # each subscriber's buffer_size

The loopback server (:mod:`chunkwise.testing`) runs in its own process (the
``multiprocessing`` ``spawn`` method) and reports its port over a pipe; the
client process opens every stream, over real sockets on 127.0.0.1.  Every
stream sends the same scripted chat completion (multibyte text, a tool call,
usage), written in small pieces with a pause between them.  The server answers
only once all requests have arrived, so every stream is open at the same time
and their bodies interleave, rather than each finishing before the last one
connects.

Connections are made in batches: at most ``--connect-batch`` connects are in
flight at once (the socket is opened under a :class:`trio.CapacityLimiter` and
handed to :func:`chunkwise.chat.open_stream` as its ``transport``), because
a listener's backlog is capped by the kernel at ``net.core.somaxconn`` (trio
asks for the largest backlog already, so a ``backlog`` option on the test
server would change nothing): 10,000 connects at once overflow it.
``--connect-batch 0`` lets chunkwise connect every stream itself, all at once.
The kernel's ``ListenOverflows`` and ``ListenDrops`` counters
(``/proc/net/netstat``) are reported either way.

Verified, not assumed:

* every stream ends ``complete`` with the full text and tool call;
* every subscriber of every stream received exactly the events a
  :class:`~chunkwise.chat.Parser` makes of the body -- each event once, in
  order -- after :class:`~chunkwise.HeadReceived`, then ``EndOfChannel``
  (checked as each event arrives, so the bench keeps no copy of the events);
* the server accepted one connection per stream and saw every one closed;
* how many streams were open at the same time (the peak).

Reported: wall time, events delivered per second (summed over subscribers),
the peak number of streams open at once, and the client process's peak RSS
(``resource.getrusage``, ``ru_maxrss``) over its baseline taken just before the
streams are opened, divided by the number of streams: KiB per stream, against
the target of 30 KiB (PASS/MISS).  The server's own peak RSS is printed for
information.  It is a benchmark, not a test: it exits non-zero only when a
verification fails.  Figures: docs/reliability.rst.
"""

from __future__ import annotations

import argparse
import gc
import json
import multiprocessing
import platform
import resource
import sys
import time
from multiprocessing.connection import Connection
from typing import Any

import trio

import chunkwise
from chunkwise.testing import (
    RecordedRequest,
    ResponseWriter,
    ScriptedResponse,
    open_test_server,
)

REQUEST: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
HOST = "127.0.0.1"
TARGET_KIB = 30.0


def body(pieces: int) -> tuple[bytes, str]:
    """A chat completion with ``pieces`` content deltas, a tool call and usage."""
    base = {"id": "chatcmpl-load", "object": "chat.completion.chunk", "created": 1, "model": "m"}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    words = [f"mot{i} é中😀 " for i in range(pieces)]
    events: list[dict[str, Any]] = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"content": word}) for word in words]
    call = {"index": 0, "id": "call_1", "type": "function"}
    events.append(chunk({"tool_calls": [{**call, "function": {"name": "f", "arguments": ""}}]}))
    events.append(chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"a": 1}'}}]}))
    events.append(chunk({}, "tool_calls"))
    usage = {"prompt_tokens": 5, "completion_tokens": pieces, "total_tokens": pieces + 5}
    events.append({**base, "choices": [], "usage": usage})
    lines = [f"data: {json.dumps(e, ensure_ascii=False)}\n\n" for e in events]
    lines.append("data: [DONE]\n\n")
    return "".join(lines).encode(), "".join(words)


def raise_fd_limit(needed: int, who: str) -> tuple[int, int]:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard limit; exit if that is below ``needed``."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < needed:
        sys.exit(
            f"{who}: RLIMIT_NOFILE hard limit is {hard}, but {needed} file descriptors are "
            f"needed (one socket a stream, plus a margin); raise it (ulimit -Hn) or use "
            f"fewer --streams"
        )
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def peak_rss_kib() -> float:
    # ru_maxrss is in KiB on Linux, bytes on macOS.
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 1024 if sys.platform == "darwin" else float(peak)


def listen_counters() -> dict[str, int]:
    """The kernel's ``TcpExt`` ``ListenOverflows`` and ``ListenDrops`` (Linux; else empty)."""
    try:
        with open("/proc/net/netstat") as f:
            lines = f.read().splitlines()
    except OSError:
        return {}
    for names, values in zip(lines[::2], lines[1::2], strict=False):
        if names.startswith("TcpExt:"):
            table = dict(zip(names.split()[1:], values.split()[1:], strict=True))
            return {k: int(table[k]) for k in ("ListenOverflows", "ListenDrops") if k in table}
    return {}


# -- the server process -------------------------------------------------------------


def serve(conn: Connection, args: argparse.Namespace) -> None:
    """The server process: sends its port, then its counters when told ``"stop"``."""
    raise_fd_limit(args.streams + 256, "server")
    trio.run(_serve, conn, args)


async def _serve(conn: Connection, args: argparse.Namespace) -> None:
    data, _ = body(args.pieces)
    script = ScriptedResponse(body=data, write_sizes=args.write_size, delay=args.delay)
    arrived = 0
    everyone = trio.Event()

    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        # Answer once every stream has sent its request: all of them are then
        # open at the same time, rather than each finishing before the last connects.
        nonlocal arrived
        arrived += 1
        if arrived == args.streams:
            everyone.set()
        await everyone.wait()
        await writer.play(script)

    async with open_test_server(handler, host=HOST) as server:
        conn.send(server.port)
        await trio.to_thread.run_sync(conn.recv)  # "stop": the client is done
        with trio.move_on_after(60):
            await server.wait_client_closed()
        closed = sum(c.client_closed.is_set() for c in server.connections)
        conn.send((len(server.connections), closed, len(server.requests), peak_rss_kib()))


class ServerProcess:
    def __init__(self, args: argparse.Namespace) -> None:
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self._process = context.Process(target=serve, args=(child, args), name="load-server")
        self._process.start()
        child.close()
        if not self._conn.poll(60):
            self.close()
            raise RuntimeError("the server process did not start within 60 s")
        self.port: int = self._conn.recv()

    def stop(self) -> tuple[int, int, int, float]:
        """Connections accepted and closed, requests, peak RSS (KiB) of the server."""
        self._conn.send("stop")
        if not self._conn.poll(90):
            raise RuntimeError("the server process did not report")
        stats: tuple[int, int, int, float] = self._conn.recv()
        return stats

    def close(self) -> None:
        self._process.join(10)
        if self._process.is_alive():
            self._process.terminate()
            self._process.join(5)
        self._conn.close()


# -- the client process -------------------------------------------------------------


class Run:
    def __init__(self, args: argparse.Namespace, expected: list[chunkwise.Event]) -> None:
        self.streams = args.streams
        self.subscribers = args.subscribers
        self.batched: bool = args.batched
        self.buffer_size: int | float = args.buffer_size
        self.expected = expected
        self.open_now = 0
        self.open_peak = 0
        self.all_open_at = 0.0
        self.delivered = 0
        self.failures: list[str] = []
        self.cpu = 0.0
        self.connects = trio.CapacityLimiter(args.connect_batch) if args.connect_batch else None

    async def consume(self, index: int, channel: trio.MemoryReceiveChannel[Any]) -> None:
        # Checked as the events arrive: no copy of them is kept.
        expected = self.expected
        count = 0
        ok = True
        async with channel:
            async for item in channel:
                for event in item if self.batched else (item,):
                    if count == 0:
                        ok = type(event) is chunkwise.HeadReceived
                    elif count > len(expected) or event != expected[count - 1]:
                        ok = False
                    count += 1
        if not ok or count != len(expected) + 1:
            self.failures.append(f"stream {index}: a subscriber's events differ ({count})")
        self.delivered += count

    async def one(self, index: int, endpoint: chunkwise.Endpoint, port: int, text: str) -> None:
        transport = None
        if self.connects is not None:
            async with self.connects:
                transport = await trio.open_tcp_stream(HOST, port)
        async with chunkwise.chat.open_stream(endpoint, REQUEST, transport=transport) as stream:
            self.open_now += 1
            self.open_peak = max(self.open_peak, self.open_now)
            if self.open_now == self.streams:
                self.all_open_at = time.perf_counter()
            for _ in range(self.subscribers):
                channel = stream.subscribe(buffer_size=self.buffer_size, batched=self.batched)
                stream.start_soon(self.consume, index, channel)
            result = await stream.result()
        self.open_now -= 1
        if result.status != "complete" or result.content != text:
            self.failures.append(f"stream {index}: {result.status} {result.reason}")


async def client(args: argparse.Namespace, port: int) -> tuple[Run, float, float, float]:
    """Every stream, verified: (the run, wall time, baseline and peak RSS in KiB)."""
    data, text = body(args.pieces)
    parser = chunkwise.chat.Parser()
    expected = parser.feed(data) + parser.end()
    endpoint = chunkwise.Endpoint(
        f"http://{HOST}:{port}/v1",
        api_key="k",
        timeouts=chunkwise.Timeouts(connect=60, idle=120),
        retries=chunkwise.Retries(max_retries=0),
        trust_env=False,
    )
    run = Run(args, expected)
    gc.collect()
    baseline = peak_rss_kib()
    cpu = time.process_time()
    start = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for i in range(args.streams):
            nursery.start_soon(run.one, i, endpoint, port, text)
    elapsed = time.perf_counter() - start
    run.all_open_at -= start
    run.cpu = time.process_time() - cpu
    return run, elapsed, baseline, peak_rss_kib()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--streams", type=int, default=10_000)
    parser.add_argument("--subscribers", type=int, default=3)
    parser.add_argument("--pieces", type=int, default=40, help="content deltas per stream")
    parser.add_argument("--write-size", type=int, default=512, help="bytes per server write")
    parser.add_argument("--delay", type=float, default=0.005, help="seconds between writes")
    parser.add_argument(
        "--connect-batch",
        type=int,
        default=64,
        help="connects in flight at once (0: chunkwise connects every stream itself)",
    )
    parser.add_argument(
        "--batched",
        action="store_true",
        help="subscribers receive one tuple of events per network read (subscribe(batched=True))",
    )
    parser.add_argument(
        "--buffer-size",
        type=int,
        default=chunkwise.types.DEFAULT_BUFFER_SIZE,
        help="each subscriber's buffer_size (default: chunkwise's, "
        f"{chunkwise.types.DEFAULT_BUFFER_SIZE})",
    )
    args = parser.parse_args()
    limits = raise_fd_limit(args.streams + 256, "client")
    print(f"python {platform.python_version()}, trio {trio.__version__}, {platform.machine()}")
    print(f"RLIMIT_NOFILE (client and server): {limits[0]} (soft), {limits[1]} (hard)")
    data, _ = body(args.pieces)
    check = chunkwise.chat.Parser()
    events_per_stream = len(check.feed(data) + check.end()) + 1  # and ResponseStarted
    server = ServerProcess(args)
    listen_before = listen_counters()
    try:
        run, elapsed, baseline, peak = trio.run(client, args, server.port)
    finally:
        accepted, closed, requests, server_peak = server.stop()
        server.close()
    listen_after = listen_counters()

    style = "batched" if args.batched else "one event at a time"
    print(
        f"streams: {args.streams} x {args.subscribers} subscribers ({style}, buffer_size "
        f"{args.buffer_size}), {len(data)} body bytes "
        f"and {events_per_stream} events per stream, written {args.write_size} bytes "
        f"at a time, {args.delay * 1000:g} ms apart"
    )
    batch = f"at most {args.connect_batch} at once" if args.connect_batch else "all at once"
    overflows = ", ".join(f"{k} +{listen_after[k] - v}" for k, v in listen_before.items())
    print(f"connects: {batch}; kernel {overflows or 'counters unavailable'}")
    print(
        f"concurrently open (peak): {run.open_peak}; server: {accepted} connections, "
        f"{requests} requests, {closed} seen closed"
    )
    print(
        f"wall time: {elapsed:.2f} s ({run.all_open_at:.2f} s until every stream had its "
        f"response headers); client CPU {run.cpu:.2f} s"
    )
    print(f"events delivered: {run.delivered:,} ({run.delivered / elapsed:,.0f} events/s)")
    per_stream = (peak - baseline) / args.streams
    verdict = "PASS" if per_stream <= TARGET_KIB else "MISS"
    print(
        f"client peak RSS: {peak / 1024:.1f} MiB (baseline {baseline / 1024:.1f} MiB): "
        f"{per_stream:.1f} KiB per stream, target <= {TARGET_KIB:g} KiB: {verdict}"
    )
    print(f"server peak RSS (information): {server_peak / 1024:.1f} MiB")

    expected_total = args.streams * args.subscribers * events_per_stream
    if run.delivered != expected_total:
        run.failures.append(f"delivered {run.delivered}, expected {expected_total}")
    if run.open_peak != args.streams:
        run.failures.append(f"peak open {run.open_peak}, expected {args.streams}")
    if accepted != args.streams or closed != accepted:
        run.failures.append(f"server accepted {accepted}, saw {closed} closed")
    if run.failures:
        print(f"FAILED: {len(run.failures)} problems, e.g. {run.failures[:3]}")
        return 1
    print("verified: every event delivered once, in order, to every subscriber")
    return 0


if __name__ == "__main__":
    sys.exit(main())

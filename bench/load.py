"""Load: many concurrent streams, three subscribers each, one process.

Run from the repository root::

    .venv/bin/python bench/load.py                 # 1,000 streams x 3 subscribers
    .venv/bin/python bench/load.py --streams 200   # a quicker run

The loopback server (:mod:`chunkwise.testing`) and every client stream run in
the same trio run, over real sockets on 127.0.0.1.  Every stream sends the same
scripted chat completion (multibyte text, a tool call, usage), written in small
pieces with a pause between them.  The server answers only once all requests
have arrived, so every stream is open at the same time and their bodies
interleave, rather than each finishing before the last one connects.

Verified, not assumed:

* every stream ends ``complete`` with the full text and tool call;
* every subscriber of every stream received exactly the events a
  :class:`~chunkwise.ChatStreamParser` makes of the body -- each event once, in
  order -- after :class:`~chunkwise.ResponseStarted`, then ``EndOfChannel``;
* the server observed every client connection close;
* how many streams were open at the same time (the peak).

Reported: wall time, events delivered per second (summed over subscribers),
peak RSS of the process (``resource.getrusage``; server included) and its
growth over the baseline, per stream.  It is a benchmark, not a test: it exits
non-zero only when a verification fails.  Figures: docs/reliability.rst.
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import resource
import sys
import time
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


def raise_fd_limit(needed: int) -> tuple[int, int]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed:
        target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def rss_mib() -> float:
    # ru_maxrss is in KiB on Linux, bytes on macOS.
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


class Run:
    def __init__(self, streams: int, subscribers: int, expected: list[chunkwise.Event]) -> None:
        self.streams = streams
        self.subscribers = subscribers
        self.expected = expected
        self.open_now = 0
        self.open_peak = 0
        self.delivered = 0
        self.failures: list[str] = []
        self.all_open = trio.Event()
        self.opened = 0

    async def one(self, index: int, endpoint: chunkwise.Endpoint, text: str) -> None:
        received: list[list[chunkwise.Event]] = [[] for _ in range(self.subscribers)]

        async def consume(
            channel: trio.MemoryReceiveChannel[chunkwise.Event], into: list[Any]
        ) -> None:
            async with channel:
                async for event in channel:
                    into.append(event)

        async with chunkwise.open_chat_stream(endpoint, REQUEST) as stream:
            self.open_now += 1
            self.open_peak = max(self.open_peak, self.open_now)
            for i in range(self.subscribers):
                stream.start_soon(consume, stream.subscribe(), received[i])
            result = await stream.result()
        self.open_now -= 1
        if result.status != "complete" or result.content != text:
            self.failures.append(f"stream {index}: {result.status} {result.reason}")
        for i, events in enumerate(received):
            if type(events[0]) is not chunkwise.ResponseStarted or events[1:] != self.expected:
                self.failures.append(f"stream {index} subscriber {i}: events differ")
            self.delivered += len(events)


async def main_async(args: argparse.Namespace) -> int:
    data, text = body(args.pieces)
    parser = chunkwise.ChatStreamParser()
    expected = parser.feed(data) + parser.end()
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

    gc.collect()
    baseline = rss_mib()
    async with open_test_server(handler) as server:
        endpoint = server.endpoint(timeouts=chunkwise.Timeouts(connect=60, idle=60))
        run = Run(args.streams, args.subscribers, expected)
        start = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for i in range(args.streams):
                nursery.start_soon(run.one, i, endpoint, text)
        elapsed = time.perf_counter() - start
        with trio.fail_after(60):
            await server.wait_client_closed()
        connections = len(server.connections)
    peak = rss_mib()
    events_per_stream = len(expected) + 1
    print(f"python {platform.python_version()}, trio {trio.__version__}, {platform.machine()}")
    print(
        f"streams: {args.streams} x {args.subscribers} subscribers, {len(data)} body bytes "
        f"and {events_per_stream} events per stream, written {args.write_size} bytes "
        f"at a time, {args.delay * 1000:g} ms apart"
    )
    print(f"concurrently open (peak): {run.open_peak}; connections closed: {connections}")
    print(f"wall time: {elapsed:.2f} s")
    print(f"events delivered: {run.delivered} ({run.delivered / elapsed:,.0f} events/s)")
    print(f"streams/s: {args.streams / elapsed:,.0f}")
    print(
        f"peak RSS: {peak:.1f} MiB (baseline {baseline:.1f} MiB, "
        f"+{(peak - baseline) * 1024 / args.streams:.1f} KiB per stream, server included)"
    )
    expected_total = args.streams * args.subscribers * events_per_stream
    if run.delivered != expected_total:
        run.failures.append(f"delivered {run.delivered}, expected {expected_total}")
    if run.failures:
        print(f"FAILED: {len(run.failures)} problems, e.g. {run.failures[:3]}")
        return 1
    print("verified: every event delivered once, in order, to every subscriber")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--subscribers", type=int, default=3)
    parser.add_argument("--pieces", type=int, default=40, help="content deltas per stream")
    parser.add_argument("--write-size", type=int, default=512, help="bytes per server write")
    parser.add_argument("--delay", type=float, default=0.005, help="seconds between writes")
    args = parser.parse_args()
    limits = raise_fd_limit(2 * args.streams + 256)  # client and server socket per stream
    print(f"RLIMIT_NOFILE: {limits[0]} (soft), {limits[1]} (hard)")
    return trio.run(main_async, args)


if __name__ == "__main__":
    sys.exit(main())

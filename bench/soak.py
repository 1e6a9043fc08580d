"""Retries that never duplicate, soaked: thousands of streams against a server that fails them.

Run from the repository root::

    .venv/bin/python bench/soak.py            # 2,000 streams, 100 at a time (~1 minute)
    .venv/bin/python bench/soak.py --quick    # 90 streams: a smoke run (a few seconds)

One process, one trio run: ``chunkwise serve``'s server (``open_chat_server``)
on a loopback port fails ``--before`` of its streamed answers before their
first output and ``--after`` just after it (``Faults``: cut, end, an in-stream
server_error / overloaded_error / rate_limit_exceeded, or silence until the
client's idle timeout, drawn with ``--seed``), and says which in each head
(``x-chunkwise-fault``).  ``--streams`` streams, chat, completions and
Responses in turn, run ``--concurrency`` at a time, each with its own
connection and ``Retries(max_retries=--max-retries, before_output=True)``
(short backoff), and ``Timeouts(idle=--idle)``.  Every event of every stream
is read; each attempt is known by its ``HeadReceived`` and its fault header.

Counted, per stream:

duplicated
    its output is not a prefix of the answer (a whole one when complete):
    more than one attempt's output, or any of it twice.  Must be 0.
lost
    it did not complete, though its last attempt was not failed after output
    and retries were left.  Must be 0.
unretried
    an attempt failed before output, retries were left, and no attempt
    followed.  Must be 0.
retried after output
    an attempt failed after output and another followed.  Must be 0.
retried, exhausted, failed after output
    what the faults should give: retries made; streams whose every attempt
    failed before output (``max_retries`` spent); streams ended by a fault
    after output.

Exits 1 when a must-be-0 count is not, or no fault was retried at all.
Results: :doc:`docs/client.rst <../docs/client>` ("Retries that never
duplicate") and ``tools/docs/performance_log.rst``.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import sys
import time
from typing import Any

import attrs
import trio

import chunkwise
from chunkwise import HeadReceived, Retries, Retrying, Timeouts
from chunkwise_tools.server import FAULT_HEADER, Faults, ServerOptions, open_chat_server

APIS: dict[str, tuple[Any, dict[str, Any]]] = {
    "chat": (chunkwise.chat, {"model": "text", "messages": [{"role": "user", "content": "hi"}]}),
    "completions": (chunkwise.completions, {"model": "text", "prompt": "hi"}),
    "responses": (chunkwise.responses, {"model": "tools", "input": "hi"}),
}


@attrs.define
class Stream:
    """What one stream saw: each attempt's fault (None: none), its output and its status."""

    api: str
    faults: list[str | None] = attrs.Factory(list)
    retrying: int = 0
    output: str = ""
    status: str = ""


def output_of(events: list[Any]) -> str:
    """The output a reader sees: text, and a tool call's arguments."""
    return "".join(
        getattr(e, "text", "") or getattr(e, "arguments_delta", "") or getattr(e, "delta", "")
        for e in events
        if e.is_output
    )


async def read_one(api: str, endpoint: chunkwise.Endpoint) -> tuple[list[Any], str]:
    namespace, request = APIS[api]
    async with namespace.open_stream(endpoint, request) as stream:
        events = [event async for event in stream]
    return events, stream.snapshot.status


async def soak(args: argparse.Namespace) -> tuple[list[Stream], dict[str, str], float]:
    retries = Retries(max_retries=args.max_retries, initial_delay=0.01, max_delay=0.05)
    timeouts = Timeouts(idle=args.idle)
    answers: dict[str, str] = {}
    async with open_chat_server() as server:  # the answers, whole
        for api in APIS:
            events, status = await read_one(api, server.endpoint())
            assert status == "complete"
            answers[api] = output_of(events)
    faults = Faults(before_output=args.before, after_output=args.after, seed=args.seed)
    streams = [Stream(api) for api, _ in zip(itertools.cycle(APIS), range(args.streams))]
    limit = trio.CapacityLimiter(args.concurrency)
    async with open_chat_server(ServerOptions(faults=faults)) as server:
        endpoint = server.endpoint(retries=retries, timeouts=timeouts)

        async def run(stream: Stream) -> None:
            async with limit:
                try:
                    events, stream.status = await read_one(stream.api, endpoint)
                except chunkwise.ChunkwiseError as exc:  # no head at all: counted, not raised
                    events, stream.status = [], f"raised {type(exc).__name__}"
            for event in events:
                if type(event) is HeadReceived:
                    stream.faults.append(dict(event.headers).get(FAULT_HEADER))
                elif type(event) is Retrying:
                    stream.retrying += 1
            stream.output = output_of(events)

        started = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for stream in streams:
                nursery.start_soon(run, stream)
        elapsed = time.perf_counter() - started
    return streams, answers, elapsed


def count(streams: list[Stream], answers: dict[str, str], max_retries: int) -> dict[str, int]:
    counts: collections.Counter[str] = collections.Counter()
    for stream in streams:
        answer, faults = answers[stream.api], stream.faults
        counts["streams"] += 1
        counts["attempts"] += len(faults)
        counts["retried"] += stream.retrying
        counts["complete"] += stream.status == "complete"
        for fault in faults:
            if fault is not None:
                counts[f"fault {fault}"] += 1
        whole = stream.output == answer
        if not answer.startswith(stream.output) or (stream.status == "complete" and not whole):
            counts["duplicated"] += 1
        last = faults[-1] if faults else None
        for fault in faults[:-1]:
            if fault is not None and fault.startswith("after-output"):
                counts["retried after output"] += 1
        left = len(faults) <= max_retries
        if last is not None and last.startswith("before-output") and left:
            counts["unretried"] += 1
        counts[f"status {stream.status}"] += 1
        if stream.status != "complete":
            if last is not None and last.startswith("after-output"):
                counts["failed after output"] += 1
            elif last is not None and not left:
                counts["exhausted"] += 1
            else:
                counts["lost"] += 1
    for must in ("duplicated", "lost", "unretried", "retried after output"):
        counts.setdefault(must, 0)
    return dict(counts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--streams", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--before", type=float, default=0.2, help="share failed before output")
    parser.add_argument("--after", type=float, default=0.05, help="share failed after output")
    parser.add_argument("--max-retries", type=int, default=2)
    parser.add_argument("--idle", type=float, default=2.0, help="the client's idle timeout")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="90 streams, 30 at a time")
    args = parser.parse_args()
    if args.quick:
        args.streams, args.concurrency = 90, 30
    streams, answers, elapsed = trio.run(soak, args)
    counts = count(streams, answers, args.max_retries)
    print(
        f"soak: {args.streams} streams, {args.concurrency} at a time, before={args.before} "
        f"after={args.after} max_retries={args.max_retries} seed={args.seed}: {elapsed:.1f} s"
    )
    for name, value in sorted(counts.items()):
        print(f"  {name:<40} {value:>6}")
    wrong = [
        name for name in ("duplicated", "lost", "unretried", "retried after output") if counts[name]
    ]
    if not counts.get("retried"):
        wrong.append("retried (none)")
    print(
        "FAIL: " + ", ".join(wrong)
        if wrong
        else "PASS: 0 duplicated, 0 lost, 0 unretried, 0 retried after output"
    )
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())

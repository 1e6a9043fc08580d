"""Connection reuse: ``chunkwise.Client``'s keep-alive pool against a new connection per request.

Run from the repository root::

    .venv/bin/python bench/pool.py            # 200 requests per contender, HTTP and TLS
    .venv/bin/python bench/pool.py --quick    # 20 requests per contender: a smoke run
    .venv/bin/python bench/pool.py --server threads   # a server without an event loop

A :mod:`chunkwise.testing` loopback server (trio + h11, ``127.0.0.1``, chunked
framing) runs in a separate process, started with ``multiprocessing``'s
``spawn`` method, so that the clients do not share its event loop and the
process CPU time of each side is its own.  It serves plain HTTP and HTTPS at
once; the HTTPS certificate comes from a throwaway trustme CA made by this
script, whose certificate is written to a temporary file that every client
trusts (``ssl.create_default_context(cafile=...)``: certificate and host name
verification on).  Every request gets the same short streamed chat completion:
a role chunk, ``--chunks`` content chunks (default 20, the generator of
``bench/parse.py``), a finish chunk, a usage chunk and ``[DONE]``, one event per
write (one HTTP chunk each), as a model streams them.  ``--server threads``
replaces the trio server with ``bench/_threaded_server.py`` (a thread per
connection, blocking sockets, the same writes), whose writes cost one system
call instead of two trips through an event loop.

Contenders
----------
chunkwise Client (pooled)
    ``async with chunkwise.Client(endpoint) as client`` around all requests,
    each ``await client.complete_chat(request)``: one kept-alive connection.
chunkwise complete_chat (new connection)
    The module-level ``await chunkwise.chat.complete(endpoint, request)``: a new
    connection (and, over TLS, a full handshake) for every request.
sdk AsyncOpenAI (asyncio)
    ``openai.AsyncOpenAI(base_url=..., api_key="k", max_retries=0,
    http_client=openai.DefaultAsyncHttpxClient(verify=<context>))``, one client
    for all requests, ``client.chat.completions.create(..., stream=True)``
    iterated to its end inside ``async with stream``, collecting
    ``choices[i].delta.content``; run under ``asyncio.run``, the SDK's home
    loop.  Its HTTP client keeps connections alive too.
sdk AsyncOpenAI (trio, information only)
    The same under ``trio.run`` (the SDK's async client runs on anyio), as
    ``bench/e2e.py`` runs it.

Each contender runs in its own ``trio.run`` / ``asyncio.run`` with a new
client: ``--warmup`` requests (default 10), then ``--requests`` sequential
requests (default 200), each timed with ``time.perf_counter`` from the call to
the end of the stream.  A round runs every contender once, TLS first, then
plain HTTP; the figures are each contender's best round (lowest mean) of
``--repeat`` rounds (default 3; 1 with ``--quick``), interleaving so that a
noisy neighbour's load is spread over all contenders.
Every result is checked inside the timed loop: chunkwise's ``status`` is
``"complete"`` with ``[DONE]`` received, the text and the number of content
deltas are the generator's, the usage chunk arrived; the SDK's text and deltas
likewise, with a ``stop`` finish reason and the usage chunk.  Retries are off
on both sides (``chunkwise.Retries(max_retries=0)``, ``max_retries=0``) and the
proxy environment variables are ignored, so nothing hides a failure.

Reported per transport and contender: mean and median milliseconds per request,
the client's process CPU time per request, the server process's CPU time per
request, and the connections the server accepted (warm-up included); for the
pooled client, also ``client.idle_connections`` at the end (checked in every
round, not only the best).

Targets are reported, not asserted: over TLS the pooled client at least 3x
faster (mean ms per request) than the new-connection path and than the SDK;
the pooled client used one connection for all its requests.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import gc
import multiprocessing
import os
import platform
import ssl
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import openai
import trio
import trustme
from _threaded_server import ThreadedServer
from _workload import make_events, print_table
from openai.types.chat import ChatCompletionMessageParam

import chunkwise
from chunkwise.testing import ScriptedResponse, open_test_server

MESSAGES: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Say something short."}]
REQUEST: dict[str, Any] = {"model": "m", "messages": MESSAGES}

POOLED = "chunkwise Client (pooled)"
NEW = "chunkwise complete_chat (new conn.)"
SDK = "sdk AsyncOpenAI (asyncio)"
SDK_TRIO = "sdk AsyncOpenAI (trio, info)"
CONTENDERS = (POOLED, NEW, SDK, SDK_TRIO)

#: Server statistics by scheme: (connections accepted, requests received, process CPU seconds).
Stats = dict[str, tuple[int, int, float]]


# -- the server process -----------------------------------------------------------


def serve(
    conn: Connection, body: bytes, write_sizes: tuple[int, ...] | None, chain: str, kind: str
) -> None:
    """The server process: plain HTTP and HTTPS, answering statistics requests on ``conn``."""
    if kind == "threads":
        _serve_threads(conn, body, write_sizes, chain)
    else:
        trio.run(_serve, conn, body, write_sizes, chain)


def _serve_threads(
    conn: Connection, body: bytes, write_sizes: tuple[int, ...] | None, chain: str
) -> None:
    # The same writes as the ScriptedResponse: one per event, or the body at once.
    writes, pos = [], 0
    for size in write_sizes or (len(body),):
        writes.append(body[pos : pos + size])
        pos += size
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(chain)
    servers = {"http": ThreadedServer(writes, None), "https": ThreadedServer(writes, context)}
    try:
        conn.send({name: server.base_url for name, server in servers.items()})
        while conn.recv() != "stop":
            cpu = time.process_time()
            conn.send({name: (s.connections, s.requests, cpu) for name, s in servers.items()})
    finally:
        for server in servers.values():
            server.shutdown()
            server.server_close()


async def _serve(
    conn: Connection, body: bytes, write_sizes: tuple[int, ...] | None, chain: str
) -> None:
    script = ScriptedResponse(body=body, write_sizes=write_sizes)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(chain)
    async with (
        open_test_server(script) as plain,
        open_test_server(script, ssl_context=context) as tls,
    ):
        servers = {"http": plain, "https": tls}
        conn.send({name: server.base_url for name, server in servers.items()})
        while await trio.to_thread.run_sync(conn.recv) != "stop":
            cpu = time.process_time()
            stats = {
                name: (len(server.connections), len(server.requests), cpu)
                for name, server in servers.items()
            }
            conn.send(stats)


class ServerProcess:
    """The server in its own process; :meth:`stats` asks it for its counters."""

    def __init__(
        self, body: bytes, write_sizes: tuple[int, ...] | None, chain: str, kind: str
    ) -> None:
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self._process = context.Process(
            target=serve, args=(child, body, write_sizes, chain, kind), name="pool-bench-server"
        )
        self._process.start()
        child.close()
        if not self._conn.poll(60):
            self.close()
            raise RuntimeError("the server process did not start within 60 s")
        self.urls: dict[str, str] = self._conn.recv()

    def stats(self) -> Stats:
        """Connections accepted, requests received and CPU seconds, by scheme (blocks)."""
        self._conn.send("stats")
        stats: Stats = self._conn.recv()
        return stats

    def close(self) -> None:
        with contextlib.suppress(OSError):  # the process is gone already
            self._conn.send("stop")
        self._process.join(10)
        if self._process.is_alive():
            self._process.terminate()
            self._process.join(5)
        self._conn.close()


# -- the workload -----------------------------------------------------------------


def make_ca(folder: Path) -> tuple[str, str]:
    """A throwaway CA: (the CA certificate file, the server's key and chain file)."""
    ca = trustme.CA()
    leaf = ca.issue_cert("127.0.0.1", "localhost")
    ca_file, chain_file = folder / "ca.pem", folder / "server.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    leaf.private_key_and_cert_chain_pem.write_to_path(str(chain_file))
    return str(ca_file), str(chain_file)


@dataclasses.dataclass(frozen=True)
class Plan:
    """What every contender does, and how to read the server's counters."""

    scheme: str
    url: str
    ca_file: str
    requests: int
    warmup: int
    n_chunks: int
    expected: str
    stats: Callable[[], Stats]

    def ssl_context(self) -> ssl.SSLContext | None:
        """A client context trusting only the bench's CA (``None`` for plain HTTP)."""
        if self.scheme != "https":
            return None
        return ssl.create_default_context(cafile=self.ca_file)

    def endpoint(self) -> chunkwise.Endpoint:
        return chunkwise.Endpoint(
            self.url,
            api_key="k",
            ssl_context=self.ssl_context(),
            retries=chunkwise.Retries(max_retries=0),
            trust_env=False,
        )


@dataclasses.dataclass
class Phase:
    """One contender's timed requests on one transport."""

    times: list[float]
    client_cpu: float  # seconds of this process's CPU time over the timed requests
    server_cpu: float  # seconds of the server process's CPU time over the timed requests
    connections: int  # connections the server accepted, warm-up included
    timed_connections: int  # ... during the timed requests
    requests: int  # requests the server received, warm-up included
    idle_after: int | None = None  # client.idle_connections at the end (pooled only)

    @property
    def mean_ms(self) -> float:
        return statistics.fmean(self.times) * 1000

    @property
    def median_ms(self) -> float:
        return statistics.median(self.times) * 1000


async def timed_loop(plan: Plan, one: Callable[[], Awaitable[None]]) -> Phase:
    """``plan.warmup`` calls of ``one``, then ``plan.requests`` timed ones.

    The server's counters are read (a blocking pipe round trip) before the
    warm-up and around the timed requests, never inside them.
    """
    first = plan.stats()[plan.scheme]
    for _ in range(plan.warmup):
        await one()
    gc.collect()
    before = plan.stats()[plan.scheme]
    times: list[float] = []
    clock = time.perf_counter
    cpu = time.process_time()
    for _ in range(plan.requests):
        start = clock()
        await one()
        times.append(clock() - start)
    cpu = time.process_time() - cpu
    after = plan.stats()[plan.scheme]
    return Phase(
        times=times,
        client_cpu=cpu,
        server_cpu=after[2] - before[2],
        connections=after[0] - first[0],
        timed_connections=after[0] - before[0],
        requests=after[1] - first[1],
    )


def check_result(name: str, plan: Plan, result: chunkwise.chat.Result) -> None:
    if result.status != "complete" or not result.done_received:
        raise AssertionError(f"{name}: stream ended {result.status}: {result.error}")
    if result.content != plan.expected:
        raise AssertionError(f"{name}: wrong content")
    if result.usage is None or result.usage.get("completion_tokens") != plan.n_chunks:
        raise AssertionError(f"{name}: usage missing or wrong: {result.usage!r}")


# -- contenders -------------------------------------------------------------------


async def run_pooled(plan: Plan) -> Phase:
    async with chunkwise.Client(plan.endpoint()) as client:

        async def one() -> None:
            check_result(POOLED, plan, await client.chat.complete(REQUEST))

        phase = await timed_loop(plan, one)
        phase.idle_after = client.idle_connections
    return phase


async def run_new_connection(plan: Plan) -> Phase:
    endpoint = plan.endpoint()

    async def one() -> None:
        check_result(NEW, plan, await chunkwise.chat.complete(endpoint, REQUEST))

    return await timed_loop(plan, one)


async def run_sdk(plan: Plan) -> Phase:
    """The SDK's streaming path; runs under asyncio or trio alike."""
    context = plan.ssl_context()
    http_client = openai.DefaultAsyncHttpxClient(
        verify=context if context is not None else True, trust_env=False
    )
    async with openai.AsyncOpenAI(
        base_url=plan.url, api_key="k", max_retries=0, http_client=http_client
    ) as client:

        async def one() -> None:
            parts: list[str] = []
            finish: str | None = None
            usage: Any = None
            stream = await client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
            async with stream:
                async for chunk in stream:
                    if chunk.usage is not None:
                        usage = chunk.usage
                    for choice in chunk.choices:
                        if choice.delta.content:
                            parts.append(choice.delta.content)
                        if choice.finish_reason is not None:
                            finish = choice.finish_reason
            if "".join(parts) != plan.expected or len(parts) != plan.n_chunks:
                raise AssertionError("sdk: wrong content")
            if finish != "stop" or usage is None or usage.completion_tokens != plan.n_chunks:
                raise AssertionError(f"sdk: finish {finish!r}, usage {usage!r}")

        return await timed_loop(plan, one)


def run_contender(name: str, plan: Plan) -> Phase:
    """Run one contender in its own event loop."""
    gc.collect()
    if name == POOLED:
        return trio.run(run_pooled, plan)
    if name == NEW:
        return trio.run(run_new_connection, plan)
    if name == SDK:
        return asyncio.run(run_sdk(plan))
    if name == SDK_TRIO:
        return trio.run(run_sdk, plan)
    raise ValueError(name)


# -- report -----------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--quick", action="store_true", help="20 requests, 3 warm-up, one round: a smoke run"
    )
    ap.add_argument("--repeat", type=int, default=3, help="best of N interleaved rounds (3)")
    ap.add_argument("--requests", type=int, help="timed requests per contender (default 200)")
    ap.add_argument("--warmup", type=int, help="untimed requests first (default 10)")
    ap.add_argument("--chunks", type=int, default=20, help="content chunks per stream (20)")
    ap.add_argument(
        "--one-write",
        action="store_true",
        help="the server writes each body at once instead of one event per write",
    )
    ap.add_argument(
        "--server",
        choices=("trio", "threads"),
        default="trio",
        help="the loopback server: chunkwise.testing on trio (default), or a thread per "
        "connection with blocking sockets (bench/_threaded_server.py), whose writes cost less",
    )
    ap.add_argument(
        "--transport",
        choices=("both", "http", "https"),
        default="both",
        help="plain HTTP, TLS, or both (default)",
    )
    args = ap.parse_args(argv)
    n_requests = args.requests or (20 if args.quick else 200)
    warmup = args.warmup if args.warmup is not None else (3 if args.quick else 10)
    n_chunks = args.chunks
    repeat = 1 if args.quick and args.repeat == 3 else args.repeat
    schemes = ("https", "http") if args.transport == "both" else (args.transport,)

    events, expected = make_events(n_chunks)
    body = b"".join(events)
    write_sizes = None if args.one_write else tuple(len(e) for e in events)

    versions = (chunkwise.__version__, openai.__version__, trio.__version__)
    print("chunkwise {}, openai {}, trio {}".format(*versions))
    print(
        f"Python {platform.python_version()} ({platform.python_implementation()}), "
        f"{platform.platform()}, {os.cpu_count()} CPUs, load average "
        + ", ".join(f"{x:.2f}" for x in os.getloadavg())
    )
    writes = "in one write" if args.one_write else "one event per write"
    server_name = "chunkwise.testing (trio)" if args.server == "trio" else "threads, blocking"
    print(
        f"server: {server_name}; each response: {n_chunks} content chunks, {len(events)} "
        f"events, {len(body):,} bytes, {writes}; {n_requests} timed requests per contender "
        f"after {warmup} warm-up, best of {repeat} interleaved rounds"
    )
    print()

    rounds: dict[tuple[str, str], list[Phase]] = {}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="chunkwise-pool-") as folder:
        ca_file, chain_file = make_ca(Path(folder))
        server = ServerProcess(body, write_sizes, chain_file, args.server)
        try:
            for _ in range(repeat):
                for scheme in schemes:
                    plan = Plan(
                        scheme=scheme,
                        url=server.urls[scheme],
                        ca_file=ca_file,
                        requests=n_requests,
                        warmup=warmup,
                        n_chunks=n_chunks,
                        expected=expected,
                        stats=server.stats,
                    )
                    for name in CONTENDERS:
                        phase = run_contender(name, plan)
                        rounds.setdefault((scheme, name), []).append(phase)
        finally:
            server.close()
    elapsed = time.perf_counter() - started
    results = {key: min(phases, key=lambda p: p.mean_ms) for key, phases in rounds.items()}

    # -- report -------------------------------------------------------------------------
    labels = {"https": "TLS", "http": "HTTP"}
    print(
        f"Best round of {repeat}: milliseconds per request (wall clock, sequential; mean and "
        "median), CPU milliseconds per request of the client process and of the server "
        "process, connections the server accepted and requests it received (warm-up included)"
    )
    rows: list[tuple[str, ...]] = []
    for (scheme, name), phase in results.items():
        n = len(phase.times)
        rows.append(
            (
                labels[scheme],
                name,
                f"{phase.mean_ms:.3f}",
                f"{phase.median_ms:.3f}",
                f"{phase.client_cpu / n * 1000:.3f}",
                f"{phase.server_cpu / n * 1000:.3f}",
                f"{phase.connections:,}",
                f"{phase.requests:,}",
            )
        )
    head = (
        "transport",
        "contender",
        "ms/req",
        "median",
        "client CPU",
        "server CPU",
        "connections",
        "requests",
    )
    print_table(head, rows, left=2)
    print()
    print("Pooled speed-up (the other's mean ms per request / the pooled client's)")
    rows = []
    for scheme in schemes:
        pooled = results[scheme, POOLED]
        for name in (NEW, SDK, SDK_TRIO):
            other = results[scheme, name]
            rows.append(
                (
                    labels[scheme],
                    f"pooled vs {name}",
                    f"{other.mean_ms / pooled.mean_ms:.2f}x",
                    f"{other.median_ms / pooled.median_ms:.2f}x",
                )
            )
    print_table(("transport", "ratio", "mean", "median"), rows, left=2)
    print()
    for scheme in schemes:
        pooled_rounds = rounds[scheme, POOLED]
        counts = sorted({p.connections for p in pooled_rounds})
        timed = sorted({p.timed_connections for p in pooled_rounds})
        idle = sorted({p.idle_after for p in pooled_rounds}, key=str)
        print(
            f"{labels[scheme]}: in each of {len(pooled_rounds)} round(s), the pooled client's "
            f"{warmup + n_requests} requests used {'/'.join(map(str, counts))} connection(s) "
            f"(server count; {'/'.join(map(str, timed))} opened during the timed requests), "
            f"client.idle_connections == {'/'.join(map(str, idle))} at the end"
        )
    print(f"whole run: {elapsed:.1f} s")

    # -- targets ------------------------------------------------------------------------
    print()
    print("targets (reported, not asserted):")
    checks: list[tuple[str, str, bool]] = []
    if "https" in schemes:
        pooled = results["https", POOLED]
        for name in (NEW, SDK):
            ratio = results["https", name].mean_ms / pooled.mean_ms
            checks.append((f"TLS: pooled >= 3x {name}", f"{ratio:.2f}x", ratio >= 3))
    for scheme in schemes:
        pooled_rounds = rounds[scheme, POOLED]
        one = all(p.connections == 1 and p.idle_after == 1 for p in pooled_rounds)
        most = max(p.connections for p in pooled_rounds)
        checks.append((f"{labels[scheme]}: the pooled client used one connection", f"{most}", one))
    width = max(len(c[0]) for c in checks)
    for text, value, passed in checks:
        print(f"  {text.ljust(width)}  {value:>7}  {'PASS' if passed else 'MISS'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

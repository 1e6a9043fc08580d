"""How accurately ``chunkwise bench`` measures TTFT and inter-token gaps, against a known truth.

``chunkwise serve`` runs in another process, paced at 200 ms to the first token and 20 ms
per token, 100 tokens an answer.  At each concurrency level, three measurements of the same
server, one after another, each in its own process:

- ``chunkwise bench --json`` (TTFT and pooled inter-token gaps, nearest-rank quantiles);
- a loop on the official SDK's ``AsyncOpenAI`` (``chat.completions.create(stream=True)``,
  ``time.perf_counter()`` at each content chunk, the same quantiles);
- GuideLLM, when ``--guidellm PATH`` names its executable (``guidellm run``, concurrent
  profile, prompts from a JSON file, offline); its inter-token latency is each request's
  mean gap, so its p99 is not a p99 of gaps.

Errors are measured minus scripted (200 ms, 20 ms).  They hold the server's own lateness as
well as the client's (both clients meet the same server), so the comparison is between the
columns.  Target: chunkwise's p99 gap error at most a fifth of the SDK loop's, and under
2 ms, at the highest level where the server holds its own pacing (the issue's wording),
which must be ``LEAST_LEVEL`` (200) or more.  Not a test: prints PASS or MISS (or that the
run is not judged), never fails a build.

Whether the server holds its pacing is the server's own record of the level: each paced
answer ends with a log line counting its gaps more than 2 ms longer than scripted (how late
the writer ran for each write, ``chunkwise_tools.server._pacing``'s rule 5), every write of every
stream while chunkwise bench ran.  The server holds a level when under ``HOLDS`` (1%) of
those gaps were late: its own p99 gap error under 2 ms.

``--parts`` (Linux) decomposes the error at each level with a bare client on raw
sockets whose reads carry the kernel's receive timestamp (``SO_TIMESTAMPNS``): the
server's own gap error (gaps between kernel stamps: when the server's writes went
out), a bare trio reader's, and how far its stamps trail the kernel's; each gap error is
the clients' statistic (the gap quantile minus 20 ms).  The bare reader runs alone at
the level, and ``PROBE`` of its streams also run beside chunkwise bench: a sample of the
server's error from outside, under the load being measured.

At each level it also prints the CPU a token of bench's process and of the server's (from
``/proc``, Linux) while chunkwise measured: on a small machine the two share the cores, and
the level where either runs out is where the measurement stops holding; and bench's reads
that carried more than one token.  The server writes one token a write, so such a read is
bench reading late, and when there is none, bench's gaps are the kernel's arrival stamps of
every token: its error is then the server's lateness during that run.

``--pin`` (Linux, ``taskset``) runs the server on the first core and every client on the
second, so the two never take turns on one core; both clients get the same treatment.

Nothing here can hang silently: serve's stdout is drained (a full pipe froze the
server), ``chunkwise bench`` runs with ``--timeout``, and each client process is
stopped after ``LEVEL_LIMIT`` seconds.

    .venv/bin/python bench/accuracy.py                   # levels 1, 100, 200
    .venv/bin/python bench/accuracy.py --levels 1,100,200,300 --per-stream 2 --parts
    .venv/bin/python bench/accuracy.py --levels 1,100,200,300 --parts --pin
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import re
import resource
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

FIRST_TOKEN = 0.2
PER_TOKEN = 0.02
TOKENS = 100
#: A level that has not ended by then is reported as errors (bench's --timeout for each
#: wait, and this for a whole client process), never as a silent hang.
STALL = 30.0
LEVEL_LIMIT = 600.0
#: With --pin: the command prefixes that put the server and the clients on their own cores.
PINS: dict[str, list[str]] = {"server": [], "client": []}
#: The server holds its own pacing at a level when, while chunkwise bench ran, fewer than
#: this share of its gaps were late by more than 2 ms (serve's log: _pacing's rule 5): its
#: p99 gap error under 2 ms, counted over every write of every stream.
HOLDS = 0.01
#: The issue measures at as many streams as the server holds, "at least 200": a run where
#: the server held fewer (a busy machine) says so instead of judging at 100, where the
#: SDK loop is still within a few milliseconds.
LEAST_LEVEL = 200
#: With --parts: bare streams beside chunkwise bench.
PROBE = 10
#: serve's line as a paced answer ends.
_PACED = re.compile(r"paced answer: .*; (\d+) of (\d+) gaps more than")


def _quantiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)

    def rank(q: float) -> float:
        return ordered[max(1, math.ceil(q * len(ordered))) - 1]

    return {"p50": rank(0.5), "p99": rank(0.99), "count": len(ordered)}


async def _sdk_loop(base_url: str, concurrency: int, requests: int) -> dict[str, Any]:
    # Imported here: only the SDK worker process needs the SDK.
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=base_url, api_key="bench", max_retries=0, timeout=STALL)
    ttfts: list[float] = []
    gaps: list[float] = []
    errors: dict[str, int] = {}
    numbers = iter(range(requests))

    async def one() -> None:
        start = time.perf_counter()
        last = None
        try:
            stream = await client.chat.completions.create(
                model="text",
                messages=[{"role": "user", "content": "Hello"}],
                stream=True,
                stream_options={"include_usage": True},
            )
            async for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    now = time.perf_counter()
                    if last is None:
                        ttfts.append(now - start)
                    else:
                        gaps.append(now - last)
                    last = now
        except Exception as exc:  # any failure is counted, by kind, as bench counts them
            kind = type(exc).__name__
            errors[kind] = errors.get(kind, 0) + 1

    async def worker() -> None:
        for _ in numbers:
            await one()

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    await client.close()
    return {
        "ttft": _quantiles(ttfts),
        "gap": _quantiles(gaps),
        "errors": sum(errors.values()),
        "error_kinds": errors,
    }


#: Linux's SO_TIMESTAMPNS (also its control message's type), which Python does not name.
SO_TIMESTAMPNS = 35
_OUTPUT = re.compile(rb'"content":"[^"]')


async def _raw_loop(base_url: str, concurrency: int, requests: int) -> dict[str, Any]:
    """The decomposition (``--parts``): a minimal client on raw sockets, Linux only.

    Each read is stamped twice: by the kernel as the bytes reached this host
    (``SO_TIMESTAMPNS``; on loopback, when the server's write went out) and by
    trio's clock right after ``recvmsg`` returned (when the reader ran).  Gaps of
    the first are the server's own error; the second minus the first is how late a
    reader that does almost nothing per read stamps.
    """
    import trio  # only the decomposition worker needs trio here

    host, _, rest = base_url.removeprefix("http://").partition(":")
    port = int(rest.partition("/")[0])
    body = json.dumps(
        {"model": "text", "messages": [{"role": "user", "content": "Hello"}], "stream": True}
    ).encode()
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode()
    kernel_gaps: list[float] = []
    reader_gaps: list[float] = []
    delays: list[float] = []
    numbers = iter(range(requests))

    async def one() -> None:
        sock = trio.socket.socket()
        with sock:
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            await sock.connect((host, port))
            await sock.send(head + body)
            last: tuple[float, float] | None = None
            while True:
                data, ancillary, _, _ = await sock.recvmsg(65536, socket.CMSG_SPACE(16))
                now = trio.current_time()
                offset = time.time() - now  # realtime minus trio's clock, sampled now
                if not data:
                    return
                arrived = now
                for level, kind, payload in ancillary:
                    if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                        seconds, nanoseconds = struct.unpack("qq", payload[:16])
                        arrived = seconds + nanoseconds / 1e9 - offset
                delays.append(now - arrived)
                if _OUTPUT.search(data):
                    if last is not None:
                        kernel_gaps.append(arrived - last[0])
                        reader_gaps.append(now - last[1])
                    last = (arrived, now)

    async def worker() -> None:
        for _ in numbers:
            await one()

    async with trio.open_nursery() as nursery:
        for _ in range(concurrency):
            nursery.start_soon(worker)
    return {
        "server": _errors(kernel_gaps),
        "reader": _errors(reader_gaps),
        "stamp_delay": _quantiles(delays),
    }


def _errors(gaps: list[float]) -> dict[str, float]:
    """Gap quantiles as errors, the statistic of the clients' ``err p99`` column."""
    figures = _quantiles(gaps)
    return {key: abs(figures[key] - PER_TOKEN) for key in ("p50", "p99")}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _process_cpu(pid: int) -> float | None:
    """CPU seconds (user and system) of process ``pid`` so far, from ``/proc`` (Linux)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _chunkwise(base_url: str, concurrency: int, requests: int) -> dict[str, Any]:
    command = [*PINS["client"], sys.executable, "-m", "chunkwise", "bench", "--base-url", base_url]
    command += ["--model", "text", "--requests", str(requests), "--concurrency", str(concurrency)]
    command += ["--timeout", str(STALL), "--json"]
    cpu = _children_cpu()
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=LEVEL_LIMIT)
    cpu = _children_cpu() - cpu
    document = json.loads(done.stdout)
    return {
        "ttft": document["ttft"],
        "gap": document["inter_token_gap"],
        "errors": sum(document["requests"]["failed"].values()),
        "cpu": cpu,
        "reads": document["reads"],
    }


def _sdk(base_url: str, concurrency: int, requests: int) -> dict[str, Any]:
    command = [*PINS["client"], sys.executable, __file__, "--sdk-worker", base_url]
    command += [str(concurrency), str(requests)]
    done = subprocess.run(command, capture_output=True, text=True, check=True, timeout=LEVEL_LIMIT)
    return dict(json.loads(done.stdout))


def _raw(base_url: str, concurrency: int, requests: int) -> dict[str, Any]:
    return _raw_finish(_raw_start(base_url, concurrency, requests))


def _raw_start(base_url: str, concurrency: int, requests: int) -> subprocess.Popen[str]:
    command = [*PINS["client"], sys.executable, __file__, "--raw-worker", base_url]
    command += [str(concurrency), str(requests)]
    return subprocess.Popen(command, stdout=subprocess.PIPE, text=True)


def _raw_finish(process: subprocess.Popen[str]) -> dict[str, Any]:
    out, _ = process.communicate(timeout=LEVEL_LIMIT)
    if process.returncode:
        raise subprocess.CalledProcessError(process.returncode, process.args, out)
    return dict(json.loads(out))


def _guidellm(path: str, base_url: str, concurrency: int, requests: int) -> dict[str, Any] | str:
    """GuideLLM's TTFT and inter-token latency (its ITL is each request's mean, not each gap)."""
    with tempfile.TemporaryDirectory() as work:
        prompts = Path(work) / "prompts.jsonl"
        prompts.write_text('{"prompt": "Hello"}\n' * requests)
        report = Path(work) / "report.json"
        command = [*PINS["client"], path, "run", "--disable-console-interactive"]
        command += ["--backend", f"kind=openai_http,target={base_url.removesuffix('/v1')},"]
        command[-1] += "model=text,validate_backend=false"
        command += ["--profile", f"kind=concurrent,streams={concurrency}"]
        command += ["--constraint", f"kind=max_requests,count={requests}"]
        command += ["--data", f"kind=json_file,path={prompts}"]
        command += ["--output", f"kind=json,path={report}"]
        env = {**os.environ, "HF_HUB_OFFLINE": "1"}
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
        if done.returncode != 0 or not report.exists():
            return (done.stderr or done.stdout).strip().splitlines()[-1][:200]
        metrics = json.loads(report.read_text())["benchmarks"][0]["metrics"]

    def figures(name: str) -> dict[str, float]:
        successful = metrics[name]["successful"]
        percentiles = successful["percentiles"]
        return {
            "p50": percentiles["p50"] / 1000,
            "p99": percentiles["p99"] / 1000,
            "count": successful["count"],
        }

    return {
        "ttft": figures("time_to_first_token_ms"),
        "gap": figures("inter_token_latency_ms"),
        "errors": 0,
    }


class _ServerLog:
    """serve's request log, read on a thread (a pipe nobody reads fills up and stops it).

    It counts the paced answers' gaps and the late ones, from the line each paced
    answer ends with.
    """

    def __init__(self, lines: Any) -> None:
        self._counts = [0, 0, 0]  # answers, gaps, late gaps
        self._lock = threading.Lock()
        threading.Thread(target=self._read, args=(lines,), daemon=True).start()

    def _read(self, lines: Any) -> None:
        for line in lines:
            match = _PACED.search(line)
            if match is not None:
                with self._lock:
                    self._counts[0] += 1
                    self._counts[1] += int(match[2])
                    self._counts[2] += int(match[1])

    def counts(self, answers: int = 0) -> tuple[int, int, int]:
        """Answers, gaps and late gaps so far, once at least ``answers`` have ended (or 5 s)."""
        deadline = time.monotonic() + 5.0
        while True:
            with self._lock:
                counts = (self._counts[0], self._counts[1], self._counts[2])
            if counts[0] >= answers or time.monotonic() > deadline:
                return counts
            time.sleep(0.05)


def _ms(value: float) -> str:
    return f"{value * 1000:8.2f}"


def _us(seconds: float, tokens: int) -> str:
    return f"{seconds / tokens * 1e6:.1f} µs"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", default="1,100,200", help="concurrency levels")
    parser.add_argument("--per-stream", type=int, default=2, help="requests per stream")
    parser.add_argument("--guidellm", metavar="PATH", help="GuideLLM's executable")
    parser.add_argument(
        "--parts", action="store_true", help="decompose the error (Linux: kernel timestamps)"
    )
    parser.add_argument(
        "--pin", action="store_true", help="the server on the first core, the clients on the second"
    )
    parser.add_argument("--sdk-worker", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--raw-worker", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.sdk_worker:
        base_url, concurrency, requests = args.sdk_worker
        result = asyncio.run(_sdk_loop(base_url, int(concurrency), int(requests)))
        print(json.dumps(result))
        return
    if args.raw_worker:
        import trio

        base_url, concurrency, requests = args.raw_worker
        raw = trio.run(_raw_loop, base_url, int(concurrency), int(requests))
        print(json.dumps(raw))
        return
    if args.pin:
        PINS.update(server=["taskset", "-c", "0"], client=["taskset", "-c", "1"])
    port = _free_port()
    server = subprocess.Popen(
        [
            *PINS["server"],
            *(sys.executable, "-m", "chunkwise", "serve", "--port", str(port)),
            *("--first-token", str(FIRST_TOKEN), "--per-token", str(PER_TOKEN)),
            *("--tokens", str(TOKENS)),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        if not line.startswith("serving on"):
            sys.exit(f"the server did not start: {line!r}")
        base_url = line.split()[-1]
        log = _ServerLog(server.stdout)
        print(f"server: {base_url}, {FIRST_TOKEN * 1000:g} ms to the first token, ", end="")
        print(f"{PER_TOKEN * 1000:g} ms a token, {TOKENS} tokens; {os.cpu_count()} cores", end="")
        print("; the server on core 0, the clients on core 1" if args.pin else "")
        print(f"load average before: {os.getloadavg()[0]:.2f}")
        header = f"{'streams':>7} {'client':<10}{'TTFT p50':>9}{'TTFT p99':>9}"
        header += f"{'gap p50':>9}{'gap p99':>9}{'err p99':>9}{'errors':>7}   (ms)"
        print(header)
        judged: tuple[int, dict[str, dict[str, Any]]] | None = None
        for level in (int(text) for text in args.levels.split(",")):
            requests = level * args.per_stream
            # With --parts, a few bare streams beside chunkwise sample the server's own
            # pacing under the load being measured.
            probe = _raw_start(base_url, PROBE, PROBE * args.per_stream) if args.parts else None
            answers, gaps, late = log.counts()
            served = _process_cpu(server.pid)
            clients: dict[str, Any] = {"chunkwise": _chunkwise(base_url, level, requests)}
            served_after = _process_cpu(server.pid)
            beside = _raw_finish(probe) if probe is not None else None
            expected = answers + requests + (PROBE * args.per_stream if args.parts else 0)
            _, gaps_after, late_after = log.counts(expected)
            gaps, late = gaps_after - gaps, late_after - late
            clients["sdk-loop"] = _sdk(base_url, level, requests)
            if args.guidellm:
                clients["guidellm*"] = _guidellm(args.guidellm, base_url, level, requests)
            for name, figures in clients.items():
                if isinstance(figures, str):
                    print(f"{level:>7} {name:<10}did not run: {figures}")
                    continue
                gap, ttft = figures["gap"], figures["ttft"]
                error = abs(gap["p99"] - PER_TOKEN)
                print(
                    f"{level:>7} {name:<10}{_ms(ttft['p50'])} {_ms(ttft['p99'])}"
                    f"{_ms(gap['p50'])} {_ms(gap['p99'])} {_ms(error)}{figures['errors']:>7}"
                )
                if figures.get("error_kinds"):
                    print(f"{'':>8}{name} errors: {figures['error_kinds']}")
            tokens = requests * TOKENS
            cpu = f"{'':>8}CPU a token while chunkwise ran: "
            cpu += f"bench {_us(clients['chunkwise']['cpu'], tokens)}"
            if served is not None and served_after is not None:
                cpu += f", the server {_us(served_after - served, tokens)}"
            print(cpu + " (bench's startup included)")
            reads = clients["chunkwise"]["reads"]
            print(
                f"{'':>8}bench's reads carrying output: {reads['output']}, "
                f"{reads['several_outputs']} of them more than one token"
            )
            holds = gaps > 0 and late / gaps < HOLDS
            print(
                f"{'':>8}the server's own record while bench ran: {late} of {gaps} gaps "
                f"more than 2 ms late ({late / max(gaps, 1):.2%}); the server "
                f"{'holds' if holds else 'does not hold'} its pacing"
            )
            if args.parts:
                assert beside is not None
                parts = _raw(base_url, level, requests)
                print(
                    f"{'':>8}beside chunkwise ({PROBE} bare streams): the server's own gap "
                    f"error {_ms(beside['server']['p50']).strip()}/"
                    f"{_ms(beside['server']['p99']).strip()}"
                )
                print(
                    f"{'':>8}parts (p50/p99): server's own gap error "
                    f"{_ms(parts['server']['p50']).strip()}/{_ms(parts['server']['p99']).strip()}, "
                    f"a bare reader's {_ms(parts['reader']['p50']).strip()}/"
                    f"{_ms(parts['reader']['p99']).strip()}, its stamp after the kernel's "
                    f"{_ms(parts['stamp_delay']['p50']).strip()}/"
                    f"{_ms(parts['stamp_delay']['p99']).strip()}"
                )
            if holds or judged is None:
                judged = (level, clients)
            print(f"        load average now: {os.getloadavg()[0]:.2f}")
        if args.guidellm:
            print("* GuideLLM's inter-token latency is each request's mean gap, not each gap")
        assert judged is not None
        level, last = judged
        ours = abs(last["chunkwise"]["gap"]["p99"] - PER_TOKEN)
        theirs = abs(last["sdk-loop"]["gap"]["p99"] - PER_TOKEN)
        met = ours <= theirs / 5 and ours < 0.002
        verdict = "PASS" if met else "MISS"
        if level < LEAST_LEVEL:
            verdict = f"not judged, no level of {LEAST_LEVEL} streams or more was run"
            if max(int(text) for text in args.levels.split(",")) >= LEAST_LEVEL:
                verdict = (
                    f"not judged, the server held no level of {LEAST_LEVEL} streams or more "
                    "(a busy machine: run again)"
                )
        where = "the highest level the server holds"
        print(
            f"target ({where}: {level}): chunkwise p99 gap error {ours * 1000:.2f} ms <= "
            f"{theirs * 1000 / 5:.2f} ms (a fifth of the SDK loop's) and < 2 ms: {verdict}"
        )
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()

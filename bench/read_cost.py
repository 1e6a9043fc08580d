"""CPU per read on ``chunkwise bench``'s path, against a bare reader: what bench pays per token.

Run from the repository root::

    .venv/bin/python bench/read_cost.py            # 50 streams, 5 ms a token, 3 rounds
    .venv/bin/python bench/read_cost.py --streams 100 --per-token 0.01

One process, one ``trio.run``: an in-process server writes one paced SSE chunk
per write (HTTP/1.1 chunked framing, pre-framed bytes, one ``send`` each) on
``--streams`` loopback connections, and a client reads them.  Paced so that
every read holds one token (checked: a round with merged reads is reported).
CPU is ``time.process_time()`` over the round, so the server's share is in
every figure; the floor is the same round read by a bare loop.  Contenders:

floor
    a raw trio socket per stream: ``recv`` until the answer ends, nothing parsed.
bench path
    what ``chunkwise bench`` does per request (``chunkwise_tools/bench/_runner.py``'s
    ``_measure``): ``send_http_request`` on a pool, ``receive_some`` per read,
    a :class:`~chunkwise._core.timings.TimingRecorder` stamp and the chat parser's
    ``feed``.
http only (info)
    the same without the parser and the recorder: the HTTP layer's share.

The figure is microseconds of CPU per token above the floor, the best of
``--rounds``.  CPU time is less noisy than latency on a shared machine, not
immune: compare contenders of one run.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from chunkwise import chat
from chunkwise._core.endpoint import Endpoint
from chunkwise._core.retries import Retries
from chunkwise._core.timings import TimingRecorder
from chunkwise._net.http import send_http_request
from chunkwise._net.pool import ConnectionPool, PoolSettings
from chunkwise._net.trace import Timed

TOKENS = 100


def _chunk(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def _answer() -> tuple[bytes, list[bytes]]:
    head = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    envelope: dict[str, Any] = {
        "id": "chatcmpl-read-cost",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": None}],
    }
    writes = []
    for k in range(TOKENS):
        envelope["choices"][0]["delta"] = {"content": f"token{k} "}
        event = b"data: " + json.dumps(envelope, separators=(",", ":")).encode() + b"\n\n"
        writes.append(_chunk(event))
    envelope["choices"][0].update(delta={}, finish_reason="stop")
    last = b"data: " + json.dumps(envelope, separators=(",", ":")).encode() + b"\n\n"
    writes[-1] += _chunk(last + b"data: [DONE]\n\n") + b"0\r\n\r\n"
    return head, writes


async def _serve(listener: trio.SocketListener, per_token: float) -> None:
    head, writes = _answer()

    async def one(stream: trio.SocketStream) -> None:
        async with stream:
            buffer = b""
            while True:  # requests on this connection, until the client closes
                while b"\r\n\r\n" not in buffer:
                    data = await stream.receive_some(65536)
                    if not data:
                        return
                    buffer += data
                header, _, buffer = buffer.partition(b"\r\n\r\n")
                length = 0
                for line in header.split(b"\r\n"):
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                while len(buffer) < length:
                    buffer += await stream.receive_some(65536)
                buffer = buffer[length:]
                await stream.send_all(head)
                start = trio.current_time()
                for k, data in enumerate(writes):
                    await trio.sleep_until(start + (k + 1) * per_token)
                    await stream.send_all(data)

    async with trio.open_nursery() as nursery:
        while True:
            stream = await listener.accept()
            nursery.start_soon(one, stream)


Client = Callable[[str, int, int], Awaitable[int]]


async def _floor(host: str, port: int, requests: int) -> int:
    reads = 0
    for _ in range(requests):
        stream = await trio.open_tcp_stream(host, port)
        async with stream:
            await stream.send_all(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                b"Content-Length: 2\r\nConnection: close\r\n\r\n{}"
            )
            while data := await stream.receive_some(65536):
                reads += 1
                if data.endswith(b"0\r\n\r\n"):
                    break
    return reads


def _bench_path(*, parse: bool) -> Client:
    async def run(host: str, port: int, requests: int) -> int:
        endpoint = Endpoint(f"http://{host}:{port}/v1", retries=Retries(max_retries=0))
        pool: ConnectionPool[Any] = ConnectionPool(PoolSettings())
        reads = 0
        try:
            for _ in range(requests):
                parser = chat.Parser()
                timed = Timed(parser, TimingRecorder(trio.current_time))
                trace = timed.recorder.trace
                response = await send_http_request(endpoint, b"{}", pool=pool, trace=trace)
                try:
                    while not parser.finished:
                        data = await response.receive_some()
                        if not data:
                            break
                        reads += 1
                        if parse:  # the trace stamped the read
                            timed.carried(parser.feed(data))
                        elif data.endswith(b"[DONE]\n\n"):
                            break
                    await response.release()
                finally:
                    await response.aclose()
        finally:
            await pool.aclose()
        return reads

    return run


async def _round(
    client: Client, streams: int, per_token: float, requests: int
) -> tuple[float, int]:
    listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
    port = listener.socket.getsockname()[1]
    reads = 0

    async def one() -> None:
        nonlocal reads
        count = await client("127.0.0.1", port, requests)  # not `reads += await`: a race
        reads += count

    async with trio.open_nursery() as server:
        server.start_soon(_serve, listener, per_token)
        cpu = time.process_time()
        async with trio.open_nursery() as clients:
            for _ in range(streams):
                clients.start_soon(one)
        cpu = time.process_time() - cpu
        server.cancel_scope.cancel()
    return cpu, reads


async def main_async(args: argparse.Namespace) -> None:
    contenders: dict[str, Client] = {
        "floor": _floor,
        "bench path": _bench_path(parse=True),
        "http only (info)": _bench_path(parse=False),
    }
    tokens = args.streams * args.requests * TOKENS
    best: dict[str, float] = {}
    for _ in range(args.rounds):
        for name, client in contenders.items():
            cpu, reads = await _round(client, args.streams, args.per_token, args.requests)
            if reads > tokens * 1.02 or reads < tokens * 0.98:
                print(f"  {name}: {reads} reads for {tokens} tokens (merged or split reads)")
            best[name] = min(best.get(name, float("inf")), cpu / tokens)
    floor = best["floor"]
    print(f"{args.streams} streams, {args.per_token * 1000:g} ms a token, {tokens} tokens a round")
    print(f"{'contender':<18}{'CPU us/token':>14}{'above floor':>13}")
    for name, cost in best.items():
        print(f"{name:<18}{cost * 1e6:14.2f}{(cost - floor) * 1e6:13.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=50)
    parser.add_argument("--per-token", type=float, default=0.005)
    parser.add_argument("--requests", type=int, default=2, help="requests a stream")
    parser.add_argument("--rounds", type=int, default=3)
    trio.run(main_async, parser.parse_args())


if __name__ == "__main__":
    main()

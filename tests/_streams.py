"""Helpers to build chat-completion streams and feed them in arbitrary reads."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import chunkwise

DATA = Path(__file__).parent / "data"
RECORDINGS = sorted((DATA / "openai_recordings").glob("*.sse"))


def load_vectors() -> list[dict[str, Any]]:
    with open(DATA / "provider_streams.json", encoding="utf-8") as f:
        vectors: list[dict[str, Any]] = json.load(f)
    return vectors


def chunk(
    *choices: Mapping[str, Any],
    usage: Mapping[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "test-model",
        "choices": list(choices),
    }
    if usage is not None:
        body["usage"] = usage
    body.update(extra)
    return body


def choice(index: int = 0, finish_reason: str | None = None, **delta: Any) -> dict[str, Any]:
    return {"index": index, "delta": delta, "finish_reason": finish_reason}


def tool(
    index: int | None = 0,
    *,
    id: str | None = None,
    name: str | None = None,
    arguments: str | None = None,
) -> dict[str, Any]:
    call: dict[str, Any] = {"function": {}}
    if index is not None:
        call["index"] = index
    if id is not None:
        call["id"] = id
        call["type"] = "function"
    if name is not None:
        call["function"]["name"] = name
    if arguments is not None:
        call["function"]["arguments"] = arguments
    return call


def sse(
    *payloads: Mapping[str, Any] | str,
    done: bool = True,
    eol: str = "\n",
    ensure_ascii: bool = False,
) -> bytes:
    """An SSE body with one ``data:`` event per payload, then ``[DONE]``."""
    parts = []
    for payload in payloads:
        text = (
            payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=ensure_ascii)
        )
        parts.append(f"data: {text}{eol}{eol}")
    if done:
        parts.append(f"data: [DONE]{eol}{eol}")
    return "".join(parts).encode()


def splits(data: bytes, cuts: Iterable[int]) -> list[bytes]:
    points = sorted({c for c in cuts if 0 < c < len(data)})
    out = []
    start = 0
    for point in [*points, len(data)]:
        out.append(data[start:point])
        start = point
    return out


def every_size(data: bytes, size: int) -> Iterator[bytes]:
    for i in range(0, len(data), size):
        yield data[i : i + size]


def parse(
    reads: Iterable[bytes], **kwargs: Any
) -> tuple[list[chunkwise.Event], chunkwise.ChatResult]:
    parser = chunkwise.ChatStreamParser(**kwargs)
    events: list[chunkwise.Event] = []
    for read in reads:
        events += parser.feed(read)
    events += parser.end()
    return events, parser.result


def accumulate(
    chunks: Sequence[Mapping[str, Any]], **kwargs: Any
) -> tuple[list[chunkwise.Event], chunkwise.ChatResult]:
    acc = chunkwise.ChatAccumulator(**kwargs)
    events: list[chunkwise.Event] = []
    for c in chunks:
        events += acc.feed_chunk(c)
    events += acc.end()
    return events, acc.result


def terminal(events: Sequence[chunkwise.Event]) -> chunkwise.Event:
    terminals = [
        e
        for e in events
        if isinstance(
            e, (chunkwise.StreamCompleted, chunkwise.StreamIncomplete, chunkwise.StreamFailed)
        )
    ]
    assert len(terminals) == 1, terminals
    assert events[-1] is terminals[0]
    return terminals[0]

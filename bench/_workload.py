"""The fake chat completion both benchmarks stream: same words, same chunks.

Imported as ``_workload`` by ``bench/parse.py`` and ``bench/e2e.py`` (run as
scripts, so this folder is on ``sys.path``).
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from typing import Any

# Words of a fake reply; a few are multibyte in UTF-8 (2, 3 and 4 bytes).
WORDS = [
    "the",
    "of",
    "and",
    "to",
    "a",
    "in",
    "is",
    "that",
    "it",
    "for",
    "you",
    "on",
    "with",
    "as",
    "are",
    "this",
    "be",
    "was",
    "have",
    "not",
    "stream",
    "token",
    "chunk",
    "parse",
    "reply",
    "model",
    "answer",
    "question",
    "value",
    "result",
    "café",
    "naïve",
    "über",
    "façade",
    "東京",
    "データ",
    "🙂",
]

BASE = {
    "id": "chatcmpl-B9mZpQ4vT1sXyL2kR7nHcW3eJ0aFd",
    "object": "chat.completion.chunk",
    "created": 1764633600,
    "model": "gpt-4o-2024-08-06",
}


def sse_event(chunk: dict[str, Any]) -> bytes:
    text = json.dumps(chunk, ensure_ascii=False, separators=(",", ":"))
    return b"data: " + text.encode("utf-8") + b"\n\n"


def make_chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
    return {**BASE, "choices": [choice]}


def head_event() -> bytes:
    """The role chunk that opens the stream."""
    return sse_event(make_chunk({"role": "assistant", "content": "", "refusal": None}))


def tail_events(n_chunks: int) -> list[bytes]:
    """The finish chunk, the usage chunk and ``[DONE]``."""
    usage = {"prompt_tokens": 17, "completion_tokens": n_chunks, "total_tokens": n_chunks + 17}
    return [
        sse_event(make_chunk({}, "stop")),
        sse_event({**BASE, "choices": [], "usage": usage}),
        b"data: [DONE]\n\n",
    ]


def content_events(n_chunks: int, *, seed: int = 2026) -> tuple[list[bytes], str]:
    """``n_chunks`` content chunks of one to four words, and their text.

    The first ``k`` chunks are the same for every ``n_chunks >= k``.
    """
    rnd = random.Random(seed)
    events: list[bytes] = []
    parts: list[str] = []
    for _ in range(n_chunks):
        text = " " + " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(1, 4)))
        parts.append(text)
        events.append(sse_event(make_chunk({"content": text})))
    return events, "".join(parts)


def make_events(n_chunks: int, *, seed: int = 2026) -> tuple[list[bytes], str]:
    """The events of a stream with ``n_chunks`` content chunks, and its text."""
    content, text = content_events(n_chunks, seed=seed)
    return [head_event(), *content, *tail_events(n_chunks)], text


def response_events(n_deltas: int, *, seed: int = 2026) -> tuple[list[bytes], str]:
    """A Responses API stream of ``n_deltas`` text deltas, as OpenAI writes it, and its text.

    ``event:`` + ``data:`` per event, ``sequence_number`` on every event, the
    ``obfuscation`` field OpenAI adds to deltas, the documented lifecycle
    (created, in_progress, output_item.added, content_part.added, the deltas,
    output_text.done, content_part.done, output_item.done) and a
    ``response.completed`` carrying the whole output and usage.  The deltas
    are the words of :func:`content_events`.
    """
    rnd = random.Random(seed)
    parts = [
        " " + " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(1, 4))) for _ in range(n_deltas)
    ]
    text = "".join(parts)
    at = {"item_id": "msg_bench", "output_index": 0, "content_index": 0}
    response = {
        "id": "resp_bench",
        "object": "response",
        "created_at": 1735689600,
        "status": "in_progress",
        "model": "gpt-4.1-mini-2025-04-14",
        "output": [],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": None,
    }
    message = {"id": "msg_bench", "type": "message", "status": "in_progress", "role": "assistant"}
    part = {"type": "output_text", "annotations": [], "logprobs": []}
    done_message = {**message, "status": "completed", "content": [{**part, "text": text}]}
    payloads: list[dict[str, Any]] = [
        {"type": "response.created", "response": response},
        {"type": "response.in_progress", "response": response},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**message, "content": []},
        },
        {"type": "response.content_part.added", **at, "part": {**part, "text": ""}},
        *(
            {
                "type": "response.output_text.delta",
                **at,
                "delta": delta,
                "logprobs": [],
                "obfuscation": "xK3qP",
            }
            for delta in parts
        ),
        {"type": "response.output_text.done", **at, "text": text, "logprobs": []},
        {"type": "response.content_part.done", **at, "part": {**part, "text": text}},
        {"type": "response.output_item.done", "output_index": 0, "item": done_message},
        {
            "type": "response.completed",
            "response": {
                **response,
                "status": "completed",
                "output": [done_message],
                "usage": {
                    "input_tokens": 12,
                    "output_tokens": n_deltas,
                    "total_tokens": 12 + n_deltas,
                },
            },
        },
    ]
    events = [
        f"event: {p['type']}\ndata: "
        f"{json.dumps({**p, 'sequence_number': i}, ensure_ascii=False, separators=(',', ':'))}"
        "\n\n".encode()
        for i, p in enumerate(payloads)
    ]
    return events, text


def completion_events(n_chunks: int, *, seed: int = 2026) -> tuple[list[bytes], str]:
    """A legacy completions stream (``/completions``) of ``n_chunks`` text chunks, and its text.

    As OpenAI writes ``gpt-3.5-turbo-instruct``'s: a ``text_completion`` chunk
    per piece (the words of :func:`content_events`), ``logprobs`` and
    ``finish_reason`` null, then a finish chunk, a ``choices: []`` usage chunk
    (``stream_options.include_usage``) and ``[DONE]``.
    """
    rnd = random.Random(seed)
    parts = [
        " " + " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(1, 4))) for _ in range(n_chunks)
    ]
    base = {
        "id": "cmpl-AbCdEfGhIjKlMnOpQrStUvWxYz012",
        "object": "text_completion",
        "created": 1735689600,
        "model": "gpt-3.5-turbo-instruct:20230824-v2",
    }

    def event(choices: list[dict[str, Any]], **extra: Any) -> bytes:
        chunk = {**base, "choices": choices, **extra}
        return f"data: {json.dumps(chunk, ensure_ascii=False, separators=(',', ':'))}\n\n".encode()

    events = [
        event([{"text": text, "index": 0, "logprobs": None, "finish_reason": None}])
        for text in parts
    ]
    events.append(event([{"text": "", "index": 0, "logprobs": None, "finish_reason": "stop"}]))
    usage = {"prompt_tokens": 7, "completion_tokens": n_chunks, "total_tokens": 7 + n_chunks}
    events.append(event([], usage=usage))
    events.append(b"data: [DONE]\n\n")
    return events, "".join(parts)


def print_table(head: tuple[str, ...], rows: Sequence[tuple[str, ...]], left: int = 1) -> None:
    """A plain-text table: the first ``left`` columns left-aligned, the rest right-aligned."""
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    for n, row in enumerate([head, *rows]):
        cells = [
            c.ljust(w) if i < left else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        print("  ".join(cells).rstrip())
        if n == 0:
            print("  ".join("-" * w for w in widths))

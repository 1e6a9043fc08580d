"""Parse throughput: chunkwise against the official ``openai`` SDK and a json.loads floor.

Run from the repository root::

    .venv/bin/python bench/parse.py            # full run (two to three minutes on 2 cores)
    .venv/bin/python bench/parse.py --quick    # smaller sizes, a smoke run

Every contender gets the same bytes, split into the same reads, in one process.
Times are the best of ``--repeat`` rounds, each round running every contender
once (``time.perf_counter``, a ``gc.collect()`` before each run, the garbage
collector left on during it).

Contenders
----------
chunkwise
    :class:`chunkwise.chat.Parser`: ``feed()`` every read, ``end()``, and
    look at every event returned (a ``type(ev) is ContentDelta`` dispatch).
sdk-accumulate
    What ``client.chat.completions.stream()`` does with a body: the SDK's
    ``openai._streaming.SSEDecoder.iter_bytes`` over the reads, then for each
    event what ``openai._streaming.Stream.__stream__`` does (stop at
    ``[DONE]``, ``sse.json()``, the ``error`` check, and
    ``construct_type(type_=ChatCompletionChunk, value=data)``, which is what
    ``_process_response_data`` does without strict validation), then
    ``ChatCompletionStream``'s ``object`` filter and
    ``ChatCompletionStreamState.handlechunk(chunk)``, consuming its events,
    and ``get_final_completion()`` at the end.
sdk responses.stream() (input 4)
    What ``client.responses.stream()`` does with a body: the SDK's decoder,
    ``construct_type(type_=ResponseStreamEvent, ...)`` for each event, and
    ``ResponseStreamState.handle_event``, consuming its events; the final
    response from ``response.completed``.  chunkwise's contender there is
    :class:`chunkwise.responses.Parser`, looking at every event.
sdk completions (input 6)
    What ``client.completions.create(stream=True)`` does with a body (the
    SDK's decoder, the ``[DONE]`` and ``error`` checks,
    ``construct_type(type_=Completion, ...)`` for each chunk), and the
    caller's own accumulation, since the SDK has none for completions: each
    choice's ``text`` appended per ``index``, the finish reason and usage
    kept.  chunkwise's contender is :class:`chunkwise.completions.Parser`,
    looking at every event.
sdk-decode (information only)
    The same without ``ChatCompletionStreamState``: just iterating the
    ``ChatCompletionChunk`` objects, as ``client.chat.completions.create(stream=True)`` does.
floor
    ``json.loads`` of every JSON payload string, pre-extracted: no bytes, no
    SSE, no accumulation.  Nothing that parses every payload can be faster in
    pure Python with the standard library, and chunkwise parses every payload.

Inputs
------
(1) ``--chunks`` content chunks (default 100,000) of realistic
    ``chat.completion.chunk`` JSON, about 220 bytes an event with a few words of
    content each (some multibyte), plus a finish chunk, a usage chunk and
    ``[DONE]``, grouped into 64 KiB reads (cut anywhere, also inside events and
    inside UTF-8 characters);
(2) the same stream with one event per read;
(3) one ``data:`` line of about 8 MiB (a chunk whose content is an 8 MiB
    string), fed in 1 KiB reads and in 64 KiB reads (chunkwise only): the ratio
    of the two times shows that cost is linear in the input, however it is split.
(4) a Responses API stream of ``--deltas`` ``response.output_text.delta``
    events (default 100,000), as OpenAI writes them (``event:`` lines,
    ``sequence_number``, ``obfuscation``), between the documented lifecycle
    events and a ``response.completed`` carrying the whole output, in 64 KiB
    reads.
(6) a legacy completions stream (``/completions``) of ``--chunks`` text
    chunks (default 100,000), as OpenAI writes ``gpt-3.5-turbo-instruct``'s,
    in 64 KiB reads.

The SDK is timed on the whole stream too, unless the verification run (one SDK
run over input 1, before timing) takes longer than ``--sdk-budget`` seconds
(default 60): then, or with ``--sdk-limit N``, the SDK contenders run on the
first chunks of the same stream and their times are scaled to the whole stream
by events per second.  The SDK's accumulate path gets slower per chunk as the
stream grows (every chunk re-serialises the message so far), so such scaling
understates its cost; the output says when it was used.

(5) the partial-JSON parser alone (``--partial-json`` runs only this): a
    document of about 100 KB in 4-character deltas, as a model streams tool
    arguments or a structured answer, in three shapes (records, one long
    string, a long array of numbers).  Contenders: :class:`chunkwise.PartialJSON`
    fed every delta (patches only), the same reading ``.value`` after every
    delta, and ``jiter.from_json(text so far, partial_mode="trailing-strings")``
    after every delta, as the openai SDK previews arguments; ``json.loads`` of
    the whole text once is the floor.

(7) live values through the stream parser (``--live-values`` runs only this):
    a structured answer of about 100 KB (records) in 4-byte content deltas,
    one chunk an event, in 64 KiB reads, with a JSON-schema
    ``response_format``; and the same text as the arguments of one tool call.
    Contenders: :class:`chunkwise.chat.Parser` given the request's
    ``response_format`` (or ``tools``), looking at every event's patches; the
    same reading the newest result's preview (``partial_parsed`` /
    ``partial_arguments``) after every delta, also at half the size (is it
    quadratic?); the same stream as plain content with no ``response_format``
    (no preview: the cost of live values is the difference); for
    information, the same request with the preview switched off inside
    chunkwise (``LiveJSON.feed`` replaced by a no-op: what the response
    format and the tool call cost without live values); and the SDK's
    ``ChatCompletionStreamState`` given a pydantic class as ``response_format``
    (or a strict ``openai.pydantic_function_tool``), which re-parses the whole
    text with jiter at every delta.  Targets: chunkwise >= 100x faster than the
    SDK, and live values <= 1.5x the plain stream.

Targets are reported, not asserted: chunkwise at least 40x faster than the SDK's
accumulate path, at most 2x the floor, the 8 MiB line in 1 KiB reads within
2x of the same line in 64 KiB reads, on the Responses input at least 20x
faster than the SDK's ``responses.stream()`` accumulation, and on the
completions input at least 20x faster than the SDK's chunks accumulated.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import jiter
import openai
from _workload import (
    WORDS,
    completion_events,
    content_events,
    head_event,
    make_chunk,
    response_events,
    sse_event,
    tail_events,
)
from anthropic._streaming import SSEDecoder as AnthropicSSEDecoder
from anthropic.lib.streaming._messages import accumulate_event
from openai import omit
from openai._models import construct_type
from openai._streaming import SSEDecoder
from openai._utils import is_mapping
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.lib.streaming.responses._responses import ResponseStreamState
from openai.types import Completion
from openai.types.chat import ChatCompletionChunk
from openai.types.responses import ResponseStreamEvent
from pydantic import BaseModel

import chunkwise

KIB = 1024
MIB = 1024 * KIB


def make_stream(n_chunks: int, *, seed: int = 2026) -> tuple[list[bytes], list[str], str]:
    """Return (events as bytes, JSON payloads as str, the expected content).

    The first ``k`` content chunks are the same for every ``n_chunks >= k``, so
    a smaller stream is a prefix of a larger one (plus the same tail).
    """
    content, text = content_events(n_chunks, seed=seed)
    events = [head_event(), *content, *tail_events(n_chunks)]
    payloads = [e[6:-2].decode("utf-8") for e in events[:-1]]
    return events, payloads, text


def make_bigevent(size: int) -> tuple[bytes, str]:
    """One ``data:`` line whose chunk carries a ``size``-byte content string."""
    unit = "0123456789 abcdefghij café 東京 🙂 " * 8  # mixed widths, cut anywhere
    raw = unit.encode("utf-8")
    content = (raw * (size // len(raw) + 1))[:size].decode("utf-8", "ignore")
    body = sse_event(make_chunk({"role": "assistant", "content": content}))
    body += sse_event(make_chunk({}, "stop")) + b"data: [DONE]\n\n"
    return body, content


def split_reads(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


# -- contenders ---------------------------------------------------------------


def run_chunkwise(reads: Sequence[bytes]) -> str:
    content_delta = chunkwise.chat.TextDelta
    parser = chunkwise.chat.Parser()
    feed = parser.feed
    deltas = 0
    for read in reads:
        for ev in feed(read):
            if type(ev) is content_delta:
                deltas += 1
    for ev in parser.end():
        if type(ev) is content_delta:
            deltas += 1
    result = parser.result
    if result.status != "complete":
        raise AssertionError(f"chunkwise: stream ended {result.status}: {result.error}")
    return result.content


def _sdk_chunks(reads: Sequence[bytes]) -> Any:
    # openai._streaming.Stream.__stream__ for a chat completion, minus the
    # httpx response plumbing: same decoder, same checks, same construction.
    for sse in SSEDecoder().iter_bytes(iter(reads)):
        if sse.data.startswith("[DONE]"):
            break
        data = sse.json()
        if is_mapping(data) and data.get("error"):
            raise AssertionError(f"SDK: error payload {data['error']!r}")
        yield construct_type(type_=ChatCompletionChunk, value=data)


def run_sdk_accumulate(reads: Sequence[bytes]) -> str:
    state: ChatCompletionStreamState[Any] = ChatCompletionStreamState()
    handle = state.handle_chunk
    for chunk in _sdk_chunks(reads):
        # ChatCompletionStream.__stream__: filter, accumulate, yield events.
        if chunk.object != "chat.completion.chunk":
            continue
        for _ in handle(chunk):
            pass
    content = state.get_final_completion().choices[0].message.content
    return content or ""


def run_sdk_decode(reads: Sequence[bytes]) -> str:
    parts = []
    for chunk in _sdk_chunks(reads):
        for choice in chunk.choices:
            if choice.delta.content:
                parts.append(choice.delta.content)
    return "".join(parts)


def run_chunkwise_responses(reads: Sequence[bytes]) -> str:
    text_delta = chunkwise.responses.TextDelta
    parser = chunkwise.responses.Parser()
    feed = parser.feed
    deltas = 0
    for read in reads:
        for ev in feed(read):
            if type(ev) is text_delta:
                deltas += 1
    parser.end()
    result = parser.result
    if result.status != "complete":
        raise AssertionError(f"chunkwise: response ended {result.status}: {result.error}")
    return result.output_text


def run_sdk_responses(reads: Sequence[bytes]) -> str:
    # client.responses.stream(): openai._streaming.Stream.__stream__ for a
    # Responses stream (decode, the error check, construct_type of the event
    # union), then ResponseStream's ResponseStreamState.handle_event for each
    # event, and get_final_response() at the end.
    state: ResponseStreamState[Any] = ResponseStreamState(input_tools=omit, text_format=omit)
    handle = state.handle_event
    completed = None
    for sse in SSEDecoder().iter_bytes(iter(reads)):
        data = sse.json()
        if sse.event == "error" or (is_mapping(data) and data.get("error")):
            raise AssertionError(f"SDK: error payload {data!r}")
        event = construct_type(type_=ResponseStreamEvent, value=data)
        for _ in handle(event):
            pass
        if event.type == "response.completed":
            completed = event.response
    if completed is None:
        raise AssertionError("SDK: no response.completed")
    return "".join(
        c.text for item in completed.output if item.type == "message" for c in item.content
    )


def run_chunkwise_completions(reads: Sequence[bytes]) -> str:
    text_delta = chunkwise.completions.TextDelta
    parser = chunkwise.completions.Parser()
    feed = parser.feed
    deltas = 0
    for read in reads:
        for ev in feed(read):
            if type(ev) is text_delta:
                deltas += 1
    parser.end()
    result = parser.result
    if result.status != "complete":
        raise AssertionError(f"chunkwise: completion ended {result.status}: {result.error}")
    return result.text


def run_sdk_completions(reads: Sequence[bytes]) -> str:
    # client.completions.create(stream=True): openai._streaming.Stream.__stream__
    # with cast_to=Completion, then what its caller must do, since the SDK
    # accumulates nothing for completions: text per choice index, the finish
    # reason and the usage kept.
    texts: dict[int, list[str]] = {}
    finish: dict[int, str] = {}
    usage = None
    for sse in SSEDecoder().iter_bytes(iter(reads)):
        if sse.data.startswith("[DONE]"):
            break
        data = sse.json()
        if is_mapping(data) and data.get("error"):
            raise AssertionError(f"SDK: error payload {data['error']!r}")
        chunk = construct_type(type_=Completion, value=data)
        for choice in chunk.choices:
            texts.setdefault(choice.index, []).append(choice.text)
            if choice.finish_reason:
                finish[choice.index] = choice.finish_reason
        if chunk.usage is not None:
            usage = chunk.usage
    if finish.get(0) != "stop" or usage is None:
        raise AssertionError("SDK: the completion did not finish")
    return "".join(texts[0])


def message_events(n_deltas: int) -> tuple[list[bytes], str]:
    """An Anthropic Messages stream: one text block of ``n_deltas`` deltas, then a tool call."""
    words = ["Hello", " wörld", ", the", " answer", " is", " 42 🙂", ".\n"]
    text = [words[i % len(words)] for i in range(n_deltas)]
    start = {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "m"}
    start["usage"] = {"input_tokens": 10, "output_tokens": 1}
    tool = {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}
    payloads: list[dict[str, Any]] = [
        {"type": "message_start", "message": start},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        *(
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}}
            for t in text
        ),
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": tool},
        *(
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": f},
            }
            for f in ('{"city": ', '"Paris", "days": ', "[1, 2, 3]}")
        ),
        {"type": "content_block_stop", "index": 1},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": n_deltas},
        },
        {"type": "message_stop"},
    ]
    events = [
        f"event: {p['type']}\ndata: {json.dumps(p, ensure_ascii=False)}\n\n".encode()
        for p in payloads
    ]
    return events, "".join(text)


def run_chunkwise_messages(reads: Sequence[bytes]) -> str:
    parser = chunkwise.messages.Parser()
    feed = parser.feed
    for read in reads:
        feed(read)
    parser.end()
    result = parser.result
    if result.status != "complete" or result.tool_calls[0].parse_arguments()["city"] != "Paris":
        raise AssertionError(f"chunkwise: message ended {result.status}: {result.error}")
    return result.text


def run_sdk_messages(reads: Sequence[bytes]) -> str:
    # client.messages.stream(): anthropic._streaming.Stream.__stream__ (its SSE
    # decoder, JSON, the error check), then MessageStream's accumulate_event for
    # each event (which constructs the RawMessageStreamEvent) and
    # get_final_message() at the end.
    snapshot = None
    bufs: dict[int, bytes] = {}
    for sse in AnthropicSSEDecoder().iter_bytes(iter(reads)):
        if sse.event == "error":
            raise AssertionError(f"SDK: error event {sse.data!r}")
        if sse.event == "ping":
            continue
        snapshot = accumulate_event(event=sse.json(), current_snapshot=snapshot, json_bufs=bufs)
    if snapshot is None or snapshot.content[1].input["city"] != "Paris":
        raise AssertionError("SDK: the message did not finish")
    return "".join(b.text for b in snapshot.content if b.type == "text")


def run_floor(payloads: Sequence[str]) -> None:
    loads = json.loads
    for payload in payloads:
        loads(payload)


Job = tuple[Callable[[Any], Any], Any, Any]  # (function, argument, expected result or None)


def best_of_interleaved(repeat: int, jobs: dict[str, Job]) -> dict[str, float]:
    """Best time of each job over ``repeat`` rounds; each round runs every job once.

    Interleaving spreads a noisy neighbour's load over all contenders instead
    of one.  A job's result is checked on every run when it has an expected value.
    """
    best = dict.fromkeys(jobs, float("inf"))
    for _ in range(repeat):
        for name, (fn, arg, expected) in jobs.items():
            gc.collect()
            start = time.perf_counter()
            got = fn(arg)
            best[name] = min(best[name], time.perf_counter() - start)
            if expected is not None and got != expected:
                raise AssertionError(f"{name}: wrong content")
    return best


# -- input (5): the partial-JSON parser alone ------------------------------------


def make_partial_documents(size: int, *, seed: int = 2026) -> dict[str, str]:
    """Three JSON documents of about ``size`` characters: records, one string, numbers."""
    rng = random.Random(seed)
    words = [*WORDS, "été", "😀"]
    records: list[Any] = []
    while len(json.dumps(records)) < size:
        name = " ".join(rng.choice(words) for _ in range(5))
        records.extend(
            {"id": i, "name": name, "score": rng.random(), "ok": True} for i in range(50)
        )
    text = " ".join(rng.choice(words) for _ in range(size // 3))[:size]
    numbers = [rng.randrange(10**6) for _ in range(size // 8)]
    return {
        "records": json.dumps({"items": records}),
        "long string": json.dumps({"text": text}),
        "numbers": json.dumps(numbers),
    }


def run_partial_feed(deltas: Sequence[str]) -> Any:
    parser = chunkwise.PartialJSON()
    for delta in deltas:
        parser.feed(delta)
    return parser.end()


def run_partial_value(deltas: Sequence[str]) -> Any:
    parser = chunkwise.PartialJSON()
    for delta in deltas:
        parser.feed(delta)
        parser.value  # noqa: B018 - the read is what is timed
    return parser.end()


def run_jiter_reparse(deltas: Sequence[str]) -> Any:
    text = ""
    value = None
    for delta in deltas:
        text += delta
        value = jiter.from_json(text.encode(), partial_mode="trailing-strings")
    return value


def bench_partial_json(repeat: int, size: int) -> list[tuple[str, float, bool]]:
    """Time input (5), print its table; return its targets."""
    table = Table()
    checks: list[tuple[str, float, bool]] = []
    for shape, text in make_partial_documents(size).items():
        deltas = [text[i : i + 4] for i in range(0, len(text), 4)]
        expected = json.loads(text)
        jobs: dict[str, Job] = {
            "feed": (run_partial_feed, deltas, expected),
            "value": (run_partial_value, deltas, expected),
            "jiter": (run_jiter_reparse, deltas, expected),
            "floor": (json.loads, text, expected),
        }
        t = best_of_interleaved(repeat, jobs)
        label = f"(5) {shape}, 4-char deltas"
        n, base = len(deltas), t["value"]
        table.add(label, "PartialJSON.feed", t["feed"], len(text), n, base)
        table.add(label, "PartialJSON.feed + .value", t["value"], len(text), n, base)
        table.add(label, "jiter re-parse per delta", t["jiter"], len(text), n, base)
        table.add(label, "floor json.loads once", t["floor"], len(text), n, base)
        ratio = t["jiter"] / t["value"]
        checks.append((f"PartialJSON + .value >= 5x faster than jiter, {shape}", ratio, ratio >= 5))
    print(f"input (5): documents of about {size:,} characters (deltas = events)")
    table.print()
    return checks


# -- input (7): live values through the stream parser ------------------------------


class Record(BaseModel):
    """One record of input (7)'s answer, for the SDK's pydantic response format."""

    id: int
    name: str
    score: float
    ok: bool


class Records(BaseModel):
    items: list[Record]


RECORDS_SCHEMA = Records.model_json_schema()
RESPONSE_FORMAT = {
    "type": "json_schema",
    "json_schema": {"name": "Records", "schema": RECORDS_SCHEMA, "strict": False},
}
TOOL = {
    "type": "function",
    "function": {"name": "save_records", "parameters": RECORDS_SCHEMA},
}


def make_live_streams(size: int) -> tuple[str, list[bytes], list[bytes]]:
    """The records document of about ``size`` characters; its answer and tool-call streams."""
    text = make_partial_documents(size)["records"]
    deltas = [text[i : i + 4] for i in range(0, len(text), 4)]
    answer = [head_event(), *(sse_event(make_chunk({"content": d})) for d in deltas)]
    answer += tail_events(len(deltas))
    call = {"index": 0, "id": "call_1", "type": "function"}
    opening = {**call, "function": {"name": "save_records", "arguments": ""}}
    tool = [sse_event(make_chunk({"role": "assistant", "tool_calls": [opening]}))]
    tool += [
        sse_event(make_chunk({"tool_calls": [{"index": 0, "function": {"arguments": d}}]}))
        for d in deltas
    ]
    tool += [sse_event(make_chunk({}, "tool_calls")), b"data: [DONE]\n\n"]
    return text, split_reads(b"".join(answer), 64 * KIB), split_reads(b"".join(tool), 64 * KIB)


def run_live_answer(reads: Sequence[bytes], *, read_preview: bool = False) -> Any:
    parser = chunkwise.chat.Parser(response_format=RESPONSE_FORMAT)
    content_delta = chunkwise.chat.TextDelta
    patches = 0
    for read in reads:
        for ev in parser.feed(read):
            if type(ev) is content_delta:
                patches += len(ev.patches)
                if read_preview:
                    parser.result.choices[0].partial_parsed  # noqa: B018 - timed
    parser.end()
    return parser.result.choices[0].parsed


def run_live_preview(reads: Sequence[bytes]) -> Any:
    return run_live_answer(reads, read_preview=True)


def run_plain_answer(reads: Sequence[bytes]) -> Any:
    return json.loads(run_chunkwise(reads))


def run_live_tool(reads: Sequence[bytes], *, read_preview: bool = False) -> Any:
    parser = chunkwise.chat.Parser(tools=[TOOL])
    arguments_delta = chunkwise.chat.ToolCallArgumentsDelta
    patches = 0
    for read in reads:
        for ev in parser.feed(read):
            if type(ev) is arguments_delta:
                patches += len(ev.patches)
                if read_preview:
                    parser.result.choices[0].tool_calls[0].partial_arguments  # noqa: B018
    parser.end()
    return parser.result.choices[0].tool_calls[0].parse_arguments()


def run_live_tool_preview(reads: Sequence[bytes]) -> Any:
    return run_live_tool(reads, read_preview=True)


def _previews_off(run: Callable[[Sequence[bytes]], Any]) -> Callable[[Sequence[bytes]], Any]:
    """``run`` with chunkwise's previews switched off: a counterfactual, for information."""
    from chunkwise._core import (
        partial_json as _partial_json,  # the bench reaches inside, on purpose and only here
    )

    def without(reads: Sequence[bytes]) -> Any:
        feed = _partial_json.LiveJSON.feed
        _partial_json.LiveJSON.feed = lambda self, fragment: ((), None)  # type: ignore[method-assign]
        try:
            return run(reads)
        finally:
            _partial_json.LiveJSON.feed = feed  # type: ignore[method-assign]

    return without


def _sdk_state(reads: Sequence[bytes], state: ChatCompletionStreamState[Any]) -> Any:
    handle = state.handle_chunk
    for chunk in _sdk_chunks(reads):
        if chunk.object != "chat.completion.chunk":
            continue
        for _ in handle(chunk):
            pass
    return state.get_final_completion().choices[0].message


def run_sdk_live_answer(reads: Sequence[bytes]) -> Any:
    state: ChatCompletionStreamState[Any] = ChatCompletionStreamState(response_format=Records)
    parsed = _sdk_state(reads, state).parsed
    return parsed.model_dump()


def run_sdk_live_tool(reads: Sequence[bytes]) -> Any:
    tools = [openai.pydantic_function_tool(Records, name="save_records")]
    state: ChatCompletionStreamState[Any] = ChatCompletionStreamState(input_tools=tools)
    call = _sdk_state(reads, state).tool_calls[0]
    return call.function.parsed_arguments.model_dump()


def bench_live_values(repeat: int, size: int) -> list[tuple[str, float, bool]]:
    """Time input (7), print its table; return its targets."""
    text, answer, tool = make_live_streams(size)
    _, half_answer, half_tool = make_live_streams(size // 2)
    expected = json.loads(text)
    jobs: dict[str, Job] = {
        "answer": (run_live_answer, answer, expected),
        "answer-preview": (run_live_preview, answer, expected),
        "answer-preview-half": (run_live_preview, half_answer, None),
        "answer-plain": (run_plain_answer, answer, expected),
        "answer-off": (_previews_off(run_live_answer), answer, expected),
        "tool-off": (_previews_off(run_live_tool), tool, expected),
        "tool": (run_live_tool, tool, expected),
        "tool-preview": (run_live_tool_preview, tool, expected),
        "tool-preview-half": (run_live_tool_preview, half_tool, None),
        "sdk-answer": (run_sdk_live_answer, answer, expected),
        "sdk-tool": (run_sdk_live_tool, tool, expected),
    }
    t = best_of_interleaved(repeat, jobs)
    n_deltas = (len(text) + 3) // 4
    table = Table()
    checks: list[tuple[str, float, bool]] = []
    for kind, what in (("answer", "structured answer"), ("tool", "tool-call arguments")):
        label = f"(7) {what}, 4-byte deltas"
        nbytes, base = sum(map(len, answer if kind == "answer" else tool)), t[kind]
        table.add(label, "chunkwise, live patches", base, nbytes, n_deltas, base)
        table.add(
            label, "chunkwise, + preview read/delta", t[f"{kind}-preview"], nbytes, n_deltas, base
        )
        table.add(
            label,
            "  the same at half the size",
            t[f"{kind}-preview-half"],
            nbytes // 2,
            n_deltas // 2,
            base,
        )
        table.add(label, "chunkwise, plain content", t["answer-plain"], nbytes, n_deltas, base)
        table.add(label, "chunkwise, previews off (info)", t[f"{kind}-off"], nbytes, n_deltas, base)
        table.add(label, "sdk ChatCompletionStreamState", t[f"sdk-{kind}"], nbytes, n_deltas, base)
        ratio = t[f"sdk-{kind}"] / base
        checks.append((f"live {what} >= 100x faster than the SDK's", ratio, ratio >= 100))
        ratio = base / t["answer-plain"]
        checks.append((f"live {what} <= 1.5x plain content", ratio, ratio <= 1.5))
        ratio = t[f"{kind}-preview"] / t[f"{kind}-preview-half"]
        checks.append(
            (f"{what}, preview read/delta: size x2 -> time x (2 = linear)", ratio, ratio <= 2.5)
        )
    print(f"input (7): a records document of {len(text):,} characters, {n_deltas:,} deltas")
    table.print()
    return checks


# -- report -------------------------------------------------------------------


class Table:
    def __init__(self) -> None:
        self.rows: list[tuple[str, str, str, str, str, str]] = []

    def add(
        self,
        label: str,
        contender: str,
        seconds: float,
        nbytes: int,
        events: int | None,
        baseline: float,
    ) -> None:
        self.rows.append(
            (
                label,
                contender,
                f"{seconds:.4f}",
                f"{nbytes / seconds / 1e6:.1f}",
                f"{events / seconds:,.0f}" if events else "-",
                f"{seconds / baseline:.2f}x",
            )
        )

    def print(self) -> None:
        head = ("input", "contender", "seconds", "MB/s", "events/s", "vs chunkwise")
        widths = [max(len(r[i]) for r in [head, *self.rows]) for i in range(len(head))]
        for n, row in enumerate([head, *self.rows]):
            cells = [
                c.ljust(w) if i < 2 else c.rjust(w)
                for i, (c, w) in enumerate(zip(row, widths, strict=True))
            ]
            print("  ".join(cells))
            if n == 0:
                print("  ".join("-" * w for w in widths))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3, help="best of N runs (default 3)")
    ap.add_argument("--quick", action="store_true", help="small sizes, one run: a smoke test")
    ap.add_argument("--chunks", type=int, help="content chunks in inputs 1-2 (default 100000)")
    ap.add_argument("--big-mib", type=int, help="size of the one-line event in MiB (default 8)")
    ap.add_argument(
        "--deltas", type=int, help="text deltas of the Responses input (4) (default 100000)"
    )
    ap.add_argument(
        "--sdk-limit",
        type=int,
        help="time the SDK on the first N chunks only and scale by events/s "
        "(default: the whole stream, unless one SDK run exceeds --sdk-budget)",
    )
    ap.add_argument(
        "--sdk-budget",
        type=float,
        default=60.0,
        help="seconds one SDK run may take before the SDK is timed on a prefix (default 60)",
    )
    ap.add_argument(
        "--partial-json", action="store_true", help="run input (5) only: the partial-JSON parser"
    )
    ap.add_argument(
        "--live-values", action="store_true", help="run input (7) only: live values vs the SDK"
    )
    args = ap.parse_args(argv)
    repeat = 1 if args.quick and args.repeat == 3 else args.repeat
    if args.partial_json:
        return report_targets(bench_partial_json(repeat, 10_000 if args.quick else 100_000))
    if args.live_values:
        return report_targets(bench_live_values(repeat, 10_000 if args.quick else 100_000))
    n_chunks = args.chunks or (5_000 if args.quick else 100_000)
    big = (args.big_mib or (1 if args.quick else 8)) * MIB
    n_deltas = args.deltas or (5_000 if args.quick else 100_000)

    print(f"chunkwise {chunkwise.__version__}, openai {openai.__version__}")
    print(
        f"Python {platform.python_version()} ({platform.python_implementation()}), "
        f"{platform.platform()}, {os.cpu_count()} CPUs"
    )
    print(f"best of {repeat}, interleaved; MB = 10^6 bytes; events = SSE events in the stream")
    print()

    events, payloads, expected = make_stream(n_chunks)
    data = b"".join(events)
    grouped = split_reads(data, 64 * KIB)
    n_events = len(events)
    print(
        f"input (1): {n_chunks:,} content chunks, {n_events:,} events, {len(data):,} bytes "
        f"({len(data) / n_events:.0f} bytes/event), {len(grouped):,} reads of 64 KiB"
    )
    print(f"input (2): the same, {n_events:,} reads of one event each")
    body, big_content = make_bigevent(big)
    small_reads, large_reads = split_reads(body, KIB), split_reads(body, 64 * KIB)
    print(
        f"input (3): one data: line of {len(body):,} bytes, {len(small_reads):,} reads of 1 KiB "
        f"or {len(large_reads):,} reads of 64 KiB"
    )
    r_events, r_expected = response_events(n_deltas)
    r_data = b"".join(r_events)
    r_grouped = split_reads(r_data, 64 * KIB)
    r_payloads = [e.split(b"\ndata: ", 1)[1][:-2].decode("utf-8") for e in r_events]
    print(
        f"input (4): a Responses stream of {n_deltas:,} text deltas, {len(r_events):,} events, "
        f"{len(r_data):,} bytes, {len(r_grouped):,} reads of 64 KiB"
    )

    c_events, c_expected = completion_events(n_chunks)
    c_data = b"".join(c_events)
    c_grouped = split_reads(c_data, 64 * KIB)
    c_payloads = [e[6:-2].decode("utf-8") for e in c_events[:-1]]
    print(
        f"input (6): a completions stream of {n_chunks:,} text chunks, {len(c_events):,} events, "
        f"{len(c_data):,} bytes, {len(c_grouped):,} reads of 64 KiB"
    )

    m_events, m_expected = message_events(n_chunks)
    m_data = b"".join(m_events)
    m_grouped = split_reads(m_data, 64 * KIB)
    m_payloads = [e.split(b"\ndata: ", 1)[1][:-2].decode("utf-8") for e in m_events]
    print(
        f"input (8): an Anthropic Messages stream of {n_chunks:,} text deltas and a tool call, "
        f"{len(m_events):,} events, {len(m_data):,} bytes, {len(m_grouped):,} reads of 64 KiB"
    )

    # -- verify before timing -------------------------------------------------
    for name, reads in (("(1)", grouped), ("(2)", events)):
        if run_chunkwise(reads) != expected:
            print(f"FAIL: chunkwise content differs from the generator's on input {name}")
            return 1
    for reads in (small_reads, large_reads):
        if run_chunkwise(reads) != big_content:
            print("FAIL: chunkwise content differs from the generator's on input (3)")
            return 1
    if run_chunkwise_responses(r_grouped) != r_expected:
        print("FAIL: chunkwise output_text differs from the generator's on input (4)")
        return 1
    if run_sdk_responses(r_grouped) != r_expected:
        print("FAIL: the SDK's responses.stream() path and chunkwise differ on input (4)")
        return 1
    if run_chunkwise_completions(c_grouped) != c_expected:
        print("FAIL: chunkwise text differs from the generator's on input (6)")
        return 1
    if run_sdk_completions(c_grouped) != c_expected:
        print("FAIL: the SDK's completions path and chunkwise differ on input (6)")
        return 1
    if run_chunkwise_messages(m_grouped) != m_expected:
        print("FAIL: chunkwise text differs from the generator's on input (8)")
        return 1
    if run_sdk_messages(m_grouped) != m_expected:
        print("FAIL: the anthropic SDK's messages.stream() path and chunkwise differ on input (8)")
        return 1
    start = time.perf_counter()
    sdk_content = run_sdk_accumulate(grouped)
    t_first_sdk = time.perf_counter() - start
    if sdk_content != expected:
        print("FAIL: the SDK's accumulate path and chunkwise differ on input (1)")
        return 1
    print(
        "verified: chunkwise and the SDK's accumulate path reconstruct the same content on "
        f"input (1) (that SDK run took {t_first_sdk:.1f} s)"
    )

    sdk_limit = n_chunks
    if args.sdk_limit is not None and 0 < args.sdk_limit < n_chunks:
        sdk_limit = args.sdk_limit
    elif t_first_sdk > args.sdk_budget:
        sdk_limit = max(1, n_chunks // 5)
    scaled = sdk_limit < n_chunks
    if scaled:
        sdk_events, _, sdk_expected = make_stream(sdk_limit)
        sdk_grouped = split_reads(b"".join(sdk_events), 64 * KIB)
        why = "as asked" if args.sdk_limit else f"one run took more than {args.sdk_budget:.0f} s"
        print(
            f"SDK contenders: timed on the first {sdk_limit:,} chunks ({why}) and scaled to "
            f"{n_chunks:,} by events/s"
        )
    else:
        sdk_events, sdk_expected, sdk_grouped = events, expected, grouped
    print()

    # -- time ------------------------------------------------------------------
    jobs: dict[str, Job] = {
        "cw1": (run_chunkwise, grouped, expected),
        "cw2": (run_chunkwise, events, expected),
        "floor": (run_floor, payloads, None),
        "sdk1": (run_sdk_accumulate, sdk_grouped, sdk_expected),
        "sdk2": (run_sdk_accumulate, sdk_events, sdk_expected),
        "dec1": (run_sdk_decode, sdk_grouped, sdk_expected),
        "big64k": (run_chunkwise, large_reads, big_content),
        "big1k": (run_chunkwise, small_reads, big_content),
        "cw4": (run_chunkwise_responses, r_grouped, r_expected),
        "sdk4": (run_sdk_responses, r_grouped, r_expected),
        "floor4": (run_floor, r_payloads, None),
        "cw6": (run_chunkwise_completions, c_grouped, c_expected),
        "sdk6": (run_sdk_completions, c_grouped, c_expected),
        "floor6": (run_floor, c_payloads, None),
        "cw7": (run_chunkwise_messages, m_grouped, m_expected),
        "sdk7": (run_sdk_messages, m_grouped, m_expected),
        "floor7": (run_floor, m_payloads, None),
    }
    half_events: list[bytes] = []
    if scaled:
        half_events = make_stream(sdk_limit // 2)[0]
        jobs["sdk-half"] = (run_sdk_accumulate, split_reads(b"".join(half_events), 64 * KIB), None)
    t = best_of_interleaved(repeat, jobs)
    scale = n_events / len(sdk_events)
    star = "*" if scaled else ""
    table = Table()
    for n, label in ((1, "(1) 64 KiB reads"), (2, "(2) one event/read")):
        t_cw = t[f"cw{n}"]
        table.add(label, "chunkwise", t_cw, len(data), n_events, t_cw)
        table.add(label, "sdk-accumulate" + star, t[f"sdk{n}"] * scale, len(data), n_events, t_cw)
        if n == 1 and scaled:
            table.add(label, "sdk-accumulate, whole, 1 run", t_first_sdk, len(data), n_events, t_cw)
        if n == 1:
            table.add(
                label, "sdk-decode (info)" + star, t["dec1"] * scale, len(data), n_events, t_cw
            )
        table.add(label, "floor json.loads", t["floor"], len(data), n_events, t_cw)
    mib = big // MIB
    t_large, t_small = t["big64k"], t["big1k"]
    table.add(f"(3) {mib} MiB line, 64 KiB reads", "chunkwise", t_large, len(body), 3, t_large)
    table.add(f"(3) {mib} MiB line, 1 KiB reads", "chunkwise", t_small, len(body), 3, t_large)
    label = "(4) Responses, 64 KiB reads"
    table.add(label, "chunkwise", t["cw4"], len(r_data), len(r_events), t["cw4"])
    table.add(label, "sdk responses.stream()", t["sdk4"], len(r_data), len(r_events), t["cw4"])
    table.add(label, "floor json.loads", t["floor4"], len(r_data), len(r_events), t["cw4"])
    label = "(6) completions, 64 KiB reads"
    table.add(label, "chunkwise", t["cw6"], len(c_data), len(c_events), t["cw6"])
    table.add(label, "sdk completions", t["sdk6"], len(c_data), len(c_events), t["cw6"])
    table.add(label, "floor json.loads", t["floor6"], len(c_data), len(c_events), t["cw6"])
    label = "(8) Anthropic Messages, 64 KiB reads"
    table.add(label, "chunkwise", t["cw7"], len(m_data), len(m_events), t["cw7"])
    table.add(label, "anthropic messages.stream()", t["sdk7"], len(m_data), len(m_events), t["cw7"])
    table.add(label, "floor json.loads", t["floor7"], len(m_data), len(m_events), t["cw7"])
    table.print()
    print()
    print(
        "sdk-accumulate: the SDK's Stream decoding + ChatCompletionStreamState.handle_chunk; "
        "sdk-decode: the same without the state (iterating ChatCompletionChunk objects only)."
    )
    if scaled:
        print(f"* timed on the first {sdk_limit:,} chunks and scaled by events/s.")
        per_half = t["sdk-half"] / len(half_events) * 1e6
        per_full = t["sdk1"] / len(sdk_events) * 1e6
        print(
            f"  sdk-accumulate costs {per_half:.1f} us/event over {sdk_limit // 2:,} chunks and "
            f"{per_full:.1f} us/event over {sdk_limit:,} chunks; where that grows, the scaled "
            "figure understates the SDK's time on the whole stream."
        )

    # -- targets -------------------------------------------------------------------
    checks = [
        (f"chunkwise >= 40x faster than sdk-accumulate, input ({n})", ratio, ratio >= 40)
        for n in (1, 2)
        for ratio in [t[f"sdk{n}"] * scale / t[f"cw{n}"]]
    ]
    checks += [
        (f"chunkwise <= 2x the json.loads floor, input ({n})", ratio, ratio <= 2)
        for n in (1, 2)
        for ratio in [t[f"cw{n}"] / t["floor"]]
    ]
    ratio = t["big1k"] / t["big64k"]
    checks.append((f"{mib} MiB line: 1 KiB reads <= 2x 64 KiB reads", ratio, ratio <= 2))
    ratio = t["sdk4"] / t["cw4"]
    checks.append(
        ("chunkwise >= 20x faster than sdk responses.stream(), input (4)", ratio, ratio >= 20)
    )
    ratio = t["sdk6"] / t["cw6"]
    checks.append(("chunkwise >= 20x faster than sdk completions, input (6)", ratio, ratio >= 20))
    ratio = t["sdk7"] / t["cw7"]
    checks.append(
        ("chunkwise >= 20x faster than anthropic messages.stream(), input (8)", ratio, ratio >= 20)
    )
    print()
    checks += bench_partial_json(repeat, 10_000 if args.quick else 100_000)
    print()
    checks += bench_live_values(repeat, 10_000 if args.quick else 100_000)
    return report_targets(checks)


def report_targets(checks: list[tuple[str, float, bool]]) -> int:
    print()
    print("targets (reported, not asserted):")
    width = max(len(c[0]) for c in checks)
    for text, ratio, ok in checks:
        print(f"  {text.ljust(width)}  {ratio:6.2f}x  {'PASS' if ok else 'MISS'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

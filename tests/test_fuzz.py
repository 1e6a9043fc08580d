"""Fuzzing the sans-IO layers: what tests/test_sse_properties.py and
tests/test_chat_properties.py do not already cover.

* :class:`~chunkwise.ChatStreamParser` over arbitrary bytes (biased towards the
  tokens of a chat stream), cut into arbitrary reads: it never raises, every
  split gives the same events and result, one terminal event ends the events,
  and the deltas add up to the result.
* JSON-shaped chunks (valid or not) written as an SSE body, cut into arbitrary
  reads: the same, and the bytes path agrees with feeding the same chunks to a
  :class:`~chunkwise.ChatAccumulator` directly.
* Memory is bounded: an endless event stops the parser after ``max_event_size``
  plus one read, and the peak allocation stays near that (tracemalloc).
* A smoke run of the atheris harnesses in fuzz/ (their ``TestOneInput`` on a few
  hundred inputs), so the long-run harnesses cannot rot; atheris is not needed.
"""

from __future__ import annotations

import json
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import chunkwise
from _streams import parse, splits
from test_chat_properties import chunk_values

sys.path.insert(0, str(Path(__file__).parents[1] / "fuzz"))
import fuzz_parser
import fuzz_sse

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Pieces of chat streams, to be glued together at random.
CHAT_TOKENS = [
    b"data: ",
    b"data:",
    b"\n",
    b"\n\n",
    b"\r\n",
    b"\r",
    b"[DONE]",
    b"event: error\n",
    b"error: boom\n",
    b": ping\n\n",
    b'{"choices":[{"index":0,"delta":{"content":"',
    b'{"choices":[{"index":1,"delta":{"role":"assistant","content":"',
    b'{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":'
    b'{"name":"f","arguments":"',
    b'{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}',
    b'{"choices":[],"usage":{"total_tokens":3}}',
    b'{"error":{"message":"x","code":429}}',
    b'"}}]}',
    b'"}]}}]}',
    "é😀中".encode(),
    "😀".encode()[:2],
    b"\xef\xbb\xbf",
    b"\x00",
    b"}",
    b",",
]
chat_bytes = st.lists(
    st.one_of(st.sampled_from(CHAT_TOKENS), st.binary(max_size=8)), max_size=40
).map(b"".join)


def cut(data: st.DataObject, body: bytes) -> list[bytes]:
    points = data.draw(st.lists(st.integers(0, len(body)), max_size=25), label="cuts")
    return splits(body, points)


@SETTINGS
@given(data=st.data(), body=chat_bytes, limit=st.sampled_from([16, 100, 1 << 24]))
def test_parser_over_arbitrary_bytes_and_any_split(
    data: st.DataObject, body: bytes, limit: int
) -> None:
    whole = parse([body], max_event_size=limit)
    fuzz_parser.check(*whole, limit)
    assert parse(cut(data, body), max_event_size=limit) == whole
    if whole[1].status == "failed" and isinstance(whole[1].error, chunkwise.EventTooLarge):
        assert whole[1].error.limit == limit


def sse_body(chunks: list[Any], eol: str, done: bool, ensure_ascii: bool) -> bytes:
    lines = [f"data: {json.dumps(c, ensure_ascii=ensure_ascii)}{eol}{eol}" for c in chunks]
    if done:
        lines.append(f"data: [DONE]{eol}{eol}")
    return "".join(lines).encode()


@SETTINGS
@given(
    data=st.data(),
    chunks=st.lists(chunk_values, max_size=6),
    eol=st.sampled_from(["\n", "\r\n", "\r"]),
    done=st.booleans(),
    ensure_ascii=st.booleans(),
)
def test_json_shaped_chunks_as_sse_any_split(
    data: st.DataObject, chunks: list[Any], eol: str, done: bool, ensure_ascii: bool
) -> None:
    body = sse_body(chunks, eol, done, ensure_ascii)
    events, result = parse([body])
    fuzz_parser.check(events, result, chunkwise.DEFAULT_MAX_EVENT_SIZE)
    assert parse(cut(data, body)) == (events, result)
    # Bytes in or chunks in: the same stream events and result.
    accumulator = chunkwise.ChatAccumulator()
    direct: list[chunkwise.Event] = []
    for c in chunks:
        direct += accumulator.feed_chunk(c)
        if accumulator.finished:
            break
    if done:
        direct += accumulator.feed_event(chunkwise.ServerSentEvent(data="[DONE]"))
    direct += accumulator.end()
    assert comparable(direct) == comparable(events)


def comparable(events: list[chunkwise.Event]) -> list[Any]:
    """Events without anomalies, errors as (type, message).

    The bytes path keeps the offending text in ``InvalidChunk.data``; a chunk
    fed as a mapping has no text.  Anomalies differ in the same way.
    """
    out: list[Any] = []
    for event in events:
        if type(event) is chunkwise.AnomalyDetected:
            continue
        if isinstance(event, chunkwise.TerminalEvent):
            result = event.result
            error = result.error
            out.append(
                (
                    type(event),
                    attrs.evolve(result, error=None, anomalies=()),
                    None if error is None else (type(error), str(error)),
                )
            )
            continue
        out.append(event)
    return out


# --- memory stays bounded ---------------------------------------------------------------

LIMIT = 64 * 1024
READ = 4 * 1024


@pytest.mark.parametrize(
    ("opening", "filler"),
    [(b"data: ", b"a" * READ), (b"", (b"data: " + b"b" * 58 + b"\n") * (READ // 64))],
    ids=["one-endless-line", "endless-data-lines"],
)
def test_endless_event_stops_the_parser_with_bounded_memory(opening: bytes, filler: bytes) -> None:
    parser = chunkwise.ChatStreamParser(max_event_size=LIMIT)
    first = b'data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n'
    events = parser.feed(first + opening)
    fed = len(first + opening)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        # 8 MiB offered; the parser must be done long before that.
        while not parser.finished and fed < 8 * 1024 * 1024:
            events += parser.feed(filler)
            fed += len(filler)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert parser.finished
    # The limit counts the event's data characters, not the "data: " prefixes.
    assert fed <= 1.2 * LIMIT + 2 * READ
    # Buffering up to the limit costs a few times the limit (str + list overhead),
    # not the 8 MiB offered.
    assert peak < 8 * LIMIT, peak
    result = parser.result
    assert result.status == "failed" and isinstance(result.error, chunkwise.EventTooLarge)
    assert result.content == "hi"
    assert isinstance(events[-1], chunkwise.StreamFailed)


def test_sse_decoder_endless_event_has_bounded_memory() -> None:
    decoder = chunkwise.SSEDecoder(max_event_size=LIMIT)
    decoder.feed(b"data: ")
    fed = 0
    tracemalloc.start()
    try:
        with pytest.raises(chunkwise.EventTooLarge):
            while fed < 8 * 1024 * 1024:
                decoder.feed(b"\xe4\xb8\xad" * (READ // 3))  # 3-byte characters
                fed += READ
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert fed <= 3 * LIMIT + READ  # counted in characters: 3 bytes each
    assert peak < 8 * LIMIT, peak


# --- smoke runs of the atheris harnesses ------------------------------------------------


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=3000))
def test_fuzz_sse_harness_smoke(data: bytes) -> None:
    fuzz_sse.TestOneInput(data)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=3000))
def test_fuzz_parser_harness_smoke(data: bytes) -> None:
    fuzz_parser.TestOneInput(data)


def test_fuzz_harnesses_on_the_recorded_streams() -> None:
    # Real streams as inputs (the README suggests them as seed corpus).
    recordings = sorted((Path(__file__).parent / "data" / "openai_recordings").glob("*.sse"))
    assert recordings
    for path in recordings:
        raw = path.read_bytes()
        for prefix in (b"", b"\x00\x00", b"\x01\x02\x00\x10", b"\x05\x00\x01\xff\x07"):
            fuzz_sse.TestOneInput(prefix + raw)
            fuzz_parser.TestOneInput(prefix + raw)


def test_harness_byte_reader_is_total() -> None:
    # Any input, even empty, is a valid test case.
    fuzz_sse.TestOneInput(b"")
    fuzz_parser.TestOneInput(b"")
    fuzz_parser.TestOneInput(b"\x01")
    assert attrs.has(chunkwise.ChatResult)

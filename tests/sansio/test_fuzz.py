"""Fuzzing the sans-IO layers: what tests/test_sse_properties.py and
tests/test_chat_properties.py do not already cover.

* :class:`~chunkwise.chat.Parser` over arbitrary bytes (biased towards the
  tokens of a chat stream), cut into arbitrary reads: it never raises, every
  split gives the same events and result, one terminal event ends the events,
  and the deltas add up to the result.
* JSON-shaped chunks (valid or not) written as an SSE body, cut into arbitrary
  reads: the same, and the bytes path agrees with feeding the same chunks to a
  :class:`~chunkwise.chat.Accumulator` directly.
* Memory is bounded: an endless event stops the parser after ``max_event_size``
  plus one read, and the peak allocation stays near that (tracemalloc).
* A smoke run of the atheris harnesses in fuzz/ (their ``TestOneInput`` on a few
  hundred inputs and on the seeds in fuzz/_seeds.py), so the long-run harnesses
  cannot rot; atheris is not needed.

The properties run derandomized: CI runs the same examples every time, and a
failure found by a longer local run (``--hypothesis-seed``, or a profile
without ``derandomize``) is pinned with ``@example``.
"""

from __future__ import annotations

import json
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import chunkwise
from helpers.data import RECORDINGS
from helpers.reads import byte_reads, parse_chat, split_at
from helpers.strategies import chunk_values

sys.path.insert(0, str(Path(__file__).parents[2] / "fuzz"))
import _bytes
import _seeds
import fuzz_parser
import fuzz_responses
import fuzz_sse

SETTINGS = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)

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
    return split_at(body, points)


def _nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


@SETTINGS
@given(
    body=chat_bytes,
    limit=st.sampled_from([16, 100, 1 << 24]),
    cuts=st.lists(st.integers(0, 1 << 16), max_size=25),
)
# Found by this property unseeded: the U+FFFD flushed by end() made the cut-off
# line too large, and ChatStreamParser.end() let EventTooLarge escape.
@example(body=b"data: data:data:" + b"\x00" * 6 + b"\xc2", limit=16, cuts=[])
@example(body=b"data: data:data:" + b"\x00" * 6 + b"\xc2", limit=16, cuts=[7, 22])
# JSON past the recursion and integer-digit limits, and numbers that are not finite.
@example(body=b"data: " + _nested(5000) + b"\n\n", limit=1 << 24, cuts=[])
@example(body=b'data: {"choices":[],"usage":' + _nested(5000) + b"}\n\n", limit=1 << 24, cuts=[9])
@example(body=b"event: error\ndata: " + _nested(5000) + b"\n\n", limit=1 << 24, cuts=[])
@example(body=b'data: {"usage":{"n":' + b"9" * 5000 + b"}}\n\n", limit=1 << 24, cuts=[])
@example(body=b'data: {"usage":{"n":1e999,"m":-1e999}}\n\n', limit=1 << 24, cuts=[30])
@example(body=b'data: {"usage":{"n":NaN}}\n\n', limit=1 << 24, cuts=[])
def test_parser_over_arbitrary_bytes_and_any_split(
    body: bytes, limit: int, cuts: list[int]
) -> None:
    whole = parse_chat([body], max_event_size=limit)
    fuzz_parser.check(*whole, limit)
    assert parse_chat(split_at(body, cuts), max_event_size=limit) == whole
    assert parse_chat(byte_reads(body), max_event_size=limit) == whole
    if whole[1].status == "failed" and isinstance(whole[1].error, chunkwise.errors.EventTooLarge):
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
    events, result = parse_chat([body])
    fuzz_parser.check(events, result, chunkwise.types.DEFAULT_MAX_EVENT_SIZE)
    assert parse_chat(cut(data, body)) == (events, result)
    # Bytes in or chunks in: the same stream events and result.
    accumulator = chunkwise.chat.Accumulator()
    direct: list[chunkwise.Event] = []
    for c in chunks:
        direct += accumulator.feed(c)
        if accumulator.finished:
            break
    if done:
        direct += accumulator.feed_sse(chunkwise.ServerSentEvent(data="[DONE]"))
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
    parser = chunkwise.chat.Parser(max_event_size=LIMIT)
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
    assert result.status == "failed" and isinstance(result.error, chunkwise.errors.EventTooLarge)
    assert result.content == "hi"
    assert isinstance(events[-1], chunkwise.StreamFailed)


def test_sse_decoder_endless_event_has_bounded_memory() -> None:
    decoder = chunkwise.SSEDecoder(max_event_size=LIMIT)
    decoder.feed(b"data: ")
    fed = 0
    tracemalloc.start()
    try:
        with pytest.raises(chunkwise.errors.EventTooLarge):
            while fed < 8 * 1024 * 1024:
                decoder.feed(b"\xe4\xb8\xad" * (READ // 3))  # 3-byte characters
                fed += READ
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert fed <= 3 * LIMIT + READ  # counted in characters: 3 bytes each
    assert peak < 8 * LIMIT, peak


# --- smoke runs of the atheris harnesses ------------------------------------------------


SMOKE = settings(SETTINGS, max_examples=300)


@SMOKE
@given(data=st.binary(max_size=3000))
def test_fuzz_sse_harness_smoke(data: bytes) -> None:
    fuzz_sse.TestOneInput(data)


@SMOKE
@given(data=st.binary(max_size=3000))
def test_fuzz_parser_harness_smoke(data: bytes) -> None:
    fuzz_parser.TestOneInput(data)


@pytest.mark.parametrize("name", sorted(_seeds.sse_seeds()))
def test_fuzz_sse_harness_on_its_seeds(name: str) -> None:
    fuzz_sse.TestOneInput(_seeds.sse_seeds()[name])


@pytest.mark.parametrize("name", sorted(_seeds.parser_seeds()))
def test_fuzz_parser_harness_on_its_seeds(name: str) -> None:
    fuzz_parser.TestOneInput(_seeds.parser_seeds()[name])


def test_seeds_select_the_body_and_limit_they_are_meant_for() -> None:
    # A seed whose prefix no longer matches the harness would fuzz something else.
    for name, data in _seeds.parser_seeds().items():
        reader = _bytes.ByteReader(data)
        assert reader.byte() & 1, name  # raw mode
        limit = fuzz_parser.LIMITS[reader.int_below(len(fuzz_parser.LIMITS))]
        body = reader.take(reader.int_below(_bytes.MAX_BODY))
        assert body == _seeds.BODIES.get(name, _seeds.cut_off_line(64)), name
        assert limit == (
            64 if name.startswith("cut-off") else chunkwise.types.DEFAULT_MAX_EVENT_SIZE
        )
    for name, data in _seeds.sse_seeds().items():
        reader = _bytes.ByteReader(data)
        limit = fuzz_sse.LIMITS[reader.int_below(len(fuzz_sse.LIMITS))]
        assert reader.byte() & 1, name  # legacy error field
        body = reader.take(reader.int_below(_bytes.MAX_BODY))
        assert body == _seeds.BODIES.get(name, _seeds.cut_off_line(100)), name
        assert limit == (
            100 if name.startswith("cut-off") else chunkwise.types.DEFAULT_MAX_EVENT_SIZE
        )


def test_fuzz_harnesses_on_the_recorded_streams() -> None:
    # Real streams as inputs (the README suggests them as seed corpus).
    assert RECORDINGS
    for path in RECORDINGS:
        raw = path.read_bytes()
        for prefix in (b"", b"\x00\x00", b"\x01\x02\x00\x10", b"\x05\x00\x01\xff\x07"):
            fuzz_sse.TestOneInput(prefix + raw)
            fuzz_parser.TestOneInput(prefix + raw)


@SMOKE
@given(data=st.binary(max_size=3000))
def test_fuzz_responses_harness_smoke(data: bytes) -> None:
    fuzz_responses.TestOneInput(data)


@pytest.mark.parametrize("name", sorted(_seeds.responses_seeds()))
def test_fuzz_responses_harness_on_its_seeds(name: str) -> None:
    fuzz_responses.TestOneInput(_seeds.responses_seeds()[name])


def test_responses_seeds_select_the_body_and_limit_they_are_meant_for() -> None:
    bodies = {**_seeds.BODIES, **_seeds.RESPONSE_BODIES}
    for name, data in _seeds.responses_seeds().items():
        reader = _bytes.ByteReader(data)
        assert reader.byte() & 1, name  # raw mode
        limit = fuzz_responses.LIMITS[reader.int_below(len(fuzz_responses.LIMITS))]
        body = reader.take(reader.int_below(_bytes.MAX_BODY))
        assert body == bodies.get(name, _seeds.cut_off_line(64)), name
        assert limit == (
            64 if name.startswith("cut-off") else chunkwise.types.DEFAULT_MAX_EVENT_SIZE
        )


RESPONSE_RECORDINGS = sorted((Path(__file__).parents[1] / "data").glob("*/*.sse"))


def test_fuzz_responses_harness_on_the_recorded_streams() -> None:
    # Real and captured Responses streams (OpenAI-shaped, llama.cpp's), behind
    # the prefixes of the other harnesses: raw mode, and events mode.
    assert any(path.parent.name == "responses" for path in RESPONSE_RECORDINGS)
    assert any(path.parent.name == "llama_cpp" for path in RESPONSE_RECORDINGS)
    for path in RESPONSE_RECORDINGS:
        if path.parent.name not in ("responses", "llama_cpp"):
            continue
        raw = path.read_bytes()
        for prefix in (b"", b"\x00\x00", b"\x01\x00\x02\x3f\xff", b"\x05\x00\x01\xff\x07"):
            fuzz_responses.TestOneInput(prefix + raw)
    # In raw mode with the default limit, a recording is parsed whole: it completes.
    text = (Path(__file__).parents[1] / "data" / "responses" / "llama_cpp_text.sse").read_bytes()
    events, result = fuzz_responses.parse([text], chunkwise.types.DEFAULT_MAX_EVENT_SIZE)
    fuzz_responses.check(events, result, text, chunkwise.types.DEFAULT_MAX_EVENT_SIZE)
    assert result.status == "complete"


def test_harness_byte_reader_gives_zeros_when_exhausted_and_reads_rejoin() -> None:
    # Any input, even empty, is a valid test case: an exhausted reader gives
    # zeros and empty takes, and the reads it chooses always rejoin the body.
    reader = _bytes.ByteReader(b"\x01\x02\x03")
    assert (reader.byte(), reader.int_below(1000), reader.remaining) == (1, 0x0203, 0)
    assert (reader.byte(), reader.int_below(7), reader.take(5), reader.rest()) == (0, 0, b"", b"")
    assert reader.choice(["a", "b"]) == "a"
    body = bytes(range(200))
    for data in (b"", b"\x00", b"\x05\x40\xff", bytes(range(256))):
        reads = _bytes.split_reads(_bytes.ByteReader(data), body)
        assert b"".join(reads) == body, data
    fuzz_sse.TestOneInput(b"")
    fuzz_parser.TestOneInput(b"")
    fuzz_parser.TestOneInput(b"\x01")
    fuzz_responses.TestOneInput(b"")
    fuzz_responses.TestOneInput(b"\x01")

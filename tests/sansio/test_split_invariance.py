"""Split invariance, proven where it is created: the SSE decoders and ``StreamParser``.

Theory
------
A body reaches a parser in whatever reads the network gives, so every layer
must answer the same whatever the reads.  Two layers create that property:

1. The SSE decoders (``helpers.decoders.DECODERS``: :class:`chunkwise.SSEDecoder`
   and the pair decoder every parser runs) buffer the unfinished line, a
   split UTF-8 sequence and a CR that may begin a CRLF: for any reads they give
   the same events, end-of-stream state and ``EventTooLarge`` as for one read.
2. ``StreamParser`` (``chunkwise.lowlevel.StreamParser``; each API's ``Parser``
   is one) hands the decoder's events to its accumulator one at a time, so a
   body gives the same events, result and ``events_received`` in any reads;
   proven here over generated bodies of each API, over SSE noise (with small
   ``max_event_size`` limits), and over every recorded body in ``tests/data``.

Everything above those layers (the accumulators, the API rules) sees the same
sequence of server-sent events however the bytes were cut, so the API tests
feed whole bodies; a test there cuts bytes only where a rule depends on the
cut itself.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

import chunkwise
import chunkwise.lowlevel
from helpers.bodies import sse
from helpers.data import DATA, RECORDINGS, load_vectors
from helpers.decoders import DECODERS, Decoder, SSEOutcome, decode_sse
from helpers.reads import byte_reads, pieces_of, split_at
from helpers.strategies import (
    arbitrary_streams,
    chat_streams,
    chunk_values,
    completion_streams,
    reads_of,
    response_streams,
    sse_streams,
)

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
EVERY_DECODER = pytest.mark.parametrize("decoder", DECODERS, ids=str)

# --- 1. the decoders --------------------------------------------------------------------


def decoded(
    decoder: Decoder,
    reads: Sequence[bytes | bytearray | memoryview],
    legacy: bool,
    limit: int | None = None,
) -> SSEOutcome | str:
    """What ``decoder`` gives for ``reads``, or ``"EventTooLarge"``."""
    try:
        return decode_sse(
            reads, legacy_error_field=legacy, max_event_size=limit, decoder=decoder.cls
        )
    except chunkwise.errors.EventTooLarge:
        return "EventTooLarge"


@EVERY_DECODER
@SETTINGS
@given(data=st.data(), stream=sse_streams(), legacy=st.booleans())
def test_any_reads_of_an_event_stream_give_what_one_read_gives(
    decoder: Decoder, data: st.DataObject, stream: bytes, legacy: bool
) -> None:
    reads = data.draw(reads_of(stream), label="reads")
    assert decoded(decoder, reads, legacy) == decoded(decoder, [stream], legacy)


@st.composite
def line_reads_of(draw: st.DrawFn, data: bytes) -> list[bytes]:
    """``data`` cut where lines end and where ``data:`` begins, as servers write: one
    event or one line a write, so a read is often a whole event after a partial line."""
    points = sorted(
        {i + 1 for i, byte in enumerate(data) if byte in b"\r\n"}
        | {i for i in range(len(data)) if data.startswith(b"data:", i)}
    )
    cuts = draw(st.lists(st.sampled_from(points), max_size=12)) if points else []
    return split_at(data, cuts)


@EVERY_DECODER
@SETTINGS
@given(data=st.data(), stream=st.one_of(sse_streams(), arbitrary_streams), legacy=st.booleans())
def test_reads_cut_at_lines_and_events_give_what_one_read_gives(
    decoder: Decoder, data: st.DataObject, stream: bytes, legacy: bool
) -> None:
    # The pair decoder has a path for a read that is one whole data event;
    # it must notice the line a previous read left unfinished.
    reads = data.draw(line_reads_of(stream), label="reads")
    assert decoded(decoder, reads, legacy) == decoded(decoder, [stream], legacy)


@EVERY_DECODER
@SETTINGS
@given(stream=sse_streams(), legacy=st.booleans())
def test_one_byte_reads_give_what_one_read_gives(
    decoder: Decoder, stream: bytes, legacy: bool
) -> None:
    assert decoded(decoder, byte_reads(stream), legacy) == decoded(decoder, [stream], legacy)


@EVERY_DECODER
@SETTINGS
@given(
    data=st.data(),
    stream=st.one_of(arbitrary_streams, st.binary(max_size=200)),
    legacy=st.booleans(),
)
def test_any_reads_of_arbitrary_bytes_give_what_one_read_gives(
    decoder: Decoder, data: st.DataObject, stream: bytes, legacy: bool
) -> None:
    # Invalid UTF-8, lone CRs, NULs and BOMs at every boundary.
    reads = data.draw(reads_of(stream), label="reads")
    assert decoded(decoder, reads, legacy) == decoded(decoder, [stream], legacy)


@EVERY_DECODER
@SETTINGS
@given(
    data=st.data(),
    stream=st.one_of(sse_streams(), arbitrary_streams),
    limit=st.integers(1, 40),
    legacy=st.booleans(),
)
def test_whether_an_event_is_too_large_does_not_depend_on_the_reads(
    decoder: Decoder, data: st.DataObject, stream: bytes, limit: int, legacy: bool
) -> None:
    reads = data.draw(reads_of(stream), label="reads")
    assert decoded(decoder, reads, legacy, limit) == decoded(decoder, [stream], legacy, limit)


# --- 2. StreamParser, for every API -----------------------------------------------------

PARSERS: dict[str, Callable[..., chunkwise.lowlevel.StreamParser[Any]]] = {
    "chat": chunkwise.chat.Parser,
    "responses": chunkwise.responses.Parser,
    "completions": chunkwise.completions.Parser,
}

#: Bodies shaped for each API's parser.
API_BODIES: dict[str, st.SearchStrategy[bytes]] = {
    "chat": chat_streams().map(lambda stream: stream[0])
    | st.builds(
        lambda chunks, done: sse(*chunks, done=done),
        st.lists(chunk_values, max_size=6),
        st.booleans(),
    ),
    "responses": response_streams().map(lambda stream: stream.body),
    "completions": completion_streams(),
}
#: Bytes that are an event stream but no API's (errors, noise, cut-off events).
NOISE = st.one_of(sse_streams(), arbitrary_streams)


def parsed(
    api: str, reads: Sequence[bytes | bytearray | memoryview], limit: int | None = None
) -> tuple[list[str], str, int, bool]:
    """The events, result, ``events_received`` and ``finished`` of a fresh parser fed
    ``reads`` and ended; events and result as reprs (an error in them compares by
    identity)."""
    parser = PARSERS[api]() if limit is None else PARSERS[api](max_event_size=limit)
    events: list[chunkwise.Event] = []
    for read in reads:
        events += parser.feed(read)
    events += parser.end()
    # Whatever the body, a parser ends with exactly one terminal event.
    terminals = [e for e in events if isinstance(e, chunkwise.TerminalEvent)]
    assert len(terminals) == 1 and events[-1] is terminals[0], events[-3:]
    return [repr(e) for e in events], repr(parser.result), parser.events_received, parser.finished


@st.composite
def bodies(draw: st.DrawFn) -> tuple[str, bytes, int | None]:
    """An API, a body (its own shape, or noise) and maybe a small ``max_event_size``."""
    api = draw(st.sampled_from(sorted(PARSERS)))
    body = draw(API_BODIES[api] | NOISE)
    # Small limits often: an event over the limit after one that fits.
    limit = draw(st.none() | st.integers(1, 40) | st.integers(41, 300))
    return api, body, limit


@SETTINGS
@given(data=st.data(), body=bodies())
def test_any_reads_of_a_body_give_the_events_and_result_of_one_read(
    data: st.DataObject, body: tuple[str, bytes, int | None]
) -> None:
    api, raw, limit = body
    reads = data.draw(reads_of(raw), label="reads")
    assert parsed(api, reads, limit) == parsed(api, [raw], limit)


@SETTINGS
@given(data=st.data(), body=bodies())
def test_reads_cut_at_lines_and_events_give_the_events_and_result_of_one_read(
    data: st.DataObject, body: tuple[str, bytes, int | None]
) -> None:
    api, raw, limit = body
    reads = data.draw(line_reads_of(raw), label="reads")
    assert parsed(api, reads, limit) == parsed(api, [raw], limit)


@SETTINGS
@given(body=bodies(), size=st.integers(1, 16))
def test_fixed_size_reads_of_a_body_give_the_events_and_result_of_one_read(
    body: tuple[str, bytes, int | None], size: int
) -> None:
    api, raw, limit = body
    assert parsed(api, pieces_of(raw, size), limit) == parsed(api, [raw], limit)


def _recorded() -> list[Any]:
    """Every recorded body in tests/data, with the parser that reads it."""
    cases = [
        pytest.param("chat", path.read_bytes(), id=f"openai-{path.stem}") for path in RECORDINGS
    ]
    cases += [
        pytest.param("chat", vector["raw"].encode(), id=f"vector-{vector['name']}")
        for vector in load_vectors()
    ]
    cases += [
        pytest.param("responses", path.read_bytes(), id=f"responses-{path.stem}")
        for path in sorted((DATA / "responses").glob("*.sse"))
    ]
    for api in ("completions", "responses"):
        cases += [
            pytest.param(api, path.read_bytes(), id=f"llama-cpp-{path.stem}")
            for path in sorted((DATA / "llama_cpp").glob(f"{api}_*.sse"))
        ]
    return cases


RECORDED = _recorded()


def test_every_recorded_body_is_here() -> None:
    # The corpus is found by globbing: an empty folder must not pass silently.
    ids = [case.id for case in RECORDED]
    for prefix in ("openai-", "vector-", "responses-", "llama-cpp-completions", "llama-cpp-resp"):
        assert any(str(i).startswith(prefix) for i in ids), prefix


@pytest.mark.parametrize(("api", "raw"), RECORDED)
def test_a_recorded_body_gives_the_same_in_any_reads(api: str, raw: bytes) -> None:
    whole = parsed(api, [raw])
    for size in (1, 2, 3, 7, 64, 1000):
        assert parsed(api, pieces_of(raw, size)) == whole, size
    rng = random.Random(len(raw))
    for _ in range(10):
        cuts = rng.sample(range(1, len(raw)), k=min(30, len(raw) - 1))
        assert parsed(api, split_at(raw, cuts)) == whole, cuts


@pytest.mark.parametrize(("api", "raw"), RECORDED[:: max(1, len(RECORDED) // 8)])
def test_a_recorded_body_gives_the_same_cut_at_every_offset(api: str, raw: bytes) -> None:
    # Every two-read cut of a sample of the corpus (all of it takes minutes).
    whole = parsed(api, [raw])
    for cut in range(len(raw) + 1):
        assert parsed(api, split_at(raw, [cut])) == whole, cut

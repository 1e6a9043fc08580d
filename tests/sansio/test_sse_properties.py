"""Hypothesis properties of every SSE decoder the library uses, against WHATWG.

The decoders (``helpers.decoders.DECODERS``: :class:`chunkwise.SSEDecoder` and
the parsers' pair decoder) are compared on whole streams with a naive
whole-stream transcription of the WHATWG algorithm
(``helpers.decoders.reference_decode_sse``); the pair decoder with the
reference's (event type, data) pairs and the same end-of-stream state.  The
``max_event_size`` rule (see :class:`chunkwise.SSEDecoder`) is checked at its
exact boundary.  That reads do not matter is proven in
``test_split_invariance.py``.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

import chunkwise
from helpers.decoders import (
    BOM,
    DECODERS,
    Decoder,
    SSEOutcome,
    data_of,
    decode_sse,
    reference_decode_sse,
)
from helpers.reads import byte_reads
from helpers.strategies import arbitrary_streams, reads_of, sse_streams, values

SETTINGS = settings(max_examples=200, deadline=None)
EVERY_DECODER = pytest.mark.parametrize("decoder", DECODERS, ids=str)


def _assert_matches_reference(decoder: Decoder, stream: bytes, legacy: bool) -> None:
    got = decode_sse([stream], legacy_error_field=legacy, decoder=decoder.cls)
    reference = reference_decode_sse(stream, legacy_error_field=legacy)
    assert got == attrs.evolve(reference, events=tuple(decoder.seen(reference.events)))


@EVERY_DECODER
@SETTINGS
@given(stream=sse_streams(), legacy=st.booleans())
def test_event_stream_matches_the_reference_algorithm(
    decoder: Decoder, stream: bytes, legacy: bool
) -> None:
    _assert_matches_reference(decoder, stream, legacy)


@EVERY_DECODER
@SETTINGS
@given(stream=arbitrary_streams, legacy=st.booleans())
def test_arbitrary_bytes_match_the_reference_algorithm(
    decoder: Decoder, stream: bytes, legacy: bool
) -> None:
    _assert_matches_reference(decoder, stream, legacy)


@EVERY_DECODER
@SETTINGS
@given(stream=st.binary(max_size=200), legacy=st.booleans())
def test_random_bytes_match_the_reference_algorithm(
    decoder: Decoder, stream: bytes, legacy: bool
) -> None:
    # Uniform bytes rarely form fields, but they do hit invalid UTF-8, lone
    # CRs and NULs.
    _assert_matches_reference(decoder, stream, legacy)


@EVERY_DECODER
@SETTINGS
@given(data=st.data(), stream=sse_streams())
def test_events_are_dispatched_as_soon_as_their_blank_line_arrives(
    decoder: Decoder, data: st.DataObject, stream: bytes
) -> None:
    # Feeding a prefix (no end()) yields exactly the events the reference
    # dispatches for that prefix: nothing is held back waiting for more bytes.
    cut = data.draw(st.integers(0, len(stream)), label="cut")
    dec = decoder.cls()
    events: list[object] = []
    for read in data.draw(reads_of(stream[:cut]), label="reads"):
        events.extend(dec.feed(read))
    assert events == decoder.seen(reference_decode_sse(stream[:cut]).events)


@EVERY_DECODER
@SETTINGS
@given(
    data=st.data(),
    stream=st.one_of(arbitrary_streams, sse_streams(), st.binary(max_size=200)),
    limit=st.integers(1, 40),
    legacy=st.booleans(),
)
def test_random_bytes_with_a_small_limit_raise_only_event_too_large(
    decoder: Decoder, data: st.DataObject, stream: bytes, limit: int, legacy: bool
) -> None:
    reads = data.draw(reads_of(stream), label="reads")
    dec = decoder.cls(max_event_size=limit, legacy_error_field=legacy)
    dispatched: list[object] = []
    error: Exception | None = None
    try:
        for read in reads:
            dispatched.extend(dec.feed(read))
        dec.end()
    except Exception as exc:
        error = exc
    if error is not None and not isinstance(error, chunkwise.errors.EventTooLarge):
        pytest.fail(f"unexpected {type(error).__name__}: {error!r}")
    if isinstance(error, chunkwise.errors.EventTooLarge):
        assert error.limit == limit
        assert dec.error is error
    # Anything that was dispatched respects the limit.
    assert all(len(data_of(event)) <= limit for event in dispatched)


def _outcome_or_too_large(
    decoder: Decoder, reads: Sequence[bytes | bytearray | memoryview], limit: int, legacy: bool
) -> SSEOutcome | str:
    try:
        return decode_sse(
            reads, max_event_size=limit, legacy_error_field=legacy, decoder=decoder.cls
        )
    except chunkwise.errors.EventTooLarge:
        return "EventTooLarge"


# --- the max_event_size boundary ----------------------------------------------------------

KEPT_FIELDS = ["data", "data", "data", "event", "id", "retry", "error"]


@st.composite
def sized_blocks(draw: st.DrawFn) -> tuple[str, int]:
    """One block of kept field lines (no blank line) and its size by the documented rule."""
    fields = draw(st.lists(st.sampled_from(KEPT_FIELDS), min_size=1, max_size=6))
    lines = []
    size = -1  # one separator between consecutive lines
    for name in fields:
        separator = draw(st.sampled_from([": ", ":"]))
        line = f"{name}{separator}{draw(values)}"
        value = line[len(name) + 1 :].removeprefix(" ")  # one optional space
        lines.append(line)
        size += len(value) + 1
    return "\n".join(lines), size


@EVERY_DECODER
@SETTINGS
@given(data=st.data(), block=sized_blocks(), terminated=st.booleans())
def test_event_of_exactly_max_event_size_is_accepted_one_more_raises_in_any_reads(
    decoder: Decoder, data: st.DataObject, block: tuple[str, int], terminated: bool
) -> None:
    # The size of an event is the length of its kept values plus one between
    # consecutive lines, counted the same for a line the end of the stream cut
    # off (then from end()).  It is exactly equal to the limit, then one over.
    text, size = block
    stream = (BOM + text + ("\n\n" if terminated else "")).encode()
    reads = data.draw(reads_of(stream), label="reads")
    for limit, too_large in ((size, False), (size - 1, True)):
        if limit < 1:
            continue
        for attempt in (reads, [stream], byte_reads(stream)):
            outcome = _outcome_or_too_large(decoder, attempt, limit, legacy=True)
            assert (outcome == "EventTooLarge") is too_large, (limit, outcome)

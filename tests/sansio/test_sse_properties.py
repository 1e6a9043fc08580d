"""Hypothesis properties of :class:`chunkwise.SSEDecoder`.

The central property: however a byte stream is cut into reads, the decoder
reports the same thing as when it gets the stream in one read.  The single
read is in turn compared with a naive whole-stream transcription of the
WHATWG algorithm (``helpers.decoders.reference_decode_sse``).  The ``max_event_size``
rule (see :class:`chunkwise.SSEDecoder`) is checked at its exact boundary.
"""

from __future__ import annotations

from collections.abc import Sequence

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

import chunkwise
from helpers.decoders import BOM, SSEOutcome, decode_sse, reference_decode_sse
from helpers.reads import as_buffers, byte_reads, split_at

SETTINGS = settings(max_examples=200, deadline=None)

FIELD_NAMES = ["data", "data", "data", "event", "id", "retry", "error", "", "Data", "foo", "data "]
SEPARATORS = [": ", ":", ":  ", ""]
LINE_ENDINGS = ["\n", "\r\n", "\r"]

# Characters that stress decoding and splitting: multibyte (2, 3 and 4 bytes),
# NUL, a mid-stream BOM, Unicode line-ish separators that are *not* SSE line
# endings, digits (for retry) and the colon and space the parser looks for.
SPECIAL_CHARS = [*"abz019 :\t\x00é€中😀\u2028\x85\x0b", BOM, "\u200d"]
value_chars = st.one_of(
    st.sampled_from(SPECIAL_CHARS),
    st.characters(codec="utf-8", exclude_characters="\r\n"),
)
values = st.text(value_chars, max_size=8)
digit_values = st.text(st.sampled_from("0123456789"), min_size=1, max_size=4)


@st.composite
def sse_lines(draw: st.DrawFn) -> str:
    """One line (without its line ending) of a plausible event stream."""
    if draw(st.integers(0, 3)) == 0:
        return ""  # a blank line: dispatch
    name = draw(st.sampled_from(FIELD_NAMES))
    separator = draw(st.sampled_from(SEPARATORS))
    retry_digits = name == "retry" and draw(st.booleans())
    value = draw(digit_values if retry_digits else values)
    if not separator and name in ("data", "event", "id", "retry", "error"):
        value = ""  # "data" alone: the field with an empty value
    return name + separator + value


@st.composite
def sse_streams(draw: st.DrawFn) -> bytes:
    """A whole encoded event stream: lines, any line endings, optional BOM."""
    lines = draw(st.lists(sse_lines(), max_size=25))
    endings = draw(
        st.lists(st.sampled_from(LINE_ENDINGS), min_size=len(lines), max_size=len(lines))
    )
    text = "".join(line + eol for line, eol in zip(lines, endings, strict=True))
    if draw(st.booleans()):
        text += draw(sse_lines())  # a last line without a line ending
    if draw(st.booleans()):
        text = BOM + text
    return text.encode("utf-8")


# Arbitrary bytes, biased towards the tokens the decoder cares about.
TOKENS = [
    b"data:",
    b"data: ",
    b"event: ",
    b"id:",
    b"retry: ",
    b"error: ",
    b":",
    b"\n",
    b"\r",
    b"\r\n",
    b"\n\n",
    b"\xef\xbb\xbf",
    "😀".encode(),
    "€".encode(),
    b"\x00",
    b"12",
]
arbitrary_streams = st.lists(
    st.one_of(st.sampled_from(TOKENS), st.binary(max_size=6)), max_size=30
).map(b"".join)


@st.composite
def reads_of(draw: st.DrawFn, data: bytes) -> list[bytes | bytearray | memoryview]:
    """``data`` cut at arbitrary offsets, each read as bytes, bytearray or memoryview."""
    cuts = draw(st.lists(st.integers(0, len(data)), max_size=10))
    kinds = draw(st.lists(st.integers(0, 2), max_size=4))
    return as_buffers(split_at(data, cuts), kinds)


@SETTINGS
@given(data=st.data(), stream=sse_streams(), legacy=st.booleans())
def test_any_split_of_an_event_stream_gives_the_same_outcome(
    data: st.DataObject, stream: bytes, legacy: bool
) -> None:
    reads = data.draw(reads_of(stream), label="reads")
    assert decode_sse(reads, legacy_error_field=legacy) == decode_sse(
        [stream], legacy_error_field=legacy
    )


@SETTINGS
@given(stream=sse_streams(), legacy=st.booleans())
def test_one_byte_reads_give_the_same_outcome_as_one_read(stream: bytes, legacy: bool) -> None:
    assert decode_sse(byte_reads(stream), legacy_error_field=legacy) == decode_sse(
        [stream], legacy_error_field=legacy
    )


def _assert_matches_reference(stream: bytes, legacy: bool) -> None:
    got = decode_sse([stream], legacy_error_field=legacy)
    assert got == reference_decode_sse(stream, legacy_error_field=legacy)


@SETTINGS
@given(stream=sse_streams(), legacy=st.booleans())
def test_event_stream_matches_the_reference_algorithm(stream: bytes, legacy: bool) -> None:
    _assert_matches_reference(stream, legacy)


@SETTINGS
@given(data=st.data(), stream=sse_streams())
def test_events_are_dispatched_as_soon_as_their_blank_line_arrives(
    data: st.DataObject, stream: bytes
) -> None:
    # Feeding a prefix (no end()) yields exactly the events the reference
    # dispatches for that prefix: nothing is held back waiting for more bytes.
    cut = data.draw(st.integers(0, len(stream)), label="cut")
    dec = chunkwise.SSEDecoder()
    events = []
    for read in data.draw(reads_of(stream[:cut]), label="reads"):
        events.extend(dec.feed(read))
    assert tuple(events) == reference_decode_sse(stream[:cut]).events


@SETTINGS
@given(data=st.data(), stream=arbitrary_streams, legacy=st.booleans())
def test_any_split_of_arbitrary_bytes_gives_the_same_outcome(
    data: st.DataObject, stream: bytes, legacy: bool
) -> None:
    reads = data.draw(reads_of(stream), label="reads")
    assert decode_sse(reads, legacy_error_field=legacy) == decode_sse(
        [stream], legacy_error_field=legacy
    )


@SETTINGS
@given(stream=arbitrary_streams, legacy=st.booleans())
def test_arbitrary_bytes_match_the_reference_algorithm(stream: bytes, legacy: bool) -> None:
    _assert_matches_reference(stream, legacy)


@SETTINGS
@given(data=st.data(), stream=st.binary(max_size=200), legacy=st.booleans())
def test_random_bytes_in_any_reads_match_the_reference_algorithm(
    data: st.DataObject, stream: bytes, legacy: bool
) -> None:
    # Uniform bytes rarely form fields, but they do hit invalid UTF-8, lone
    # CRs and NULs: whatever the reads, the outcome is the reference's.
    reads = data.draw(reads_of(stream), label="reads")
    assert decode_sse(reads, legacy_error_field=legacy) == decode_sse(
        [stream], legacy_error_field=legacy
    )
    _assert_matches_reference(stream, legacy)


@SETTINGS
@given(
    data=st.data(),
    stream=st.one_of(arbitrary_streams, sse_streams(), st.binary(max_size=200)),
    limit=st.integers(1, 40),
    legacy=st.booleans(),
)
def test_random_bytes_with_a_small_limit_raise_only_event_too_large(
    data: st.DataObject, stream: bytes, limit: int, legacy: bool
) -> None:
    reads = data.draw(reads_of(stream), label="reads")
    dec = chunkwise.SSEDecoder(max_event_size=limit, legacy_error_field=legacy)
    dispatched: list[chunkwise.ServerSentEvent] = []
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
    # Anything that was dispatched respects the limit.
    assert all(len(event.data) <= limit for event in dispatched)


def _outcome_or_too_large(
    reads: Sequence[bytes | bytearray | memoryview], limit: int, legacy: bool
) -> SSEOutcome | str:
    try:
        return decode_sse(reads, max_event_size=limit, legacy_error_field=legacy)
    except chunkwise.errors.EventTooLarge:
        return "EventTooLarge"


@SETTINGS
@given(
    data=st.data(),
    stream=st.one_of(sse_streams(), arbitrary_streams),
    limit=st.integers(1, 40),
    legacy=st.booleans(),
)
def test_whether_an_event_is_too_large_does_not_depend_on_the_reads(
    data: st.DataObject, stream: bytes, limit: int, legacy: bool
) -> None:
    reads = data.draw(reads_of(stream), label="reads")
    assert _outcome_or_too_large(reads, limit, legacy) == _outcome_or_too_large(
        [stream], limit, legacy
    )


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


@SETTINGS
@given(data=st.data(), block=sized_blocks(), terminated=st.booleans())
def test_event_of_exactly_max_event_size_is_accepted_one_more_raises_in_any_reads(
    data: st.DataObject, block: tuple[str, int], terminated: bool
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
            outcome = _outcome_or_too_large(attempt, limit, legacy=True)
            assert (outcome == "EventTooLarge") is too_large, (limit, outcome)

"""The SSE decoders' phases: every state × every kind of call → the next state.

The table in ``chunkwise._core.sse``'s theory of operation, as a test: each row
brings a decoder (both decoders the library uses, ``helpers.decoders.DECODERS``)
into a phase, makes one call, and checks what the call returned or raised and
the phase it left the decoder in.  ``max_event_size`` is 8 throughout, so one
short line overflows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import pytest

import chunkwise
from chunkwise.errors import EventTooLarge
from chunkwise.types import DecoderState
from helpers.decoders import DECODERS, Decoder

START = DecoderState.START
DECODING = DecoderState.DECODING
FAILED = DecoderState.FAILED
ENDED = DecoderState.ENDED

MAX = 8
BOM = b"\xef\xbb\xbf"
TOO_LARGE = b"data: 123456789\n"  # a value of 9 characters: one too many

#: One call on a decoder: what it is, to name a row.
Call = tuple[str, Callable[[Any], list[Any]]]


def feed(data: bytes) -> Call:
    return f"feed({data!r})", lambda decoder: decoder.feed(data)


END: Call = ("end()", lambda decoder: decoder.end())


def in_phase(cls: Any, phase: DecoderState) -> Any:
    """A fresh decoder of ``cls``, brought into ``phase`` at an event boundary."""
    decoder = cls(max_event_size=MAX)
    if phase is DECODING:
        assert decoder.feed(b": a comment\n") == []
    elif phase is FAILED:
        with pytest.raises(EventTooLarge):
            decoder.feed(TOO_LARGE)
    elif phase is ENDED:
        assert decoder.end() == []
    assert decoder.state is phase
    return decoder


@attrs.frozen
class Row:
    """From ``phase``, ``call`` returns ``data`` of events (or raises ``raises``) → ``to``."""

    phase: DecoderState
    call: Call
    to: DecoderState
    data: tuple[str, ...] = ()
    raises: type[Exception] | None = None

    def __str__(self) -> str:
        return f"{self.phase.name}-{self.call[0]}"


#: Every phase × every kind of call.  A FAILED decoder raises its error again
#: and an ENDED one refuses feed(), whatever the bytes.
TABLE = [
    # START: a BOM may come; bytes that decode to no character leave it there.
    Row(START, feed(b""), START),
    Row(START, feed(BOM[:2]), START),
    Row(START, feed(BOM), DECODING),
    Row(START, feed(BOM + b"data: hi\n\n"), DECODING, data=("hi",)),
    Row(START, feed(b"data: hi\n\n"), DECODING, data=("hi",)),
    Row(START, feed(TOO_LARGE), FAILED, raises=EventTooLarge),
    Row(START, feed(b"data: hi\n\n" + TOO_LARGE), FAILED, data=("hi",)),
    Row(START, END, ENDED),
    # DECODING: a BOM is now an ordinary character.
    Row(DECODING, feed(b""), DECODING),
    Row(DECODING, feed(BOM[:2]), DECODING),
    Row(DECODING, feed(BOM + b"data: hi\n\n"), DECODING),  # a field named "\ufeffdata"
    Row(DECODING, feed(b"data: hi\n\n"), DECODING, data=("hi",)),
    Row(DECODING, feed(TOO_LARGE), FAILED, raises=EventTooLarge),
    Row(DECODING, feed(b"data: hi\n\n" + TOO_LARGE), FAILED, data=("hi",)),
    Row(DECODING, END, ENDED),
    # FAILED: final; every call raises the error again.
    Row(FAILED, feed(b""), FAILED, raises=EventTooLarge),
    Row(FAILED, feed(BOM), FAILED, raises=EventTooLarge),
    Row(FAILED, feed(b"data: hi\n\n"), FAILED, raises=EventTooLarge),
    Row(FAILED, END, FAILED, raises=EventTooLarge),
    # ENDED: final; feed() is a mistake of the caller, end() is idempotent.
    Row(ENDED, feed(b""), ENDED, raises=chunkwise.LocalProtocolError),
    Row(ENDED, feed(b"data: hi\n\n"), ENDED, raises=chunkwise.LocalProtocolError),
    Row(ENDED, END, ENDED),
]


def data_of_events(events: list[Any]) -> tuple[str, ...]:
    return tuple(e.data if isinstance(e, chunkwise.ServerSentEvent) else e[1] for e in events)


@pytest.mark.parametrize("decoder", DECODERS, ids=str)
@pytest.mark.parametrize("row", TABLE, ids=str)
def test_transition(decoder: Decoder, row: Row) -> None:
    dec = in_phase(decoder.cls, row.phase)
    error_before = dec.error
    _, call = row.call
    if row.raises is None:
        assert data_of_events(call(dec)) == row.data
    else:
        with pytest.raises(row.raises) as caught:
            call(dec)
        if row.phase is FAILED:
            # The same error again, not a new one.
            assert caught.value is error_before
    assert dec.state is row.to
    assert (dec.error is not None) is (row.to is FAILED)


def test_every_phase_meets_every_kind_of_call() -> None:
    kinds = {"feed", "end"}
    for phase in DecoderState:
        assert {row.call[0].partition("(")[0] for row in TABLE if row.phase is phase} == kinds


@pytest.mark.parametrize("decoder", DECODERS, ids=str)
def test_start_drops_a_bom_split_across_reads_and_only_there(decoder: Decoder) -> None:
    dec = decoder.cls()
    assert dec.feed(BOM[:1]) == []
    assert dec.feed(BOM[1:2]) == []
    assert dec.state is START
    assert dec.feed(BOM[2:] + b"data: a\n\n") == [decoder.ev("a")]
    assert dec.state is DECODING
    # A second BOM is part of the next line: a field with an unknown name.
    assert dec.feed(BOM + b"data: b\n\n") == []


@pytest.mark.parametrize("decoder", DECODERS, ids=str)
def test_start_end_after_the_first_bytes_of_a_character(decoder: Decoder) -> None:
    dec = decoder.cls()
    dec.feed(BOM[:2])
    assert dec.end() == []
    assert dec.state is ENDED
    assert dec.unterminated is True  # U+FFFD, a cut-off line


@pytest.mark.parametrize("decoder", DECODERS, ids=str)
def test_end_fails_on_a_cut_off_line_that_overflows_and_stays_failed(decoder: Decoder) -> None:
    dec = decoder.cls(max_event_size=MAX)
    # While it arrives the line is undercounted (a space after the colon is
    # assumed); end() counts it exactly: 9 characters.
    assert dec.feed(b"data:123456789") == []
    assert dec.state is DECODING
    with pytest.raises(EventTooLarge) as caught:
        dec.end()
    assert dec.state is FAILED
    assert dec.error is caught.value
    with pytest.raises(EventTooLarge):
        dec.end()
    assert dec.state is FAILED


@pytest.mark.parametrize("decoder", DECODERS, ids=str)
def test_end_fails_when_the_flushed_character_makes_the_line_overflow(decoder: Decoder) -> None:
    dec = decoder.cls(max_event_size=MAX)
    # Eight characters and the first byte of a ninth: end() decodes it as
    # U+FFFD, and the line is one character too long.
    assert dec.feed(b"data: 12345678\xc3") == []
    with pytest.raises(EventTooLarge):
        dec.end()
    assert dec.state is FAILED
    assert dec.unterminated is False  # it failed, it did not end


@pytest.mark.parametrize("decoder", DECODERS, ids=str)
def test_the_next_call_after_events_and_an_overflow_raises(decoder: Decoder) -> None:
    dec = decoder.cls(max_event_size=MAX)
    assert dec.feed(b"data: hi\n\n" + TOO_LARGE) == [decoder.ev("hi")]
    assert dec.state is FAILED
    with pytest.raises(EventTooLarge) as caught:
        dec.feed(b"")
    assert caught.value is dec.error


@pytest.mark.parametrize("decoder", DECODERS, ids=str)
def test_state_is_read_only(decoder: Decoder) -> None:
    dec = decoder.cls()
    with pytest.raises(AttributeError):
        dec.state = ENDED  # type: ignore[misc]
    assert dec.state is START


def test_the_state_type_is_public_and_named_for_its_values() -> None:
    assert chunkwise.SSEDecoder().state is chunkwise.types.DecoderState.START
    assert {state.name.lower(): state.value for state in DecoderState} == {
        "start": "start",
        "decoding": "decoding",
        "failed": "failed",
        "ended": "ended",
    }

"""WHATWG "Server-sent events" conformance of every SSE decoder the library uses.

Every test runs once for each decoder in ``helpers.decoders.DECODERS``: the public
:class:`chunkwise.SSEDecoder`, and the pair decoder each stream parser runs
(``chunkwise._core.sse.PairDecoder``, which gives ``(event type, data)`` pairs and
is held to those and to the same end-of-stream state); see the ``decoder``
fixture.  Each test is named for the rule it checks.  The rules come from the HTML
standard, section "Interpreting an event stream", plus chunkwise's own
contracts (``unterminated``, ``max_event_size``, ``legacy_error_field``).
Almost every expectation is checked twice: with the stream in one read and
with the stream one byte at a time, because the decoder must give the same
answer at every read boundary.
"""

from __future__ import annotations

import functools
import sys
import tracemalloc
from types import FrameType
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chunkwise
from chunkwise import ServerSentEvent, SSEDecoder
from helpers import decoders
from helpers.decoders import DECODERS, Decoder, data_of, decode_sse, ev, reference_decode_sse
from helpers.reads import byte_reads, pieces_of, split_at

#: The decoder under test (set by the ``decoder`` fixture).
current = DECODERS[0]


@pytest.fixture(autouse=True, params=DECODERS, ids=str)
def decoder(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Decoder:
    """Every test here runs once for each decoder the library uses.

    The names the tests use are bound to the decoder under test:
    ``SSEDecoder`` is its class, ``decode_sse`` runs it, and ``ev`` writes an
    expected event as it gives them (a pair, for the pair decoder);
    :func:`assert_events` does the same for expectations written beforehand.
    """
    chosen: Decoder = request.param
    module = sys.modules[__name__]
    monkeypatch.setattr(module, "current", chosen)
    monkeypatch.setattr(module, "SSEDecoder", chosen.cls)
    monkeypatch.setattr(module, "ev", chosen.ev)
    monkeypatch.setattr(
        module, "decode_sse", functools.partial(decoders.decode_sse, decoder=chosen.cls)
    )
    return chosen


def assert_events(data: bytes, expected: list[ServerSentEvent], **kwargs: Any) -> None:
    """``data`` gives ``expected`` in one read and in one-byte reads."""
    assert list(decode_sse([data], **kwargs).events) == current.seen(expected)
    assert list(decode_sse(byte_reads(data), **kwargs).events) == current.seen(expected)


# ---------------------------------------------------------------------------
# Whole streams: empty, comments, end of stream
# ---------------------------------------------------------------------------


def test_empty_stream_yields_no_events_and_is_not_unterminated() -> None:
    dec = SSEDecoder()
    assert dec.end() == []
    assert dec.unterminated is False
    assert dec.last_event_id == ""
    assert dec.retry is None


def test_empty_reads_yield_nothing_and_change_nothing() -> None:
    dec = SSEDecoder()
    assert dec.feed(b"") == []
    assert dec.feed(b"data: x\n") == []
    assert dec.feed(b"") == []
    assert dec.feed(bytearray()) == []
    assert dec.feed(memoryview(b"")) == []
    assert dec.feed(b"\n") == [ev("x")]
    assert dec.end() == []
    assert dec.unterminated is False


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b": keep-alive\n", id="one-comment"),
        pytest.param(b":\n:\n:\n", id="bare-colons"),
        pytest.param(b": a\r\n: b\r:c\n\n\n", id="mixed-endings-and-blank-lines"),
        pytest.param(b":data: x\n\n", id="comment-that-looks-like-a-field"),
        pytest.param(b": no newline at the end", id="unterminated-comment"),
    ],
)
def test_stream_of_only_comments_yields_nothing_and_is_not_unterminated(data: bytes) -> None:
    for reads in ([data], byte_reads(data)):
        outcome = decode_sse(reads)
        assert outcome.events == ()
        assert outcome.unterminated is False


def test_comment_line_inside_an_event_is_ignored() -> None:
    assert_events(b"data: a\n: comment\ndata: b\n\n", [ev("a\nb")])


def test_data_then_eof_without_blank_line_is_discarded_and_unterminated() -> None:
    for reads in ([b"data: x"], byte_reads(b"data: x")):
        outcome = decode_sse(reads)
        assert outcome.events == ()
        assert outcome.unterminated is True


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"data: x\n", id="lf"),
        pytest.param(b"data: x\r\n", id="crlf"),
        pytest.param(b"data: x\r", id="cr"),
        pytest.param(b"data: first\n\ndata: second\n", id="after-a-complete-event"),
        pytest.param(b"data\n", id="data-without-colon"),
        pytest.param(b"event: e\ndata: x\n: trailing comment\n", id="then-a-comment"),
    ],
)
def test_event_with_complete_lines_but_no_blank_line_is_discarded_and_unterminated(
    data: bytes,
) -> None:
    outcome = decode_sse([data])
    assert outcome.unterminated is True
    assert all(data_of(e) != "x" for e in outcome.events)
    assert decode_sse(byte_reads(data)) == outcome


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"event: e\n", id="event"),
        pytest.param(b"id: 1\n", id="id"),
        pytest.param(b"retry: 10\n", id="retry"),
        pytest.param(b"foo: bar\n", id="unknown-field"),
        pytest.param(b"foo", id="partial-unknown-field"),
        pytest.param(b"foo: bar baz", id="partial-unknown-field-with-colon"),
        pytest.param(b"retry", id="partial-field-name"),
        pytest.param(b"data: a\n\nid: 2\n: then a comment\n", id="after-an-event"),
    ],
)
def test_any_field_line_left_without_blank_line_is_unterminated(data: bytes) -> None:
    assert decode_sse([data]).unterminated is True
    assert decode_sse(byte_reads(data)).unterminated is True


def test_partial_line_at_eof_is_unterminated() -> None:
    outcome = decode_sse([b"data: a\n\ndata"])
    assert outcome.events == (ev("a"),)
    assert outcome.unterminated is True


def test_comment_leftover_after_last_event_is_not_unterminated() -> None:
    for data in (b"data: a\n\n: bye\n", b"data: a\n\n: bye", b"data: a\n\n:"):
        outcome = decode_sse([data])
        assert outcome.events == (ev("a"),)
        assert outcome.unterminated is False


def test_terminated_stream_is_not_unterminated() -> None:
    for data in (b"data: a\n\n", b"data: a\r\n\r\n", b"data: a\r\r", b"data: a\n\n\n\n"):
        outcome = decode_sse([data])
        assert outcome.events == (ev("a"),)
        assert outcome.unterminated is False


def test_trailing_blank_lines_dispatch_nothing_more() -> None:
    assert_events(b"data: a\n\n\n\n\r\n\r\r\n", [ev("a")])


def test_leading_blank_lines_dispatch_nothing() -> None:
    assert_events(b"\n\r\n\r\ndata: a\n\n", [ev("a")])


def test_end_returns_no_events_for_a_pending_event() -> None:
    dec = SSEDecoder()
    assert dec.feed(b"event: e\ndata: pending\n") == []
    assert dec.end() == []
    assert dec.unterminated is True


def test_feed_after_end_raises_local_protocol_error() -> None:
    dec = SSEDecoder()
    dec.feed(b"data: x\n\n")
    dec.end()
    with pytest.raises(chunkwise.LocalProtocolError):
        dec.feed(b"data: y\n\n")


# ---------------------------------------------------------------------------
# Field lines: colon, space, names, values
# ---------------------------------------------------------------------------

FIELD_CASES = [
    pytest.param(b"data: x\n\n", [ev("x")], id="data-colon-space"),
    pytest.param(b"data:x\n\n", [ev("x")], id="data-colon-no-space"),
    pytest.param(b"data:  x\n\n", [ev(" x")], id="two-spaces-one-kept"),
    pytest.param(b"data:\tx\n\n", [ev("\tx")], id="tab-is-not-removed"),
    pytest.param(b"data: x \n\n", [ev("x ")], id="trailing-space-kept"),
    pytest.param(b"data: a:b: c\n\n", [ev("a:b: c")], id="colon-inside-value"),
    pytest.param(b"data::x\n\n", [ev(":x")], id="colon-first-in-value"),
    pytest.param(b"data: \n\n", [ev("")], id="data-colon-space-empty"),
    pytest.param(b"data:\n\n", [ev("")], id="data-colon-empty"),
    pytest.param(b"data\n\n", [ev("")], id="data-without-colon"),
    pytest.param(b"data\ndata\n\n", [ev("\n")], id="two-bare-data-lines"),
    pytest.param(b"data: a\ndata: b\ndata: c\n\n", [ev("a\nb\nc")], id="multiline-data"),
    pytest.param(b"data: a\ndata:\ndata: c\n\n", [ev("a\n\nc")], id="empty-middle-line"),
    pytest.param(b"data: a\ndata\n\n", [ev("a\n")], id="empty-last-line-kept"),
    pytest.param(b"data: \x00\n\n", [ev("\x00")], id="null-in-data-kept"),
    pytest.param(b'data: {"a": 1}\n\n', [ev('{"a": 1}')], id="json"),
    pytest.param(b"data: [DONE]\n\n", [ev("[DONE]")], id="done-sentinel-is-plain-data"),
]


@pytest.mark.parametrize(("data", "expected"), FIELD_CASES)
def test_data_field_values(data: bytes, expected: list[ServerSentEvent]) -> None:
    assert_events(data, expected)


def test_whatwg_example_empty_and_newline_data() -> None:
    # From the HTML standard: "data\n\ndata\ndata\n\ndata:" fires two events,
    # "" then "\n"; the last block is never terminated and is discarded.
    outcome = decode_sse([b"data\n\ndata\ndata\n\ndata:"])
    assert outcome.events == (ev(""), ev("\n"))
    assert outcome.unterminated is True


def test_whatwg_example_space_after_colon_is_optional() -> None:
    assert_events(b"data:test\n\ndata: test\n\n", [ev("test"), ev("test")])


def test_block_without_data_line_dispatches_nothing() -> None:
    assert_events(b"event: update\nid: 1\nretry: 5\nfoo: bar\n: c\n\n", [])


def test_field_name_without_colon_has_empty_value() -> None:
    # "event" alone sets the type to "" (so "message"); "id" alone resets the id.
    assert_events(
        b"id: 7\nevent: custom\nevent\nid\ndata: x\n\n",
        [ev("x", event="message", id="")],
    )


@pytest.mark.parametrize(
    "line",
    [
        pytest.param(b"Data: x", id="capitalised"),
        pytest.param(b"DATA: x", id="upper-case"),
        pytest.param(b" data: x", id="leading-space"),
        pytest.param(b"data : x", id="space-before-colon"),
        pytest.param(b"data x", id="no-colon-with-space"),
        pytest.param(b"datum: x", id="similar-name"),
        pytest.param(b"\xef\xbb\xbfdata: x", id="bom-in-name-mid-stream"),
    ],
)
def test_field_names_are_exact_and_case_sensitive(line: bytes) -> None:
    assert_events(b"data: before\n\n" + line + b"\n\n", [ev("before")])


def test_unknown_fields_are_ignored() -> None:
    assert_events(
        b"foo: bar\ndata: x\nx-custom: 1\nbaz\n\n",
        [ev("x")],
    )


def test_block_with_only_unknown_fields_dispatches_nothing() -> None:
    assert_events(b"foo: bar\nbaz: 1\n\n", [])


def test_line_with_only_a_space_is_not_a_blank_line() -> None:
    assert_events(b"data: x\n \ndata: y\n\n", [ev("x\ny")])


def test_only_cr_and_lf_end_lines() -> None:
    # VT, FF, FS, GS, RS, NEL, LINE SEPARATOR, PARAGRAPH SEPARATOR are data.
    value = "a\x0bb\x0cc\x1cd\x1de\x1ef\x85g\u2028h\u2029i"
    assert_events(f"data: {value}\n\n".encode(), [ev(value)])


def test_unicode_whitespace_after_colon_is_not_removed() -> None:
    assert_events("data:\u00a0x\n\n".encode(), [ev("\u00a0x")])


# ---------------------------------------------------------------------------
# event
# ---------------------------------------------------------------------------


def test_event_field_sets_the_type_and_keeps_inner_and_trailing_spaces() -> None:
    assert_events(b"event:  my event \ndata: x\n\n", [ev("x", event=" my event ")])


def test_empty_event_field_means_message() -> None:
    assert_events(b"event:\ndata: x\n\n", [ev("x")])
    assert_events(b"event: \ndata: x\n\n", [ev("x")])


def test_event_type_does_not_carry_over_to_the_next_event() -> None:
    assert_events(
        b"event: first\ndata: 1\n\ndata: 2\n\n",
        [ev("1", event="first"), ev("2")],
    )


def test_event_type_of_a_block_without_data_is_dropped() -> None:
    assert_events(b"event: lonely\n\ndata: x\n\n", [ev("x")])


def test_last_event_field_in_a_block_wins() -> None:
    assert_events(b"event: a\nevent: b\ndata: x\n\n", [ev("x", event="b")])


def test_field_order_within_a_block_does_not_matter() -> None:
    assert_events(
        b"data: x\nevent: late\nid: 9\nretry: 10\n\n",
        [ev("x", event="late", id="9", retry=10)],
    )


# ---------------------------------------------------------------------------
# id
# ---------------------------------------------------------------------------


def test_id_persists_across_events() -> None:
    assert_events(
        b"id: 1\ndata: a\n\ndata: b\n\nid: 2\ndata: c\n\ndata: d\n\n",
        [ev("a", id="1"), ev("b", id="1"), ev("c", id="2"), ev("d", id="2")],
    )
    assert decode_sse([b"id: 1\ndata: a\n\ndata: b\n\n"]).last_event_id == "1"


def test_id_in_a_block_without_data_applies_to_later_events() -> None:
    outcome = decode_sse([b"id: 5\n\n"])
    assert outcome.events == ()
    assert outcome.last_event_id == "5"
    assert_events(b"id: 5\n\ndata: x\n\n", [ev("x", id="5")])


@pytest.mark.parametrize(
    "tail",
    [
        pytest.param(b"id: 7\n", id="id-line-then-eof"),
        pytest.param(b"id: 7\ndata: x\n", id="event-without-blank-line"),
        pytest.param(b"data: x\nid: 7", id="id-line-cut-off"),
        pytest.param(b"id: 7\r", id="id-then-cr"),
    ],
)
def test_id_in_a_block_the_stream_cuts_off_is_not_committed(tail: bytes) -> None:
    # WHATWG: the id field sets the last event ID *buffer*; only a dispatch
    # (a blank line) copies it to the last event ID.
    data = b"id: 1\ndata: a\n\n" + tail
    for reads in ([data], byte_reads(data), split_at(data, [len(data) - 2])):
        outcome = decode_sse(reads)
        assert outcome.events == (ev("a", id="1"),)
        assert outcome.last_event_id == "1"
        assert outcome.unterminated is True


def test_last_event_id_is_committed_when_the_block_ends_not_when_the_id_arrives() -> None:
    dec = SSEDecoder()
    assert dec.feed(b"id: 1\ndata: a\n\nid: 2\n") == [ev("a", id="1")]
    assert dec.last_event_id == "1"
    assert dec.feed(b"data: b\n") == []
    assert dec.last_event_id == "1"
    assert dec.feed(b"\n") == [ev("b", id="2")]
    assert dec.last_event_id == "2"
    # A block without data commits its id too, at its blank line.
    assert dec.feed(b"id: 3\n") == []
    assert dec.last_event_id == "2"
    assert dec.feed(b"\n") == []
    assert dec.last_event_id == "3"
    assert dec.feed(b"id: 4\ndata: cut off") == []
    assert dec.end() == []
    assert dec.last_event_id == "3"


@pytest.mark.parametrize(
    "reset",
    [
        pytest.param(b"id", id="bare-id"),
        pytest.param(b"id:", id="id-colon"),
        pytest.param(b"id: ", id="id-colon-space"),
    ],
)
def test_empty_id_resets_the_last_event_id(reset: bytes) -> None:
    data = b"id: 1\ndata: a\n\n" + reset + b"\ndata: b\n\n"
    assert_events(data, [ev("a", id="1"), ev("b", id="")])
    assert decode_sse([data]).last_event_id == ""


def test_id_containing_null_is_ignored() -> None:
    data = b"id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\nid: \x00\ndata: c\n\n"
    assert_events(data, [ev("a", id="1"), ev("b", id="1"), ev("c", id="1")])
    assert decode_sse([data]).last_event_id == "1"


def test_id_keeps_spaces_and_unicode() -> None:
    assert_events("id:  é 1 \ndata: x\n\n".encode(), [ev("x", id=" é 1 ")])


# ---------------------------------------------------------------------------
# retry
# ---------------------------------------------------------------------------


def test_retry_sets_the_event_retry_and_the_decoder_retry() -> None:
    data = b"retry: 1500\ndata: x\n\n"
    assert_events(data, [ev("x", retry=1500)])
    assert decode_sse([data]).retry == 1500


def test_retry_only_block_dispatches_nothing_but_updates_decoder_retry() -> None:
    outcome = decode_sse([b"retry: 3000\n\n"])
    assert outcome.events == ()
    assert outcome.retry == 3000


def test_retry_does_not_carry_over_to_the_next_event() -> None:
    data = b"retry: 10\ndata: a\n\ndata: b\n\nretry: 20\n\ndata: c\n\n"
    assert_events(data, [ev("a", retry=10), ev("b"), ev("c")])
    assert decode_sse([data]).retry == 20


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(b"0", 0, id="zero"),
        pytest.param(b"007", 7, id="leading-zeros"),
        pytest.param(b"99999999999999999999", 99999999999999999999, id="huge"),
    ],
)
def test_retry_ascii_digits_are_base_ten(value: bytes, expected: int) -> None:
    data = b"retry:" + value + b"\ndata: x\n\n"
    assert_events(data, [ev("x", retry=expected)])
    assert decode_sse([data]).retry == expected


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(b" abc", id="letters"),
        pytest.param(b" -100", id="negative"),
        pytest.param(b" +100", id="plus-sign"),
        pytest.param(b"  100", id="two-spaces"),
        pytest.param(b" 100 ", id="trailing-space"),
        pytest.param(b" 1 00", id="inner-space"),
        pytest.param(b" 1.5", id="decimal"),
        pytest.param(b" 1e3", id="exponent"),
        pytest.param(b" 0x10", id="hex"),
        pytest.param(b" 1_000", id="underscore"),
        pytest.param(b"", id="empty"),
        pytest.param(b" ", id="only-the-space"),
        pytest.param(b"\t100", id="tab"),
        pytest.param(" ١٢٣".encode(), id="arabic-indic-digits"),
        pytest.param(" ２０".encode(), id="fullwidth-digits"),
        pytest.param(" ²".encode(), id="superscript-two"),
        pytest.param(b" 100\x00", id="null"),
    ],
)
def test_invalid_retry_is_ignored(value: bytes) -> None:
    data = b"retry: 50\ndata: a\n\nretry:" + value + b"\ndata: b\n\n"
    assert_events(data, [ev("a", retry=50), ev("b")])
    assert decode_sse([data]).retry == 50


def test_invalid_retry_does_not_cancel_an_earlier_valid_one_in_the_block() -> None:
    assert_events(b"retry: 100\nretry: nope\ndata: x\n\n", [ev("x", retry=100)])


def test_last_valid_retry_in_a_block_wins() -> None:
    assert_events(b"retry: 100\nretry: 200\ndata: x\n\n", [ev("x", retry=200)])


# ---------------------------------------------------------------------------
# Line endings
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "eol",
    [pytest.param(b"\n", id="lf"), pytest.param(b"\r\n", id="crlf"), pytest.param(b"\r", id="cr")],
)
def test_each_line_ending_works_alone(eol: bytes) -> None:
    data = eol.join([b"event: e", b"data: a", b"data: b", b"", b"data: c", b"", b""])
    assert_events(data, [ev("a\nb", event="e"), ev("c")])


def test_mixed_line_endings_in_one_stream() -> None:
    assert_events(
        b"data: a\rdata: b\ndata: c\r\ndata: d\r\n\rdata: e\n\r\ndata: f\r\n\n",
        [ev("a\nb\nc\nd"), ev("e"), ev("f")],
    )


def test_cr_at_end_of_read_then_lf_is_one_line_ending() -> None:
    dec = SSEDecoder()
    assert dec.feed(b"data: x\r") == []
    # The LF completes the CRLF; it is not a blank line, so nothing dispatches.
    assert dec.feed(b"\ndata: y\r") == []
    assert dec.feed(b"\n\r") == [ev("x\ny")]
    assert dec.feed(b"\n") == []
    assert dec.end() == []
    assert dec.unterminated is False


def test_cr_then_empty_read_then_lf_is_still_one_line_ending() -> None:
    dec = SSEDecoder()
    assert dec.feed(b"data: x\r") == []
    assert dec.feed(b"") == []
    assert dec.feed(b"\ndata: y\n\n") == [ev("x\ny")]


def test_cr_terminated_line_is_processed_without_waiting_for_more_bytes() -> None:
    dec = SSEDecoder()
    assert dec.feed(b"data: x\r\r") == [ev("x")]
    assert dec.feed(b"data: y\n\r") == [ev("y")]
    assert dec.end() == []
    assert dec.unterminated is False


def test_lf_then_cr_are_two_line_endings() -> None:
    assert_events(b"data: x\n\rdata: y\n\r", [ev("x"), ev("y")])


def test_cr_cr_lf_is_two_line_endings() -> None:
    assert_events(b"data: x\r\r\ndata: y\r\r\n", [ev("x"), ev("y")])


def test_crlf_crlf_dispatches() -> None:
    assert_events(b"data: x\r\n\r\n", [ev("x")])


# ---------------------------------------------------------------------------
# Byte order mark
# ---------------------------------------------------------------------------


def test_bom_at_stream_start_is_stripped() -> None:
    assert_events(b"\xef\xbb\xbfdata: x\n\n", [ev("x")])


@pytest.mark.parametrize("cut", [1, 2, 3])
def test_bom_split_across_reads_is_stripped(cut: int) -> None:
    data = b"\xef\xbb\xbfdata: x\n\n"
    assert list(decode_sse([data[:cut], data[cut:]]).events) == [ev("x")]


def test_bom_then_field_in_separate_reads_is_stripped() -> None:
    assert list(decode_sse([b"\xef", b"\xbb", b"\xbf", b"data: x\n\n"]).events) == [ev("x")]


def test_second_bom_at_stream_start_is_not_stripped() -> None:
    # The first BOM is stripped; the second becomes part of the field name
    # "\ufeffdata", an unknown field, so the event has no data.
    assert_events(b"\xef\xbb\xbf\xef\xbb\xbfdata: x\n\n", [])
    assert_events(b"\xef\xbb\xbf\xef\xbb\xbfdata: x\n\ndata: y\n\n", [ev("y")])


def test_bom_after_the_first_event_is_not_stripped() -> None:
    assert_events(b"data: a\n\n\xef\xbb\xbfdata: b\n\n", [ev("a")])


def test_bom_inside_a_value_is_kept() -> None:
    assert_events(b"data: a\xef\xbb\xbfb\n\n", [ev("a\ufeffb")])


def test_bom_alone_is_an_empty_stream() -> None:
    outcome = decode_sse([b"\xef\xbb\xbf"])
    assert outcome.events == ()
    assert outcome.unterminated is False


def test_bom_before_a_comment_still_makes_it_a_comment() -> None:
    assert_events(b"\xef\xbb\xbf: hello\ndata: x\n\n", [ev("x")])


# ---------------------------------------------------------------------------
# UTF-8
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "decoded"),
    [
        pytest.param(b"\xff", "\ufffd", id="invalid-byte"),
        pytest.param(b"\xc3(", "\ufffd(", id="bad-continuation"),
        pytest.param(b"\x80\x80", "\ufffd\ufffd", id="lone-continuations"),
        pytest.param(b"\xe2\x82x", "\ufffdx", id="truncated-3-byte"),
        pytest.param(b"\xf0\x9f\x98y", "\ufffdy", id="truncated-4-byte"),
        pytest.param(b"\xc0\xaf", "\ufffd\ufffd", id="overlong"),
        pytest.param(b"\xed\xa0\x80", "\ufffd\ufffd\ufffd", id="surrogate"),
        pytest.param(b"a\xf8b", "a\ufffdb", id="five-byte-lead"),
    ],
)
def test_invalid_utf8_becomes_replacement_character(raw: bytes, decoded: str) -> None:
    assert decoded == raw.decode("utf-8", errors="replace")  # sanity of the table
    assert_events(b"data: " + raw + b"\n\n", [ev(decoded)])


def test_invalid_utf8_in_field_name_makes_an_unknown_field() -> None:
    assert_events(b"dat\xff: x\ndata: y\n\n", [ev("y")])


def test_invalid_utf8_before_cr_does_not_swallow_the_line_ending() -> None:
    assert_events(b"data: \xe2\x82\rdata: b\r\r", [ev("\ufffd\nb")])


@pytest.mark.parametrize("char", ["é", "€", "中", "😀", "👩\u200d💻"])
def test_multibyte_character_split_at_every_offset(char: str) -> None:
    data = f"data: a{char}b\n\n".encode()
    expected = [ev(f"a{char}b")]
    for cut in range(len(data) + 1):
        assert list(decode_sse(split_at(data, [cut])).events) == expected, cut
    assert list(decode_sse(byte_reads(data)).events) == expected


def test_four_byte_emoji_split_at_every_offset_into_three_reads() -> None:
    data = "data: 😀😀\n\n".encode()
    for i in range(len(data) + 1):
        for j in range(i, len(data) + 1):
            assert list(decode_sse(split_at(data, [i, j])).events) == [ev("😀😀")], (i, j)


@pytest.mark.parametrize(
    "tail",
    [
        pytest.param(b"\xc3", id="2-byte"),
        pytest.param(b"\xe2\x82", id="3-byte"),
        pytest.param(b"\xf0\x9f\x98", id="4-byte"),
    ],
)
def test_truncated_multibyte_at_end_is_discarded_with_its_line(tail: bytes) -> None:
    outcome = decode_sse([b"data: a\n\ndata: b" + tail])
    assert outcome.events == (ev("a"),)
    assert outcome.unterminated is True
    outcome = decode_sse([b"data: a\n\n" + tail])
    assert outcome.events == (ev("a"),)
    assert outcome.unterminated is True


def test_every_byte_value_in_a_value_decodes_with_replacement_in_any_reads() -> None:
    # Every byte that is not a line ending, in both orders, inside one data
    # value: each invalid sequence becomes U+FFFD (as bytes.decode says),
    # never an exception, and the reads do not matter.
    raw = bytes(b for b in range(256) if b not in b"\r\n")
    data = b"data: " + raw * 2 + b"\ndata: " + raw[::-1] + b"\r\r"
    expected = [
        ev(raw.decode("utf-8", "replace") * 2 + "\n" + raw[::-1].decode("utf-8", "replace"))
    ]
    assert "\ufffd" in data_of(expected[0])
    assert_events(data, expected)
    # Line endings among them too: the whole-stream reference agrees.
    data = bytes(range(256)) * 4 + b"\n\n" + bytes(range(255, -1, -1)) + b"\r\r"
    assert decode_sse(byte_reads(data)) == decode_sse([data])
    assert decode_sse([data]).events == reference_decode_sse(data).events


# ---------------------------------------------------------------------------
# Input buffers and read boundaries
# ---------------------------------------------------------------------------


def test_bytearray_input() -> None:
    dec = SSEDecoder()
    assert dec.feed(bytearray(b"data: a")) == []
    assert dec.feed(bytearray(b"\n\n")) == [ev("a")]


def test_memoryview_input() -> None:
    dec = SSEDecoder()
    assert dec.feed(memoryview(b"data: a\n\n")) == [ev("a")]
    backing = b"garbage data: b\n\n garbage"
    assert dec.feed(memoryview(backing)[8:-8]) == [ev("b")]
    assert dec.feed(memoryview(bytearray(b"data: c\n\n"))) == [ev("c")]


def test_mutating_a_fed_bytearray_afterwards_does_not_change_the_result() -> None:
    dec = SSEDecoder()
    buf = bytearray(b"data: abc")
    assert dec.feed(buf) == []
    buf[:] = b"XXXXXXXXX"
    view_backing = bytearray(b"def\n\n")
    assert dec.feed(memoryview(view_backing)) == [ev("abcdef")]
    view_backing[:] = b"ZZZZZ"
    assert dec.feed(b"data: g\n\n") == [ev("g")]


@pytest.mark.parametrize("partial", [b"12", b"da", b"x", b"dat", b"id", b"retr"])
def test_a_read_that_is_one_whole_event_continues_the_line_a_read_left_unfinished(
    partial: bytes,
) -> None:
    # "da" + "data: x" is the line "dadata: x", an unknown field: no event.
    # (The pair decoder has a path for a read that is one whole data event.)
    dec = SSEDecoder()
    events = dec.feed(partial) + dec.feed(b"data: x\n\n") + dec.feed(b"data: y\n\n")
    assert events == [ev("y")]
    assert list(decode_sse([partial + b"data: x\n\ndata: y\n\n"]).events) == [ev("y")]


def test_many_events_in_one_read_come_out_in_order() -> None:
    data = b"".join(b"id: %d\ndata: %d\n\n" % (i, i) for i in range(1000))
    dec = SSEDecoder()
    events = dec.feed(data)
    assert events == [ev(str(i), id=str(i)) for i in range(1000)]
    assert dec.end() == []


RICH_STREAM = (
    "\ufeff: hello\r\n"
    "event: update\r"
    "id: 42\n"
    "data: first €\r\n"
    "data\r\n"
    "data:  two spaces 😀\n"
    "retry: 1500\n"
    "unknown: ignored\r"
    "\r\n"
    "data: tail\r"
    "\r"
).encode()
RICH_EVENTS = [
    ev("first €\n\n two spaces 😀", event="update", id="42", retry=1500),
    ev("tail", id="42"),
]


def test_rich_stream_in_one_read() -> None:
    dec = SSEDecoder()
    assert dec.feed(RICH_STREAM) == current.seen(RICH_EVENTS)
    assert dec.end() == []
    assert dec.unterminated is False
    assert dec.last_event_id == "42"
    assert dec.retry == 1500


def test_one_event_split_at_every_possible_byte_boundary() -> None:
    expected = decode_sse([RICH_STREAM])
    assert list(expected.events) == current.seen(RICH_EVENTS)
    for cut in range(len(RICH_STREAM) + 1):
        dec = SSEDecoder()
        events = dec.feed(RICH_STREAM[:cut]) + dec.feed(RICH_STREAM[cut:])
        # Everything is dispatched by feed(): the stream ends with CR CR.
        assert events == current.seen(RICH_EVENTS), cut
        assert dec.end() == []
        assert dec.unterminated is False


def test_one_event_split_into_three_reads_at_every_pair_of_boundaries() -> None:
    expected = decode_sse([RICH_STREAM])
    size = len(RICH_STREAM)
    for i in range(size + 1):
        for j in range(i, size + 1):
            assert decode_sse(split_at(RICH_STREAM, [i, j])) == expected, (i, j)


def test_one_byte_reads_equal_one_read() -> None:
    assert decode_sse(byte_reads(RICH_STREAM)) == decode_sse([RICH_STREAM])


def test_very_long_line_split_across_reads() -> None:
    value = ("0123456789abcdef€😀" * 40_000)[:600_000]
    data = f"data: {value}\ndata: {value}\n\n".encode()
    reads = pieces_of(data, 4093)
    assert list(decode_sse(reads).events) == [ev(f"{value}\n{value}")]


# ---------------------------------------------------------------------------
# Linear cost (nothing here measures time)
# ---------------------------------------------------------------------------


def test_a_one_mib_event_in_one_byte_reads_completes() -> None:
    # A buffer that is rescanned or recopied on each read would make this
    # ~5 * 10^11 byte operations; a linear decoder does ~10^6 small feeds.
    size = 1024 * 1024
    dec = SSEDecoder()
    feed = dec.feed
    assert feed(b"data: ") == []
    one = b"x"
    for _ in range(size):
        feed(one)
    (event,) = feed(b"\n\n")
    assert len(data_of(event)) == size


def test_many_short_lines_in_one_big_read_complete() -> None:
    lines = 200_000
    dec = SSEDecoder()
    (event,) = dec.feed(b"data: x\n" * lines + b"\n")
    assert data_of(event) == "\n".join(["x"] * lines)
    events = dec.feed(b"data: y\n\n" * lines)
    assert len(events) == lines


def _count_traced_lines(reads: list[bytes]) -> int:
    """How many Python lines run while feeding ``reads`` (a deterministic work count)."""
    count = 0

    def tracer(frame: FrameType, event: str, arg: object) -> Any:
        nonlocal count
        if event == "line":
            count += 1
        return tracer

    dec = SSEDecoder()
    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        for read in reads:
            dec.feed(read)
    finally:
        sys.settrace(previous)
    return count


def _one_byte_stream(kind: str, n: int) -> list[bytes]:
    if kind == "one-long-data-line":
        data = b"data: " + b"x" * n + b"\n\n"
    elif kind == "many-data-lines":
        data = b"data: x\n" * (n // 8) + b"\n"
    elif kind == "many-comment-lines":
        data = b": abc\n" * (n // 6) + b"data: x\n\n"
    else:
        data = b"data: xyz\n\n" * (n // 11)
    return byte_reads(data)


@pytest.mark.parametrize(
    "kind", ["one-long-data-line", "many-data-lines", "many-comment-lines", "many-events"]
)
def test_python_work_per_byte_does_not_grow_with_the_event(kind: str) -> None:
    # Counting executed lines, not time: four times the input must cost about
    # four times the work (a quadratic decoder would be about sixteen).
    small = _count_traced_lines(_one_byte_stream(kind, 3000))
    large = _count_traced_lines(_one_byte_stream(kind, 12000))
    assert large <= 6 * small, (small, large)


# ---------------------------------------------------------------------------
# Size limits
# ---------------------------------------------------------------------------


def test_event_too_large_is_a_remote_protocol_error() -> None:
    assert issubclass(chunkwise.errors.EventTooLarge, chunkwise.RemoteProtocolError)
    assert issubclass(chunkwise.RemoteProtocolError, chunkwise.ProtocolError)
    assert issubclass(chunkwise.ProtocolError, chunkwise.ChunkwiseError)
    assert issubclass(chunkwise.LocalProtocolError, chunkwise.ProtocolError)


def test_event_too_large_in_one_read() -> None:
    dec = SSEDecoder(max_event_size=1000)
    with pytest.raises(chunkwise.errors.EventTooLarge) as excinfo:
        dec.feed(b"data: " + b"x" * 5000 + b"\n\n")
    assert excinfo.value.limit == 1000


def test_event_under_the_limit_is_fine() -> None:
    dec = SSEDecoder(max_event_size=1000)
    assert dec.feed(b"data: " + b"x" * 400 + b"\n\n") == [ev("x" * 400)]
    # The limit applies per event, not to the stream.
    for _ in range(50):
        assert dec.feed(b"data: " + b"y" * 400 + b"\n\n") == [ev("y" * 400)]


def test_event_too_large_is_raised_early_when_it_arrives_in_small_reads() -> None:
    limit = 1000
    dec = SSEDecoder(max_event_size=limit)
    fed = 0
    with pytest.raises(chunkwise.errors.EventTooLarge):
        dec.feed(b"data: ")
        for _ in range(1_000_000):
            dec.feed(b"xxxx")
            fed += 4
    # Raised long before the million reads were buffered.
    assert fed <= 4 * limit


def test_event_too_large_across_many_data_lines() -> None:
    limit = 1000
    dec = SSEDecoder(max_event_size=limit)
    fed = 0
    with pytest.raises(chunkwise.errors.EventTooLarge):
        for _ in range(100_000):
            dec.feed(b"data: 0123456789\n")
            fed += 17
    assert fed <= 4 * limit


def test_partial_line_too_large_raises_before_the_line_ends() -> None:
    dec = SSEDecoder(max_event_size=1000)
    with pytest.raises(chunkwise.errors.EventTooLarge):
        dec.feed(b"data: " + b"x" * 100_000)


def test_default_max_event_size_is_16_mib() -> None:
    dec = SSEDecoder()
    big = b"x" * (1024 * 1024)
    (event,) = dec.feed(b"data: " + big + b"\n\n")
    assert len(data_of(event)) == len(big)
    with pytest.raises(chunkwise.errors.EventTooLarge) as excinfo:
        dec.feed(b"data: " + big * 16 + b"x" * 4096 + b"\n\n")
    assert excinfo.value.limit == 16 * 1024 * 1024


def _too_large_or_events(
    reads: list[bytes], limit: int
) -> tuple[ServerSentEvent, ...] | type[Exception]:
    try:
        return decode_sse(reads, max_event_size=limit).events
    except chunkwise.errors.EventTooLarge:
        return chunkwise.errors.EventTooLarge


@pytest.mark.parametrize(
    "line",
    [
        pytest.param(b"data: " + b"x" * 97, id="data-just-under-the-limit"),
        pytest.param(b"data:" + b"x" * 97, id="data-no-space-just-under-the-limit"),
        pytest.param(b"event: " + b"e" * 97, id="event-just-under-the-limit"),
        pytest.param(b"id: " + b"i" * 1000, id="long-id"),
        pytest.param(b"retry: " + b"1" * 1000, id="long-retry"),
    ],
)
def test_whether_an_event_is_too_large_does_not_depend_on_read_boundaries(line: bytes) -> None:
    limit = 100
    data = line + b"\n\ndata: ok\n\n"
    whole = _too_large_or_events([data], limit)
    assert _too_large_or_events(byte_reads(data), limit) == whole
    assert _too_large_or_events(split_at(data, [len(line) // 2]), limit) == whole


def _every_split(data: bytes) -> list[list[bytes]]:
    """One read, one-byte reads, and two reads cut at every offset."""
    return [[data], byte_reads(data), *(split_at(data, [cut]) for cut in range(len(data) + 1))]


@pytest.mark.parametrize(
    ("block", "size"),
    [
        pytest.param(b"data: " + b"x" * 100, 100, id="one-data-line"),
        pytest.param(b"data:" + b"x" * 100, 100, id="no-space"),
        pytest.param(b"data: " + b"x" * 49 + b"\ndata: " + b"y" * 50, 100, id="two-data-lines"),
        pytest.param(b"data\n" * 100 + b"data", 100, id="empty-data-lines"),
        pytest.param(b"event: " + b"e" * 49 + b"\ndata: " + b"x" * 50, 100, id="event-and-data"),
        pytest.param(b"id: 12\nretry: 34\ndata: " + b"x" * 94, 100, id="id-retry-data"),
        pytest.param(b": comment\nfoo: bar\ndata: " + b"x" * 100, 100, id="comments-do-not-count"),
        pytest.param(b"data: " + "é😀".encode() * 50, 100, id="characters-not-bytes"),
    ],
)
def test_event_of_exactly_max_event_size_is_accepted_and_one_more_character_raises(
    block: bytes, size: int
) -> None:
    # The size: the kept values plus one between consecutive lines, so for
    # data lines only it is len(event.data), the joining "\n" included.
    data = block + b"\n\n"
    expected = decode_sse([data]).events
    assert sum(len(data_of(e)) for e in expected) <= size
    for reads in _every_split(data):
        assert _too_large_or_events(reads, size) == expected
        assert _too_large_or_events(reads, size - 1) is chunkwise.errors.EventTooLarge


@pytest.mark.parametrize(
    "value",
    [pytest.param(b"x" * 100, id="ascii"), pytest.param(b"x" * 99 + b"\xc2", id="utf8-tail")],
)
def test_line_cut_off_by_the_end_of_stream_counts_toward_max_event_size(value: bytes) -> None:
    # Discarded or not, the line counts as far as it arrived, so a decoder
    # fed the same text always decides the same; end() may be the one to raise
    # (here when the flushed U+FFFD is the hundredth character).
    data = b"data: a\n\ndata: " + value
    for reads in _every_split(data):
        assert _too_large_or_events(reads, 100) == (ev("a"),)
        assert _too_large_or_events(reads, 99) is chunkwise.errors.EventTooLarge


def test_end_raises_event_too_large_for_a_cut_off_line_and_keeps_raising() -> None:
    dec = SSEDecoder(max_event_size=16)
    assert dec.feed(b"data: data:data:" + b"\x00" * 6 + b"\xc2") == []
    with pytest.raises(chunkwise.errors.EventTooLarge):
        dec.end()
    assert isinstance(dec.error, chunkwise.errors.EventTooLarge)
    with pytest.raises(chunkwise.errors.EventTooLarge):
        dec.end()


def test_event_with_data_under_the_limit_is_accepted_in_any_reads() -> None:
    # 97 characters of data is not larger than 100, however it arrives.
    data = b"data: " + b"x" * 97 + b"\n\n"
    for reads in ([data], byte_reads(data), split_at(data, [50])):
        assert list(decode_sse(reads, max_event_size=100).events) == [ev("x" * 97)]


@pytest.mark.parametrize(
    "prefix",
    [
        pytest.param(b":", id="comment"),
        pytest.param(b": ", id="comment-with-space"),
        pytest.param(b"foo: ", id="unknown-field"),
        pytest.param(b"Data: ", id="wrong-case-field"),
        pytest.param(b"x", id="unknown-field-without-colon"),
    ],
)
def test_huge_comment_or_unknown_field_never_raises(prefix: bytes) -> None:
    dec = SSEDecoder(max_event_size=1024)
    chunk = b"z" * 4096
    events = dec.feed(b"data: a\n")
    events += dec.feed(prefix)
    for _ in range(256):  # 1 MiB, a thousand times the limit
        events += dec.feed(chunk)
    events += dec.feed(b"\ndata: b\n\n")
    assert events == [ev("a\nb")]


@pytest.mark.parametrize(
    "prefix",
    [
        pytest.param(b":", id="comment"),
        pytest.param(b"foo: ", id="unknown-field"),
        pytest.param(b"x", id="unknown-field-without-colon"),
    ],
)
def test_huge_comment_or_unknown_field_does_not_accumulate_memory(prefix: bytes) -> None:
    dec = SSEDecoder()
    chunk = b"z" * 65536
    reads = 128  # 8 MiB
    tracemalloc.start()
    try:
        dec.feed(prefix)
        for _ in range(reads):
            dec.feed(chunk)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2 * 1024 * 1024, peak
    assert dec.feed(b"\ndata: ok\n\n") == [ev("ok")]


# ---------------------------------------------------------------------------
# Legacy `error:` field (llama.cpp)
# ---------------------------------------------------------------------------


def test_legacy_error_field_dispatches_an_error_event() -> None:
    data = b'error: {"message": "boom"}\n\ndata: after\n\n'
    assert_events(
        data, [ev('{"message": "boom"}', event="error"), ev("after")], legacy_error_field=True
    )


def test_legacy_error_field_lines_are_joined_like_data() -> None:
    assert_events(
        b"error: a\nerror:b\nerror\n\n", [ev("a\nb\n", event="error")], legacy_error_field=True
    )


def test_legacy_error_event_carries_the_last_event_id() -> None:
    assert_events(
        b"id: 3\nerror: boom\n\n", [ev("boom", event="error", id="3")], legacy_error_field=True
    )


def test_error_field_is_an_unknown_field_by_default() -> None:
    assert_events(b"error: boom\n\ndata: x\n\n", [ev("x")])


# ---------------------------------------------------------------------------
# ServerSentEvent and decoder state
# ---------------------------------------------------------------------------


def test_server_sent_event_defaults() -> None:
    event = ServerSentEvent()
    assert (event.event, event.data, event.id, event.retry) == ("message", "", "", None)


def test_server_sent_event_is_frozen_and_keyword_only() -> None:
    event = ServerSentEvent(data="x")
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        event.data = "y"  # type: ignore[misc]
    with pytest.raises(TypeError):
        ServerSentEvent("message", "x")  # type: ignore[call-arg]


def test_server_sent_event_compares_by_value() -> None:
    assert ServerSentEvent(data="x", id="1") == ServerSentEvent(data="x", id="1")
    assert ServerSentEvent(data="x") != ServerSentEvent(data="x", retry=0)
    assert ServerSentEvent(data="x") != ServerSentEvent(data="x", event="other")


def test_decoder_state_is_tracked_across_reads() -> None:
    dec = SSEDecoder()
    assert (dec.last_event_id, dec.retry) == ("", None)
    dec.feed(b"id: a\nretry: 5\ndata: 1\n\n")
    assert (dec.last_event_id, dec.retry) == ("a", 5)
    dec.feed(b"data: 2\n\n")
    assert (dec.last_event_id, dec.retry) == ("a", 5)


# ---------------------------------------------------------------------------
# Reconnection: a decoder that starts from a previous connection's last event ID
# ---------------------------------------------------------------------------


def resumed(reads: list[bytes], last_event_id: str) -> tuple[list[ServerSentEvent], str]:
    dec = SSEDecoder(last_event_id=last_event_id)
    events = [event for read in reads for event in dec.feed(read)]
    events += dec.end()
    return events, dec.last_event_id


@pytest.mark.parametrize(
    ("body", "expected", "last"),
    [
        pytest.param(b"data: a\n\n", [ev("a", id="77")], "77", id="carried"),
        pytest.param(
            b"data: a\n\nid: 78\ndata: b\n\n",
            [ev("a", id="77"), ev("b", id="78")],
            "78",
            id="replaced",
        ),
        pytest.param(b"id\ndata: a\n\n", [ev("a")], "", id="reset-by-empty-id"),
        pytest.param(b"id: x\x00y\ndata: a\n\n", [ev("a", id="77")], "77", id="null-id-ignored"),
        pytest.param(b"id: 78\n\n", [], "78", id="committed-without-data"),
        pytest.param(b"id: 78\ndata: a", [], "77", id="unterminated-not-committed"),
        pytest.param(b"", [], "77", id="nothing-sent"),
        pytest.param(b": ping\n\n", [], "77", id="comment-only"),
    ],
)
def test_a_reconnection_starts_from_the_previous_last_event_id(
    body: bytes, expected: list[ServerSentEvent], last: str
) -> None:
    # WHATWG's last event ID belongs to the EventSource and outlives one
    # connection (the WebKit/WPT reconnect tests: after reconnecting with
    # Last-Event-ID: 77, an event without an id field has lastEventId "77").
    for reads in ([body], byte_reads(body)):
        assert resumed(list(reads), "77") == (current.seen(expected), last)


def test_the_starting_id_is_there_before_anything_is_fed() -> None:
    dec = SSEDecoder(last_event_id="resp_1:41")
    assert dec.last_event_id == "resp_1:41"
    assert dec.end() == []
    assert dec.last_event_id == "resp_1:41"


def test_a_decoder_without_a_starting_id_starts_empty() -> None:
    assert resumed([b"data: a\n\n"], "") == ([ev("a")], "")


@pytest.mark.parametrize("bad", ["a\x00b", "a\nb", "a\rb", "\r"])
def test_a_starting_id_no_stream_could_set_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="NULL, CR or LF"):
        SSEDecoder(last_event_id=bad)


def test_a_starting_id_must_be_text() -> None:
    with pytest.raises(TypeError, match="last_event_id must be a str"):
        SSEDecoder(last_event_id=7)  # type: ignore[arg-type]


_LINES = st.sampled_from(
    [
        b"id: 1",
        b"id: 2",
        b"id",
        b"id: x\x00",
        b"data: a",
        b"data",
        b": ping",
        b"event: e",
        b"retry: 5",
    ]
)
_BLOCKS = st.lists(st.lists(_LINES, max_size=4).map(lambda lines: b"\n".join([*lines, b"", b""])))


@settings(deadline=None)
@given(blocks=_BLOCKS, line_ending=st.sampled_from([b"\n", b"\r\n", b"\r"]))
def test_resuming_at_any_block_boundary_gives_the_rest_of_the_uncut_stream(
    blocks: list[bytes], line_ending: bytes
) -> None:
    # Decoding a stream whole, or up to a block boundary and then afresh from
    # there with the last event ID so far, gives the same events and ID.
    blocks = [block.replace(b"\n", line_ending) for block in blocks]
    whole = decode_sse([b"".join(blocks)])
    for cut in range(len(blocks) + 1):
        first = decode_sse([b"".join(blocks[:cut])])
        rest = SSEDecoder(last_event_id=first.last_event_id)
        after = rest.feed(b"".join(blocks[cut:])) + rest.end()
        assert list(first.events) + after == list(whole.events)
        assert rest.last_event_id == whole.last_event_id

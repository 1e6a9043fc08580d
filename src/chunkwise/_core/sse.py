"""Layers 1 and 2: bytes to text to server-sent events, sans-IO.

Theory of operation
-------------------
:class:`SSEDecoder` follows the WHATWG HTML "Server-sent events" interpretation
rules.  Bytes go through one incremental UTF-8 decoder per stream (invalid
sequences become U+FFFD, as the spec requires), so a character split across
reads is decoded once its last byte arrives.  The text is cut into lines on
LF, CRLF or CR.  A CR is a complete line ending on its own, so the line before
it is processed at once; if the next read then starts with LF, that LF belongs
to the same line ending and is skipped (``_skip_lf``).

Only the unfinished last line is buffered, as a list of pieces with a running
length, so feeding one large event in tiny reads never rescans or recopies what
is already buffered: cost stays linear in the input.  A partial line is
classified as soon as its field name is known: comments and unknown fields are
dropped piece by piece, so they cannot grow memory.  What is buffered for the
current event counts against ``max_event_size`` (measured as
:class:`SSEDecoder` says).  While a line is still arriving its size is
undercounted (the optional space after the colon is assumed), never
overcounted; the exact count is taken when the line ends, or by ``end()`` for a
line the stream cut off.  So whether an event is too large does not depend on
how the bytes were split into reads.

The ``id`` field sets a buffer; a dispatch (a blank line ending a block, even a
block without data) commits it to ``last_event_id``, as WHATWG says; an ``id``
in a block the stream never terminates is not.  A decoder for a reconnection
starts from the previous connection's ID (``last_event_id=``), as a browser's
``EventSource`` does (:doc:`/sse`).

States
------
A decoder is in one :class:`DecoderState` at a time (``_net/http11.py``'s
connection is the model); these transitions are all there are:

=================== ======================================================= ========
from                on                                                      to
=================== ======================================================= ========
START               ``feed()`` decodes a first character (a BOM there is    DECODING
                    dropped)
DECODING            ``feed()`` or ``end()`` finds an event larger than      FAILED
                    ``max_event_size``
START or DECODING   ``end()``                                               ENDED
=================== ======================================================= ========

One ``feed()`` may take two steps: a first read that overflows goes from START
through DECODING to FAILED.  In START, bytes that decode to no character yet
(an empty read, the first bytes of a split character) leave the decoder in
START, so the BOM check waits for the first character.  FAILED and ENDED are
final: in FAILED every ``feed()`` and ``end()`` raises the error again; in
ENDED ``feed()`` raises :class:`~chunkwise.errors.LocalProtocolError` and
``end()`` returns ``[]``.  A read that completes some events and then
overflows returns those events and enters FAILED; the next call raises.

Rules
-----
1. ``feed()`` costs one comparison of the state: DECODING goes straight to
   the decoding; the other phases are handled aside (``_feed_aside``).  SSEDecoder
   and PairDecoder inherit ``feed()`` itself: no wrapper call on the hot path.
2. The phase is only ever the state.  The fields beside it are data: the
   undecoded UTF-8 tail, ``_skip_lf``, the unfinished line and the event being
   built, the error FAILED raises, and whether ``end()`` discarded an event
   (:attr:`SSEDecoder.unterminated`).
"""

from __future__ import annotations

import enum
from codecs import utf_8_decode as _utf8_decode
from typing import Any, Final, Generic, NoReturn, TypeVar

import attrs

from .checks import Check, instance_of, positive_int
from .errors import EventTooLarge, LocalProtocolError, raise_itself

__all__ = [
    "DEFAULT_MAX_EVENT_SIZE",
    "DecoderCore",
    "DecoderState",
    "PairDecoder",
    "SSEDecoder",
    "ServerSentEvent",
]

#: Default limit for one event, in characters (see :class:`SSEDecoder`): enough
#: for a whole non-streamed completion sent as one event, and bounded.
DEFAULT_MAX_EVENT_SIZE: Final = 16 * 1024 * 1024

# The decoder's arguments: a wrong type is a TypeError, a wrong value a ValueError.
_SIZE = positive_int.raising(ValueError, wrong_type=TypeError)
_FLAG = instance_of(bool, "a bool").raising(TypeError)
# No id field can set an id with NULL, CR or LF (WHATWG ignores an id with NULL;
# CR and LF end the line), so no stream could have sent it.
_ID = Check(
    "a str without NULL, CR or LF",
    lambda value: isinstance(value, str),
    lambda value: not any(c in value for c in "\0\r\n"),
    wrong_type=TypeError,
)

_BOM: Final = "\ufeff"
# The longest field name we keep; a partial line longer than this without a
# colon can only be an unknown field.
_LONGEST_FIELD: Final = 5


class DecoderState(enum.Enum):
    """The phase of an SSE decoder: its :attr:`~chunkwise.SSEDecoder.state` (see :doc:`/sse`)."""

    #: Nothing decoded yet: a byte order mark may come.
    START = "start"
    #: A first character has been decoded.
    DECODING = "decoding"
    #: An event grew past ``max_event_size``: every call raises ``error`` again.
    FAILED = "failed"
    #: ``end()`` returned: ``feed()`` raises, ``end()`` returns ``[]``.
    ENDED = "ended"


# The states the hot path compares with, as globals (one lookup, not two).
_START: Final = DecoderState.START
_DECODING: Final = DecoderState.DECODING
_FAILED: Final = DecoderState.FAILED
_ENDED: Final = DecoderState.ENDED

# States of the unfinished line.
_KEEP: Final = 0  # buffer it (known field, or not yet classified)
_DROP_COMMENT: Final = 1  # a comment: discard until the line ends
_DROP_FIELD: Final = 2  # an unknown field: the same, but it is part of an event


@attrs.frozen(kw_only=True)
class ServerSentEvent:
    """One dispatched server-sent event.

    Attributes:
        event: The event type, ``"message"`` when the server gave none.
        data: The data lines joined with ``"\\n"``.
        id: The last event ID in effect at dispatch (``""`` when none).
        retry: The ``retry`` value given in this event's block, if valid.
    """

    event: str = "message"
    data: str = ""
    id: str = ""
    retry: int | None = None


#: What a dispatch gives: a ServerSentEvent, or an (event type, data) pair.
E = TypeVar("E")


class DecoderCore(Generic[E]):
    """The machine of :class:`SSEDecoder` and :class:`PairDecoder`, which differ in ``_pairs``."""

    #: Dispatch (event type, data) pairs instead of ServerSentEvents.
    _pairs = False

    def __init__(
        self,
        *,
        max_event_size: int = DEFAULT_MAX_EVENT_SIZE,
        legacy_error_field: bool = False,
        last_event_id: str = "",
    ) -> None:
        _SIZE.check("max_event_size", max_event_size)
        _FLAG.check("legacy_error_field", legacy_error_field)
        _ID.check("last_event_id", last_event_id)
        self.max_event_size = max_event_size
        self.legacy_error_field = legacy_error_field
        self._state = _START
        self._utf8_tail = b""  # bytes of an incomplete UTF-8 sequence
        self._skip_lf = False  # the previous text ended with CR
        self._error: EventTooLarge | None = None  # what FAILED raises
        self._unterminated = False
        # The unfinished line.
        self._pieces: list[str] = []
        self._line_len = 0
        self._line_state = _KEEP
        self._value_start = -1  # where the unfinished line's value starts, once known
        # The event being built.
        self._data: list[str] = []
        self._errors: list[str] = []
        self._event_type = ""
        self._retry_in_block: int | None = None
        self._has_fields = False  # any field line since the last dispatch
        self._event_size = -1  # the current event's size; see _reset_event
        self._id_buffer = last_event_id  # WHATWG's "last event ID buffer"
        self.last_event_id: str = last_event_id
        self.retry: int | None = None

    @property
    def state(self) -> DecoderState:
        """The decoder's phase: START, DECODING, FAILED or ENDED (see the module's table)."""
        return self._state

    @property
    def error(self) -> EventTooLarge | None:
        """The error that stopped the decoder (FAILED), raised by the next call."""
        return self._error

    @property
    def unterminated(self) -> bool:
        """True when ``end()`` discarded a partial line or fields without a blank line after."""
        return self._unterminated

    def feed(self, data: bytes | bytearray | memoryview) -> list[E]:
        """Decode the next bytes of the stream and return the events they complete.

        ``E`` is :class:`ServerSentEvent`, or for :class:`PairDecoder` an
        ``(event type, data)`` pair.
        """
        if self._state is not _DECODING:
            return self._feed_aside(data)
        return self._feed_text(self._decode(data))

    def _feed_aside(self, data: bytes | bytearray | memoryview) -> list[Any]:
        # feed() in START, FAILED or ENDED (rule 1).
        if self._state is _FAILED:
            self._raise_again()
        if self._state is _ENDED:
            raise LocalProtocolError("feed() called after end()")
        text = self._decode(data)
        if not text:
            return []  # no character yet: still START
        self._state = _DECODING
        if text[0] == _BOM:
            text = text[1:]
            if not text:
                return []
        return self._feed_text(text)

    def _raise_again(self) -> NoReturn:
        # Every call in FAILED raises the error that entered it.
        assert self._error is not None  # set with the state, in _raise_too_large
        raise_itself(self._error, fresh_traceback=True)

    def _decode(self, data: bytes | bytearray | memoryview) -> str:
        # The complete characters of the undecoded tail and data.
        if self._utf8_tail:
            data = self._utf8_tail + data
            self._utf8_tail = b""
        text, used = _utf8_decode(data, "replace", False)
        if used != len(data):
            # A character split across reads: keep its first bytes.
            self._utf8_tail = bytes(data[used:])
        return text

    def end(self) -> list[E]:
        """Signal end of stream; an unterminated event is discarded (:attr:`unterminated`).

        Raises:
            EventTooLarge: the line the stream cut off makes its event larger
                than ``max_event_size``.
        """
        if self._state is _FAILED:
            self._raise_again()
        if self._state is _ENDED:
            return []
        # What the tail flushes is U+FFFD, never a BOM, and holds no line
        # ending: it completes no event, so an overflow here raises (FAILED).
        events = self._feed_text(_utf8_decode(self._utf8_tail, "replace", True)[0])
        self._utf8_tail = b""
        if self._pieces:
            # The cut-off line is discarded, but it counts, exactly now that all
            # of it is known (while it arrived, the count assumed a space).
            name, value = _split_field("".join(self._pieces))
            if self._is_kept_field(name):
                self._keep(value)
        self._state = _ENDED
        if self._has_fields or self._line_len or self._line_state == _DROP_FIELD:
            self._unterminated = True
        self._pieces.clear()
        self._reset_event()
        return events

    # -- internals -------------------------------------------------------

    def _feed_text(self, text: str) -> list[Any]:
        if self._skip_lf and text:
            self._skip_lf = False
            if text[0] == "\n":
                text = text[1:]
        if not text:
            return []
        if (
            self._pairs
            and not self._has_fields
            and not self._pieces
            and self._line_state == _KEEP
            and text[:5] == "data:"
            and text.find("\n") == len(text) - 2
            and text[-1] == "\n"
            and "\r" not in text
            and len(text) - 7 <= self.max_event_size
        ):
            # The hot path of a server that writes one event per read: one
            # "data:" line and its blank line, nothing pending (what the
            # general path below gives, line by line).
            return [("message", text[6:-2] if text[5] == " " else text[5:-2])]
        events: list[Any] = []
        if "\r" in text:
            lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
            # A CR at the very end may be the first half of a CRLF.
            self._skip_lf = text[-1] == "\r"
        else:
            lines = text.split("\n")
        last = lines.pop()  # unfinished (possibly empty) tail
        try:
            if lines:
                self._process_lines(lines, events)
            if last:
                self._add_partial(last)
        except EventTooLarge:
            if not events:
                raise
            # Deliver the events completed before the oversized one; the
            # next call raises.
        return events

    def _process_lines(self, lines: list[str], events: list[Any]) -> None:
        if self._line_state != _KEEP:
            # The tail of a dropped line: ignore it too.
            self._has_fields |= self._line_state == _DROP_FIELD
            lines[0] = ":"
        elif self._pieces:
            lines[0] = self._take_line(lines[0])
        self._line_state = _KEEP
        self._value_start = -1
        data = self._data
        for line in lines:
            if line[:5] == "data:":
                # The hot path: one data line of a chat chunk.
                value = line[6:] if line[5:6] == " " else line[5:]
                self._has_fields = True
                self._event_size += len(value) + 1
                if self._event_size > self.max_event_size:
                    self._raise_too_large()
                data.append(value)
            elif line:
                self._process_line(line)
            elif not self._has_fields:
                continue
            elif data and self._pairs and not self._event_type and not self._errors:
                # The hot path again: a plain data event for the chat layer.
                events.append(("message", data[0] if len(data) == 1 else "\n".join(data)))
                self.last_event_id = self._id_buffer
                self._data = data = []
                self._has_fields = False
                self._event_size = -1
                self._retry_in_block = None
            else:
                self._dispatch(events)
                data = self._data

    def _take_line(self, tail: str) -> str:
        self._pieces.append(tail)
        line = "".join(self._pieces)
        self._pieces.clear()
        self._line_len = 0
        return line

    def _add_partial(self, piece: str) -> None:
        if self._line_state != _KEEP:
            return
        self._pieces.append(piece)
        self._line_len += len(piece)
        if self._value_start < 0:
            self._classify_partial()
            if self._value_start < 0:
                return
        # Count the value so far and its separator, never more than the whole
        # line will count (the module's split-independence).
        if self._event_size + 1 + self._line_len - self._value_start > self.max_event_size:
            self._raise_too_large()

    def _classify_partial(self) -> None:
        # Only the first few characters of the unfinished line decide whether
        # it is worth keeping, and while undecided the line is that short.
        head = "".join(self._pieces) if len(self._pieces) > 1 else self._pieces[0]
        colon = head.find(":", 0, _LONGEST_FIELD + 1)
        if colon < 0 and len(head) <= _LONGEST_FIELD:
            return  # could still become a known field
        name = head[:colon] if colon >= 0 else head
        if colon >= 0 and self._is_kept_field(name):
            # The optional space is not known yet: assume it, to undercount.
            self._value_start = colon + 2
            return
        # A comment or an unknown field: drop it, now and until its line ends.
        self._line_state = _DROP_COMMENT if colon == 0 else _DROP_FIELD
        self._pieces.clear()
        self._line_len = 0

    def _is_kept_field(self, name: str) -> bool:
        return name in ("data", "event", "id", "retry") or (
            self.legacy_error_field and name == "error"
        )

    def _raise_too_large(self) -> None:
        self._pieces.clear()
        self._line_len = 0
        self._reset_event()
        error = self._error = EventTooLarge(self.max_event_size)
        self._state = _FAILED
        raise error

    def _process_line(self, line: str) -> None:
        if line[0] == ":":
            return
        name, value = _split_field(line)
        self._has_fields = True  # an unknown field is ignored, but belongs to an event
        if not self._is_kept_field(name):
            return
        self._keep(value)
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event_type = value
        elif name == "id":
            if "\0" not in value:
                self._id_buffer = value  # committed at dispatch
        elif name == "retry":
            if value.isascii() and value.isdigit():
                self.retry = self._retry_in_block = int(value)
        else:
            self._errors.append(value)  # legacy_error_field

    def _keep(self, value: str) -> None:
        # The value and the separator before it (see _reset_event).
        self._event_size += len(value) + 1
        if self._event_size > self.max_event_size:
            self._raise_too_large()

    def _dispatch(self, events: list[Any]) -> None:
        # WHATWG commits the ID first, so a block without data commits it too.
        self.last_event_id = self._id_buffer
        if self._data:
            kind = self._event_type or "message"
            data = self._data[0] if len(self._data) == 1 else "\n".join(self._data)
        elif self._errors:
            kind = "error"
            data = "\n".join(self._errors)
        else:
            self._reset_event()
            return
        if self._pairs:
            events.append((kind, data))
        else:
            events.append(
                ServerSentEvent(
                    event=kind, data=data, id=self._id_buffer, retry=self._retry_in_block
                )
            )
        self._reset_event()

    def _reset_event(self) -> None:
        self._data = []
        self._errors = []
        self._event_type = ""
        self._retry_in_block = None
        self._has_fields = False
        # Each kept line adds its length plus one for the separator before it;
        # the first line has none, so an event of data lines only has the
        # size of its data.
        self._event_size = -1


class SSEDecoder(DecoderCore[ServerSentEvent]):
    """Incremental, sans-IO decoder from bytes to :class:`ServerSentEvent`.

    Args:
        max_event_size: Upper bound on the size of one event, in characters:
            the total length of the values of its kept field lines (``data``,
            ``event``, ``id``, ``retry``, and ``error`` with
            ``legacy_error_field``) plus one between consecutive lines, so
            exactly ``len(event.data)`` for data lines only.  A line counts as
            far as it has arrived.  One character more than the limit raises
            :class:`~chunkwise.errors.EventTooLarge` (from :meth:`feed`, or
            :meth:`end` for a cut-off line) before the excess is stored,
            however the bytes were split.
        legacy_error_field: Dispatch a block of llama.cpp's legacy ``error:``
            lines (and no ``data:``) as an event of type ``"error"``.
        last_event_id: The previous connection's :attr:`last_event_id`, for a
            reconnection (see :doc:`/sse`).  :exc:`ValueError` for one with
            NULL, CR or LF, which no ``id`` field can set.

    Attributes:
        last_event_id: The last event ID committed by a dispatch (a blank
            line ending its block), as WHATWG defines it.
        retry: The last valid ``retry`` value (it applies at once), or None.
    """


class PairDecoder(DecoderCore[tuple[str, str] | ServerSentEvent]):
    """:class:`SSEDecoder`, giving each event as its ``(event type, data)`` pair.

    For the stream parsers: building a :class:`ServerSentEvent` is most of the
    cost of a small event on the hot path.  After :meth:`whole_events`, it
    gives whole :class:`ServerSentEvent` objects instead (a raw subscriber's).
    """

    _pairs = True

    def whole_events(self) -> None:
        """From now on, dispatch :class:`ServerSentEvent` objects, not pairs."""
        self._pairs = False


def _split_field(line: str) -> tuple[str, str]:
    # A field line's name and value (one optional space after the colon removed).
    name, colon, value = line.partition(":")
    if colon and value[:1] == " ":
        value = value[1:]
    return name, value

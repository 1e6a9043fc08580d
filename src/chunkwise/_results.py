"""Results: immutable snapshots of what a stream has delivered so far."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, Literal

import attrs

from ._errors import (
    ChunkwiseError,
    StreamError,
    StructuredOutputError,
    ToolArgumentsError,
    raise_itself,
)
from ._payloads import copy_json, parse_json
from ._timings import Timings

__all__ = [
    "Anomaly",
    "ChatResult",
    "ChoiceResult",
    "IncompleteReason",
    "Status",
    "ToolCall",
]

Status = Literal["streaming", "complete", "incomplete", "failed"]


class IncompleteReason(str, enum.Enum):
    """Why a stream ended ``incomplete``."""

    #: The stream ended before it was over: a chat choice without a
    #: finish_reason and no ``[DONE]``, or a Responses stream without its
    #: terminal event.
    UNFINISHED = "unfinished"
    #: No chunk carried a choice (e.g. ``data: [DONE]`` alone).
    EMPTY_STREAM = "empty stream"
    #: The connection closed or broke before the stream was over.
    CONNECTION_LOST = "connection lost"
    #: No bytes arrived for longer than the idle timeout.
    IDLE_TIMEOUT = "idle timeout"
    #: The caller cancelled the stream.
    CANCELLED = "cancelled"
    #: No output arrived for longer than the stall timeout, though the
    #: connection was alive (keep-alive comments, empty or role-only chunks).
    STALLED = "stalled"
    #: The server itself said the answer is incomplete (a Responses stream's
    #: ``incomplete`` status; its ``incomplete_details.reason`` says why).
    SERVER_REPORTED = "reported by the server"

    def __str__(self) -> str:
        return self.value


@attrs.frozen(kw_only=True)
class Anomaly:
    """A recoverable break of the stream's rules, recorded rather than hidden.

    ``kind`` is a short stable tag (e.g. ``"content after finish"``),
    ``detail`` says what was received, ``choice_index`` where it applies.
    ``count`` is how many times it happened: kinds a misbehaving server
    repeats on every event (an id that changes each time, an unknown content
    part, data after the end) are recorded once, with the first occurrence's
    ``detail``, and counted; every other anomaly is recorded each time, with
    ``count`` 1.
    """

    kind: str
    detail: str
    choice_index: int | None = None
    count: int = 1


class _Unset(enum.Enum):
    # An enum member, not object(): copy.deepcopy and pickle keep it the same
    # object, so a copied ToolCall still knows that nothing was cached.
    UNSET = enum.auto()


_UNSET: Any = _Unset.UNSET


@attrs.frozen(kw_only=True)
class ToolCall:
    """One tool call of one choice.

    Attributes:
        index: The call's ``index`` as sent, or its position when the server
            sent none.
        id: The call id, assigned once (``None`` when none was sent).
        type: Usually ``"function"``.
        name: The function name, assigned once.
        arguments: The argument fragments concatenated exactly.
        finished: True when the server finished the call: its choice's
            ``finish_reason``, or ``data: [DONE]`` ending a choice that never
            got one; False while streaming or when the stream ended first.
        completed: True once :class:`~chunkwise.ToolCallCompleted` was sent.
        error: Why the arguments cannot be used (invalid JSON, or the
            tool's schema rejects them), once completed.
        validated: True when arguments were checked against a schema and
            passed, False when they failed it (``error`` says how), None when
            no schema was checked.
        validation_skipped: Why the arguments of a completed call that parsed
            were not checked against a schema: ``"jsonschema is not
            installed"`` (the request has tools, but the optional
            ``jsonschema`` package is missing) or ``"no tools were given"``.
            None when they were checked (see ``validated``), when ``error``
            says why they are unusable, and while the call is streaming.  So
            "not checked" is never mistaken for "rejected".
        partial_arguments: The arguments as far as they have streamed, a
            read-only live value (see :doc:`/live_values`): None before the
            value starts; it stops growing where the text cannot become JSON.
            A preview, never parsed or validated: act on
            :meth:`parse_arguments` only.
    """

    index: int
    id: str | None = None
    type: str | None = None
    name: str | None = None
    arguments: str = ""
    finished: bool = False
    completed: bool = False
    error: ToolArgumentsError | None = None
    validated: bool | None = None
    validation_skipped: str | None = None
    partial_arguments: Any = None
    # Set once by the accumulator when the call completes (see _tools), so
    # parse_arguments() does not parse twice; not part of the public signature.
    _parsed: Any = attrs.field(default=_UNSET, init=False, repr=False, eq=False)

    def parse_arguments(self) -> Any:
        """Return the arguments as parsed JSON, or raise :class:`~chunkwise.ToolArgumentsError`.

        The raw text stays in :attr:`arguments` either way.  Each call returns
        a new value, so changing it changes nothing in this call.
        """
        if self.error is not None:
            raise_itself(self.error, fresh_traceback=True)
        if self._parsed is not _UNSET:
            return copy_json(self._parsed)
        try:
            return parse_json(self.arguments)
        except ValueError as exc:
            raise ToolArgumentsError(
                f"arguments of tool call {self.name!r} are not valid JSON: {exc}",
                raw=self.arguments,
                tool_name=self.name,
            ) from None


@attrs.frozen(kw_only=True)
class ChoiceResult:
    """What one choice delivered.

    ``content`` is ``""`` when no text arrived; ``refusal`` and ``reasoning``
    are ``None`` when none arrived.  ``finish_reason`` is the raw string sent,
    or ``None`` while the choice is unfinished -- and for a choice the server
    finished with ``data: [DONE]`` without ever sending one (a ``missing
    finish_reason`` anomaly says so): :attr:`finished` is then true.

    When the request's ``response_format`` asked for JSON, a finished
    choice's content is parsed and validated once, at the end of the stream:
    :attr:`parsed` holds the value, :attr:`parse_error` a
    :class:`~chunkwise.StructuredOutputError` (raw text in ``.raw``); both
    are None when no JSON was asked for, the choice did not finish, or it
    refused.  A choice finished by ``[DONE]`` alone is parsed: the server
    said the stream is over.
    refused.  Meanwhile :attr:`partial_parsed` previews the content as it
    streams: a read-only live value (see :doc:`/live_values`), None before
    the value starts or when no JSON was asked for; never validated.
    """

    index: int
    role: str | None = None
    content: str = ""
    refusal: str | None = None
    reasoning: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str | None = None
    logprobs: Mapping[str, Any] | None = None
    # Given as ``parsed=``; read through the property, which copies, so that
    # a result never changes even if a caller edits the value it was given.
    _parsed: Any = attrs.field(default=None, alias="parsed")
    parse_error: StructuredOutputError | None = None
    #: True once the choice finished: a non-empty finish_reason arrived, or
    #: ``data: [DONE]`` ended the stream (then ``finish_reason`` may be None).
    #: By default, whether ``finish_reason`` is non-empty.
    finished: bool = attrs.field(
        default=attrs.Factory(lambda self: bool(self.finish_reason), takes_self=True)
    )
    partial_parsed: Any = None

    @property
    def parsed(self) -> Any:
        """The structured output (a new copy on each access), or None; see the class."""
        return copy_json(self._parsed)


@attrs.frozen(kw_only=True)
class ChatResult:
    """A snapshot of a chat-completion stream, readable at any time.

    A result, and everything in it, never changes after it was handed out:
    later chunks give a new snapshot.

    ``status`` is ``"streaming"`` until the terminal event, then
    ``"complete"`` (no error and every choice finished: by its finish_reason,
    or by ``data: [DONE]``), ``"failed"`` (``error`` says why) or
    ``"incomplete"`` (``reason`` says why).

    ``error`` is a :class:`~chunkwise.StreamError` (the server's own error),
    or the error chunkwise found (:class:`~chunkwise.InvalidChunk`,
    :class:`~chunkwise.EventTooLarge`, a broken body...); whichever it is, it
    has ``message``, ``type`` and ``code`` (the last two ``None`` where they
    do not apply).

    ``timings`` (a :class:`~chunkwise.Timings`) says when each part arrived;
    it is set on the final result of a stream read by the trio layer
    (:func:`~chunkwise.open_chat_stream`, :class:`~chunkwise.Client`), and
    ``None`` on snapshots taken while streaming and on results of the sans-IO
    parsers alone.  ``server_timings`` holds what the server itself reported,
    raw, by the name it used: llama.cpp's ``timings`` object, vLLM's
    ``metrics`` (the last one sent of each); ``None`` when it sent none.
    """

    id: str | None = None
    model: str | None = None
    created: int | None = None
    system_fingerprint: str | None = None
    choices: tuple[ChoiceResult, ...] = ()
    usage: Mapping[str, Any] | None = None
    error: ChunkwiseError | None = None
    status: Status = "streaming"
    reason: IncompleteReason | None = None
    done_received: bool = False
    anomalies: tuple[Anomaly, ...] = ()
    # Measurements, not content: two results of the same answer are equal
    # however fast it came (a stream's and a sans-IO parser's, say).
    timings: Timings | None = attrs.field(default=None, eq=False)
    server_timings: Mapping[str, Any] | None = None

    def choice(self, index: int = 0) -> ChoiceResult:
        """The choice with this ``index`` (raises :class:`KeyError` if absent)."""
        for choice in self.choices:
            if choice.index == index:
                return choice
        raise KeyError(index)

    @property
    def content(self) -> str:
        """Choice 0's content, the common single-choice case (``""`` if absent)."""
        for choice in self.choices:
            if choice.index == 0:
                return choice.content
        return ""

    @property
    def server_error(self) -> StreamError | None:
        """The error the server reported, if that is why the stream failed."""
        return self.error if isinstance(self.error, StreamError) else None

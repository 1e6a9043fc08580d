"""Layer 3 for legacy completions: ``text_completion`` chunks to events and a result, sans-IO.

Theory of operation
-------------------
:class:`CompletionAccumulator` is :class:`~chunkwise.ChatAccumulator`'s twin
for ``POST /completions``: it takes chunks as decoded mappings
(:meth:`~CompletionAccumulator.feed_chunk`) or as server-sent events
(:meth:`~CompletionAccumulator.feed_event`, ``[DONE]`` checked before JSON,
error payloads recognised by :func:`~chunkwise._payloads.parse_error_payload`,
the one reading of every error shape).  A chunk's choices carry ``text``
directly (no ``delta``), kept per ``index``: several prompts, and ``n``, give
several choices.  Identifying fields (id, model, created, system_fingerprint)
are assigned once, from the first chunk with a valid value: TGI's empty
``id`` is no id.

A :class:`~chunkwise.CompletionResult` never changes once handed out: usage is
replaced, not updated; ``logprobs`` are merged copy-on-write
(:func:`~chunkwise._chunks.merge_logprobs`, shared with chat); what
:meth:`~CompletionAccumulator.feed_chunk` keeps from the caller's mapping is
copied.

Rules
-----
1. The stream has one terminal event, as chat's (``[DONE]``, an error, a
   chunk we cannot interpret, or :meth:`~CompletionAccumulator.end`);
   anything fed after it is ignored with one counted anomaly, except a
   ``[DONE]`` after an error.
2. The status is derived as chat's: ``failed`` when an error arrived (an
   error payload, ``finish_reason: "error"``, input we cannot interpret);
   ``complete`` when every choice that started finished; ``incomplete``
   otherwise.
3. A choice finishes with a non-empty ``finish_reason`` (kept as sent; ``""``
   is "not sent" and finishes nothing).  ``[DONE]`` finishes a choice still
   without one, with one ``missing finish_reason`` anomaly.
4. ``text`` is appended when it is a non-empty string; a non-string is an
   anomaly, text after the choice finished is an anomaly and not appended.
   A choice that carries neither ``text`` nor a ``finish_reason`` (a filter
   annotation) starts nothing.
5. ``data: null`` (llama-server's first event when given several prompts)
   is one counted ``null event`` anomaly, not a failed stream.
6. Usage is taken from whichever chunk carries it, the last one winning.
7. An event shaped like the last hot-path chunk but for its text is read
   without JSON (:mod:`chunkwise._templates`), with the hot path's effects
   exactly: a hot-path chunk is one choice with a string ``text``, no
   ``finish_reason`` or ``logprobs``, no usage, timings or error; the choice
   must exist and not be finished, or the event goes the ordinary way.

Nothing fed to the accumulator raises because of what the server sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._anomalies import AnomalyLog
from .._chunks import merge_logprobs
from .._errors import ChunkwiseError, InvalidChunk, StreamError
from .._events import (
    ChoiceFinished,
    Event,
    StreamCompleted,
    StreamErrorReceived,
    StreamFailed,
    StreamIncomplete,
    TextDelta,
    UsageReported,
)
from .._payloads import DATA_LIMIT, copy_json, load_json, load_object, parse_error_payload, preview
from .._results import Anomaly, IncompleteReason, Status
from .._sse import ServerSentEvent
from .._templates import ChunkTemplate
from .._text import Fragments
from .._timings import TimedAccumulator, take_chunk_timings, timing_fields
from .results import CompletionChoice, CompletionResult

__all__ = ["CompletionAccumulator"]

_DONE = "[DONE]"
_METADATA_KEYS = ("id", "model", "created", "system_fingerprint")


def _text(value: Any) -> str | None:
    # An identifying string: TGI's empty id is no id.
    return value if isinstance(value, str) and value else None


class ChoiceText:
    """One choice of a completion while it streams."""

    __slots__ = ("finish_reason", "finished", "index", "logprobs", "logprobs_shared", "text")

    def __init__(self, index: int) -> None:
        self.index = index
        self.text = Fragments()
        self.finish_reason: str | None = None
        self.finished = False
        self.logprobs: dict[str, Any] | None = None
        self.logprobs_shared = False

    def to_result(self) -> CompletionChoice:
        self.logprobs_shared = True
        return CompletionChoice(
            index=self.index,
            text=self.text.text(),
            finish_reason=self.finish_reason,
            finished=self.finished,
            logprobs=self.logprobs,
        )


class CompletionAccumulator(TimedAccumulator):
    """Accumulate legacy ``text_completion`` chunks into events and a :class:`CompletionResult`."""

    def __init__(self) -> None:
        self._choices: dict[int, ChoiceText] = {}
        self._id: str | None = None
        self._model: str | None = None
        self._created: int | None = None
        self._fingerprint: str | None = None
        # The keys of those still None: while a server never sends one (OpenAI
        # sends no system_fingerprint here), the hot path only looks it up.
        self._metadata_missing: tuple[str, ...] = _METADATA_KEYS
        self._usage: Mapping[str, Any] | None = None
        self._error: ChunkwiseError | None = None
        self._anomalies = AnomalyLog()
        self._status: Status = "streaming"
        self._reason: IncompleteReason | None = None
        self._done = False
        self._ended = False
        self._cache: CompletionResult | None = None
        self._template = ChunkTemplate()

    # -- public API --------------------------------------------------------

    @property
    def result(self) -> CompletionResult:
        """A snapshot of everything received so far."""
        if self._cache is None:
            self._cache = CompletionResult(
                id=self._id,
                model=self._model,
                created=self._created,
                system_fingerprint=self._fingerprint,
                choices=tuple(self._choices[i].to_result() for i in sorted(self._choices)),
                usage=self._usage,
                error=self._error,
                status=self._status,
                reason=self._reason,
                done_received=self._done,
                anomalies=self._anomalies.snapshot(),
                **timing_fields(self),
            )
        return self._cache

    @property
    def finished(self) -> bool:
        """True once the terminal event was produced."""
        return self._ended

    def feed_event(self, event: ServerSentEvent) -> list[Event]:
        """Interpret one server-sent event: ``[DONE]``, an error, or a JSON chunk."""
        return self.feed_data(event.event, event.data)

    def feed_data(self, kind: str, data: str) -> list[Event]:
        """:meth:`feed_event` for an SSE event given as its type and data."""
        if self._ended:
            if data == _DONE and self._status == "failed" and not self._done:
                return []  # rule 1: the server's normal close after its error
            return self._ignore()
        if self._template.active and kind != "error":
            text = self._template.match(data)
            if text is not None:
                templated = self._templated(text)
                if templated is not None:
                    return templated
        if kind == "error":
            try:
                payload = load_json(data)
            except InvalidChunk:
                return self._error_payload(
                    StreamError(data or "the server sent an error event without data")
                )
            return self._error_payload(parse_error_payload(payload))
        if data == _DONE:
            self._done = True
            return self._finish(done=True)
        if not data:
            return []  # an empty keep-alive event carries nothing
        if data[0] != "{" and data.strip() == "null":
            # Rule 5: llama-server opens a multi-prompt stream with it.
            events: list[Event] = []
            self._anomalies.count(events, "null event", "data: null carries nothing")
            self._cache = None
            return events
        try:
            chunk = load_object(data)
        except InvalidChunk as exc:
            return self.fail(exc)
        events = self._chunk(chunk, copy=False)
        if self._template.learning:
            self._learn(data, chunk)
        return events

    def feed_chunk(self, chunk: Mapping[str, Any]) -> list[Event]:
        """Accumulate one decoded ``text_completion`` chunk (any mapping).

        The values kept from ``chunk`` (usage, logprobs, an error body) are
        copied: changing ``chunk`` afterwards changes no result.
        """
        if self._ended:
            return self._ignore()
        if not isinstance(chunk, Mapping):
            return self.fail(InvalidChunk(f"a chunk must be a mapping, not {type(chunk).__name__}"))
        return self._chunk(chunk, copy=True)

    def end(self, reason: IncompleteReason | None = None) -> list[Event]:
        """The stream is over: produce the terminal event (unless already produced).

        ``reason`` says why the stream stopped early when that is known from
        outside the data; it is used only if the stream turns out incomplete.
        """
        if self._ended:
            return []
        return self._finish(reason)

    def note_anomaly(self, anomaly: Anomaly) -> list[Event]:
        """Record an anomaly seen outside the chunks (e.g. by the SSE layer)."""
        events: list[Event] = []
        self._anomaly(events, anomaly.kind, anomaly.detail, anomaly.choice_index)
        return events

    def fail(self, error: ChunkwiseError) -> list[Event]:
        """End the stream as ``failed`` with ``error`` (e.g. a protocol error)."""
        if self._ended:
            return self._ignore()
        self._error = error
        return self._finish()

    # -- the template (rule 7) ---------------------------------------------

    def _templated(self, text: str) -> list[Event] | None:
        # What _chunk does with a hot-path chunk, or None when the choice's
        # state would send it another way.
        index, touch = self._template.key
        state = self._choices.get(index)
        if state is None or state.finished:
            return None
        if touch or text:
            self._cache = None  # _metadata runs on such a chunk, changing nothing else
        if not text:
            return []
        state.text.append(text)
        return [TextDelta(choice_index=index, text=text)]

    def _learn(self, data: str, chunk: dict[str, Any]) -> None:
        choices = chunk.get("choices")
        if type(choices) is not list or len(choices) != 1:
            return
        choice = choices[0]
        if (
            type(choice) is not dict
            or type(choice.get("text")) is not str
            or choice.get("finish_reason") is not None
            or choice.get("logprobs") is not None
        ):
            return
        index = choice.get("index", 0)
        if type(index) is not int or index < 0:
            return
        if (
            "timings" in chunk
            or "metrics" in chunk
            or chunk.get("usage") is not None
            or chunk.get("error") is not None
            or chunk.get("object") == "error"
        ):
            return
        touch = any(chunk.get(key) is not None for key in self._metadata_missing)
        self._template.learn(data, chunk, ("choices", 0, "text"), (index, touch))

    # -- chunks --------------------------------------------------------------

    def _chunk(self, chunk: Mapping[str, Any], *, copy: bool) -> list[Event]:
        events: list[Event] = []
        for key in self._metadata_missing:
            if chunk.get(key) is not None:
                self._metadata(chunk)
                break
        if "timings" in chunk or "metrics" in chunk:
            take_chunk_timings(self, chunk, copy=copy)
        failure: InvalidChunk | None = None
        choices = chunk.get("choices")
        if type(choices) is list:
            for choice in choices:
                failure = self._choice(choice, events, copy)
                if failure is not None:
                    break
        elif choices is not None:
            failure = InvalidChunk(
                f"'choices' is {type(choices).__name__}, not a list", preview(chunk, DATA_LIMIT)
            )
        if failure is None:
            usage = chunk.get("usage")
            if usage is not None:
                if isinstance(usage, Mapping):
                    self._usage = copy_json(usage) if copy else usage
                    self._cache = None
                    events.append(UsageReported(usage=self._usage))
                else:
                    self._anomaly(events, "invalid usage", preview(usage))
        if chunk.get("error") is not None or chunk.get("object") == "error":
            if failure is not None:
                self._anomaly(events, "invalid chunk", str(failure))
            events += self._error_payload(parse_error_payload(copy_json(chunk) if copy else chunk))
        elif failure is not None:
            events += self.fail(failure)
        return events

    def _metadata(self, chunk: Mapping[str, Any]) -> None:
        # Each field assigned once, from the first chunk with a valid value.
        if self._id is None:
            self._id = _text(chunk.get("id"))
        if self._model is None:
            self._model = _text(chunk.get("model"))
        if self._fingerprint is None:
            self._fingerprint = _text(chunk.get("system_fingerprint"))
        created = chunk.get("created")
        if self._created is None and type(created) is int:
            self._created = created
        self._cache = None
        values = (self._id, self._model, self._created, self._fingerprint)
        self._metadata_missing = tuple(
            key for key, value in zip(_METADATA_KEYS, values, strict=True) if value is None
        )

    def _choice(self, choice: Any, events: list[Event], copy: bool) -> InvalidChunk | None:
        if type(choice) is not dict:
            return InvalidChunk(f"a choice is {type(choice).__name__}, not an object")
        index = choice.get("index", 0)
        if type(index) is not int or index < 0:
            return InvalidChunk(f"choice index {index!r} is not a non-negative integer")
        text = choice.get("text")
        finish_reason = choice.get("finish_reason")
        state = self._choices.get(index)
        if (
            state is not None
            and finish_reason is None
            and type(text) is str
            and not state.finished
            and choice.get("logprobs") is None
        ):
            # The hot path: text for a choice that already started.
            if text:
                state.text.append(text)
                events.append(TextDelta(choice_index=index, text=text))
                self._cache = None
            return None
        if state is None:
            if "text" not in choice and finish_reason is None:
                return None  # rule 4: a filter annotation starts nothing
            state = self._choices[index] = ChoiceText(index)
        self._cache = None
        if text:
            if type(text) is not str:
                self._anomaly(events, "non-string text", preview(text), index)
            elif state.finished:
                self._anomaly(events, "text after finish", text, index)
            else:
                state.text.append(text)
                events.append(TextDelta(choice_index=index, text=text))
        logprobs = choice.get("logprobs")
        if logprobs is not None:
            merge_logprobs(state, copy_json(logprobs) if copy else logprobs)
        if finish_reason is not None:
            self._finish_reason(state, finish_reason, events)
        return None

    def _finish_reason(self, state: ChoiceText, reason: Any, events: list[Event]) -> None:
        if not isinstance(reason, str):
            self._anomaly(events, "invalid finish_reason", preview(reason), state.index)
        elif state.finished:
            if reason and reason != state.finish_reason:
                detail = f"{reason!r} after {state.finish_reason!r}"
                self._anomaly(events, "second finish_reason", detail, state.index)
        elif not reason:
            if state.finish_reason is None:
                state.finish_reason = reason  # rule 3: kept as sent, finishes nothing
        else:
            state.finish_reason = reason
            state.finished = True
            events.append(ChoiceFinished(choice_index=state.index, finish_reason=reason))

    # -- errors, anomalies and the end ------------------------------------

    def _error_payload(self, error: StreamError) -> list[Event]:
        self._error = error
        events: list[Event] = [StreamErrorReceived(error=error)]
        events.extend(self._finish())
        return events

    def _anomaly(
        self, events: list[Event], kind: str, detail: str, choice_index: int | None = None
    ) -> None:
        self._anomalies.add(events, kind, detail, choice_index)
        self._cache = None

    def _ignore(self) -> list[Event]:
        kind = "data after [DONE]" if self._done else "data after end"
        self._anomalies.count([], kind, "events after the terminal event are ignored")
        self._cache = None
        return []

    def _finish(self, reason: IncompleteReason | None = None, *, done: bool = False) -> list[Event]:
        events: list[Event] = []
        for index in sorted(self._choices):
            state = self._choices[index]
            if done and not state.finished:
                state.finished = True  # rule 3
                detail = "the stream ended with [DONE]"
                self._anomaly(events, "missing finish_reason", detail, index)
        self._ended = True
        self._cache = None
        if self._error is None:
            for index in sorted(self._choices):
                if self._choices[index].finish_reason == "error":
                    self._error = StreamError(f'choice {index} finished with finish_reason "error"')
                    break
        if self._error is not None:
            self._status = "failed"
            events.append(StreamFailed(result=self.result, error=self._error))
            return events
        if self._choices and all(state.finished for state in self._choices.values()):
            self._status = "complete"
            events.append(StreamCompleted(result=self.result))
            return events
        self._status = "incomplete"
        if not self._choices:
            self._reason = reason or IncompleteReason.EMPTY_STREAM
        else:
            self._reason = reason or IncompleteReason.UNFINISHED
        events.append(StreamIncomplete(result=self.result, reason=self._reason))
        return events

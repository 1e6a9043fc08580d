"""What the two chunk APIs share: chat completions and legacy completions, sans-IO.

Theory of operation
-------------------
Both stream ``choices`` per ``index`` in JSON chunks (``chat.completion.chunk``
and ``text_completion``), so one layer over
:class:`~chunkwise._core.accumulator.BaseAccumulator` (whose rules come first)
accumulates both: :class:`ChunkAccumulator` keeps what every chunk may carry:
the identifying fields (id, model, created, system_fingerprint: assigned once,
from the first chunk with a valid value, an empty string being no value),
usage, server timings, an error, and one state per choice ``index``.  Each API
package (:mod:`chunkwise.chat`, :mod:`chunkwise.completions`) subclasses it
with what is its own, under "what a subclass says"; both results share their
fields through :class:`~chunkwise._core.results.ChunkResult`.

Rules kept here (each API's module lists its own after these):

1. ``[DONE]``, an error payload, a chunk we cannot interpret, or
   :meth:`~ChunkAccumulator.end` produce the terminal event; a ``[DONE]``
   after an error is the server's normal close, not data after the end.
2. A stream is ``complete`` when every choice that started finished (an
   error chunk, ``finish_reason: "error"``, makes it ``failed``), and ``empty
   stream`` when no choice started.  A missing ``[DONE]`` alone does not make
   a finished stream incomplete.
3. A choice finishes with a non-empty ``finish_reason``, kept as sent (``""``,
   which TGI sends on every chunk, is "not sent": it reads as none).
   ``[DONE]`` is the server's own word that the stream is over: a choice still
   without a finish_reason then finishes too (some servers never send one),
   its ``finish_reason`` staying ``None``, with one ``missing finish_reason``
   anomaly.  A body that just stops leaves it unfinished.
4. An error payload is an ``error`` SSE event (JSON, or its text as the
   message) or a chunk with an ``error`` or ``"object": "error"``.  An error
   chunk may carry choices too (OpenRouter finishes a choice with
   ``finish_reason: "error"`` next to the error object): both are kept, and a
   malformed rest of that chunk is only an anomaly.
5. Usage is taken from whichever chunk carries it (or Groq's
   ``x_groq.usage``), the last one winning.
6. ``logprobs`` merge by extending their lists, copying a merged dict first
   when a snapshot holds it (copy on write: a result never changes).
7. The fields chunkwise does not model are kept as sent, read-only: a
   chunk's beside :data:`CHUNK_KEYS` in the result's ``extra``, a choice's
   beside the API's own choice keys in that choice's ``extra`` (vLLM's
   ``stop_reason``, Azure's ``content_filter_results``...).  The last value of
   each key wins, ``null`` included (vLLM's ``stop_reason: null`` says the
   model stopped on its own).  A choice that carries no output (rule 3 of
   each API) still gives its fields to a choice that started; one that never
   started has no result to hold them: they stay in the raw events.  A chunk
   or choice with only known keys costs one subset test.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Mapping
from typing import Any, Generic, Protocol, TypeVar

from .accumulator import DONE, BaseAccumulator
from .errors import InvalidChunk, StreamError
from .events import ChoiceFinished, Event
from .json_patches import ReadOnlyDict, freeze
from .payloads import DATA_LIMIT, copy_json, load_json, parse_error_payload, preview
from .timings import take_server_timings

__all__ = ["CHUNK_KEYS", "EMPTY", "PLAIN_KEYS", "ChoiceLike", "ChunkAccumulator", "frozen_extra"]

METADATA_KEYS = ("id", "model", "created", "system_fingerprint")
#: The keys of almost every chunk: a chunk with only these is read without
#: looking up any other (timings, x_groq, error: each an absent key's lookup
#: fewer, paying for the one subset test of rule 7).
PLAIN_KEYS = frozenset((*METADATA_KEYS, "object", "choices", "usage"))
#: The chunk keys chunkwise models (rule 7): the rest go to ``Result.extra``.
#: ``x_groq`` is not among them: its usage is read (rule 5), its id and seed kept.
CHUNK_KEYS = PLAIN_KEYS | {"error", "timings", "metrics"}
#: ``extra`` when nothing was left over (read-only, so one is shared).
EMPTY: Mapping[str, Any] = ReadOnlyDict()
# Bound once, the cheapest exact test that a dict has only these keys (no view,
# no attribute lookup): about 200 ns a chunk of bench/parse.py's input 1.
_plain = PLAIN_KEYS.issuperset


class ChoiceLike(Protocol):
    """What :class:`ChunkAccumulator` reads of a choice's state while it streams."""

    index: int
    finish_reason: str | None
    finished: bool
    logprobs: dict[str, Any] | None
    logprobs_shared: bool
    extra: dict[str, Any] | None

    def to_result(self) -> Any: ...


S = TypeVar("S", bound=ChoiceLike)
R = TypeVar("R")


class ChunkAccumulator(BaseAccumulator[R], Generic[S, R]):
    """The accumulator both chunk APIs are: choices of type ``S``, results of type ``R``."""

    #: The API's result class, given every field.
    _result_class: Callable[..., R]
    #: The choice keys the API models (rule 7): the rest go to the choice's ``extra``.
    _choice_keys: frozenset[str]
    #: ``_choice_keys.issuperset``, bound once (as ``_chunk_known``).
    _choice_known: Callable[[Mapping[str, Any]], bool]

    def __init__(self) -> None:
        super().__init__()
        self._choices: dict[int, S] = {}
        self._id: str | None = None
        self._model: str | None = None
        self._created: int | None = None
        self._fingerprint: str | None = None
        # The keys of those still None: while a server never sends one (OpenAI
        # sends no system_fingerprint for completions), each chunk only
        # looks that key up.
        self._metadata_missing: tuple[str, ...] = METADATA_KEYS
        self._extra: dict[str, Any] | None = None  # rule 7

    # -- what a subclass says ----------------------------------------------

    @abstractmethod
    def _choice(
        self, index: int, choice: dict[str, Any], events: list[Event]
    ) -> S | InvalidChunk | None:
        """Take the API's own fields of one choice (a JSON object with a valid ``index``).

        Returns its state, for the fields every choice has (logprobs, then
        finish_reason); None when it starts nothing; or why the chunk cannot
        be interpreted.
        """

    def _choice_finished(self, state: S, events: list[Event]) -> None:
        """A non-empty finish_reason finished ``state`` (before its ChoiceFinished)."""

    def _choice_closed(self, state: S, events: list[Event]) -> None:
        """The stream ended: ``state`` is as finished as it will be."""

    # -- the skeleton filled in ------------------------------------------------

    @property
    def awaiting_output(self) -> bool:
        if self._ended:
            return False
        choices = self._choices.values()
        return not choices or not all(state.finished for state in choices)

    def feed_chunk(self, chunk: Mapping[str, Any]) -> list[Event]:
        """Deprecated: :meth:`feed`."""
        return self._renamed("feed_chunk", chunk)

    def _snapshot(self) -> R:
        return self._result_class(
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
            server_timings=self._server_timings,
            extra=frozen_extra(self._extra),
        )

    def _closing(self, data: str) -> bool:
        # Rule 1: the server's normal close after its error.
        return data == DONE and self._status == "failed" and not self._done

    def _special(self, kind: str, data: str) -> list[Event] | None:
        if kind == "error":  # rule 4
            try:
                payload = load_json(data)
            except InvalidChunk:
                # Not JSON: the text itself is the message.
                return self._server_error(
                    StreamError(data or "the server sent an error event without data")
                )
            return self._server_error(parse_error_payload(payload))
        if data == DONE:
            self._done = True
            return self._finish(by_server=True)
        return []  # empty data: a keep-alive event carries nothing

    def _started(self) -> bool:
        return bool(self._choices)

    def _settle(self, events: list[Event], by_server: bool) -> bool:
        # Rule 2.
        return bool(self._choices) and all(state.finished for state in self._choices.values())

    def _close(self, events: list[Event], by_server: bool) -> None:
        for index in sorted(self._choices):
            state = self._choices[index]
            if by_server and not state.finished:
                # Rule 3: [DONE] finishes a choice the server never gave a finish_reason.
                state.finished = True
                detail = "the stream ended with [DONE]"
                self._anomaly(events, "missing finish_reason", detail, index)
            self._choice_closed(state, events)
        if self._error is None:  # rule 2
            for index in sorted(self._choices):
                if self._choices[index].finish_reason == "error":
                    self._error = StreamError(f'choice {index} finished with finish_reason "error"')
                    break

    # -- chunks --------------------------------------------------------------

    def _take(self, chunk: Mapping[str, Any], kind: str | None, data: str | None) -> list[Event]:
        events: list[Event] = []
        copy = data is None  # the caller's mapping: what is kept is copied
        for key in self._metadata_missing:
            if chunk.get(key) is not None:
                self._metadata(chunk)
                break
        plain = _plain(chunk)
        if not plain:
            if not CHUNK_KEYS.issuperset(chunk):  # rule 7
                self._extra = self._extras(self._extra, chunk, CHUNK_KEYS, copy)
            if "timings" in chunk or "metrics" in chunk:
                self._take_timings(take_server_timings(chunk, self._server_timings, copy=copy))
        failure: InvalidChunk | None = None
        choices = chunk.get("choices")
        if type(choices) is list:
            for choice in choices:
                if type(choice) is not dict:
                    failure = InvalidChunk(f"a choice is {type(choice).__name__}, not an object")
                    break
                index = choice.get("index", 0)
                if type(index) is not int or index < 0:
                    failure = InvalidChunk(f"choice index {index!r} is not a non-negative integer")
                    break
                state = self._choice(index, choice, events)
                if state is None:
                    state = self._choices.get(index)  # rule 7: its fields still count
                    if state is not None and not self._choice_known(choice):
                        state.extra = self._extras(state.extra, choice, self._choice_keys, copy)
                    continue
                if isinstance(state, InvalidChunk):
                    failure = state
                    break
                if not self._choice_known(choice):
                    state.extra = self._extras(state.extra, choice, self._choice_keys, copy)
                self._cache = None  # what every choice has: logprobs (rule 6), finish_reason
                logprobs = choice.get("logprobs")
                if logprobs is not None:
                    _merge_logprobs(state, copy_json(logprobs) if copy else logprobs)
                reason = choice.get("finish_reason")
                if reason is not None:
                    self._finish_reason(state, reason, events)
        elif choices is not None:
            failure = InvalidChunk(
                f"'choices' is {type(choices).__name__}, not a list",
                data[:DATA_LIMIT] if data is not None else preview(chunk, DATA_LIMIT),
            )
        if failure is None:
            usage = chunk.get("usage")
            if usage is None and not plain:
                extra = chunk.get("x_groq")
                if type(extra) is dict:
                    usage = extra.get("usage")
            if isinstance(usage, Mapping):  # rule 5
                self._take_usage(copy_json(usage) if copy else usage, events)
            elif usage is not None:
                self._anomaly(events, "invalid usage", preview(usage))
        if (not plain and chunk.get("error") is not None) or chunk.get("object") == "error":
            # Rule 4: the stream failed because of the server's error, so a
            # malformed rest of the chunk is only an anomaly.
            if failure is not None:
                self._anomaly(events, "invalid chunk", str(failure))
            events += self._server_error(parse_error_payload(copy_json(chunk) if copy else chunk))
        elif failure is not None:
            events += self.fail(failure)
        return events

    def _extras(
        self,
        extra: dict[str, Any] | None,
        unit: Mapping[str, Any],
        known: frozenset[str],
        copy: bool,
    ) -> dict[str, Any]:
        """Rule 7: ``extra`` updated with ``unit``'s keys beside ``known``, each value frozen."""
        extra = {} if extra is None else extra
        for key, value in unit.items():  # in the order sent
            if key not in known:
                extra[key] = freeze(copy_json(value) if copy else value)
        self._cache = None
        return extra

    def _metadata(self, chunk: Mapping[str, Any]) -> None:
        # Only when a chunk has a value for a field still missing: each is
        # assigned once (later chunks repeat it, never extend it).
        if self._id is None:
            self._id = _identifier(chunk.get("id"))
        if self._model is None:
            self._model = _identifier(chunk.get("model"))
        if self._created is None:
            value = chunk.get("created")
            if type(value) is int:
                self._created = value
        if self._fingerprint is None:
            self._fingerprint = _identifier(chunk.get("system_fingerprint"))
        self._cache = None
        values = (self._id, self._model, self._created, self._fingerprint)
        self._metadata_missing = tuple(
            key for key, value in zip(METADATA_KEYS, values, strict=True) if value is None
        )

    def _finish_reason(self, state: S, reason: Any, events: list[Event]) -> None:
        # Rule 3.
        if not isinstance(reason, str):
            self._anomaly(events, "invalid finish_reason", preview(reason), state.index)
        elif state.finished:
            if reason and reason != state.finish_reason:
                detail = f"{reason!r} after {state.finish_reason!r}"
                self._anomaly(events, "second finish_reason", detail, state.index)
        elif reason:
            state.finish_reason = reason
            state.finished = True
            self._choice_finished(state, events)
            events.append(ChoiceFinished(choice_index=state.index, finish_reason=reason))


def frozen_extra(extra: dict[str, Any] | None) -> Mapping[str, Any]:
    """Rule 7: what a snapshot holds of ``extra`` (its values are frozen already)."""
    return EMPTY if extra is None else ReadOnlyDict(extra)


def _identifier(value: Any) -> str | None:
    # An identifying string: TGI's empty id is no id.
    return value if isinstance(value, str) and value else None


def _merge_logprobs(state: ChoiceLike, logprobs: Any) -> None:
    """Rule 6: extend the choice's ``logprobs`` with a chunk's (either API's shape)."""
    if type(logprobs) is not dict:
        return
    merged = state.logprobs
    if merged is None:
        merged = state.logprobs = {}
    elif state.logprobs_shared:
        # A snapshot holds this dict and its lists, and a snapshot never
        # changes: extend copies instead (copy on write, so streams nobody
        # snapshots mid-way pay nothing).
        merged = state.logprobs = {
            key: list(value) if type(value) is list else value for key, value in merged.items()
        }
    state.logprobs_shared = False
    for key, value in logprobs.items():
        if type(value) is list:
            current = merged.get(key)
            if type(current) is list:
                current.extend(value)
            else:
                merged[key] = list(value)
        elif value is not None or key not in merged:
            merged[key] = value

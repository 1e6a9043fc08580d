"""Layer 3: chat-completion chunks to stream events and a result, sans-IO.

Theory of operation
-------------------
:class:`ChatAccumulator` takes chunks one at a time, either as already-decoded
mappings (:meth:`~ChatAccumulator.feed_chunk`, e.g. ``chunk.model_dump()`` from
the official SDK) or as server-sent events (:meth:`~ChatAccumulator.feed_event`,
which checks ``[DONE]`` before JSON and recognises error payloads).  State is
kept per choice ``index`` and, inside a choice, per tool call.  Fields that
identify something (id, name, type, role, model, created, system_fingerprint)
are assigned once, from the first chunk that carries a valid value; fields that
stream (content, refusal, reasoning, arguments) are concatenated exactly.

A :class:`ChatResult` never changes once handed out, nor does anything in it.
Strings are immutable; the mutable values a result holds are never mutated
afterwards: usage is replaced, not updated; a choice's ``logprobs`` are copied
before the next merge when a snapshot holds them (copy on write); and what
:meth:`~ChatAccumulator.feed_chunk` keeps from the caller's mapping is copied
(see :mod:`chunkwise._payloads`), so the caller cannot change it either.

Rules
-----
1. The stream has one terminal event.  ``[DONE]``, an error payload, a chunk
   we cannot interpret, or :meth:`~ChatAccumulator.end` produce it; anything
   fed after it is ignored, with one counted anomaly -- except a ``[DONE]``
   after an error, which is the server's normal close.
2. The status is derived, never asserted by the server: ``failed`` when an
   error arrived (an error payload, ``finish_reason: "error"``, input we
   cannot interpret); ``complete`` when every choice that started finished;
   ``incomplete`` otherwise.  A missing ``[DONE]`` alone does not make a
   finished stream incomplete.
3. A choice finishes with a non-empty finish_reason, which completes its tool
   calls (``finished`` true).  ``[DONE]`` is the server's own word that the
   stream is over: a choice still without a finish_reason then finishes too
   (some servers never send one), its ``finish_reason`` staying as sent
   (``None``) with one ``missing finish_reason`` anomaly, its tool calls
   completed with ``finished`` true.  A body that just stops leaves it
   unfinished, and its calls are completed with ``finished`` false.
4. Text is appended when it is a non-empty string; ``content`` may also be a
   list of typed parts (:mod:`chunkwise._chat.choices`, rule 2): text parts are
   content, thinking parts reasoning, in order, and a part not understood is
   one counted anomaly per choice.  Text after a choice finished is an
   anomaly, not appended.
5. A structured output (``response_format``) is checked once, at the end,
   for each finished choice (:mod:`chunkwise._structured`): a choice cut
   short (``length``, ``content_filter``) gets a "cut short" error unparsed,
   a choice finished by ``[DONE]`` alone is parsed (the server said it is over).
6. An event shaped like the last hot-path chunk but for its text is read
   without JSON (:mod:`chunkwise._templates`), with the hot path's effects
   exactly.  A hot-path chunk has one choice, no ``finish_reason`` or
   ``logprobs``, no usage, timings or error, and a delta that is only
   ``content`` text, or only one tool call's ``{"index": i, "function":
   {"arguments": ...}}``; the choice (and the call) must exist, the choice
   not finished, or the event goes the ordinary way.

Nothing fed to the accumulator raises because of what the *server* sent:
invalid input ends the stream as ``failed`` with a typed error, and everything
received before it stays in :attr:`~ChatAccumulator.result`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .._anomalies import AnomalyLog
from .._chunks import merge_logprobs
from .._errors import ChunkwiseError, InvalidChunk, StreamError
from .._events import (
    ChoiceFinished,
    ContentDelta,
    Event,
    ReasoningDelta,
    RefusalDelta,
    StreamCompleted,
    StreamErrorReceived,
    StreamFailed,
    StreamIncomplete,
    ToolCallArgumentsDelta,
    ToolCallCompleted,
    ToolCallStarted,
    UsageReported,
)
from .._partial_json import LiveJSON
from .._payloads import (
    DATA_LIMIT,
    copy_json,
    dump_json,
    load_json,
    load_object,
    parse_error_payload,
    preview,
)
from .._results import Anomaly, IncompleteReason, Status
from .._sse import ServerSentEvent
from .._structured import CUT_SHORT, OutputSchema
from .._templates import ChunkTemplate
from .._timings import TimedAccumulator, take_chunk_timings, timing_fields
from .._tools import ToolSchemas, complete_tool_call
from .choices import ChoiceState, ToolCallState, read_parts
from .results import ChatResult

__all__ = ["ChatAccumulator"]

_DONE = "[DONE]"
_METADATA_KEYS = ("id", "model", "created", "system_fingerprint")


class ChatAccumulator(TimedAccumulator):
    """Accumulate chat-completion chunks into events and a :class:`ChatResult`.

    Args:
        tools: The request's ``tools`` list.  When given, each completed tool
            call's arguments are validated against the matching function's
            JSON schema (needs the ``jsonschema`` extra).
        response_format: The request's ``response_format``.  When it asks for
            JSON (``json_schema`` or ``json_object``), the content of each
            finished choice is parsed and validated once, at the end
            (:attr:`ChoiceResult.parsed`, :attr:`ChoiceResult.parse_error`).
    """

    def __init__(
        self,
        *,
        tools: Iterable[Mapping[str, Any]] | None = None,
        response_format: Mapping[str, Any] | None = None,
    ) -> None:
        self._schemas = ToolSchemas(tools) if tools is not None else None
        self._output_schema = OutputSchema.from_response_format(response_format)
        self._choices: dict[int, ChoiceState] = {}
        self._id: str | None = None
        self._model: str | None = None
        self._created: int | None = None
        self._fingerprint: str | None = None
        # The keys of those still None: while a server never sends one, the
        # hot path only looks that key up.
        self._metadata_missing: tuple[str, ...] = _METADATA_KEYS
        self._usage: Mapping[str, Any] | None = None
        self._error: ChunkwiseError | None = None
        self._anomalies = AnomalyLog()
        self._status: Status = "streaming"
        self._reason: IncompleteReason | None = None
        self._done = False
        self._ended = False
        self._cache: ChatResult | None = None
        self._template = ChunkTemplate()

    # -- public API --------------------------------------------------------

    @property
    def result(self) -> ChatResult:
        """A snapshot of everything received so far."""
        if self._cache is None:
            self._cache = ChatResult(
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
                # Not JSON: the text itself is the message.
                return self._error_payload(
                    StreamError(data or "the server sent an error event without data")
                )
            return self._error_payload(parse_error_payload(payload))
        if data == _DONE:
            self._done = True
            return self._finish(done=True)
        if not data:
            return []  # an empty keep-alive event carries nothing
        try:
            chunk = load_object(data)
        except InvalidChunk as exc:
            return self.fail(exc)
        events = self._chunk(chunk, data)
        if self._template.learning:
            self._learn(data, chunk)
        return events

    def feed_chunk(self, chunk: Mapping[str, Any]) -> list[Event]:
        """Accumulate one decoded ``chat.completion.chunk`` (any mapping).

        The values kept from ``chunk`` (usage, logprobs, an error body) are
        copied: changing ``chunk`` afterwards changes no result.
        """
        if self._ended:
            return self._ignore()
        if not isinstance(chunk, Mapping):
            return self.fail(InvalidChunk(f"a chunk must be a mapping, not {type(chunk).__name__}"))
        return self._chunk(chunk, None)

    def end(self, reason: IncompleteReason | None = None) -> list[Event]:
        """The stream is over: produce the terminal event (unless already produced).

        Tool calls still open are completed with ``finished=False``.
        ``reason`` says why the stream stopped early when that is known from
        outside the data (e.g. :attr:`IncompleteReason.CONNECTION_LOST`); it
        is used only if the stream turns out incomplete.
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

    # -- the template (rule 6) ---------------------------------------------

    def _templated(self, text: str) -> list[Event] | None:
        # What _chunk does with a hot-path chunk, or None when the state
        # would send it another way.
        key = self._template.key
        state = self._choices.get(key[0])
        if state is None or state.finished:
            return None
        events: list[Event] = []
        if len(key) == 1:
            self._cache = None
            if text:
                state.content.append(text)
                self._content_delta(state, text, events)
            return events
        call = state.by_index.get(key[1])
        if call is None:
            return None
        self._cache = None
        if text:
            self._arguments_fragment(state, call, text, events)
        return events

    def _learn(self, data: str, chunk: dict[str, Any]) -> None:
        choices = chunk.get("choices")
        if type(choices) is not list or len(choices) != 1:
            return
        choice = choices[0]
        if (
            type(choice) is not dict
            or choice.get("finish_reason") is not None
            or choice.get("logprobs") is not None
        ):
            return
        index = choice.get("index", 0)
        delta = choice.get("delta")
        if type(index) is not int or index < 0 or type(delta) is not dict or len(delta) != 1:
            return
        groq = chunk.get("x_groq")
        if (
            "timings" in chunk
            or "metrics" in chunk
            or chunk.get("usage") is not None
            or (type(groq) is dict and groq.get("usage") is not None)
            or chunk.get("error") is not None
            or chunk.get("object") == "error"
        ):
            return
        if type(delta.get("content")) is str:
            self._template.learn(data, chunk, ("choices", 0, "delta", "content"), (index,))
            return
        calls = delta.get("tool_calls")
        if type(calls) is not list or len(calls) != 1:
            return
        call = calls[0]
        function = call.get("function") if type(call) is dict else None
        if (
            type(function) is dict
            and len(call) == 2
            and type(call.get("index")) is int
            and len(function) == 1
            and type(function.get("arguments")) is str
        ):
            path = ("choices", 0, "delta", "tool_calls", 0, "function", "arguments")
            self._template.learn(data, chunk, path, (index, call["index"]))

    # -- chunks --------------------------------------------------------------

    def _chunk(self, chunk: Mapping[str, Any], data: str | None) -> list[Event]:
        # ``data`` is None when the chunk is the caller's mapping (feed_chunk):
        # whatever the result keeps from it is then copied, so that the caller
        # changing its mapping later cannot change a result already handed out.
        events: list[Event] = []
        for key in self._metadata_missing:
            if chunk.get(key) is not None:
                self._metadata(chunk)
                break
        if "timings" in chunk or "metrics" in chunk:
            take_chunk_timings(self, chunk, copy=data is None)
        failure: InvalidChunk | None = None
        choices = chunk.get("choices")
        if choices:
            if type(choices) is not list:
                failure = InvalidChunk(
                    f"'choices' is {type(choices).__name__}, not a list",
                    data[:DATA_LIMIT] if data is not None else preview(chunk, DATA_LIMIT),
                )
            else:
                for choice in choices:
                    failure = self._choice(choice, events, data is None)
                    if failure is not None:
                        break
        elif choices is not None and type(choices) is not list:
            failure = InvalidChunk(f"'choices' is {choices!r}, not a list")
        if failure is None:
            usage = chunk.get("usage")
            if usage is None:
                extra = chunk.get("x_groq")
                if type(extra) is dict:
                    usage = extra.get("usage")
            if usage is not None:
                self._take_usage(usage, events, data is None)
        error = chunk.get("error")
        if error is not None or chunk.get("object") == "error":
            # An error chunk may carry choices too: OpenRouter finishes a choice
            # with finish_reason "error" next to the error object.  Both are
            # kept; the stream failed because of the server's error, so a
            # malformed rest of the chunk is only an anomaly.
            if failure is not None:
                self._anomaly(events, "invalid chunk", str(failure))
            events += self._error_payload(
                parse_error_payload(copy_json(chunk) if data is None else chunk)
            )
        elif failure is not None:
            events += self.fail(failure)
        return events

    def _take_usage(self, usage: Any, events: list[Event], copy: bool) -> None:
        if isinstance(usage, Mapping):
            if copy:
                usage = copy_json(usage)
            self._usage = usage
            self._cache = None
            events.append(UsageReported(usage=usage))
        else:
            self._anomaly(events, "invalid usage", preview(usage))

    def _metadata(self, chunk: Mapping[str, Any]) -> None:
        # Each field is assigned once, from the first chunk with a valid value
        # (later chunks repeat it, never extend it), whichever chunk that is.
        # Runs only when a chunk has a value for a field still missing.
        if self._id is None:
            value = chunk.get("id")
            if isinstance(value, str) and value:
                self._id = value
                self._cache = None
        if self._model is None:
            value = chunk.get("model")
            if isinstance(value, str) and value:
                self._model = value
                self._cache = None
        if self._created is None:
            value = chunk.get("created")
            if type(value) is int:
                self._created = value
                self._cache = None
        if self._fingerprint is None:
            value = chunk.get("system_fingerprint")
            if isinstance(value, str) and value:
                self._fingerprint = value
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
        delta = choice.get("delta")
        finish_reason = choice.get("finish_reason")
        state = self._choices.get(index)
        if delta is None:
            # Content-filter annotations and the like: no new completion.
            if state is None or finish_reason is None:
                return None
        elif type(delta) is not dict:
            return InvalidChunk(f"delta of choice {index} is {type(delta).__name__}")
        if state is None:
            state = self._choices[index] = ChoiceState(index)
        self._cache = None
        if delta:
            self._delta(state, delta, events)
        logprobs = choice.get("logprobs")
        if logprobs is not None:
            merge_logprobs(state, copy_json(logprobs) if copy else logprobs)
        if finish_reason is not None:
            self._finish_reason(state, finish_reason, events)
        return None

    def _delta(self, state: ChoiceState, delta: dict[str, Any], events: list[Event]) -> None:
        index = state.index
        if len(delta) == 1 and not state.finished:
            # The hot path: a delta carrying only text (previewed when JSON was asked for).
            text = delta.get("content")
            if type(text) is str:
                if text:
                    state.content.append(text)
                    if self._output_schema is None:
                        events.append(ContentDelta(choice_index=index, text=text))
                    else:
                        self._content_delta(state, text, events)
                return
        role = delta.get("role")
        if role and state.role is None and isinstance(role, str):
            state.role = role
        text = delta.get("content")
        if text and type(text) is list:
            self._content_parts(state, text, events)
        elif text and self._appendable(state, "content", text, events):
            state.content.append(text)
            self._content_delta(state, text, events)
        text = delta.get("refusal")
        if text and self._appendable(state, "refusal", text, events):
            state.refusal.append(text)
            events.append(RefusalDelta(choice_index=index, text=text))
        text = delta.get("reasoning_content") or delta.get("reasoning")
        if text and self._appendable(state, "reasoning", text, events):
            state.reasoning.append(text)
            events.append(ReasoningDelta(choice_index=index, text=text))
        tool_calls = delta.get("tool_calls")
        if tool_calls:
            if type(tool_calls) is not list:
                self._anomaly(events, "invalid tool_calls", preview(tool_calls), index)
            elif state.finished:
                self._anomaly(events, "tool call after finish", preview(tool_calls), index)
            else:
                for tool_delta in tool_calls:
                    if type(tool_delta) is dict:
                        self._tool_delta(state, tool_delta, events)
                    else:
                        self._anomaly(events, "invalid tool call", preview(tool_delta), index)

    def _appendable(self, state: ChoiceState, field: str, text: Any, events: list[Event]) -> bool:
        """True when ``text`` may extend the choice's ``field``; else record why not."""
        if type(text) is not str:
            self._anomaly(events, f"non-string {field}", preview(text), state.index)
            return False
        if state.finished:
            # Not merged: text after the finish is a server bug worth seeing.
            self._anomaly(events, f"{field} after finish", text, state.index)
            return False
        return True

    def _content_parts(self, state: ChoiceState, parts: list[Any], events: list[Event]) -> None:
        # Rule 4: typed parts (Mistral), text and reasoning in the order sent.
        if state.finished:
            self._anomaly(events, "content after finish", preview(parts), state.index)
            return
        pieces, unknown = read_parts(parts)
        for field, text in pieces:
            if field == "content":
                state.content.append(text)
                events.append(ContentDelta(choice_index=state.index, text=text))
            else:
                state.reasoning.append(text)
                events.append(ReasoningDelta(choice_index=state.index, text=text))
        for part in unknown:
            self._anomalies.count(events, "unknown content part", preview(part), state.index)
            self._cache = None

    def _tool_delta(self, state: ChoiceState, delta: dict[str, Any], events: list[Event]) -> None:
        index = delta.get("index")
        function = delta.get("function")
        if len(delta) == 2 and type(index) is int and type(function) is dict and len(function) == 1:
            # The hot path: {"index": i, "function": {"arguments": "..."}} continuing call i.
            call = state.by_index.get(index)
            fragment = function.get("arguments")
            if call is not None and type(fragment) is str:
                if fragment:
                    self._arguments_fragment(state, call, fragment, events)
                return
        call_id = delta.get("id")
        if not isinstance(call_id, str) or not call_id:
            call_id = None
        call = state.find_call(index if type(index) is int else None, call_id)
        if call is None:
            tool_index = index if type(index) is int else len(state.tools)
            if tool_index in state.by_index:
                # An explicit index reused with another id: keep both calls.
                tool_index = max(state.by_index) + 1
                self._anomaly(events, "tool index reused", f"index {index}", state.index)
            call = ToolCallState(tool_index)
            state.tools.append(call)
            state.by_index[tool_index] = call
            started = True
        else:
            started = False
        if call_id is not None and call.id is None:
            call.id = call_id
        kind = delta.get("type")
        if isinstance(kind, str) and kind and call.type is None:
            call.type = kind
        fragment = None
        if type(function) is dict:
            name = function.get("name")
            if isinstance(name, str) and name and call.name is None:
                call.name = name
            fragment = function.get("arguments")
        if started:
            events.append(
                ToolCallStarted(
                    choice_index=state.index, tool_index=call.index, id=call.id, name=call.name
                )
            )
        if fragment is not None and not isinstance(fragment, str):
            fragment = self._arguments_text(state.index, fragment, events)
        if fragment:
            self._arguments_fragment(state, call, fragment, events)

    def _arguments_fragment(
        self, state: ChoiceState, call: ToolCallState, fragment: str, events: list[Event]
    ) -> None:
        call.args.append(fragment)
        (patches, stop), tool = call.live.feed(fragment), call.index
        events.append(
            ToolCallArgumentsDelta(
                choice_index=state.index, tool_index=tool, fragment=fragment, patches=patches
            )
        )
        if stop is not None:
            self._anomaly(events, "not JSON", f"tool call {tool}: {stop}", state.index)

    def _content_delta(self, state: ChoiceState, text: str, events: list[Event]) -> None:
        if self._output_schema is None:
            events.append(ContentDelta(choice_index=state.index, text=text))
            return
        state.live = state.live or LiveJSON()  # JSON was asked for: previewed as it streams
        patches, stop = state.live.feed(text)
        events.append(ContentDelta(choice_index=state.index, text=text, patches=patches))
        if stop is not None:
            self._anomaly(events, "not JSON", f"content: {stop}", state.index)

    def _arguments_text(self, choice_index: int, value: Any, events: list[Event]) -> str:
        # Some OpenAI-compatible servers send the arguments as a JSON value
        # instead of JSON text: keep its compact text, appended like a
        # fragment, and say so.  (null stays nothing, like "".)
        text = dump_json(value)
        detail = preview(value)
        if text is None:
            detail += " (dropped: it cannot be written as JSON)"
        self._anomaly(events, "non-string arguments", detail, choice_index)
        return text or ""

    def _finish_reason(self, state: ChoiceState, reason: Any, events: list[Event]) -> None:
        if not isinstance(reason, str):
            self._anomaly(events, "invalid finish_reason", preview(reason), state.index)
            return
        if state.finished:
            if reason and reason != state.finish_reason:
                self._anomaly(
                    events,
                    "second finish_reason",
                    f"{reason!r} after {state.finish_reason!r}",
                    state.index,
                )
            return
        if not reason:
            # Some servers send "" on every chunk: keep it as sent, but it
            # does not finish the choice.
            if state.finish_reason is None:
                state.finish_reason = reason
            return
        state.finish_reason = reason
        state.finished = True
        self._complete_tools(state, True, events)
        events.append(ChoiceFinished(choice_index=state.index, finish_reason=reason))

    def _complete_tools(self, state: ChoiceState, finished: bool, events: list[Event]) -> None:
        for call in state.tools:
            if call.completed:
                continue
            call.finished = finished
            call.completed = True
            call.snapshot = complete_tool_call(call.to_result(), schemas=self._schemas)
            events.append(
                ToolCallCompleted(
                    choice_index=state.index, tool_index=call.index, call=call.snapshot
                )
            )

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
        # Rule 1: counted in the result, no event after the terminal one.
        kind = "data after [DONE]" if self._done else "data after end"
        self._anomalies.count([], kind, "events after the terminal event are ignored")
        self._cache = None
        return []

    def _finish(self, reason: IncompleteReason | None = None, *, done: bool = False) -> list[Event]:
        events: list[Event] = []
        for index in sorted(self._choices):
            state = self._choices[index]
            if done and not state.finished:
                # Rule 3: [DONE] finishes a choice the server never gave a finish_reason.
                state.finished = True
                detail = "the stream ended with [DONE]"
                self._anomaly(events, "missing finish_reason", detail, index)
            self._complete_tools(state, state.finished, events)
            self._structured(state)
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
        if not self._choices:
            self._status = "incomplete"
            self._reason = reason or IncompleteReason.EMPTY_STREAM
        elif all(state.finished for state in self._choices.values()):
            self._status = "complete"
            events.append(StreamCompleted(result=self.result))
            return events
        else:
            self._status = "incomplete"
            self._reason = reason or IncompleteReason.UNFINISHED
        events.append(StreamIncomplete(result=self.result, reason=self._reason))
        return events

    def _structured(self, state: ChoiceState) -> None:
        # The rules of _structured: finished choices only, never a cut answer
        # as if whole, a refusal or a tool-call-only answer left alone.
        schema = self._output_schema
        if schema is None or not state.finished:
            return
        content = state.content.text()
        if not content and (state.refusal or state.tools):
            return
        reason = state.finish_reason
        cut = f"finish_reason {reason!r}" if reason in CUT_SHORT else None
        state.parsed, state.parse_error = schema.check(content, cut_short=cut)

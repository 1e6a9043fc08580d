"""Layer 3: chat-completion chunks to stream events and a result, sans-IO.

Theory of operation
-------------------
:class:`Accumulator` is the chat form of the chunk accumulator
(:class:`~chunkwise._core.chunks.ChunkAccumulator`): it reads each choice's
``delta``, keeping state per choice ``index`` and, inside a choice, per tool
call (:mod:`chunkwise.chat.choices`).  Fields that identify something (id,
name, type, role...) are assigned once, from the first chunk with a valid
value; fields that stream (content, refusal, reasoning, arguments) are
concatenated exactly.

Rules
-----
Those of :mod:`chunkwise._core.accumulator` and :mod:`chunkwise._core.chunks`
come first.  Chat's own:

1. A choice that finishes (by its finish_reason, or by ``[DONE]``) completes
   its tool calls with ``finished`` true; a body that just stops leaves the
   choice unfinished and completes its calls with ``finished`` false.
2. Text is appended when it is a non-empty string, or read from a list of
   typed parts (:mod:`chunkwise.chat.choices`, rule 2; a part not understood
   is one counted anomaly per choice).  Text after a choice finished is an
   anomaly, not appended.
3. A structured output (``response_format``) is checked once, at the end,
   for each finished choice (:mod:`chunkwise._core.schemas`): a choice cut
   short (``length``, ``content_filter``) gets a "cut short" error unparsed,
   a choice finished by ``[DONE]`` alone is parsed (the server said it is over).
4. ``delta.audio`` (spoken output) is one :class:`AudioDelta` per delta that
   adds ``data`` or ``transcript`` (non-empty strings, appended like text:
   after the finish, an anomaly); its ``id`` and ``expires_at`` are assigned
   once, from the first valid value, even after the finish (OpenAI sends
   ``expires_at`` alone on a chunk after the finish_reason).
5. The legacy ``delta.function_call`` (a ``functions=`` request: at most one
   call per choice, finished by ``"function_call"``) is the tool-call
   mechanism with one call of its own: kept as the choice's
   ``function_call``, ``tool_index`` 0 in the events (:class:`ToolCallStarted`,
   :class:`ToolCallArgumentsDelta`, :class:`ToolCallCompleted`),
   ``type`` ``"function_call"``, completed and validated with the tool calls
   (rule 1; the request's ``functions`` stand for its ``tools``).  A server
   that mixes it with ``tool_calls`` (OpenAI refuses such a request) gets
   both kept, the events telling them apart only by the completed call's
   ``type``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .._core.chunks import ChunkAccumulator
from .._core.errors import InvalidChunk
from .._core.events import Event
from .._core.partial_json import LiveJSON
from .._core.payloads import dump_json, preview
from .._core.schemas import CUT_SHORT, OutputSchema, ToolSchemas, complete_tool_call
from .choices import AudioState, ChoiceState, ToolCallState, read_parts
from .events import (
    AudioDelta,
    ReasoningDelta,
    RefusalDelta,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallCompleted,
    ToolCallStarted,
)
from .results import Result

__all__ = ["Accumulator"]


class Accumulator(ChunkAccumulator[ChoiceState, Result]):
    """Accumulate chat-completion chunks into events and a :class:`Result`.

    Args:
        tools: The request's ``tools`` (or its legacy ``functions``), to
            validate each completed call's arguments against its function's
            schema (``jsonschema`` extra).
        response_format: The request's: when it asks for JSON, each finished
            choice's content is parsed and validated once, at the end
            (:attr:`ChoiceResult.parsed`).
    """

    _result_class = Result
    _choice_keys = frozenset(("index", "delta", "finish_reason", "logprobs"))
    _choice_known = _choice_keys.issuperset

    def __init__(
        self,
        *,
        tools: Iterable[Mapping[str, Any]] | None = None,
        response_format: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self._schemas = ToolSchemas(tools) if tools is not None else None
        self._output_schema = OutputSchema.from_response_format(response_format)

    def _choice(
        self, index: int, choice: dict[str, Any], events: list[Event]
    ) -> ChoiceState | InvalidChunk | None:
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
        if delta:
            self._delta(state, delta, events)
        return state

    def _delta(self, state: ChoiceState, delta: dict[str, Any], events: list[Event]) -> None:
        index = state.index
        if len(delta) == 1 and not state.finished:
            # Chat's one short path: a delta carrying only its content, the shape
            # of almost every chunk of a chat stream (previewed when JSON was
            # asked for).  Kept because it measured 6% fewer instructions an
            # event (bench/parse.py's input 1, issue 31); the general path below
            # has the same effects, as tests/sansio/test_chunk_shapes.py checks.
            text = delta.get("content")
            if type(text) is str:
                if text:
                    state.content.append(text)
                    if self._output_schema is None:
                        events.append(TextDelta(choice_index=index, text=text))
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
        audio = delta.get("audio")
        if audio is not None:
            self._audio(state, audio, events)
        legacy = delta.get("function_call")
        if legacy:  # rule 5
            if type(legacy) is not dict:
                self._anomaly(events, "invalid function_call", preview(legacy), index)
            elif state.finished:
                self._anomaly(events, "function_call after finish", preview(legacy), index)
            else:
                call = state.function_call
                started = call is None
                if call is None:
                    call = state.function_call = ToolCallState(0)
                    call.type = "function_call"
                self._function(state, call, started, legacy, events)

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
        # Rule 2: typed parts (Mistral), text and reasoning in the order sent.
        if state.finished:
            self._anomaly(events, "content after finish", preview(parts), state.index)
            return
        pieces, unknown = read_parts(parts)
        for field, text in pieces:
            if field == "content":
                state.content.append(text)
                self._content_delta(state, text, events)
            else:
                state.reasoning.append(text)
                events.append(ReasoningDelta(choice_index=state.index, text=text))
        for part in unknown:
            self._counted_anomaly(events, "unknown content part", preview(part), state.index)

    def _tool_delta(self, state: ChoiceState, delta: dict[str, Any], events: list[Event]) -> None:
        index = delta.get("index")
        call_id = delta.get("id")
        if not isinstance(call_id, str) or not call_id:
            call_id = None
        call = state.find_call(index if type(index) is int else None, call_id)
        started = call is None
        if call is None:
            tool_index = index if type(index) is int else len(state.tools)
            if tool_index in state.by_index:
                # An explicit index reused with another id: keep both calls.
                tool_index = max(state.by_index) + 1
                self._anomaly(events, "tool index reused", f"index {index}", state.index)
            call = ToolCallState(tool_index)
            state.tools.append(call)
            state.by_index[tool_index] = call
        if call_id is not None and call.id is None:
            call.id = call_id
        kind = delta.get("type")
        if isinstance(kind, str) and kind and call.type is None:
            call.type = kind
        self._function(state, call, started, delta.get("function"), events)

    def _function(
        self,
        state: ChoiceState,
        call: ToolCallState,
        started: bool,
        function: Any,
        events: list[Event],
    ) -> None:
        """A tool call's ``function`` (or the legacy ``function_call``): its name, its arguments."""
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
        if not fragment:
            return
        call.args.append(fragment)
        (patches, stop), tool = call.live.feed(fragment), call.index
        events.append(
            ToolCallArgumentsDelta(
                choice_index=state.index, tool_index=tool, fragment=fragment, patches=patches
            )
        )
        if stop is not None:
            self._anomaly(events, "not JSON", f"tool call {tool}: {stop}", state.index)

    def _audio(self, state: ChoiceState, audio: Any, events: list[Event]) -> None:
        # Rule 4.
        if type(audio) is not dict:
            self._anomaly(events, "invalid audio", preview(audio), state.index)
            return
        held = state.audio
        if held is None:
            held = state.audio = AudioState()
        value = audio.get("id")
        if held.id is None and isinstance(value, str) and value:
            held.id = value
        value = audio.get("expires_at")
        if held.expires_at is None and type(value) is int:
            held.expires_at = value
        data = audio.get("data")
        if data and not self._appendable(state, "audio data", data, events):
            data = None
        transcript = audio.get("transcript")
        if transcript and not self._appendable(state, "audio transcript", transcript, events):
            transcript = None
        if data or transcript:
            if data:
                held.data.append(data)
            if transcript:
                held.transcript.append(transcript)
            events.append(
                AudioDelta(choice_index=state.index, data=data or "", transcript=transcript or "")
            )

    def _content_delta(self, state: ChoiceState, text: str, events: list[Event]) -> None:
        if self._output_schema is None:
            events.append(TextDelta(choice_index=state.index, text=text))
            return
        live = state.live
        if live is None:  # JSON was asked for: previewed as it streams
            live = state.live = LiveJSON()
        patches, stop = live.feed(text)
        events.append(TextDelta(choice_index=state.index, text=text, patches=patches))
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

    def _choice_finished(self, state: ChoiceState, events: list[Event]) -> None:
        self._complete_tools(state, True, events)  # rule 1

    def _choice_closed(self, state: ChoiceState, events: list[Event]) -> None:
        self._complete_tools(state, state.finished, events)  # rule 1
        self._structured(state)

    def _complete_tools(self, state: ChoiceState, finished: bool, events: list[Event]) -> None:
        calls = state.tools if state.function_call is None else [*state.tools, state.function_call]
        for call in calls:
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

    def _structured(self, state: ChoiceState) -> None:
        # Rule 3, as _structured says: finished choices only, never a cut
        # answer as if whole, a refusal or a tool-call-only answer left alone.
        schema = self._output_schema
        if schema is None or not state.finished:
            return
        content = state.content.text()
        if not content and (state.refusal or state.tools or state.function_call):
            return
        reason = state.finish_reason
        cut = f"finish_reason {reason!r}" if reason in CUT_SHORT else None
        state.parsed, state.parse_error = schema.check(content, cut_short=cut)

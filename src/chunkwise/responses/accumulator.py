"""Layer 3 for the Responses API: stream events to typed events and a result, sans-IO.

Theory of operation
-------------------
:class:`Accumulator` is the Responses API's form of the skeleton every API
fills in (:class:`~chunkwise._core.accumulator.BaseAccumulator`, whose rules
come first).  It takes the events of a streamed ``POST /responses`` one at a
time, decoded (:meth:`~Accumulator.feed`) or as server-sent events
(:meth:`~Accumulator.feed_sse`), keeps one state per *output item* and, inside
an item, per *part* (:mod:`chunkwise.responses.items`), and builds a
:class:`~chunkwise.responses.Result` snapshot on demand.

Rules
-----
1. Dispatch is on the data's ``type``; the SSE ``event:`` field is used only
   when ``type`` is missing.  An event type chunkwise does not know is one
   counted anomaly per type, never fatal (the raw family still has it);
   unknown fields are ignored.  ``data: [DONE]`` (added by some proxies),
   empty data and ``keepalive`` are ignored: they prove nothing.
2. Items and parts are found by position (:mod:`chunkwise.responses.items`,
   rules 1-3).  An event for an item never added creates it, with an anomaly.
   Deltas for a finished item, and ``output_item.added`` again, are anomalies.
   The position decides: an ``item_id`` that differs from its item's id (a
   Copilot endpoint sends new item and response ids with every event) is
   one counted ``item id changed`` anomaly, the item taking the id of its
   latest whole version; a new response id is counted too, the first kept.
3. Deltas append.  The ``.done`` events and the terminal response's ``output``
   are authoritative: they *replace* what the deltas built, with an anomaly
   when the texts differ.  A terminal ``output`` that is null or empty keeps
   the items as they are; otherwise an item it puts at another item's
   position replaces that item, and an item it leaves unfinished is kept as
   streamed, each with an anomaly.
4. A tool's input (:data:`~chunkwise.responses.items.TOOL_INPUTS`) streams
   as deltas and is replaced by its ``.done`` event's or whole item's
   version, as text is (rule 3).  A function call is complete, and its
   arguments parsed and validated once, at ``function_call_arguments.done``
   or ``output_item.done``, whichever comes first; at the end of the stream
   an unfinished call is completed with ``finished`` false.  A later
   authoritative version replaces it in the result (with an anomaly when the
   arguments differ).  A custom tool call is finished at the same points and
   never validated.
5. Errors arrive as an ``error`` event (flat or nested), as llama.cpp's bare
   ``{"error": {...}}`` frame without ``type``, or as the terminal response's
   ``error``, each read by :func:`~chunkwise._core.payloads.parse_error_payload`;
   the stream goes on to its terminal event (OpenAI sends ``response.failed``
   after the ``error`` event), and ends ``failed``.
6. The outcome comes from the terminal response's ``status``, not from the
   event's name: ``completed`` is complete, ``incomplete`` and ``cancelled``
   are incomplete (:attr:`IncompleteReason.SERVER_REPORTED`), ``failed`` is
   failed; an event whose name disagrees with its status gets an anomaly.
   The end of the stream before any terminal event is incomplete, whatever
   arrived, with the partial output kept.
7. Usage is the terminal response's.  When the request set
   ``max_output_tokens`` and a ``completed`` response used that many output
   tokens, an anomaly says the answer may have been cut (llama.cpp reports
   truncation as completed); the status stays what the server said.
8. A structured output (``text.format``) is checked once, at the terminal
   event (:mod:`chunkwise._core.schemas`): ``completed`` is parsed;
   ``incomplete`` gets a "cut short" error unparsed, as a chat choice cut by
   ``length`` does.
9. A stream may go on over connections (:meth:`resume`; sequence numbers drop
   what was seen: :class:`~chunkwise.responses.items.SequenceNumbers`), start
   mid-way (:meth:`start_after`: unknown items expected), or end from a poll.
10. A hosted tool runs from its first progress event
    (``response.<item type>.<phase>``) until its ``completed`` or ``failed``
    phase or its item's end: meanwhile :attr:`awaiting_output` is false, so
    the stall timeout waits for the tool however long it takes.
11. Audio output (``response.audio.*``) belongs to the answer, not to an item.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from .._core.accumulator import TypedEventAccumulator
from .._core.errors import InvalidJSON, StreamError, StructuredOutputError
from .._core.events import Event
from .._core.json_patches import freeze
from .._core.payloads import copy_json, parse_error_event, parse_error_payload, preview
from .._core.results import TERMINAL_STATUSES, IncompleteReason
from .._core.schemas import OutputSchema, ToolSchemas, complete_tool_call
from .._core.timings import event_server_timings
from .events import (
    AudioDelta,
    AudioTranscriptDelta,
    OutputItemAdded,
    OutputItemDone,
    PartialImage,
    StatusChanged,
    ToolCallCompleted,
    ToolCallStarted,
    ToolProgress,
)
from .items import (
    PART_EVENTS,
    PART_LISTS,
    TEXT_DELTAS,
    TEXT_DONES,
    TOOL_INPUTS,
    ItemState,
    ItemTable,
    PartState,
    SequenceNumbers,
    Which,
    as_index,
    as_str,
)
from .results import Audio, FunctionCall, OutputItem, Result

__all__ = ["Accumulator"]

_TERMINAL_TYPES = {
    "response.completed": "completed",
    "response.incomplete": "incomplete",
    "response.failed": "failed",
}
_LIFECYCLE_TYPES = frozenset({"response.created", "response.queued", "response.in_progress"})
# The item types of the hosted tools whose progress is ``response.<type>.<phase>``.
_HOSTED_TOOLS = frozenset(
    {
        "web_search_call",
        "file_search_call",
        "code_interpreter_call",
        "image_generation_call",
        "mcp_call",
        "mcp_list_tools",
        "compaction",
    }
)
# The events of a tool's input, by their type's stem: the item type, and the
# key of the final input in a ``.done`` event.
_INPUT_STEMS = {stem: (kind, key) for kind, (stem, key, _) in TOOL_INPUTS.items()}
_ANOMALY_KINDS = {  # a function call's arguments keep their own words
    True: ("arguments after done", "final arguments differ from deltas"),
    False: ("input after done", "final input differs from deltas"),
}


class Accumulator(TypedEventAccumulator[Result]):
    """Accumulate Responses API stream events into typed events and a :class:`Result`.

    Args:
        tools: The request's ``tools``: each completed function call's arguments
            are validated against its function's ``parameters`` (``jsonschema`` extra).
        text_format: The request's ``text.format``: when it asks for JSON, the
            message text of a completed response is parsed and validated into
            :attr:`Result.parsed` (or :attr:`Result.parse_error`).
        max_output_tokens: The request's, to notice a ``completed`` response using it all (rule 7).
    """

    _public_name = "chunkwise.responses.Accumulator"
    _error_ends = False  # rule 5: the stream goes on to its terminal event

    def __init__(
        self,
        *,
        tools: Iterable[Mapping[str, Any]] | None = None,
        text_format: Mapping[str, Any] | None = None,
        max_output_tokens: int | None = None,
    ) -> None:
        super().__init__()
        self._schemas = ToolSchemas(tools) if tools is not None else None
        self._output_schema = OutputSchema.from_text_format(text_format)
        self._max_output_tokens = as_index(max_output_tokens)
        self._items = ItemTable(preview=self._output_schema is not None)
        self._id: str | None = None
        self._model: str | None = None
        self._created_at: int | float | None = None
        self._response_status: str | None = None
        self._incomplete_reason: str | None = None
        self._parsed: Any = None
        self._parse_error: Any = None
        self._numbers = SequenceNumbers()
        self._running: set[int] = set()  # rule 10: the hosted tools running, by position
        self._audio: Audio | None = None
        self._audio_data: list[str] = []
        self._transcript: list[str] = []
        self._response: Any = None  # the last response object, frozen

    # -- public API (what is not the skeleton's) ---------------------------------

    @property
    def last_sequence_number(self) -> int | None:
        """The highest ``sequence_number`` taken so far (None: none yet): where to resume."""
        return self._numbers.last if self._numbers.last >= 0 else None

    def resume(self) -> None:
        """The next events come from a new connection, after :attr:`last_sequence_number`."""
        self._numbers.resume()
        self._cache = None

    def start_after(self, sequence_number: int) -> None:
        """The stream starts after event ``sequence_number`` (attached with ``starting_after``)."""
        self._numbers.start_after(sequence_number)

    def end_from_response(self, response: Mapping[str, Any]) -> list[Event]:
        """End with a response fetched whole (``GET /responses/{id}``): rule 3, and an anomaly."""
        if self._ended:
            return []
        events: list[Event] = []
        self._anomaly(events, "events not seen", "the stream ended from the polled response")
        self._numbers.resume()  # it went on over a new connection: a resumption too
        self._numbers.missed = True
        self._terminal("GET /responses/{id}", {"response": copy_json(dict(response))}, events)
        return events

    @property
    def awaiting_output(self) -> bool:
        """False once ended, and while a hosted tool runs (rule 10)."""
        return not self._ended and not self._running

    # -- the skeleton filled in ------------------------------------------------

    def _snapshot(self) -> Result:
        return Result(
            id=self._id,
            model=self._model,
            created_at=self._created_at,
            status=self._status,
            response_status=self._response_status,
            incomplete_reason=self._incomplete_reason,
            reason=self._reason,
            output=self._items.snapshot(),
            usage=self._usage,
            error=self._error,
            anomalies=self._anomalies.snapshot(),
            parsed=self._parsed,
            parse_error=self._parse_error,
            server_timings=self._server_timings,
            partial_parsed=None if self._items.preview is None else self._items.preview.value,
            resumes=self._numbers.resumes,
            audio=self._audio_result(),
            response=self._response,
        )

    def _audio_result(self) -> Audio | None:
        if self._audio is None and (self._audio_data or self._transcript):
            data, transcript = "".join(self._audio_data), "".join(self._transcript)
            self._audio = Audio(data=data, transcript=transcript)
        return self._audio

    def _take(self, unit: Mapping[str, Any], kind: str | None, data: str | None) -> list[Event]:
        event = self._own(unit, data)
        events: list[Event] = []
        etype = event.get("type")
        if type(etype) is not str:
            if kind is not None and kind != "message":
                etype = kind  # rule 1: the SSE event field, when type is missing
            elif "error" in event:
                etype = "error"  # llama.cpp's bare error frame
            else:
                self._counted_anomaly(events, "event without type", preview(event))
                return events
        if self._numbers.take(event.get("sequence_number"), self._anomalies, events):
            return events  # a duplicate: already taken (rule 9)
        self._take_timings(event_server_timings(event, self._server_timings))
        handler = _HANDLERS.get(etype)
        if handler is not None:
            handler(self, etype, event, events)
        elif etype.startswith("response.") and etype[9:].rpartition(".")[0] in _HOSTED_TOOLS:
            self._progress(etype, event, events)  # a phase named after this version
        elif etype not in _IGNORED:
            self._counted_anomaly(events, "unknown event type", preview(etype))  # rule 1
        return events

    def _close(self, events: list[Event], by_server: bool) -> None:
        for item in self._items:
            if item.type == "function_call":
                self._complete_call(item, events)  # rule 4: finished is False

    def _settle(self, events: list[Event], by_server: bool) -> bool:
        # Rule 6: only the terminal event's status counts (a lifecycle event's does not).
        status = self._response_status if by_server else None
        if self._output_schema is not None and status is not None:  # rule 8
            output, why = self._items.snapshot(), self._incomplete_reason
            self._parsed, self._parse_error = check_structured(
                self._output_schema, output, status, why
            )
        if status != "completed":
            return False
        self._check_length(events)  # rule 7
        return True

    def _reported(self, by_server: bool) -> IncompleteReason | None:
        # Rule 6: the terminal response said it is not complete.
        if not by_server or self._response_status not in TERMINAL_STATUSES:
            return None
        if self._response_status == "cancelled" and self._incomplete_reason is None:
            self._incomplete_reason = "cancelled"
        return IncompleteReason.SERVER_REPORTED

    def _started(self) -> bool:
        return len(self._items) > 0 or self._id is not None

    # -- items and parts -------------------------------------------------------

    def _find_item(self, data: Mapping[str, Any], events: list[Event], what: str) -> ItemState:
        # Rule 2, with an anomaly for an item never added.
        index = as_index(data.get("output_index"))
        item_id = as_str(data.get("item_id"))
        item = self._items.find(index, item_id)
        if item is None:
            if not self._numbers.mid_way:
                self._anomaly(events, "event for an unknown item", f"{what}: {preview(data)}")
            item = self._items.new(index, item_id)
        else:
            self._check_item_id(item, item_id, events)
        return item

    def _check_item_id(self, item: ItemState, item_id: str | None, events: list[Event]) -> None:
        # Rule 2: the position decides; a server may send a new id on every event.
        if item_id is not None and item.id not in (None, item_id):
            detail = f"output {item.index}: {preview(item_id)} after {preview(item.id)}"
            self._counted_anomaly(events, "item id changed", detail)

    def _item_added(self, etype: str, data: dict[str, Any], events: list[Event]) -> None:
        raw = data.get("item")
        if type(raw) is not dict:
            self._anomaly(events, "invalid item", preview(raw))
            return
        index = as_index(data.get("output_index"))
        item = self._items.at(index) if index is not None else None
        if item is not None and item.done:  # a finished item stays as it was finished
            self._anomaly(events, "item added after done", preview(raw))
            return
        self._take_item(item or self._items.new(index, None), raw, events, streaming=True)

    def _take_item(
        self, item: ItemState, raw: dict[str, Any], events: list[Event], *, streaming: bool
    ) -> None:
        """Take an item the server sent whole: on ``added`` (``streaming``) or authoritative."""
        item.data = raw
        item_id = as_str(raw.get("id"))
        self._check_item_id(item, item_id, events)
        self._items.identify(item, item_id)
        item.type = as_str(raw.get("type")) or item.type
        item.status = as_str(raw.get("status")) or item.status
        item.role = as_str(raw.get("role")) or item.role
        if streaming:
            events.append(
                OutputItemAdded(output_index=item.index, item_id=item.id, item_type=item.type)
            )
        if item.type in TOOL_INPUTS:
            self._take_input(item, raw, events, streaming=streaming)
        for which in PART_LISTS:
            parts = raw.get(which)
            for position, part in enumerate(parts if type(parts) is list else ()):
                if type(part) is dict:
                    self._take_part(item, which, part, position, events, streaming=streaming)

    def _take_input(
        self, item: ItemState, raw: dict[str, Any], events: list[Event], *, streaming: bool
    ) -> None:
        # Rule 4: a tool call's name, call_id and input, from an item sent whole.
        kind = item.type
        assert kind is not None  # in TOOL_INPUTS
        item.name = item.name or as_str(raw.get("name"))
        item.call_id = item.call_id or as_str(raw.get("call_id"))
        if kind == "function_call":
            self._items.alias(item, item.call_id)
        value: Any = raw
        for key in TOOL_INPUTS[kind][2]:
            value = value.get(key) if type(value) is dict else None
        if type(value) is list:  # a shell call's commands, one per line
            value = "\n".join(command for command in value if type(command) is str)
        final = as_str(value)
        if streaming:
            if kind == "function_call":
                events.append(
                    ToolCallStarted(
                        output_index=item.index,
                        item_id=item.id,
                        call_id=item.call_id,
                        name=item.name,
                    )
                )
            if final and not item.inputs:  # an input sent whole when it is added (once)
                self._emit(events, *item.add_input(final), f"output {item.index}")
        elif final is not None:
            self._replace_input(item, final, None, events)
        if not streaming and item.call is not None and item.call.call_id != item.call_id:
            # Completed before its item was seen whole (a stream attached mid-way).
            item.call = self._completed(item, finished=True)

    def _take_part(
        self,
        item: ItemState,
        which: Which,
        raw: dict[str, Any],
        position: int,
        events: list[Event],
        *,
        streaming: bool,
    ) -> None:
        kind = as_str(raw.get("type")) or PART_LISTS[which][0]
        text = as_str(raw.get("refusal" if kind == "refusal" else "text"))
        part = self._items.part(item, which, kind, position, retype=True)
        annotations = raw.get("annotations")
        if type(annotations) is list:
            found = (freeze(a) for a in annotations if type(a) is dict)
            part.annotations = dict(enumerate(found))
        self._take_logprobs(part, raw)
        if text is None:
            return
        if streaming:
            if text and not part.text and not (part.done or item.done):
                self._append(item, which, part, text, events)
        else:
            self._replace_text(item, part, text, events)
            part.done = True

    def _item_done(self, etype: str, data: dict[str, Any], events: list[Event]) -> None:
        raw = data.get("item")
        if type(raw) is not dict:
            self._anomaly(events, "invalid item", preview(raw))
            return
        if as_index(data.get("output_index")) is None and "item_id" not in data:
            # No index (llama.cpp): found by its id, or a call without one by its call_id.
            data = {**data, "item_id": raw.get("id") or raw.get("call_id")}
        item = self._find_item(data, events, "response.output_item.done")
        self._take_item(item, raw, events, streaming=False)
        self._close_item(item, events)

    def _close_item(self, item: ItemState, events: list[Event]) -> None:
        if item.done:
            return
        item.done = True
        self._running.discard(item.index)
        for part in (*item.content.values(), *item.summary.values()):
            part.done = True
        if item.type == "function_call":
            self._complete_call(item, events)
        events.append(OutputItemDone(output_index=item.index, item=item.to_result()))

    def _part_event(self, etype: str, data: dict[str, Any], events: list[Event]) -> None:
        # content_part.added/.done and reasoning_summary_part.added/.done
        which = PART_EVENTS[etype]
        kind, key = PART_LISTS[which]
        raw = data.get("part")
        if type(raw) is not dict:
            self._anomaly(events, "invalid part", preview(raw))
            raw = {}
        item = self._find_item(data, events, etype)
        part = self._items.part(item, which, as_str(raw.get("type")) or kind, data.get(key))
        self._take_part(item, which, raw, part.index, events, streaming=etype.endswith(".added"))

    def _text_delta(self, etype: str, data: dict[str, Any], events: list[Event]) -> None:
        text = data.get("delta")
        if type(text) is not str or not text:
            return
        which, kind = TEXT_DELTAS[etype]
        item = self._find_item(data, events, etype)
        index = data.get(PART_LISTS[which][1])
        part = None if item.done else self._items.part(item, which, kind, index)
        if part is None or part.done:  # the part, or its whole item, is finished
            self._anomaly(events, "delta after done", f"{etype}: {preview(text)}")
            return
        logprobs = data.get("logprobs")
        if type(logprobs) is list and logprobs and kind == "output_text":
            self._append(item, which, part, text, events, freeze(logprobs))
        else:
            self._append(item, which, part, text, events)

    def _append(
        self,
        item: ItemState,
        which: Which,
        part: PartState,
        text: str,
        events: list[Event],
        logprobs: tuple[Any, ...] = (),
    ) -> None:
        appended = self._items.append(item, which, part, text, logprobs)
        self._emit(events, *appended, "output text")

    def _emit(self, events: list[Event], event: Event, stop: InvalidJSON | None, what: str) -> None:
        # A delta, and the anomaly when it stopped a live value's preview.
        events.append(event)
        if stop is not None and not self._numbers.missed:  # a preview of part of a value
            self._anomaly(events, "not JSON", f"{what}: {stop}")

    def _text_done(self, etype: str, data: dict[str, Any], events: list[Event]) -> None:
        which, kind = TEXT_DONES[etype]
        item = self._find_item(data, events, etype)
        part = self._items.part(item, which, kind, data.get(PART_LISTS[which][1]))
        text = as_str(data.get("refusal" if kind == "refusal" else "text"))
        if text is not None:
            self._replace_text(item, part, text, events)
        self._take_logprobs(part, data)
        part.done = True

    @staticmethod
    def _take_logprobs(part: PartState, data: dict[str, Any]) -> None:
        # Rule 3: a final version's logprobs replace the deltas'.
        logprobs = data.get("logprobs")
        if type(logprobs) is list and logprobs:
            part.logprobs = list(freeze(logprobs))

    def _replace_text(
        self, item: ItemState, part: PartState, text: str, events: list[Event]
    ) -> None:
        where = f"output {item.index} part {part.index}"
        if self._differs(part.joined(), text, "final text differs from deltas", where, events):
            part.text.replace(text)
            self._items.restart_preview()

    def _differs(
        self, current: str, final: str, kind: str, where: str, events: list[Event]
    ) -> bool:
        """Rule 3: whether the server's final version replaces ``current``, built by deltas."""
        if final == current:
            return False
        if current and not self._numbers.missed:
            detail = f"{where}: the deltas gave {preview(current)}, the final {preview(final)}"
            self._anomaly(events, kind, detail)
        return True

    def _annotation(self, etype: str, data: dict[str, Any], events: list[Event]) -> None:
        annotation = data.get("annotation")
        if type(annotation) is not dict:
            return
        item = self._find_item(data, events, "response.output_text.annotation.added")
        part = self._items.part(item, "content", "output_text", data.get("content_index"))
        index = as_index(data.get("annotation_index"))
        if index is None:  # after the last
            index = max(part.annotations, default=-1) + 1
        part.annotations[index] = freeze(annotation)

    # -- tools ------------------------------------------------------------------

    def _input_delta(self, etype: str, data: dict[str, Any], events: list[Event]) -> None:
        fragment = data.get("delta")
        if type(fragment) is not str or not fragment:
            return
        kind, _ = _INPUT_STEMS[etype.rpartition(".")[0]]
        item = self._find_item(data, events, etype)
        item.type = item.type or kind
        if item.input_done or item.call is not None:
            after_done, _ = _ANOMALY_KINDS[item.type == "function_call"]
            self._anomaly(events, after_done, preview(fragment))
            return
        index = as_index(data.get("command_index")) or 0
        self._emit(events, *item.add_input(fragment, index), f"output {item.index}")

    def _input_added(self, etype: str, data: dict[str, Any], events: list[Event]) -> None:
        # A shell call's command begins, maybe with its first text.
        command = data.get("command")
        if type(command) is str and command:
            self._input_delta(etype, {**data, "delta": command}, events)

    def _input_done(self, etype: str, data: dict[str, Any], events: list[Event]) -> None:
        kind, key = _INPUT_STEMS[etype.rpartition(".")[0]]
        item = self._find_item(data, events, etype)
        item.type = item.type or kind
        item.name = item.name or as_str(data.get("name"))
        final = as_str(data.get(key))
        if final is not None:
            index = as_index(data.get("command_index")) or 0
            self._replace_input(item, final, index, events)
        if item.type == "shell_call":
            return  # one command of several: the item's end finishes the input
        item.input_done = True
        if item.type == "function_call":
            self._complete_call(item, events, finished=True)

    def _replace_input(
        self, item: ItemState, final: str, index: int | None, events: list[Event]
    ) -> None:
        # ``index`` None: the whole input (an item sent whole).
        if index is None or item.inputs.keys() <= {index}:
            current = item.arguments()
        else:
            current = item.inputs[index].text() if index in item.inputs else ""
        _, differs = _ANOMALY_KINDS[item.type == "function_call"]
        if not self._differs(current, final, differs, f"output {item.index}", events):
            return
        item.replace_input(final, index)
        if item.call is not None:  # rule 4: the later version replaces the completed one
            item.call = self._completed(item, finished=True)

    def _progress(self, etype: str, data: dict[str, Any], events: list[Event]) -> None:
        # Rule 10: response.<item type>.<phase>, or a shell's output streaming.
        stem, _, phase = etype[9:].rpartition(".")
        if stem == "shell_call_output_content":
            stem, phase = "shell_call_output", "output"
        item = self._find_item(data, events, etype)
        item.type = item.type or stem
        if phase in ("completed", "failed"):
            self._running.discard(item.index)
        elif not item.done:
            self._running.add(item.index)
        progress = ToolProgress(
            output_index=item.index, item_id=item.id, item_type=item.type, phase=phase
        )
        events.append(progress)

    def _partial_image(self, etype: str, data: dict[str, Any], events: list[Event]) -> None:
        b64 = data.get("partial_image_b64")
        if type(b64) is not str:
            return
        item = self._find_item(data, events, etype)
        item.type = item.type or "image_generation_call"
        if not item.done:
            self._running.add(item.index)  # rule 10: the tool runs
        index = as_index(data.get("partial_image_index")) or 0
        events.append(PartialImage(output_index=item.index, item_id=item.id, index=index, b64=b64))

    def _audio_delta(self, etype: str, data: dict[str, Any], events: list[Event]) -> None:
        # Rule 11.
        delta = data.get("delta")
        if type(delta) is not str or not delta:
            return
        self._audio = None
        if etype == "response.audio.delta":
            self._audio_data.append(delta)
            events.append(AudioDelta(data=delta))
        else:
            self._transcript.append(delta)
            events.append(AudioTranscriptDelta(text=delta))

    def _complete_call(
        self, item: ItemState, events: list[Event], *, finished: bool | None = None
    ) -> None:
        if item.call is None:
            item.call = self._completed(item, finished)
            events.append(ToolCallCompleted(output_index=item.index, call=item.call))

    def _completed(self, item: ItemState, finished: bool | None) -> FunctionCall:
        return complete_tool_call(item.streaming_call(finished), schemas=self._schemas)

    # -- the response ----------------------------------------------------------

    def _lifecycle(self, etype: str, data: dict[str, Any], events: list[Event]) -> None:
        response = data.get("response")
        if type(response) is not dict:
            return
        self._response = freeze(response)
        self._metadata(response, events)
        status = as_str(response.get("status"))
        if status is not None and status != self._response_status:
            self._response_status = status
            events.append(StatusChanged(status=status))

    def _metadata(self, response: dict[str, Any], events: list[Event]) -> None:
        response_id = as_str(response.get("id"))
        if response_id is not None and self._id not in (None, response_id):
            # llama.cpp streams n > 1 answers as several responses in one body,
            # and a Copilot endpoint sends a new id with every response event.
            detail = f"{preview(response_id)} after {preview(self._id)}; the first is kept"
            self._counted_anomaly(events, "response id changed", detail)
        self._id = self._id or response_id
        self._model = self._model or as_str(response.get("model"))
        created = response.get("created_at")
        if self._created_at is None and type(created) in (int, float):
            self._created_at = created

    def _terminal(self, etype: str, data: dict[str, Any], events: list[Event]) -> None:
        response = data.get("response")
        if type(response) is not dict:
            response = {}
            self._anomaly(events, "terminal event without response", etype)
        else:
            self._response = freeze(response)
        self._metadata(response, events)
        status = as_str(response.get("status"))
        if status is None:
            status = _TERMINAL_TYPES.get(etype, "incomplete")
        elif status != _TERMINAL_TYPES.get(etype, status):  # a polled response has no event
            detail = f"{etype} carries status {preview(status)}; the status is taken"
            self._anomaly(events, "terminal event disagrees with status", detail)
        self._response_status = status
        details = response.get("incomplete_details")
        if type(details) is dict:
            self._incomplete_reason = as_str(details.get("reason"))
        output = response.get("output")
        if type(output) is list and output:
            self._take_output(output, events)
        usage = response.get("usage")
        if type(usage) is dict:
            self._take_usage(usage, events)
        error = response.get("error")
        if error is not None and self._error is None:
            self._error = parse_error_payload(error)
        elif status == "failed" and self._error is None:
            self._error = StreamError("the response failed without an error")
        events += self._finish(by_server=True)

    def _take_output(self, output: list[Any], events: list[Event]) -> None:
        # Rule 3: the terminal output replaces the items, position by position.
        ids = {as_str(raw.get("id")) for raw in output if type(raw) is dict}
        for position, raw in enumerate(output):
            if type(raw) is not dict:
                continue
            raw_id = as_str(raw.get("id"))
            item, displaced = self._items.final(position, raw_id, as_str(raw.get("type")), ids)
            if displaced is not None:
                detail = f"output {position}: {preview(displaced.id)} by {preview(raw_id)}"
                self._anomaly(events, "item replaced", detail)
            self._take_item(item, raw, events, streaming=False)
            self._close_item(item, events)
        unfinished = [item.index for item in self._items if not item.done]
        if unfinished:  # streamed, but neither finished nor in the final output
            self._anomaly(events, "items missing from the output", preview(unfinished))

    def _error_frame(self, etype: str, data: dict[str, Any], events: list[Event]) -> None:
        events += self._server_error(parse_error_event(data))  # rule 5

    def _check_length(self, events: list[Event]) -> None:
        limit, usage = self._max_output_tokens, self._usage
        used = usage.get("output_tokens") if usage is not None else None
        if limit is not None and type(used) is int and used >= limit:
            why = f"used {preview(used)} output tokens of max_output_tokens {limit}"
            detail = f"the response says completed, but {why}: the answer may have been cut"
            self._anomaly(events, "max_output_tokens reached", detail)


#: What each event type does (rule 1: any other type is ignored).
_HANDLERS: dict[str, Callable[[Accumulator, str, dict[str, Any], list[Event]], None]] = {
    **dict.fromkeys(TEXT_DELTAS, Accumulator._text_delta),
    **dict.fromkeys(TEXT_DONES, Accumulator._text_done),
    **dict.fromkeys([f"{stem}.delta" for stem in _INPUT_STEMS], Accumulator._input_delta),
    **dict.fromkeys([f"{stem}.done" for stem in _INPUT_STEMS], Accumulator._input_done),
    "response.shell_call_command.added": Accumulator._input_added,
    "response.shell_call_output_content.delta": Accumulator._progress,
    "response.image_generation_call.partial_image": Accumulator._partial_image,
    "response.audio.delta": Accumulator._audio_delta,
    "response.audio.transcript.delta": Accumulator._audio_delta,
    "response.output_item.added": Accumulator._item_added,
    "response.output_item.done": Accumulator._item_done,
    **dict.fromkeys(PART_EVENTS, Accumulator._part_event),
    "response.output_text.annotation.added": Accumulator._annotation,
    **dict.fromkeys(_LIFECYCLE_TYPES, Accumulator._lifecycle),
    **dict.fromkeys(_TERMINAL_TYPES, Accumulator._terminal),
    "error": Accumulator._error_frame,
}
#: Known, and nothing to take from: what they say arrives elsewhere too.
_IGNORED = frozenset(
    {
        "keepalive",
        "response.keep_alive",  # a proxy's spelling (tests/data/responses/keepalive.sse)
        "response.audio.done",
        "response.audio.transcript.done",
        "response.shell_call_output_content.done",  # the item's output holds it
    }
)


def check_structured(
    schema: OutputSchema, output: Sequence[OutputItem], status: str, incomplete_reason: str | None
) -> tuple[Any, StructuredOutputError | None]:
    """The structured output of an answer the server ended with ``status`` (rule 8).

    ``completed``: the text of its messages, checked against ``schema``;
    ``incomplete``: the same, cut short with the server's reason; any other
    status: the answer did not finish, ``(None, None)``.  ``(None, None)`` also
    when no message has text (a refusal, only calls); cut short when a
    message's status is not ``completed`` (:mod:`chunkwise._core.schemas`, rule 2).
    """
    if status == "completed":
        cut_short = None
    elif status == "incomplete":
        why = f"incomplete_details.reason {incomplete_reason!r}" if incomplete_reason else None
        cut_short = why or "status 'incomplete'"
    else:
        return None, None
    messages = [item for item in output if item.type == "message"]
    if not any(part.type == "output_text" for item in messages for part in item.content):
        return None, None
    unfinished = [i.status for i in messages if i.status not in (None, "completed")]
    if cut_short is None and unfinished:
        cut_short = f"message status {unfinished[0]!r}"
    return schema.check("".join(item.text for item in messages), cut_short=cut_short)

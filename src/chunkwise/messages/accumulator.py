"""Layer 3 for Anthropic Messages: stream events to typed events and a result, sans-IO.

Theory of operation
-------------------
:class:`Accumulator` is the Messages API's form of the skeleton every API
fills in (:class:`~chunkwise._core.accumulator.BaseAccumulator`, whose rules
come first).  It takes the events of a streamed ``POST /v1/messages`` one at
a time, decoded (:meth:`~Accumulator.feed`, e.g. the ``anthropic`` SDK's
``model_dump()``) or as server-sent events (:meth:`~Accumulator.feed_sse`):
``message_start``, then per content block ``content_block_start``,
``content_block_delta``... ``content_block_stop``, then ``message_delta``
and ``message_stop``; ``ping`` anywhere.  One state per block, found by its
``index``; a :class:`~chunkwise.messages.Result` snapshot on demand.

Rules
-----
1. Dispatch is on the data's ``type``; the SSE ``event:`` field is used only
   when ``type`` is missing.  An event type or delta type chunkwise does not
   know is one counted anomaly per type, never fatal (the raw family still
   has it).  ``ping`` is a keepalive: it is no output, so it keeps the idle
   timeout from expiring but not the stall timeout.  Empty data and
   ``[DONE]`` (a proxy's) prove nothing and are ignored.
2. Blocks are found by ``index``.  A delta or stop for a block never started
   creates it, with an anomaly; a second start of a block, or a delta after
   its stop, is an anomaly and changes nothing.  A delta appends whatever
   the block's type: ``text_delta`` to ``text``, ``thinking_delta`` to
   ``thinking``, ``citations_delta`` to ``citations``, ``input_json_delta``
   to the input; ``signature_delta`` sets the signature (the last wins).
   Text sent in ``content_block_start`` is where the deltas start.
3. A ``tool_use`` block's input streams as live JSON (patches on
   :class:`~chunkwise.messages.ToolCallArgumentsDelta`); at its stop it is
   parsed and validated once, against the ``input_schema`` of the request's
   tool of that name (:mod:`chunkwise._core.schemas`); without any fragment,
   the input ``content_block_start`` sent (``{}``) is the input.  At the end
   of a stream an unfinished call is completed with ``finished`` false.  A
   ``server_tool_use`` block's input streams the same way and is parsed into
   the block's ``data`` at its stop, never validated (the server runs it);
   until the next block starts the server runs the tool, and meanwhile
   :attr:`awaiting_output` is false.
4. Usage is ``message_start``'s ``message.usage`` merged with each
   ``message_delta``'s ``usage``: a key sent again with a non-null value
   replaces it (output tokens; input and cache tokens when a server sends
   them at the end).  ``stop_reason`` and ``stop_sequence`` are kept raw.
5. An ``error`` event (``{"type": "error", "error": {"type":
   "overloaded_error", ...}}``) ends the stream ``failed`` with a
   :class:`~chunkwise.StreamError` whose ``type`` is the error's, keeping
   everything received before it.
6. ``message_stop`` ends the stream complete; without it the stream is
   incomplete, whatever arrived.  Once ``message_delta`` gave a
   ``stop_reason`` no more output is awaited (:attr:`awaiting_output`).
7. A structured output (``output_format: {"type": "json_schema", "schema":
   ...}``) is previewed as its text streams and checked once, at
   ``message_stop`` (:mod:`chunkwise._core.schemas`): a ``max_tokens`` stop
   is "cut short", a ``refusal`` stop is neither parsed nor an error.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from contextlib import suppress
from typing import Any, cast

from .._core.accumulator import TypedEventAccumulator
from .._core.events import Event
from .._core.json_patches import freeze
from .._core.partial_json import LiveJSON
from .._core.payloads import dump_json, parse_error_payload, parse_json, preview
from .._core.results import ToolCall
from .._core.schemas import OutputSchema, ToolSchemas, complete_tool_call
from .._core.text import Fragments
from .._core.timings import event_server_timings
from .events import (
    BlockStarted,
    BlockStopped,
    CitationAdded,
    TextDelta,
    ThinkingDelta,
    ToolCallArgumentsDelta,
    ToolCallCompleted,
    ToolCallStarted,
)
from .results import ContentBlock, Result

__all__ = ["Accumulator"]

# Rule 7: stop reasons that say the text is not the whole answer.
_CUT_SHORT = frozenset({"max_tokens", "model_context_window_exceeded", "pause_turn"})
_INPUT_TYPES = frozenset({"tool_use", "server_tool_use"})


class BlockState:
    """One content block while it streams."""

    __slots__ = (
        "call",
        "citations",
        "data",
        "done",
        "index",
        "input",
        "live",
        "signature",
        "text",
        "thinking",
        "type",
    )

    def __init__(self, index: int) -> None:
        self.index: int = index
        self.type: str | None = None
        self.data: dict[str, Any] | None = None
        self.text: Fragments = Fragments()
        self.thinking: Fragments = Fragments()
        self.signature: str | None = None
        self.citations: list[Any] = []
        self.input: Fragments = Fragments()  # rule 3: a tool's input as it streams
        self.live: LiveJSON | None = None
        self.call: ToolCall | None = None  # a tool_use block's, once completed
        self.done: bool = False

    def tool_call(self) -> ToolCall:
        """The block's call as streamed so far (a ``tool_use`` block)."""
        if self.call is not None:
            return self.call
        data = self.data or {}
        arguments = self.input.text() if self.input else (_input_text(data) or "")
        block_id, name = data.get("id"), data.get("name")
        return ToolCall(
            index=self.index,
            id=block_id if type(block_id) is str else None,
            type="tool_use",
            name=name if type(name) is str else None,
            arguments=arguments,
            finished=self.done,
            partial_arguments=None if self.live is None else self.live.value,
        )

    def to_result(self) -> ContentBlock:
        return ContentBlock(
            index=self.index,
            type=self.type,
            text=self.text.text(),
            thinking=self.thinking.text(),
            signature=self.signature,
            citations=tuple(self.citations),
            call=self.tool_call() if self.type == "tool_use" else None,
            data=freeze(self.data),
            done=self.done,
        )


def _input_text(data: Mapping[str, Any]) -> str | None:
    """The compact JSON of an input sent whole in ``content_block_start`` (None: none)."""
    value = data.get("input")
    if value is None or value == {}:
        return None  # {} is the placeholder the deltas replace
    return dump_json(value)


def _tool_schemas(tools: Iterable[Mapping[str, Any]]) -> ToolSchemas:
    # Client tools are {"name", "input_schema"} (type absent or "custom"); the
    # server's own tools (web_search_...) have no schema to check against.
    return ToolSchemas(
        {"type": "function", "name": tool.get("name"), "parameters": tool.get("input_schema")}
        for tool in tools
        if isinstance(tool, Mapping) and tool.get("type", "custom") == "custom"
    )


class Accumulator(TypedEventAccumulator[Result]):
    """Accumulate Anthropic Messages stream events into typed events and a :class:`Result`.

    Args:
        tools: The request's ``tools``: each ``tool_use`` block's input is
            validated against its tool's ``input_schema`` (``jsonschema`` extra).
        output_format: The request's ``output_format``: when it asks for JSON
            (``json_schema``), the text of a complete message is parsed and
            validated into :attr:`Result.parsed` (or :attr:`Result.parse_error`).
    """

    _public_name = "chunkwise.messages.Accumulator"

    def __init__(
        self,
        *,
        tools: Iterable[Mapping[str, Any]] | None = None,
        output_format: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self._schemas = _tool_schemas(tools) if tools is not None else None
        self._output_schema = OutputSchema.from_text_format(output_format)
        self._preview: LiveJSON | None = None if self._output_schema is None else LiveJSON()
        self._blocks: dict[int, BlockState] = {}
        self._message: Any = None
        self._id: str | None = None
        self._model: str | None = None
        self._role: str | None = None
        self._stop_reason: str | None = None
        self._stop_sequence: str | None = None
        self._stopping = False  # rule 6: message_delta gave a stop_reason
        self._tool_running = False  # rule 3: a server tool between its blocks
        self._parsed: Any = None
        self._parse_error: Any = None

    @property
    def awaiting_output(self) -> bool:
        """False once ended, once the stop reason came, and while a server tool runs."""
        return not (self._ended or self._stopping or self._tool_running)

    # -- the skeleton filled in ------------------------------------------------

    def _snapshot(self) -> Result:
        return Result(
            id=self._id,
            model=self._model,
            role=self._role,
            status=self._status,
            reason=self._reason,
            content=tuple(self._blocks[i].to_result() for i in sorted(self._blocks)),
            stop_reason=self._stop_reason,
            stop_sequence=self._stop_sequence,
            usage=self._usage,
            error=self._error,
            anomalies=self._anomalies.snapshot(),
            parsed=self._parsed,
            parse_error=self._parse_error,
            server_timings=self._server_timings,
            partial_parsed=None if self._preview is None else self._preview.value,
            message=self._message,
        )

    def _take(self, unit: Mapping[str, Any], kind: str | None, data: str | None) -> list[Event]:
        event = self._own(unit, data)
        events: list[Event] = []
        etype = event.get("type")
        if type(etype) is not str:
            if kind is None or kind == "message":
                self._counted_anomaly(events, "event without type", preview(event))
                return events
            etype = kind  # rule 1
        self._take_timings(event_server_timings(event, self._server_timings))
        handler = _HANDLERS.get(etype)
        if handler is not None:
            handler(self, event, events)
        elif etype != "ping":
            self._counted_anomaly(events, "unknown event type", preview(etype))  # rule 1
        return events

    def _close(self, events: list[Event], by_server: bool) -> None:
        for index in sorted(self._blocks):
            block = self._blocks[index]
            if block.type == "tool_use" and block.call is None:
                self._complete_call(block, events)  # rule 3: finished is False

    def _settle(self, events: list[Event], by_server: bool) -> bool:
        if not by_server:
            return False  # rule 6
        if self._output_schema is not None and self._stop_reason != "refusal":  # rule 7
            cut = self._stop_reason if self._stop_reason in _CUT_SHORT else None
            text = self._snapshot().text
            self._parsed, self._parse_error = self._output_schema.check(text, cut_short=cut)
        return True

    def _started(self) -> bool:
        return bool(self._blocks) or self._id is not None

    # -- the event types -----------------------------------------------------------

    def _message_start(self, event: dict[str, Any], events: list[Event]) -> None:
        message = event.get("message")
        if type(message) is not dict:
            self._anomaly(events, "invalid message", preview(message))
            return
        if self._message is not None:
            self._anomaly(events, "message_start again", preview(message.get("id")))
            return
        self._message = freeze(message)
        self._id, self._model, self._role = (
            _str(message.get("id")),
            _str(message.get("model")),
            _str(message.get("role")),
        )
        self._merge_usage(message.get("usage"), events)

    def _block_start(self, event: dict[str, Any], events: list[Event]) -> None:
        raw = event.get("content_block")
        index = _index(event.get("index"))
        if index is None or type(raw) is not dict:
            self._anomaly(events, "invalid content_block_start", preview(event))
            return
        block = self._blocks.get(index)
        if block is not None and block.data is not None:
            self._anomaly(events, "block started again", preview(raw), index)
            return
        if block is None:
            block = self._blocks[index] = BlockState(index)
        self._tool_running = False
        block.data = raw
        block.type = _str(raw.get("type"))
        events.append(BlockStarted(index=index, type=block.type))
        for key, into in (("text", block.text), ("thinking", block.thinking)):
            value = raw.get(key)
            if type(value) is str and value:
                into.append(value)  # rule 2: where the deltas start
                if key == "text":
                    self._text(block, value, events)
        block.signature = _str(raw.get("signature"))
        citations = raw.get("citations")
        if type(citations) is list:
            block.citations.extend(freeze(citations))
        if block.type == "tool_use":
            events.append(
                ToolCallStarted(index=index, id=_str(raw.get("id")), name=_str(raw.get("name")))
            )

    def _block_delta(self, event: dict[str, Any], events: list[Event]) -> None:
        block = self._block(event, events, "content_block_delta")
        if block is None:
            return
        delta = event.get("delta")
        if block.done:
            self._anomaly(events, "delta after stop", preview(delta), block.index)
            return
        dtype = delta.get("type") if type(delta) is dict else None
        known = _DELTAS.get(dtype) if type(dtype) is str else None
        if known is None:
            self._counted_anomaly(events, "unknown delta type", preview(dtype), block.index)
            return
        key, into = known
        value = cast("dict[str, Any]", delta).get(key)
        if into == "citations":
            if type(value) is not dict:
                self._anomaly(events, "invalid citation", preview(value), block.index)
                return
            citation = freeze(value)
            block.citations.append(citation)
            events.append(CitationAdded(index=block.index, citation=citation))
        elif type(value) is not str:
            self._anomaly(events, f"non-string {key}", preview(value), block.index)
        elif into == "signature":
            block.signature = value
        elif not value:
            pass  # an empty fragment adds nothing
        elif into == "text":
            block.text.append(value)
            self._text(block, value, events)
        elif into == "thinking":
            block.thinking.append(value)
            events.append(ThinkingDelta(index=block.index, text=value))
        else:
            self._input(block, value, events)

    def _block_stop(self, event: dict[str, Any], events: list[Event]) -> None:
        block = self._block(event, events, "content_block_stop")
        if block is None:
            return
        if block.done:
            self._anomaly(events, "block stopped again", "", block.index)
            return
        block.done = True
        if block.type in _INPUT_TYPES and block.input and block.data is not None:
            # Rule 3: the streamed input, as the SDK's snapshot has it; when it is
            # not JSON the call's error says why and the raw family has the text.
            with suppress(ValueError):
                block.data = {**block.data, "input": parse_json(block.input.text())}
        if block.type == "tool_use":
            self._complete_call(block, events)
        elif block.type == "server_tool_use":
            self._tool_running = True
        events.append(BlockStopped(index=block.index, block=block.to_result()))

    def _message_delta(self, event: dict[str, Any], events: list[Event]) -> None:
        delta = event.get("delta")
        if type(delta) is dict:
            for key in ("stop_reason", "stop_sequence"):
                value = delta.get(key)
                if type(value) is str:
                    setattr(self, f"_{key}", value)
            self._stopping = self._stopping or self._stop_reason is not None
        elif delta is not None:
            self._anomaly(events, "invalid message_delta", preview(delta))
        self._merge_usage(event.get("usage"), events)

    def _message_stop(self, event: dict[str, Any], events: list[Event]) -> None:
        events += self._finish(by_server=True)  # rule 6

    def _error_event(self, event: dict[str, Any], events: list[Event]) -> None:
        events += self._server_error(parse_error_payload(event))  # rule 5

    # -- helpers -------------------------------------------------------------------

    def _block(self, event: dict[str, Any], events: list[Event], what: str) -> BlockState | None:
        index = _index(event.get("index"))
        if index is None:
            self._anomaly(events, f"invalid {what}", preview(event))
            return None
        block = self._blocks.get(index)
        if block is None:  # rule 2
            self._anomaly(events, "event for an unknown block", f"{what}: {preview(event)}", index)
            block = self._blocks[index] = BlockState(index)
        return block

    def _text(self, block: BlockState, text: str, events: list[Event]) -> None:
        if self._preview is None:
            events.append(TextDelta(index=block.index, text=text))
            return
        patches, stop = self._preview.feed(text)  # rule 7
        events.append(TextDelta(index=block.index, text=text, patches=patches))
        if stop is not None:
            self._anomaly(events, "not JSON", f"text: {stop}", block.index)

    def _input(self, block: BlockState, fragment: str, events: list[Event]) -> None:
        block.input.append(fragment)
        if block.live is None:
            block.live = LiveJSON()
        patches, stop = block.live.feed(fragment)
        events.append(ToolCallArgumentsDelta(index=block.index, fragment=fragment, patches=patches))
        if stop is not None:
            self._anomaly(events, "not JSON", f"input: {stop}", block.index)

    def _complete_call(self, block: BlockState, events: list[Event]) -> None:
        block.call = complete_tool_call(block.tool_call(), schemas=self._schemas)
        events.append(ToolCallCompleted(index=block.index, call=block.call))

    def _merge_usage(self, usage: Any, events: list[Event]) -> None:
        # Rule 4: the later non-null values win.
        if usage is None:
            return
        if type(usage) is not dict:
            self._anomaly(events, "invalid usage", preview(usage))
            return
        merged = dict(self._usage or {})
        merged.update((key, value) for key, value in usage.items() if value is not None)
        self._take_usage(freeze(merged), events)


def _str(value: Any) -> str | None:
    return value if type(value) is str else None


def _index(value: Any) -> int | None:
    return value if type(value) is int and value >= 0 else None


# Rule 2: each delta type's key, and what its value goes to.
_DELTAS = {
    "text_delta": ("text", "text"),
    "thinking_delta": ("thinking", "thinking"),
    "signature_delta": ("signature", "signature"),
    "input_json_delta": ("partial_json", "input"),
    "citations_delta": ("citation", "citations"),
}

_HANDLERS = {
    "message_start": Accumulator._message_start,
    "content_block_start": Accumulator._block_start,
    "content_block_delta": Accumulator._block_delta,
    "content_block_stop": Accumulator._block_stop,
    "message_delta": Accumulator._message_delta,
    "message_stop": Accumulator._message_stop,
    "error": Accumulator._error_event,
}

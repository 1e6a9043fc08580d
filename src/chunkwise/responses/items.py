"""The output items of a Responses stream as they build up, and how events find them.

Each item keeps its parts and, for a tool call, its input's fragments (a
function call's arguments, a custom tool's input, code, shell commands...:
:data:`TOOL_INPUTS`); the accumulator (:mod:`chunkwise.responses.accumulator`) decides what goes
in, these classes hold it and turn it into results.  Addressing:

1. An item is found by its ``output_index``; without one (llama.cpp sends
   none), by its ``item_id`` (a function call's ``call_id`` counts too, for
   calls sent without an id of their own); without that, it is the item that
   arrived last.
2. A new item without an index takes the position after the last one.
   The terminal output's item at a position is the item there when the ids
   agree, or when they differ but the types are the same and the output has
   no other place for the old id (a server may send a new id with every
   event); else the item known by that id, moved there, or a new item
   displacing the one there.
3. A part is found by its index (``content_index``, ``summary_index``);
   without one, it is the part last created with (or given) the same type,
   or a new one after the last part.

Every lookup takes constant time: no scan of the items or parts so far.

Live values (:mod:`chunkwise._core.partial_json`): a function or MCP call's
arguments, and the message text when ``text.format`` asks for JSON
(:attr:`ItemTable.preview`), are previewed as they stream.  A final text that
replaces streamed text restarts the preview from the whole new text, so a
result's preview is always that of its own text.
"""

from __future__ import annotations

from collections.abc import Container, Iterator, Mapping
from typing import Any, Literal

from .._core.anomalies import AnomalyLog
from .._core.errors import InvalidJSON
from .._core.events import Event
from .._core.json_patches import Patch
from .._core.partial_json import LiveJSON
from .._core.text import Fragments
from .events import (
    ReasoningDelta,
    ReasoningSummaryDelta,
    RefusalDelta,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolInputDelta,
)
from .results import ContentPart, CustomToolCall, FunctionCall, OutputItem

__all__ = [
    "PART_DELTAS",
    "PART_EVENTS",
    "PART_LISTS",
    "TEXT_DELTAS",
    "TEXT_DONES",
    "TOOL_INPUTS",
    "ItemState",
    "ItemTable",
    "PartState",
    "SequenceNumbers",
    "Which",
    "as_index",
    "as_str",
]

#: Which list of parts an event addresses.
Which = Literal["content", "summary"]
#: Each part list: the type of a part that does not say, and the key of a part's index.
PART_LISTS: dict[Which, tuple[str, str]] = {
    "content": ("output_text", "content_index"),
    "summary": ("summary_text", "summary_index"),
}
#: The events that add or finish a part, and its list.
PART_EVENTS: dict[str, Which] = {
    "response.content_part.added": "content",
    "response.content_part.done": "content",
    "response.reasoning_summary_part.added": "summary",
    "response.reasoning_summary_part.done": "summary",
}
# The events whose text goes to a part, by their type's stem (``.delta``
# appends, ``.done`` replaces): the part's list and type.
_TEXT_EVENTS: dict[str, tuple[Which, str]] = {
    "response.output_text": ("content", "output_text"),
    "response.refusal": ("content", "refusal"),
    "response.reasoning_text": ("content", "reasoning_text"),
    "response.reasoning_summary_text": ("summary", "summary_text"),
}
TEXT_DELTAS = {f"{stem}.delta": part for stem, part in _TEXT_EVENTS.items()}
TEXT_DONES = {f"{stem}.done": part for stem, part in _TEXT_EVENTS.items()}
#: The tool items whose input streams: the stem of its events' types (``.delta``
#: appends, ``.done`` replaces), the key of the ``.done`` event's final input,
#: and where a whole item holds it (a shell call: a list of commands).
TOOL_INPUTS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "function_call": ("response.function_call_arguments", "arguments", ("arguments",)),
    "custom_tool_call": ("response.custom_tool_call_input", "input", ("input",)),
    "mcp_call": ("response.mcp_call_arguments", "arguments", ("arguments",)),
    "code_interpreter_call": ("response.code_interpreter_call_code", "code", ("code",)),
    "shell_call": ("response.shell_call_command", "command", ("action", "commands")),
    "apply_patch_call": ("response.apply_patch_call_operation_diff", "diff", ("operation", "diff")),
}
# The tool items whose input is JSON, previewed live.
_JSON_INPUTS = frozenset({"function_call", "mcp_call"})
# The delta event of each kind of content part.
PART_DELTAS: dict[str, type[TextDelta | RefusalDelta | ReasoningDelta]] = {
    "output_text": TextDelta,
    "refusal": RefusalDelta,
    "reasoning_text": ReasoningDelta,
}


#: Indices stop below 2**53: JSON numbers past it are not exact everywhere, and
#: a bound keeps every message that quotes one short.
INDEX_LIMIT = 1 << 53


def as_index(value: Any) -> int | None:
    """``value`` when it is an index (an int in ``range(INDEX_LIMIT)``, not a bool), else None."""
    return value if type(value) is int and 0 <= value < INDEX_LIMIT else None


def as_str(value: Any) -> str | None:
    """``value`` when it is a string, else None."""
    return value if type(value) is str else None


class PartState:
    """One part's text, annotations (by ``annotation_index``), logprobs and doneness."""

    __slots__ = ("annotations", "done", "index", "logprobs", "text", "type")

    def __init__(self, index: int, kind: str) -> None:
        self.index: int = index
        self.type: str = kind
        self.text: Fragments = Fragments()
        self.annotations: dict[int, Mapping[str, Any]] = {}
        self.logprobs: list[Mapping[str, Any]] = []
        self.done: bool = False

    def joined(self) -> str:
        return self.text.text()

    def to_result(self) -> ContentPart:
        return ContentPart(
            index=self.index,
            type=self.type,
            text=self.joined(),
            annotations=tuple(self.annotations[i] for i in sorted(self.annotations)),
            done=self.done,
            logprobs=tuple(self.logprobs),
        )


class ItemState:
    """One output item: its identity, parts, call fields and doneness."""

    __slots__ = (
        "call",
        "call_id",
        "content",
        "data",
        "done",
        "ends",
        "id",
        "index",
        "input_done",
        "inputs",
        "last",
        "live",
        "name",
        "role",
        "status",
        "summary",
        "type",
    )

    def __init__(self, index: int) -> None:
        self.index: int = index
        self.id: str | None = None
        self.type: str | None = None
        self.status: str | None = None
        self.role: str | None = None
        self.content: dict[int, PartState] = {}
        self.summary: dict[int, PartState] = {}
        # For parts addressed without an index: the position after the last part,
        # and the part last created with (or given) each type.
        self.ends: dict[Which, int] = {"content": 0, "summary": 0}
        self.last: dict[tuple[Which, str], PartState] = {}
        self.name: str | None = None
        self.call_id: str | None = None
        self.inputs: dict[int, Fragments] = {}  # a tool's input, by command index
        self.input_done: bool = False  # the server sent the input's final version
        self.live: LiveJSON | None = None  # the JSON input's preview, from the first fragment
        self.call: FunctionCall | None = None  # set once completed
        self.data: Mapping[str, Any] | None = None
        self.done: bool = False

    def arguments(self) -> str:
        """The input as streamed so far (a shell call's commands one per line)."""
        inputs = self.inputs
        if len(inputs) == 1 and 0 in inputs:
            return inputs[0].text()
        return "\n".join(inputs[i].text() for i in sorted(inputs))

    def add_input(self, fragment: str, index: int = 0) -> tuple[Event, InvalidJSON | None]:
        """Append a fragment of the input: its event, and the error if it stopped the preview."""
        text = self.inputs.get(index)
        if text is None:
            text = self.inputs[index] = Fragments()
        text.append(fragment)
        patches: tuple[Patch, ...] = ()
        stop = None
        if self.type in _JSON_INPUTS:
            if self.live is None:
                self.live = LiveJSON()
            patches, stop = self.live.feed(fragment)
        if self.type == "function_call":
            event: Event = ToolCallArgumentsDelta(
                output_index=self.index, item_id=self.id, fragment=fragment, patches=patches
            )
        else:
            event = ToolInputDelta(
                output_index=self.index,
                item_id=self.id,
                item_type=self.type or "",
                fragment=fragment,
                patches=patches,
                index=index,
            )
        return event, stop

    def replace_input(self, final: str, index: int | None = 0) -> None:
        """The server's final input (input ``index``; None: all of it) replaces the fragments."""
        if index is None:
            self.inputs.clear()
            index = 0
        self.inputs.setdefault(index, Fragments()).replace(final)
        if self.type in _JSON_INPUTS:
            self.live = LiveJSON.of(final)

    def streaming_call(self, finished: bool | None = None) -> FunctionCall:
        """The call as streamed so far, unparsed; ``finished`` by default if the item is done."""
        return FunctionCall(
            index=self.index,
            id=self.id,
            type=self.type,
            name=self.name,
            arguments=self.arguments(),
            finished=self.done if finished is None else finished,
            call_id=self.call_id,
            partial_arguments=None if self.live is None else self.live.value,
        )

    def to_result(self) -> OutputItem:
        call = custom = None
        if self.type == "function_call":
            call = self.call if self.call is not None else self.streaming_call()
        elif self.type == "custom_tool_call":
            custom = CustomToolCall(
                index=self.index,
                id=self.id,
                call_id=self.call_id,
                name=self.name,
                input=self.arguments(),
                finished=self.input_done or self.done,
            )
        return OutputItem(
            index=self.index,
            id=self.id,
            type=self.type,
            status=self.status,
            role=self.role,
            content=tuple(self.content[i].to_result() for i in sorted(self.content)),
            summary=tuple(self.summary[i].to_result() for i in sorted(self.summary)),
            call=call,
            custom_call=custom,
            input=self.arguments() if self.type in TOOL_INPUTS else None,
            data=self.data,
            done=self.done,
        )


class ItemTable:
    """The items of one response, by position, with the addressing rules above."""

    def __init__(self, *, preview: bool = False) -> None:
        #: The message text's preview, when the request asked for JSON.
        self.preview = LiveJSON() if preview else None
        self._items: dict[int, ItemState] = {}
        self._by_id: dict[str, ItemState] = {}
        self._last: ItemState | None = None
        self._end = 0  # the position after the last item

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[ItemState]:
        """The items in output order."""
        return iter([self._items[i] for i in sorted(self._items)])

    def at(self, index: int) -> ItemState | None:
        return self._items.get(index)

    def with_id(self, item_id: str) -> ItemState | None:
        """The item known by ``item_id``, unless another item took its position since."""
        item = self._by_id.get(item_id)
        return item if item is not None and self._items.get(item.index) is item else None

    def find(self, index: int | None, item_id: str | None) -> ItemState | None:
        """Rule 1: the item an event addresses, or None when there is none yet."""
        if index is not None:
            return self._items.get(index)
        if item_id is not None:
            return self.with_id(item_id)
        return self._last

    def new(self, index: int | None, item_id: str | None) -> ItemState:
        """A new item at ``index`` (rule 2 without one)."""
        if index is None:
            index = self._end
        self._end = max(self._end, index + 1)
        item = ItemState(index)
        item.id = item_id
        self._items[index] = item
        if item_id is not None:
            self._by_id[item_id] = item
        self._last = item
        return item

    def final(
        self, position: int, item_id: str | None, kind: str | None, ids: Container[str | None]
    ) -> tuple[ItemState, ItemState | None]:
        """Rule 2: the item the terminal output puts at ``position``, and the one it displaces.

        ``ids`` are the ids of every item of the terminal output.
        """
        item = self._items.get(position)
        if item is not None and (item_id is None or item.id in (None, item_id)):
            return item, None
        found = self.with_id(item_id) if item_id is not None else None
        if found is not None:
            return found, None
        if item is not None and item.type == kind and item.id not in ids:
            return item, None  # the same item with a new id
        return self.new(position, item_id), item

    def identify(self, item: ItemState, item_id: str | None) -> None:
        """``item`` is (also) known by ``item_id`` from now on."""
        if item_id is not None:
            item.id = item_id
            self._by_id[item_id] = item

    def alias(self, item: ItemState, key: str | None) -> None:
        """Events may address ``item`` by ``key`` (a call's ``call_id``: llama.cpp) unless taken."""
        if key is not None:
            self._by_id.setdefault(key, item)

    @staticmethod
    def part(
        item: ItemState, which: Which, kind: str, index: Any, *, retype: bool = False
    ) -> PartState:
        """Rule 3: the part of ``item`` an event addresses, created when new.

        ``retype``: the part takes type ``kind`` (a part the server sent whole).
        """
        parts = item.content if which == "content" else item.summary
        position = as_index(index)
        if position is None:
            last = item.last.get((which, kind))
            if last is not None and last.type == kind:
                return last
            position = item.ends[which]
        part = parts.get(position)
        if part is None:
            part = parts[position] = PartState(position, kind)
            item.ends[which] = max(item.ends[which], position + 1)
        elif not retype or part.type == kind:
            return part
        part.type = kind
        item.last[which, kind] = part
        return part

    def snapshot(self) -> tuple[OutputItem, ...]:
        return tuple(item.to_result() for item in self)

    def append(
        self,
        item: ItemState,
        which: Which,
        part: PartState,
        text: str,
        logprobs: tuple[Mapping[str, Any], ...] = (),
    ) -> tuple[Event, InvalidJSON | None]:
        """Append a delta's text (and an output text's ``logprobs``) to ``part``.

        Returns its event, and the error if it stopped the preview.
        """
        part.text.append(text)
        if which == "summary":
            event: Event = ReasoningSummaryDelta(
                output_index=item.index, summary_index=part.index, item_id=item.id, text=text
            )
            return event, None
        cls = PART_DELTAS.get(part.type, TextDelta)
        if cls is not TextDelta:
            event = cls(
                output_index=item.index, content_index=part.index, item_id=item.id, text=text
            )
            return event, None
        patches: tuple[Patch, ...] = ()
        stop = None
        if self.preview is not None and item.type in (None, "message"):
            patches, stop = self.preview.feed(text)
        if logprobs:
            part.logprobs += logprobs
        return TextDelta(
            output_index=item.index,
            content_index=part.index,
            item_id=item.id,
            text=text,
            patches=patches,
            logprobs=logprobs,
        ), stop

    def restart_preview(self) -> None:
        """A final text replaced streamed text: preview the whole message text afresh."""
        if self.preview is not None:
            texts = (
                part.joined()
                for item in self
                if item.type in (None, "message")
                for _, part in sorted(item.content.items())
                if part.type == "output_text"
            )
            self.preview = LiveJSON.of("".join(texts))


class SequenceNumbers:
    """Where a stream is in the server's ``sequence_number`` order, across connections.

    1. Before any resumption, a number at or below the last one is out of
       order (an anomaly; the event is kept): one connection, one server.
    2. After :meth:`resume` (a new connection, asked for the events after
       :attr:`last`) or :meth:`start_after` (attaching mid-way), a number at
       or below :attr:`last` is a duplicate, dropped and counted; a number
       above ``last + 1`` is a gap (an anomaly): events the stream never saw.
    """

    __slots__ = ("last", "mid_way", "missed", "resumed", "resumes")

    def __init__(self) -> None:
        self.last: int = -1  # the last number taken (-1: none)
        self.resumes: int = 0
        self.resumed: bool = False  # rule 2 applies
        self.mid_way: bool = False  # started after events it never saw
        # Events were never seen (mid-way, a gap, a poll): a final text that
        # differs from the deltas is expected, not an anomaly.
        self.missed: bool = False

    def resume(self) -> None:
        """A new connection goes on from :attr:`last`."""
        self.resumes += 1
        self.resumed = True

    def start_after(self, number: int) -> None:
        """The stream starts after ``number`` (attached with ``starting_after``)."""
        self.last = number
        self.resumed = self.mid_way = self.missed = True

    def take(self, number: object, anomalies: AnomalyLog, events: list[Event]) -> bool:
        """Take an event's ``sequence_number``; True when the event is a duplicate, to drop."""
        index = as_index(number)
        if index is None:
            return False
        last = self.last
        detail = f"sequence_number {index} after {last}"
        if index <= last:
            if self.resumed:
                anomalies.count(events, "duplicate event", detail)
                return True
            anomalies.add(events, "sequence number out of order", detail)
            return False
        self.last = index
        if self.resumed and index > last + 1:
            self.missed = True
            anomalies.add(events, "sequence gap", detail)
        return False

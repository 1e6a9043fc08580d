"""The choices of a chat stream as they build up, and how deltas find their tool calls.

The accumulator (:mod:`chunkwise.chat.accumulator`) decides what goes in;
these classes hold it and turn it into results.  Rules kept here:

1. A tool-call delta with an integer ``index`` finds the call with that index,
   unless both carry ids and they differ (some servers reuse index 0): then
   the call with that id, or none (a new call).  Without an index, a new id
   opens a new call, a repeated id is the same call, and a delta without id
   continues the last call.
2. ``content`` sent as a list of typed parts (Mistral's Magistral models) is
   read in order: a ``text`` part is content, a ``thinking`` part (whose
   ``thinking`` is a list of text parts, or a string) is reasoning; any other
   part is returned as not understood, for the accumulator to report.
"""

from __future__ import annotations

from typing import Any, Literal

from .._core.chunks import frozen_extra
from .._core.errors import StructuredOutputError
from .._core.partial_json import LiveJSON
from .._core.results import ToolCall
from .._core.text import Fragments
from .results import Audio, ChoiceResult

__all__ = [
    "AudioState",
    "ChoiceState",
    "Piece",
    "ToolCallState",
    "read_parts",
]

#: Where a piece of a typed content list goes: the answer or the reasoning.
Piece = tuple[Literal["content", "reasoning"], str]


class ToolCallState:
    """One tool call of one choice, while it streams."""

    __slots__ = ("args", "completed", "finished", "id", "index", "live", "name", "snapshot", "type")

    def __init__(self, index: int) -> None:
        self.index: int = index
        self.id: str | None = None
        self.type: str | None = None
        self.name: str | None = None
        self.args: Fragments = Fragments()
        self.finished: bool = False
        self.completed: bool = False
        self.snapshot: ToolCall | None = None  # set once completed
        self.live: LiveJSON = LiveJSON()  # the arguments' preview

    def to_result(self) -> ToolCall:
        if self.snapshot is not None:
            return self.snapshot
        return ToolCall(
            index=self.index,
            id=self.id,
            type=self.type,
            name=self.name,
            arguments=self.args.text(),
            finished=self.finished,
            partial_arguments=self.live.value,
        )


class AudioState:
    """The spoken answer of one choice, while it streams."""

    __slots__ = ("data", "expires_at", "id", "transcript")

    def __init__(self) -> None:
        self.id: str | None = None
        self.data: Fragments = Fragments()
        self.transcript: Fragments = Fragments()
        self.expires_at: int | None = None

    def to_result(self) -> Audio:
        return Audio(
            id=self.id,
            data=self.data.text(),
            transcript=self.transcript.text(),
            expires_at=self.expires_at,
        )


class ChoiceState:
    """One choice: its text, tool calls, audio, finish and structured output."""

    __slots__ = (
        "audio",
        "by_index",
        "content",
        "extra",
        "finish_reason",
        "finished",
        "function_call",
        "index",
        "live",
        "logprobs",
        "logprobs_shared",
        "parse_error",
        "parsed",
        "reasoning",
        "refusal",
        "role",
        "tools",
    )

    def __init__(self, index: int) -> None:
        self.index: int = index
        self.role: str | None = None
        self.content: Fragments = Fragments()
        # Empty until text arrives: empty strings are never appended.
        self.refusal: Fragments = Fragments()
        self.reasoning: Fragments = Fragments()
        self.tools: list[ToolCallState] = []
        self.by_index: dict[int, ToolCallState] = {}
        self.function_call: ToolCallState | None = None  # the legacy one
        self.audio: AudioState | None = None
        self.extra: dict[str, Any] | None = None  # what chunkwise does not model
        self.finish_reason: str | None = None
        # True once a finish_reason arrived, or [DONE] finished the choice.
        self.finished: bool = False
        self.logprobs: dict[str, Any] | None = None
        # True once a snapshot holds ``logprobs``: the next merge copies it first.
        self.logprobs_shared: bool = False
        # Structured output, checked once at the end (see _structured).
        self.parsed: Any = None
        self.parse_error: StructuredOutputError | None = None
        self.live: LiveJSON | None = None  # its preview, when JSON was asked for

    def find_call(self, index: int | None, call_id: str | None) -> ToolCallState | None:
        """Rule 1: the call a tool-call delta continues, or None for a new call."""
        if index is not None:
            call = self.by_index.get(index)
            if call is None or call_id is None or call.id is None or call.id == call_id:
                return call
            for other in self.tools:
                if other.id == call_id:
                    return other
            return None
        if call_id is None:
            return self.tools[-1] if self.tools else None
        for other in reversed(self.tools):
            if other.id == call_id:
                return other
        return None

    def to_result(self) -> ChoiceResult:
        self.logprobs_shared = True
        return ChoiceResult(
            index=self.index,
            role=self.role,
            content=self.content.text(),
            refusal=self.refusal.text() if self.refusal else None,
            reasoning=self.reasoning.text() if self.reasoning else None,
            tool_calls=tuple(t.to_result() for t in self.tools),
            finish_reason=self.finish_reason,
            finished=self.finished,
            logprobs=self.logprobs,
            parsed=self.parsed,
            parse_error=self.parse_error,
            partial_parsed=None if self.live is None else self.live.value,
            audio=None if self.audio is None else self.audio.to_result(),
            function_call=None if self.function_call is None else self.function_call.to_result(),
            extra=frozen_extra(self.extra),
        )


def read_parts(parts: list[Any]) -> tuple[list[Piece], list[Any]]:
    """Rule 2: the text pieces of a typed content list in order, and the parts not understood."""
    pieces: list[Piece] = []
    unknown: list[Any] = []
    for part in parts:
        kind = part.get("type") if type(part) is dict else None
        if kind == "text" and type(part.get("text")) is str:
            if part["text"]:
                pieces.append(("content", part["text"]))
        elif kind == "thinking":
            thinking = part.get("thinking")
            if type(thinking) is str:
                thinking = [{"type": "text", "text": thinking}]
            if type(thinking) is not list:
                unknown.append(part)
                continue
            for inner in thinking:
                if type(inner) is dict and inner.get("type") == "text":
                    text = inner.get("text")
                    if type(text) is str:
                        if text:
                            pieces.append(("reasoning", text))
                        continue
                unknown.append(inner)
        else:
            unknown.append(part)
    return pieces, unknown

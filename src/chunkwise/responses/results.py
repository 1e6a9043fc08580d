"""Results of a Responses API stream: immutable snapshots of what it delivered so far.

A :class:`Result` holds the *output items* (messages, function calls,
reasoning, hosted tools' calls) in output order, each an :class:`OutputItem`
with its :class:`ContentPart` objects, a function call's with its
:class:`FunctionCall`, a custom tool call's with its :class:`CustomToolCall`;
audio output is the answer's :class:`Audio`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from .._core.errors import ChunkwiseError, StreamError, StructuredOutputError
from .._core.payloads import copy_json
from .._core.results import Anomaly, IncompleteReason, Status, ToolCall, repr_by_alias
from .._core.timings import Timings

__all__ = ["Audio", "ContentPart", "CustomToolCall", "FunctionCall", "OutputItem", "Result"]


@attrs.frozen(kw_only=True)
class ContentPart:
    """One part of an output item: a message's text or refusal, or reasoning text.

    ``index`` is its ``content_index`` (``summary_index`` in a summary), or its
    position when none was sent; ``type`` as sent (``"output_text"``,
    ``"refusal"``, ``"reasoning_text"``, ``"summary_text"``...).  ``text`` is
    the deltas concatenated, replaced by the final text of the part's
    ``.done`` event or finished item, which also set ``done``.
    ``annotations`` are placed by their ``annotation_index``; ``logprobs``
    are the deltas' joined, replaced by a final version's (both read-only).
    """

    index: int
    type: str
    text: str = ""
    annotations: tuple[Mapping[str, Any], ...] = ()
    done: bool = False
    logprobs: tuple[Mapping[str, Any], ...] = ()


@attrs.frozen(kw_only=True)
class FunctionCall(ToolCall):
    """One ``function_call`` output item, as a :class:`~chunkwise.ToolCall`.

    ``index`` is the item's ``output_index``, ``id`` its own (``fc_...``);
    ``finished`` is true once the server finished the call.

    Attributes:
        call_id: The id (``call_...``) a ``function_call_output`` item of the
            next request answers with.
    """

    call_id: str | None = None


@attrs.frozen(kw_only=True)
class CustomToolCall:
    """One ``custom_tool_call`` item: free-form ``input`` for the tool ``name``.

    Nothing validates the input (it follows the tool's grammar, if any);
    run it only when ``finished``: the server sent its input's ``.done`` or
    the whole item.  ``index`` is the item's ``output_index``.
    """

    index: int
    id: str | None = None
    call_id: str | None = None
    name: str | None = None
    input: str = ""
    finished: bool = False


@attrs.frozen(kw_only=True)
class Audio:
    """Audio output: ``data``, the base64 deltas joined; ``transcript``, its text."""

    data: str = ""
    transcript: str = ""


@attrs.frozen(kw_only=True)
class OutputItem:
    """One output item, in the state the stream left it.

    ``index`` is its ``output_index`` (its arrival position when none was
    sent); ``id``, ``type``, ``status`` and a message's ``role`` as last sent.
    ``content`` holds a message's parts (or a reasoning item's text), by
    index, ``summary`` a reasoning item's summary, ``call`` a function call,
    ``custom_call`` a custom tool call.

    Attributes:
        input: What a tool call's input streamed as (:class:`ToolInputDelta`
            and a function call's arguments), replaced by its final version:
            a function call's or MCP call's ``arguments``, a custom call's
            ``input``, a code interpreter's ``code``, a shell call's commands
            (one per line), an ``apply_patch`` diff; None for other items.
        data: The item as the server last sent it whole (added, finished, or
            in the terminal response): every field, including those of item
            types chunkwise does not interpret.
    """

    index: int
    id: str | None = None
    type: str | None = None
    status: str | None = None
    role: str | None = None
    content: tuple[ContentPart, ...] = ()
    summary: tuple[ContentPart, ...] = ()
    call: FunctionCall | None = None
    custom_call: CustomToolCall | None = None
    input: str | None = None
    data: Mapping[str, Any] | None = None
    done: bool = False

    @property
    def text(self) -> str:
        """The ``output_text`` parts of a message, joined (``""`` when none)."""
        return "".join(part.text for part in self.content if part.type == "output_text")

    @property
    def refusal(self) -> str | None:
        """The ``refusal`` parts of a message, joined, or None when there are none."""
        parts = [part.text for part in self.content if part.type == "refusal"]
        return "".join(parts) if parts else None


@attrs.frozen(kw_only=True, repr=False)
class Result:
    """A snapshot of a Responses API stream, readable at any time; it never changes.

    ``status`` is chunkwise's honest view, ``response_status`` the server's own
    word and ``incomplete_reason`` its ``incomplete_details.reason``
    (:doc:`/responses`, "What is honest about status"): a stream that ends
    before its terminal event is never complete.  ``usage`` is the terminal
    response's; ``reason``, ``error`` and ``anomalies`` are as a chat
    result's (:doc:`/streaming`); ``timings`` and ``server_timings``:
    :doc:`/timings`.

    Attributes:
        partial_parsed: When ``text.format`` asks for JSON, the message text as
            far as it has streamed, a read-only live value (:doc:`/live_values`);
            never validated: use :attr:`parsed`.
        resumes: How many times a background response's stream went on over a
            new connection (:doc:`/reliability`): streamed again, or ended from
            a polled response (once, however many polls it took); 0 for one
            read in one go.
        audio: The answer's audio output, or None when it streamed none.
        response: The last response object the server sent (in a lifecycle or
            terminal event), read-only and whole: every field chunkwise does
            not model (``service_tier``, ``moderation``, ``metadata``...).
    """

    id: str | None = None
    model: str | None = None
    created_at: int | float | None = None
    status: Status = "streaming"
    response_status: str | None = None
    incomplete_reason: str | None = None
    reason: IncompleteReason | None = None
    output: tuple[OutputItem, ...] = ()
    usage: Mapping[str, Any] | None = None
    error: ChunkwiseError | None = None
    anomalies: tuple[Anomaly, ...] = ()
    # Given as ``parsed=``; read through the property, which copies (rule 7 of
    # chunkwise._core.accumulator: a result never changes, even if a caller edits a value).
    _parsed: Any = attrs.field(default=None, alias="parsed")
    parse_error: StructuredOutputError | None = None
    # Measurements, not content: two results of the same answer are equal
    # however fast it came (a stream's and a sans-IO parser's, say).
    timings: Timings | None = attrs.field(default=None, eq=False)
    server_timings: Mapping[str, Any] | None = None
    partial_parsed: Any = None
    # How the answer travelled, not what it is: a resumed stream's result
    # equals the same answer read in one go.
    resumes: int = attrs.field(default=0, eq=False)
    audio: Audio | None = None
    response: Mapping[str, Any] | None = None

    __repr__ = repr_by_alias  # parsed=, as given and read

    @property
    def parsed(self) -> Any:
        """The message text parsed and validated, when ``text.format`` asked for JSON.

        None unless the response completed (see :attr:`parse_error`); a new
        copy on each access.
        """
        return copy_json(self._parsed)

    @property
    def output_text(self) -> str:
        """The text of every message item, in output order (``""`` when none)."""
        return "".join(item.text for item in self.output if item.type == "message")

    @property
    def refusal(self) -> str | None:
        """The refusal text of the message items, or None when none refused."""
        parts = [r for item in self.output if (r := item.refusal) is not None]
        return "".join(parts) if parts else None

    @property
    def function_calls(self) -> tuple[FunctionCall, ...]:
        """The function calls, in output order."""
        return tuple(item.call for item in self.output if item.call is not None)

    @property
    def custom_tool_calls(self) -> tuple[CustomToolCall, ...]:
        """The custom tool calls, in output order."""
        return tuple(i.custom_call for i in self.output if i.custom_call is not None)

    @property
    def reasoning(self) -> str | None:
        """The reasoning summaries (or, without any, reasoning text), or None."""
        summary = [p.text for i in self.output for p in i.summary]
        if summary:
            return "\n\n".join(summary)
        text = [p.text for i in self.output if i.type == "reasoning" for p in i.content]
        return "\n\n".join(text) if text else None

    @property
    def server_error(self) -> StreamError | None:
        """The error the server reported, if that is why the stream failed."""
        return self.error if isinstance(self.error, StreamError) else None

"""Results of a Responses API stream: immutable snapshots of what it delivered so far.

A Responses stream is a list of *output items* (messages, function calls,
reasoning, and the hosted tools' calls), each with its position
(``output_index``) and, for messages and reasoning, *parts* holding text.  The
result mirrors that: :class:`Result` holds :class:`OutputItem`
objects in output order, each with its :class:`ContentPart` objects, and a
function call's item holds a :class:`FunctionCall`.  Like a chat result,
nothing here changes once handed out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from .._core.errors import ChunkwiseError, StreamError, StructuredOutputError
from .._core.payloads import copy_json
from .._core.results import Anomaly, IncompleteReason, Status, ToolCall
from .._core.timings import Timings

__all__ = ["ContentPart", "FunctionCall", "OutputItem", "Result"]


@attrs.frozen(kw_only=True)
class ContentPart:
    """One part of an output item: a message's text or refusal, or reasoning text.

    Attributes:
        index: The part's ``content_index`` (``summary_index`` for a reasoning
            summary), or its position when the server sent none.
        type: ``"output_text"``, ``"refusal"``, ``"reasoning_text"``,
            ``"summary_text"``, or whatever the server named it.
        text: The deltas concatenated, or the text of the part's ``.done``
            event (or of the finished item) once that arrived: those replace
            what the deltas built.
        annotations: The part's annotations (citations...), as sent.
        done: True once the server finished the part (a ``.done`` event, or
            the finished item).
    """

    index: int
    type: str
    text: str = ""
    annotations: tuple[Mapping[str, Any], ...] = ()
    done: bool = False


@attrs.frozen(kw_only=True)
class FunctionCall(ToolCall):
    """One ``function_call`` output item: a call the next request answers.

    The fields of :class:`~chunkwise.ToolCall`, where ``index`` is the item's
    ``output_index``, ``id`` the item's own id (``fc_...``, optional),
    ``type`` is ``"function_call"`` and ``finished`` is true once the server
    finished the call (``function_call_arguments.done`` or the finished item).
    :meth:`~chunkwise.ToolCall.parse_arguments` gives the arguments.

    Attributes:
        call_id: The id (``call_...``) a ``function_call_output`` item of the
            next request answers with.
    """

    call_id: str | None = None


@attrs.frozen(kw_only=True)
class OutputItem:
    """One output item, in the state the stream left it.

    Attributes:
        index: The item's ``output_index``, or its position in arrival order
            when the server sent none (llama.cpp).
        id: The item's ``id``, when one was sent.
        type: ``"message"``, ``"function_call"``, ``"reasoning"``,
            ``"web_search_call"``... as sent.
        status: The item's ``status`` as last sent (``"in_progress"``,
            ``"completed"``, ``"incomplete"``), or None.
        role: A message's role (``"assistant"``).
        content: A message's parts (text and refusals), or a reasoning item's
            ``reasoning_text`` parts, by index.
        summary: A reasoning item's summary parts, by index.
        call: The function call, for a ``function_call`` item.
        data: The item as the server last sent it whole (when it was added,
            finished, or in the terminal response): every field, including
            those of item types chunkwise does not interpret.
        done: True once the server finished the item.
    """

    index: int
    id: str | None = None
    type: str | None = None
    status: str | None = None
    role: str | None = None
    content: tuple[ContentPart, ...] = ()
    summary: tuple[ContentPart, ...] = ()
    call: FunctionCall | None = None
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


@attrs.frozen(kw_only=True)
class Result:
    """A snapshot of a Responses API stream, readable at any time.

    ``status`` is chunkwise's honest view: ``"streaming"`` until the terminal
    event, then ``"complete"`` (the server's terminal response says
    ``completed`` and no error arrived), ``"failed"`` (``error`` says why) or
    ``"incomplete"`` (``reason`` says why; ``incomplete_reason`` gives the
    server's own reason when it reported one).  A stream that ends before its
    terminal event is never complete, whatever text arrived.

    Attributes:
        id: The response id (``resp_...``).
        model: The model that answered.
        status: ``"streaming"``, ``"complete"``, ``"incomplete"`` or ``"failed"``.
        response_status: The server's own ``response.status`` as last sent
            (``"completed"``, ``"incomplete"``, ``"failed"``,
            ``"cancelled"``...), or None when none was sent.
        incomplete_reason: The server's ``incomplete_details.reason``
            (``"max_output_tokens"``, ``"content_filter"``...), or None.
        reason: Why the stream is ``incomplete``: the server said so
            (:attr:`IncompleteReason.SERVER_REPORTED`), or the stream stopped
            early (connection lost, idle timeout, cancelled, no terminal event).
        output: The output items, in output order.
        usage: The terminal response's ``usage`` (all keys kept), or None.
        error: The server's error (a :class:`~chunkwise.StreamError`), or the
            protocol error that stopped parsing; on an ``"incomplete"``
            stream, what stopped it from outside the data, if anything did
            (:class:`~chunkwise.ConnectionLost`, :class:`~chunkwise.IdleTimeout`,
            :class:`~chunkwise.StallTimeout`).
        anomalies: Recoverable breaks of the rules, recorded rather than hidden.
        parse_error: Why the text of a completed response is not what its
            schema asked for (the raw text in ``.raw``), or None.
        timings: When each part arrived (:class:`~chunkwise.Timings`), on the
            final result of a stream read by the trio layer; None on
            snapshots taken while streaming and on sans-IO results.
        server_timings: What the server itself reported, raw, by the name it
            used: llama.cpp's ``timings`` object (beside the terminal
            event's ``response``), vLLM's ``metrics``; None when none.
        partial_parsed: When ``text.format`` asks for JSON, the message text
            as far as it has streamed, a read-only live value (see
            :doc:`/live_values`); None before the value starts or when no
            JSON was asked for.  A preview, never validated: use
            :attr:`parsed`.
        resumes: How many times a background response's stream was resumed
            on a new connection after the previous one was lost (see
            :doc:`/reliability`); 0 for a stream read in one go.
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

    @property
    def parsed(self) -> Any:
        """The structured output: the message text parsed and validated.

        When the request's ``text.format`` asked for JSON and the response
        completed, the message text parsed as JSON and validated against the
        schema; otherwise None (see :attr:`parse_error`).  A new copy on each
        access.
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

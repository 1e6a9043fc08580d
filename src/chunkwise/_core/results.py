"""What the APIs' results share: :data:`Status`, :class:`IncompleteReason`, :class:`Anomaly`,
the fields of the chunk APIs' results (:class:`ChunkResult`) and :class:`ToolCall`.

Each API package holds its own result classes in its ``results`` module.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from typing import Any, Generic, Literal, Protocol, TypeVar

import attrs

from .errors import ChunkwiseError, StreamError, ToolArgumentsError, raise_itself
from .json_patches import ReadOnlyDict
from .payloads import copy_json, parse_json
from .timings import Timings

__all__ = [
    "TERMINAL_STATUSES",
    "Anomaly",
    "ChunkResult",
    "IncompleteReason",
    "Status",
    "ToolCall",
    "choices_of",
    "repr_by_alias",
]

Status = Literal["streaming", "complete", "incomplete", "failed"]

#: The statuses a Responses API response ends with (the server's, not a :data:`Status`).
TERMINAL_STATUSES = frozenset({"completed", "incomplete", "failed", "cancelled"})


class IncompleteReason(str, enum.Enum):
    """Why a stream ended ``incomplete``."""

    #: The stream ended before it was over: a chat choice without a
    #: finish_reason and no ``[DONE]``, or a Responses stream without its
    #: terminal event.
    UNFINISHED = "unfinished"
    #: No chunk carried a choice (e.g. ``data: [DONE]`` alone).
    EMPTY_STREAM = "empty stream"
    #: The connection closed or broke before the stream was over.
    CONNECTION_LOST = "connection lost"
    #: No bytes arrived for longer than the idle timeout.
    IDLE_TIMEOUT = "idle timeout"
    #: The caller cancelled the stream.
    CANCELLED = "cancelled"
    #: No output arrived for longer than the stall timeout, though the
    #: connection was alive (keep-alive comments, empty or role-only chunks).
    STALLED = "stalled"
    #: The server itself said the answer is incomplete (a Responses stream's
    #: ``incomplete`` status; its ``incomplete_details.reason`` says why).
    SERVER_REPORTED = "reported by the server"

    def __str__(self) -> str:
        return self.value


@attrs.frozen(kw_only=True)
class Anomaly:
    """A recoverable break of the stream's rules, recorded rather than hidden.

    ``kind`` is a short stable tag (e.g. ``"content after finish"``),
    ``detail`` says what was received, ``choice_index`` where it applies.
    ``count`` is how many times it happened, for the kinds a misbehaving
    server repeats on every event (recorded once, with the first ``detail``).
    """

    kind: str
    detail: str
    choice_index: int | None = None
    count: int = 1


class Indexed(Protocol):
    """A choice of a result: it has an ``index``."""

    @property
    def index(self) -> int: ...


C = TypeVar("C", bound=Indexed)


@attrs.frozen(kw_only=True)
class ChunkResult(Generic[C]):
    """What a chat result and a legacy completion's share: their fields, in order, and methods.

    Each API's ``Result`` is this with its own choice class ``C`` (named in
    its ``choices`` by :func:`choices_of`) and its own shortcut to choice 0.
    """

    id: str | None = None
    model: str | None = None
    created: int | None = None
    system_fingerprint: str | None = None
    choices: tuple[C, ...] = ()
    usage: Mapping[str, Any] | None = None
    error: ChunkwiseError | None = None
    status: Status = "streaming"
    reason: IncompleteReason | None = None
    done_received: bool = False
    anomalies: tuple[Anomaly, ...] = ()
    # Measurements, not content: two results of the same answer are equal
    # however fast it came (a stream's and a sans-IO parser's, say).
    timings: Timings | None = attrs.field(default=None, eq=False)
    server_timings: Mapping[str, Any] | None = None
    #: The chunk fields chunkwise does not model (``service_tier``,
    #: ``moderation``, Azure's ``prompt_filter_results``, Perplexity's
    #: ``citations``...), the last value of each, read-only.
    extra: Mapping[str, Any] = attrs.field(factory=ReadOnlyDict)

    def choice(self, index: int = 0) -> C:
        """The choice with this ``index`` (raises :class:`KeyError` if absent)."""
        for choice in self.choices:
            if choice.index == index:
                return choice
        raise KeyError(index)

    @property
    def server_error(self) -> StreamError | None:
        """The error the server reported, if that is why the stream failed."""
        return self.error if isinstance(self.error, StreamError) else None


Fields = list["attrs.Attribute[Any]"]


def choices_of(choice: str) -> Callable[[type, Fields], Fields]:
    """A field transformer annotating ``choices`` with the subclass's own choice class.

    So that its signature, and the documentation, say ``tuple[ChoiceResult,
    ...]`` rather than the base's ``tuple[C, ...]``.
    """

    def transform(cls: type, fields: Fields) -> Fields:
        own = f"tuple[{choice}, ...]"
        return [f.evolve(type=own) if f.name == "choices" else f for f in fields]

    return transform


def repr_by_alias(self: Any) -> str:
    """An attrs class's repr naming each field as it is given (``parsed=``, not ``_parsed=``).

    For the results that keep a value under a private name and hand out copies
    of it through a property: the repr shows what a reader can use.
    """
    shown = (field for field in attrs.fields(type(self)) if field.repr)
    fields = ", ".join(f"{field.alias}={getattr(self, field.name)!r}" for field in shown)
    return f"{type(self).__qualname__}({fields})"


class _Unset(enum.Enum):
    # An enum member, not object(): copy.deepcopy and pickle keep it the same
    # object, so a copied ToolCall still knows that nothing was cached.
    UNSET = enum.auto()


_UNSET: Any = _Unset.UNSET


@attrs.frozen(kw_only=True)
class ToolCall:
    """One tool call of one choice.

    Attributes:
        index: The call's ``index`` as sent, or its position when the server
            sent none.
        id: The call id, assigned once (``None`` when none was sent).
        type: Usually ``"function"``; ``"function_call"`` for a chat choice's
            legacy ``function_call`` (:attr:`chunkwise.chat.ChoiceResult.function_call`).
        name: The function name, assigned once.
        arguments: The argument fragments concatenated exactly.
        finished: True when the server finished the call: its choice's
            ``finish_reason``, or ``data: [DONE]`` ending a choice that never
            got one; False while streaming or when the stream ended first.
        completed: True once :class:`~chunkwise.chat.ToolCallCompleted` was sent.
        error: Why the arguments cannot be used (invalid JSON, or the
            tool's schema rejects them), once completed.
        validated: True when arguments were checked against a schema and
            passed, False when they failed it (``error`` says how), None when
            no schema was checked.
        validation_skipped: Why the arguments of a completed call that parsed
            were not checked against a schema: ``"jsonschema is not
            installed"`` or ``"no tools were given"``; else None.  So "not
            checked" is never mistaken for "rejected".
        partial_arguments: The arguments as far as they have streamed, a
            read-only live value (see :doc:`/live_values`); a preview, never
            validated: act on :meth:`parse_arguments` only.
    """

    index: int
    id: str | None = None
    type: str | None = None
    name: str | None = None
    arguments: str = ""
    finished: bool = False
    completed: bool = False
    error: ToolArgumentsError | None = None
    validated: bool | None = None
    validation_skipped: str | None = None
    partial_arguments: Any = None
    # Set once when the call completes (tools.complete_tool_call), so
    # parse_arguments() does not parse twice; not part of the public signature.
    _parsed: Any = attrs.field(default=_UNSET, init=False, repr=False, eq=False)

    def parse_arguments(self) -> Any:
        """Return the arguments as parsed JSON (a new value each call), or raise ``error``.

        Raises:
            ToolArgumentsError: the arguments are not valid JSON, or fail the schema.
        """
        if self.error is not None:
            raise_itself(self.error, fresh_traceback=True)
        if self._parsed is not _UNSET:
            return copy_json(self._parsed)
        try:
            return parse_json(self.arguments)
        except ValueError as exc:
            raise ToolArgumentsError(
                f"arguments of tool call {self.name!r} are not valid JSON: {exc}",
                raw=self.arguments,
                tool_name=self.name,
            ) from None

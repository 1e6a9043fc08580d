"""``end(reason, error=...)`` of both chunk accumulators: an outside error counts if incomplete.

The table crosses how the stream turned out (complete, complete by ``[DONE]``,
incomplete, empty, failed by its own error or its own finish_reason) with
whether ``end`` is told an error from outside the data (a lost connection, a
timeout), for chat completions and legacy completions alike: the error is the
result's only when the stream is ``incomplete``, and changes nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import pytest

import chunkwise
from chunkwise import IncompleteReason, StreamCompleted, StreamFailed, StreamIncomplete
from helpers.bodies import choice, chunk, completion_chunk, text_choice
from helpers.reads import terminal

Accumulator = chunkwise.chat.Accumulator | chunkwise.completions.Accumulator


@attrs.frozen
class Api:
    name: str
    new: Callable[[], Accumulator]
    # A chunk of choice 0 with this text, finished with this reason (or not).
    piece: Callable[[str, str | None], dict[str, Any]]


APIS = [
    Api("chat", chunkwise.chat.Accumulator, lambda t, r: chunk(choice(0, r, content=t))),
    Api(
        "completions",
        chunkwise.completions.Accumulator,
        lambda t, r: completion_chunk(text_choice(t, 0, r)),
    ),
]

ERROR = {"error": {"message": "overloaded", "type": "server_error"}}


@attrs.frozen
class Row:
    name: str
    # What is fed, as (kind, data) SSE events or decoded chunks: a function of the API.
    feed: Callable[[Api], Sequence[Mapping[str, Any] | str]]
    status: str
    reason: IncompleteReason | None = None
    # The error the stream has of its own (its type), whatever end() is told.
    own_error: type[chunkwise.ChunkwiseError] | None = None


ROWS = [
    Row("complete", lambda api: [api.piece("a", None), api.piece("b", "stop")], "complete"),
    Row("complete_by_done", lambda api: [api.piece("a", None), "[DONE]"], "complete"),
    Row(
        "incomplete", lambda api: [api.piece("a", None)], "incomplete", IncompleteReason.UNFINISHED
    ),
    Row("empty", lambda api: [], "incomplete", IncompleteReason.EMPTY_STREAM),
    Row(
        "failed_by_error_payload",
        lambda api: [api.piece("a", None), ERROR],
        "failed",
        own_error=chunkwise.StreamError,
    ),
    Row(
        "failed_by_finish_reason",
        lambda api: [api.piece("a", "error")],
        "failed",
        own_error=chunkwise.StreamError,
    ),
    Row(
        "failed_by_invalid_chunk",
        lambda api: [api.piece("a", None), "{not json"],
        "failed",
        own_error=chunkwise.errors.InvalidChunk,
    ),
]

OUTSIDE = [
    None,
    chunkwise.ConnectionLost("the peer closed the connection"),
    chunkwise.IdleTimeout("example.com", 443, 5.0),
    chunkwise.StallTimeout("example.com", 443, 30.0),
]


def run(
    api: Api,
    row: Row,
    reason: IncompleteReason | None,
    error: chunkwise.ChunkwiseError | None,
) -> tuple[list[chunkwise.Event], Any]:
    accumulator = api.new()
    events: list[chunkwise.Event] = []
    for item in row.feed(api):
        if isinstance(item, str):
            events += accumulator.feed_data("", item)
        else:
            events += accumulator.feed(item)
    events += accumulator.end(reason, error=error)
    return events, accumulator.result


@pytest.mark.parametrize("api", APIS, ids=lambda api: api.name)
@pytest.mark.parametrize("row", ROWS, ids=lambda row: row.name)
@pytest.mark.parametrize("error", OUTSIDE, ids=lambda e: type(e).__name__)
@pytest.mark.parametrize("reason", [None, IncompleteReason.CONNECTION_LOST])
def test_end_keeps_an_outside_error_only_when_the_stream_is_incomplete(
    api: Api,
    row: Row,
    error: chunkwise.ChunkwiseError | None,
    reason: IncompleteReason | None,
) -> None:
    events, result = run(api, row, reason, error)
    last = terminal(events)
    assert result.status == row.status
    if row.status == "incomplete":
        assert isinstance(last, StreamIncomplete)
        assert result.error is error
        assert last.result.error is error
        assert result.reason == (reason or row.reason)
    elif row.status == "complete":
        assert isinstance(last, StreamCompleted)
        assert result.error is None
        assert result.reason is None
    else:
        assert isinstance(last, StreamFailed)
        assert type(result.error) is row.own_error
        assert last.error is result.error
    # The rest of the result is what it would be without the outside error.
    _, without = run(api, row, reason, None)
    assert attrs.evolve(result, error=without.error) == without


@pytest.mark.parametrize("api", APIS, ids=lambda api: api.name)
def test_end_with_an_error_after_the_terminal_event_changes_nothing(api: Api) -> None:
    accumulator = api.new()
    accumulator.feed(api.piece("a", None))
    accumulator.end()
    before = accumulator.result
    assert accumulator.end(IncompleteReason.IDLE_TIMEOUT, error=chunkwise.ConnectionLost("x")) == []
    assert accumulator.result == before
    assert before.error is None

"""``end(reason, error=...)``: what stopped a stream from outside the data becomes its error.

Issue 21 asked for :class:`~chunkwise.StallTimeout` as the result's error; every transport
problem that ends a stream early is reported the same way.  The rule: the error is the
result's ``error`` only when the stream turns out ``incomplete`` for want of its end; a
stream that completed, failed for its own reasons, or that the server itself reported
incomplete keeps its own outcome.  The chunk accumulators' table is
``test_end_with_error.py``; here, the Responses accumulator's, and each byte parser
passing the error on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import chunkwise
from chunkwise import IncompleteReason
from helpers.bodies import (
    choice,
    chunk,
    completion_chunk,
    numbered,
    response_object,
    response_sse,
    sse,
    text_choice,
    text_events,
)

Parser = Callable[[], Any]

_CREATED = {"type": "response.created", "response": response_object()}


def _response(*events: dict[str, Any], status: str | None = None) -> bytes:
    tail = (
        []
        if status is None
        else [{"type": f"response.{status}", "response": response_object(status)}]
    )
    return response_sse(*numbered([_CREATED, *events, *tail]))


#: (parser, body, the status it ends with, whether the given error is then the result's error)
CASES: dict[str, tuple[Parser, bytes, str, bool]] = {
    "chat cut": (
        chunkwise.chat.Parser,
        sse(chunk(choice(content="Hi")), done=False),
        "incomplete",
        True,
    ),
    "completions cut": (
        chunkwise.completions.Parser,
        sse(completion_chunk(text_choice("Hi")), done=False),
        "incomplete",
        True,
    ),
    "responses completed": (
        chunkwise.responses.Parser,
        _response(*text_events(0, "msg_1", ["Hi"]), status="completed"),
        "complete",
        False,
    ),
    "responses cut": (
        chunkwise.responses.Parser,
        _response(*text_events(0, "msg_1", ["Hi"])[:3]),
        "incomplete",
        True,
    ),
    "responses empty": (chunkwise.responses.Parser, b"", "incomplete", True),
    # The server's own "incomplete" is its outcome, not something that stopped the stream.
    "responses server incomplete": (
        chunkwise.responses.Parser,
        _response(*text_events(0, "msg_1", ["Hi"]), status="incomplete"),
        "incomplete",
        False,
    ),
    "responses failed": (
        chunkwise.responses.Parser,
        _response(*text_events(0, "msg_1", ["Hi"])[:3], status="failed"),
        "failed",
        False,
    ),
}

STOPPERS = {
    "stall": chunkwise.StallTimeout("127.0.0.1", 9, 5.0),
    "idle": chunkwise.IdleTimeout("127.0.0.1", 9, 60.0),
    "lost": chunkwise.ConnectionLost("the connection was reset"),
}


@pytest.mark.parametrize("stopper", [None, *STOPPERS])
@pytest.mark.parametrize("case", list(CASES))
def test_what_stopped_an_incomplete_stream_is_its_error(case: str, stopper: str | None) -> None:
    make, body, status, kept = CASES[case]
    error = None if stopper is None else STOPPERS[stopper]
    parser = make()
    events = parser.feed(body)
    events += parser.end(IncompleteReason.CONNECTION_LOST, error=error)
    result = parser.result
    assert result.status == status
    (last,) = [e for e in events if isinstance(e, chunkwise.TerminalEvent)]
    assert last.result == result
    if kept:
        assert result.error is error
        assert result.reason in (IncompleteReason.CONNECTION_LOST, IncompleteReason.EMPTY_STREAM)
    elif status == "failed":
        assert isinstance(result.error, chunkwise.StreamError)
    else:
        assert result.error is None


def test_an_error_given_to_an_ended_stream_changes_nothing() -> None:
    parser = chunkwise.chat.Parser()
    parser.feed(sse(chunk(choice(content="Hi")), done=False))
    parser.end()
    before = parser.result
    assert parser.end(error=STOPPERS["stall"]) == []
    assert parser.result is before and before.error is None

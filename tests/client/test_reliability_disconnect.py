"""Disconnect at every byte offset, end to end through a real loopback socket.

For each reference stream the loopback server sends the response head, then
exactly ``k`` body bytes, then cuts the connection -- for every ``k`` from 0
to the body's length, with chunked and with close-delimited framing.  Each run
goes through :func:`chunkwise.chat.open_stream` (with a subscriber) or
:func:`chunkwise.chat.complete`, and must:

* finish within a bound (a generous :func:`trio.fail_after`);
* raise nothing (a cut body is a result, not an exception);
* deliver exactly what the first ``k`` bytes carried: the events and the result
  equal those of a :class:`~chunkwise.chat.Parser` fed the same prefix and
  then ended (with reason ``connection lost`` when the framing shows the cut);
* be ``complete`` only if every choice of the full stream finished before the cut;
* close its socket: the server observes the client's EOF.

The default run sweeps every ``k`` of the text stream (without usage) and every
``STRIDE``-th ``k`` plus the last 40 of the others; ``CHUNKWISE_LONG_TESTS=1`` sweeps
every ``k`` of every stream.  docs/reliability.rst reports the counts.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any, Literal

import attrs
import pytest
import trio

import chunkwise
from chunkwise import AnomalyDetected, Event, HeadReceived, IncompleteReason, Timeouts, chat
from chunkwise.testing import (
    LoopbackServer,
    RecordedRequest,
    ResponseWriter,
    ScriptedResponse,
    open_test_server,
)
from helpers.bodies import choice, chunk, sse, tool

LONG = os.environ.get("CHUNKWISE_LONG_TESTS", "") not in ("", "0")
#: In the default run, streams other than the text one are cut every STRIDE bytes
#: (a prime, so the cut lands at every position within a line over the sweep).
STRIDE = 1 if LONG else 7
#: Seconds one run may take.  Runs take milliseconds; this only catches a hang.
BOUND = 30.0

REQUEST: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
USAGE = {"prompt_tokens": 9, "completion_tokens": 12, "total_tokens": 21}
Framing = Literal["chunked", "close"]


def _usage_chunk() -> dict[str, Any]:
    return {**chunk(), "choices": [], "usage": USAGE}


def text_stream(usage: bool) -> bytes:
    """One choice of text with 2-, 3- and 4-byte UTF-8 characters."""
    chunks = [
        chunk(choice(role="assistant", content="")),
        chunk(choice(content="Hé")),
        chunk(choice(content="llo, wörld")),
        chunk(choice(content=" — 中文")),
        chunk(choice(content=" 😀!")),
        chunk(choice(finish_reason="stop")),
    ]
    return sse(*chunks, *([_usage_chunk()] if usage else []))


def tools_stream(usage: bool) -> bytes:
    """Two parallel tool calls whose argument fragments interleave."""
    chunks = [
        chunk(choice(role="assistant", content=None)),
        chunk(choice(tool_calls=[tool(0, id="call_a", name="get_weather", arguments="")])),
        chunk(choice(tool_calls=[tool(1, id="call_b", name="get_time", arguments="")])),
        chunk(choice(tool_calls=[tool(0, arguments='{"city": ')])),
        chunk(choice(tool_calls=[tool(1, arguments='{"tz": ')])),
        chunk(choice(tool_calls=[tool(0, arguments='"Zürich"}')])),
        chunk(choice(tool_calls=[tool(1, arguments='"CET"}')])),
        chunk(choice(finish_reason="tool_calls")),
    ]
    return sse(*chunks, *([_usage_chunk()] if usage else []))


def two_choices_stream(usage: bool) -> bytes:
    """``n=2``: both choices start first, then interleave and finish differently."""
    chunks = [
        chunk(choice(0, role="assistant", content=""), choice(1, role="assistant", content="")),
        chunk(choice(0, content="Ça")),
        chunk(choice(1, content="Ja")),
        chunk(choice(0, content=" va.")),
        chunk(choice(0, finish_reason="stop")),
        chunk(choice(1, content=", gut ✓")),
        chunk(choice(1, finish_reason="length")),
    ]
    return sse(*chunks, *([_usage_chunk()] if usage else []))


STREAMS = {
    "text": text_stream,
    "tools": tools_stream,
    "two_choices": two_choices_stream,
}
#: Choices in each full stream: a run is complete only if all of them finished.
CHOICES = {"text": 1, "tools": 1, "two_choices": 2}


def offsets(name: str, usage: bool, body: bytes) -> list[int]:
    """The cut offsets swept for a stream: every one, or a stride plus the tail."""
    if (name == "text" and not usage) or STRIDE == 1:
        return list(range(len(body) + 1))
    # The tail carries the finish, usage and [DONE]: always sweep it fully.
    tail = range(max(0, len(body) - 40), len(body) + 1)
    return sorted(set(range(0, len(body) + 1, STRIDE)) | set(tail))


def expectation(body: bytes, k: int, framing: Framing) -> tuple[list[Event], chat.Result]:
    """What a parser makes of the first ``k`` bytes, ended as the client ends it."""
    parser = chat.Parser()
    events = parser.feed(body[:k])
    if not parser.finished:
        # Chunked framing shows the cut (no last chunk): the connection was lost.
        # A close-delimited body just ends.
        reason = IncompleteReason.CONNECTION_LOST if framing == "chunked" else None
        events += parser.end(reason)
    return events, parser.result


def without_transport(result: chat.Result) -> chat.Result:
    """The result minus what only the transport adds: its anomaly, and its error on a cut stream."""
    anomalies = tuple(a for a in result.anomalies if a.kind != "transport error")
    error = None if isinstance(result.error, chunkwise.TransportError) else result.error
    return attrs.evolve(result, anomalies=anomalies, error=error)


def strip_transport(events: list[Event]) -> list[Event]:
    """The events minus what only the transport adds, for comparison with the parser's."""
    out: list[Event] = []
    for event in events:
        if type(event) is HeadReceived:
            continue
        if type(event) is AnomalyDetected and event.anomaly.kind == "transport error":
            continue
        if isinstance(event, chunkwise.TerminalEvent):
            event = attrs.evolve(event, result=without_transport(event.result))
        out.append(event)
    return out


async def run_one(
    server: LoopbackServer, name: str, body: bytes, k: int, framing: Framing, use_complete: bool
) -> chat.Result:
    """One request whose response is cut after ``k`` body bytes; checks every promise."""
    where = f"{name} {framing} k={k}/{len(body)}"
    want_events, want = expectation(body, k, framing)
    endpoint = server.endpoint(timeouts=Timeouts(connect=BOUND, idle=BOUND))
    request = {**REQUEST, "cut": k}  # tells the server's handler where to cut
    events: list[Event] = []
    with trio.fail_after(BOUND):
        if use_complete:
            result = await chunkwise.chat.complete(endpoint, request)
        else:
            async with chunkwise.chat.open_stream(endpoint, request) as stream:
                channel = stream.subscribe()
                async with channel:
                    events = [event async for event in channel]
                result = await stream.result()
        # The socket was closed: the server reads EOF from the client.  Runs are
        # sequential, so this run's connection is the last one accepted.
        connection = server.connections[-1]
        assert connection.requests[0].json()["cut"] == k, where
        await connection.client_closed.wait()

    # Exactly what the bytes before the cut carried, nothing more, nothing less.
    assert without_transport(result) == want, where
    if not use_complete:
        assert type(events[0]) is HeadReceived, where
        assert strip_transport(events) == want_events, where
    # The transport error is recorded exactly when the framing reveals the cut.
    lost = framing == "chunked" and not want.done_received
    kinds = [a.kind for a in result.anomalies]
    assert kinds.count("transport error") == (1 if lost else 0), where
    # And what stopped an incomplete stream is its error; a finished one has none.
    if lost and result.status == "incomplete":
        assert isinstance(result.error, chunkwise.errors.IncompleteBody), where
    elif result.status != "failed":
        assert result.error is None, where
    # Complete exactly when every choice of the full stream finished before the cut.
    all_finished = sum(1 for c in want.choices if c.finish_reason) == CHOICES[name]
    assert result.status == ("complete" if all_finished else "incomplete"), where
    return result


def cases() -> Iterator[Any]:
    for name in STREAMS:
        for usage in (False, True):
            for framing in ("chunked", "close"):
                usage_id = "usage" if usage else "no_usage"
                yield pytest.param(name, usage, framing, id=f"{name}-{usage_id}-{framing}")


@pytest.mark.parametrize(("name", "usage", "framing"), list(cases()))
async def test_disconnect_at_every_byte_offset(name: str, usage: bool, framing: Framing) -> None:
    body = STREAMS[name](usage)
    base = ScriptedResponse(
        body=body,
        framing=framing,
        # Several writes, so cuts fall inside and between chunks of the framing.
        write_sizes=(61, 1, 200, 17),
    )

    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        await writer.play(attrs.evolve(base, disconnect_after=request.json()["cut"]))

    ks = offsets(name, usage, body)
    statuses: list[str] = []
    async with open_test_server(handler) as server:
        # Sequential: on two cores, parallel runs are slower than one after another.
        for k in ks:
            result = await run_one(server, name, body, k, framing, use_complete=k % 2 == 1)
            statuses.append(result.status)
    assert len(server.connections) == len(ks)
    # The whole body gives a complete stream; the very first cut does not.
    assert statuses[-1] == "complete" and statuses[0] == "incomplete"
    if usage:
        assert expectation(body, len(body), framing)[1].usage == USAGE

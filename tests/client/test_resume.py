"""Resuming background Responses (issue 22): a lost connection loses nothing.

Every connection the client opens reaches a :class:`~chunkwise_tools.server.ChatServer`
in memory (``helpers.emulator.memory_network``) whose background runs live in the test's
nursery, in virtual time: cuts, delays, retention and resume windows are exact,
never timed.
"""

from __future__ import annotations

import itertools
import json
import logging
import re
from typing import Any
from urllib.parse import unquote_plus, urlsplit

import attrs
import pytest
import trio
import trio.testing

import chunkwise
from chunkwise import IncompleteReason, responses
from chunkwise.testing import RecordedRequest, ResponseWriter, ScriptedResponse
from helpers.bodies import message_item, numbered, response_object, sse_typed, text_events
from helpers.emulator import memory_network
from helpers.reads import pieces_of

ENDPOINT = chunkwise.Endpoint("http://127.0.0.1:8000/v1")
TERMINAL = (chunkwise.StreamCompleted, chunkwise.StreamIncomplete, chunkwise.StreamFailed)
Read = tuple[chunkwise.responses.Result, list[chunkwise.Event]]


def background(model: str = "tools", **extra: Any) -> dict[str, Any]:
    return {"model": model, "input": "hi", "background": True, **extra}


async def read_all(
    request: dict[str, Any] | None = None,
    endpoint: chunkwise.Endpoint = ENDPOINT,
    **attach: Any,
) -> Read:
    """Stream to the end; the result and what a subscriber from the start received.

    ``request``: a new background answer; else ``attach`` (``response_id`` and
    ``starting_after``) names an existing one.
    """
    opened = (
        chunkwise.responses.open_stream(endpoint, request)
        if request is not None
        else chunkwise.responses.attach(endpoint, **attach)
    )
    async with opened as stream:
        events = [event async for event in stream]
        result = await stream.result()
    return result, events


async def uncut(monkeypatch: pytest.MonkeyPatch, model: str) -> tuple[Read, bytes]:
    """The answer read in one go, and the raw body (chunk framing included) it came in."""
    async with memory_network(monkeypatch) as network:
        read = await read_all(background(model))
    assert network.opened == 1 and read[0].resumes == 0
    return read, bytes(network.streams[0].body)


def kinds(result: chunkwise.responses.Result) -> list[str]:
    return [anomaly.kind for anomaly in result.anomalies]


def check_whole(
    events: list[chunkwise.Event], result: chunkwise.responses.Result, *, polled: bool = False
) -> None:
    """One sequence: one start, exactly one terminal event, last; deltas add up to the text.

    A stream ended from a poll did not see the deltas in between: its anomaly says so.
    """
    assert sum(isinstance(e, chunkwise.HeadReceived) for e in events) == 1
    terminals = [e for e in events if isinstance(e, TERMINAL)]
    assert len(terminals) == 1 and events[-1] is terminals[0]
    assert terminals[0].result == result
    if polled:
        assert "events not seen" in kinds(result)
        return
    text: dict[int, str] = {}
    for event in events:
        if type(event) is responses.TextDelta:
            text[event.output_index] = text.get(event.output_index, "") + event.text
    assert text == {i.index: i.text for i in result.output if i.type == "message" and i.text}


def event_ends(body: bytes) -> list[int]:
    """The body offsets (framing included) just after each server-sent event."""
    return [match.end() for match in re.finditer(rb"\n\n", body)]


# -- automatic resume (part 1) -----------------------------------------------------


@pytest.mark.parametrize("model", ["tools", "reasoning", "text", "mixed"])
async def test_a_cut_anywhere_after_the_first_event_loses_nothing(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch, model: str
) -> None:
    """Every event boundary and a spread of byte offsets: the result is the uncut one."""
    (whole, whole_events), body = await uncut(monkeypatch, model)
    ends = event_ends(body)
    first, last = ends[0], ends[-1]
    offsets = sorted({*ends[:-1], *range(first, last, max(1, (last - first) // 24))})
    for offset in offsets:
        async with memory_network(monkeypatch, cuts=[offset]) as network:
            result, events = await read_all(background(model))
        assert (offset, result) == (offset, whole)
        assert result.resumes == 1 and network.opened == 2, offset
        assert events[1:] == whole_events[1:], offset  # the same sequence, event for event
        check_whole(events, result)


# -- the sweep over one answer with reasoning, parallel calls and text -------------------

#: Who subscribes to each stream of the sweep: every family, each lossless (one
#: with no buffer at all, one with a single slot, so the reader waits on them
#: across the resumption), and a batched subscriber to everything.
SUBSCRIBERS: dict[str, tuple[chunkwise.types.Family | None, dict[str, Any]]] = {
    "all": (None, {}),
    "choice": ("choice", {"buffer_size": 0}),
    "tool_call": ("tool_call", {"buffer_size": 1}),
    "lifecycle": ("lifecycle", {}),
    "batched": (None, {"batched": True}),
}
Subscribed = tuple[chunkwise.responses.Result, dict[str, list[chunkwise.Event]]]


async def read_subscribed(request: dict[str, Any]) -> Subscribed:
    """Stream to the end with :data:`SUBSCRIBERS` reading along; the result and what each got.

    A batched subscriber's batches are flattened: it must add up to the same sequence.
    """
    got: dict[str, list[chunkwise.Event]] = {name: [] for name in SUBSCRIBERS}

    async def drain(name: str, channel: trio.MemoryReceiveChannel[Any]) -> None:
        batched = SUBSCRIBERS[name][1].get("batched", False)
        async with channel:
            async for item in channel:
                got[name].extend(item if batched else (item,))

    async with chunkwise.responses.open_stream(ENDPOINT, request) as stream:
        async with trio.open_nursery() as nursery:
            for name, (family, options) in SUBSCRIBERS.items():
                nursery.start_soon(drain, name, stream.subscribe(family, **options))
        result = await stream.result()
    return result, got


def check_subscribers(whole: Subscribed, cut: Subscribed, what: object) -> None:
    """``cut`` is ``whole``: the result, and each subscriber's sequence, event for event.

    Each sequence ends with its one terminal event; the deltas each family saw
    add up to the result's text, reasoning and arguments.
    """
    result, got = cut
    assert (what, result) == (what, whole[0])
    for name, events in got.items():
        assert (what, name, events) == (what, name, whole[1][name])
        terminals = [e for e in events if isinstance(e, TERMINAL)]
        assert len(terminals) == 1 and events[-1] is terminals[0], (what, name)
        assert terminals[0].result == result, (what, name)
    check_whole(got["all"], result)
    check_whole(got["batched"], result)
    text = {i.index: i.text for i in result.output if i.type == "message"}
    arguments = {c.index: c.arguments for c in result.function_calls}
    assert added_up(got["choice"], responses.TextDelta) == text and text
    assert added_up(got["tool_call"], chunkwise.responses.ToolCallArgumentsDelta) == arguments
    reasoning = added_up(got["all"], chunkwise.responses.ReasoningSummaryDelta)
    assert "".join(reasoning.values()) == result.reasoning and reasoning


def added_up(events: list[chunkwise.Event], kind: type[Any]) -> dict[int, str]:
    """The text of ``kind``'s deltas, joined per output index."""
    joined: dict[int, str] = {}
    for event in events:
        if type(event) is not kind:
            continue
        if isinstance(event, chunkwise.responses.ToolCallArgumentsDelta):
            piece = event.fragment
        elif isinstance(event, (responses.TextDelta, chunkwise.responses.ReasoningSummaryDelta)):
            piece = event.text
        else:
            raise TypeError(f"not a delta of a Responses stream: {kind!r}")
        joined[event.output_index] = joined.get(event.output_index, "") + piece
    return joined


async def test_mixed_answer_cut_anywhere_every_subscriber_gets_the_uncut_sequence(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reasoning, two interleaved calls and escaped multibyte text, cut at every event
    boundary, at a spread of byte offsets, and twice in a row: nothing differs."""
    (_, _), body = await uncut(monkeypatch, "mixed")
    async with memory_network(monkeypatch) as network:
        whole = await read_subscribed(background("mixed"))
    assert network.opened == 1 and whole[0].resumes == 0
    assert [i.type for i in whole[0].output] == [
        "reasoning",
        "function_call",
        "function_call",
        "message",
    ]
    ends = event_ends(body)
    first, last = ends[0], ends[-1]
    singles = sorted({*ends[:-1], *range(first, last, max(1, (last - first) // 24))})
    # A second cut early in the re-stream: inside its first event, and after a few.
    cuts: list[tuple[int, ...]] = [(offset,) for offset in singles]
    cuts += [(offset, again) for offset in singles[::6] for again in (30, 900)]
    for cut in cuts:
        async with memory_network(monkeypatch, cuts=cut) as network:
            read = await read_subscribed(background("mixed"))
        assert (cut, read[0].resumes, network.opened) == (cut, len(cut), len(cut) + 1)
        check_subscribers(whole, read, cut)


def dechunked(body: bytes) -> bytes:
    """The payload of an HTTP/1.1 chunked body (``size CRLF data CRLF``..., ``0 CRLF CRLF``)."""
    payload = bytearray()
    while True:
        line_end = body.index(b"\r\n")
        size = int(body[:line_end].split(b";")[0], 16)
        if size == 0:
            return bytes(payload)
        payload += body[line_end + 2 : line_end + 2 + size]
        assert body[line_end + 2 + size : line_end + 4 + size] == b"\r\n"
        body = body[line_end + 4 + size :]


@pytest.mark.parametrize("read_size", [None, 1, 7, 64])
async def test_mixed_answer_parsed_sans_io_from_the_uncut_body_gives_the_same_result(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch, read_size: int | None
) -> None:
    """The sans-IO parser fed the bytes the client read, whole or in any read size.

    Only what the transport adds differs: the client's ``ResponseStarted``
    (the HTTP head) and its result's ``timings``.
    """
    (whole, whole_events), body = await uncut(monkeypatch, "mixed")
    sse = dechunked(body)
    parser = chunkwise.responses.Parser()
    events: list[chunkwise.Event] = []
    for piece in [sse] if read_size is None else pieces_of(sse, read_size):
        events += parser.feed(piece)
    events += parser.end()
    assert whole.timings is not None
    assert parser.result == attrs.evolve(whole, timings=None)
    assert isinstance(whole_events[0], chunkwise.HeadReceived)
    assert events[:-1] == whole_events[1:-1]
    assert type(events[-1]) is chunkwise.StreamCompleted is type(whole_events[-1])
    assert events[-1].result == parser.result


@pytest.mark.parametrize(
    ("how", "timeouts"),
    [
        ("hang", chunkwise.Timeouts(idle=5.0)),  # an idle timeout
        ("hang", chunkwise.Timeouts(idle=100.0, stall=3.0)),  # a stall timeout
        ("garble", chunkwise.Timeouts()),  # a protocol error in the body framing
    ],
)
async def test_a_silent_or_garbled_connection_is_resumed_too(
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
    how: Any,
    timeouts: chunkwise.Timeouts,
) -> None:
    (whole, whole_events), body = await uncut(monkeypatch, "tools")
    endpoint = chunkwise.Endpoint(ENDPOINT.base_url, timeouts=timeouts)
    cut = event_ends(body)[6] + 3
    async with memory_network(monkeypatch, cuts=[cut], how=how) as network:
        result, events = await read_all(background("tools"), endpoint)
    assert (result, result.resumes, network.opened) == (whole, 1, 2)
    assert events[1:] == whole_events[1:]


async def test_a_cut_inside_the_terminal_event_resumes_and_after_it_does_not(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    (whole, _), body = await uncut(monkeypatch, "text")
    last = event_ends(body)[-1]
    for offset, resumes in [(last - 1, 1), (last, 0), (len(body) - 1, 0)]:
        async with memory_network(monkeypatch, cuts=[offset]):
            result, events = await read_all(background("text"))
        assert (result, result.resumes) == (whole, resumes)
        check_whole(events, result)


async def test_two_cuts_in_a_row(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    (whole, whole_events), body = await uncut(monkeypatch, "tools")
    ends = event_ends(body)
    async with memory_network(monkeypatch, cuts=[ends[3] + 5, 200]) as network:
        result, events = await read_all(background("tools"))
    assert (result, result.resumes, network.opened) == (whole, 2, 3)
    assert events[1:] == whole_events[1:]


async def test_every_connection_cut_after_a_few_events_still_gets_the_whole_answer(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    (whole, whole_events), body = await uncut(monkeypatch, "reasoning")
    async with memory_network(monkeypatch, cut_after_events=4) as network:
        result, events = await read_all(background("reasoning"))
    assert result == whole and events[1:] == whole_events[1:]
    assert result.resumes == network.opened - 1 == -(-len(event_ends(body)) // 4) - 1


async def test_each_resumption_is_logged(
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="chunkwise")
    async with memory_network(monkeypatch, cut_after_events=4):
        result, _ = await read_all(background("tools"))
    logged = [r.getMessage() for r in caplog.records if "resuming response" in r.getMessage()]
    assert len(logged) == result.resumes > 1
    assert all(result.id is not None and result.id in line for line in logged)


async def test_a_cut_before_the_first_event_cannot_be_resumed(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the response id there is nothing to ask for: incomplete, and why."""
    async with memory_network(monkeypatch, cuts=[40]) as network:
        result, events = await read_all(background("text"))
    assert (result.status, result.reason) == ("incomplete", IncompleteReason.CONNECTION_LOST)
    assert "resume failed" in kinds(result) and network.opened == 1
    check_whole(events, result)


async def test_a_stream_that_is_not_background_is_never_resumed(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Cut before its first output, the stream would be sent again (rule 7 of
    # chunkwise._stream): not here, to see that it is not resumed either.
    retries = chunkwise.Retries(before_output=False)
    endpoint = chunkwise.Endpoint(ENDPOINT.base_url, retries=retries)
    async with memory_network(monkeypatch, cuts=[1500]) as network:
        result, events = await read_all({"model": "tools", "input": "hi"}, endpoint)
    assert (result.status, result.reason) == ("incomplete", IncompleteReason.CONNECTION_LOST)
    assert (result.resumes, network.opened) == (0, 1)
    assert "resume failed" not in kinds(result)
    check_whole(events, result)


async def test_resumptions_without_progress_are_bounded_then_the_end_is_polled(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A resumption that brings nothing new is a miss; after max_retries misses, a poll."""
    (whole, _), body = await uncut(monkeypatch, "tools")
    endpoint = chunkwise.Endpoint(ENDPOINT.base_url, retries=chunkwise.Retries(max_retries=2))
    cuts = [event_ends(body)[2], 0, 0, 0]
    async with memory_network(monkeypatch, cuts=cuts) as network:
        result, events = await read_all(background("tools"), endpoint)
    # The first resumption and two misses stream; the third miss polls instead,
    # and the poll that ended it counts as a resumption too.
    assert (result.resumes, network.opened) == (4, 5)
    assert result.output == whole.output and result.status == "complete"
    assert kinds(result) == ["events not seen"]
    check_whole(events, result, polled=True)


# -- refused: polling (part 2) -----------------------------------------------------


async def test_a_refused_re_stream_is_polled_to_the_end(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the resume window (OpenAI's 400): GET /responses/{id} until it is done."""
    (whole, _), body = await uncut(monkeypatch, "tools")
    cut = event_ends(body)[3]
    async with memory_network(monkeypatch, cuts=[cut], delay=1.0, resume_window=2.0) as network:
        result, events = await read_all(background("tools"))
    assert network.opened > 3  # the refused stream, then polls while it runs
    assert result.output == whole.output and result.usage == whole.usage
    # Ended from a poll: one resumption, however many polls it took.
    assert (result.status, result.resumes) == ("complete", 1)
    assert kinds(result) == ["events not seen"]
    check_whole(events, result, polled=True)


async def test_a_server_that_refuses_every_re_stream_is_polled(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    (whole, _), body = await uncut(monkeypatch, "reasoning")
    async with memory_network(monkeypatch, cuts=[event_ends(body)[5]], resume_window=0.0):
        result, events = await read_all(background("reasoning"))
    assert result.output == whole.output and result.status == "complete"
    assert result.reasoning == whole.reasoning
    check_whole(events, result, polled=True)


class AnswersReStreams:
    """A handler answering every re-stream (``GET ...?stream=true``) with ``reply``."""

    def __init__(self, inner: Any, reply: ScriptedResponse) -> None:
        self.inner = inner
        self.reply = reply
        self.re_streams = 0

    async def __call__(self, request: RecordedRequest, writer: ResponseWriter) -> None:
        if request.method == "GET" and "stream=true" in request.target:
            self.re_streams += 1
            await writer.play(self.reply)
        else:
            await self.inner(request, writer)


@pytest.mark.parametrize(
    ("status", "content_type", "polled"),
    [
        (404, "application/json", True),  # no such route: refused
        (405, "application/json", True),
        (200, "application/json", True),  # not an event stream: refused
        (429, "application/json", False),  # retried, then given up: not a refusal
        (503, "application/json", False),
    ],
)
async def test_which_answers_to_a_re_stream_are_refusals_that_poll(
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
    status: int,
    content_type: str,
    polled: bool,
) -> None:
    (whole, _), body = await uncut(monkeypatch, "tools")
    reply = ScriptedResponse(status=status, content_type=content_type, body=b"{}")
    async with memory_network(monkeypatch, cuts=[event_ends(body)[4]]) as network:
        handler = network.handler = AnswersReStreams(network.handler, reply)
        result, events = await read_all(background("tools"))
    if polled:
        assert handler.re_streams == 1
        assert result.output == whole.output and kinds(result) == ["events not seen"]
        check_whole(events, result, polled=True)
    else:
        assert handler.re_streams == 1 + ENDPOINT.retries.max_retries
        assert result.reason is IncompleteReason.CONNECTION_LOST
        assert "resume failed" in kinds(result)
        check_whole(events, result)


class PollsWithRetryAfter:
    """A handler answering the first ``times`` polls "in_progress, Retry-After: 30" at once."""

    def __init__(self, inner: Any, times: int) -> None:
        self.inner = inner
        self.times = times
        self.polled_at: list[float] = []

    async def __call__(self, request: RecordedRequest, writer: ResponseWriter) -> None:
        if request.method == "GET" and "stream=true" not in request.target:
            self.polled_at.append(trio.current_time())
            if len(self.polled_at) <= self.times:
                body = b'{"id": "resp_x", "status": "in_progress"}'
                reply = ScriptedResponse(
                    content_type="application/json", headers={"Retry-After": "30"}, body=body
                )
                await writer.play(reply)
                return
        await self.inner(request, writer)


async def test_polling_waits_what_retry_after_asks(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    (whole, _), body = await uncut(monkeypatch, "text")
    cut = event_ends(body)[4]
    async with memory_network(monkeypatch, cuts=[cut], resume_window=0.0) as network:
        handler = network.handler = PollsWithRetryAfter(network.handler, times=3)
        result, events = await read_all(background("text"))
    gaps = [b - a for a, b in itertools.pairwise(handler.polled_at)]
    assert gaps == pytest.approx([30.0, 30.0, 30.0])
    assert result.output == whole.output and result.status == "complete"
    check_whole(events, result, polled=True)


async def test_a_response_the_server_no_longer_keeps_ends_incomplete_with_why(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the retention: the re-stream and the poll are 404; the stream ends as it was."""
    (_, _), body = await uncut(monkeypatch, "text")
    async with memory_network(monkeypatch, cuts=[event_ends(body)[3]], retention=0.0):
        result, events = await read_all(background("text"))
    assert (result.status, result.reason) == ("incomplete", IncompleteReason.CONNECTION_LOST)
    resume_failed = [a for a in result.anomalies if a.kind == "resume failed"]
    assert len(resume_failed) == 1 and "404" in resume_failed[0].detail
    check_whole(events, result)


async def test_polling_is_paced_and_bounded_by_the_callers_cancel_scope(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run far from done: polling goes on until the caller's deadline, then ends cancelled."""
    events: list[chunkwise.Event] = []
    async with memory_network(monkeypatch, cuts=[3000], delay=100.0, resume_window=0.0) as net:
        with trio.move_on_after(1000):
            async with chunkwise.responses.open_stream(ENDPOINT, background("text")) as stream:
                async for event in stream:
                    events.append(event)
        assert trio.current_time() == pytest.approx(1000, abs=10)
    # Paced by the backoff (at most every max_delay, 8 s, once it got there): no busy loop.
    assert 3 < net.opened < 1000 / 8
    result = stream.snapshot
    assert (result.status, result.reason) == ("incomplete", IncompleteReason.CANCELLED)
    assert sum(isinstance(e, chunkwise.HeadReceived) for e in events) == 1


# -- attach and cancel (part 3) -------------------------------------------------------


async def test_attach_to_a_response_all_of_it_or_after_a_sequence_number(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    (whole, whole_events), _ = await uncut(monkeypatch, "tools")
    async with memory_network(monkeypatch, delay=1.0):
        # Leaving the block early detaches; the run goes on on the server.
        async with chunkwise.responses.open_stream(ENDPOINT, background("tools")) as stream:
            seen = []
            async for event in stream:
                seen.append(event)
                if len(seen) == 8:
                    break
        left = stream.snapshot
        assert left.status == "incomplete" and left.reason is IncompleteReason.CANCELLED
        assert left.id is not None
        again, again_events = await read_all(response_id=left.id)
        after = 3
        rest, rest_events = await read_all(response_id=left.id, starting_after=after)
    assert again == whole and again_events[1:] == whole_events[1:]
    # Mid-way: items it never saw added are expected, not anomalies.
    assert rest.output == whole.output and rest.status == "complete"
    assert rest.anomalies == ()
    check_whole(rest_events, rest)


async def test_a_client_attaches_resumes_and_cancels_on_its_connections(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with memory_network(monkeypatch, delay=1.0) as network:
        async with chunkwise.Client(ENDPOINT) as client:
            async with client.responses.open_stream(background("text")) as stream:
                async for event in stream:
                    if isinstance(event, responses.TextDelta):
                        break
            response_id = stream.snapshot.id
            assert response_id is not None
            cancelled = await client.responses.cancel(response_id)
            assert cancelled["status"] == "cancelled" and cancelled["id"] == response_id
            result, events = await read_all(response_id=response_id)
            with pytest.raises(chunkwise.HTTPStatusError) as refused:
                await chunkwise.responses.cancel(ENDPOINT, "resp_unknown")
    assert refused.value.status_code == 404
    # A cancelled run's stream ends without a terminal event: polled, it ends cancelled.
    assert (result.status, result.response_status) == ("incomplete", "cancelled")
    assert result.reason is IncompleteReason.SERVER_REPORTED
    check_whole(events, result)
    assert network.opened >= 3


@pytest.mark.parametrize(
    ("attach", "error"),
    [
        ({"response_id": ""}, TypeError),
        ({"response_id": 7}, TypeError),
        ({"response_id": "resp_1", "starting_after": -1}, ValueError),
        ({"response_id": "resp_1", "starting_after": 1.5}, ValueError),
        ({"response_id": "resp_1", "starting_after": True}, ValueError),
    ],
)
def test_what_to_attach_to_is_checked_before_anything_is_sent(
    attach: dict[str, Any], error: type[Exception]
) -> None:
    with pytest.raises(error):
        chunkwise.responses.attach(ENDPOINT, **attach)


# -- rules defended before the move (issue 30) ------------------------------------------


class Recorder:
    """A handler passing every request to ``inner``, noting when each came and its target."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.requests: list[tuple[float, str, str]] = []

    async def __call__(self, request: RecordedRequest, writer: ResponseWriter) -> None:
        self.requests.append((trio.current_time(), request.method, request.target))
        await self.inner(request, writer)

    def times(self, kind: str) -> list[float]:
        """When each ``re-stream`` (GET ...?stream=true) or ``poll`` (GET, no stream) came."""
        return [when for when, _, target in self.requests if request_kind(target) == kind]


def request_kind(target: str) -> str:
    """What a request to the Responses routes is: create, re-stream, poll or cancel."""
    if "/responses/" not in target:
        return "create"
    if target.endswith("/cancel"):
        return "cancel"
    return "re-stream" if "stream=true" in target else "poll"


class SilentReStreams(Recorder):
    """Every re-stream is answered with an event-stream head, then nothing, ever."""

    async def __call__(self, request: RecordedRequest, writer: ResponseWriter) -> None:
        if request_kind(request.target) == "re-stream":
            self.requests.append((trio.current_time(), request.method, request.target))
            await writer.start(200)
            await trio.sleep_forever()
        await super().__call__(request, writer)


@pytest.mark.parametrize(
    ("cut_event", "delay", "stall"),
    [
        (2, 0.0, 6.0),  # cut before any output: no stall deadline was armed yet
        (6, 0.0, 6.0),  # mid-answer
        (6, 1.0, 6.0),  # mid-answer, a second after the last output
        (12, 1.0, 2.5),
    ],
)
async def test_a_silent_resumed_connection_ends_after_the_stall_timeout(
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
    cut_event: int,
    delay: float,
    stall: float,
) -> None:
    """Rule 6 of the stream (issue 30, rule 10): the stall timeout is armed afresh on each
    resumed connection, so a resumed stream that stays silent is given up after ``stall``
    seconds, not after the much longer idle timeout."""
    (whole, _), body = await uncut(monkeypatch, "text")
    endpoint = chunkwise.Endpoint(
        ENDPOINT.base_url,
        timeouts=chunkwise.Timeouts(idle=100.0, stall=stall),
        retries=chunkwise.Retries(max_retries=0),  # the first miss polls
    )
    cut = event_ends(body)[cut_event]
    async with memory_network(monkeypatch, cuts=[cut], delay=delay) as network:
        handler = network.handler = SilentReStreams(network.handler)
        result, events = await read_all(background("text"), endpoint)
    [re_stream] = handler.times("re-stream")
    polls = handler.times("poll")
    # Given up on exactly when the stall timeout says, then polled at once (a miss).
    assert polls and polls[0] - re_stream == pytest.approx(stall)
    # Two resumptions: the silent re-stream, and the poll that ended the stream.
    assert result.resumes == 2 and result.output == whole.output
    assert (result.status, kinds(result)) == ("complete", ["events not seen"])
    check_whole(events, result, polled=True)


def progress_then_misses(body: bytes, max_retries: int, rounds: int) -> list[int]:
    """Cuts for ``rounds`` rounds of: a connection bringing two new events, then
    ``max_retries`` connections cut before their first byte (misses); the last is whole."""
    ends = event_ends(body)
    last = 2
    cuts = [ends[last]]
    for _ in range(rounds):
        cuts += [0] * max_retries
        # A re-stream after event ``last`` starts with the next event's chunk: two whole
        # events are the bytes between the end of event ``last`` and that of ``last + 2``.
        cuts.append(ends[last + 2] - ends[last])
        last += 2
    return cuts


@pytest.mark.parametrize("max_retries", [1, 2, 3])
async def test_misses_are_forgiven_by_progress_so_the_stream_keeps_being_resumed(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch, max_retries: int
) -> None:
    """Rule 2 of resuming (issue 30, rule 11): only misses *in a row* count; a resumption
    that brings new events resets them, so ``max_retries`` misses between each bit of
    progress never switch the stream to polling."""
    (whole, whole_events), body = await uncut(monkeypatch, "text")
    endpoint = chunkwise.Endpoint(
        ENDPOINT.base_url, retries=chunkwise.Retries(max_retries=max_retries)
    )
    cuts = progress_then_misses(body, max_retries, rounds=3)
    async with memory_network(monkeypatch, cuts=cuts) as network:
        handler = network.handler = Recorder(network.handler)
        result, events = await read_all(background("text"), endpoint)
    assert handler.times("poll") == []
    assert (result.resumes, network.opened) == (len(cuts), len(cuts) + 1)
    assert result == whole and "events not seen" not in kinds(result)
    assert events[1:] == whole_events[1:]
    check_whole(events, result)


class StatusOfEachPoll(Recorder):
    """Notes the status each poll was answered with (the stored response's, as it stood)."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.statuses: list[str] = []

    async def __call__(self, request: RecordedRequest, writer: ResponseWriter) -> None:
        if request_kind(request.target) == "poll":
            document = self.inner.retained(request.target.split("/")[3])
            self.statuses.append(str(document and document["status"]))
        await super().__call__(request, writer)


@pytest.mark.parametrize(
    ("model", "status"),
    [("error", "failed"), ("length", "incomplete"), ("text", "completed")],
)
async def test_polling_stops_at_the_first_terminal_status_failed_included(
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
    model: str,
    status: str,
) -> None:
    """Rule 3 of resuming (issue 30, rule 12): ``failed`` is as terminal as ``completed``:
    the first poll answered with it is the last, and the stream ends ``failed`` with the
    server's error, not polled on until the caller's deadline."""
    (whole, _), body = await uncut(monkeypatch, model)
    assert whole.response_status == status
    cut = event_ends(body)[5]
    async with memory_network(monkeypatch, cuts=[cut], delay=1.0, resume_window=0.0) as net:
        handler = net.handler = StatusOfEachPoll(net.handler)
        # The caller's deadline, well within the server's retention of the answer.
        with trio.move_on_after(120):
            result, events = await read_all(background(model))
        ended_at = trio.current_time()
    # Polled while it ran (so the poll had to tell the statuses apart), then once more.
    assert handler.statuses[-1] == status and len(handler.statuses) > 1
    assert set(handler.statuses[:-1]) == {"in_progress"}
    assert ended_at == handler.times("poll")[-1]
    assert (result.status, result.response_status) == (whole.status, status)
    assert result.output == whole.output and kinds(result)[-1] == "events not seen"
    # The error is the polled response's own ({code, message}), the stream's message.
    if status == "failed":
        assert whole.error is not None and result.error is not None
        assert (result.error.code, result.error.message) == ("server_error", whole.error.message)
    else:
        assert result.error is None
    check_whole(events, result, polled=True)


class PollsAskingForNoWait(Recorder):
    """Answers every poll before ``until`` "in_progress" with ``headers`` (asking for no
    wait at all); later polls, and any beyond ``cap`` (a busy loop), reach ``inner``."""

    def __init__(self, inner: Any, headers: dict[str, str], until: float, cap: int) -> None:
        super().__init__(inner)
        self.headers = headers
        self.until = until
        self.cap = cap

    async def __call__(self, request: RecordedRequest, writer: ResponseWriter) -> None:
        polling = request_kind(request.target) == "poll" and len(self.times("poll")) < self.cap
        if polling and trio.current_time() < self.until:
            self.requests.append((trio.current_time(), request.method, request.target))
            body = b'{"id": "resp_x", "status": "in_progress"}'
            reply = ScriptedResponse(
                content_type="application/json", headers=self.headers, body=body
            )
            await writer.play(reply)
            return
        await super().__call__(request, writer)


@pytest.mark.parametrize(
    "headers",
    [
        {"Retry-After": "0"},
        {"Retry-After": "0.0"},
        {"retry-after-ms": "0"},
        {"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"},  # a date in the past: 0
    ],
)
async def test_polls_answered_retry_after_zero_are_paced_by_the_backoff(
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
    headers: dict[str, str],
) -> None:
    """Rule 3 of resuming (issue 30, rule 13): a server asking for no wait between polls
    does not make polling a busy loop: the n-th wait is the backoff,
    ``min(initial_delay * 2**n, max_delay)`` shortened by at most 25%."""
    (whole, _), body = await uncut(monkeypatch, "text")
    cut = event_ends(body)[4]
    async with memory_network(monkeypatch, cuts=[cut], resume_window=0.0) as network:
        handler = PollsAskingForNoWait(network.handler, headers, until=60.0, cap=200)
        network.handler = handler
        result, events = await read_all(background("text"))
    polled_at = handler.times("poll")
    retries = ENDPOINT.retries
    gaps = [b - a for a, b in itertools.pairwise(polled_at)]
    assert 5 < len(polled_at) < 20, polled_at
    for n, gap in enumerate(gaps):
        delay = min(retries.initial_delay * 2**n, retries.max_delay)
        assert 0.75 * delay <= gap <= delay, (n, gaps)
    assert result.output == whole.output and result.status == "complete"
    check_whole(events, result, polled=True)


@pytest.mark.parametrize("starting_after", [None, 0, 1, 5, 8])
async def test_attach_asks_for_the_events_after_starting_after_zero_included(
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
    starting_after: int | None,
) -> None:
    """Attaching (issue 30, rule 14): ``starting_after=0`` is a sequence number like any
    other, kept in the URL (0 is falsy), so the server does not send event 0 again and no
    event reaches the stream twice."""
    (whole, whole_events), body = await uncut(monkeypatch, "text")
    async with memory_network(monkeypatch) as network:
        created, _ = await read_all(background("text"))
        handler = network.handler = Recorder(network.handler)
        result, events = await read_all(response_id=created.id, starting_after=starting_after)
    query = "" if starting_after is None else f"&starting_after={starting_after}"
    assert [target for _, _, target in handler.requests] == [
        f"/v1/responses/{created.id}?stream=true{query}"
    ]
    # An event the stream already had would be a "duplicate event" anomaly.
    assert result == whole and result.anomalies == ()
    # The text deltas are the uncut stream's after ``starting_after``, each once.
    numbers = [n for n, event in enumerate(body.split(b"\n\n")) if b"output_text.delta" in event]
    after = -1 if starting_after is None else starting_after
    whole_deltas = [e for e in whole_events if type(e) is responses.TextDelta]
    expected = [e for n, e in zip(numbers, whole_deltas, strict=True) if n > after]
    assert [e for e in events if type(e) is responses.TextDelta] == expected
    terminals = [e for e in events if isinstance(e, TERMINAL)]
    assert len(terminals) == 1 and events[-1] is terminals[0]
    if expected == whole_deltas:
        check_whole(events, result)  # the deltas add up to the text only when all came


@pytest.mark.parametrize("how", ["close", "garble"])
@pytest.mark.parametrize("cut_event", [3, 9, 15])
async def test_the_first_resumption_goes_out_at_once_and_only_misses_wait(
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
    how: Any,
    cut_event: int,
) -> None:
    """Rule 2 of resuming (issue 30, rule 15): the first resumption after a drop is sent
    at once (the connection broke; nothing says the server is slow); a miss waits the
    backoff, ``min(initial_delay * 2**n, max_delay)`` less at most 25%, for the n-th miss."""
    (whole, _), body = await uncut(monkeypatch, "text")
    cuts = [event_ends(body)[cut_event], 0, 0]  # a drop, then two misses
    async with memory_network(monkeypatch, cuts=cuts, how=how) as network:
        handler = network.handler = Recorder(network.handler)
        result, events = await read_all(background("text"))
    assert (result, result.resumes) == (whole, 3)
    # The run is all produced at once (delay 0): the drop is at 0.
    first, second, third = handler.times("re-stream")
    retries = ENDPOINT.retries
    assert first == 0.0
    assert 0.75 * retries.initial_delay <= second - first <= retries.initial_delay
    assert 1.5 * retries.initial_delay <= third - second <= 2 * retries.initial_delay
    check_whole(events, result)


#: A path segment quoted whole: RFC 3986's unreserved characters and percent-escapes.
UNRESERVED_OR_ESCAPED = re.compile(r"(?:[A-Za-z0-9._~-]|%[0-9A-F]{2})+")


class StoredById:
    """A server keeping one background response, ``response_id``, under its own routes.

    Each request's route is noted as a picky server decodes it: its method, the id
    segment (``+`` read as a space, as form decoding does), what follows it, the query
    (a ``#`` starts a fragment); and whether the id segment was quoted whole
    (unreserved characters and ``%XX`` only).  A request for any other id is a 404.
    Streaming it sends its first events, then ends the body early; streaming it again
    is refused (as OpenAI refuses an old one), so it is polled; cancelling it answers
    ``cancelled``.
    """

    def __init__(self, response_id: str) -> None:
        self.response_id = response_id
        self.routes: list[tuple[str, str, str, str, bool]] = []
        first = numbered(
            [
                {"type": "response.created", "response": self.response()},
                *text_events(0, "msg_1", ["Hel", "lo"])[:3],
            ]
        )
        self.last_sequence_number = first[-1]["sequence_number"]
        self.first = ScriptedResponse(body=sse_typed(*first))

    def response(self, status: str = "in_progress", *texts: str) -> dict[str, Any]:
        output = [message_item("msg_1", *texts)] if texts else []
        return response_object(status, output, id=self.response_id, background=True)

    async def __call__(self, request: RecordedRequest, writer: ResponseWriter) -> None:
        target = urlsplit(request.target)
        query = target.query
        segments = target.path.split("/")  # "", "v1", "responses", the id, "cancel" or none
        quoted = UNRESERVED_OR_ESCAPED.fullmatch(segments[3]) is not None
        route = (request.method, unquote_plus(segments[3]), "/".join(segments[4:]), query)
        self.routes.append((*route, quoted))
        if segments[:3] != ["", "v1", "responses"] or route[1] != self.response_id:
            await writer.play(ScriptedResponse(status=404, content_type="application/json"))
        elif route[2] == "cancel":
            await writer.play(json_reply(self.response("cancelled")))
        elif query == "stream=true":
            await writer.play(self.first)
        elif query:
            refusal = {"error": {"message": "This response can no longer be streamed"}}
            await writer.play(json_reply(refusal, status=400))
        else:
            await writer.play(json_reply(self.response("completed", "Hello")))


def json_reply(document: Any, status: int = 200) -> ScriptedResponse:
    return ScriptedResponse(
        status=status, content_type="application/json", body=json.dumps(document).encode()
    )


@pytest.mark.parametrize(
    "response_id",
    [
        "resp/1",
        "resp+1",
        "resp=1",
        "resp?1",
        "resp#1",
        "resp%2F1",  # already looks quoted: sent as %252F, received as itself
        "resp 1",
        "resp_é",
        "a/b+c=d?e#f%g h&starting_after=1",
    ],
)
async def test_a_response_id_reaches_its_own_route_in_every_url_built_from_it(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch, response_id: str
) -> None:
    """Every URL built from a response id quotes it as one path segment (issue 30,
    rule 16): attaching, resuming, polling and cancelling reach ``/responses/{id}``
    for exactly that id, whatever characters it holds."""
    async with memory_network(monkeypatch) as network:
        handler = network.handler = StoredById(response_id)
        async with chunkwise.Client(ENDPOINT) as client:
            async with client.responses.attach(response_id) as stream:
                events = [event async for event in stream]
            result = await stream.result()
            cancelled = await client.responses.cancel(response_id)
        cancelled_again = await chunkwise.responses.cancel(ENDPOINT, response_id)
    after = handler.last_sequence_number
    assert handler.routes == [
        ("GET", response_id, "", "stream=true", True),  # attach
        ("GET", response_id, "", f"stream=true&starting_after={after}", True),  # resume
        ("GET", response_id, "", "", True),  # poll
        ("POST", response_id, "cancel", "", True),  # the client's cancel
        ("POST", response_id, "cancel", "", True),  # chunkwise.responses.cancel
    ]
    assert result.id == response_id and cancelled["id"] == cancelled_again["id"] == response_id
    assert (result.status, result.output[0].text) == ("complete", "Hello")
    check_whole(events, result, polled=True)

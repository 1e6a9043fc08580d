"""Cancellation at every checkpoint.

A :class:`trio.abc.Instrument` counts scheduler steps (every task, every
checkpoint) and, after the ``n``-th one, cancels the caller's cancel scope
around a whole stream with three subscribers.  This is repeated for every ``n``
from 1 to past the natural end of the stream, so the cancellation lands at
every checkpoint of connecting, sending the request, reading the head, reading
and parsing the body, publishing to each subscriber, and closing.

For every ``n``:

* the connection is closed before ``__aexit__`` returns, and the server sees EOF;
* no task started inside the block is left running when the scope exits;
* ``__aexit__`` returns promptly (within a small number of scheduler steps
  after the cancel, and within a wall-clock bound that only catches hangs);
* nothing but :class:`trio.Cancelled` escapes (pytest turns any
  ``ResourceWarning`` into an error, too);
* the stream's snapshot is final: ``complete`` with the whole text, or
  ``incomplete`` (``cancelled``) with a prefix of it -- never "streaming".

The memory-stream run is deterministic in what it checks (trio's scheduler may
reorder a batch, so the step count at which a given point is reached varies a
little; every ``n`` is still a valid test).  A second sweep does the same
against the loopback server over real sockets.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Callable
from typing import Any

import attrs
import pytest
import trio
import trio.lowlevel
import trio.testing

import chunkwise
from chunkwise import Event, IncompleteReason, StreamIncomplete, chat
from chunkwise.testing import ScriptedResponse, open_test_server
from helpers.bodies import choice, chunk, sse
from helpers.servers import TrackedStream, serving

REQUEST: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
PIECES = ["Hé", "llo", ", wö", "rld", " 中文", " 😀"]
TEXT = "".join(PIECES)
BODY = sse(
    chunk(choice(role="assistant", content="")),
    *(chunk(choice(content=piece)) for piece in PIECES),
    chunk(choice(finish_reason="stop")),
    {**chunk(), "choices": [], "usage": {"prompt_tokens": 1, "total_tokens": 2}},
)
#: Wall-clock seconds a run may take: only catches a hang.
BOUND = 30.0
#: Scheduler steps allowed between the cancel and the scope's exit.
PROMPT_STEPS = 400


class CancelAfterSteps(trio.abc.Instrument):
    """Cancels ``scope`` after the ``n``-th task step; tracks tasks spawned meanwhile."""

    def __init__(self, n: float, scope: trio.CancelScope) -> None:
        self.n = n
        self.scope = scope
        self.steps = 0
        self.cancelled_at: int | None = None
        self.live: set[trio.lowlevel.Task] = set()
        self.token = trio.lowlevel.current_trio_token()

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.steps += 1
        if self.steps == self.n:
            # Not scope.cancel() here: cancelling reschedules tasks, which an
            # instrument hook should not do in the middle of a batch.
            self.token.run_sync_soon(self._cancel)

    def _cancel(self) -> None:
        self.cancelled_at = self.steps
        self.scope.cancel()

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        # The loopback server's own tasks outlive a client's stream by design.
        if not task.name.startswith(("chunkwise.testing.", "chunkwise_tools.server.")):
            self.live.add(task)

    def task_exited(self, task: trio.lowlevel.Task) -> None:
        self.live.discard(task)


#: The body in chunks of one event each, so that cancels land between events too.
ONE_EVENT_PER_CHUNK = ScriptedResponse(
    body=BODY, write_sizes=[len(event) + 2 for event in BODY.split(b"\n\n")[:-1]]
)


@attrs.define
class Outcome:
    cancelled: bool
    steps: int
    stream: chat.Stream | None
    received: list[list[Event]]


async def consume(channel: trio.MemoryReceiveChannel[Event], into: list[Event]) -> None:
    async with channel:
        async for event in channel:
            into.append(event)


async def stream_with_three_subscribers(
    n: float,
    open_stream: Callable[[], Any],
    tracked: TrackedStream | None,
) -> Outcome:
    """Run the whole stream in a scope cancelled after ``n`` steps; check what must hold."""
    received: list[list[Event]] = [[], [], []]
    holder: list[chat.Stream] = []
    with trio.CancelScope() as scope:
        instrument = CancelAfterSteps(n, scope)
        trio.lowlevel.add_instrument(instrument)
        try:
            async with open_stream() as stream:
                holder.append(stream)
                # Three subscribers: two consumer tasks in the stream's nursery,
                # one consumed right here in the block.
                stream.start_soon(consume, stream.subscribe(), received[0])
                stream.start_soon(consume, stream.subscribe("choice"), received[1])
                await consume(stream.subscribe("lifecycle"), received[2])
                await stream.result()
        finally:
            trio.lowlevel.remove_instrument(instrument)
            exited_at = instrument.steps
            # Closed before __aexit__ returned, whatever the cancel interrupted.
            if tracked is not None:
                assert tracked.closed, f"n={n}: transport still open"
            # Every task spawned inside the block (reader, consumers) has exited.
            assert not instrument.live, f"n={n}: tasks left: {instrument.live}"
    if instrument.cancelled_at is not None:
        # __aexit__ returned promptly after the cancel.
        assert exited_at - instrument.cancelled_at <= PROMPT_STEPS, n
    return Outcome(
        cancelled=scope.cancelled_caught,
        steps=instrument.steps,
        stream=holder[0] if holder else None,
        received=received,
    )


def check_outcome(outcome: Outcome, n: float) -> None:
    stream = outcome.stream
    if not outcome.cancelled:
        assert stream is not None
        result = stream.snapshot
        assert result.status == "complete", n
        assert result.content == TEXT, n
        for events in outcome.received:
            assert isinstance(events[-1], chunkwise.StreamCompleted), n
        return
    if stream is None:
        return  # cancelled while connecting, sending, or reading the head
    result = stream.snapshot
    # Exactly one terminal state, recorded even though nobody listened.
    assert result.status in ("complete", "incomplete"), (n, result.status)
    if result.status == "incomplete":
        assert result.reason is IncompleteReason.CANCELLED, n
        assert TEXT.startswith(result.content), n
    else:
        assert result.content == TEXT, n
    for events in outcome.received:
        # A subscriber saw at most one terminal event, and only as its last.
        terminals = [e for e in events if isinstance(e, chunkwise.TerminalEvent)]
        assert len(terminals) <= 1 and (not terminals or events[-1] is terminals[0]), n


ENDPOINT = chunkwise.Endpoint("http://chunkwise.invalid/v1", api_key="sk-cancel-test")


async def memory_run(n: float) -> Outcome:
    async with serving(ONE_EVENT_PER_CHUNK) as (client, server):
        tracked = TrackedStream(client)
        with trio.fail_after(BOUND):
            outcome = await stream_with_three_subscribers(
                n,
                lambda: chunkwise.chat.open_stream(ENDPOINT, REQUEST, transport=tracked),
                tracked,
            )
            # The server reads EOF.
            await server.client_closed.wait()
    return outcome


async def test_cancel_at_every_checkpoint_memory_stream() -> None:
    full = await memory_run(math.inf)
    check_outcome(full, math.inf)
    assert not full.cancelled
    # Sweep past the natural end: the scheduler may take a few more steps.
    total = full.steps + 20
    cancelled = 0
    for n in range(1, total + 1):
        outcome = await memory_run(n)
        check_outcome(outcome, n)
        cancelled += outcome.cancelled
    # Most points of the stream were hit, including some mid-body.
    assert cancelled >= full.steps // 2
    gc.collect()  # any leaked resource would warn now (warnings are errors)


@pytest.mark.parametrize("framing", ["chunked", "close"])
async def test_cancel_at_every_checkpoint_loopback(framing: str) -> None:
    script = ScriptedResponse(body=BODY, framing=framing, write_sizes=40)  # type: ignore[arg-type]

    runs = 0
    async with open_test_server(script) as server:
        endpoint = server.endpoint()

        async def run(n: float) -> Outcome:
            with trio.fail_after(BOUND):
                outcome = await stream_with_three_subscribers(
                    n, lambda: chunkwise.chat.open_stream(endpoint, REQUEST), None
                )
                # Every connection accepted so far was closed by the client.
                await server.wait_client_closed()
            return outcome

        full = await run(math.inf)
        check_outcome(full, math.inf)
        for n in range(1, full.steps + 20):
            check_outcome(await run(n), n)
            runs += 1
    # Every run happened: a server that cancelled its own block when a client left
    # mid-response (fixed in chunkwise.testing meanwhile) ended this loop silently.
    assert runs == full.steps + 19
    gc.collect()


async def test_consumer_task_gets_the_terminal_event_when_the_block_is_left_early(
    autojump_clock: trio.testing.MockClock,
) -> None:
    received: list[Event] = []

    async def slow(channel: trio.MemoryReceiveChannel[Event]) -> None:
        async with channel:
            async for event in channel:
                received.append(event)
                await trio.sleep(1)

    async with serving(ONE_EVENT_PER_CHUNK) as (client, server):
        async with chunkwise.chat.open_stream(ENDPOINT, REQUEST, transport=client) as stream:
            stream.start_soon(slow, stream.subscribe(buffer_size=1))
            await trio.sleep(0.5)  # leave while the consumer is behind
        await server.client_closed.wait()
    assert stream.snapshot.reason is IncompleteReason.CANCELLED
    # The block waited for the consumer task to drain its channel, which ends
    # with the terminal event.
    assert isinstance(received[-1], StreamIncomplete)
    assert received[-1].reason is IncompleteReason.CANCELLED

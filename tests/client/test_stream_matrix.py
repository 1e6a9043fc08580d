"""The five promises of the trio layer, in every cell of a matrix.

API x server behaviour x subscriber set-up x way out of the block.  Every cell
runs ``open_chat_stream``, ``open_response_stream`` or ``open_completion_stream``
(one implementation, so all three are held to every promise) over a trio
memory stream served by
``chunkwise.testing.serve_stream``, with virtual time (the autojump clock), so
a hang shows up as ``TooSlowError`` from the ``trio.fail_after`` around the
block, at no real cost.  For each cell:

1. the block is left within the deadline (bounded exit);
2. the client closed its transport before ``__aexit__`` returned, and the
   server observes EOF;
3. every subscriber's events come in order with no gap, end with exactly one
   terminal event and then ``EndOfChannel``; a lossless consumer still running
   at the end gets deltas that add up to the text of the result in its
   terminal event, which is the stream's final snapshot;
4. an exception from the block or from a consumer comes out alone, with its
   own ``__cause__`` and the frame that raised it;
5. every snapshot handed out equals a deep copy taken when it was handed out.

The "resumed" server cuts a background Responses stream in the middle of an
event; the stream goes on over a second connection (rule 6 of ``_stream.py``),
which the promises cover too: both connections are closed, and subscribers see
one sequence.  A chat stream cut the same way is not resumed (it cannot be).

The "retried" servers fail the first attempt before its first output, in each
way that is sent again (rule 7 of ``_stream.py``): the connection lost, a body
that ended without its end, a transient in-stream error, the idle timeout.
The second attempt is the whole answer.  Their connections come from the
network (a given transport is never sent again), every one is closed, and the
backoff (0.75 s to 1 s) is long enough that the ways out after 0.05 s leave
during it.  Beside the five promises: one :class:`~chunkwise.Retrying` reaches
every subscriber that reads its channel, nothing of the failed attempt
does (the deltas add up to the final text), and the result is the second
attempt's.
"""

from __future__ import annotations

import copy
import math
import traceback
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import attrs
import pytest
import trio
import trio.testing

import chunkwise
from chunkwise import (
    Event,
    EventsDropped,
    RawEvent,
    Retrying,
    ServerSentEvent,
    SSEDecoder,
    StreamCompleted,
    StreamFailed,
    StreamIncomplete,
    chat,
    completions,
    messages,
    responses,
)
from chunkwise.testing import RecordedRequest, ResponseWriter, ScriptedResponse, serve_stream
from helpers.bodies import choice, chunk, numbered, sse, sse_typed
from helpers.servers import ResettingStream, TrackedStream, close_delimited, serving

# The stall timeout is on in every cell (it must not change any other outcome);
# the "stalls" server is the one that trips it.
ENDPOINT = chunkwise.Endpoint(
    base_url="http://127.0.0.1:9/v1", api_key="sk-test", timeouts=chunkwise.Timeouts(stall=2.0)
)
REQUEST = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
TERMINAL = (StreamCompleted, StreamIncomplete, StreamFailed)
N_DELTAS = 12
DEADLINE = 60.0  # virtual seconds: far beyond any cell's own timing
LOGPROBS = {"content": [{"token": "x", "logprob": -0.5}]}
USAGE = {"prompt_tokens": 3, "completion_tokens": 12, "total_tokens": 15}


def chat_body(*, done: bool = True, deltas: int = N_DELTAS, finish: bool = True) -> bytes:
    return sse(
        chunk(choice(role="assistant", content="")),
        *[chunk({**choice(content=f"ü{i} "), "logprobs": LOGPROBS}) for i in range(deltas)],
        *([chunk(choice(finish_reason="stop"))] if finish else []),
        done=done,
    )


def completions_body(*, done: bool = True, deltas: int = N_DELTAS, finish: bool = True) -> bytes:
    """The same answer as a legacy completions stream, with legacy logprobs."""
    return sse(
        *[
            {
                "id": "cmpl-1",
                "object": "text_completion",
                "choices": [
                    {
                        "index": 0,
                        "text": f"ü{i} ",
                        "logprobs": {"tokens": [f"ü{i} "], "token_logprobs": [-0.5]},
                        "finish_reason": None,
                    }
                ],
            }
            for i in range(deltas)
        ],
        *(
            [{"id": "cmpl-1", "choices": [{"index": 0, "text": "", "finish_reason": "stop"}]}]
            if finish
            else []
        ),
        done=done,
    )


def responses_body(*, done: bool = True, deltas: int = N_DELTAS, finish: bool = True) -> bytes:
    """The same answer as a Responses stream: ``done`` is the terminal event."""
    return sse_typed(*responses_events(done=done, deltas=deltas, finish=finish))


def responses_events(
    *, done: bool = True, deltas: int = N_DELTAS, finish: bool = True
) -> list[dict[str, Any]]:
    at = {"output_index": 0, "item_id": "msg_1"}
    message = {"id": "msg_1", "type": "message", "role": "assistant", "content": []}
    text = "".join(f"ü{i} " for i in range(deltas))
    final = {**message, "status": "completed", "content": [{"type": "output_text", "text": text}]}
    return [
        {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}},
        {"type": "response.output_item.added", "output_index": 0, "item": message},
        *[
            {"type": "response.output_text.delta", **at, "content_index": 0, "delta": f"ü{i} "}
            for i in range(deltas)
        ],
        *(
            [{"type": "response.output_item.done", "output_index": 0, "item": final}]
            if finish
            else []
        ),
        *(
            [{"type": "response.completed", "response": {"id": "resp_1", "status": "completed"}}]
            if done
            else []
        ),
    ]


def messages_body(*, done: bool = True, deltas: int = N_DELTAS, finish: bool = True) -> bytes:
    """The same answer as an Anthropic Messages stream: ``done`` is ``message_stop``."""
    return sse_typed(*messages_events(done=done, deltas=deltas, finish=finish))


def messages_events(*, done: bool = True, deltas: int = N_DELTAS, finish: bool = True) -> list[Any]:
    message = {"id": "msg_1", "role": "assistant", "content": []}
    text = {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}}
    end = {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": USAGE}
    return [
        {"type": "message_start", "message": message},
        text,
        *[
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": f"ü{i} "},
            }
            for i in range(deltas)
        ],
        *([{"type": "content_block_stop", "index": 0}, end] if finish else []),
        *([{"type": "message_stop"}] if done else []),
    ]


#: A background Responses stream cut inside its 8th event, and what a
#: resumption (``starting_after=6``) is answered with.
_NUMBERED = numbered(responses_events())
RESUMED_FIRST = sse_typed(*_NUMBERED[:7]) + sse_typed(_NUMBERED[7])[:30]
RESUMED_REST = close_delimited(sse_typed(*_NUMBERED[7:]), write_sizes=40, delay=0.01)


# -- server behaviours ---------------------------------------------------------


KEEPALIVES = {
    "chat": b": keep-alive\n\n",
    "responses": sse_typed({"type": "keepalive"}),
    "completions": b": keep-alive\n\n",
    "messages": sse_typed({"type": "ping"}),
}


def stalls(body: Any, keepalive: bytes) -> ScriptedResponse:
    """Three deltas, then only keep-alives (every 0.5 s for 50 s): the stall timeout ends it."""
    start = body(done=False, deltas=3, finish=False)
    return close_delimited(
        start + keepalive * 100, write_sizes=(len(start), *[len(keepalive)] * 100), delay=0.5
    )


#: What follows each API's answer (its finish), 2.4 s apart: longer than the
#: stall timeout (2 s), and all of it within the "result" way's 5 s.
TAILS = {
    "chat": (sse(chunk(usage=USAGE), done=False), b"data: [DONE]\n\n"),
    "completions": (sse(chunk(usage=USAGE), done=False), b"data: [DONE]\n\n"),
    "responses": (KEEPALIVES["responses"], sse_typed(responses_events()[-1])),
    "messages": (KEEPALIVES["messages"], sse_typed(messages_events()[-1])),
}


def slow_tail(body: Any, tail: tuple[bytes, bytes]) -> ScriptedResponse:
    """The answer with its finish, then the rest of the stream 2.4 s a write (issue 32)."""
    answer = body(done=False)
    return close_delimited(
        answer + b"".join(tail), write_sizes=(len(answer), *map(len, tail)), delay=2.4
    )


def tool_events(phase: str, *, first: bool = False, last: bool = False) -> list[dict[str, Any]]:
    """A web search (output 1, after the message) in one phase; added first, ended last."""
    at = {"output_index": 1, "item_id": "ws_1"}
    item = {"id": "ws_1", "type": "web_search_call", "status": "in_progress"}
    return [
        *(
            [{"type": "response.output_item.added", "output_index": 1, "item": item}]
            if first
            else []
        ),
        {"type": f"response.web_search_call.{phase}", **at},
        *([{"type": "response.output_item.done", "output_index": 1, "item": item}] if last else []),
    ]


def slow_tool(body: Any) -> ScriptedResponse:
    """A pause of 2 x 2.4 s after some output: a hosted tool running (Responses) or a
    server stalling mid-answer (chat, completions): the stall timeout (2 s) waits for the
    one and cuts the other (issue 32)."""
    if body is responses_body:
        answer = responses_events(done=False)
        parts = [
            sse_typed(*answer, *tool_events("in_progress", first=True)),
            sse_typed(*tool_events("searching")),
            sse_typed(*tool_events("completed", last=True), responses_events()[-1]),
        ]
    else:
        whole = body()
        cut = 0
        for _ in range(4):  # after three deltas
            cut = whole.index(b"data:", cut + 1)
        parts = [whole[:cut], whole[cut:]]
    return close_delimited(b"".join(parts), write_sizes=tuple(map(len, parts)), delay=2.4)


#: Each API's transient in-stream error (Responses: the error event, then response.failed).
SERVER_ERROR = {"message": "The server had an error", "type": "server_error"}
ERRORS = {
    chat_body: sse({"error": SERVER_ERROR}, done=False),
    completions_body: sse({"error": SERVER_ERROR}, done=False),
    responses_body: sse_typed(
        {"type": "error", "error": SERVER_ERROR},
        {"type": "response.failed", "response": {"status": "failed", "error": SERVER_ERROR}},
    ),
    messages_body: sse_typed(
        {"type": "error", "error": {**SERVER_ERROR, "type": "overloaded_error"}}
    ),
}


def retried(body: Any) -> dict[str, tuple[ScriptedResponse, bool]]:
    """A first attempt failing before its first output, each way that is sent again."""
    before = body(done=False, deltas=0, finish=False)  # chat's role, Responses' item; or nothing
    cut = ScriptedResponse(body=before + body(), disconnect_after=len(before))
    return {
        "retried-cut": (cut, False),
        "retried-ended": (ScriptedResponse(body=before), False),
        "retried-error": (ScriptedResponse(body=before + ERRORS[body]), False),
        "retried-idle": (close_delimited(before), False),  # then silence (then_hang)
    }


def servers(
    body: Any, keepalive: bytes, tail: tuple[bytes, bytes]
) -> dict[str, tuple[ScriptedResponse, bool]]:
    return {
        # name: (response, whether the server's close shows as a reset)
        "fast-done": (close_delimited(body()), False),
        "fast-no-done": (close_delimited(body(done=False)), False),
        # Just fills an unread subscriber's buffer (3) before the body ends.
        "short-no-done": (close_delimited(body(done=False, deltas=2, finish=False)), False),
        "trickle": (close_delimited(body(), write_sizes=40, delay=0.01), False),
        "reset": (close_delimited(body()[:600], write_sizes=40, delay=0.01), True),
        "stalls": (stalls(body, keepalive), False),
        "slow-tail": (slow_tail(body, tail), False),
        "slow-tool": (slow_tool(body), False),
        # Responses: resumed on a second connection; chat: cut, as "reset".
        "resumed": (
            close_delimited(
                RESUMED_FIRST if body is responses_body else body()[:600],
                write_sizes=40,
                delay=0.01,
            ),
            True,
        ),
        **retried(body),
    }


SERVERS = {
    "chat": servers(chat_body, KEEPALIVES["chat"], TAILS["chat"]),
    "responses": servers(responses_body, KEEPALIVES["responses"], TAILS["responses"]),
    "completions": servers(completions_body, KEEPALIVES["completions"], TAILS["completions"]),
    "messages": servers(messages_body, KEEPALIVES["messages"], TAILS["messages"]),
}
AnyStream = chat.Stream | responses.Stream | completions.Stream | messages.Stream
AnyResult = chat.Result | responses.Result | completions.Result | messages.Result
OPEN: dict[str, Callable[..., AbstractAsyncContextManager[AnyStream]]] = {
    "chat": chunkwise.chat.open_stream,
    "responses": chunkwise.responses.open_stream,
    "completions": chunkwise.completions.open_stream,
    "messages": chunkwise.messages.open_stream,
}
REQUESTS: dict[str, dict[str, Any]] = {
    "chat": REQUEST,
    "responses": {"model": "m", "input": "hi"},
    "completions": {"model": "m", "prompt": "hi"},
    "messages": {"model": "m", "max_tokens": 99, "messages": [{"role": "user", "content": "hi"}]},
}


# -- subscriber set-ups ----------------------------------------------------------


@attrs.define
class Sub:
    """One subscription and what its reader saw."""

    kind: str  # "slow" | "batched" | "unread" | "lossy" | "closed" | "raw"
    channel: trio.MemoryReceiveChannel[Any]
    events: list[Event] = attrs.Factory(list)
    ended: bool = False  # EndOfChannel seen by the consumer task
    snapshots: list[tuple[Any, Any]] = attrs.Factory(list)

    @property
    def consumed(self) -> bool:
        return self.kind in ("slow", "batched", "raw")


def subscribe(stream: AnyStream, kind: str) -> Sub:
    if kind == "slow":
        return Sub(kind, stream.subscribe(buffer_size=1))
    if kind == "batched":
        return Sub(kind, stream.subscribe(buffer_size=1, batched=True))
    if kind == "unread":
        return Sub(kind, stream.subscribe(buffer_size=3))
    if kind == "lossy":
        return Sub(kind, stream.subscribe(buffer_size=2, lossy=True))
    if kind == "raw":
        return Sub(kind, stream.subscribe("raw", buffer_size=1))
    assert kind == "closed"
    sub = Sub(kind, stream.subscribe())
    sub.channel.close()
    return sub


async def slow_consumer(stream: AnyStream, sub: Sub) -> None:
    async for item in sub.channel:
        for event in item if sub.kind == "batched" else (item,):
            sub.events.append(event)
            snapshot = stream.snapshot
            sub.snapshots.append((snapshot, copy.deepcopy(snapshot)))
        await trio.sleep(0.005)
    sub.ended = True


SETUPS: dict[str, tuple[str, ...]] = {
    "slow-lossless": ("slow",),
    "batched": ("batched",),
    "unread-lossless": ("unread",),
    "unread-lossy": ("lossy",),
    "closed": ("closed",),
    "raw": ("raw",),
    "several": ("slow", "batched", "unread", "lossy", "closed", "raw"),
}


# -- ways out --------------------------------------------------------------------


def failure() -> ValueError:
    """A ValueError with a cause, raised here so it has a traceback."""
    try:
        try:
            raise KeyError("the cause")
        except KeyError as cause:
            raise ValueError("the failure") from cause
    except ValueError as exc:
        return exc


WAYS = ("result", "at-once", "later", "cancel", "consumer-raises", "block-raises", "deadline")


async def take_way_out(way: str, stream: AnyStream) -> None:
    """The body of the block for ``way`` (the deadline is set outside)."""
    if way == "result":
        # A lossless subscriber nobody reads may hold the stream (that is
        # backpressure); the exit must be bounded either way.
        with trio.move_on_after(5):
            await stream.result()
    elif way == "later":
        await trio.sleep(0.05)
    elif way == "cancel":
        await trio.sleep(0.05)
        stream.cancel()
    elif way == "consumer-raises":

        async def bomb() -> None:
            await trio.sleep(0.05)
            raise failure()

        stream.start_soon(bomb)
        await trio.sleep_forever()
    elif way == "block-raises":
        await trio.sleep(0.05)
        raise failure()
    elif way == "deadline":
        await trio.sleep_forever()
    else:
        assert way == "at-once"


def deltas_text(events: list[Event]) -> dict[int, str]:
    """Per choice (chat, completions) or output item (Responses): what its deltas add up to."""
    text: dict[int, str] = {}
    for event in events:
        if type(event) is chat.TextDelta or type(event) is completions.TextDelta:
            text[event.choice_index] = text.get(event.choice_index, "") + event.text
        elif type(event) is responses.TextDelta:
            text[event.output_index] = text.get(event.output_index, "") + event.text
        elif type(event) is messages.TextDelta:
            text[event.index] = text.get(event.index, "") + event.text
    return text


def result_text(result: AnyResult) -> dict[int, str]:
    if isinstance(result, chunkwise.responses.Result):
        return {item.index: item.text for item in result.output if item.text}
    if isinstance(result, chunkwise.completions.Result):
        return {c.index: c.text for c in result.choices if c.text}
    if isinstance(result, chunkwise.messages.Result):
        return {b.index: b.text for b in result.content if b.text}
    return {c.index: c.content for c in result.choices if c.content}


#: The "retried" cells' endpoint: the backoff outlasts the ways out's 0.05 s, the idle timeout not.
RETRYING = attrs.evolve(
    ENDPOINT,
    retries=chunkwise.Retries(initial_delay=1.0),
    timeouts=chunkwise.Timeouts(stall=2.0, idle=0.02),
)
GOOD = {
    "chat": chat_body(),
    "responses": responses_body(),
    "completions": completions_body(),
    "messages": messages_body(),
}


@asynccontextmanager
async def network(
    monkeypatch: pytest.MonkeyPatch, on: bool, answers: list[ScriptedResponse]
) -> AsyncIterator[list[TrackedStream]]:
    """When ``on``: every connection opened is served in memory, with the next of ``answers``.

    The last answer is repeated; a close-delimited one before it is left
    hanging (as :func:`then_hang`).  Yields the client ends, to check that each was closed.
    """
    opened: list[TrackedStream] = []
    pending = list(answers)
    async with trio.open_nursery() as nursery:

        async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
            hang = len(pending) > 1 and pending[0].framing == "close"
            answer = pending.pop(0) if len(pending) > 1 else pending[0]
            await writer.play(answer)
            if hang:
                await trio.sleep_forever()

        async def open_tcp_stream(host: str, port: int, **kwargs: Any) -> trio.abc.Stream:
            client, server = trio.testing.memory_stream_pair()
            nursery.start_soon(serve_stream, server, handler)
            opened.append(TrackedStream(client))
            return opened[-1]

        if on:
            monkeypatch.setattr(trio, "open_tcp_stream", open_tcp_stream)
        yield opened
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("setup", list(SETUPS))
@pytest.mark.parametrize("server_kind", list(SERVERS["chat"]))
@pytest.mark.parametrize("api", list(SERVERS))
async def test_every_promise_holds(
    api: str,
    server_kind: str,
    setup: str,
    way: str,
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    script, resets = SERVERS[api][server_kind]
    subs: list[Sub] = []
    stream: AnyStream | None = None
    raised: BaseException | None = None
    resumed = server_kind == "resumed"
    retried = server_kind.startswith("retried")
    request = {**REQUESTS[api], "background": True} if resumed else REQUESTS[api]
    # A retried cell's connections all come from the network: a transport is never sent again.
    answers = [script, close_delimited(GOOD[api])] if retried else [RESUMED_REST]

    async with (
        network(monkeypatch, resumed or retried, answers) as opened,
        serving(script) as (client, server),
    ):
        transport = ResettingStream(client, reset=resets)
        try:
            with trio.fail_after(DEADLINE):
                with trio.move_on_after(0.05 if way == "deadline" else math.inf):
                    async with OPEN[api](
                        RETRYING if retried else ENDPOINT,
                        request,
                        transport=None if retried else transport,
                    ) as stream:
                        for kind in SETUPS[setup]:
                            sub = subscribe(stream, kind)
                            subs.append(sub)
                            if sub.consumed:
                                stream.start_soon(slow_consumer, stream, sub)
                        await take_way_out(way, stream)
                    # Rule 2: closed before __aexit__ returned.
                    assert all(connection.closed for connection in opened)
                    assert retried or transport.closed
        except ValueError as exc:
            raised = exc
        # Rule 2, on the exception paths too; and the server sees EOF.
        assert all(connection.closed for connection in opened)
        if not retried:
            assert transport.closed
            with trio.fail_after(1):
                await server.client_closed.wait()

    # Rule 4: the exception alone, its chain and traceback its own.
    if way in ("consumer-raises", "block-raises"):
        assert type(raised) is ValueError, raised
        assert isinstance(raised.__cause__, KeyError)
        assert raised.__cause__.args == ("the cause",)
        assert "failure" in {frame.name for frame in _frames(raised)}
    else:
        assert raised is None

    assert stream is not None and stream.finished
    final = stream.snapshot
    assert final.status != "streaming"
    attempts = final.timings.attempts if final.timings is not None else 0
    if resumed and way == "result" and "unread" not in SETUPS[setup]:
        # The whole answer over two connections (a chat stream is not resumed).
        assert final.status == ("complete" if api == "responses" else "incomplete")
        assert len(opened) == (1 if api == "responses" else 0)
    if server_kind == "stalls" and way == "result" and "unread" not in SETUPS[setup]:
        # (An unread lossless subscriber holds the reader instead: backpressure.)
        assert final.reason is chunkwise.IncompleteReason.STALLED
        assert isinstance(final.error, chunkwise.StallTimeout)  # what stopped it
    if server_kind == "slow-tail" and way == "result" and "unread" not in SETUPS[setup]:
        if api == "responses":
            # Output is awaited until the terminal event: another item may come.
            assert final.reason is chunkwise.IncompleteReason.STALLED
        else:
            # Every choice finished: usage and [DONE] wait on the idle timeout alone.
            assert final.status == "complete" and final.usage == USAGE
    if server_kind == "slow-tool" and way == "result" and "unread" not in SETUPS[setup]:
        if api == "responses":
            # The tool ran 4.8 s, twice the stall timeout: it was waited for.
            assert isinstance(final, chunkwise.responses.Result)
            assert final.status == "complete"
            assert [item.type for item in final.output] == ["message", "web_search_call"]
        else:
            # The same pause mid-answer, with no tool running: a stall.
            assert final.reason is chunkwise.IncompleteReason.STALLED
    if retried and way == "result" and "unread" not in SETUPS[setup]:
        # The second attempt's answer, over a second connection (no pool keeps the first).
        assert (final.status, attempts) == ("complete", 2)
        assert len(opened) == 2
    if retried and way not in ("result", "at-once"):
        # Left during the backoff: the failed attempt is the outcome, nothing sent again.
        assert (attempts, len(opened)) == (1, 1)
    torn_down = way in ("consumer-raises", "block-raises", "deadline")

    for sub in subs:
        if sub.kind == "closed":
            continue
        if not sub.consumed:
            # Whatever waits in the channel: then EndOfChannel, never a hang.
            while True:
                try:
                    item = sub.channel.receive_nowait()
                except trio.EndOfChannel:
                    sub.ended = True
                    break
                sub.events.extend(item if sub.kind == "batched" else (item,))
        terminals = [e for e in sub.events if isinstance(e, TERMINAL)]
        if sub.kind == "raw":
            whole = (
                way == "result"
                and server_kind in WHOLE_BODIES
                and "unread" not in SETUPS[setup]
                and (api, server_kind) != ("responses", "slow-tail")  # it stalls
                and (api == "responses" or server_kind != "slow-tool")  # they stall
            )
            # A retried cell's: the second attempt's, unless left before it was made.
            sent = sse_events(GOOD[api] if attempts == 2 else script.body)
            if resumed and api == "responses":  # the resumption's body follows the cut one
                sent = sse_events(script.body, cut=True) + sse_events(RESUMED_REST.body)
            _check_raw(sub, sent, whole=whole)
            if terminals:
                assert terminals[0].result == final
            continue
        assert not any(type(e) is RawEvent for e in sub.events)  # rule 5 of _fanout
        retrying = [e for e in sub.events if type(e) is Retrying]
        if retried and (sub.consumed or sub.kind == "unread") and way == "result":
            # Rule 7: one Retrying, after the failed attempt's head, before the next's.
            assert len(retrying) == 1 and retrying[0].attempt == 2
            heads = [type(e) for e in sub.events[:3]]
            assert heads == [chunkwise.HeadReceived, Retrying, chunkwise.HeadReceived]
        assert len(retrying) <= (1 if retried else 0)
        _check_order(sub, final)
        assert len(terminals) <= 1
        # Rule 5: snapshots never changed after they were handed out.
        for snapshot, copied in sub.snapshots:
            assert snapshot == copied
        if sub.kind == "lossy":
            # The end always fits a lossy channel, even when torn down.
            assert terminals and sub.events[-1] is terminals[0]
        if sub.consumed and not torn_down:
            # Rule 3: the consumer ran to the end of its channel.
            assert sub.ended
            assert len(terminals) == 1 and sub.events[-1] is terminals[0]
            assert terminals[0].result == final
            assert deltas_text(sub.events) == result_text(final)
        if terminals:
            assert terminals[0].result == final


#: Servers whose body a stream read to its end reads whole (the others cut it).
WHOLE_BODIES = (
    *("fast-done", "fast-no-done", "short-no-done", "trickle", "slow-tail", "slow-tool"),
    *("retried-cut", "retried-ended", "retried-error", "retried-idle"),  # the second attempt
)


def sse_events(body: bytes, *, cut: bool = False) -> list[ServerSentEvent]:
    """What a WHATWG decoder dispatches of ``body`` (``cut``: without its unfinished end)."""
    decoder = SSEDecoder(legacy_error_field=True)
    return decoder.feed(body) + ([] if cut else decoder.end())


def _check_raw(sub: Sub, sent: list[ServerSentEvent], *, whole: bool) -> None:
    """A raw subscriber: the body's server-sent events in order, then the terminal event."""
    ends = [at for at, event in enumerate(sub.events) if isinstance(event, TERMINAL)]
    assert ends in ([], [len(sub.events) - 1])  # torn down, a consumer may miss the end
    raw = sub.events[:-1] if ends else sub.events
    assert all(type(e) is RawEvent for e in raw)
    received = [e.event for e in raw if type(e) is RawEvent]
    if whole:
        assert received == sent  # read to its end: every event once
    else:
        assert received == sent[: len(received)]  # as far as the reading went


def _check_order(sub: Sub, final: AnyResult) -> None:
    """Deltas in order without a gap (a lossy subscriber is told of gaps)."""
    expected = [f"ü{i} " for i in range(N_DELTAS)]
    got = [
        e.text
        for e in sub.events
        if isinstance(
            e, chat.TextDelta | responses.TextDelta | completions.TextDelta | messages.TextDelta
        )
        and e.text
    ]
    if sub.kind == "lossy":
        assert all(text in expected for text in got)
        assert got == sorted(got, key=expected.index)
        missing = len(expected[: expected.index(got[-1]) + 1]) - len(got) if got else 0
        reported = sum(e.count for e in sub.events if type(e) is EventsDropped)
        assert reported >= missing
    else:
        assert got == expected[: len(got)]


def _frames(exc: BaseException) -> list[traceback.FrameSummary]:
    return list(traceback.extract_tb(exc.__traceback__))

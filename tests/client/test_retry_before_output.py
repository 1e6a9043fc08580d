"""Retries that never duplicate: an answer that fails before its first output is asked for again.

End to end over loopback sockets (real time, short waits), for the four
APIs: every way an attempt can fail before its output that is sent again,
every way that is not, the shared retry budget, the server's ``retry_after``,
what subscribers see (one :class:`~chunkwise.Retrying`, nothing of the failed
attempt), the pool's connections, and the log.  The exit-path matrix
(``test_stream_matrix.py``) crosses the same with every subscriber set-up and
way out.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable
from typing import Any

import pytest
import trio

import chunkwise
from chunkwise import (
    ConnectionLost,
    HeadReceived,
    IdleTimeout,
    Retries,
    Retrying,
    StreamError,
    Timeouts,
)
from chunkwise.testing import RecordedRequest, ResponseWriter, ScriptedResponse, open_test_server
from helpers.bodies import choice, chunk

FAST = Retries(max_retries=2, initial_delay=0.01, max_delay=0.02)
ERROR = {"message": "The server had an error", "type": "server_error"}


def chat_answer() -> ScriptedResponse:
    return ScriptedResponse.sse(
        [
            chunk(choice(role="assistant", content="")),
            chunk(choice(content="Hi")),
            chunk(choice(finish_reason="stop")),
        ]
    )


def completion_answer() -> ScriptedResponse:
    text: list[dict[str, Any]] = [
        {"object": "text_completion", "choices": [{"index": 0, "text": "Hi"}]}
    ]
    end = [{"choices": [{"index": 0, "text": "", "finish_reason": "stop"}]}]
    return ScriptedResponse.sse(text + end)


def typed(*events: dict[str, Any]) -> bytes:
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


CREATED = {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}}
ADDED = {"type": "response.output_item.added", "output_index": 0, "item": {"type": "message"}}


def response_answer() -> ScriptedResponse:
    delta = {"type": "response.output_text.delta", "output_index": 0, "delta": "Hi"}
    done = {"type": "response.completed", "response": {"id": "resp_1", "status": "completed"}}
    return ScriptedResponse(body=typed(CREATED, ADDED, delta, done))


def response_failed(error: dict[str, Any]) -> ScriptedResponse:
    failed = {"type": "response.failed", "response": {"status": "failed", "error": error}}
    return ScriptedResponse(body=typed(CREATED, ADDED, {"type": "error", "error": error}, failed))


MESSAGE_START = {
    "type": "message_start",
    "message": {"id": "msg_1", "role": "assistant", "content": [], "usage": {"input_tokens": 3}},
}


def message_answer() -> ScriptedResponse:
    start = {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}}
    delta = {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "text_delta", "text": "Hi"},
    }
    end = {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {}}
    stops = ({"type": "content_block_stop", "index": 0}, end, {"type": "message_stop"})
    return ScriptedResponse(body=typed(MESSAGE_START, start, delta, *stops))


#: Each API: its namespace, request, the good answer, a body that fails with ``error`` in-stream.
APIS: dict[str, tuple[Any, dict[str, Any], ScriptedResponse, Callable[..., ScriptedResponse]]] = {
    "chat": (
        chunkwise.chat,
        {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
        chat_answer(),
        lambda error: ScriptedResponse.sse([chunk(choice(role="assistant")), {"error": error}]),
    ),
    "completions": (
        chunkwise.completions,
        {"model": "m", "prompt": "hi"},
        completion_answer(),
        lambda error: ScriptedResponse.sse([{"error": error}]),
    ),
    "responses": (
        chunkwise.responses,
        {"model": "m", "input": "hi"},
        response_answer(),
        response_failed,
    ),
    "messages": (
        chunkwise.messages,
        {"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": "hi"}]},
        message_answer(),
        lambda error: ScriptedResponse(
            body=typed(MESSAGE_START, {"type": "error", "error": error})
        ),
    ),
}


def cut(answer: ScriptedResponse) -> ScriptedResponse:
    """The answer's body up to just before its first output, then the connection closes."""
    before = answer.body.rfind(b"\n\n", 0, answer.body.index(b'"Hi"'))
    return ScriptedResponse(body=answer.body, disconnect_after=max(before, 10))


def failing(api: str, way: str) -> ScriptedResponse:
    _, _, answer, in_stream = APIS[api]
    if way == "connection lost":
        return cut(answer)
    if way == "empty body":
        return ScriptedResponse(body=b"")
    if way == "[DONE] alone":
        return ScriptedResponse(body=b"data: [DONE]\n\n")
    if way == "JSON error document":
        return ScriptedResponse(body=json.dumps({"error": ERROR}).encode())
    error = {
        "server error": ERROR,
        "overloaded": {"message": "Overloaded", "type": "overloaded_error"},
        "rate limited": {"message": "slow down", "code": "rate_limit_exceeded"},
        "internal error": {"message": "oops", "code": "internal_error"},
        "unavailable": {"message": "later", "code": "service_unavailable"},
    }[way]
    return in_stream(error)


RETRIED = [
    "connection lost",
    "empty body",
    "[DONE] alone",
    "JSON error document",
    "server error",
    "overloaded",
    "rate limited",
    "internal error",
    "unavailable",
]


async def read(
    api: str, scripts: list[ScriptedResponse], retries: Retries = FAST, **endpoint: Any
) -> tuple[Any, list[chunkwise.Event], list[RecordedRequest]]:
    namespace, request, _, _ = APIS[api]
    async with open_test_server(scripts) as server:
        with trio.fail_after(10):
            async with namespace.open_stream(
                server.endpoint(retries=retries, **endpoint), request
            ) as stream:
                events = [event async for event in stream]
        return stream.snapshot, events, list(server.requests)


@pytest.mark.parametrize("way", RETRIED)
@pytest.mark.parametrize("api", list(APIS))
async def test_an_answer_that_fails_before_output_is_asked_for_again(api: str, way: str) -> None:
    result, events, requests = await read(api, [failing(api, way), APIS[api][2]])
    assert result.status == "complete"
    assert len(requests) == 2 and requests[0].body == requests[1].body
    assert result.timings.attempts == 2
    # Subscribers see the first head, one Retrying, then the second attempt alone.
    retrying = [e for e in events if type(e) is Retrying]
    assert len(retrying) == 1 and retrying[0].attempt == 2
    assert 0 <= retrying[0].delay <= FAST.max_delay
    assert isinstance(retrying[0].reason, (ConnectionLost, StreamError))
    assert type(events[0]) is HeadReceived and events[1] is retrying[0]
    assert type(events[2]) is HeadReceived
    again = [e for e in events[3:] if e.family in ("choice", "tool_call")]
    assert [e for e in events[:2] if e.family in ("choice", "tool_call")] == []
    assert "".join(getattr(e, "text", "") for e in again if e.is_content) == "Hi"
    assert not [e for e in events if type(e) is chunkwise.StreamErrorReceived]
    assert result.anomalies == ()


@pytest.mark.parametrize(
    "error",
    [
        {"message": "bad", "type": "invalid_request_error"},
        {"message": "too long", "code": "context_length_exceeded"},
        {"message": "no money", "type": "insufficient_quota"},
        {"message": "filtered", "code": "content_filter"},
        {"message": "no type"},
    ],
    ids=lambda e: e.get("type") or e.get("code") or "untyped",
)
@pytest.mark.parametrize("api", list(APIS))
async def test_an_error_that_is_the_answer_is_never_asked_again(
    api: str, error: dict[str, Any]
) -> None:
    result, events, requests = await read(api, [APIS[api][3](error), APIS[api][2]])
    assert result.status == "failed" and result.error.message == error["message"]
    assert len(requests) == 1 and not [e for e in events if type(e) is Retrying]
    assert [e for e in events if type(e) is chunkwise.StreamErrorReceived]


@pytest.mark.parametrize("api", list(APIS))
async def test_an_answer_after_output_is_never_asked_again(api: str) -> None:
    answer = APIS[api][2]
    after = answer.body.index(b"\n\n", answer.body.index(b'"Hi"')) + 5  # after the output
    broken = ScriptedResponse(body=answer.body, disconnect_after=after)
    result, events, requests = await read(api, [broken, answer])
    assert (result.status, len(requests)) == ("incomplete", 1)
    assert not [e for e in events if type(e) is Retrying]


async def test_a_complete_answer_without_output_is_not_asked_again() -> None:
    empty = ScriptedResponse.sse(
        [chunk(choice(role="assistant", content="", finish_reason="stop"))]
    )
    result, _, requests = await read("chat", [empty, chat_answer()])
    assert (result.status, len(requests)) == ("complete", 1)


async def test_before_output_false_turns_it_off() -> None:
    retries = Retries(max_retries=2, initial_delay=0.01, before_output=False)
    result, events, requests = await read("chat", [failing("chat", "server error")], retries)
    assert (result.status, len(requests)) == ("failed", 1)
    assert not [e for e in events if type(e) is Retrying]


@pytest.mark.parametrize(
    ("max_retries", "requests", "status"), [(1, 2, "failed"), (2, 3, "complete")]
)
async def test_the_budget_is_shared_with_failures_before_the_response(
    max_retries: int, requests: int, status: str
) -> None:
    retries = Retries(max_retries=max_retries, initial_delay=0.01, max_delay=0.02)
    scripts = [ScriptedResponse.error(503, "busy"), failing("chat", "server error"), chat_answer()]
    result, events, sent = await read("chat", scripts, retries)
    assert (result.status, len(sent)) == (status, requests)
    assert result.timings.attempts == requests
    # The last attempt is not held back: its error reaches subscribers.
    assert bool([e for e in events if type(e) is chunkwise.StreamErrorReceived]) is (
        status == "failed"
    )


async def test_a_retry_after_the_error_carries_is_waited() -> None:
    slow_down = {"message": "slow down", "code": "rate_limit_exceeded", "retry_after": 0.3}
    scripts = [failing("chat", "server error"), APIS["chat"][3](slow_down), chat_answer()]
    start = trio.current_time()
    result, events, _ = await read("chat", scripts, Retries(max_retries=3, initial_delay=0.01))
    assert result.status == "complete"
    assert [e.delay for e in events if type(e) is Retrying][1] == 0.3
    assert trio.current_time() - start >= 0.3


async def test_a_retry_after_beyond_the_cap_ends_the_answer_at_once() -> None:
    slow_down = {"message": "slow down", "code": "rate_limit_exceeded", "retry_after_ms": 90_000}
    retries = Retries(max_retries=3, max_retry_after=5)
    result, _, requests = await read("chat", [APIS["chat"][3](slow_down), chat_answer()], retries)
    assert (result.status, len(requests)) == ("failed", 1)
    assert result.error.retry_after == 90


async def test_an_idle_timeout_before_output_is_asked_again() -> None:
    namespace, request, answer, _ = APIS["chat"]

    async def silent_first(request: RecordedRequest, writer: ResponseWriter) -> None:
        if len(server.requests) > 1:
            await writer.play(answer)
            return
        await writer.start()
        role = chunk(choice(role="assistant"))
        await writer.write(b"data: " + json.dumps(role).encode() + b"\n\n")
        await trio.sleep_forever()

    async with open_test_server(silent_first) as server:
        endpoint = server.endpoint(retries=FAST, timeouts=Timeouts(idle=0.2))
        with trio.fail_after(10):
            result = await namespace.complete(endpoint, request)
        assert result.status == "complete" and len(server.requests) == 2


async def test_a_failed_resend_leaves_the_first_attempt_s_outcome_with_an_anomaly() -> None:
    scripts = [failing("chat", "server error"), ScriptedResponse.error(400, "bad request")]
    result, events, requests = await read("chat", scripts)
    assert (result.status, len(requests)) == ("failed", 2)
    assert result.error.type == "server_error"
    assert [a.kind for a in result.anomalies] == ["retry failed"]
    assert "HTTPStatusError" in result.anomalies[0].detail
    kinds = [type(e).__name__ for e in events]
    assert kinds[:2] == ["HeadReceived", "Retrying"]
    assert "StreamErrorReceived" in kinds  # the attempt's own events, after all


async def test_a_pooled_attempt_that_ended_cleanly_gives_its_connection_to_the_next() -> None:
    scripts = [failing("chat", "server error"), cut(chat_answer()), chat_answer()]
    request = APIS["chat"][1]
    async with open_test_server(scripts) as server:
        async with chunkwise.Client(server.endpoint(retries=FAST)) as client:
            result = await client.chat.complete(request)
        connections = [
            next(c.index for c in server.connections if any(r is q for r in c.requests))
            for q in server.requests
        ]
    assert result.status == "complete"
    # The error answer's body ended: its connection carried the second attempt;
    # that one was cut, so the third went on a new connection.
    assert connections == [0, 0, 1]


async def test_each_retry_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="chunkwise")
    await read("chat", [failing("chat", "server error"), chat_answer()])
    [record] = [r for r in caplog.records if "before any output" in r.getMessage()]
    assert "attempt 1 failed before any output (StreamError: The server had an error)" in (
        record.getMessage()
    )


async def test_a_raw_subscriber_sees_only_the_last_attempt() -> None:
    namespace, request, answer, _ = APIS["chat"]
    async with open_test_server([failing("chat", "server error"), answer]) as server:
        async with namespace.open_stream(server.endpoint(retries=FAST), request) as stream:
            raw = stream.subscribe("raw", buffer_size=math.inf)
            await stream.result()
    sent = [event.event.data async for event in raw if type(event) is chunkwise.RawEvent]
    assert sent == [line[6:] for line in answer.body.decode().split("\n\n") if line]


async def test_leaving_during_the_wait_ends_the_stream_promptly_as_the_attempt_ended() -> None:
    namespace, request, answer, _ = APIS["chat"]
    slow = Retries(max_retries=2, initial_delay=30, max_delay=30)
    async with open_test_server([failing("chat", "server error"), answer]) as server:
        with trio.fail_after(5):
            async with namespace.open_stream(server.endpoint(retries=slow), request) as stream:
                lifecycle = stream.subscribe("lifecycle", buffer_size=math.inf)
                async for event in lifecycle:
                    if type(event) is Retrying:
                        break
        assert stream.finished and len(server.requests) == 1
    # The attempt that failed is the outcome: its events delivered, then the end.
    assert stream.snapshot.status == "failed" and stream.snapshot.error.type == "server_error"
    rest = [type(event).__name__ async for event in lifecycle]
    assert rest[-2:] == ["StreamErrorReceived", "StreamFailed"]


async def test_a_given_transport_is_never_opened_again() -> None:
    namespace, request, _, _ = APIS["chat"]
    client, server_end = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            chunkwise.testing.serve_stream, server_end, failing("chat", "server error")
        )
        endpoint = chunkwise.Endpoint("http://127.0.0.1:9/v1", retries=FAST)
        async with namespace.open_stream(endpoint, request, transport=client) as stream:
            result = await stream.result()
    assert result.status == "failed" and result.timings.attempts == 1


async def test_an_idle_timeout_before_the_response_is_still_not_asked_again() -> None:
    # Before the head, a server that took the request and went quiet is not
    # asked again (rule 2); only once it answered 200 and said nothing (rule 7).
    async def quiet(request: RecordedRequest, writer: ResponseWriter) -> None:
        await trio.sleep_forever()

    async with open_test_server(quiet) as server:
        endpoint = server.endpoint(retries=FAST, timeouts=Timeouts(idle=0.1))
        with pytest.raises(IdleTimeout):
            await chunkwise.chat.complete(endpoint, APIS["chat"][1])
        assert len(server.requests) == 1


@pytest.mark.parametrize(("max_retries", "held"), [(2, True), (1, False)])
async def test_an_attempt_s_events_wait_for_its_output_unless_it_is_the_last(
    max_retries: int, held: bool
) -> None:
    """While an attempt may still be sent again, its events wait for its first output.

    The second attempt starts its item 0.5 s before its text: when a third
    attempt is possible that item arrives with the text; on the last attempt
    (nothing to hold back for) it arrives at once.
    """
    delta = {"type": "response.output_text.delta", "output_index": 0, "delta": "Hi"}
    done = {"type": "response.completed", "response": {"id": "resp_1", "status": "completed"}}
    start, rest = typed(CREATED, ADDED), typed(delta, done)
    slow = ScriptedResponse(body=start + rest, write_sizes=(len(start), len(rest)), delay=0.5)
    retries = Retries(max_retries=max_retries, initial_delay=0.01, max_delay=0.02)
    failed = response_failed(ERROR)
    async with open_test_server([failed, slow]) as server:
        async with chunkwise.responses.open_stream(
            server.endpoint(retries=retries), APIS["responses"][1]
        ) as stream:
            seen = [(type(e).__name__, trio.current_time()) async for e in stream]
    at = dict(seen)
    assert stream.snapshot.status == "complete"
    assert (at["TextDelta"] - at["OutputItemAdded"] < 0.25) is held

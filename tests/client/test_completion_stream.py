"""Legacy completions through the trio layer: the same stream, pool, retries and errors as chat.

``open_completion_stream`` is the one ``open_stream`` with the ``COMPLETIONS``
API value; the promise matrix (test_stream_matrix.py) runs it in every cell.
Here: what differs (the path posted to, the events) and what must not
(connection reuse across APIs, typed HTTP errors, retries before the body,
fan-out by family, timings), over real loopback sockets.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio

import chunkwise
from chunkwise import Client, HTTPStatusError, Retries, StreamCompleted, completions
from chunkwise.testing import ScriptedResponse, open_test_server
from helpers.bodies import completion_chunk, sse, text_choice
from helpers.data import KEY

REQUEST: dict[str, Any] = {"model": "m", "prompt": ["a", "b"], "n": 1}
WORDS = ["Hello", ", ", "wörld 🙂"]
USAGE = {"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5}
FAST = Retries(max_retries=2, initial_delay=0.01, max_delay=0.05)


def body(words: list[str] = WORDS) -> bytes:
    return sse(
        "null",  # llama-server opens a multi-prompt stream with it
        *(completion_chunk(text_choice(w, index=i % 2)) for i, w in enumerate(words)),
        completion_chunk(
            text_choice("", index=0, finish_reason="stop"),
            text_choice("", index=1, finish_reason="length"),
        ),
        completion_chunk(usage=USAGE),
    )


STREAM = ScriptedResponse(body=body())


def client_for(server: Any, **kwargs: Any) -> Client:
    return Client(server.endpoint(retries=Retries(max_retries=0), api_key=KEY), **kwargs)


async def test_a_completion_stream_posts_to_completions_under_the_base_url() -> None:
    async with open_test_server(STREAM) as server:
        result = await chunkwise.completions.complete(server.endpoint(api_key=KEY), REQUEST)
        [request] = server.requests
    assert request.method == "POST" and request.target == "/v1/completions"
    assert json.loads(request.body) == {**REQUEST, "stream": True}
    assert isinstance(result, chunkwise.completions.Result)
    assert result.status == "complete"
    assert [(c.index, c.text, c.finish_reason) for c in result.choices] == [
        (0, "Hellowörld 🙂", "stop"),
        (1, ", ", "length"),
    ]
    assert result.usage == USAGE
    assert [a.kind for a in result.anomalies] == ["null event"]


async def test_subscribers_of_a_completion_stream_get_its_families() -> None:
    async with open_test_server(STREAM) as server:
        async with chunkwise.completions.open_stream(server.endpoint(), REQUEST) as stream:
            text = stream.subscribe("choice")
            lifecycle = stream.subscribe("lifecycle")
            tools = stream.subscribe("tool_call")
            result = await stream.result()
        choice_events = [e async for e in text]
        lifecycle_events = [e async for e in lifecycle]
        tool_events = [e async for e in tools]
    assert isinstance(stream, chunkwise.completions.Stream)
    assert [e.text for e in choice_events if type(e) is completions.TextDelta] == WORDS
    assert [type(e).__name__ for e in choice_events] == [
        "TextDelta",
        "TextDelta",
        "TextDelta",
        "ChoiceFinished",
        "ChoiceFinished",
        "StreamCompleted",
    ]
    assert [type(e).__name__ for e in lifecycle_events] == [
        "HeadReceived",
        "AnomalyDetected",
        "UsageReported",
        "StreamCompleted",
    ]
    assert [type(e).__name__ for e in tool_events] == ["StreamCompleted"]
    for events in (choice_events, lifecycle_events, tool_events):
        assert isinstance(events[-1], StreamCompleted) and events[-1].result == result


async def test_timings_of_a_completion_stream() -> None:
    paced = ScriptedResponse(body=body(), write_sizes=60, delay=0.01)
    async with open_test_server(paced) as server:
        result = await chunkwise.completions.complete(server.endpoint(), REQUEST)
    timings = result.timings
    assert timings is not None
    assert timings.first_output is not None and timings.first_content == timings.first_output
    assert timings.last_output is not None and timings.last_output >= timings.first_output
    assert timings.ended is not None and timings.ended >= timings.last_output
    assert timings.time_per_output_token is not None  # from the usage's completion_tokens


async def test_a_client_reuses_its_connection_across_the_three_apis() -> None:
    chat = ScriptedResponse.sse(
        [{"choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": "stop"}]}]
    )
    async with open_test_server([STREAM, chat, STREAM]) as server, client_for(server) as client:
        first = await client.completions.complete(REQUEST)
        await client.chat.complete({"model": "m", "messages": []})
        async with client.completions.open_stream(REQUEST) as stream:
            third = await stream.result()
        assert first == third and first.status == "complete"
        assert [r.target for r in server.requests] == [
            "/v1/completions",
            "/v1/chat/completions",
            "/v1/completions",
        ]
        assert len(server.connections) == 1 and client.idle_connections == 1


async def test_an_http_error_is_typed_with_its_openai_body() -> None:
    error = {"error": {"message": "bad prompt", "type": "invalid_request_error", "code": None}}
    refused = ScriptedResponse(
        status=400, headers=[("content-type", "application/json")], body=json.dumps(error).encode()
    )
    async with open_test_server(refused) as server:
        with pytest.raises(HTTPStatusError) as info:
            async with chunkwise.completions.open_stream(server.endpoint(), REQUEST):
                pass  # pragma: no cover - never entered
    assert info.value.status_code == 400
    assert "bad prompt" in str(info.value)


async def test_retried_before_the_body_then_streamed() -> None:
    busy = ScriptedResponse(status=503, headers=[("retry-after", "0")], body=b"busy")
    async with open_test_server([busy, STREAM]) as server:
        result = await chunkwise.completions.complete(server.endpoint(retries=FAST), REQUEST)
        assert [r.target for r in server.requests] == ["/v1/completions"] * 2
    assert result.status == "complete"


async def test_an_error_in_the_stream_fails_it_and_keeps_the_text() -> None:
    broken = ScriptedResponse(
        body=sse(completion_chunk(text_choice("part")), {"error": {"message": "boom", "code": 500}})
    )
    async with open_test_server(broken) as server:
        result = await chunkwise.completions.complete(server.endpoint(), REQUEST)
    assert result.status == "failed" and result.text == "part"
    assert result.server_error is not None and result.server_error.code == 500


async def test_cancelled_block_leaves_an_incomplete_result() -> None:
    slow = ScriptedResponse(body=body(["a"] * 50), write_sizes=20, delay=0.05)
    async with open_test_server(slow) as server:
        async with chunkwise.completions.open_stream(server.endpoint(), REQUEST) as stream:
            async for event in stream:
                if type(event) is completions.TextDelta:
                    stream.cancel()
            await trio.lowlevel.checkpoint()
        assert stream.snapshot.status == "incomplete"
        assert stream.snapshot.reason is chunkwise.IncompleteReason.CANCELLED

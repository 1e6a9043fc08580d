"""The Responses API through the trio layer: the same stream, pool, retries and errors as chat.

``open_response_stream`` and ``open_chat_stream`` are one implementation
parametrised by the API (``_stream.Api``); the promise matrix
(test_stream_matrix.py) runs both.  Here: what differs (the path posted to,
the request body, the parser configured from the request) and what must not
(connection reuse, retries before the body, typed HTTP errors, fan-out by
family), over real loopback sockets.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import chunkwise
from chunkwise import Client, HTTPStatusError, Retries, StreamCompleted, responses
from chunkwise.testing import ScriptedResponse, open_test_server
from helpers.bodies import sse_typed
from helpers.data import KEY

REQUEST: dict[str, Any] = {"model": "m", "input": "hi"}
WORDS = ["Hello", ", ", "wörld 🙂"]
FAST = Retries(max_retries=2, initial_delay=0.01, max_delay=0.05)
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}


def text_events(words: list[str] = WORDS, *, status: str = "completed") -> list[dict[str, Any]]:
    at = {"output_index": 0, "item_id": "msg_1", "content_index": 0}
    message = {"id": "msg_1", "type": "message", "role": "assistant", "content": []}
    return [
        {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}},
        {"type": "response.output_item.added", "output_index": 0, "item": message},
        *({"type": "response.output_text.delta", **at, "delta": word} for word in words),
        {"type": "response.output_text.done", **at, "text": "".join(words)},
        {"type": f"response.{status}", "response": {"id": "resp_1", "status": status}},
    ]


def call_events(arguments: str) -> list[dict[str, Any]]:
    item = {"id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "get_weather"}
    return [
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**item, "arguments": ""},
        },
        {
            "type": "response.function_call_arguments.delta",
            "output_index": 0,
            "item_id": "fc_1",
            "delta": arguments,
        },
        {
            "type": "response.output_item.done",
            "output_index": 0,
            "item": {**item, "arguments": arguments, "status": "completed"},
        },
        {"type": "response.completed", "response": {"id": "resp_1", "status": "completed"}},
    ]


def responses_stream(events: list[dict[str, Any]]) -> ScriptedResponse:
    return ScriptedResponse(body=sse_typed(*events))


STREAM = responses_stream(text_events())


def client_for(server: Any, **kwargs: Any) -> Client:
    retries = kwargs.pop("retries", Retries(max_retries=0))
    return Client(server.endpoint(retries=retries, api_key=KEY), **kwargs)


async def test_a_response_stream_posts_to_responses_under_the_base_url() -> None:
    async with open_test_server(STREAM) as server:
        result = await chunkwise.responses.complete(server.endpoint(api_key=KEY), REQUEST)
        assert result.status == "complete" and result.output_text == "".join(WORDS)
        [request] = server.requests
        assert request.method == "POST" and request.target == "/v1/responses"
        assert json.loads(request.body) == {**REQUEST, "stream": True}
        assert request.headers["authorization"] == f"Bearer {KEY}"


async def test_a_chat_stream_still_posts_to_chat_completions() -> None:
    chat = ScriptedResponse.sse(
        [{"choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": "stop"}]}]
    )
    async with open_test_server(chat) as server:
        await chunkwise.chat.complete(server.endpoint(), {"model": "m", "messages": []})
        assert server.requests[0].target == "/v1/chat/completions"


async def test_subscribers_of_a_response_stream_get_its_families() -> None:
    async with open_test_server(STREAM) as server:
        async with chunkwise.responses.open_stream(server.endpoint(), REQUEST) as stream:
            everything = stream.subscribe()
            text = stream.subscribe("choice")
            lifecycle = stream.subscribe("lifecycle")
            result = await stream.result()
        got: dict[str, list[chunkwise.Event]] = {}
        for name, channel in [("all", everything), ("choice", text), ("lifecycle", lifecycle)]:
            got[name] = [e async for e in channel]
    assert [e.text for e in got["choice"] if isinstance(e, responses.TextDelta)] == WORDS
    assert {type(e).__name__ for e in got["choice"][:-1]} == {"OutputItemAdded", "TextDelta"}
    assert [type(e).__name__ for e in got["lifecycle"]] == [
        "HeadReceived",
        "StatusChanged",
        "StreamCompleted",
    ]
    for events in got.values():
        assert isinstance(events[-1], StreamCompleted) and events[-1].result == result
    assert isinstance(stream, chunkwise.responses.Stream)
    assert isinstance(result, chunkwise.responses.Result)


async def test_the_requests_tools_validate_function_call_arguments() -> None:
    answers = [
        responses_stream(call_events('{"city": "Zürich"}')),
        responses_stream(call_events('{"town": 1}')),
    ]
    async with open_test_server(answers) as server:
        request = {**REQUEST, "tools": [WEATHER]}
        for expected_valid in (True, False):
            async with chunkwise.responses.open_stream(server.endpoint(), request) as stream:
                calls = stream.subscribe("tool_call")
                result = await stream.result()
            completed = [e async for e in calls if isinstance(e, responses.ToolCallCompleted)]
            [call] = result.function_calls
            assert completed[0].call == call and call.call_id == "call_1"
            assert call.validated is expected_valid
            if expected_valid:
                assert call.parse_arguments() == {"city": "Zürich"}
            else:
                assert call.error is not None and "schema" in str(call.error)


async def test_the_requests_text_format_asks_for_structured_output() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    request = {
        **REQUEST,
        "text": {"format": {"type": "json_schema", "name": "N", "schema": schema}},
    }
    answers = [
        responses_stream(text_events(['{"n":', " 3}"])),
        responses_stream(text_events(['{"n": "3"}'])),
    ]
    async with open_test_server(answers) as server:
        good = await chunkwise.responses.complete(server.endpoint(), request)
        bad = await chunkwise.responses.complete(server.endpoint(), request)
    assert good.parsed == {"n": 3} and good.parse_error is None
    assert bad.parsed is None and bad.parse_error is not None
    assert bad.parse_error.raw == '{"n": "3"}' and bad.parse_error.schema_name == "N"


async def test_the_requests_max_output_tokens_is_checked_against_the_usage() -> None:
    events = text_events()
    events[-1]["response"]["usage"] = {"input_tokens": 3, "output_tokens": 5, "total_tokens": 8}
    async with open_test_server(responses_stream(events)) as server:
        request = {**REQUEST, "max_output_tokens": 5}
        result = await chunkwise.responses.complete(server.endpoint(), request)
    assert result.status == "complete"
    assert [a.kind for a in result.anomalies] == ["max_output_tokens reached"]


async def test_a_client_reuses_its_connection_across_both_apis() -> None:
    chat = ScriptedResponse.sse(
        [{"choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": "stop"}]}]
    )
    async with open_test_server([STREAM, chat, STREAM]) as server, client_for(server) as client:
        first = await client.responses.complete(REQUEST)
        await client.chat.complete({"model": "m", "messages": []})
        async with client.responses.open_stream(REQUEST) as stream:
            third = await stream.result()
        assert first == third and first.status == "complete"
        assert [r.target for r in server.requests] == [
            "/v1/responses",
            "/v1/chat/completions",
            "/v1/responses",
        ]
        assert len(server.connections) == 1 and client.idle_connections == 1


@pytest.mark.parametrize("status", [429, 503])
async def test_a_response_request_is_retried_before_its_body(status: int) -> None:
    error = ScriptedResponse.error(status, "try again")
    async with open_test_server([error, STREAM]) as server:
        result = await chunkwise.responses.complete(server.endpoint(retries=FAST), REQUEST)
        assert result.status == "complete"
        assert [r.target for r in server.requests] == ["/v1/responses"] * 2


async def test_a_response_stream_cut_mid_body_is_incomplete_and_never_retried() -> None:
    cut = ScriptedResponse(body=STREAM.body, disconnect_after=len(STREAM.body) // 2)
    async with open_test_server([cut, STREAM]) as server:
        result = await chunkwise.responses.complete(server.endpoint(retries=FAST), REQUEST)
        assert result.status == "incomplete"
        assert result.reason is chunkwise.IncompleteReason.CONNECTION_LOST
        assert result.output_text and "".join(WORDS).startswith(result.output_text)
        assert len(server.requests) == 1


async def test_an_http_error_from_responses_is_typed_with_its_body() -> None:
    error = ScriptedResponse.error(400, "Unsupported parameter: 'foo'", code="unsupported")
    async with open_test_server(error) as server:
        with pytest.raises(HTTPStatusError) as info:
            async with chunkwise.responses.open_stream(server.endpoint(), REQUEST):
                pass  # pragma: no cover - the error comes before the block
    assert info.value.status_code == 400
    assert info.value.error is not None and info.value.error.code == "unsupported"


async def test_cancelling_a_response_stream_keeps_what_arrived() -> None:
    slow = ScriptedResponse(body=STREAM.body, write_sizes=60, delay=0.2)
    async with open_test_server(slow) as server:
        async with chunkwise.responses.open_stream(server.endpoint(), REQUEST) as stream:
            events = stream.subscribe()
            async for event in events:
                if isinstance(event, responses.TextDelta):
                    stream.cancel()
            result = await stream.result()
    assert result.status == "incomplete"
    assert result.reason is chunkwise.IncompleteReason.CANCELLED
    assert result.output_text.startswith(WORDS[0])
    assert stream.finished

"""Anthropic Messages through the trio layer: the same stream, pool and errors as chat.

``chunkwise.messages.open_stream`` is the one ``open_stream`` with the
``MESSAGES`` API value; the promise matrix (test_stream_matrix.py) runs it in
every cell.  Here: what differs (the path posted to, the key sent as
``x-api-key`` with ``anthropic-version``, the events) over real loopback sockets.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import chunkwise
from chunkwise import Client, Endpoint, HTTPStatusError, InvalidEndpoint, StreamCompleted
from chunkwise.testing import ScriptedResponse, open_test_server
from helpers.bodies import message_events, sse_typed, text_block, tool_use_block
from helpers.data import KEY

REQUEST: dict[str, Any] = {
    "model": "claude-test",
    "max_tokens": 64,
    "messages": [{"role": "user", "content": "Weather in Paris?"}],
    "tools": [
        {
            "name": "get_weather",
            "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
        }
    ],
}
BODY = sse_typed(
    *message_events(
        text_block(0, "Let me ", "check."),
        tool_use_block(1, "get_weather", '{"city":', ' "Paris"}'),
        stop_reason="tool_use",
    )
)
STREAM = ScriptedResponse(body=BODY)


async def test_a_message_stream_posts_to_messages_with_anthropic_s_headers() -> None:
    async with open_test_server(STREAM) as server:
        result = await chunkwise.messages.complete(server.endpoint(api_key=KEY), REQUEST)
        [request] = server.requests
    assert request.method == "POST" and request.target == "/v1/messages"
    assert json.loads(request.body) == {**REQUEST, "stream": True}
    headers = dict(request.headers)
    assert headers["x-api-key"] == KEY and headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in headers
    assert isinstance(result, chunkwise.messages.Result) and result.status == "complete"
    assert result.text == "Let me check." and result.stop_reason == "tool_use"
    (call,) = result.tool_calls
    assert call.validated and call.parse_arguments() == {"city": "Paris"}
    assert result.timings is not None and result.timings.first_content is not None


async def test_the_endpoint_s_own_version_header_replaces_the_default() -> None:
    headers = {"anthropic-version": "2024-01-01", "anthropic-beta": "structured-outputs-2025-11-13"}
    async with open_test_server(STREAM) as server:
        await chunkwise.messages.complete(server.endpoint(api_key=KEY, headers=headers), REQUEST)
        [request] = server.requests
    sent = [(n, v) for n, v in request.headers.items() if n.startswith("anthropic")]
    assert sorted(sent) == sorted(headers.items())


async def test_the_other_apis_still_send_a_bearer_key() -> None:
    chat = ScriptedResponse.sse([{"choices": [{"index": 0, "delta": {"content": "x"}}]}])
    async with open_test_server(chat) as server:
        await chunkwise.chat.complete(server.endpoint(api_key=KEY), {"model": "m"})
        [request] = server.requests
    headers = dict(request.headers)
    assert headers["authorization"] == f"Bearer {KEY}"
    assert "x-api-key" not in headers and "anthropic-version" not in headers


async def test_client_messages_streams_events_on_the_client_s_connections() -> None:
    async with open_test_server([STREAM, STREAM]) as server:
        async with Client(server.endpoint(api_key=KEY)) as client:
            async with client.messages.open_stream(REQUEST) as stream:
                events = [event async for event in stream]
            again = await client.messages.complete(REQUEST)
            assert client.stats.reused_total == 1
        assert [r.target for r in server.requests] == ["/v1/messages"] * 2
    assert isinstance(events[-1], StreamCompleted) and events[-1].result == again
    text = [e.text for e in events if type(e) is chunkwise.messages.TextDelta]
    assert "".join(text) == "Let me check."
    kinds = [type(e) for e in events if e.family == "tool_call"]
    assert kinds == [
        chunkwise.messages.ToolCallStarted,
        chunkwise.messages.ToolCallArgumentsDelta,
        chunkwise.messages.ToolCallArgumentsDelta,
        chunkwise.messages.ToolCallCompleted,
    ]


async def test_an_error_status_is_a_typed_error_with_anthropic_s_error_object() -> None:
    body = {
        "type": "error",
        "error": {"type": "authentication_error", "message": "invalid x-api-key"},
    }
    refused = ScriptedResponse(
        status=401, body=json.dumps(body).encode(), content_type="application/json"
    )
    async with open_test_server(refused) as server:
        with pytest.raises(HTTPStatusError) as caught:
            await chunkwise.messages.complete(server.endpoint(api_key=KEY), REQUEST)
    assert caught.value.status_code == 401
    assert caught.value.error is not None and caught.value.error.type == "authentication_error"


async def test_an_overloaded_error_mid_stream_ends_failed_keeping_the_text() -> None:
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    body = sse_typed(*message_events(text_block(0, "Hal"))[:3], error)
    async with open_test_server(ScriptedResponse(body=body)) as server:
        result = await chunkwise.messages.complete(server.endpoint(api_key=KEY), REQUEST)
    assert result.status == "failed" and result.text == "Hal"
    assert result.server_error is not None and result.server_error.type == "overloaded_error"


def test_from_env_for_messages_reads_anthropic_s_variables() -> None:
    env = {"ANTHROPIC_API_KEY": "sk-ant-1\n", "OPENAI_API_KEY": "sk-openai"}
    endpoint = Endpoint.from_env(env, api="messages")
    assert (endpoint.base_url, endpoint.api_key) == ("https://api.anthropic.com/v1", "sk-ant-1")
    for url in ("http://localhost:8080", "http://localhost:8080/v1/"):
        env = {"ANTHROPIC_BASE_URL": url}
        assert Endpoint.from_env(env, api="messages").base_url == "http://localhost:8080/v1"
    assert Endpoint.from_env(env).base_url == "https://api.openai.com/v1"  # chat's, unchanged


def test_from_env_refuses_an_unknown_api() -> None:
    with pytest.raises(InvalidEndpoint, match="api must be one of"):
        Endpoint.from_env({}, api="anthropic")

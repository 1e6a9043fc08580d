"""chunkwise's trio client against a real llama-server's ``/v1/messages`` (opt-in).

Skipped unless ``CHUNKWISE_LLAMA_SERVER`` names a ``llama-server`` binary (see
``test_llama_cpp_responses_live.py`` for how to build and run it).  The server
gets the captured requests again (``tests/data/llama_cpp/messages_*``); each
live result must be the captured stream's result, ids aside, and the headers
sent are Anthropic's (``x-api-key``, ``anthropic-version``: llama-server takes
them as it takes a bearer token).
"""

from __future__ import annotations

import json
import os
from typing import Any

import attrs
import pytest

import chunkwise
from helpers.data import DATA

if not os.environ.get("CHUNKWISE_LLAMA_SERVER", ""):
    pytest.skip(
        "set CHUNKWISE_LLAMA_SERVER to a llama-server binary (tests/llama_server/setup.sh)",
        allow_module_level=True,
    )

LLAMA = DATA / "llama_cpp"


def request(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((LLAMA / f"messages_{name}.request.json").read_bytes())
    loaded.pop("stream")
    return loaded


def captured(name: str) -> chunkwise.messages.Result:
    parser = chunkwise.messages.Parser(tools=request(name).get("tools"))
    parser.feed((LLAMA / f"messages_{name}.sse").read_bytes())
    parser.end()
    return parser.result


def view(result: chunkwise.messages.Result) -> dict[str, Any]:
    """What does not change from run to run: everything but the ids."""
    assert result.id is not None and result.id.startswith("chatcmpl-")
    calls = [(c.name, c.arguments, c.finished, c.validated, c.error) for c in result.tool_calls]
    return {
        "status": result.status,
        "stop_reason": result.stop_reason,
        "model": result.model,
        "text": result.text,
        "usage": result.usage,
        "calls": calls,
        "anomalies": [a.kind for a in result.anomalies],
        "blocks": [
            attrs.evolve(b, data=None) if b.type == "text" else b.type for b in result.content
        ],
    }


@pytest.mark.parametrize("name", ["text", "max_tokens", "tool"])
async def test_complete_gives_the_captured_result(endpoint: chunkwise.Endpoint, name: str) -> None:
    messages_endpoint = attrs.evolve(endpoint, api_key="sk-live-test")
    result = await chunkwise.messages.complete(messages_endpoint, request(name))
    assert view(result) == view(captured(name))
    assert result.timings is not None and result.timings.first_output is not None


async def test_a_client_streams_messages(
    endpoint: chunkwise.Endpoint,
) -> None:
    async with chunkwise.Client(endpoint) as client:
        first = await client.messages.complete(request("text"))
        second = await client.messages.complete(request("tool"))
    assert view(first) == view(captured("text"))
    assert view(second) == view(captured("tool"))

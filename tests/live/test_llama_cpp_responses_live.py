"""chunkwise's trio client against a real llama-server's ``/v1/responses`` (opt-in).

Skipped unless ``CHUNKWISE_LLAMA_SERVER`` names a ``llama-server`` binary;
``CHUNKWISE_LLAMA_MODEL`` names the scripted ``tiny.gguf`` (default:
``tiny.gguf`` beside the ``build/`` directory the binary is in, as
``tests/llama_server/setup.sh`` lays them out).  Build both with that script
(about 10 minutes), then::

    CHUNKWISE_LLAMA_SERVER=/tmp/llama/build/bin/llama-server \\
        .venv/bin/python -m pytest --no-cov tests/live

The server (``endpoint``, ``conftest.py``) starts once for the session, on a
free loopback port, with the arguments the captures were made with
(``tests/data/llama_cpp/responses_server.json``), and gets the captured
requests again: each live result must be the captured stream's result, ids
and timestamps aside.  CI has no llama-server and skips
this module.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

import pytest
import trio

import chunkwise
from helpers.data import DATA

BINARY = os.environ.get("CHUNKWISE_LLAMA_SERVER", "")
if not BINARY:
    pytest.skip(
        "set CHUNKWISE_LLAMA_SERVER to a llama-server binary (tests/llama_server/setup.sh)",
        allow_module_level=True,
    )

LLAMA = DATA / "llama_cpp"
STREAMS = ["text", "max_output_tokens", "tool", "tool_max_output_tokens", "error_mid_stream"]
SENTENCE = (
    'Hello world!\nThe tiny model streams café, 日本語 🙂 "quotes" back\\slash and jalapeño 😀.'
)
#: The "choice" family's events in a text stream (the terminal event reaches everyone).
TEXT_FAMILY = (
    chunkwise.responses.OutputItemAdded,
    chunkwise.responses.TextDelta,
    chunkwise.responses.OutputItemDone,
    chunkwise.StreamCompleted,
)
_IDS = re.compile(r"\b(resp|msg|fc|call)_[A-Za-z0-9]+")
_CREATED = re.compile(r"created_at=\d+")


def request(name: str) -> dict[str, Any]:
    """The captured request, without ``stream`` (chunkwise sets it)."""
    loaded: dict[str, Any] = json.loads((LLAMA / f"responses_{name}.request.json").read_bytes())
    loaded.pop("stream")
    return loaded


def captured(name: str) -> tuple[list[chunkwise.Event], chunkwise.responses.Result]:
    """The captured stream's events and result, parsed as the live request's stream is."""
    sent = request(name)
    parser = chunkwise.responses.Parser(
        tools=sent.get("tools"), max_output_tokens=sent.get("max_output_tokens")
    )
    events = parser.feed((LLAMA / f"responses_{name}.sse").read_bytes())
    events += parser.end()
    return events, parser.result


def without_ids(value: object) -> str:
    """``repr(value)`` with the per-run ids and timestamps blanked."""
    return _CREATED.sub("created_at=T", _IDS.sub(r"\1_X", repr(value)))


def view(result: chunkwise.responses.Result) -> dict[str, Any]:
    """Everything a result says that does not change from run to run."""
    for item in result.output:
        assert item.id is not None
        assert item.id.startswith("fc_" if item.type == "function_call" else "msg_")
        if item.call is not None:
            assert item.call.call_id is not None and item.call.call_id.startswith("call_")
    assert result.id is not None and result.id.startswith("resp_")
    return {
        "status": result.status,
        "response_status": result.response_status,
        "incomplete_reason": result.incomplete_reason,
        "reason": result.reason,
        "model": result.model,
        "output_text": result.output_text,
        "usage": result.usage,
        # Kinds only: a detail may quote an id ("response id changed").
        "anomalies": [anomaly.kind for anomaly in result.anomalies],
        "error": without_ids(result.error),
        "output": [without_ids(attrs_without_data(item)) for item in result.output],
    }


def attrs_without_data(item: chunkwise.responses.OutputItem) -> tuple[Any, ...]:
    call = item.call
    return (
        item.index,
        item.type,
        item.status,
        item.role,
        item.done,
        item.content,
        None
        if call is None
        else (call.name, call.arguments, call.finished, call.completed, call.validated, call.error),
    )


@pytest.mark.parametrize("name", STREAMS)
async def test_complete_response_gives_the_captured_result(
    endpoint: chunkwise.Endpoint, name: str
) -> None:
    result = await chunkwise.responses.complete(endpoint, request(name))
    _, expected = captured(name)
    assert view(result) == view(expected)


async def drain(channel: trio.MemoryReceiveChannel[chunkwise.Event], into: list[Any]) -> None:
    async with channel:
        async for event in channel:
            into.append(event)


async def test_subscribers_get_the_captured_events(endpoint: chunkwise.Endpoint) -> None:
    everything: list[chunkwise.Event] = []
    text: list[chunkwise.Event] = []
    lifecycle: list[chunkwise.Event] = []
    async with chunkwise.responses.open_stream(endpoint, request("text")) as stream:
        assert stream.status_code == 200
        assert stream.headers["content-type"] == "text/event-stream"
        stream.start_soon(drain, stream.subscribe(), everything)
        stream.start_soon(drain, stream.subscribe("choice"), text)
        stream.start_soon(drain, stream.subscribe("lifecycle"), lifecycle)
        result = await stream.result()

    expected_events, expected = captured("text")
    assert result.output_text == SENTENCE
    assert view(result) == view(expected)
    # The parser's events, as the sans-IO parse of the capture gives them
    # (after the transport's ResponseStarted).
    started, *rest = everything
    assert isinstance(started, chunkwise.HeadReceived) and started.status_code == 200
    # The terminal events' results differ in their timings (measured live,
    # None in a sans-IO parse): their contents are compared by view() above.
    assert [without_ids(e) for e in rest[:-1]] == [without_ids(e) for e in expected_events[:-1]]
    assert type(rest[-1]) is type(expected_events[-1])
    assert text == [e for e in rest if isinstance(e, TEXT_FAMILY)]
    assert "".join(e.text for e in text if isinstance(e, chunkwise.responses.TextDelta)) == SENTENCE
    assert [type(e) for e in lifecycle] == [
        chunkwise.HeadReceived,
        chunkwise.responses.StatusChanged,
        chunkwise.UsageReported,
        chunkwise.StreamCompleted,
    ]
    assert everything[-1] is text[-1] is lifecycle[-1]


async def test_tool_call_subscriber(endpoint: chunkwise.Endpoint) -> None:
    calls: list[chunkwise.Event] = []
    async with chunkwise.responses.open_stream(endpoint, request("tool")) as stream:
        stream.start_soon(drain, stream.subscribe("tool_call"), calls)
        result = await stream.result()

    [call] = result.function_calls
    assert call.name == "get_weather"
    assert call.parse_arguments() == {"city": "Zürich"}
    assert call.call_id is not None and call.call_id.startswith("call_")
    started, *fragments, completed, terminal = calls
    assert isinstance(started, chunkwise.responses.ToolCallStarted)
    assert (started.call_id, started.name) == (call.call_id, "get_weather")
    assert [
        e.fragment for e in fragments if isinstance(e, chunkwise.responses.ToolCallArgumentsDelta)
    ] == ['{"', "city", '": "', "Zürich", '"}']
    assert isinstance(completed, chunkwise.responses.ToolCallCompleted) and completed.call is call
    assert isinstance(terminal, chunkwise.StreamCompleted) and terminal.result is result


async def test_max_output_tokens_reached(endpoint: chunkwise.Endpoint) -> None:
    async with chunkwise.responses.open_stream(endpoint, request("max_output_tokens")) as stream:
        events = [event async for event in stream]
    result = stream.snapshot
    assert result.status == "complete" and result.response_status == "completed"
    assert result.output_text == SENTENCE[: SENTENCE.index("ñ")]
    [anomaly] = result.anomalies
    assert anomaly.kind == "max_output_tokens reached"
    assert [type(e) for e in events[-2:]] == [chunkwise.AnomalyDetected, chunkwise.StreamCompleted]


async def test_mid_stream_error(endpoint: chunkwise.Endpoint) -> None:
    async with chunkwise.responses.open_stream(endpoint, request("error_mid_stream")) as stream:
        assert stream.status_code == 200
        events = [event async for event in stream]
    result = stream.snapshot
    assert result.status == "failed"
    error = result.server_error
    assert error is not None
    assert (error.message, error.code) == ("context shift cannot be used for shared prompt", 500)
    assert len(result.output) == 2
    failed = events[-1]
    assert isinstance(failed, chunkwise.StreamFailed) and failed.error is error


@pytest.mark.parametrize(
    ("extra", "status", "message"),
    [
        ({"previous_response_id": "resp_1"}, 400, "does not support 'previous_response_id'"),
        ({"input": "Hi " * 300}, 400, "exceeds the available context size"),
    ],
)
async def test_errors_before_streaming_are_http_errors(
    endpoint: chunkwise.Endpoint, extra: dict[str, Any], status: int, message: str
) -> None:
    with pytest.raises(chunkwise.HTTPStatusError) as raised:
        async with chunkwise.responses.open_stream(endpoint, {**request("text"), **extra}):
            pytest.fail("no stream expected")  # pragma: no cover
    assert raised.value.status_code == status
    assert raised.value.error is not None and message in raised.value.error.message

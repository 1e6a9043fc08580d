"""chunkwise's trio client against a real llama-server's ``/v1/completions`` (opt-in).

Skipped unless ``CHUNKWISE_LLAMA_SERVER`` names a ``llama-server`` binary
(see ``tests/llama_server/README.md``; ``CHUNKWISE_LLAMA_MODEL`` names the
scripted ``tiny.gguf`` when it is not beside ``build/``)::

    CHUNKWISE_LLAMA_SERVER=/tmp/llama/build/bin/llama-server \\
        .venv/bin/python -m pytest --no-cov tests/live

The server (``endpoint``, ``conftest.py``) starts once for the session with
the arguments the captures were made with
(``tests/data/llama_cpp/completions_server.json``) and gets the captured
requests again: each live result must be the captured stream's result, with
what changes from run to run (the ``chatcmpl-`` id, ``created``,
``system_fingerprint``, ``timings``, the logprobs' values) left aside.  CI has
no llama-server and skips this module.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
import trio

import chunkwise
from helpers.data import DATA
from helpers.reads import parse_completion

if not os.environ.get("CHUNKWISE_LLAMA_SERVER"):
    pytest.skip(
        "set CHUNKWISE_LLAMA_SERVER to a llama-server binary (tests/llama_server/setup.sh)",
        allow_module_level=True,
    )

LLAMA = DATA / "llama_cpp"
STREAMS = ["text", "max_tokens", "prompts", "n", "logprobs", "echo", "suffix", "error_mid_stream"]
SENTENCE = (
    'Hello world!\nThe tiny model streams café, 日本語 🙂 "quotes" back\\slash and jalapeño 😀.'
)


def request(name: str) -> dict[str, Any]:
    """The captured request, without ``stream`` (chunkwise sets it)."""
    loaded: dict[str, Any] = json.loads((LLAMA / f"completions_{name}.request.json").read_bytes())
    loaded.pop("stream")
    return loaded


def captured(name: str) -> tuple[list[chunkwise.Event], chunkwise.completions.Result]:
    return parse_completion([(LLAMA / f"completions_{name}.sse").read_bytes()])


def logprob_tokens(logprobs: Any) -> list[tuple[str, list[str]]] | None:
    """Each token and its alternatives, without the values (the floats are the server's)."""
    if logprobs is None:
        return None
    return [
        (entry["token"], [alternative["token"] for alternative in entry["top_logprobs"]])
        for entry in logprobs["content"]
    ]


def view(result: chunkwise.completions.Result) -> dict[str, Any]:
    """Everything a result says that does not change from run to run."""
    assert result.id is not None and result.id.startswith("chatcmpl-")
    assert result.created is not None and result.system_fingerprint is not None
    error = result.server_error
    return {
        "status": result.status,
        "reason": result.reason,
        "model": result.model,
        "choices": [
            (c.index, c.text, c.finish_reason, c.finished, logprob_tokens(c.logprobs))
            for c in result.choices
        ],
        # Each of several choices ends with its own usage, and they finish in
        # either order: the last one's is the result's (see below).
        "usage": result.usage if len(result.choices) == 1 else "one choice's",
        "done_received": result.done_received,
        "anomalies": [(a.kind, a.count) for a in result.anomalies],
        "error": None if error is None else (error.message, error.code, error.type),
    }


@pytest.mark.parametrize("name", STREAMS)
async def test_complete_completion_gives_the_captured_result(
    endpoint: chunkwise.Endpoint, name: str
) -> None:
    result = await chunkwise.completions.complete(endpoint, request(name))
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
    async with chunkwise.completions.open_stream(endpoint, request("text")) as stream:
        assert stream.status_code == 200
        assert stream.headers["content-type"] == "text/event-stream"
        stream.start_soon(drain, stream.subscribe(), everything)
        stream.start_soon(drain, stream.subscribe("choice"), text)
        stream.start_soon(drain, stream.subscribe("lifecycle"), lifecycle)
        result = await stream.result()

    expected_events, expected = captured("text")
    assert result.text == SENTENCE
    assert view(result) == view(expected)
    started, *rest = everything
    assert isinstance(started, chunkwise.HeadReceived) and started.status_code == 200
    # The parser's events, as the sans-IO parse of the capture gives them, but
    # for the results they carry (ids and timestamps differ).
    assert [type(e) for e in rest] == [type(e) for e in expected_events]
    deltas = [e for e in rest if isinstance(e, chunkwise.completions.TextDelta)]
    assert deltas == [e for e in expected_events if isinstance(e, chunkwise.completions.TextDelta)]
    assert text == [
        e
        for e in rest
        if isinstance(
            e,
            chunkwise.completions.TextDelta
            | chunkwise.chat.ChoiceFinished
            | chunkwise.StreamCompleted,
        )
    ]
    assert "".join(e.text for e in deltas) == SENTENCE
    assert [type(e) for e in lifecycle] == [
        chunkwise.HeadReceived,
        chunkwise.UsageReported,
        chunkwise.StreamCompleted,
    ]
    assert everything[-1] is text[-1] is lifecycle[-1]


async def test_several_prompts_stream_in_parallel(endpoint: chunkwise.Endpoint) -> None:
    async with chunkwise.completions.open_stream(endpoint, request("prompts")) as stream:
        events = [event async for event in stream]
    result = stream.snapshot
    assert result.status == "complete"
    assert [c.index for c in result.choices] == [0, 1]
    for index in (0, 1):
        deltas = [e for e in events if isinstance(e, chunkwise.completions.TextDelta)]
        assert "".join(e.text for e in deltas if e.choice_index == index) == "Hello world!\nThe"
    finished = [e for e in events if isinstance(e, chunkwise.chat.ChoiceFinished)]
    assert sorted((e.choice_index, e.finish_reason) for e in finished) == [
        (0, "length"),
        (1, "length"),
    ]
    # One usage per prompt ("Say hi", "Say hi again"); the last to arrive is the result's.
    reported = [e.usage for e in events if isinstance(e, chunkwise.UsageReported)]
    assert sorted(u["prompt_tokens"] for u in reported) == [4, 9]
    assert result.usage == reported[-1]
    assert [(a.kind, a.count) for a in result.anomalies] == [("null event", 1)]


async def test_mid_stream_error(endpoint: chunkwise.Endpoint) -> None:
    async with chunkwise.completions.open_stream(endpoint, request("error_mid_stream")) as stream:
        assert stream.status_code == 200
        events = [event async for event in stream]
    result = stream.snapshot
    assert result.status == "failed"
    error = result.server_error
    assert error is not None
    assert (error.message, error.code) == ("context shift cannot be used for shared prompt", 500)
    assert [e for e in events if isinstance(e, chunkwise.completions.TextDelta)]
    failed = events[-1]
    assert isinstance(failed, chunkwise.StreamFailed) and failed.error is error


async def test_a_prompt_longer_than_the_slot_is_an_http_error(
    endpoint: chunkwise.Endpoint,
) -> None:
    expected = json.loads((LLAMA / "completions_context_exceeded.json").read_bytes())["error"]
    with pytest.raises(chunkwise.HTTPStatusError) as raised:
        async with chunkwise.completions.open_stream(endpoint, request("context_exceeded")):
            pytest.fail("no stream expected")  # pragma: no cover
    assert raised.value.status_code == expected["code"]
    error = raised.value.error
    assert error is not None
    assert (error.message, error.type) == (expected["message"], expected["type"])

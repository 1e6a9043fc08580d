"""One trace hook around each transport step (:mod:`chunkwise._net.trace`).

Each step calls the hook as it starts and as it ends; the stream's timings are
fed by the same hook, and the terminal event's result is the one place the
final figures are attached.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import pytest
import trio

import chunkwise
from chunkwise._net.http import send_http_request
from chunkwise.testing import ScriptedResponse, open_test_server
from helpers.bodies import choice, chunk, sse

REQUEST = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
BODY = sse(chunk(choice(content="hi", finish_reason="stop")))


async def test_each_step_of_an_attempt_is_traced_in_order() -> None:
    """connect (TCP), send, head, each body read with its stamp, close: started, then complete."""
    seen: list[tuple[str, dict[str, Any]]] = []

    def hook(name: str, info: Mapping[str, Any]) -> None:
        seen.append((name, dict(info)))

    async with open_test_server(ScriptedResponse(body=BODY)) as server:
        response = await send_http_request(server.endpoint(), b"{}", trace=hook)
        while await response.receive_some():
            pass
        await response.aclose()
    names = [name for name, _ in seen]
    assert names[:12] == [
        "attempt.started",
        "attempt.complete",
        "connect.started",
        "connect_tcp.started",
        "connect_tcp.complete",
        "connect.complete",
        "send_request.started",
        "send_request.complete",
        "receive_head.started",
        "receive_head.complete",
        "receive_body.started",
        "receive_body.complete",
    ]
    assert names[-2:] == ["close.started", "close.complete"]
    info = dict(seen)
    assert isinstance(info["receive_head.complete"]["first_byte"], float)
    reads = [i for name, i in seen if name == "receive_body.complete"]
    assert sum(read["bytes"] for read in reads) == len(BODY)
    assert all("arrived" in read for read in reads)


async def test_a_failed_step_is_traced_as_failed_and_the_retry_wait_too() -> None:
    """A refused connection is ``connect.failed``; the wait before the next attempt is ``retry``."""
    seen: list[str] = []
    async with open_test_server(ScriptedResponse(body=BODY)) as server:
        port = server.port
    endpoint = chunkwise.Endpoint(
        f"http://127.0.0.1:{port}/v1",
        retries=chunkwise.Retries(max_retries=1, initial_delay=0.0),
    )
    with pytest.raises(chunkwise.TransportError):
        await send_http_request(endpoint, b"{}", trace=lambda name, info: seen.append(name))
    assert seen.count("connect.failed") == 2
    assert seen.count("attempt.started") == 2
    assert "retry.started" in seen and "retry.complete" in seen


async def test_the_final_result_and_its_terminal_event_carry_the_same_timings() -> None:
    """The stream attaches the figures once: the terminal event's result is the stream's result."""
    async with open_test_server(ScriptedResponse(body=BODY)) as server:
        async with chunkwise.chat.open_stream(server.endpoint(), REQUEST) as stream:
            events = [event async for event in stream]
            result = await stream.result()
    terminal = events[-1]
    assert isinstance(terminal, chunkwise.StreamCompleted)
    assert terminal.result is result
    assert result.timings is not None and result.timings is stream.timings
    assert result.timings.request_sent is not None and result.timings.first_output is not None
    assert trio.current_time() >= result.timings.started


async def test_a_stream_without_a_pool_traces_one_close(caplog: pytest.LogCaptureFixture) -> None:
    """The response is closed once: the later closes (release, the block's exit) are no-ops."""
    caplog.set_level(logging.DEBUG, logger="chunkwise.trace")
    async with open_test_server(ScriptedResponse(body=BODY)) as server:
        async with chunkwise.chat.open_stream(server.endpoint(), REQUEST) as stream:
            await stream.result()
    closes = [r for r in caplog.records if r.getMessage().startswith("close.started")]
    assert len(closes) == 1

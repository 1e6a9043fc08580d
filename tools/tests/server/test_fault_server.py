"""Answers failing on purpose (``Faults``), read by chunkwise: retried before output, never after.

For the three APIs and every way of :data:`FAULT_WAYS`: an answer failing
before its first output is asked for again, every attempt saying its fault in
its head; one failing after it is not; a share of failures with a seed
completes every stream, the same way each time.
"""

from __future__ import annotations

import random
from typing import Any

import attrs
import pytest
import trio

import chunkwise
from chunkwise import HeadReceived, Retries, Retrying, Timeouts
from chunkwise_tools.server import FAULT_HEADER, FAULT_WAYS, Faults, ServerOptions, open_chat_server

FAST = Retries(max_retries=2, initial_delay=0.01, max_delay=0.02)
APIS: dict[str, tuple[Any, dict[str, Any]]] = {
    "chat": (chunkwise.chat, {"model": "text", "messages": [{"role": "user", "content": "hi"}]}),
    "completions": (chunkwise.completions, {"model": "text", "prompt": "hi"}),
    "responses": (chunkwise.responses, {"model": "text", "input": "hi"}),
}


async def read(
    api: str, faults: Faults, streams: int = 1, retries: Retries = FAST
) -> list[tuple[Any, list[Any]]]:
    """``streams`` answers one after another: each one's result and events."""
    namespace, request = APIS[api]
    read: list[tuple[Any, list[Any]]] = []
    async with open_chat_server(ServerOptions(faults=faults)) as server:
        endpoint = server.endpoint(retries=retries, timeouts=Timeouts(idle=0.2))
        for _ in range(streams):
            with trio.fail_after(10):
                async with namespace.open_stream(endpoint, request) as stream:
                    events = [event async for event in stream]
            read.append((stream.snapshot, events))
    return read


def faults_said(events: list[Any]) -> list[str | None]:
    return [dict(e.headers).get(FAULT_HEADER) for e in events if type(e) is HeadReceived]


@pytest.mark.parametrize("way", list(FAULT_WAYS))
@pytest.mark.parametrize("api", list(APIS))
async def test_an_answer_failing_before_output_is_asked_for_again(api: str, way: str) -> None:
    [(result, events)] = await read(api, Faults(before_output=1.0, ways=(way,)))
    # Every attempt failed the same way, and each was retried while retries were left.
    assert faults_said(events) == [f"before-output {way}"] * 3
    assert [e.attempt for e in events if type(e) is Retrying] == [2, 3]
    assert result.timings.attempts == 3 and result.status != "complete"
    assert not [e for e in events if e.is_output]


@pytest.mark.parametrize("way", list(FAULT_WAYS))
@pytest.mark.parametrize("api", list(APIS))
async def test_an_answer_failing_after_output_is_never_asked_again(api: str, way: str) -> None:
    [(result, events)] = await read(api, Faults(after_output=1.0, ways=(way,)))
    assert faults_said(events) == [f"after-output {way}"]
    assert not [e for e in events if type(e) is Retrying]
    assert result.timings.attempts == 1 and result.status != "complete"
    assert [e for e in events if e.is_output]  # the output it sent is kept


@pytest.mark.parametrize("api", list(APIS))
async def test_a_share_of_failures_before_output_still_completes_every_stream(api: str) -> None:
    [(_, whole)] = await read(api, Faults())
    faults = Faults(before_output=0.4, seed=7)
    got = await read(api, faults, streams=12, retries=attrs.evolve(FAST, max_retries=8))
    assert all(result.status == "complete" for result, _ in got)
    # Each answer's output once: nothing of a failed attempt, nothing twice.
    assert all(text(events) == text(whole) for _, events in got)
    retried = sum(len([e for e in events if type(e) is Retrying]) for _, events in got)
    # What the seed draws (rule 1), in request order: one per attempt.
    rand = random.Random(7)
    expected = 0
    for _ in got:
        while faults.draw(rand) is not None:
            expected += 1
    assert retried == expected > 0


def text(events: list[Any]) -> str:
    return "".join(getattr(e, "text", "") for e in events if e.is_output)

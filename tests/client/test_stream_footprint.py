"""What an open stream keeps: bench/load.py holds 10,000 at once, so per-stream
objects are kept few and small.  Structural checks, not measurements: the
objects a stream owns have no instance dict, and nothing that is only needed
before the response arrives (the prepared request) lives as long as the stream."""

from __future__ import annotations

import gc
import types
from typing import Any

import pytest
import trio
import trio.testing

import chunkwise
from chunkwise import _fanout, _stream
from chunkwise._core import text as _text
from chunkwise._net import http as _http
from chunkwise._net import http11 as _http11
from chunkwise._net import tasks as _tasks
from chunkwise._net.pool import ConnectionPool
from chunkwise._net.request import Request
from chunkwise.chat import _stream as chat_stream
from chunkwise.responses import _stream as responses_stream
from chunkwise.testing import RecordedRequest, ResponseWriter
from helpers.bodies import choice, chunk, sse
from helpers.servers import serving

ENDPOINT = chunkwise.Endpoint(base_url="http://127.0.0.1:9/v1", api_key="sk-test-secret")
REQUEST = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
FIRST = sse(chunk(choice(role="assistant", content="Hello")), done=False)


@pytest.mark.parametrize(
    "cls",
    [
        _http11.Connection,
        _http.HTTPResponse,
        _fanout.Broadcaster,
        _fanout._Subscriber,
        _text.Fragments,
        _tasks.exceptions_unwrapped,
    ],
)
def test_per_stream_objects_have_no_instance_dict(cls: type) -> None:
    # Every class in the MRO but object declares __slots__, and none of them "__dict__".
    for klass in cls.__mro__[:-1]:
        assert "__dict__" not in vars(klass).get("__slots__", ("__dict__",))


def live_requests() -> list[Request]:
    gc.collect()
    return [o for o in gc.get_objects() if type(o) is Request]


async def test_an_open_stream_keeps_no_prepared_request(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        await writer.start(200)
        await writer.write(FIRST)
        await trio.sleep_forever()  # the stream stays open

    assert live_requests() == []
    async with serving(handler) as (client, _):
        async with chunkwise.chat.open_stream(ENDPOINT, REQUEST, transport=client) as stream:
            async for event in stream:
                if isinstance(event, chunkwise.chat.TextDelta):
                    break
            assert live_requests() == []
            stream.cancel()


def held_by_open_http_response(obj: object) -> bool:
    """Whether ``open_http_response``'s suspended frame refers to ``obj``."""
    gc.collect()
    for referrer in gc.get_referrers(obj):
        code = getattr(referrer, "f_code", None) or getattr(referrer, "ag_code", None)
        if getattr(code, "co_name", None) == "open_http_response":
            return True
    return False


async def test_the_http_layer_keeps_no_request_body_while_streaming(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        await writer.start(200)
        await writer.write(FIRST)
        await trio.sleep_forever()

    body = b'{"model": "m", "stream": true, "messages": []}'
    async with serving(handler) as (client, _):
        async with _http.open_http_response(ENDPOINT, body, transport=client) as response:
            assert await response.receive_some()
            assert not held_by_open_http_response(body)


def live_events() -> int:
    gc.collect()
    return sum(type(o) is trio.Event for o in gc.get_objects())


@pytest.mark.parametrize("listener", ["subscriber", "result"])
async def test_a_stream_being_read_holds_one_trio_event(
    listener: str, autojump_clock: trio.testing.MockClock
) -> None:
    # The one a caller of result() waits on.  Waiting for a first listener and
    # for the last consumer are events made only while somebody waits for them.
    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        await writer.start(200)
        await writer.write(FIRST)
        await trio.sleep_forever()

    async with serving(handler) as (client, _), trio.open_nursery() as nursery:
        before = live_events()
        async with chunkwise.chat.open_stream(ENDPOINT, REQUEST, transport=client) as stream:
            if listener == "subscriber":
                channel = stream.subscribe()
                while not isinstance(await channel.receive(), chunkwise.chat.TextDelta):
                    pass
            else:
                nursery.start_soon(stream.result)
                await trio.testing.wait_all_tasks_blocked()
                assert stream.snapshot.content == "Hello"
            assert live_events() - before == 1
            stream.cancel()


async def test_the_reader_waits_for_a_late_first_listener(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Nobody listens for a while: the reader waits without reading, then the
    # first subscriber still receives everything from ResponseStarted on.
    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        await writer.start(200)
        await writer.write(FIRST + sse(chunk(choice(finish_reason="stop")), done=True))

    async with serving(handler) as (client, _):
        async with chunkwise.chat.open_stream(ENDPOINT, REQUEST, transport=client) as stream:
            await trio.sleep(5)
            assert stream.snapshot.choices == ()
            events = [event async for event in stream.subscribe()]
    assert isinstance(events[0], chunkwise.HeadReceived)
    assert isinstance(events[-1], chunkwise.StreamCompleted)
    assert stream.snapshot.content == "Hello"


def live_generators() -> int:
    """Async generators and generator context managers alive now."""
    gc.collect()
    return sum(
        isinstance(o, types.AsyncGeneratorType)
        or type(o).__module__ == "contextlib"  # what @(async)contextmanager makes
        for o in gc.get_objects()
    )


@pytest.mark.parametrize("api", [chat_stream.API, responses_stream.API], ids=["chat", "responses"])
@pytest.mark.parametrize("pooled", [False, True], ids=["alone", "pooled"])
async def test_an_open_stream_holds_no_generator_or_context_manager_but_its_own(
    api: _stream.Api[Any], pooled: bool, autojump_clock: trio.testing.MockClock
) -> None:
    # The stream's own ``async with`` is a StreamBlock: no @asynccontextmanager
    # generator is alive for the HTTP response or the stream.
    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        await writer.start(200)
        await writer.write(FIRST)
        await trio.sleep_forever()

    pool = ConnectionPool[_http11.Connection]() if pooled else None
    async with serving(handler) as (client, _):
        before = live_generators()
        block = _stream.open_stream(api, ENDPOINT, REQUEST, transport=client, pool=pool)
        async with block as stream:
            await stream.subscribe().receive()
            assert live_generators() == before
            assert type(block) is _stream.StreamBlock
            stream.cancel()

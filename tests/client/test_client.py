"""chunkwise.Client over real loopback sockets: keep-alive reuse, and retries before the stream.

The pool's bookkeeping is tested alone in test_pool_rules.py and the retry rules in
test_retry_rules.py; here the same rules are checked end to end, counting the
connections the test server accepted.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
import trio

import chunkwise
from chunkwise import Client, HTTPStatusError, Retries, TransportError
from chunkwise._net.connect import Origin
from chunkwise._net.http11 import Connection
from chunkwise._net.request import prepare_request
from chunkwise.testing import (
    LoopbackServer,
    RecordedRequest,
    ResponseWriter,
    ScriptedResponse,
    open_test_server,
)
from helpers.bodies import choice, chunk
from helpers.data import KEY

REQUEST: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
WORDS = ["Hello", ", ", "world"]
STREAM = ScriptedResponse.sse(
    [chunk(choice(content=word)) for word in WORDS] + [chunk(choice(finish_reason="stop"))]
)
FAST = Retries(max_retries=2, initial_delay=0.01, max_delay=0.05)


def connection_of(server: LoopbackServer, request_number: int) -> int:
    """The index of the connection that carried the n-th request."""
    request = server.requests[request_number]
    return next(c.index for c in server.connections if any(r is request for r in c.requests))


def client_for(server: LoopbackServer, **kwargs: Any) -> Client:
    retries = kwargs.pop("retries", Retries(max_retries=0))
    return Client(server.endpoint(retries=retries, api_key=KEY), **kwargs)


# -- keep-alive -----------------------------------------------------------------


async def test_five_sequential_requests_share_one_connection() -> None:
    async with open_test_server(STREAM) as server, client_for(server) as client:
        for _ in range(5):
            result = await client.chat.complete(REQUEST)
            assert result.status == "complete" and result.content == "".join(WORDS)
        assert len(server.requests) == 5
        assert len(server.connections) == 1
        assert client.idle_connections == 1


async def test_streams_through_the_client_give_their_connection_back() -> None:
    async with open_test_server(STREAM) as server, client_for(server) as client:
        for _ in range(3):
            async with client.chat.open_stream(REQUEST) as stream:
                texts = [e.text async for e in stream if isinstance(e, chunkwise.chat.TextDelta)]
            assert texts == WORDS
        assert len(server.connections) == 1


async def test_without_a_client_every_request_has_its_own_connection() -> None:
    async with open_test_server(STREAM) as server:
        for _ in range(3):
            await chunkwise.chat.complete(server.endpoint(), REQUEST)
        assert len(server.connections) == 3
        await server.wait_client_closed()


async def test_an_abandoned_stream_closes_its_connection() -> None:
    slow = ScriptedResponse(body=STREAM.body, write_sizes=40, delay=0.05)
    async with open_test_server([slow, STREAM]) as server, client_for(server) as client:
        async with client.chat.open_stream(REQUEST) as stream:
            async for event in stream:
                if isinstance(event, chunkwise.chat.TextDelta):
                    break  # leave mid-body
        with trio.fail_after(5):
            await server.connections[0].client_closed.wait()
        assert client.idle_connections == 0
        await client.chat.complete(REQUEST)
        assert connection_of(server, 1) == 1


@pytest.mark.parametrize(
    "headers",
    [{"Connection": "close"}, {"Connection": "Close"}],
)
async def test_a_response_saying_connection_close_is_not_kept(headers: dict[str, str]) -> None:
    closing = ScriptedResponse(body=STREAM.body, headers=headers)
    async with open_test_server(closing) as server, client_for(server) as client:
        await client.chat.complete(REQUEST)
        await client.chat.complete(REQUEST)
        assert len(server.connections) == 2
        assert client.idle_connections == 0


async def test_a_close_delimited_body_is_not_kept() -> None:
    closing = ScriptedResponse(body=STREAM.body, framing="close")
    async with open_test_server(closing) as server, client_for(server) as client:
        await client.chat.complete(REQUEST)
        await client.chat.complete(REQUEST)
        assert len(server.connections) == 2


@pytest.mark.parametrize("reset", [False, True], ids=["FIN", "RST"])
async def test_an_idle_connection_the_server_closed_is_not_used(reset: bool) -> None:
    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        await writer.play(STREAM)
        writer.close_after(reset=reset)  # keep-alive in the headers, closed all the same

    async with open_test_server(handler) as server, client_for(server) as client:
        await client.chat.complete(REQUEST)
        assert client.idle_connections == 1
        # The server's FIN follows its response at once; on loopback it has
        # arrived well within this.  The pool must notice it before reuse.
        await trio.sleep(0.2)
        result = await client.chat.complete(REQUEST)
        assert result.status == "complete"
        assert connection_of(server, 1) == 1
        assert len(server.requests) == 2  # never sent on the dead connection


async def test_a_reused_connection_that_fails_before_any_response_byte_is_resent_once() -> None:
    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        connection = next(c for c in server.connections if c.requests[-1] is request)
        if connection.index == 0 and len(connection.requests) == 2:
            await writer.disconnect()  # read the request, then hung up: the reuse race
            return
        await writer.play(STREAM)

    async with open_test_server(handler) as server, client_for(server) as client:
        await client.chat.complete(REQUEST)
        result = await client.chat.complete(REQUEST)  # retries are off: the re-send is free
        assert result.status == "complete"
        assert [connection_of(server, n) for n in range(3)] == [0, 0, 1]


async def test_a_reused_connection_that_goes_quiet_is_not_sent_again() -> None:
    # An idle timeout means the server took the request: no free re-send.
    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        if len(server.requests) == 2:
            await trio.sleep_forever()
        await writer.play(STREAM)

    async with open_test_server(handler) as server:
        endpoint = server.endpoint(timeouts=chunkwise.Timeouts(idle=0.2))
        async with Client(endpoint) as client:
            await client.chat.complete(REQUEST)
            with pytest.raises(chunkwise.IdleTimeout):
                await client.chat.complete(REQUEST)
        assert len(server.requests) == 2


async def test_idle_expiry_zero_never_reuses() -> None:
    async with open_test_server(STREAM) as server, client_for(server, idle_expiry=0.0) as client:
        await client.chat.complete(REQUEST)
        await trio.sleep(0.01)
        await client.chat.complete(REQUEST)
        assert len(server.connections) == 2


async def test_max_connections_bounds_the_connections_open_at_once() -> None:
    release = trio.Event()
    open_now = 0
    peak = 0

    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        nonlocal open_now, peak
        open_now += 1
        peak = max(peak, open_now)
        await release.wait()
        await writer.play(STREAM)
        open_now -= 1

    async with open_test_server(handler) as server, client_for(server, max_connections=2) as client:
        async with trio.open_nursery() as nursery:
            for _ in range(5):
                nursery.start_soon(client.chat.complete, REQUEST)
            with trio.fail_after(5):
                await server.wait_requests(2)
            await trio.sleep(0.05)  # a third request would have arrived by now
            assert len(server.requests) == 2
            release.set()
        assert peak == 2
        assert len(server.connections) == 2
        assert len(server.requests) == 5


async def test_waiting_for_a_connection_is_cancellable() -> None:
    never = trio.Event()

    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        await never.wait()

    async with open_test_server(handler) as server, client_for(server, max_connections=1) as client:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.chat.complete, REQUEST)
            await server.wait_requests(1)
            with trio.move_on_after(0.1) as scope:
                await client.chat.complete(REQUEST)
            assert scope.cancelled_caught
            nursery.cancel_scope.cancel()
        assert len(server.requests) == 1


async def test_leaving_the_client_closes_its_idle_connections() -> None:
    async with open_test_server(STREAM) as server:
        async with client_for(server) as client:
            await client.chat.complete(REQUEST)
            assert client.idle_connections == 1
        with trio.fail_after(5):
            await server.wait_client_closed()
        assert client.idle_connections == 0


def test_client_settings_are_checked() -> None:
    endpoint = chunkwise.Endpoint("http://127.0.0.1:1/v1")
    with pytest.raises(ValueError, match="max_connections"):
        Client(endpoint, max_connections=0)
    with pytest.raises(ValueError, match="idle_expiry"):
        Client(endpoint, idle_expiry=-1)
    with pytest.raises(TypeError, match="Endpoint"):
        Client("http://127.0.0.1:1/v1")  # type: ignore[arg-type]
    assert "max_connections=100" in repr(Client(endpoint))


# -- retries ---------------------------------------------------------------------


def error(status: int, **headers: str) -> ScriptedResponse:
    return ScriptedResponse.error(status, f"error {status}", headers=headers)


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503, 504])
async def test_retried_statuses_are_sent_again(status: int) -> None:
    async with open_test_server([error(status), STREAM]) as server:
        result = await chunkwise.chat.complete(server.endpoint(retries=FAST), REQUEST)
        assert result.status == "complete"
        assert len(server.requests) == 2


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
async def test_other_statuses_are_raised_at_once(status: int) -> None:
    async with open_test_server([error(status), STREAM]) as server:
        with pytest.raises(HTTPStatusError) as info:
            await chunkwise.chat.complete(server.endpoint(retries=FAST), REQUEST)
        assert info.value.status_code == status and info.value.attempts == 1
        assert len(server.requests) == 1


async def test_x_should_retry_overrides_the_status_both_ways() -> None:
    responses = [error(503, **{"x-should-retry": "false"}), STREAM]
    async with open_test_server(responses) as server:
        with pytest.raises(HTTPStatusError):
            await chunkwise.chat.complete(server.endpoint(retries=FAST), REQUEST)
        assert len(server.requests) == 1
    responses = [error(400, **{"x-should-retry": "true"}), STREAM]
    async with open_test_server(responses) as server:
        await chunkwise.chat.complete(server.endpoint(retries=FAST), REQUEST)
        assert len(server.requests) == 2


async def test_the_servers_retry_after_ms_is_waited_for() -> None:
    responses = [error(429, **{"retry-after-ms": "300"}), STREAM]
    async with open_test_server(responses) as server:
        start = trio.current_time()
        await chunkwise.chat.complete(server.endpoint(retries=FAST), REQUEST)
        assert trio.current_time() - start >= 0.3
        assert len(server.requests) == 2


async def test_a_retry_after_beyond_the_cap_is_raised_at_once() -> None:
    retries = Retries(max_retries=2, max_retry_after=5.0)
    async with open_test_server([error(429, **{"Retry-After": "120"}), STREAM]) as server:
        start = trio.current_time()
        with pytest.raises(HTTPStatusError) as info:
            await chunkwise.chat.complete(server.endpoint(retries=retries), REQUEST)
        assert trio.current_time() - start < 2
        assert info.value.retry_after == 120
        assert len(server.requests) == 1


async def test_the_last_error_says_how_many_attempts_were_made() -> None:
    async with open_test_server(error(503)) as server:
        with pytest.raises(HTTPStatusError) as info:
            await chunkwise.chat.complete(server.endpoint(retries=FAST), REQUEST)
        assert info.value.attempts == 3
        assert str(info.value) == "HTTP 503: error 503 (after 3 attempts)"
        assert len(server.requests) == 3


async def test_nothing_is_retried_after_the_first_byte_of_the_body() -> None:
    cut = ScriptedResponse(body=STREAM.body, disconnect_after=len(STREAM.body) // 2)
    async with open_test_server([cut, STREAM]) as server:
        result = await chunkwise.chat.complete(server.endpoint(retries=FAST), REQUEST)
        assert result.status == "incomplete"
        assert len(server.requests) == 1


async def test_a_refused_port_is_tried_max_retries_plus_one_times_with_growing_delays(
    refused_port: int, caplog: pytest.LogCaptureFixture
) -> None:
    retries = Retries(max_retries=3, initial_delay=0.02, max_delay=1.0)
    endpoint = chunkwise.Endpoint(
        f"http://127.0.0.1:{refused_port}/v1", api_key=KEY, retries=retries
    )
    with caplog.at_level(logging.INFO, logger="chunkwise"), pytest.raises(TransportError) as info:
        await chunkwise.chat.complete(endpoint, REQUEST)
    assert info.value.attempts == 4
    assert "connection refused (after 4 attempts)" in str(info.value)
    messages = [r.getMessage() for r in caplog.records if r.name == "chunkwise"]
    assert len(messages) == 3
    delays = [float(m.split(" in ")[1].split(" s ")[0]) for m in messages]
    # 0.02, 0.04, 0.08, each shortened by at most 25%.
    for delay, full in zip(delays, [0.02, 0.04, 0.08], strict=True):
        assert full * 0.75 <= delay <= full
    assert all("connection refused" in m for m in messages)
    assert not any(KEY in m for m in messages)


async def test_the_wait_between_retries_is_cut_by_the_callers_deadline(refused_port: int) -> None:
    retries = Retries(max_retries=5, initial_delay=30.0, max_delay=30.0)
    endpoint = chunkwise.Endpoint(f"http://127.0.0.1:{refused_port}/v1", retries=retries)
    start = trio.current_time()
    with trio.move_on_after(0.2) as scope:
        await chunkwise.chat.complete(endpoint, REQUEST)
    assert scope.cancelled_caught
    assert trio.current_time() - start < 2


async def test_a_client_retries_too_and_keeps_the_good_connection() -> None:
    async with open_test_server([error(503), STREAM, STREAM]) as server:
        async with client_for(server, retries=FAST) as client:
            await client.chat.complete(REQUEST)
            await client.chat.complete(REQUEST)
        assert len(server.requests) == 3


@pytest.mark.parametrize("reset", [False, True], ids=["FIN", "RST"])
async def test_a_connection_the_peer_closed_is_readable_while_idle(reset: bool) -> None:
    # What the pool checks before reuse, on a real socket: FIN and RST both show.

    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        await writer.play(STREAM)
        writer.close_after(reset=reset)

    async with open_test_server(handler) as server:
        stream = await trio.open_tcp_stream(server.host, server.port)
        conn = Connection(stream, Origin("http", server.host, server.port), idle_timeout=5)
        endpoint = server.endpoint()
        await conn.send_request(prepare_request(endpoint, b"{}"))
        await conn.receive_head()
        while await conn.receive_some():
            pass
        assert conn.reusable  # keep-alive as far as HTTP is concerned
        with trio.fail_after(5):
            await trio.lowlevel.wait_readable(stream.socket)  # the FIN or RST arrives
        assert conn.readable_while_idle()
        await conn.aclose()


# -- every way out gives the pool's slot back ------------------------------------

SLOW = ScriptedResponse(body=STREAM.body, write_sizes=40, delay=0.05)


async def _complete(client: Client) -> None:
    await client.chat.complete(REQUEST)


async def _error_status(client: Client) -> None:
    with pytest.raises(HTTPStatusError):
        await client.chat.complete(REQUEST)


async def _not_an_event_stream(client: Client) -> None:
    with pytest.raises(chunkwise.errors.UnexpectedContentType):
        await client.chat.complete(REQUEST)


async def _hung_up_before_the_head(client: Client) -> None:
    with pytest.raises(chunkwise.ConnectionLost):
        await client.chat.complete(REQUEST)


async def _left_mid_body(client: Client) -> None:
    async with client.chat.open_stream(REQUEST) as stream:
        async for event in stream:
            if isinstance(event, chunkwise.chat.TextDelta):
                break


async def _block_raises(client: Client) -> None:
    with pytest.raises(KeyError):
        async with client.chat.open_stream(REQUEST) as stream:
            await stream.subscribe().receive()
            raise KeyError("the caller's own")


async def _cancelled_stream(client: Client) -> None:
    async with client.chat.open_stream(REQUEST) as stream:
        await stream.subscribe().receive()
        stream.cancel()
    assert stream.snapshot.status == "incomplete"


async def _deadline_before_the_head(client: Client) -> None:
    with trio.move_on_after(0.05) as scope:
        await client.chat.complete(REQUEST)
    assert scope.cancelled_caught


async def _hang_up(request: RecordedRequest, writer: ResponseWriter) -> None:
    await writer.disconnect()


async def _late_head(request: RecordedRequest, writer: ResponseWriter) -> None:
    await trio.sleep(0.5)
    await writer.play(STREAM)


WAYS_OUT: dict[str, tuple[Any, Any]] = {
    "complete": (STREAM, _complete),
    "error status": (ScriptedResponse.error(400, "bad request"), _error_status),
    "retried error status": (ScriptedResponse.error(503, "busy"), _error_status),
    "not an event stream": (
        ScriptedResponse(body=b"hello", content_type="text/plain"),
        _not_an_event_stream,
    ),
    "hung up before the head": (_hang_up, _hung_up_before_the_head),
    "left mid-body": (SLOW, _left_mid_body),
    "block raises": (SLOW, _block_raises),
    "stream cancelled": (SLOW, _cancelled_stream),
    "deadline before the head": (_late_head, _deadline_before_the_head),
}


@pytest.mark.parametrize("way", WAYS_OUT)
async def test_every_way_a_request_ends_gives_its_slot_back(way: str) -> None:
    # With one slot, a request whose slot was not given back would make the
    # next one wait for ever.
    first, end_it = WAYS_OUT[way]
    handled = 0

    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        nonlocal handled
        handled += 1
        # Retried ways fail both attempts (max_retries=1).
        retried = way in ("retried error status", "hung up before the head")
        if handled <= (2 if retried else 1):
            if callable(first):
                await first(request, writer)
            else:
                await writer.play(first)
        else:
            await writer.play(STREAM)

    retries = Retries(max_retries=1, initial_delay=0.01, max_delay=0.01)
    async with (
        open_test_server(handler) as server,
        client_for(server, max_connections=1, retries=retries) as client,
    ):
        with trio.fail_after(10):
            await end_it(client)
        # Every connection is accounted for: none is left counted in use.
        stats = client.stats
        assert stats.in_use == 0 and stats.open == stats.idle
        assert stats.opened_total == len(server.connections)
        with trio.fail_after(5):
            result = await client.chat.complete(REQUEST)
        assert result.content == "".join(WORDS)
        assert client.stats.in_use == 0

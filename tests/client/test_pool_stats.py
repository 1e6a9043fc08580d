"""Seeing the pool work: ``client.stats`` and the DEBUG log of every connection's life.

Each connection is opened, reused, given back or discarded (and the log says why);
``client.stats`` counts them.  Over real loopback sockets, against the connections
the test server accepted.
"""

from __future__ import annotations

import logging
from typing import Any

import attrs
import pytest
import trio
import trio.testing

import chunkwise
from chunkwise import Client, Retries
from chunkwise.testing import (
    LoopbackServer,
    RecordedRequest,
    ResponseWriter,
    ScriptedResponse,
    open_test_server,
)
from chunkwise.types import PoolStats
from helpers.bodies import choice, chunk
from helpers.data import KEY

REQUEST: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
STREAM = ScriptedResponse.sse([chunk(choice(content="hi", finish_reason="stop"))])
EMPTY = PoolStats(open=0, idle=0, in_use=0, opened_total=0, reused_total=0)


def client_for(server: LoopbackServer, **kwargs: Any) -> Client:
    retries = kwargs.pop("retries", Retries(max_retries=0))
    return Client(server.endpoint(api_key=KEY, retries=retries), **kwargs)


def pool_log(caplog: pytest.LogCaptureFixture, server: LoopbackServer) -> list[str]:
    """The pool's DEBUG lines, the server's address shortened to ``S``."""
    where = f"127.0.0.1:{server.port}"
    return [
        record.getMessage().replace(where, "S")
        for record in caplog.records
        if record.name == "chunkwise" and record.levelno == logging.DEBUG
    ]


def test_pool_stats_is_a_frozen_public_snapshot() -> None:
    assert PoolStats.__module__ == "chunkwise.types"
    stats = PoolStats(open=2, idle=1, in_use=1, opened_total=3, reused_total=4)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        stats.open = 0  # type: ignore[misc]
    with pytest.raises(TypeError):
        PoolStats(2, 1, 1, 3, 4)  # type: ignore[call-arg]  # keywords only


async def test_sequential_requests_open_one_connection_and_reuse_it() -> None:
    async with open_test_server(STREAM) as server, client_for(server) as client:
        assert client.stats == EMPTY
        for _ in range(5):
            await client.chat.complete(REQUEST)
        assert client.stats == PoolStats(open=1, idle=1, in_use=0, opened_total=1, reused_total=4)
        assert len(server.connections) == 1  # the counters say what the server saw
    assert client.stats == attrs.evolve(client.stats, open=0, idle=0)  # closed with the client


async def test_a_stream_holds_its_connection_in_use_until_it_ends() -> None:
    async with open_test_server(STREAM) as server, client_for(server) as client:
        async with client.chat.open_stream(REQUEST) as first:
            assert client.stats == PoolStats(
                open=1, idle=0, in_use=1, opened_total=1, reused_total=0
            )
            async with client.chat.open_stream(REQUEST) as second:
                assert client.stats == PoolStats(
                    open=2, idle=0, in_use=2, opened_total=2, reused_total=0
                )
                await second.result()
            assert client.stats.in_use == 1 and client.stats.idle == 1
            await first.result()
        assert client.stats == PoolStats(open=2, idle=2, in_use=0, opened_total=2, reused_total=0)


async def test_the_log_tells_each_connections_life(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="chunkwise")
    closing = attrs.evolve(STREAM, headers={"Connection": "close"})
    async with (
        open_test_server([STREAM, STREAM, closing, STREAM]) as server,
        client_for(server) as client,
    ):
        await client.chat.complete(REQUEST)  # opened, given back
        await client.chat.complete(REQUEST)  # reused, given back
        await client.chat.complete(REQUEST)  # reused, discarded: the server closes it
        await client.chat.complete(REQUEST)  # a second connection, given back
    lines = pool_log(caplog, server)
    assert lines[0] == "connection 1 to S opened"
    assert lines[1] == "connection 1 to S given back (1 idle)"
    assert lines[2].startswith("connection 1 to S reused after ")
    assert lines[2].endswith(" s idle")
    assert lines[3] == "connection 1 to S given back (1 idle)"
    assert lines[4].startswith("connection 1 to S reused after ")
    assert lines[5:] == [
        "connection 1 to S discarded: the server ends the connection after this response "
        "(Connection: close, HTTP/1.0, or a body that ends when the connection does)",
        "connection 2 to S opened",
        "connection 2 to S given back (1 idle)",
        "connection 2 to S discarded: the client is closed",
    ]


async def test_an_expired_idle_connection_is_discarded_and_says_why(
    caplog: pytest.LogCaptureFixture, autojump_clock: trio.testing.MockClock
) -> None:
    caplog.set_level(logging.DEBUG, logger="chunkwise")
    async with open_test_server(STREAM) as server, client_for(server, idle_expiry=5) as client:
        await client.chat.complete(REQUEST)
        await trio.sleep(6)
        await client.chat.complete(REQUEST)
        assert client.stats == PoolStats(open=1, idle=1, in_use=0, opened_total=2, reused_total=0)
    lines = pool_log(caplog, server)
    assert lines[2] == "connection 1 to S discarded: idle for 6 s, longer than idle_expiry (5 s)"
    assert lines[3] == "connection 2 to S opened"


async def test_a_connection_the_server_closed_while_idle_is_discarded_and_says_why(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="chunkwise")

    async def then_close(request: RecordedRequest, writer: ResponseWriter) -> None:
        await writer.play(STREAM)
        writer.close_after()  # keep-alive in the headers, closed all the same

    async with open_test_server(then_close) as server, client_for(server) as client:
        await client.chat.complete(REQUEST)
        # The server's FIN follows its response at once; on loopback it has
        # arrived well within this (as in test_client.py).
        await trio.sleep(0.2)
        await client.chat.complete(REQUEST)
    assert (
        "connection 1 to S discarded: the server closed it (or sent something) while it was idle"
        in pool_log(caplog, server)
    )


async def test_limits_discard_the_longest_idle_and_say_which_limit(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="chunkwise")
    async with open_test_server(STREAM) as server:
        async with client_for(server, max_idle_connections=1) as client:
            async with client.chat.open_stream(REQUEST) as a, client.chat.open_stream(REQUEST) as b:
                await a.result()
                await b.result()
        assert (
            "connection 1 to S discarded: more idle connections than max_idle_connections"
            in pool_log(caplog, server)
        )
        caplog.clear()
        async with client_for(server, max_idle_connections=0) as client:
            await client.chat.complete(REQUEST)
            assert client.stats == PoolStats(
                open=0, idle=0, in_use=0, opened_total=1, reused_total=0
            )
        assert pool_log(caplog, server)[-1] == (
            "connection 1 to S discarded: max_idle_connections is 0"
        )


async def test_an_abandoned_stream_and_a_failed_attempt_are_discarded_and_say_why(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="chunkwise")
    slow = ScriptedResponse(body=STREAM.body, write_sizes=5, delay=0.05)
    script = [slow, ScriptedResponse.error(500, "boom"), STREAM]
    async with open_test_server(script) as server, client_for(server) as client:
        async with client.chat.open_stream(REQUEST):
            pass  # left before the end
        with pytest.raises(chunkwise.HTTPStatusError):
            await client.chat.complete(REQUEST)
        await client.chat.complete(REQUEST)
        assert client.stats == PoolStats(open=1, idle=1, in_use=0, opened_total=3, reused_total=0)
    lines = pool_log(caplog, server)
    assert "connection 1 to S discarded: the response was closed before its end" in lines
    assert "connection 2 to S discarded: the attempt failed (HTTPStatusError)" in lines


async def test_a_proxy_is_named_in_the_log_with_its_password_masked(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="chunkwise")
    async with open_test_server(STREAM) as proxy:
        endpoint = chunkwise.Endpoint(
            "http://api.invalid:8080/v1", proxy=f"http://u:pw-SECRET@127.0.0.1:{proxy.port}"
        )
        async with Client(endpoint) as client:
            await client.chat.complete(REQUEST)
    first = pool_log(caplog, proxy)[0]
    assert first == "connection 1 to api.invalid:8080 via http://u:***@S opened"
    assert "pw-SECRET" not in caplog.text

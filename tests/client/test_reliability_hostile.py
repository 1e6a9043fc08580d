"""Hostile and broken servers, end to end through open_chat_stream / complete_chat.

Each test states one typed outcome.  Low-level checks of the HTTP layer live in
tests/test_http.py; these go through the whole client and also check what the
caller sees: the exception type or the result's status, the partial output, and
that the connection is closed (the peer observes EOF).

Servers that must be paced (a byte per second, bytes without end) are handlers
served by :func:`chunkwise.testing.serve_stream` over
:func:`trio.testing.lockstep_stream_pair` with the autojump clock: virtual time
makes them deterministic, and a lockstep stream hands the peer's bytes over only
as the client reads them, so counting what the client read proves the client
stopped (memory stays bounded).  The rest use the real loopback server.
"""

from __future__ import annotations

import datetime
import gzip
import ssl
from collections.abc import Awaitable, Callable
from contextlib import suppress
from typing import Any

import pytest
import trio
import trio.testing
import trustme

import chunkwise
from chunkwise import (
    HTTPStatusError,
    IncompleteReason,
    RemoteProtocolError,
    Timeouts,
    TransportError,
)
from chunkwise.errors import EventTooLarge, UnexpectedContentEncoding
from chunkwise.testing import (
    RecordedRequest,
    ResponseWriter,
    Script,
    ScriptedResponse,
    open_test_server,
)
from helpers.bodies import choice, chunk, sse
from helpers.servers import TrackedStream, serving

KEY = "sk-hostile-0123456789abcdef"
REQUEST: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
PIECES = ["Hé", "llo, wö", "rld 中文", " 😀"]
TEXT = "".join(PIECES)
BODY = sse(
    chunk(choice(role="assistant", content="")),
    *(chunk(choice(content=piece)) for piece in PIECES),
    chunk(choice(finish_reason="stop")),
)
FIRST = sse(chunk(choice(role="assistant", content="Hé")), done=False)
SSE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
CHUNKED_HEAD = SSE_HEAD + b"Transfer-Encoding: chunked\r\n\r\n"
#: Wall-clock bound on any one test's network part: only catches hangs.
BOUND = 30.0


def chunked(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


# --- a paced server over a lockstep memory stream ------------------------------------


async def run_paced(
    script: Script,
    body: Callable[[chunkwise.Endpoint, TrackedStream], Awaitable[Any]],
    *,
    idle: float | None = 600.0,
) -> tuple[Any, TrackedStream]:
    """Run ``body`` (the client) against ``script``; check the client closed."""
    endpoint = chunkwise.Endpoint(
        "http://paced.invalid/v1", api_key=KEY, timeouts=Timeouts(idle=idle)
    )
    async with serving(script, lockstep=True) as (client, server):
        transport = TrackedStream(client)
        outcome = await body(endpoint, transport)
        assert transport.closed  # before open_chat_stream's __aexit__ returned
        await server.client_closed.wait()  # and the server read EOF
    assert len(server.requests) == 1
    return outcome, transport


async def stream_all(
    endpoint: chunkwise.Endpoint, transport: trio.abc.Stream, **kwargs: Any
) -> tuple[list[chunkwise.Event], chunkwise.chat.Result]:
    """Open a stream over ``transport``; collect every event and the result."""
    async with chunkwise.chat.open_stream(
        endpoint, REQUEST, transport=transport, **kwargs
    ) as stream:
        channel = stream.subscribe()
        async with channel:
            events = [event async for event in channel]
        return events, await stream.result()


#: The first event at once, then the body one byte (one chunk) per second.
ONE_BYTE_PER_SECOND = ScriptedResponse(
    body=FIRST + BODY, write_sizes=[len(FIRST), *[1] * len(BODY)], delay=1
)


async def test_one_byte_per_second_ends_at_the_idle_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    (events, result), _ = await run_paced(
        ONE_BYTE_PER_SECOND, lambda ep, t: stream_all(ep, t), idle=0.9
    )
    assert result.status == "incomplete"
    assert result.reason is IncompleteReason.IDLE_TIMEOUT
    assert isinstance(result.error, chunkwise.IdleTimeout)  # what stopped it
    assert result.content == "Hé"  # what arrived before the silence is kept
    assert isinstance(events[-1], chunkwise.StreamIncomplete)
    assert [a.kind for a in result.anomalies] == ["transport error"]


async def test_one_byte_per_second_is_not_idle_and_completes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Every byte resets the idle timer: a slow but live stream is not cut off.
    start = trio.current_time()
    (_events, result), _ = await run_paced(
        ONE_BYTE_PER_SECOND, lambda ep, t: stream_all(ep, t), idle=1.5
    )
    assert result.status == "complete"
    assert result.content == "Hé" + TEXT
    assert trio.current_time() - start >= len(BODY)


async def test_one_byte_per_second_caller_deadline_wins(
    autojump_clock: trio.testing.MockClock,
) -> None:
    streams: list[chunkwise.chat.Stream] = []

    async def client(endpoint: chunkwise.Endpoint, transport: trio.abc.Stream) -> bool:
        with trio.move_on_after(100) as scope:
            async with chunkwise.chat.open_stream(endpoint, REQUEST, transport=transport) as s:
                streams.append(s)
                await s.result()
        return scope.cancelled_caught

    cancelled, _ = await run_paced(ONE_BYTE_PER_SECOND, client, idle=5)
    assert cancelled
    assert trio.current_time() == pytest.approx(100)
    # Read after the block: inside it, the reader may not have recorded the end yet.
    result = streams[0].snapshot
    assert result.status == "incomplete"
    assert result.reason is IncompleteReason.CANCELLED
    assert result.content.startswith("Hé") and TEXT.startswith(result.content[2:])


# --- endless headers, endless event, endless body ------------------------------------


async def endless_headers(request: RecordedRequest, writer: ResponseWriter) -> None:
    await writer.send_raw(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n")
    for i in range(10**9):
        await writer.send_raw(b"X-Filler-%d: %s\r\n" % (i, b"a" * 1000))


async def test_endless_headers_are_bounded_by_h11(autojump_clock: trio.testing.MockClock) -> None:
    async def client(endpoint: chunkwise.Endpoint, transport: trio.abc.Stream) -> Exception:
        with pytest.raises(RemoteProtocolError) as info:
            async with chunkwise.chat.open_stream(endpoint, REQUEST, transport=transport):
                pytest.fail("the block must not be entered")
        return info.value

    error, transport = await run_paced(endless_headers, client)
    assert "invalid HTTP response" in str(error)
    # h11 refuses a head over 16 KiB (max_incomplete_event_size); the client
    # stopped reading right there.
    assert transport.received < 32 * 1024
    assert KEY not in str(error)


@pytest.mark.parametrize(
    ("opening", "filler"),
    [(b"data: ", b"a" * 1000), (b"", b"data: " + b"a" * 994 + b"\n")],
    ids=["one-endless-line", "endless-data-lines"],
)
async def test_endless_event_fails_with_event_too_large(
    autojump_clock: trio.testing.MockClock, opening: bytes, filler: bytes
) -> None:
    async def endless_event(request: RecordedRequest, writer: ResponseWriter) -> None:
        await writer.start()
        await writer.write(FIRST + opening)
        while True:
            await writer.write(filler)

    limit = 64 * 1024
    (events, result), transport = await run_paced(
        endless_event, lambda ep, t: stream_all(ep, t, max_event_size=limit)
    )
    assert result.status == "failed"
    assert isinstance(result.error, EventTooLarge) and result.error.limit == limit
    assert isinstance(events[-1], chunkwise.StreamFailed)
    assert result.content == "Hé"
    # Memory stays bounded: the client stopped reading soon after the limit.
    assert transport.received < limit + 4 * 1024


async def test_body_that_never_ends_caller_deadline_wins() -> None:
    # Real sockets and a real (short) deadline: keep-alive comments keep the
    # connection from ever being idle, so only the caller's deadline ends it.
    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        with suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await writer.start()
            await writer.write(FIRST)
            while True:
                await trio.sleep(0.02)
                await writer.write(b": keep-alive\n\n")

    async with open_test_server(handler) as server:
        endpoint = server.endpoint(api_key=KEY, timeouts=Timeouts(idle=BOUND))
        with trio.fail_after(BOUND):
            async with chunkwise.chat.open_stream(endpoint, REQUEST) as stream:
                # Start the clock once the body flows, so a slow machine cannot
                # make the deadline land before the first event.
                async with stream.subscribe("choice") as channel:
                    assert type(await channel.receive()) is chunkwise.chat.TextDelta
                with trio.move_on_after(0.3) as scope:
                    await stream.result()
            assert scope.cancelled_caught
            await server.wait_client_closed()
    result = stream.snapshot
    assert result.status == "incomplete"
    assert result.reason is IncompleteReason.CANCELLED
    assert result.content == "Hé"


# --- framing and HTTP oddities ------------------------------------------------------------


def raw(data: bytes) -> Callable[[RecordedRequest, ResponseWriter], Awaitable[None]]:
    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        await writer.send_raw(data)

    return handler


async def collect(server: Any, **endpoint_kwargs: Any) -> tuple[list[Any], Any]:
    endpoint = server.endpoint(api_key=KEY, **endpoint_kwargs)
    with trio.fail_after(BOUND):
        async with chunkwise.chat.open_stream(endpoint, REQUEST) as stream:
            channels = [stream.subscribe(), stream.subscribe("choice"), stream.subscribe()]
            received: list[list[chunkwise.Event]] = [[], [], []]

            async def consume(i: int) -> None:
                async with channels[i]:
                    async for event in channels[i]:
                        received[i].append(event)

            for i in range(3):
                stream.start_soon(consume, i)
            result = await stream.result()
        await server.wait_client_closed()
    return received, result


@pytest.mark.parametrize(
    "bad_size_line",
    [b"zz\r\n", b"-1\r\n", b"0x10\r\n", b"\r\n", b"1;" + b"x" * 70000 + b"\r\n"],
    ids=["not-hex", "negative", "0x-prefix", "empty", "endless-extension"],
)
async def test_invalid_chunk_size_fails_the_stream_and_keeps_output(
    bad_size_line: bytes,
) -> None:
    # Before the fix in _stream.py, the RemoteProtocolError escaped the reader
    # task: subscribers got no terminal event and the block raised.
    async with open_test_server(raw(CHUNKED_HEAD + chunked(FIRST) + bad_size_line)) as server:
        received, result = await collect(server)
    assert result.status == "failed"
    assert isinstance(result.error, RemoteProtocolError)
    assert not isinstance(result.error, TransportError)
    assert result.content == "Hé"  # delivered before the bad framing
    for events in received:  # every subscriber got the one terminal event
        assert isinstance(events[-1], chunkwise.StreamFailed)
        assert events[-1].error == result.error


async def test_huge_chunk_size_then_close_is_connection_lost() -> None:
    head = CHUNKED_HEAD + chunked(FIRST) + b"ffffffffffffffffff\r\ndata: x"
    async with open_test_server(raw(head)) as server:
        _received, result = await collect(server)
    assert result.status == "incomplete"
    assert result.reason is IncompleteReason.CONNECTION_LOST
    assert result.content == "Hé"


@pytest.mark.parametrize("truncated", [False, True])
async def test_http_1_0_response_is_close_delimited(truncated: bool) -> None:
    body = BODY[: BODY.index(b"rld")] if truncated else BODY
    response = b"HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + body
    async with open_test_server(raw(response)) as server:
        _, result = await collect(server)
    if truncated:
        # The close ends the body; without finish_reason it is not complete.
        assert result.status == "incomplete"
        assert result.reason is IncompleteReason.UNFINISHED
        assert TEXT.startswith(result.content) and result.content != TEXT
    else:
        assert result.status == "complete"
        assert result.content == TEXT


async def test_informational_responses_before_the_response_are_skipped() -> None:
    script = ScriptedResponse(body=BODY, informational=(100, 102, 103, 103), write_sizes=9)
    async with open_test_server(script) as server:
        received, result = await collect(server)
    assert result.status == "complete" and result.content == TEXT
    assert type(received[0][0]) is chunkwise.HeadReceived
    assert received[0][0].status_code == 200


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
async def test_redirect_is_not_followed_and_the_key_stays_home(status: int) -> None:
    async with (
        open_test_server(ScriptedResponse(body=BODY)) as elsewhere,
        open_test_server(
            ScriptedResponse(
                status=status,
                content_type="text/html",
                headers={"Location": elsewhere.base_url + "/chat/completions"},
                body=b"<a>moved</a>",
                framing="content-length",
            )
        ) as server,
    ):
        endpoint = server.endpoint(api_key=KEY)
        with trio.fail_after(BOUND):
            with pytest.raises(HTTPStatusError) as info:
                await chunkwise.chat.complete(endpoint, REQUEST)
            await server.wait_client_closed()
        assert info.value.status_code == status
        assert len(server.requests) == 1
        assert not elsewhere.requests and not elsewhere.connections


@pytest.mark.parametrize("encoding", ["gzip", "br", "deflate, gzip"])
async def test_unrequested_content_encoding_is_refused(encoding: str) -> None:
    script = ScriptedResponse(body=gzip.compress(BODY), headers={"Content-Encoding": encoding})
    async with open_test_server(script) as server:
        with trio.fail_after(BOUND):
            with pytest.raises(UnexpectedContentEncoding) as info:
                async with chunkwise.chat.open_stream(server.endpoint(api_key=KEY), REQUEST):
                    pytest.fail("the block must not be entered")
            await server.wait_client_closed()
        assert server.requests[0].headers["accept-encoding"] == "identity"
    assert info.value.content_encoding == encoding
    assert isinstance(info.value, RemoteProtocolError)


# --- TLS -------------------------------------------------------------------------------


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def untrusted() -> tuple[ssl.SSLContext, ssl.SSLContext]:
    server_context, _ = chunkwise.testing.tls_contexts()
    return server_context, ssl.create_default_context()  # trusts the system store only


def expired() -> tuple[ssl.SSLContext, ssl.SSLContext]:
    ca = trustme.CA()
    cert = ca.issue_cert(
        "127.0.0.1",
        "localhost",
        not_before=_now() - datetime.timedelta(days=30),
        not_after=_now() - datetime.timedelta(days=1),
    )
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(server_context)
    client_context = ssl.create_default_context()
    ca.configure_trust(client_context)
    return server_context, client_context


def other_host() -> tuple[ssl.SSLContext, ssl.SSLContext]:
    return chunkwise.testing.tls_contexts("api.example.com")


@pytest.mark.parametrize(
    ("contexts", "message"),
    [
        (untrusted, "unable to get local issuer certificate"),
        (expired, "certificate has expired"),
        (other_host, "mismatch"),
    ],
    ids=["untrusted", "expired", "other-host"],
)
async def test_bad_certificate_fails_verification_and_nothing_is_sent(
    contexts: Callable[[], tuple[ssl.SSLContext, ssl.SSLContext]], message: str
) -> None:
    server_context, client_context = contexts()
    async with open_test_server(ScriptedResponse(body=BODY), ssl_context=server_context) as server:
        endpoint = chunkwise.Endpoint(server.base_url, api_key=KEY, ssl_context=client_context)
        with trio.fail_after(BOUND):
            with pytest.raises(TransportError, match="certificate verify failed") as info:
                await chunkwise.chat.complete(endpoint, REQUEST)
            # The server saw a connection but no request: the key was never sent.
            await server.wait_client_closed()
        assert not server.requests
    assert message in str(info.value)
    assert KEY not in str(info.value)
    cause: BaseException | None = info.value
    while cause is not None and not isinstance(cause, ssl.SSLCertVerificationError):
        cause = cause.__cause__ or cause.__context__
    assert isinstance(cause, ssl.SSLCertVerificationError)

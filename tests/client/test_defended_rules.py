"""Client rules that a deliberate-mutation audit found undefended (issue 19).

Each rule below was broken on purpose and the rest of the suite stayed green.
The tests here use the parts a user meets: the retry delay function on a
parsed error, the loopback server (as the API, and as a proxy that answers
``CONNECT`` with a redirect), a served memory stream, and a Client.  Each was
checked to fail with its rule broken; the mutation is named above the test.
"""

from __future__ import annotations

import logging
import math
from contextlib import AbstractAsyncContextManager
from typing import Any

import attrs
import pytest
import trio
import trio.testing

import chunkwise
from chunkwise import (
    Client,
    ConnectionLost,
    EventsDropped,
    HTTPStatusError,
    IdleTimeout,
    ProxyError,
    Retries,
    TerminalEvent,
    Timeouts,
    chat,
)
from chunkwise._core.retries import retry_delay
from chunkwise._net.http import http_status_error
from chunkwise.testing import (
    Framing,
    LoopbackServer,
    RecordedRequest,
    ResponseWriter,
    ScriptedResponse,
    open_test_server,
)
from chunkwise.types import Family, Headers
from helpers.bodies import (
    choice,
    chunk,
    message_item,
    numbered,
    response_object,
    response_sse,
    response_usage,
    sse,
    text_events,
)
from helpers.data import KEY
from helpers.servers import serving

CHAT_REQUEST: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
RESPONSE_REQUEST: dict[str, Any] = {"model": "m", "input": "hi"}
WORDS = ["Hello", ", ", "world"]
CHAT_STREAM = ScriptedResponse.sse(
    [chunk(choice(content=word)) for word in WORDS] + [chunk(choice(finish_reason="stop"))]
)
#: A Responses stream as OpenAI sends it: it ends with response.completed, no [DONE].
RESPONSE_BODY = response_sse(
    *numbered(
        [
            {"type": "response.created", "response": response_object()},
            *text_events(0, "msg_1", WORDS),
            {
                "type": "response.completed",
                "response": response_object(
                    "completed", [message_item("msg_1", "".join(WORDS))], response_usage()
                ),
            },
        ]
    )
)
RESPONSE_STREAM = ScriptedResponse(body=RESPONSE_BODY)
FAST = Retries(max_retries=2, initial_delay=0.01, max_delay=0.05)
#: Guards the tests whose rule, broken, would make the client wait for ever.
BOUND = 20


def request_of(api: str) -> dict[str, Any]:
    return CHAT_REQUEST if api == "chat" else RESPONSE_REQUEST


async def complete(
    api: str, target: Client | chunkwise.Endpoint, request: dict[str, Any] | None = None
) -> str:
    """One request of ``api`` (``"chat"`` or ``"responses"``) to its end; the text it gave."""
    request = request_of(api) if request is None else request
    if isinstance(target, Client):
        if api == "chat":
            return (await target.chat.complete(request)).content
        return (await target.responses.complete(request)).output_text
    if api == "chat":
        return (await chunkwise.chat.complete(target, request)).content
    return (await chunkwise.responses.complete(target, request)).output_text


def open_stream(
    api: str, target: Client | chunkwise.Endpoint, request: dict[str, Any] | None = None
) -> AbstractAsyncContextManager[chunkwise.chat.Stream | chunkwise.responses.Stream]:
    """A stream of ``api`` through a Client or straight to an endpoint."""
    request = request_of(api) if request is None else request
    if isinstance(target, Client):
        if api == "chat":
            return target.chat.open_stream(request)
        return target.responses.open_stream(request)
    if api == "chat":
        return chunkwise.chat.open_stream(target, request)
    return chunkwise.responses.open_stream(target, request)


def connection_of(server: LoopbackServer, request: RecordedRequest) -> int:
    """The index of the connection that carried ``request``."""
    return next(c.index for c in server.connections if any(r is request for r in c.requests))


# -- 1. Retry-After through the retry delay function ------------------------------
# Mutations: `asked > 0` -> `asked >= 0` (a 0 is waited as 0 instead of backing off),
# `asked <= max_retry_after` -> `asked < max_retry_after`, and no cap at all.

CAPPED = Retries(max_retries=2, initial_delay=0.5, max_delay=8.0, max_retry_after=60.0)


def status_error(status: int, **headers: str) -> HTTPStatusError:
    """The error the client raises for this status and these headers (Retry-After parsed)."""
    raw = tuple((name.encode(), value.encode()) for name, value in headers.items())
    return http_status_error(status, "", Headers(raw), b"")


@pytest.mark.parametrize("status", [429, 503])
@pytest.mark.parametrize(
    ("headers", "retries", "delay"),
    [
        # 0 asks for no wait in particular: the usual backoff (0.5 s before jitter).
        ({"Retry-After": "0"}, CAPPED, 0.5),
        ({"Retry-After": "0.0"}, CAPPED, 0.5),
        ({"retry-after-ms": "0"}, CAPPED, 0.5),
        ({"Retry-After": "0.2"}, CAPPED, 0.2),
        ({"retry-after-ms": "200"}, CAPPED, 0.2),
        ({"Retry-After": "60"}, CAPPED, 60.0),  # the cap itself is waited for
        ({"Retry-After": "60.5"}, CAPPED, None),
        ({"Retry-After": "120"}, CAPPED, None),  # beyond the cap: raised at once
        ({"Retry-After": "120"}, Retries(max_retry_after=120.0), 120.0),
        ({"Retry-After": "120"}, Retries(max_retry_after=119.9), None),
        ({"Retry-After": "0.2"}, Retries(max_retry_after=0.1), None),
        ({"Retry-After": "0"}, Retries(max_retry_after=0.0, initial_delay=0.5), 0.5),
        ({"Retry-After": "0.2"}, Retries(max_retries=0), None),  # no retries at all
    ],
)
def test_retry_after_through_the_retry_delay(
    status: int, headers: dict[str, str], retries: Retries, delay: float | None
) -> None:
    failure = status_error(status, **headers)
    assert retry_delay(failure, retries, 0, rand=lambda: 0.0) == delay


@pytest.mark.parametrize(
    ("value", "logged"), [("0", "0.01"), ("0.2", "0.20")], ids=["zero", "fraction"]
)
async def test_the_wait_is_the_retry_after_or_for_zero_the_backoff(
    value: str, logged: str, caplog: pytest.LogCaptureFixture
) -> None:
    # FAST backs off 0.01 s before jitter (logged as 0.01 when rounded).
    responses = [ScriptedResponse.error(429, "slow down", headers={"Retry-After": value})]
    async with open_test_server([*responses, CHAT_STREAM]) as server:
        endpoint = server.endpoint(retries=FAST)
        with caplog.at_level(logging.INFO, logger="chunkwise"):
            assert await complete("chat", endpoint) == "".join(WORDS)
        assert len(server.requests) == 2
    [message] = [r.getMessage() for r in caplog.records if r.name == "chunkwise"]
    assert f" in {logged} s (retry 1 of 2)" in message


async def test_a_retry_after_beyond_the_cap_is_raised_with_what_it_asked() -> None:
    responses = [ScriptedResponse.error(503, "later", headers={"Retry-After": "120"})]
    async with open_test_server([*responses, CHAT_STREAM]) as server:
        endpoint = server.endpoint(retries=Retries(max_retries=2, max_retry_after=60.0))
        with trio.fail_after(BOUND), pytest.raises(HTTPStatusError) as info:
            await complete("chat", endpoint)
        assert info.value.retry_after == 120.0 and info.value.attempts == 1
        assert len(server.requests) == 1


# -- 2. an idle timeout is not retried, with retries on ---------------------------
# Mutation: retry_delay answers an IdleTimeout with a backoff, like a ConnectionLost.

HALF_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"


async def go_quiet(writer: ResponseWriter, sent: bytes) -> None:
    """Take the request, send ``sent`` (nothing, or part of a head), and say no more."""
    if sent:
        await writer.send_raw(sent)
    await trio.sleep_forever()


@pytest.mark.parametrize("sent", [b"", HALF_HEAD], ids=["nothing", "half-head"])
@pytest.mark.parametrize("how", ["no client", "new connection", "reused connection"])
async def test_an_idle_timeout_is_not_retried_with_retries_on(sent: bytes, how: str) -> None:
    reused = how == "reused connection"

    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        if reused and len(server.requests) == 1:
            await writer.play(CHAT_STREAM)
        else:
            await go_quiet(writer, sent)

    async with open_test_server(handler) as server:
        # Retries on: the loopback server's endpoint turns them off by default.
        endpoint = server.endpoint(retries=FAST, timeouts=Timeouts(idle=0.2))
        async with Client(endpoint) as client:
            if reused:
                assert await complete("chat", client) == "".join(WORDS)
            with trio.fail_after(BOUND), pytest.raises(IdleTimeout) as info:
                await complete("chat", endpoint if how == "no client" else client)
        assert info.value.attempts == 1
        assert "attempts" not in str(info.value)
        # The server took the request: asking again could answer it twice.
        assert len(server.requests) == (2 if reused else 1)


# -- 3. a 3xx answer to CONNECT is a ProxyError -------------------------------------
# Mutation: `not 200 <= status < 300` -> `not 200 <= status < 400` in open_tunnel.


@pytest.mark.parametrize("status", [300, 301, 302, 303, 304, 307, 308])
async def test_a_redirect_answer_to_connect_is_a_proxy_error(status: int) -> None:
    # The loopback server plays the proxy: it parses the CONNECT like any request.
    redirect = ScriptedResponse(
        status=status,
        content_type=None,
        headers={"Location": "http://elsewhere.test/"},
        framing="content-length",
    )
    async with open_test_server(redirect) as proxy:
        endpoint = chunkwise.Endpoint(
            "https://api.example.test/v1",
            api_key=KEY,
            proxy=f"http://127.0.0.1:{proxy.port}",
            retries=FAST,
            trust_env=False,
        )
        with trio.fail_after(BOUND), pytest.raises(ProxyError) as info:
            await complete("chat", endpoint)
        [connect] = proxy.requests  # a refusal is not retried
    assert connect.method == "CONNECT" and connect.target == "api.example.test:443"
    assert type(info.value) is ProxyError
    assert info.value.status_code == status and info.value.attempts == 1
    assert f"it answered {status} " in str(info.value)


# -- 4. a reused connection that hangs up inside a response head -------------------
# Mutation: the free re-send of _http.send_http_request no longer asks
# `not conn.response_started` (it then re-sends after response bytes arrived).

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
HEAD_CUTS = [1, 8, 12, 17, 40, len(HEAD)]


@pytest.mark.parametrize("cut", HEAD_CUTS)
async def test_a_reused_connection_cut_inside_the_head_is_never_sent_again(cut: int) -> None:
    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        if len(server.requests) == 2:
            await writer.send_raw(HEAD[:cut])  # then the server closes the connection
        else:
            await writer.play(CHAT_STREAM)

    async with open_test_server(handler) as server:
        # Retries off: only the free re-send (for a server that closed an idle
        # connection before reading the request) could send the POST again.
        async with Client(server.endpoint(api_key=KEY)) as client:
            assert await complete("chat", client) == "".join(WORDS)
            with trio.fail_after(BOUND), pytest.raises(ConnectionLost) as info:
                await complete("chat", client)
            assert await complete("chat", client) == "".join(WORDS)  # a new connection
    assert type(info.value) is ConnectionLost
    assert "before a complete response" in str(info.value)
    assert len(server.requests) == 3
    assert [connection_of(server, r) for r in server.requests] == [0, 0, 1]


# -- 5. Responses parts out of content_index order: see
# tests/sansio/test_response_part_order.py (a sans-IO rule).

# -- 6. a lossy subscriber reports each drop once ---------------------------------
# Mutations: the drop count not reset after a report (so the next report counts the
# old drops again), and a report's count off by one.

ENDPOINT = chunkwise.Endpoint(base_url="http://127.0.0.1:9/v1", api_key="sk-test")
#: The steps of a test: ``n > 0`` publishes n more deltas; ``n < 0`` reads up to -n
#: items from the lossy subscriber.
PATTERNS = {
    "drain-between-floods": [5, -2, 4, -10, 6, -1, 3, -3, 7],
    "one-at-a-time": [1, 1, 1, 1, -1, 1, 1, -4, 1, 1, 1, 1, 1, -2, 1],
    "read-all-each-time": [6, -10, 6, -10, 6, -10, 6],
}


def _flatten(items: list[Any]) -> list[chunkwise.Event]:
    return [event for item in items for event in (item if type(item) is tuple else (item,))]


def replay(published: list[chunkwise.Event], received: list[chunkwise.Event]) -> int:
    """Check that ``received`` is ``published`` with each gap reported once, where it is.

    Returns how many reports there were.
    """
    position = reports = 0
    for before, event in zip([None, *received[:-1]], received, strict=True):
        if type(event) is EventsDropped:
            assert event.count > 0 and type(before) is not EventsDropped
            position += event.count
            reports += 1
        else:
            assert event == published[position], (position, event)
            position += 1
    assert position == len(published)  # delivered plus reported equals published
    return reports


@attrs.frozen(kw_only=True)
class LossyRun:
    """What one pattern of publishing and reading gave a lossy subscriber."""

    #: Everything published for this subscriber (its family), terminal event last.
    published: list[chunkwise.Event]
    #: Everything it received, batches flattened.
    received: list[chunkwise.Event]
    #: Publishes into its empty channel after which the channel was still empty.
    starved: int


async def run_lossy(
    steps: list[int], *, size: int, batched: bool, family: Family | None
) -> LossyRun:
    """Publish and read as ``steps`` say (see PATTERNS), then let the stream end."""
    send_step, receive_step = trio.open_memory_channel[int](0)

    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        # One delta per write, written when the test says so.
        await writer.start()
        written = 0
        async for count in receive_step:
            for _ in range(count):
                await writer.write(sse(chunk(choice(content=f"w{written}")), done=False))
                written += 1
        await writer.write(sse(chunk(choice(finish_reason="stop"))))

    received: list[Any] = []
    published: list[chunkwise.Event] = []
    starved = 0
    async with serving(handler) as (transport, _):
        async with chunkwise.chat.open_stream(ENDPOINT, CHAT_REQUEST, transport=transport) as s:
            witness = s.subscribe(buffer_size=math.inf)  # lossless: sees all that is published
            lossy: trio.MemoryReceiveChannel[Any] = (
                s.subscribe(family, buffer_size=size, lossy=True, batched=True)
                if batched
                else s.subscribe(family, buffer_size=size, lossy=True)
            )
            written = 0
            for step in steps:
                if step > 0:
                    was_empty = lossy.statistics().current_buffer_used == 0
                    await send_step.send(step)
                    written += step
                    # Once the witness has the last delta, the lossy subscriber
                    # was offered it too (every subscriber in one go).
                    while not published or published[-1] != chat.TextDelta(
                        choice_index=0, text=f"w{written - 1}"
                    ):
                        published.append(await witness.receive())
                    starved += was_empty and lossy.statistics().current_buffer_used == 0
                else:
                    for _ in range(-step):
                        try:
                            received.append(lossy.receive_nowait())
                        except trio.WouldBlock:
                            break
            await send_step.aclose()
            published += [event async for event in witness]
            received += [item async for item in lossy]
    if family is not None:
        published = [e for e in published if e.family == family or isinstance(e, TerminalEvent)]
    return LossyRun(published=published, received=_flatten(received), starved=starved)


@pytest.mark.parametrize("size", [1, 3])
@pytest.mark.parametrize("family", [None, "choice"], ids=["all", "choice"])
@pytest.mark.parametrize("batched", [False, True], ids=["events", "batches"])
@pytest.mark.parametrize("pattern", PATTERNS)
async def test_a_lossy_subscriber_reports_each_drop_once(
    pattern: str,
    batched: bool,
    family: Family | None,
    size: int,
    autojump_clock: trio.testing.MockClock,
) -> None:
    run = await run_lossy(PATTERNS[pattern], size=size, batched=batched, family=family)
    assert run.received[-1] == run.published[-1]  # the terminal event
    reports = replay(run.published, run.received)
    assert reports >= 2  # the pattern drops in several places


# A lossy subscriber with ``buffer_size=1`` that read everything was given
# nothing more after its first drop, until the end: the report and the next
# event did not fit in one slot, so every event was dropped (found writing
# the test above; the drop report now rides beside the event).


@pytest.mark.parametrize("size", [1, 2, 3])
@pytest.mark.parametrize("batched", [False, True], ids=["events", "batches"])
@pytest.mark.parametrize("pattern", PATTERNS)
async def test_a_lossy_subscriber_that_read_everything_receives_again_after_a_drop(
    pattern: str, batched: bool, size: int, autojump_clock: trio.testing.MockClock
) -> None:
    run = await run_lossy(PATTERNS[pattern], size=size, batched=batched, family=None)
    assert run.starved == 0
    replay(run.published, run.received)


# -- 7. the request body always says "stream": true --------------------------------
# Mutation: `{**request, "stream": True}` -> `{"stream": True, **request}` in _stream._body.

STREAM_VALUES: dict[str, dict[str, Any]] = {
    "absent": {},
    "false": {"stream": False},
    "true": {"stream": True},
    "null": {"stream": None},
    "string": {"stream": "false"},
}


@pytest.mark.parametrize("given", STREAM_VALUES)
@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_the_request_body_always_says_stream_true(api: str, given: str) -> None:
    request = {**request_of(api), **STREAM_VALUES[given]}
    script = CHAT_STREAM if api == "chat" else RESPONSE_STREAM
    async with open_test_server(script) as server:
        endpoint = server.endpoint(api_key=KEY)
        async with open_stream(api, endpoint, request) as stream:
            await stream.result()
        await complete(api, endpoint, request)
    assert len(server.requests) == 2
    for sent in server.requests:
        body = sent.json()
        assert body["stream"] is True
        assert body == {**request, "stream": True}  # and nothing else changed


# -- 8. a Client reuses its connection for streams that end without [DONE] ---------
# Mutation: the end of the body no longer counts as a clean end in Stream._run
# (`clean_end = True` removed from the `if not data` branch), and for Responses
# the terminal event no longer does either.


def without_done(api: str, framing: Framing) -> ScriptedResponse:
    """A stream of ``api`` that ends with the body: no ``[DONE]`` (Responses never sends one)."""
    if api == "responses":
        return ScriptedResponse(body=RESPONSE_BODY, framing=framing)
    body = sse(
        *[chunk(choice(content=w)) for w in WORDS], chunk(choice(finish_reason="stop")), done=False
    )
    return ScriptedResponse(body=body, framing=framing)


@pytest.mark.parametrize("framing", ["chunked", "content-length"])
@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_a_client_reuses_its_connection_after_a_stream_without_done(
    api: str, framing: Framing
) -> None:
    script = without_done(api, framing)
    assert b"[DONE]" not in script.body
    async with open_test_server(script) as server, Client(server.endpoint(api_key=KEY)) as client:
        for _ in range(2):
            async with open_stream(api, client) as stream:
                result = await stream.result()
            assert result.status == "complete"
            assert await complete(api, client) == "".join(WORDS)
        assert len(server.requests) == 4
        assert len(server.connections) == 1 and client.idle_connections == 1

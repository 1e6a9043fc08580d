"""The API key never leaks: reprs, exception messages and tracebacks, log records,
stream events and results.  (The tools' outputs, a result's JSON, ``--json`` and
``record`` files, are held to the same rule in ``tools/tests/cli/test_secrets_cli.py``.)

Every test uses a distinctive key and searches everything it can reach for it,
and also for its tail (a partially masked echo such as ``sk-...cdef`` would
still be a leak of part of it, so the tail must not appear either).
"""

from __future__ import annotations

import json
import logging
import traceback
from collections.abc import Iterator
from typing import Any

import attrs
import pytest
import trio

import chunkwise
from chunkwise import Endpoint, HTTPStatusError, InvalidEndpoint, Timeouts, TransportError
from chunkwise._net.http import MAX_ERROR_BODY, open_http_response
from chunkwise.testing import RecordedRequest, ResponseWriter, ScriptedResponse, open_test_server
from helpers.bodies import choice, chunk, sse

KEY = "sk-proj-SECRETfa1afe1c0ffee0ddba11"
TAIL = KEY[-12:]  # what a partially masked echo would still show
REQUEST: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
BODY = sse(
    chunk(choice(role="assistant", content="Hé")),
    chunk(choice(content=" there")),
    chunk(choice(finish_reason="stop")),
    {**chunk(), "choices": [], "usage": {"prompt_tokens": 1, "total_tokens": 2}},
)
BOUND = 30.0
BODY_RESPONSE = ScriptedResponse(body=BODY)


def assert_no_key(*texts: str) -> None:
    for text in texts:
        assert KEY not in text and TAIL not in text, text


def exception_texts(exc: BaseException) -> Iterator[str]:
    """Every way an exception is shown: str, repr, args, fields, the full traceback."""
    yield str(exc)
    yield repr(exc)
    yield repr(exc.args)
    yield repr({k: v for k, v in vars(exc).items() if k != "__traceback__"})
    yield "".join(traceback.format_exception(exc))


def test_endpoint_repr_and_str_hide_the_key_and_header_values() -> None:
    endpoint = Endpoint(
        "https://relay.example/v1", api_key=KEY, headers={"api-key": KEY, "X-Org": "o"}
    )
    assert_no_key(repr(endpoint), str(endpoint), f"{endpoint}", f"{endpoint!r}")
    assert "api_key=<set>" in repr(endpoint)
    assert_no_key(repr(Endpoint.from_env({"OPENAI_API_KEY": KEY + "\n"})))
    # attrs helpers expose fields by design; the repr and str are what get logged.
    assert attrs.asdict(endpoint)["api_key"] == KEY


@pytest.mark.parametrize(
    "make",
    [
        lambda: Endpoint("https://x.example/v1", api_key=KEY + "\r\nX-Injected: 1"),
        lambda: Endpoint("https://x.example/v1", api_key=KEY + "\x00"),
        lambda: Endpoint("https://x.example/v1", api_key=" " + KEY),
        lambda: Endpoint("https://x.example/v1", api_key=KEY + "é"),
        lambda: Endpoint("https://x.example/v1", headers={"Authorization": KEY + "\n"}),
        lambda: Endpoint("https://x.example/v1", headers={"api-key": f"{KEY}\r\nHost: evil"}),
        lambda: Endpoint(f"https://user:{KEY}@x.example/v1"),
        lambda: Endpoint(f"https://x.example/v1?key={KEY}"),
        lambda: Endpoint.from_env({"OPENAI_API_KEY": KEY + "\x07"}),
    ],
    ids=[
        "crlf-in-key",
        "nul-in-key",
        "space-around-key",
        "non-ascii-key",
        "lf-in-header",
        "crlf-in-custom-header",
        "key-as-url-password",
        "key-in-query",
        "bell-in-env-key",
    ],
)
def test_invalid_endpoint_messages_never_quote_the_key(make: Any) -> None:
    with pytest.raises(InvalidEndpoint) as info:
        make()
    assert_no_key(*exception_texts(info.value))


async def test_http_401_error_does_not_carry_the_key() -> None:
    script = ScriptedResponse.error(
        401, "Incorrect API key provided.", type="invalid_request_error", code="invalid_api_key"
    )
    async with open_test_server(script) as server:
        with trio.fail_after(BOUND), pytest.raises(HTTPStatusError) as info:
            await chunkwise.chat.complete(server.endpoint(api_key=KEY), REQUEST)
        # The key did go to the server, in the one header meant for it.
        assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert info.value.status_code == 401
    assert_no_key(*exception_texts(info.value))


async def test_http_401_error_that_echoes_the_key_is_redacted() -> None:
    script = ScriptedResponse.error(401, f"Incorrect API key provided: {KEY}.")
    async with open_test_server(script) as server:
        with trio.fail_after(BOUND), pytest.raises(HTTPStatusError) as info:
            await chunkwise.chat.complete(server.endpoint(api_key=KEY), REQUEST)
    assert_no_key(*exception_texts(info.value))
    assert info.value.error is not None
    assert info.value.error.message == "Incorrect API key provided: ***."


@pytest.mark.parametrize("short_key", ["e", "x", "test", "sk-local-dev"])
async def test_a_short_key_is_no_secret_and_error_messages_stay_whole(short_key: str) -> None:
    message = "This request exceeds the available context size; try a shorter text"
    script = ScriptedResponse.error(400, message)
    async with open_test_server(script) as server:
        with trio.fail_after(BOUND), pytest.raises(HTTPStatusError) as info:
            await chunkwise.chat.complete(server.endpoint(api_key=short_key), REQUEST)
    assert info.value.error is not None
    assert info.value.error.message == message
    assert message.encode() in info.value.body


@pytest.mark.parametrize("ending", ["whole", "connection-lost-at-the-cut"])
@pytest.mark.parametrize("start", range(MAX_ERROR_BODY - len(KEY) + 1, MAX_ERROR_BODY + 1))
async def test_key_echoed_across_the_error_body_cut_leaves_no_part_of_it(
    start: int, ending: str
) -> None:
    """The key is masked before the body is cut to MAX_ERROR_BODY, never after.

    ``connection-lost-at-the-cut``: the body breaks off exactly at the cut, so what
    was read ends inside the key and its start must be masked too.
    """
    body = b"x" * start + KEY.encode() + b"y" * 100
    script = ScriptedResponse(
        status=401,
        content_type="text/plain",
        body=body,
        disconnect_after=MAX_ERROR_BODY if ending != "whole" else None,
    )
    async with open_test_server(script) as server:
        with trio.fail_after(BOUND), pytest.raises(HTTPStatusError) as info:
            async with open_http_response(server.endpoint(api_key=KEY), b"{}"):
                pass
    error = info.value
    assert error.body.startswith(b"x" * start) and error.truncated
    for text in (error.body.decode(), *exception_texts(error)):
        assert KEY[:4] not in text, f"{text[-60:]!r}"  # so no longer prefix either


async def test_transport_errors_do_not_carry_the_key(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Connection refused: a listener that is closed at once.
    listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
    port = listener.socket.getsockname()[1]
    await listener.aclose()
    endpoint = Endpoint(f"http://127.0.0.1:{port}/v1", api_key=KEY)
    with pytest.raises(TransportError) as refused:
        await chunkwise.chat.complete(endpoint, REQUEST)
    assert_no_key(*exception_texts(refused.value))

    # An idle timeout while waiting for the head, over a silent memory peer.
    client, server = trio.testing.memory_stream_pair()
    silent = Endpoint("http://silent.invalid/v1", api_key=KEY, timeouts=Timeouts(idle=1))
    with pytest.raises(chunkwise.IdleTimeout) as idle:
        async with chunkwise.chat.open_stream(silent, REQUEST, transport=client):
            pass
    await server.aclose()
    assert_no_key(*exception_texts(idle.value))


async def test_tls_failure_does_not_carry_the_key() -> None:
    async with open_test_server(ScriptedResponse(body=BODY), tls=True) as server:
        endpoint = Endpoint(server.base_url, api_key=KEY)  # the CA is not trusted
        with trio.fail_after(BOUND), pytest.raises(TransportError) as info:
            await chunkwise.chat.complete(endpoint, REQUEST)
        assert not server.requests
    assert_no_key(*exception_texts(info.value))


async def test_log_records_events_and_result_never_contain_the_key(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)  # every logger, every level
    # The server echoes the request headers back in the response headers and the
    # stream, the worst case for anything that logs or records responses.
    script = ScriptedResponse(body=BODY, write_sizes=7)

    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        await writer.play(attrs.evolve(script, headers={"X-Request-Id": "req_1"}))

    async with open_test_server(handler) as server:
        endpoint = server.endpoint(api_key=KEY)
        with trio.fail_after(BOUND):
            async with chunkwise.chat.open_stream(endpoint, REQUEST) as stream:
                channel = stream.subscribe()
                async with channel:
                    events = [event async for event in channel]
                result = await stream.result()
            # And an error path, which is where logging usually happens.
            with pytest.raises(TransportError):
                bad = Endpoint(server.base_url.replace("http:", "https:"), api_key=KEY)
                await chunkwise.chat.complete(bad, REQUEST)
    assert result.status == "complete"
    for record in caplog.records:
        assert_no_key(record.getMessage(), repr(record.args), str(record.exc_text))
    assert_no_key(caplog.text)
    assert_no_key(*(repr(event) for event in events), repr(result), repr(stream.headers))
    assert_no_key(json.dumps([attrs.asdict(e) for e in events], default=repr))


async def test_the_pools_debug_log_never_holds_the_key_or_the_proxys_password(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Every step of a connection's life is logged (opened, reused, given back,
    # discarded and why), through a proxy with a password, with the key in the
    # Authorization header and in a header of its own, on clean, failed and
    # abandoned requests.
    caplog.set_level(logging.DEBUG)
    password = "pw-" + KEY[-16:]
    closing = ScriptedResponse(body=BODY, headers={"Connection": "close"})
    slow = ScriptedResponse(body=BODY, write_sizes=3, delay=0.05)
    failing = ScriptedResponse.error(500, f"bad key {KEY}")
    async with open_test_server([BODY_RESPONSE, BODY_RESPONSE, closing, slow, failing]) as proxy:
        endpoint = Endpoint(
            "http://api.invalid:8080/v1",
            api_key=KEY,
            headers={"api-key": KEY},
            proxy=f"http://user:{password}@127.0.0.1:{proxy.port}",
            retries=chunkwise.Retries(max_retries=0),
        )
        with trio.fail_after(BOUND):
            async with chunkwise.Client(endpoint, max_idle_connections=1) as client:
                for _ in range(3):
                    await client.chat.complete(REQUEST)
                async with client.chat.open_stream(REQUEST):
                    pass  # abandoned
                with pytest.raises(HTTPStatusError):
                    await client.chat.complete(REQUEST)
    pool_lines = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    for step in (" opened", " reused after ", " given back ", " discarded: "):
        assert any(step in line for line in pool_lines), (step, pool_lines)
    for record in caplog.records:
        assert_no_key(record.getMessage(), repr(record.args), str(record.exc_text))
        assert password not in record.getMessage()
    assert_no_key(caplog.text)
    assert password not in caplog.text

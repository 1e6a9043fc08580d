"""chunkwise.testing: the loopback server itself, seen from raw sockets and other clients."""

from __future__ import annotations

import json
import re
import ssl
from typing import Any

import h11
import pytest
import trio
import trio.testing

from chunkwise._core.endpoint import Endpoint
from chunkwise._core.errors import HTTPStatusError
from chunkwise._net.http import open_http_response
from chunkwise.testing import (
    LoopbackServer,
    RecordedRequest,
    ResponseWriter,
    ScriptedResponse,
    ServerConnection,
    open_test_server,
    serve_stream,
    serve_test_server,
    tls_contexts,
)
from chunkwise.types import Headers

REQUEST = b'{"model": "m", "messages": []}'


class Boom(Exception):
    pass


def _request(target: str = "/v1/chat/completions", *, close: bool = False) -> bytes:
    headers = [("Host", "127.0.0.1"), ("Content-Length", str(len(REQUEST)))]
    if close:
        headers.append(("Connection", "close"))
    client = h11.Connection(h11.CLIENT)
    data = client.send(h11.Request(method="POST", target=target, headers=headers))
    return (data or b"") + REQUEST


async def _read_responses(stream: trio.SocketStream, count: int) -> list[tuple[int, bytes]]:
    """Read ``count`` responses from one connection with h11."""
    client = h11.Connection(h11.CLIENT)
    responses: list[tuple[int, bytes]] = []
    status, body = 0, b""
    while len(responses) < count:
        event = client.next_event()
        if event is h11.NEED_DATA:
            client.receive_data(await stream.receive_some(65536))
        elif isinstance(event, h11.Response):
            status, body = event.status_code, b""
        elif isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage):
            responses.append((status, body))
            # One h11 client per response, carrying over bytes of the next one.
            leftover, _ = client.trailing_data
            client = h11.Connection(h11.CLIENT)
            if leftover:
                client.receive_data(leftover)
    return responses


async def _read_to_eof(stream: trio.SocketStream) -> bytes:
    data = b""
    while chunk := await stream.receive_some(65536):
        data += chunk
    return data


# --- ScriptedResponse -------------------------------------------------------------------


def test_scripted_response_validation() -> None:
    assert ScriptedResponse(write_sizes=[1, 2]).write_sizes == (1, 2)
    assert ScriptedResponse(headers={"A": "1"}).headers == (("A", "1"),)
    for bad in (0, -1, (), (1, 0)):
        with pytest.raises(
            ValueError, match=f"write_sizes must be an int >= 1, .*, not {re.escape(repr(bad))}$"
        ):
            ScriptedResponse(write_sizes=bad)
    with pytest.raises(ValueError, match="framing"):
        ScriptedResponse(framing="gzip")  # type: ignore[arg-type]


def test_sse_helper() -> None:
    response = ScriptedResponse.sse([{"a": 1}, "raw text"], write_sizes=3)
    assert response.body == b'data: {"a": 1}\n\ndata: raw text\n\ndata: [DONE]\n\n'
    assert response.write_sizes == 3
    assert response.content_type == "text/event-stream"
    assert ScriptedResponse.sse([], done=False).body == b""


def test_error_helper() -> None:
    response = ScriptedResponse.error(429, "slow down", code="rate_limit", headers={"X": "1"})
    assert response.status == 429
    assert response.content_type == "application/json"
    assert response.framing == "content-length"
    assert response.headers == (("X", "1"),)
    assert json.loads(response.body) == {
        "error": {"message": "slow down", "type": None, "code": "rate_limit", "param": None}
    }


# --- scripts and handlers ----------------------------------------------------------------


async def test_scripted_responses_are_used_in_order_then_500() -> None:
    script = [
        ScriptedResponse(body=b"data: one\n\n"),
        ScriptedResponse.error(429, "slow down"),
        ScriptedResponse(body=b"data: three\n\n", framing="close"),
    ]
    async with open_test_server(script) as server:
        endpoint = server.endpoint()
        outcomes: list[Any] = []
        for _ in range(4):
            try:
                async with open_http_response(endpoint, REQUEST) as response:
                    outcomes.append(await response.receive_some())
            except HTTPStatusError as exc:
                outcomes.append((exc.status_code, exc.error.message if exc.error else None))
    assert outcomes == [
        b"data: one\n\n",
        (429, "slow down"),
        b"data: three\n\n",
        (500, "the test server has no scripted response left"),
    ]
    assert [r.body for r in server.requests] == [REQUEST] * 4


async def test_handler_sees_the_request_and_streams() -> None:
    async def echo(request: RecordedRequest, writer: ResponseWriter) -> None:
        assert writer.request is request
        await writer.informational(103, {"Link": "</x>"})
        await writer.start(headers={"X-Model": request.json()["model"]})
        for word in ("a", "b", "c"):
            await writer.write(f"data: {word}\n\n".encode())
        await writer.end()
        assert writer.ended

    async with (
        open_test_server(echo) as server,
        open_http_response(server.endpoint(), REQUEST) as response,
    ):
        assert response.headers["x-model"] == "m"
        body = b"".join([data async for data in response])
    assert body == b"data: a\n\ndata: b\n\ndata: c\n\n"


async def test_handler_that_sends_nothing_gives_500() -> None:
    async def lazy(request: RecordedRequest, writer: ResponseWriter) -> None:
        pass

    async with open_test_server(lazy) as server:
        with pytest.raises(HTTPStatusError) as info:
            async with open_http_response(server.endpoint(), REQUEST):
                pass
    assert info.value.status_code == 500


async def test_handler_that_does_not_end_gets_ended() -> None:
    async def forgetful(request: RecordedRequest, writer: ResponseWriter) -> None:
        await writer.start()
        await writer.write(b"data: x\n\n")
        await writer.write(b"")  # not a last chunk

    async with (
        open_test_server(forgetful) as server,
        open_http_response(server.endpoint(), REQUEST) as response,
    ):
        assert b"".join([data async for data in response]) == b"data: x\n\n"


async def test_writer_misuse() -> None:
    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        with pytest.raises(RuntimeError):
            await writer.write(b"too early")
        with pytest.raises(ValueError, match="content_length"):
            await writer.start(framing="content-length")
        await writer.start()
        with pytest.raises(RuntimeError):
            await writer.start()
        await writer.end()

    async with (
        open_test_server(handler) as server,
        open_http_response(server.endpoint(), REQUEST) as response,
    ):
        assert await response.receive_some() == b""


async def test_the_writer_says_how_late_each_timed_write_went_out(
    autojump_clock: trio.testing.MockClock,
) -> None:
    sends = 0

    async def slow_first_body_write() -> None:
        nonlocal sends
        sends += 1
        if sends == 2:  # the head, then the first write of the body
            await trio.sleep(0.15)

    request = RecordedRequest(
        method="POST", target="/", http_version="1.1", headers=Headers(()), body=b""
    )
    stream, _ = trio.testing.memory_stream_pair()
    stream.send_stream.send_all_hook = slow_first_body_write
    writer = ResponseWriter(stream, request)
    await writer.play(ScriptedResponse(body=b"abcde", write_sizes=1, times=(0.0, 0.1, 0.2, 0.2)))
    # The second write, due at 0.1 s, waited for the first until 0.15 s; the rest
    # were on time; the fifth has no time (it follows at once) and no figure.
    assert writer.lateness == pytest.approx((0.0, 0.05, 0.0, 0.0), abs=1e-9)
    untimed = ResponseWriter(trio.testing.memory_stream_pair()[0], request)
    await untimed.play(ScriptedResponse(body=b"abc"))
    assert untimed.lateness == ()


# --- connections -------------------------------------------------------------------------


async def test_keep_alive_and_pipelining_on_one_connection() -> None:
    script = ScriptedResponse(body=b"data: x\n\n", write_sizes=2)
    async with open_test_server(script) as server:
        stream = await trio.open_tcp_stream(server.host, server.port)
        async with stream:
            # Two requests in one write, then one more that asks to close.
            await stream.send_all(_request() + _request("/v1/other"))
            assert await _read_responses(stream, 2) == [(200, b"data: x\n\n")] * 2
            await stream.send_all(_request(close=True))
            tail = await _read_to_eof(stream)
            assert tail.startswith(b"HTTP/1.1 200 OK\r\n")
            assert tail.endswith(b"0\r\n\r\n")
        with trio.fail_after(5):
            await server.wait_client_closed()
    assert [r.target for r in server.requests] == [
        "/v1/chat/completions",
        "/v1/other",
        "/v1/chat/completions",
    ]
    [connection] = server.connections
    assert connection.requests == server.requests


async def test_server_initiated_close_still_observes_the_client_close() -> None:
    async with open_test_server(ScriptedResponse(body=b"data: x\n\n", framing="close")) as server:
        stream = await trio.open_tcp_stream(server.host, server.port)
        await stream.send_all(_request())
        assert (await _read_to_eof(stream)).endswith(b"\r\n\r\ndata: x\n\n")
        await trio.testing.wait_all_tasks_blocked()
        assert not server.connections[0].client_closed.is_set()  # only the server closed
        await stream.aclose()
        with trio.fail_after(5):
            await server.wait_client_closed()


async def test_malformed_request_gets_400_and_the_server_lives_on() -> None:
    async with open_test_server(ScriptedResponse(body=b"data: x\n\n")) as server:
        async with await trio.open_tcp_stream(server.host, server.port) as stream:
            await stream.send_all(b"NOT HTTP AT ALL\r\n\r\n")
            reply = await _read_to_eof(stream)
        assert reply.startswith(b"HTTP/1.1 400 Bad Request\r\n")
        assert b"malformed HTTP request" in reply
        assert not server.requests
        async with open_http_response(server.endpoint(), REQUEST) as response:
            assert await response.receive_some() == b"data: x\n\n"


async def test_wait_requests() -> None:
    arrived = trio.Event()

    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        await arrived.wait()

    async with open_test_server(handler) as server, trio.open_nursery() as nursery:

        async def client() -> None:
            with pytest.raises(HTTPStatusError):
                async with open_http_response(server.endpoint(), REQUEST):
                    pass

        nursery.start_soon(client)
        with trio.fail_after(5):
            await server.wait_requests(1)
        assert server.requests[0].body == REQUEST
        arrived.set()


async def test_many_concurrent_connections() -> None:
    script = ScriptedResponse.sse([{"n": i} for i in range(20)], write_sizes=100)

    async def one(server: LoopbackServer) -> None:
        async with open_http_response(server.endpoint(), REQUEST) as response:
            assert b"".join([data async for data in response]) == script.body

    async with open_test_server(script) as server:
        async with trio.open_nursery() as nursery:
            for _ in range(200):
                nursery.start_soon(one, server)
        assert len(server.connections) == 200


# --- lifetime ----------------------------------------------------------------------------


async def test_serve_with_nursery_start() -> None:
    async with trio.open_nursery() as nursery:
        server: LoopbackServer = await nursery.start(
            serve_test_server, ScriptedResponse(body=b"data: x\n\n")
        )
        assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
        async with open_http_response(server.endpoint(), REQUEST) as response:
            assert await response.receive_some() == b"data: x\n\n"
        nursery.cancel_scope.cancel()


async def test_exit_stops_listening_and_closes_connections() -> None:
    async def hang(request: RecordedRequest, writer: ResponseWriter) -> None:
        await writer.start()
        await trio.sleep_forever()

    async with open_test_server(hang) as server:
        stream = await trio.open_tcp_stream(server.host, server.port)
        await stream.send_all(_request())
        assert (await stream.receive_some()).startswith(b"HTTP/1.1 200 OK\r\n")
    async with stream:
        assert await _read_to_eof(stream) == b""  # the server closed the connection
    with pytest.raises(OSError, match="failed"):
        await trio.open_tcp_stream(server.host, server.port)


async def test_exception_in_block_propagates_unwrapped() -> None:
    with pytest.raises(Boom):
        async with open_test_server(ScriptedResponse()):
            raise Boom


async def test_handler_exception_propagates_unwrapped() -> None:
    async def broken(request: RecordedRequest, writer: ResponseWriter) -> None:
        raise Boom

    with pytest.raises(Boom):
        async with (
            open_test_server(broken) as server,
            open_http_response(server.endpoint(), REQUEST),
        ):
            pass


async def test_cancelling_the_block_is_not_an_error() -> None:
    with trio.move_on_after(0.01) as scope:
        async with open_test_server(ScriptedResponse()):
            await trio.sleep_forever()
    assert scope.cancelled_caught


# --- serve_stream: the same server on one connected stream ------------------------------


async def test_serve_stream_answers_in_virtual_time_and_returns_after_the_client_closes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = ScriptedResponse(body=b"data: x\n\n" * 3, write_sizes=9, delay=60)
    client, server = trio.testing.memory_stream_pair()
    with trio.fail_after(1000):  # only ends when serve_stream returns by itself
        async with trio.open_nursery() as nursery:
            connection: ServerConnection = await nursery.start(serve_stream, server, script)
            start = trio.current_time()
            endpoint = Endpoint("http://x.example/v1")
            async with open_http_response(endpoint, REQUEST, transport=client) as response:
                assert b"".join([data async for data in response]) == script.body
            assert trio.current_time() - start == 120  # two delays, no real time
            with trio.fail_after(1):
                await connection.client_closed.wait()
    [request] = connection.requests
    assert (request.method, request.target) == ("POST", "/v1/chat/completions")
    assert request.body == REQUEST


async def test_serve_stream_handler_exception_propagates_unwrapped() -> None:
    async def broken(request: RecordedRequest, writer: ResponseWriter) -> None:
        raise Boom

    client, server = trio.testing.memory_stream_pair()
    await client.send_all(_request())
    with pytest.raises(Boom):
        await serve_stream(server, broken)
    assert await client.receive_some() == b""  # and the server's end is closed


# --- TLS and other clients ---------------------------------------------------------------


async def test_tls_server_and_contexts() -> None:
    server_context, client_context = tls_contexts()
    assert isinstance(server_context, ssl.SSLContext)
    assert client_context.check_hostname
    assert client_context.verify_mode == ssl.CERT_REQUIRED
    async with open_test_server(ScriptedResponse(body=b"data: x\n\n"), tls=True) as server:
        assert server.scheme == "https"
        endpoint = server.endpoint()
        assert endpoint.ssl_context is server.client_ssl_context is not None
        async with open_http_response(endpoint, REQUEST) as response:
            assert await response.receive_some() == b"data: x\n\n"


async def test_openai_sdk_streams_from_the_server() -> None:
    """The server is a usable OpenAI-compatible endpoint for other clients too."""
    openai = pytest.importorskip("openai")
    chunks = [
        {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": finish}],
        }
        for text, finish in (("Hel", None), ("lo \u2713", None), ("", "stop"))
    ]
    async with open_test_server(ScriptedResponse.sse(chunks, write_sizes=3)) as server:

        def run() -> list[str]:
            with openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0) as sdk:
                texts = []
                for _ in range(2):
                    stream = sdk.chat.completions.create(
                        model="m", messages=[{"role": "user", "content": "hi"}], stream=True
                    )
                    texts.append("".join(c.choices[0].delta.content or "" for c in stream))
                return texts

        assert await trio.to_thread.run_sync(run) == ["Hello \u2713"] * 2
    assert len(server.requests) == 2
    assert server.requests[0].headers["authorization"] == "Bearer sk-test"


async def test_client_reset_mid_response_does_not_cancel_the_callers_block() -> None:
    handler_ended = trio.Event()

    async def endless(request: RecordedRequest, writer: ResponseWriter) -> None:
        try:
            await writer.start()
            while True:
                await writer.write(b"x" * 65536)
        finally:
            handler_ended.set()

    reached_end = False
    async with open_test_server(endless) as server:
        stream = await trio.open_tcp_stream(server.host, server.port)
        await stream.send_all(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"
        )
        await stream.receive_some(10)
        await stream.aclose()  # unread data: the kernel sends a reset
        with trio.fail_after(10):
            await handler_ended.wait()  # the server saw the reset
        await trio.lowlevel.checkpoint()  # and the block was not cancelled by it
        reached_end = True
    assert reached_end


@pytest.mark.parametrize("record", [True, False])
async def test_a_server_records_requests_and_connections_unless_told_not_to(
    record: bool,
) -> None:
    seen: list[RecordedRequest] = []

    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        seen.append(request)
        await writer.start(200, content_type="text/plain")
        await writer.write(b"ok")

    async with open_test_server(handler, record=record) as server:
        with trio.socket.socket() as sock:
            await sock.connect((server.host, server.port))
            await sock.send(_request() + _request(close=True))
            while await sock.recv(65536):
                pass
    assert len(seen) == 2 and server.record is record
    if record:
        assert server.requests == seen
        assert [c.requests for c in server.connections] == [seen]
    else:
        assert server.requests == [] and server.connections == []
        with pytest.raises(RuntimeError, match="does not record"):
            await server.wait_requests()
        with pytest.raises(RuntimeError, match="does not record"):
            await server.wait_client_closed()

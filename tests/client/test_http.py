"""The h11 + trio HTTP client, against the real loopback server and in-memory streams."""

from __future__ import annotations

import email.utils
import json
import time
import traceback
from collections.abc import Callable
from typing import Any

import h11
import pytest
import trio
import trio.testing

from chunkwise._core.endpoint import Endpoint, Timeouts
from chunkwise._core.errors import (
    ChunkwiseError,
    ConnectionLost,
    ConnectTimeout,
    HTTPStatusError,
    IdleTimeout,
    RemoteProtocolError,
    StreamError,
    ToolArgumentsError,
    TransportError,
    raise_itself,
)
from chunkwise._core.results import ToolCall
from chunkwise._core.retries import Retries
from chunkwise._core.schemas import complete_tool_call
from chunkwise._core.sse import SSEDecoder
from chunkwise._core.version import __version__
from chunkwise._net.http import (
    MAX_ERROR_BODY,
    HTTPResponse,
    open_http_response,
    parse_error_body,
)
from chunkwise.errors import (
    EventTooLarge,
    IncompleteBody,
    UnexpectedContentEncoding,
    UnexpectedContentType,
)
from chunkwise.testing import (
    Handler,
    RecordedRequest,
    ResponseWriter,
    ScriptedResponse,
    ServerConnection,
    open_test_server,
    serve_stream,
    tls_contexts,
)
from chunkwise.types import Headers
from helpers.servers import ResettingStream, TrackedStream, serving

NO_RETRIES = Retries(max_retries=0)
KEY = "sk-proj-SECRET0123456789abcdef"
REQUEST = b'{"model":"gpt-test","stream":true,"messages":[{"role":"user","content":"hi"}]}'
#: For requests sent over a memory stream: the host is only named, never resolved.
MEMORY = Endpoint("http://x.example/v1")
BODY = "".join(
    f'data: {{"n": {i}, "text": "h\u00e9llo w\u00f6rld \u2713 \U0001f600"}}\n\n' for i in range(30)
).encode()


async def read_all(response: HTTPResponse) -> bytes:
    return b"".join([data async for data in response])


async def read_until_error(response: HTTPResponse, received: bytearray) -> None:
    """Read everything into ``received``, letting the body's error propagate."""
    while data := await response.receive_some():
        received += data


class Boom(Exception):
    pass


# --- request ---------------------------------------------------------------------------


async def test_request_line_and_headers() -> None:
    async with open_test_server(ScriptedResponse(body=BODY)) as server:
        endpoint = server.endpoint(api_key=KEY, headers={"X-Title": "chunkwise tests"})
        async with open_http_response(endpoint, REQUEST) as response:
            await read_all(response)
    [request] = server.requests
    assert (request.method, request.target, request.http_version) == (
        "POST",
        "/v1/chat/completions",
        "1.1",
    )
    assert request.body == REQUEST
    headers = request.headers
    assert headers["host"] == f"127.0.0.1:{server.port}"
    assert headers["user-agent"] == f"chunkwise/{__version__}"
    assert headers["accept"] == "text/event-stream"
    assert headers["accept-encoding"] == "identity"
    assert headers["content-type"] == "application/json"
    assert headers["content-length"] == str(len(REQUEST))
    assert headers["authorization"] == f"Bearer {KEY}"
    assert headers["x-title"] == "chunkwise tests"
    assert "transfer-encoding" not in headers


async def test_no_authorization_without_key_and_extra_headers_replace_defaults() -> None:
    async with open_test_server(ScriptedResponse(body=BODY)) as server:
        endpoint = server.endpoint(headers=[("User-Agent", "my-app/1.0"), ("api-key", "azure")])
        async with open_http_response(endpoint, REQUEST) as response:
            await read_all(response)
    headers = server.requests[0].headers
    assert "authorization" not in headers
    assert headers.get_all("user-agent") == ["my-app/1.0"]
    assert headers["api-key"] == "azure"


# --- bodies ----------------------------------------------------------------------------


@pytest.mark.parametrize("framing", ["chunked", "content-length", "close"])
@pytest.mark.parametrize("write_sizes", [None, 1, 3, (1, 2, 7, 64)])
async def test_body_framings_with_tiny_writes(framing: Any, write_sizes: Any) -> None:
    script = ScriptedResponse(body=BODY, framing=framing, write_sizes=write_sizes)
    async with (
        open_test_server(script) as server,
        open_http_response(server.endpoint(), REQUEST) as response,
    ):
        assert (response.status_code, response.reason) == (200, "OK")
        assert await read_all(response) == BODY
        # The end is sticky.
        assert await response.receive_some() == b""
        assert await response.receive_some() == b""


async def test_empty_body() -> None:
    async with (
        open_test_server(ScriptedResponse()) as server,
        open_http_response(server.endpoint(), REQUEST) as response,
    ):
        assert await response.receive_some() == b""


async def test_chunks_are_delivered_as_they_arrive() -> None:
    gate = trio.Event()

    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        await writer.start()
        await writer.write(b"data: first\n\n")
        await gate.wait()
        await writer.write(b"data: second\n\n")

    async with (
        open_test_server(handler) as server,
        open_http_response(server.endpoint(), REQUEST) as response,
    ):
        assert await response.receive_some() == b"data: first\n\n"
        gate.set()
        assert await response.receive_some() == b"data: second\n\n"
        assert await response.receive_some() == b""


@pytest.mark.parametrize(
    ("framing", "write_sizes", "cut", "expected"),
    [
        ("chunked", 10, 25, None),  # inside a chunk
        ("chunked", 10, 30, None),  # between chunks
        ("chunked", None, len(BODY), None),  # whole body, but no last chunk
        ("content-length", 10, 25, len(BODY)),
        ("content-length", 1, 1, len(BODY)),
        ("content-length", None, 0, len(BODY)),
    ],
)
async def test_truncated_body_raises_after_partial_bytes(
    framing: Any, write_sizes: Any, cut: int, expected: int | None
) -> None:
    script = ScriptedResponse(
        body=BODY, framing=framing, write_sizes=write_sizes, disconnect_after=cut
    )
    received = bytearray()
    async with (
        open_test_server(script) as server,
        open_http_response(server.endpoint(), REQUEST) as response,
    ):
        with pytest.raises(IncompleteBody) as info:
            await read_until_error(response, received)
        # Every later call repeats the error rather than pretending the body ended.
        with pytest.raises(IncompleteBody):
            await response.receive_some()
    assert bytes(received) == BODY[:cut]
    assert isinstance(info.value, TransportError)
    assert isinstance(info.value, ConnectionLost)
    assert info.value.received == cut
    assert info.value.expected == expected
    assert f"127.0.0.1:{server.port}" in str(info.value)


async def test_close_delimited_body_just_ends_at_eof() -> None:
    script = ScriptedResponse(body=BODY, framing="close", write_sizes=10, disconnect_after=25)
    async with (
        open_test_server(script) as server,
        open_http_response(server.endpoint(), REQUEST) as response,
    ):
        assert await read_all(response) == BODY[:25]


async def test_reset_mid_body_is_incomplete_body() -> None:
    """A reset (not a clean close) after part of the body; the part is delivered first."""
    partial = b"data: partial\n\n"
    script = ScriptedResponse(
        body=partial.ljust(1000), framing="content-length", disconnect_after=len(partial)
    )
    async with serving(script) as (client, _):
        transport = ResettingStream(client)  # the server's close arrives as a reset
        async with open_http_response(MEMORY, REQUEST, transport=transport) as response:
            assert await response.receive_some() == partial
            with pytest.raises(IncompleteBody, match="reset") as info:
                await response.receive_some()
    assert (info.value.received, info.value.expected) == (15, 1000)
    assert isinstance(info.value.__cause__, trio.BrokenResourceError)


# --- status codes and error bodies -------------------------------------------------------


def _error(status: int, **kwargs: Any) -> ScriptedResponse:
    return ScriptedResponse(
        status=status, content_type="application/json", framing="content-length", **kwargs
    )


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        (
            ScriptedResponse.error(
                401,
                "Incorrect API key provided.",
                type="invalid_request_error",
                code="invalid_api_key",
            ),
            StreamError(
                "Incorrect API key provided.", type="invalid_request_error", code="invalid_api_key"
            ),
        ),
        (
            ScriptedResponse.error(400, {"detail": "bad", "loc": ["messages"]}, code=400),
            StreamError('{"detail":"bad","loc":["messages"]}', code=400),
        ),
        (
            ScriptedResponse.error(
                400, "bad model", type="invalid_request_error", param="model", write_sizes=1
            ),
            StreamError("bad model", type="invalid_request_error", param="model"),
        ),
        (
            _error(404, body=b'{"object": "error", "message": "no such model", "code": 404}'),
            StreamError("no such model", code=404),
        ),
        (
            _error(400, body=b'[{"error": {"code": 400, "message": "API key not valid"}}]'),
            StreamError("API key not valid", code=400),
        ),
        (_error(502, body=b'{"error": "upstream timed out"}'), StreamError("upstream timed out")),
        (
            ScriptedResponse(status=502, content_type="text/html", body=b"<h1>Bad Gateway</h1>"),
            None,
        ),
        (_error(500, body=b'{"detail": "FastAPI shape"}'), StreamError("FastAPI shape")),
        (_error(500, body=b""), None),
    ],
)
async def test_http_error_is_raised_with_parsed_body(
    script: ScriptedResponse, expected: StreamError | None
) -> None:
    async with open_test_server(script) as server:
        with pytest.raises(HTTPStatusError) as info:
            async with open_http_response(server.endpoint(api_key=KEY), REQUEST):
                pytest.fail("an error status must not be yielded")
    error = info.value
    assert error.status_code == script.status
    assert error.body == script.body
    assert not error.truncated
    assert error.reason  # the standard phrase, e.g. "Unauthorized"
    if expected is None:
        assert error.error is None
    else:
        assert error.error is not None
        found = error.error
        assert (found.message, found.type, found.code, found.param) == (
            expected.message,
            expected.type,
            expected.code,
            expected.param,
        )
        # body is the error object: the list's first element, the "error" object within.
        doc = json.loads(script.body)
        doc = doc[0] if isinstance(doc, list) else doc
        assert found.body == (doc["error"] if isinstance(doc.get("error"), dict) else doc)
        assert expected.message in str(error)
    assert KEY not in str(error)
    assert KEY not in repr(error)


@pytest.mark.parametrize(
    ("headers", "retry_after"),
    [
        ({"Retry-After": "7"}, 7.0),
        ({"Retry-After": "0"}, 0.0),
        ({"Retry-After": "1.5"}, 1.5),
        ({"retry-after-ms": "250", "Retry-After": "1"}, 0.25),
        ({"Retry-After": email.utils.formatdate(0, usegmt=True)}, 0.0),  # in the past
        ({"Retry-After": "soon"}, None),
        ({"Retry-After": "-3"}, None),
        ({}, None),
    ],
)
async def test_retry_after(headers: dict[str, str], retry_after: float | None) -> None:
    script = ScriptedResponse.error(
        429, "Rate limit reached", code="rate_limit_exceeded", headers=headers
    )
    async with open_test_server(script) as server:
        with pytest.raises(HTTPStatusError) as info:
            async with open_http_response(server.endpoint(), REQUEST):
                pass
    assert info.value.retry_after == retry_after
    assert info.value.error is not None
    assert info.value.error.code == "rate_limit_exceeded"


async def test_retry_after_http_date_and_request_id() -> None:
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    script = ScriptedResponse.error(
        503, "overloaded", headers={"Retry-After": when, "x-request-id": "req_123"}
    )
    async with open_test_server(script) as server:
        with pytest.raises(HTTPStatusError) as info:
            async with open_http_response(server.endpoint(), REQUEST):
                pass
    assert info.value.retry_after is not None
    assert 25 <= info.value.retry_after <= 31
    assert info.value.request_id == "req_123"


async def test_error_body_is_bounded() -> None:
    script = ScriptedResponse(
        status=500, content_type="text/plain", body=b"x" * (3 * MAX_ERROR_BODY)
    )
    async with open_test_server(script) as server:
        with pytest.raises(HTTPStatusError) as info:
            async with open_http_response(server.endpoint(), REQUEST):
                pass
    assert info.value.body == b"x" * MAX_ERROR_BODY
    assert info.value.truncated
    assert f"body truncated to {MAX_ERROR_BODY} bytes" in str(info.value)


async def test_error_body_of_exactly_the_limit_is_whole() -> None:
    script = ScriptedResponse(status=500, content_type="text/plain", body=b"x" * MAX_ERROR_BODY)
    async with open_test_server(script) as server:
        with pytest.raises(HTTPStatusError) as info:
            async with open_http_response(server.endpoint(), REQUEST):
                pass
    assert info.value.body == script.body
    assert not info.value.truncated
    assert "truncated" not in str(info.value)


async def test_truncated_error_body_still_raises_the_status() -> None:
    script = ScriptedResponse.error(500, "internal error", disconnect_after=10)
    async with open_test_server(script) as server:
        with pytest.raises(HTTPStatusError) as info:
            async with open_http_response(server.endpoint(), REQUEST):
                pass
    assert info.value.status_code == 500
    assert info.value.body == script.body[:10]
    assert info.value.error is None
    assert info.value.truncated


STALLED_START = b'{"error": {"message": "the upstream'


def _stall_after(status: int, content_type: str, start: bytes) -> Handler:
    """Promise 1000 bytes of body, send ``start``, then nothing until the client hangs up."""

    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        await writer.start(
            status, content_type=content_type, framing="content-length", content_length=1000
        )
        await writer.write(start)
        await trio.sleep_forever()

    return handler


@pytest.mark.parametrize(
    ("timeouts", "bound"),
    [
        (Timeouts(), 5.0),
        (Timeouts(error_body=0.5), 0.5),
        (Timeouts(error_body=100.0, idle=30.0), 30.0),  # the idle timeout still applies
        (Timeouts(error_body=None, idle=30.0), 30.0),
    ],
)
async def test_stalled_error_body_is_cut_at_the_error_body_timeout(
    autojump_clock: trio.testing.MockClock, timeouts: Timeouts, bound: float
) -> None:
    """A 500 whose body stalls halfway is raised after seconds, not the 600 s idle timeout."""
    endpoint = Endpoint("http://x.example/v1", timeouts=timeouts)
    async with serving(_stall_after(500, "application/json", STALLED_START)) as (client, _):
        start = trio.current_time()
        with pytest.raises(HTTPStatusError) as info:
            async with open_http_response(endpoint, REQUEST, transport=client):
                pytest.fail("an error status must not be yielded")
        # Virtual time: the autojump clock makes this exact, not a measurement.
        assert trio.current_time() - start == pytest.approx(bound)
    error = info.value
    assert (error.status_code, error.body, error.error) == (500, STALLED_START, None)
    assert error.truncated
    assert str(error) == (
        f"HTTP 500: Internal Server Error (body truncated to {len(STALLED_START)} bytes)"
    )


async def test_stalled_unexpected_body_is_cut_at_the_error_body_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with serving(_stall_after(200, "text/html", b"<h1>Please wait")) as (client, _):
        start = trio.current_time()
        with pytest.raises(UnexpectedContentType) as info:
            async with open_http_response(
                Endpoint("http://x.example/v1"), REQUEST, transport=client
            ):
                pytest.fail("an unexpected content type must not be yielded")
        assert trio.current_time() - start == pytest.approx(Timeouts().error_body)
    assert info.value.body_start == b"<h1>Please wait"


@pytest.mark.parametrize("status", [301, 302, 307, 308])
async def test_redirects_are_not_followed(status: int) -> None:
    script = ScriptedResponse(
        status=status,
        content_type=None,
        headers={"Location": "http://127.0.0.1:1/v1/chat/completions"},
        framing="content-length",
    )
    async with open_test_server(script) as server:
        with pytest.raises(HTTPStatusError) as info:
            async with open_http_response(server.endpoint(), REQUEST):
                pass
    assert info.value.status_code == status
    assert len(server.requests) == 1


async def test_informational_responses_are_skipped() -> None:
    script = ScriptedResponse(body=BODY, informational=(100, 103), write_sizes=5)
    async with (
        open_test_server(script) as server,
        open_http_response(server.endpoint(), REQUEST) as response,
    ):
        assert response.status_code == 200
        assert await read_all(response) == BODY


@pytest.mark.parametrize(
    "content_type", ["text/event-stream; charset=utf-8", "Text/Event-Stream", "text/event-stream "]
)
async def test_event_stream_content_type_variants(content_type: str) -> None:
    async with (
        open_test_server(ScriptedResponse(body=BODY, content_type=content_type)) as server,
        open_http_response(server.endpoint(), REQUEST) as response,
    ):
        assert response.headers["content-type"] == content_type.strip()
        assert await read_all(response) == BODY


@pytest.mark.parametrize(
    ("content_type", "status"),
    [("application/json", 200), ("text/plain", 200), (None, 200), ("text/html", 201)],
)
async def test_unexpected_content_type(content_type: str | None, status: int) -> None:
    body = b'{"id": "chatcmpl-1", "object": "chat.completion", "choices": []}'
    script = ScriptedResponse(status=status, content_type=content_type, body=body)
    async with open_test_server(script) as server:
        with pytest.raises(UnexpectedContentType) as info:
            async with open_http_response(server.endpoint(), REQUEST):
                pass
    assert isinstance(info.value, RemoteProtocolError)
    assert info.value.content_type == content_type
    assert info.value.body_start == body
    assert info.value.status_code == status
    assert "text/event-stream" in str(info.value)


@pytest.mark.parametrize("encoding", ["gzip", "br", "identity, gzip"])
async def test_unexpected_content_encoding(encoding: str) -> None:
    script = ScriptedResponse(body=b"\x1f\x8b\x08\x00", headers={"Content-Encoding": encoding})
    async with open_test_server(script) as server:
        with pytest.raises(UnexpectedContentEncoding) as info:
            async with open_http_response(server.endpoint(), REQUEST):
                pass
    assert info.value.content_encoding == encoding
    assert isinstance(info.value, RemoteProtocolError)


async def test_identity_content_encoding_is_fine() -> None:
    script = ScriptedResponse(body=BODY, headers={"Content-Encoding": "identity"})
    async with (
        open_test_server(script) as server,
        open_http_response(server.endpoint(), REQUEST) as response,
    ):
        assert await read_all(response) == BODY


async def test_unchecked_response_is_yielded_as_it_is() -> None:
    script = ScriptedResponse.error(503, "overloaded", headers={"Content-Encoding": "gzip"})
    async with (
        open_test_server(script) as server,
        open_http_response(server.endpoint(), REQUEST, check=False) as response,
    ):
        assert (response.status_code, response.reason) == (503, "Service Unavailable")
        assert response.headers["content-type"] == "application/json"
        assert await read_all(response) == script.body


# --- broken peers ----------------------------------------------------------------------


def _raw(data: bytes) -> Any:
    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        await writer.send_raw(data)

    return handler


async def test_invalid_response_head_is_remote_protocol_error() -> None:
    async with open_test_server(_raw(b"HTTP/1.1 banana\r\n\r\n")) as server:
        with pytest.raises(RemoteProtocolError, match="invalid HTTP response") as info:
            async with open_http_response(server.endpoint(), REQUEST):
                pass
    assert isinstance(info.value.__cause__, h11.RemoteProtocolError)


async def test_invalid_chunk_after_data_is_raised_after_the_data() -> None:
    raw = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"9\r\ndata: x\n\n\r\nzz\r\n"
    )
    async with (
        open_test_server(_raw(raw)) as server,
        open_http_response(server.endpoint(), REQUEST) as response,
    ):
        assert await response.receive_some() == b"data: x\n\n"
        with pytest.raises(RemoteProtocolError, match=r"illegal chunk header: .*zz\\r\\n") as info:
            await response.receive_some()
    assert not isinstance(info.value, TransportError)


@pytest.mark.parametrize("raw", [b"", b"HTTP/1.1 200 OK\r\nContent-"])
async def test_close_before_complete_head_is_connection_lost(raw: bytes) -> None:
    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        if raw:
            await writer.send_raw(raw)
        await writer.disconnect()

    async with open_test_server(handler) as server:
        with pytest.raises(ConnectionLost, match="before a complete response") as info:
            async with open_http_response(server.endpoint(), REQUEST):
                pass
    assert not isinstance(info.value, IncompleteBody)


# --- the socket is closed on every path --------------------------------------------------


async def _expect_closed(server: Any, transport: trio.SocketStream | None) -> None:
    """The client's socket is closed by now, and the server sees the close."""
    if transport is not None:
        assert transport.socket.fileno() == -1
    with trio.fail_after(5):
        await server.wait_client_closed()
    assert len(server.connections) == 1


async def _transport(server: Any, inject: bool) -> trio.SocketStream | None:
    return await trio.open_tcp_stream(server.host, server.port) if inject else None


async def _one_event_then_hang(request: RecordedRequest, writer: ResponseWriter) -> None:
    await writer.start()
    await writer.write(b"data: 1\n\n")
    await trio.sleep_forever()


@pytest.mark.parametrize("inject", [False, True], ids=["connect", "transport"])
async def test_closed_after_normal_end(inject: bool) -> None:
    async with open_test_server(ScriptedResponse(body=BODY, write_sizes=100)) as server:
        transport = await _transport(server, inject)
        async with open_http_response(server.endpoint(), REQUEST, transport=transport) as response:
            assert await read_all(response) == BODY
        await _expect_closed(server, transport)


@pytest.mark.parametrize("inject", [False, True], ids=["connect", "transport"])
async def test_closed_after_error_status(inject: bool) -> None:
    async with open_test_server(ScriptedResponse.error(503, "overloaded")) as server:
        transport = await _transport(server, inject)
        with pytest.raises(HTTPStatusError):
            async with open_http_response(server.endpoint(), REQUEST, transport=transport):
                pass
        await _expect_closed(server, transport)


@pytest.mark.parametrize("inject", [False, True], ids=["connect", "transport"])
async def test_closed_after_exception_in_block(inject: bool) -> None:
    async with open_test_server(_one_event_then_hang) as server:
        transport = await _transport(server, inject)
        with pytest.raises(Boom):
            async with open_http_response(
                server.endpoint(), REQUEST, transport=transport
            ) as response:
                assert await response.receive_some() == b"data: 1\n\n"
                raise Boom
        await _expect_closed(server, transport)


@pytest.mark.parametrize("inject", [False, True], ids=["connect", "transport"])
async def test_closed_after_cancellation_before_head(inject: bool) -> None:
    scope = trio.CancelScope()

    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        scope.cancel()  # the client is now waiting for the head
        await trio.sleep_forever()

    async with open_test_server(handler) as server:
        transport = await _transport(server, inject)
        with scope:
            async with open_http_response(server.endpoint(), REQUEST, transport=transport):
                pytest.fail("no head was sent")
        assert scope.cancelled_caught
        await _expect_closed(server, transport)


@pytest.mark.parametrize("inject", [False, True], ids=["connect", "transport"])
async def test_closed_after_cancellation_mid_body(inject: bool) -> None:
    async with open_test_server(_one_event_then_hang) as server:
        transport = await _transport(server, inject)
        with trio.CancelScope() as scope:
            async with open_http_response(
                server.endpoint(), REQUEST, transport=transport
            ) as response:
                assert await response.receive_some() == b"data: 1\n\n"
                scope.cancel()
                await response.receive_some()
                pytest.fail("receive_some must raise Cancelled")
        assert scope.cancelled_caught
        await _expect_closed(server, transport)


async def test_closed_after_truncation() -> None:
    script = ScriptedResponse(body=BODY, framing="content-length", disconnect_after=10)
    async with open_test_server(script) as server:
        with pytest.raises(IncompleteBody):
            async with open_http_response(server.endpoint(), REQUEST) as response:
                await read_all(response)
        await _expect_closed(server, None)


async def test_aclose_then_receive_is_closed_resource_error() -> None:
    async with open_test_server(_one_event_then_hang) as server:
        async with open_http_response(server.endpoint(), REQUEST) as response:
            await response.aclose()
            with pytest.raises(trio.ClosedResourceError):
                await response.receive_some()
        await _expect_closed(server, None)


async def test_concurrent_receive_is_busy() -> None:
    async with (
        open_test_server(_one_event_then_hang) as server,
        open_http_response(server.endpoint(), REQUEST) as response,
    ):
        assert await response.receive_some() == b"data: 1\n\n"
        async with trio.open_nursery() as nursery:
            nursery.start_soon(response.receive_some)
            await trio.testing.wait_all_tasks_blocked()
            with pytest.raises(trio.BusyResourceError):
                await response.receive_some()
            nursery.cancel_scope.cancel()


async def test_many_concurrent_streams() -> None:
    script = ScriptedResponse(body=BODY, write_sizes=50, delay=0.001)
    results: list[bytes] = []

    async def one(endpoint: Endpoint) -> None:
        async with open_http_response(endpoint, REQUEST) as response:
            results.append(await read_all(response))

    async with open_test_server(script) as server:
        async with trio.open_nursery() as nursery:
            for _ in range(100):
                nursery.start_soon(one, server.endpoint())
        with trio.fail_after(10):
            await server.wait_client_closed()
    assert results == [BODY] * 100
    assert len(server.requests) == len(server.connections) == 100


# --- timeouts --------------------------------------------------------------------------


async def test_idle_timeout_waiting_for_the_head() -> None:
    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        await trio.sleep_forever()

    async with open_test_server(handler) as server:
        endpoint = server.endpoint(timeouts=Timeouts(idle=0.2))
        with pytest.raises(IdleTimeout) as info:
            async with open_http_response(endpoint, REQUEST):
                pass
        await _expect_closed(server, None)
    assert info.value.timeout == 0.2
    assert "0.2 s" in str(info.value)


async def test_idle_timeout_mid_body() -> None:
    async with open_test_server(_one_event_then_hang) as server:
        endpoint = server.endpoint(timeouts=Timeouts(idle=0.2))
        async with open_http_response(endpoint, REQUEST) as response:
            assert await response.receive_some() == b"data: 1\n\n"
            with pytest.raises(IdleTimeout):
                await response.receive_some()
            with pytest.raises(IdleTimeout):
                await response.receive_some()
        await _expect_closed(server, None)


async def test_idle_timeout_is_reset_by_every_byte() -> None:
    script = ScriptedResponse(body=BODY[:200], write_sizes=20, delay=0.05)
    async with open_test_server(script) as server:
        endpoint = server.endpoint(timeouts=Timeouts(idle=0.3))
        async with open_http_response(endpoint, REQUEST) as response:
            assert await read_all(response) == BODY[:200]  # 0.5 s in all


async def _silent_listener() -> tuple[trio.socket.SocketType, int]:
    """A socket that listens but never accepts: TCP connects, TLS never answers."""
    sock = trio.socket.socket()
    await sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    return sock, sock.getsockname()[1]


async def test_connect_timeout_covers_the_tls_handshake() -> None:
    sock, port = await _silent_listener()
    with sock:
        endpoint = Endpoint(f"https://127.0.0.1:{port}/v1", timeouts=Timeouts(connect=0.2))
        with pytest.raises(ConnectTimeout) as info:
            async with open_http_response(endpoint, REQUEST):
                pass
    assert isinstance(info.value, TransportError)
    assert (info.value.host, info.value.port, info.value.timeout) == ("127.0.0.1", port, 0.2)


async def test_connect_timeout_default(autojump_clock: trio.testing.MockClock) -> None:
    sock, port = await _silent_listener()
    with sock:
        start = trio.current_time()
        with pytest.raises(ConnectTimeout):
            async with open_http_response(
                Endpoint(f"https://127.0.0.1:{port}/v1", retries=NO_RETRIES), REQUEST
            ):
                pass
    assert trio.current_time() - start == pytest.approx(10.0)


async def test_connection_refused_is_transport_error() -> None:
    sock, port = await _silent_listener()
    sock.close()  # nobody listens on the port any more
    endpoint = Endpoint(f"http://127.0.0.1:{port}/v1", api_key=KEY)
    with pytest.raises(TransportError, match="cannot connect") as info:
        async with open_http_response(endpoint, REQUEST):
            pass
    assert not isinstance(info.value, ConnectTimeout)
    assert isinstance(info.value.__cause__, OSError)
    assert KEY not in str(info.value)


# --- TLS -------------------------------------------------------------------------------


async def test_tls_with_trusted_certificate() -> None:
    script = ScriptedResponse(body=BODY, write_sizes=(1, 100))
    async with open_test_server(script, tls=True) as server:
        assert server.base_url.startswith("https://127.0.0.1:")
        async with open_http_response(server.endpoint(api_key=KEY), REQUEST) as response:
            assert await read_all(response) == BODY
        assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"
        with trio.fail_after(5):
            await server.wait_client_closed()


async def test_tls_untrusted_certificate_fails_verification() -> None:
    async with open_test_server(ScriptedResponse(body=BODY), tls=True) as server:
        endpoint = Endpoint(server.base_url)  # default context: the system trust store
        with pytest.raises(TransportError, match="certificate verify failed") as info:
            async with open_http_response(endpoint, REQUEST):
                pass
        assert not server.requests
    assert isinstance(info.value.__cause__, trio.BrokenResourceError)


async def test_tls_wrong_hostname_fails_verification() -> None:
    server_context, client_context = tls_contexts("chunkwise.test")
    async with open_test_server(ScriptedResponse(body=BODY), ssl_context=server_context) as server:
        endpoint = Endpoint(server.base_url, ssl_context=client_context)
        with pytest.raises(TransportError, match=r"TLS handshake .* failed.*mismatch"):
            async with open_http_response(endpoint, REQUEST):
                pass
        assert not server.requests


# --- in-memory streams -----------------------------------------------------------------


async def test_exact_request_bytes_over_a_memory_stream() -> None:
    client, server = trio.testing.memory_stream_pair()
    received = TrackedStream(server)  # keeps every byte the server reads
    endpoint = Endpoint("https://relay.example:8443/api/v1/", api_key=KEY, headers={"X-T": "1"})
    # HTTP/1.0 without a length: the close ends the body.
    response_bytes = (
        b"HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n"
        b"HTTP/1.0 200 OK\r\ncontent-type: text/event-stream\r\nX-Request-Id: r1\r\n\r\n"
        b"data: x\n\n"
    )

    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        await writer.send_raw(response_bytes)

    async with trio.open_nursery() as nursery:
        connection: ServerConnection = await nursery.start(serve_stream, received, handler)
        async with open_http_response(endpoint, REQUEST, transport=client) as response:
            assert (response.status_code, response.http_version) == (200, "1.0")
            assert response.headers["x-request-id"] == "r1"
            assert await read_all(response) == b"data: x\n\n"
    assert len(connection.requests) == 1
    assert received.data == (
        b"POST /api/v1/chat/completions HTTP/1.1\r\n"
        b"Host: relay.example:8443\r\n"
        b"User-Agent: chunkwise/" + __version__.encode() + b"\r\n"
        b"Accept: text/event-stream\r\n"
        b"Content-Type: application/json\r\n"
        b"Authorization: Bearer " + KEY.encode() + b"\r\n"
        b"Accept-Encoding: identity\r\n"
        b"Content-Length: " + str(len(REQUEST)).encode() + b"\r\n"
        b"X-T: 1\r\n"
        b"\r\n" + REQUEST
    )


async def test_memory_stream_peer_closes_without_response() -> None:
    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        await writer.disconnect()

    async with serving(handler) as (client, server):
        with pytest.raises(ConnectionLost):
            async with open_http_response(MEMORY, b"{}", transport=client):
                pass
    assert len(server.requests) == 1


async def test_memory_stream_chunked_truncated() -> None:
    # "5\r\nhello\r\n5\r\nwor", then the close.
    script = ScriptedResponse(body=b"helloworld", write_sizes=5, disconnect_after=8)
    async with serving(script) as (client, _):
        received = bytearray()
        async with open_http_response(MEMORY, b"{}", transport=client) as response:
            with pytest.raises(IncompleteBody, match="after 8 bytes") as info:
                await read_until_error(response, received)
    assert received == b"hellowor"
    assert (info.value.received, info.value.expected) == (8, None)


# --- errors raised again ---------------------------------------------------------------
#
# Decoders, connections and results keep an error and raise it on every later call.
# Raising one exception object again must not make its traceback grow each time.


def _raise_thrice(call: Callable[[], object]) -> list[int]:
    """Traceback lengths of three raises of the same stored error by ``call``."""
    lengths: list[int] = []
    raised: list[BaseException] = []
    for _ in range(3):
        with pytest.raises(ChunkwiseError) as info:
            call()
        raised.append(info.value)
        lengths.append(len(list(traceback.walk_tb(info.value.__traceback__))))
    assert raised[0] is raised[1] is raised[2]
    return lengths


def test_stored_error_raised_again_has_the_same_short_traceback_and_keeps_its_chain() -> None:
    cause, context = ValueError("cause"), KeyError("context")
    stored = ToolArgumentsError("bad arguments", raw="{")
    stored.__cause__, stored.__context__ = cause, context

    def raise_while_handling() -> None:
        try:
            raise Boom
        except Boom:
            raise_itself(stored, fresh_traceback=True)

    # _raise_thrice, raise_while_handling and the helper: nothing from earlier raises.
    assert _raise_thrice(raise_while_handling) == [3, 3, 3]
    assert stored.__cause__ is cause
    assert stored.__context__ is context  # not the Boom being handled


def test_sse_decoder_error_raised_again_has_a_constant_traceback() -> None:
    decoder = SSEDecoder(max_event_size=4)
    with pytest.raises(EventTooLarge):
        decoder.feed(b"data: too large\n\n")
    lengths = _raise_thrice(lambda: decoder.feed(b"data: x\n\n"))
    assert lengths == [lengths[0]] * 3
    lengths = _raise_thrice(decoder.end)
    assert lengths == [lengths[0]] * 3


def test_tool_call_arguments_error_raised_again_has_a_constant_traceback() -> None:
    call = complete_tool_call(
        ToolCall(index=0, id="c", type="function", name="f", arguments="{", finished=True),
        schemas=None,
    )
    assert isinstance(call.error, ToolArgumentsError)
    lengths = _raise_thrice(call.parse_arguments)
    assert lengths == [lengths[0]] * 3


async def test_http_body_error_raised_again_has_a_constant_traceback() -> None:
    script = ScriptedResponse(
        body=b"data: x\n\n".ljust(100), framing="content-length", disconnect_after=9
    )
    async with serving(script) as (client, _):
        async with open_http_response(MEMORY, b"{}", transport=client) as response:
            with pytest.raises(IncompleteBody) as first:
                await read_until_error(response, bytearray())
            lengths: list[int] = []
            for _ in range(3):
                with pytest.raises(IncompleteBody) as again:
                    await response.receive_some()
                assert again.value is first.value
                lengths.append(len(list(traceback.walk_tb(again.value.__traceback__))))
    assert lengths == [lengths[0]] * 3


# --- small pieces ----------------------------------------------------------------------


def test_headers_view() -> None:
    headers = Headers(
        [(b"Content-Type", b"text/event-stream"), (b"X-A", b"1"), (b"x-a", b"2"), (b"X-L", b"\xe9")]
    )
    assert headers["content-type"] == headers["CONTENT-TYPE"] == "text/event-stream"
    assert headers["x-a"] == "1, 2"
    assert headers.get_all("X-A") == ["1", "2"]
    assert headers["x-l"] == "\u00e9"
    assert list(headers) == ["content-type", "x-a", "x-l"]
    assert len(headers) == 3
    assert "X-A" in headers
    assert "missing" not in headers
    assert headers.get("missing") is None
    with pytest.raises(KeyError):
        headers["missing"]
    assert headers == Headers(headers.raw)
    assert hash(headers) == hash(Headers(headers.raw))


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b'{"error": {"message": "m", "type": "t", "code": "c", "param": "p"}}', ("m", "t", "c")),
        (b'{"error": {"message": "m", "code": 429}}', ("m", None, 429)),
        (
            b'{"error": {"message": {"a": "\xc3\xa9"}, "code": true}}',
            ('{"a":"\u00e9"}', None, None),
        ),
        (b'{"error": {"code": 500}}', ('{"code":500}', None, 500)),
        (b'{"error": "plain"}', ("plain", None, None)),
        (
            b'{"message": "vllm", "type": "BadRequestError", "code": 400}',
            ("vllm", "BadRequestError", 400),
        ),
        (b'[{"error": {"message": "gemini", "code": 400, "status": "X"}}]', ("gemini", None, 400)),
        (b'{"error": null}', ('{"error":null}', None, None)),
        (b'{"error": 5}', ('{"error":5}', None, None)),
        (b"[]", ("[]", None, None)),
        (b'"text"', ("text", None, None)),
        (b"not json", None),
        (b"\xff\xfe\x00", None),
        (b"[" * 100_000 + b"]" * 100_000, None),
    ],
)
def test_parse_error_body(body: bytes, expected: tuple[str, str | None, Any] | None) -> None:
    error = parse_error_body(body)
    if expected is None:
        assert error is None
    else:
        assert error is not None
        assert (error.message, error.type, error.code) == expected


async def test_h11_is_not_asked_again_before_new_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    # A body h11 reads (here Content-Length; chunks are read without it): each read
    # ends on NEED_DATA, and the next read goes straight to the socket.
    calls = [0]
    next_event = h11.Connection.next_event

    def counting(self: Any) -> Any:
        calls[0] += self.our_role is h11.CLIENT  # not the test server's
        return next_event(self)

    monkeypatch.setattr(h11.Connection, "next_event", counting)
    script = ScriptedResponse(
        body=b"x" * 200, framing="content-length", write_sizes=10, delay=0.005
    )
    async with (
        open_test_server(script) as server,
        open_http_response(server.endpoint(), REQUEST) as response,
    ):
        reads = []
        while data := await response.receive_some():
            reads.append(data)
    assert b"".join(reads) == b"x" * 200
    # Per read: Data, then NEED_DATA (the head and the end add a few).  Asking again
    # at the start of each read, as before, made it three a read.
    assert calls[0] <= 2 * len(reads) + 4

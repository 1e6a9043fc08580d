"""chunkwise.telemetry with the real opentelemetry-sdk and its in-memory exporters.

For the three APIs: a complete stream (every figure exact under trio's
MockClock, over memory streams), a cut one, a failed one, an error status
before the stream, and a retried one (loopback, real time: orderings and
counts, not times).  Then the legacy names, an exporter that raises, and
that nothing imports opentelemetry unless telemetry is asked for.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import pytest
import trio
import trio.testing
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import chunkwise
from chunkwise import InvalidEndpoint, Retries
from chunkwise.telemetry import Telemetry, instrument
from chunkwise.testing import RecordedRequest, ResponseWriter, ScriptedResponse, open_test_server
from helpers.bodies import choice, chunk
from helpers.servers import serving

TOKENS = 5
FAST = Retries(max_retries=2, initial_delay=0.01, max_delay=0.02)


def data(payload: Mapping[str, Any] | str) -> bytes:
    text = payload if isinstance(payload, str) else json.dumps(payload)
    return f"data: {text}\n\n".encode()


def typed(payload: Mapping[str, Any]) -> bytes:
    return f"event: {payload['type']}\ndata: {json.dumps(payload)}\n\n".encode()


def completion(text: str, **more: Any) -> dict[str, Any]:
    return {"id": "cmpl-1", "model": "test-model", "choices": [{"index": 0, "text": text, **more}]}


CHAT_USAGE = {"prompt_tokens": 3, "completion_tokens": TOKENS, "total_tokens": 8}
RESPONSE = {"id": "resp_1", "model": "test-model", "status": "in_progress"}
AT = {"output_index": 0, "item_id": "msg_1", "content_index": 0}
MESSAGE = {"id": "msg_1", "type": "message", "role": "assistant", "content": []}
DONE_USAGE = {"input_tokens": 3, "output_tokens": TOKENS, "total_tokens": 8}
ERROR = {"message": "The server had an error", "type": "server_error"}


class Shape:
    """One API's wire: its namespace, request, start, a token, the end, an in-stream error."""

    def __init__(
        self,
        namespace: Any,
        request: dict[str, Any],
        start: bytes,
        token: Callable[[int], bytes],
        end: bytes,
        error: bytes,
        operation: str,
        finish: tuple[str, ...],
    ) -> None:
        self.namespace, self.request = namespace, request
        self.start, self.token, self.end, self.error = start, token, end, error
        self.operation, self.finish = operation, finish


SHAPES = {
    "chat": Shape(
        chunkwise.chat,
        {"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 0.5},
        data(chunk(choice(role="assistant", content=""))),
        lambda i: data(chunk(choice(content=f"t{i} "))),
        data(chunk(choice(finish_reason="stop"))) + data(chunk(usage=CHAT_USAGE)) + data("[DONE]"),
        data({"error": ERROR}),
        "chat",
        ("stop",),
    ),
    "completions": Shape(
        chunkwise.completions,
        {"model": "m", "prompt": "hi", "temperature": 0.5},
        data(completion("")),
        lambda i: data(completion(f"t{i} ")),
        data(completion("", finish_reason="stop"))
        + data({"id": "cmpl-1", "model": "test-model", "choices": [], "usage": CHAT_USAGE})
        + data("[DONE]"),
        data({"error": ERROR}),
        "text_completion",
        ("stop",),
    ),
    "responses": Shape(
        chunkwise.responses,
        {"model": "m", "input": "hi", "temperature": 0.5},
        typed({"type": "response.created", "response": RESPONSE})
        + typed({"type": "response.output_item.added", "output_index": 0, "item": MESSAGE}),
        lambda i: typed({"type": "response.output_text.delta", **AT, "delta": f"t{i} "}),
        typed(
            {
                "type": "response.completed",
                "response": {**RESPONSE, "status": "completed", "usage": DONE_USAGE},
            }
        ),
        typed({"type": "error", "error": ERROR})
        + typed({"type": "response.failed", "response": {**RESPONSE, "status": "failed"}}),
        "chat",
        ("completed",),
    ),
}


class Otel:
    """A tracer and a meter provider of the real SDK, in memory, and the telemetry on them."""

    def __init__(self, *, legacy_names: bool = False, processor: Any = None) -> None:
        self.spans = InMemorySpanExporter()
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        if processor is not None:
            tracer_provider.add_span_processor(processor)
        self.reader = InMemoryMetricReader()
        meter_provider = MeterProvider(metric_readers=[self.reader])
        self.telemetry = instrument(
            tracer_provider=tracer_provider,
            meter_provider=meter_provider,
            legacy_names=legacy_names,
        )

    def span(self) -> ReadableSpan:
        [span] = self.spans.get_finished_spans()
        return span

    def metrics(self) -> dict[str, tuple[str, list[Any]]]:
        """Each metric's unit and data points, by name."""
        found: dict[str, tuple[str, list[Any]]] = {}
        data = self.reader.get_metrics_data()
        for resource in data.resource_metrics if data is not None else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    found[metric.name] = (metric.unit or "", list(metric.data.data_points))
        return found


Handler = Callable[[RecordedRequest, ResponseWriter], Awaitable[None]]


def paced(
    shape: Shape, *, head_delay: float, first: float, between: float, cut: bool = False
) -> Handler:
    """A server: the start after ``head_delay``, the first token ``first`` later, and so on."""

    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        await trio.sleep(head_delay)
        await writer.start()
        await writer.write(shape.start)
        await trio.sleep(first)
        for i in range(TOKENS):
            if i:
                await trio.sleep(between)
            await writer.write(shape.token(i))
            if cut and i == 1:
                return  # the body ends without the answer's end
        await writer.write(shape.end)
        await writer.end()

    return handler


async def stream_over_memory(otel: Otel, shape: Shape, handler: Handler) -> Any:
    endpoint = chunkwise.Endpoint("http://127.0.0.1:9/v1", telemetry=otel.telemetry)
    async with serving(handler) as (client, _):
        async with shape.namespace.open_stream(endpoint, shape.request, transport=client) as stream:
            return await stream.result()


def common(shape: Shape, port: int = 9) -> dict[str, Any]:
    return {
        "gen_ai.operation.name": shape.operation,
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "m",
        "server.address": "127.0.0.1",
        "server.port": port,
        "gen_ai.response.model": "test-model",
    }


@pytest.mark.parametrize("api", list(SHAPES))
async def test_a_complete_stream_gives_one_span_and_exact_metrics(
    api: str, autojump_clock: trio.testing.MockClock
) -> None:
    shape, otel = SHAPES[api], Otel()
    handler = paced(shape, head_delay=0.5, first=0.2, between=0.02)
    result = await stream_over_memory(otel, shape, handler)
    assert result.status == "complete"
    span = otel.span()
    assert span.name == f"{shape.operation} m" and span.kind is SpanKind.CLIENT
    assert span.status.status_code is StatusCode.UNSET
    assert span.end_time is not None and span.start_time is not None
    assert (span.end_time - span.start_time) / 1e9 == pytest.approx(0.78)
    attributes = common(shape)
    assert dict(span.attributes or {}) == {
        **attributes,
        "gen_ai.request.stream": True,
        "gen_ai.request.temperature": 0.5,
        "gen_ai.response.id": "resp_1" if api == "responses" else result.id,
        "gen_ai.response.finish_reasons": shape.finish,
        "gen_ai.usage.input_tokens": 3,
        "gen_ai.usage.output_tokens": TOKENS,
        "gen_ai.response.time_to_first_chunk": pytest.approx(0.5),
        "chunkwise.attempts": 1,
    }
    # The caller's transport: no connect step; the request, then the head.
    assert [e.name for e in span.events] == ["chunkwise.send_request", "chunkwise.receive_head"]
    metrics = otel.metrics()
    assert set(metrics) == {
        "gen_ai.client.inference.duration",
        "gen_ai.client.inference.time_to_first_chunk",
        "gen_ai.client.inference.time_per_output_chunk",
        "gen_ai.client.inference.usage.input_tokens",
        "gen_ai.client.inference.usage.output_tokens",
    }
    for name, value in [
        ("duration", 0.78),  # the span's duration, as the conventions ask
        ("time_to_first_chunk", 0.5),  # Timings.first_event: the start chunk
    ]:
        unit, [point] = metrics[f"gen_ai.client.inference.{name}"]
        assert unit == "s" and point.count == 1 and point.sum == pytest.approx(value)
        assert dict(point.attributes) == attributes
        assert list(point.explicit_bounds)[:2] == [0.01, 0.02]
    unit, [point] = metrics["gen_ai.client.inference.time_per_output_chunk"]
    assert unit == "s" and point.count == TOKENS - 1  # Timings.gaps.count
    assert point.sum == pytest.approx(0.02 * (TOKENS - 1))
    assert point.max == pytest.approx(0.02) and point.min == pytest.approx(0.02)
    for kind, value in [("input", 3), ("output", TOKENS)]:
        unit, [point] = metrics[f"gen_ai.client.inference.usage.{kind}_tokens"]
        assert unit == "{token}" and point.value == value
        assert dict(point.attributes) == {**attributes, "gen_ai.token.modality": "unknown"}


@pytest.mark.parametrize("api", list(SHAPES))
async def test_a_cut_stream_is_an_error_span_with_its_figures_so_far(
    api: str, autojump_clock: trio.testing.MockClock
) -> None:
    shape, otel = SHAPES[api], Otel()
    handler = paced(shape, head_delay=0.5, first=0.2, between=0.02, cut=True)
    result = await stream_over_memory(otel, shape, handler)
    assert result.status == "incomplete"
    span = otel.span()
    assert span.status.status_code is StatusCode.ERROR
    attributes = dict(span.attributes or {})
    assert attributes["error.type"] == "unfinished"
    assert "gen_ai.usage.input_tokens" not in attributes
    metrics = otel.metrics()
    [point] = metrics["gen_ai.client.inference.duration"][1]
    assert dict(point.attributes) == {**common(shape), "error.type": "unfinished"}
    assert point.sum == pytest.approx(0.72)  # the last read: the second token
    [point] = metrics["gen_ai.client.inference.time_per_output_chunk"][1]
    assert point.count == 1 and point.sum == pytest.approx(0.02)
    # Usage counters count every operation: 0 when no usage came.
    for kind in ("input", "output"):
        [point] = metrics[f"gen_ai.client.inference.usage.{kind}_tokens"][1]
        assert point.value == 0


@pytest.mark.parametrize("api", list(SHAPES))
async def test_a_failed_stream_is_an_error_span_naming_the_error(api: str) -> None:
    shape, otel = SHAPES[api], Otel()
    body = shape.start + shape.error
    async with open_test_server([ScriptedResponse(body=body)]) as server:
        result = await shape.namespace.complete(
            server.endpoint(telemetry=otel.telemetry), shape.request
        )
    assert result.status == "failed"
    span = otel.span()
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == str(result.error)
    assert dict(span.attributes or {})["error.type"] == "chunkwise.StreamError"
    assert [e.name for e in span.events] == [
        "chunkwise.connect",
        "chunkwise.send_request",
        "chunkwise.receive_head",
    ]
    [point] = otel.metrics()["gen_ai.client.inference.duration"][1]
    assert point.attributes["error.type"] == "chunkwise.StreamError"


@pytest.mark.parametrize("api", list(SHAPES))
async def test_an_error_status_ends_the_span_with_the_status_code(api: str) -> None:
    shape, otel = SHAPES[api], Otel()
    refused = ScriptedResponse(
        status=400, body=json.dumps({"error": ERROR}).encode(), content_type="application/json"
    )
    async with open_test_server([refused]) as server:
        with pytest.raises(chunkwise.HTTPStatusError):
            await shape.namespace.complete(server.endpoint(telemetry=otel.telemetry), shape.request)
        port = server.port
    span = otel.span()
    assert span.status.status_code is StatusCode.ERROR
    assert dict(span.attributes or {})["error.type"] == "400"
    metrics = otel.metrics()
    [point] = metrics["gen_ai.client.inference.duration"][1]
    attributes = {**common(shape, port), "error.type": "400"}
    del attributes["gen_ai.response.model"]
    assert dict(point.attributes) == attributes
    assert "gen_ai.client.inference.time_to_first_chunk" not in metrics


@pytest.mark.parametrize("way", ["before output", "by the transport"])
@pytest.mark.parametrize("api", list(SHAPES))
async def test_a_retried_stream_is_one_span_with_a_retry_event(api: str, way: str) -> None:
    shape, otel = SHAPES[api], Otel()
    good = ScriptedResponse(body=shape.start + shape.token(0) + shape.end)
    if way == "before output":
        failing = ScriptedResponse(body=shape.start + shape.error)  # rule 7 of the stream
    else:
        failing = ScriptedResponse(status=503, body=b"", content_type="text/plain")
    async with open_test_server([failing, good]) as server:
        endpoint = server.endpoint(telemetry=otel.telemetry, retries=FAST)
        result = await shape.namespace.complete(endpoint, shape.request)
    assert result.status == "complete" and result.timings.attempts == 2
    span = otel.span()
    assert span.status.status_code is StatusCode.UNSET
    attributes = dict(span.attributes or {})
    assert attributes["chunkwise.attempts"] == 2
    retries = [e for e in span.events if e.name == "chunkwise.retry"]
    assert len(retries) == 1
    assert dict(retries[0].attributes or {})["chunkwise.retry"] == 1
    expected = "chunkwise.StreamError" if way == "before output" else "503"
    assert dict(retries[0].attributes or {})["error.type"] == expected
    # Each attempt's steps are in the one span, the retry between them.
    names = [e.name for e in span.events]
    assert names.count("chunkwise.receive_head") == 2  # the 503's head was read too
    assert names.index("chunkwise.retry") < len(names) - 1
    metrics = otel.metrics()
    [duration] = metrics["gen_ai.client.inference.duration"][1]
    [first] = metrics["gen_ai.client.inference.time_to_first_chunk"][1]
    assert duration.count == first.count == 1
    # Both count from the first send: the retry's wait is inside them.
    assert FAST.initial_delay / 2 <= first.sum <= duration.sum
    assert span.end_time is not None and span.start_time is not None
    assert duration.sum == pytest.approx((span.end_time - span.start_time) / 1e9, abs=1e-6)


async def test_legacy_names_give_the_operation_metrics_and_the_token_histogram(
    autojump_clock: trio.testing.MockClock,
) -> None:
    shape, otel = SHAPES["chat"], Otel(legacy_names=True)
    await stream_over_memory(otel, shape, paced(shape, head_delay=0.5, first=0.2, between=0.02))
    metrics = otel.metrics()
    assert set(metrics) == {
        "gen_ai.client.operation.duration",
        "gen_ai.client.operation.time_to_first_chunk",
        "gen_ai.client.operation.time_per_output_chunk",
        "gen_ai.client.token.usage",
    }
    [point] = metrics["gen_ai.client.operation.duration"][1]
    assert point.sum == pytest.approx(0.78)
    unit, points = metrics["gen_ai.client.token.usage"]
    assert unit == "{token}"
    by_type = {p.attributes["gen_ai.token.type"]: p for p in points}
    assert (by_type["input"].sum, by_type["output"].sum) == (3, TOKENS)
    assert list(by_type["input"].explicit_bounds)[:3] == [1, 4, 16]


class Raising(SpanProcessor):
    """A span processor (an exporter's) that fails at every end."""

    def on_end(self, span: ReadableSpan) -> None:
        raise RuntimeError("the exporter is down")


async def test_an_exporter_that_raises_never_breaks_a_stream(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    shape, otel = SHAPES["chat"], Otel(processor=Raising())
    handler = paced(shape, head_delay=0.5, first=0.2, between=0.02)
    result = await stream_over_memory(otel, shape, handler)
    assert result.status == "complete" and result.content == "t0 t1 t2 t3 t4 "
    assert any(
        "telemetry" in r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING
    )


def test_telemetry_must_come_from_instrument() -> None:
    with pytest.raises(InvalidEndpoint, match="instrument"):
        chunkwise.Endpoint("http://127.0.0.1/v1", telemetry=object())  # type: ignore[arg-type]
    assert isinstance(instrument(), Telemetry)  # the global providers by default
    shown = repr(chunkwise.Endpoint("http://127.0.0.1/v1", telemetry=instrument()))
    assert "telemetry=<on>" in shown


def test_without_telemetry_opentelemetry_is_never_imported() -> None:
    code = (
        "import sys, trio, chunkwise, chunkwise.telemetry\n"
        "from chunkwise.testing import open_test_server, ScriptedResponse\n"
        "async def main():\n"
        '    body = b\'data: {"choices": [{"index": 0, "delta": {"content": "Hi"},'
        ' "finish_reason": "stop"}]}\\n\\n\'\n'
        "    async with open_test_server([ScriptedResponse(body=body)]) as server:\n"
        "        result = await chunkwise.chat.complete(server.endpoint(), {'model': 'm'})\n"
        "    assert result.status == 'complete', result\n"
        "trio.run(main)\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"

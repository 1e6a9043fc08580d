"""Differential tests of the Responses layer against the official ``openai`` SDK.

The oracle is the SDK's own code for a streamed response, run over an
in-memory HTTP response that yields the same reads chunkwise is fed:
``openai._streaming.Stream[ResponseStreamEvent]`` (its SSE decoder, the
``[DONE]`` check, JSON, the ``error`` check, the typed events built by
``construct_type``), which is what ``client.responses.create(stream=True)``
returns, wrapped in ``openai.lib.streaming.responses.ResponseStream`` (whose
``ResponseStreamState`` accumulates the events), which is what
``client.responses.stream()`` runs; ``get_final_response()`` is its result.

Three groups of tests:

* agreement: on the vectors of ``tests/data/responses`` the SDK handles, and on
  generated streams with indices, both give the same status, text, reasoning
  summaries, function calls (call_id, name, arguments) and usage;
* layer 3 with SDK objects: the events the SDK decodes (plain iteration of
  ``create(stream=True)``), passed through ``event.model_dump(exclude_unset=True)``
  to :meth:`chunkwise.responses.Accumulator.feed_event`, give the result of
  chunkwise's own parse of the bytes;
* documented differences (``docs/differences.rst``, "Responses API"): each
  test feeds one stream to both and asserts what each does, as observed with
  openai 3.57.0.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import attrs
import pytest
from hypothesis import HealthCheck, given, settings

import chunkwise
from helpers.bodies import (
    call_events,
    call_item,
    message_item,
    response_object,
    response_sse,
    response_usage,
    rotated,
    text_events,
)
from helpers.data import DATA
from helpers.reads import accumulate_response, parse_response
from helpers.strategies import GeneratedResponse, response_streams

openai = pytest.importorskip("openai")

if TYPE_CHECKING:  # checked against the current SDK's HTTP library
    import httpx2 as _httpx
else:
    try:  # openai >= 3 uses httpx2; earlier versions use httpx.
        import httpx2 as _httpx
    except ImportError:  # pragma: no cover - depends on the installed SDK
        import httpx as _httpx

from openai._streaming import Stream  # noqa: E402
from openai.lib.streaming.responses import ResponseStream  # noqa: E402
from openai.types.responses import ResponseStreamEvent  # noqa: E402

FOLDER = DATA / "responses"
VECTORS = {p.stem: p for p in sorted(FOLDER.glob("*.sse"))}

# Vectors on which the SDK does not give the right result, and the test that
# shows the difference.  Every other vector must agree.
SDK_WRONG = {
    "llama_cpp_text": "test_no_content_index_sdk_raises_type_error",
    "llama_cpp_error": "test_no_content_index_sdk_raises_type_error",
    "openai_failed_nested_error": "test_nested_error_event_sdk_raises_api_error",
    "flat_error": "test_failure_without_exception_sdk_final_response_raises",
    "openai_incomplete": "test_response_incomplete_sdk_final_response_raises",
}
AGREEING = [name for name in VECTORS if name not in SDK_WRONG]
# The SDK's raw iteration (create(stream=True), no state) decodes every event
# of these; on the nested error shape it raises instead.
DECODABLE = [name for name in VECTORS if name != "openai_failed_nested_error"]

_OMIT = getattr(openai, "omit", None) or openai.NOT_GIVEN
_REQUEST = _httpx.Request("POST", "http://127.0.0.1:9/v1/responses")


# -- the oracle -----------------------------------------------------------------


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    sdk_client = openai.OpenAI(api_key="sk-differential-test", base_url="http://127.0.0.1:9/v1")
    yield sdk_client
    sdk_client.close()


class _Reads(_httpx.SyncByteStream):
    def __init__(self, reads: Sequence[bytes]) -> None:
        self._reads = reads

    def __iter__(self) -> Iterator[bytes]:
        yield from self._reads


def _raw_stream(client: Any, reads: Sequence[bytes]) -> Any:
    """What ``client.responses.create(stream=True)`` returns, over these reads."""
    response = _httpx.Response(
        200,
        headers={"content-type": "text/event-stream"},
        stream=_Reads(reads),
        request=_REQUEST,
    )
    return Stream(cast_to=cast(Any, ResponseStreamEvent), response=response, client=client)


@attrs.frozen
class SdkRun:
    """What ``client.responses.stream()`` made of a body.

    ``events`` are the events it yielded, ``error`` what iterating raised,
    ``final`` what ``get_final_response()`` returned and ``final_error``
    what it raised.
    """

    events: list[Any]
    error: Exception | None
    final: Any
    final_error: Exception | None


def run_sdk(client: Any, reads: Sequence[bytes]) -> SdkRun:
    stream = ResponseStream(
        raw_stream=_raw_stream(client, reads),
        text_format=_OMIT,
        input_tools=_OMIT,
        starting_after=None,
    )
    events: list[Any] = []
    error: Exception | None = None
    try:
        for event in stream:
            events.append(event)
    except Exception as exc:
        error = exc
    final = final_error = None
    try:
        final = stream.get_final_response()
    except Exception as exc:
        final_error = exc
    return SdkRun(events, error, final, final_error)


def sdk_decode(client: Any, reads: Sequence[bytes]) -> tuple[list[Any], Exception | None]:
    """Plain iteration of ``create(stream=True)``: the typed events, and what it raised."""
    events: list[Any] = []
    try:
        for event in _raw_stream(client, reads):
            events.append(event)
    except Exception as exc:
        return events, exc
    return events, None


def sdk_view(final: Any) -> dict[str, Any]:
    """The SDK's final response in a shape comparable with :func:`cw_view`."""
    return {
        "status": final.status,
        "output_text": final.output_text,
        "summaries": [
            [part.text for part in item.summary]
            for item in final.output
            if item.type == "reasoning"
        ],
        "calls": [
            (item.call_id, item.name, item.arguments)
            for item in final.output
            if item.type == "function_call"
        ],
        "usage": None if final.usage is None else final.usage.model_dump(exclude_unset=True),
    }


def cw_view(result: chunkwise.responses.Result) -> dict[str, Any]:
    return {
        "status": result.response_status,
        "output_text": result.output_text,
        "summaries": [
            [part.text for part in item.summary]
            for item in result.output
            if item.type == "reasoning"
        ],
        "calls": [(c.call_id, c.name, c.arguments) for c in result.function_calls],
        "usage": None if result.usage is None else dict(result.usage),
    }


def created() -> dict[str, Any]:
    return {"type": "response.created", "response": response_object()}


def completed(*output: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "type": "response.completed",
        "response": response_object("completed", output, response_usage()),
    }


HELLO = [created(), *text_events(0, "msg_1", ["Hel", "lo"])]
HELLO_DONE = [*HELLO, completed(message_item("msg_1", "Hello"))]


# -- agreement ------------------------------------------------------------------


@pytest.mark.parametrize("name", AGREEING)
def test_vector_agrees_with_sdk(client: Any, name: str) -> None:
    # Whole bodies: reads change nothing (test_split_invariance.py).
    reads = [VECTORS[name].read_bytes()]
    sdk = run_sdk(client, reads)
    _, result = parse_response(reads)
    assert (sdk.error, sdk.final_error) == (None, None)
    assert sdk_view(sdk.final) == cw_view(result)
    # chunkwise is complete exactly when the SDK's final response says completed.
    assert (result.status == "complete") == (sdk.final.status == "completed")


def test_agreeing_and_excluded_vectors_cover_every_vector() -> None:
    assert set(AGREEING) | set(SDK_WRONG) == set(VECTORS)
    assert len(AGREEING) >= 6
    tests = {name for name in globals() if name.startswith("test_")}
    assert set(SDK_WRONG.values()) <= tests


def test_final_text_that_differs_from_the_deltas_agrees_with_sdk(client: Any) -> None:
    # Both take the authoritative text; chunkwise also records an anomaly.
    stream = [
        *HELLO[:4],
        *text_events(0, "msg_1", ["Help"])[4:],
        completed(message_item("msg_1", "Help")),
    ]
    body = response_sse(*stream)
    sdk = run_sdk(client, [body])
    _, result = parse_response([body])
    assert sdk.final.output_text == result.output_text == "Help"
    assert [a.kind for a in result.anomalies] == ["final text differs from deltas"]


def test_output_index_gaps_agree_with_sdk(client: Any) -> None:
    stream = [
        created(),
        *text_events(0, "msg_a", ["a"]),
        *text_events(2, "msg_b", ["b"]),
        completed(message_item("msg_a", "a"), message_item("msg_b", "b")),
    ]
    body = response_sse(*stream)
    sdk = run_sdk(client, [body])
    _, result = parse_response([body])
    assert sdk_view(sdk.final) == cw_view(result)
    assert [i.index for i in result.output] == [0, 2]


def _terminal_output(stream: GeneratedResponse) -> Any:
    return stream.events[-1]["response"]["output"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=response_streams())
def test_generated_stream_agrees_with_sdk_where_the_sdk_can_follow(
    client: Any, stream: GeneratedResponse
) -> None:
    sdk = run_sdk(client, [stream.body])
    _, result = parse_response([stream.body])
    assert result.status == "complete"
    if not stream.indexed and sdk.error is not None:
        # test_no_content_index_sdk_raises_type_error,
        # test_several_items_without_output_index_sdk_raises_duplicate_index
        assert isinstance(sdk.error, (TypeError, RuntimeError))
        assert sdk.final is None
        return
    assert sdk.error is None
    want = cw_view(result)
    if _terminal_output(stream) == []:
        # test_empty_terminal_output_sdk_final_response_has_no_output
        want.update(output_text="", summaries=[], calls=[])
    assert sdk_view(sdk.final) == want


# -- layer 3 with the SDK's decoded events --------------------------------------------


@pytest.mark.parametrize("name", DECODABLE)
def test_sdk_events_through_feed_event_match_byte_parse(client: Any, name: str) -> None:
    data = VECTORS[name].read_bytes()
    events, error = sdk_decode(client, [data])
    if name == "llama_cpp_error":
        # The bare {"error": ...} frame: the SDK raises APIError; chunkwise is
        # told the same with fail(StreamError(message)).
        assert isinstance(error, openai.APIError)
    else:
        assert error is None
    accumulator = chunkwise.responses.Accumulator()
    for event in events:
        accumulator.feed(event.model_dump(exclude_unset=True))
    if error is not None:
        accumulator.fail(chunkwise.StreamError(error.message, code=500))
    accumulator.end()
    _, want = parse_response([data])
    got = accumulator.result
    if name == "llama_cpp_error":
        assert attrs.evolve(got, error=None) == attrs.evolve(want, error=None)
        assert got.server_error is not None and want.server_error is not None
        assert got.server_error.message == want.server_error.message
    else:
        assert got == want


def _without_nones(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _without_nones(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nones(v) for v in value]
    return value


@pytest.mark.parametrize("name", ["openai_text", "openai_function_calls", "openai_reasoning"])
def test_plain_model_dump_only_adds_keys_set_to_none(client: Any, name: str) -> None:
    # model_dump() adds every key the SDK's types declare, set to None: the
    # usage details and the items' data (kept as sent) get those keys.
    data = VECTORS[name].read_bytes()
    events, _ = sdk_decode(client, [data])
    _, got = accumulate_response([e.model_dump() for e in events])
    _, want = parse_response([data])
    assert got != want
    assert _without_nones(cw_view(got)) == _without_nones(cw_view(want))
    assert [_without_nones(i.data) for i in got.output] == [
        _without_nones(i.data) for i in want.output
    ]
    assert (got.status, got.anomalies) == (want.status, want.anomalies)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=response_streams())
def test_generated_sdk_events_through_feed_event_match_byte_parse(
    client: Any, stream: GeneratedResponse
) -> None:
    # Plain create(stream=True) iteration decodes every event, with or
    # without indices: only the stream() helper's state needs them.
    events, error = sdk_decode(client, [stream.body])
    assert error is None
    dumped = [e.model_dump(exclude_unset=True) for e in events]
    assert accumulate_response(dumped) == parse_response([stream.body])


# -- documented differences -------------------------------------------------------------


def test_no_content_index_sdk_raises_type_error(client: Any) -> None:
    # llama.cpp sends no output_index / content_index (both vectors).
    for name, status in [("llama_cpp_text", "complete"), ("llama_cpp_error", "failed")]:
        data = VECTORS[name].read_bytes()
        sdk = run_sdk(client, [data])
        assert isinstance(sdk.error, TypeError)
        assert "list indices must be integers or slices, not NoneType" in str(sdk.error)
        assert isinstance(sdk.final_error, RuntimeError)
        # The raw iteration (create(stream=True)) works: only the helper breaks.
        _, decode_error = sdk_decode(client, [data])
        assert decode_error is None or isinstance(decode_error, openai.APIError)
        _, result = parse_response([data])
        assert result.status == status
        assert result.output_text in ("Hello from llama", "Partial")


def test_several_items_without_output_index_sdk_raises_duplicate_index(client: Any) -> None:
    stream = [
        created(),
        *call_events(None, "fc_a", "call_a", "f", ["{}"]),
        *call_events(None, "fc_b", "call_b", "g", ['{"x": 1}']),
        completed(
            call_item("fc_a", "call_a", "f", "{}"), call_item("fc_b", "call_b", "g", '{"x": 1}')
        ),
    ]
    body = response_sse(*stream)
    sdk = run_sdk(client, [body])
    assert isinstance(sdk.error, RuntimeError)
    assert str(sdk.error) == "Duplicate response output index None."
    _, result = parse_response([body])
    assert result.status == "complete"
    assert [(c.call_id, c.arguments) for c in result.function_calls] == [
        ("call_a", "{}"),
        ("call_b", '{"x": 1}'),
    ]


def test_single_call_without_output_index_agrees_with_sdk_by_accident(client: Any) -> None:
    # The SDK keys the one item by output_index None, and every event finds it.
    data = VECTORS["llama_cpp_tool"].read_bytes()
    sdk = run_sdk(client, [data])
    _, result = parse_response([data])
    assert sdk.error is None
    assert sdk_view(sdk.final) == cw_view(result)


def test_nested_error_event_sdk_raises_api_error(client: Any) -> None:
    data = VECTORS["openai_failed_nested_error"].read_bytes()
    sdk = run_sdk(client, [data])
    assert isinstance(sdk.error, openai.APIError)
    assert sdk.error.message == "The server had an error while processing your request."
    assert "response.failed" not in [e.type for e in sdk.events]  # never read
    _, result = parse_response([data])
    assert result.status == "failed"
    assert result.server_error is not None and result.server_error.code == "server_error"
    assert result.output_text == "Partial answ"


@pytest.mark.parametrize(
    "stream",
    [
        "flat_error",
        [
            *HELLO,
            {
                "type": "response.failed",
                "response": response_object("failed", None, error={"code": "c", "message": "m"}),
            },
        ],
    ],
    ids=["flat-error-event", "response.failed-only"],
)
def test_failure_without_exception_sdk_final_response_raises(
    client: Any, stream: str | list[dict[str, Any]]
) -> None:
    # The documented flat error event passes through as a ResponseErrorEvent;
    # nothing raises, and only get_final_response() says no response completed.
    body = VECTORS[stream].read_bytes() if isinstance(stream, str) else response_sse(*stream)
    sdk = run_sdk(client, [body])
    assert sdk.error is None
    assert sdk.events[-1].type == "response.failed"
    assert isinstance(sdk.final_error, RuntimeError)
    assert str(sdk.final_error) == "Didn't receive a `response.completed` event."
    _, result = parse_response([body])
    assert result.status == "failed" and result.server_error is not None


def test_bare_error_frame_sdk_raises_api_error_both_fail(client: Any) -> None:
    body = response_sse(created()) + b'data: {"error": {"message": "boom", "code": 500}}\n\n'
    sdk = run_sdk(client, [body])
    assert isinstance(sdk.error, openai.APIError) and sdk.error.message == "boom"
    _, result = parse_response([body])
    assert result.status == "failed"
    assert result.server_error is not None and result.server_error.code == 500


def test_response_incomplete_sdk_final_response_raises(client: Any) -> None:
    data = VECTORS["openai_incomplete"].read_bytes()
    sdk = run_sdk(client, [data])
    assert sdk.error is None
    assert isinstance(sdk.final_error, RuntimeError)
    # The partial answer is only in the last event's response.
    assert sdk.events[-1].type == "response.incomplete"
    assert sdk.events[-1].response.output_text == "Once upon a time there"
    _, result = parse_response([data])
    assert (result.status, result.incomplete_reason) == ("incomplete", "max_output_tokens")
    assert result.output_text == "Once upon a time there"


def test_completed_wrapping_incomplete_sdk_returns_it_as_final(client: Any) -> None:
    data = VECTORS["vllm_completed_but_incomplete"].read_bytes()
    sdk = run_sdk(client, [data])
    assert sdk.final_error is None
    assert sdk.final.status == "incomplete"  # returned as the final response all the same
    _, result = parse_response([data])
    assert result.status == "incomplete"
    assert [a.kind for a in result.anomalies] == ["terminal event disagrees with status"]


def test_eof_before_the_terminal_event_sdk_final_response_raises(client: Any) -> None:
    body = response_sse(*HELLO)
    sdk = run_sdk(client, [body])
    assert sdk.error is None
    assert isinstance(sdk.final_error, RuntimeError)
    _, result = parse_response([body])
    assert (result.status, result.reason) == ("incomplete", chunkwise.IncompleteReason.UNFINISHED)
    assert result.output_text == "Hello"


def test_empty_terminal_output_sdk_final_response_has_no_output(client: Any) -> None:
    end = completed()
    body = response_sse(*HELLO, end)
    sdk = run_sdk(client, [body])
    assert sdk.final.output == [] and sdk.final.output_text == ""
    _, result = parse_response([body])
    assert result.output_text == "Hello"
    # A null output, by contrast, the SDK rebuilds from the finished items.
    end["response"]["output"] = None
    assert run_sdk(client, [response_sse(*HELLO, end)]).final.output_text == "Hello"


def test_done_before_the_terminal_event_sdk_stops_reading(client: Any) -> None:
    body = response_sse(*HELLO) + b"data: [DONE]\n\n" + response_sse(*HELLO_DONE[len(HELLO) :])
    sdk = run_sdk(client, [body])
    assert sdk.error is None
    assert isinstance(sdk.final_error, RuntimeError)
    _, result = parse_response([body])
    assert result.status == "complete" and result.output_text == "Hello"


@pytest.mark.parametrize(
    ("first", "message"),
    [
        ({"type": "keepalive"}, "Expected to have received `response.created` before `keepalive`"),
        (None, "Expected to have received `response.created` before `response.output_item.added`"),
    ],
    ids=["keepalive-first", "no-response.created"],
)
def test_stream_not_starting_with_response_created_sdk_raises(
    client: Any, first: dict[str, Any] | None, message: str
) -> None:
    stream = HELLO_DONE[1:] if first is None else [first, *HELLO_DONE]
    body = response_sse(*stream)
    sdk = run_sdk(client, [body])
    assert isinstance(sdk.error, RuntimeError) and str(sdk.error) == message
    _, result = parse_response([body])
    assert result.status == "complete" and result.output_text == "Hello"


def test_keepalive_is_typed_as_an_audio_delta_by_the_sdk(client: Any) -> None:
    events, _ = sdk_decode(client, [VECTORS["keepalive"].read_bytes()])
    keepalives = [e for e in events if e.type == "keepalive"]
    assert [type(e).__name__ for e in keepalives] == ["ResponseAudioDeltaEvent"] * 2


def test_event_before_its_item_sdk_raises(client: Any) -> None:
    orphan = {**HELLO[3], "output_index": 0}
    body = response_sse(created(), orphan, completed(message_item("msg_1", "Hel")))
    sdk = run_sdk(client, [body])
    assert isinstance(sdk.error, RuntimeError)
    assert "before receiving its output item" in str(sdk.error)
    _, result = parse_response([body])
    assert result.status == "complete" and result.output_text == "Hel"
    assert [a.kind for a in result.anomalies] == ["event for an unknown item"]


def test_response_id_changing_sdk_raises(client: Any) -> None:
    end = completed(message_item("msg_1", "Hello"))
    end["response"]["id"] = "resp_other"
    body = response_sse(*HELLO, end)
    sdk = run_sdk(client, [body])
    assert isinstance(sdk.error, RuntimeError)
    assert str(sdk.error) == "Lifecycle response identity changed."
    _, result = parse_response([body])
    assert (result.status, result.id) == ("complete", "resp_1")  # the first id is kept
    (anomaly,) = result.anomalies
    assert (anomaly.kind, anomaly.count) == ("response id changed", 1)


@pytest.mark.parametrize(
    ("rotate", "message"),
    [
        ("item ids", "Completed output item identity changed."),
        ("item and response ids", "Lifecycle response identity changed."),
    ],
)
def test_ids_rotating_on_every_event_sdk_raises(client: Any, rotate: str, message: str) -> None:
    # A Copilot Responses endpoint sends a new item id (and response id) with
    # every event; only output_index stays.
    in_progress = {"type": "response.in_progress", "response": response_object()}
    stream = rotated([created(), in_progress, *text_events(0, "m", ["Hel", "lo"]), HELLO_DONE[-1]])
    if rotate == "item ids":
        for event in stream:
            if "response" in event:
                event["response"]["id"] = "resp_1"
    body = response_sse(*stream)
    sdk = run_sdk(client, [body])
    assert isinstance(sdk.error, RuntimeError) and str(sdk.error) == message
    _, result = parse_response([body])
    assert (result.status, result.output_text) == ("complete", "Hello")
    counted = {a.kind: a.count for a in result.anomalies}
    assert counted["item id changed"] == 7  # all but the first id of the message
    assert ("response id changed" in counted) == (rotate != "item ids")
    # The SDK's plain iteration decodes the events; fed to the accumulator,
    # they give the byte parse's result.
    events, error = sdk_decode(client, [body])
    assert error is None
    accumulator = chunkwise.responses.Accumulator()
    for event in events:
        accumulator.feed(event.model_dump(exclude_unset=True))
    accumulator.end()
    assert accumulator.result == result


def test_vector_files_are_json_per_event() -> None:
    # Every data line of the vectors is one JSON object (or [DONE]): the
    # differences above come from the events' contents, not from broken JSON.
    for path in VECTORS.values():
        for line in path.read_bytes().decode().splitlines():
            if line.startswith("data: ") and line != "data: [DONE]":
                assert isinstance(json.loads(line[6:]), dict)


def test_every_difference_in_the_docs_has_its_test() -> None:
    text = (Path(__file__).parents[2] / "docs" / "differences.rst").read_text(encoding="utf-8")
    section = text.split("Responses API\n-------------", 1)[1]
    named = set(re.findall(r"``(test_\w+)``", section))
    tests = {name for name in globals() if name.startswith("test_")}
    assert named and named <= tests
    assert set(SDK_WRONG.values()) <= named

"""Differential tests: chunkwise against the official ``openai`` SDK as an oracle.

The oracle is the SDK's own code for a streamed chat completion, run over an
in-memory HTTP response that yields the same reads chunkwise is fed:
``openai._streaming.Stream`` (its SSE decoder, the ``[DONE]`` check, JSON,
the ``error`` check and ``ChatCompletionChunk`` construction) wrapped in
``openai.lib.streaming.chat.ChatCompletionStream`` (the ``object`` filter and
``ChatCompletionStreamState.handle_chunk``), which is what
``client.chat.completions.stream()`` runs.

Three groups of tests:

* agreement: on the twelve recorded OpenAI streams and on the provider vectors
  the SDK handles correctly, both give the same content, refusal, reasoning,
  tool calls, finish reasons and usage, choice by choice;
* layer 3 with SDK objects: the SDK's decoded chunks, passed through
  ``chunk.model_dump(...)`` to :class:`chunkwise.chat.Accumulator`, give the same
  :class:`chunkwise.chat.Result` as chunkwise's own parse of the bytes;
* documented differences (``docs/differences.rst``): each test feeds one
  stream to both and asserts what each does.  The SDK side records behaviour
  observed with openai 3.57.0; if a later SDK changes, the test says which
  difference went away.
"""

from __future__ import annotations

import json
import pathlib
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import pytest

import chunkwise
from helpers.data import DATA, RECORDINGS, load_vectors
from helpers.reads import parse_chat

openai = pytest.importorskip("openai")

if TYPE_CHECKING:  # checked against the current SDK's HTTP library
    import httpx2 as _httpx
else:
    try:  # openai >= 3 uses httpx2; earlier versions use httpx.
        import httpx2 as _httpx
    except ImportError:  # pragma: no cover - depends on the installed SDK
        import httpx as _httpx

from openai._streaming import Stream  # noqa: E402
from openai.lib.streaming.chat import ChatCompletionStream  # noqa: E402
from openai.types.chat import ChatCompletionChunk  # noqa: E402

VECTORS: dict[str, dict[str, Any]] = {v["name"]: v for v in load_vectors()}

# Vectors on which the SDK does not give the right result, and the test that
# shows the difference.  Every other vector must agree.
SDK_WRONG = {
    "openai_midstream_error_event": "test_error_object_in_chunk_sdk_raises_api_error",
    "groq_whole_tool_call_usage_under_x_groq": "test_usage_under_x_groq_sdk_reports_none",
}
AGREEING_VECTORS = [name for name in VECTORS if name not in SDK_WRONG]

_OMIT = getattr(openai, "omit", None) or openai.NOT_GIVEN
_REQUEST = _httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")


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


@attrs.frozen
class SdkRun:
    """What the SDK made of a body.

    ``error`` is what iterating the stream raised; ``final_error`` what
    ``get_final_completion()`` raised afterwards; ``snapshot`` the state's
    accumulated completion (``None`` when no chunk arrived).
    """

    chunks: list[Any]
    snapshot: Any
    error: Exception | None
    final: Any
    final_error: Exception | None


def run_sdk(client: Any, reads: Sequence[bytes]) -> SdkRun:
    response = _httpx.Response(
        200,
        headers={"content-type": "text/event-stream"},
        stream=_Reads(reads),
        request=_REQUEST,
    )
    raw = Stream(cast_to=ChatCompletionChunk, response=response, client=client)
    stream = ChatCompletionStream(raw_stream=raw, response_format=_OMIT, input_tools=_OMIT)
    chunks: list[Any] = []
    error: Exception | None = None
    try:
        for event in stream:
            if event.type == "chunk":
                chunks.append(event.chunk)
    except Exception as exc:
        error = exc
    snapshot = stream.current_completion_snapshot if chunks else None
    final = final_error = None
    if error is None:
        try:
            final = stream.get_final_completion()
        except Exception as exc:
            final_error = exc
    return SdkRun(chunks, snapshot, error, final, final_error)


def sdk_view(snapshot: Any) -> dict[str, Any]:
    """The SDK's accumulated completion in a shape comparable with chunkwise's."""
    choices = {}
    for choice in snapshot.choices:
        message = choice.message
        extra = message.model_extra or {}
        choices[choice.index] = {
            "content": message.content or "",
            "refusal": message.refusal,
            # The SDK has no reasoning field; its generic delta merge keeps
            # unknown string fields concatenated as extras.
            "reasoning": extra.get("reasoning_content") or extra.get("reasoning"),
            "tool_calls": [
                (call.id, call.function.name, call.function.arguments)
                for call in message.tool_calls or ()
            ],
            "finish_reason": choice.finish_reason,
        }
    usage = snapshot.usage
    return {
        "choices": choices,
        "usage": None if usage is None else usage.model_dump(exclude_unset=True),
    }


def cw_view(result: chunkwise.chat.Result) -> dict[str, Any]:
    return {
        "choices": {
            choice.index: {
                "content": choice.content,
                "refusal": choice.refusal,
                "reasoning": choice.reasoning,
                "tool_calls": [(t.id, t.name, t.arguments) for t in choice.tool_calls],
                "finish_reason": choice.finish_reason,
            }
            for choice in result.choices
        },
        "usage": None if result.usage is None else dict(result.usage),
    }


# -- building small streams ------------------------------------------------------


def chunk(*choices: Mapping[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-diff",
        "object": "chat.completion.chunk",
        "created": 1764633600,
        "model": "test-model",
        "choices": list(choices),
        **extra,
    }


def choice(index: int = 0, finish_reason: str | None = None, **delta: Any) -> dict[str, Any]:
    return {"index": index, "delta": delta, "finish_reason": finish_reason}


def event(body: Mapping[str, Any]) -> bytes:
    return b"data: " + json.dumps(body).encode() + b"\n\n"


DONE = b"data: [DONE]\n\n"
HELLO_PARTS = (
    event(chunk(choice(role="assistant", content="Hel"))),
    event(chunk(choice(content="lo"))),
    event(chunk(choice(finish_reason="stop"))),
    DONE,
)
HELLO = b"".join(HELLO_PARTS)
USAGE = {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}


def tool_call(**fields: Any) -> dict[str, Any]:
    call = {k: v for k, v in fields.items() if k in ("index", "id", "type")}
    call["function"] = {k: v for k, v in fields.items() if k in ("name", "arguments")}
    return call


# -- agreement -------------------------------------------------------------------


@pytest.mark.parametrize("path", RECORDINGS, ids=[p.stem for p in RECORDINGS])
def test_recording_agrees_with_sdk(client: Any, path: pathlib.Path) -> None:
    # Whole bodies: reads change nothing (test_split_invariance.py).
    reads = [path.read_bytes()]
    sdk = run_sdk(client, reads)
    _, result = parse_chat(reads)
    assert sdk.error is None
    assert result.status == "complete"
    assert cw_view(result) == sdk_view(sdk.snapshot)


def test_every_recording_is_covered() -> None:
    assert len(RECORDINGS) == 12


@pytest.mark.parametrize("name", AGREEING_VECTORS)
def test_provider_vector_agrees_with_sdk(client: Any, name: str) -> None:
    reads = [VECTORS[name]["raw"].encode()]
    sdk = run_sdk(client, reads)
    _, result = parse_chat(reads)
    assert sdk.error is None
    assert sdk.final_error is None
    assert cw_view(result) == sdk_view(sdk.snapshot)


def test_excluded_vectors_exist() -> None:
    assert set(SDK_WRONG) <= set(VECTORS)
    assert len(AGREEING_VECTORS) >= 5


def test_cr_at_end_of_read_then_lf_agrees_with_sdk(client: Any) -> None:
    # Observed with openai 3.57.0: the SDK's line splitter joins a CR at the
    # end of one read with an LF at the start of the next, as chunkwise does.
    data = HELLO.replace(b"\n", b"\r\n")
    cuts = [i + 1 for i in range(len(data)) if data[i : i + 1] == b"\r"]
    reads = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
    assert all(read.endswith(b"\r") for read in reads[:-1])
    sdk = run_sdk(client, reads)
    _, result = parse_chat(reads)
    assert sdk.error is None
    assert result.status == "complete"
    assert cw_view(result) == sdk_view(sdk.snapshot)
    assert result.content == "Hello"


def test_cr_only_line_endings_agree_with_sdk(client: Any) -> None:
    data = HELLO.replace(b"\n", b"\r")
    reads = [data[:37], data[37:38], data[38:]]
    sdk = run_sdk(client, reads)
    _, result = parse_chat(reads)
    assert sdk.error is None
    assert cw_view(result) == sdk_view(sdk.snapshot)
    assert result.content == "Hello"


# -- layer 3 fed with the SDK's objects -----------------------------------------


def _without_nulls(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    return value


BODIES = {p.stem: p.read_bytes() for p in RECORDINGS} | {
    name: v["raw"].encode() for name, v in VECTORS.items()
}


@pytest.mark.parametrize("dump", ["exclude_unset", "model_dump"])
@pytest.mark.parametrize("name", BODIES)
def test_sdk_chunks_through_accumulator_match_byte_parse(client: Any, name: str, dump: str) -> None:
    data = BODIES[name]
    _, want = parse_chat([data])
    sdk = run_sdk(client, [data])
    acc = chunkwise.chat.Accumulator()
    for sdk_chunk in sdk.chunks:
        if dump == "exclude_unset":
            acc.feed(sdk_chunk.model_dump(exclude_unset=True))
        else:
            acc.feed(sdk_chunk.model_dump())
    if isinstance(sdk.error, openai.APIError):
        # The recipe of docs/sdk.rst: the SDK raises on an error payload.
        acc.fail(chunkwise.StreamError(sdk.error.message))
    else:
        assert sdk.error is None
        acc.end()
    got = acc.result
    # The SDK consumes [DONE] itself, so the accumulator never sees it.
    assert not got.done_received
    got = attrs.evolve(got, done_received=want.done_received)
    if sdk.error is not None:
        assert got.status == want.status == "failed"
        assert isinstance(got.error, chunkwise.StreamError)
        assert isinstance(want.error, chunkwise.StreamError)
        assert got.error.message == want.error.message
        got = attrs.evolve(got, error=want.error)
    if dump == "model_dump":
        # model_dump() adds every field the SDK's types declare, with None
        # for those the server did not send (usage.prompt_tokens_details...).
        assert _without_nulls(got.usage) == _without_nulls(want.usage)
        # So for the chunk fields chunkwise does not model (service_tier: None...).
        assert _without_nulls(got.extra) == _without_nulls(want.extra)
        got = attrs.evolve(got, usage=want.usage, extra=want.extra)
    assert got == want


# -- documented differences ---------------------------------------------------------
# Each test shows what the SDK does (observed with openai 3.57.0) and what
# chunkwise does with the same bytes.  docs/differences.rst lists them.


def test_leading_bom_sdk_drops_first_event(client: Any) -> None:
    data = b"\xef\xbb\xbf" + HELLO
    sdk = run_sdk(client, [data])
    _, result = parse_chat([data])
    # SDK: the BOM stays glued to the first field name ("\ufeffdata"), an
    # unknown field, so the first event (role and "Hel") is lost.
    assert sdk.error is None
    assert sdk.final.choices[0].message.content == "lo"
    assert sdk.final.choices[0].message.role is None
    # chunkwise: WHATWG strips one leading BOM.
    assert result.status == "complete"
    assert result.content == "Hello"
    assert result.choice(0).role == "assistant"


def test_invalid_utf8_sdk_raises_chunkwise_replaces(client: Any) -> None:
    bad = event(chunk(choice(content="lo"))).replace(b'"lo"', b'"l\xffo"')
    data = HELLO_PARTS[0] + bad + HELLO_PARTS[2] + DONE
    sdk = run_sdk(client, [data])
    _, result = parse_chat([data])
    assert isinstance(sdk.error, UnicodeDecodeError)
    assert sdk.snapshot.choices[0].message.content == "Hel"
    assert result.status == "complete"
    assert result.content == "Hell\ufffdo"


@pytest.mark.parametrize("block", [b"id: 1\n\n", b"event: ping\n\n", b"retry: 3000\n\n"])
def test_block_without_data_sdk_raises_json_error(client: Any, block: bytes) -> None:
    data = block + HELLO
    sdk = run_sdk(client, [data])
    _, result = parse_chat([data])
    # SDK: dispatches an event with data "" and json.loads("") fails.
    assert isinstance(sdk.error, json.JSONDecodeError)
    assert sdk.chunks == []
    # chunkwise: an event without data lines is not dispatched (WHATWG).
    assert result.status == "complete"
    assert result.content == "Hello"


def test_extra_blank_line_after_an_id_sdk_raises_json_error(client: Any) -> None:
    # An id is remembered for the rest of the stream; the SDK then treats
    # every further blank line as an event.
    data = b"id: 1\n" + HELLO_PARTS[0] + b"\n" + b"".join(HELLO_PARTS[1:])
    sdk = run_sdk(client, [data])
    _, result = parse_chat([data])
    assert isinstance(sdk.error, json.JSONDecodeError)
    assert sdk.snapshot.choices[0].message.content == "Hel"
    assert result.status == "complete"
    assert result.content == "Hello"


def test_empty_data_line_sdk_raises_json_error(client: Any) -> None:
    data = b"data:\n\n" + HELLO
    sdk = run_sdk(client, [data])
    _, result = parse_chat([data])
    assert isinstance(sdk.error, json.JSONDecodeError)
    assert result.status == "complete"
    assert result.content == "Hello"


def test_tool_delta_without_index_sdk_raises_type_error(client: Any) -> None:
    first = tool_call(id="call_1", type="function", name="f", arguments='{"a":')
    data = (
        event(chunk(choice(role="assistant", tool_calls=[first])))
        + event(chunk(choice(tool_calls=[tool_call(arguments="1}")])))
        + event(chunk(choice(finish_reason="tool_calls")))
        + DONE
    )
    sdk = run_sdk(client, [data])
    _, result = parse_chat([data])
    assert isinstance(sdk.error, TypeError)
    assert result.status == "complete"
    (call,) = result.choice(0).tool_calls
    assert (call.id, call.name, call.arguments) == ("call_1", "f", '{"a":1}')
    assert call.parse_arguments() == {"a": 1}


def test_repeated_tool_id_and_name_sdk_concatenates(client: Any) -> None:
    def part(arguments: str) -> bytes:
        call = tool_call(index=0, id="call_1", type="function", name="f", arguments=arguments)
        return event(chunk(choice(tool_calls=[call])))

    data = part('{"a":') + part("1}") + event(chunk(choice(finish_reason="tool_calls"))) + DONE
    sdk = run_sdk(client, [data])
    _, result = parse_chat([data])
    assert sdk.error is None
    (sdk_call,) = sdk.final.choices[0].message.tool_calls
    assert (sdk_call.id, sdk_call.function.name) == ("call_1call_1", "ff")
    assert sdk_call.function.arguments == '{"a":1}'
    (call,) = result.choice(0).tool_calls
    assert (call.id, call.name, call.arguments) == ("call_1", "f", '{"a":1}')


def test_tool_index_not_starting_at_zero_sdk_raises_index_error(client: Any) -> None:
    call = tool_call(index=1, id="call_1", type="function", name="f", arguments="{}")
    data = (
        event(chunk(choice(role="assistant", tool_calls=[call])))
        + event(chunk(choice(finish_reason="tool_calls")))
        + DONE
    )
    sdk = run_sdk(client, [data])
    _, result = parse_chat([data])
    assert isinstance(sdk.error, IndexError)
    assert result.status == "complete"
    (cw_call,) = result.choice(0).tool_calls
    assert (cw_call.index, cw_call.id, cw_call.arguments) == (1, "call_1", "{}")


def test_role_repeated_in_every_delta_sdk_concatenates(client: Any) -> None:
    data = (
        event(chunk(choice(role="assistant", content="Hel")))
        + event(chunk(choice(role="assistant", content="lo")))
        + event(chunk(choice(finish_reason="stop")))
        + DONE
    )
    sdk = run_sdk(client, [data])
    _, result = parse_chat([data])
    assert sdk.error is None
    assert sdk.final.choices[0].message.role == "assistantassistant"
    assert result.choice(0).role == "assistant"
    # The OpenRouter vector repeats the role in each of its four deltas.
    vector = VECTORS["openrouter_processing_comments_reasoning_field_usage_cost"]
    data = vector["raw"].encode()
    assert run_sdk(client, [data]).final.choices[0].message.role == "assistant" * 4
    assert parse_chat([data])[1].choice(0).role == "assistant"


def test_choices_out_of_order_sdk_raises_index_error(client: Any) -> None:
    data = (
        event(chunk(choice(1, role="assistant", content="B")))
        + event(chunk(choice(0, role="assistant", content="A")))
        + event(chunk(choice(0, finish_reason="stop")))
        + event(chunk(choice(1, finish_reason="stop")))
        + DONE
    )
    sdk = run_sdk(client, [data])
    _, result = parse_chat([data])
    assert isinstance(sdk.error, IndexError)
    assert result.status == "complete"
    assert [(c.index, c.content) for c in result.choices] == [(0, "A"), (1, "B")]


@pytest.mark.parametrize("choices", ["missing", "null"])
def test_usage_chunk_without_choices_list_sdk_raises_type_error(client: Any, choices: str) -> None:
    usage_chunk: dict[str, Any] = chunk(usage=USAGE)
    if choices == "missing":
        del usage_chunk["choices"]
    else:
        usage_chunk["choices"] = None
    data = b"".join(HELLO_PARTS[:3]) + event(usage_chunk) + DONE
    sdk = run_sdk(client, [data])
    _, result = parse_chat([data])
    assert isinstance(sdk.error, TypeError)
    assert result.status == "complete"
    assert result.usage == USAGE


def test_usage_under_x_groq_sdk_reports_none(client: Any) -> None:
    data = VECTORS["groq_whole_tool_call_usage_under_x_groq"]["raw"].encode()
    sdk = run_sdk(client, [data])
    _, result = parse_chat([data])
    assert sdk.error is None
    assert sdk.final.usage is None
    assert result.usage is not None
    assert result.usage["total_tokens"] == 228
    # Apart from usage, they agree.
    assert cw_view(result)["choices"] == sdk_view(sdk.snapshot)["choices"]


@pytest.mark.parametrize("where", ["finish chunk, then an empty chunk", "last content chunk"])
def test_usage_not_on_the_last_chunk_sdk_reports_none(client: Any, where: str) -> None:
    if where == "last content chunk":
        data = (
            event(chunk(choice(role="assistant", content="Hello"), usage=USAGE))
            + event(chunk(choice(finish_reason="stop")))
            + DONE
        )
    else:
        data = (
            event(chunk(choice(role="assistant", content="Hello")))
            + event(chunk(choice(finish_reason="stop"), usage=USAGE))
            + event(chunk())
            + DONE
        )
    sdk = run_sdk(client, [data])
    _, result = parse_chat([data])
    # SDK: the snapshot's usage is the last chunk's, even when that is None.
    assert sdk.error is None
    assert sdk.final.usage is None
    assert result.usage == USAGE


def test_missing_done_and_finish_reason_sdk_reports_success(client: Any) -> None:
    data = b"".join(HELLO_PARTS[:2])  # the connection closed early
    sdk = run_sdk(client, [data])
    events, result = parse_chat([data])
    assert sdk.error is None
    assert sdk.final_error is None
    assert sdk.final.choices[0].finish_reason is None
    assert sdk.final.choices[0].message.content == "Hello"
    assert result.status == "incomplete"
    assert result.reason is chunkwise.IncompleteReason.UNFINISHED
    assert type(events[-1]) is chunkwise.StreamIncomplete
    assert result.content == "Hello"


def test_truncated_inside_an_event_sdk_reports_success(client: Any) -> None:
    data = HELLO_PARTS[0] + HELLO_PARTS[1][:30]
    sdk = run_sdk(client, [data])
    _, result = parse_chat([data])
    assert sdk.error is None
    assert sdk.final_error is None
    assert sdk.final.choices[0].message.content == "Hel"
    assert result.status == "incomplete"
    assert [a.kind for a in result.anomalies] == ["unterminated event"]


@pytest.mark.parametrize(
    ("reason", "sdk_exception"),
    [
        ("length", "LengthFinishReasonError"),
        ("content_filter", "ContentFilterFinishReasonError"),
    ],
)
def test_finish_reason_length_or_content_filter_sdk_final_completion_raises(
    client: Any, reason: str, sdk_exception: str
) -> None:
    data = HELLO_PARTS[0] + event(chunk(choice(finish_reason=reason))) + DONE
    sdk = run_sdk(client, [data])
    _, result = parse_chat([data])
    # SDK: iterating works, but get_final_completion() raises, even without
    # response_format or tools.
    assert sdk.error is None
    assert type(sdk.final_error) is getattr(openai, sdk_exception)
    assert sdk.snapshot.choices[0].finish_reason == reason
    # chunkwise: the reason is kept as sent; the choice finished.
    assert result.status == "complete"
    assert result.choice(0).finish_reason == reason
    assert result.content == "Hel"


def test_recorded_length_stream_sdk_final_completion_raises(client: Any) -> None:
    data = (DATA / "openai_recordings" / "4cc50a6135d2.sse").read_bytes()
    sdk = run_sdk(client, [data])
    _, result = parse_chat([data])
    assert isinstance(sdk.final_error, openai.LengthFinishReasonError)
    assert result.status == "complete"
    assert result.choice(0).finish_reason == "length"


def test_finish_reason_error_sdk_reports_success(client: Any) -> None:
    data = HELLO_PARTS[0] + event(chunk(choice(finish_reason="error"))) + DONE
    sdk = run_sdk(client, [data])
    events, result = parse_chat([data])
    assert sdk.error is None
    assert sdk.final_error is None
    assert sdk.final.choices[0].finish_reason == "error"
    assert result.status == "failed"
    assert type(events[-1]) is chunkwise.StreamFailed
    assert result.content == "Hel"


ERROR_SHAPES = {
    "object-error-body": event(
        {"object": "error", "message": "boom", "type": "BadRequestError", "code": 400}
    ),
    "sse-event-error": b'event: error\ndata: {"message": "boom", "code": 500}\n\n',
    "legacy-error-field": b'error: {"message": "boom", "code": 500}\n\n',
}


@pytest.mark.parametrize("shape", ERROR_SHAPES)
def test_error_without_error_key_sdk_ignores_it(client: Any, shape: str) -> None:
    data = HELLO_PARTS[0] + ERROR_SHAPES[shape]
    sdk = run_sdk(client, [data])
    events, result = parse_chat([data])
    # SDK: no exception; the error body is dropped (not a chat.completion.chunk)
    # or never dispatched, and the partial answer looks like a success.
    assert sdk.error is None
    assert sdk.final_error is None
    assert sdk.final.choices[0].message.content == "Hel"
    # chunkwise: the stream failed with the server's error; content kept.
    assert result.status == "failed"
    assert type(events[-1]) is chunkwise.StreamFailed
    assert result.server_error is not None
    assert result.server_error.message == "boom"
    assert result.content == "Hel"


def test_error_object_in_chunk_sdk_raises_api_error(client: Any) -> None:
    data = VECTORS["openai_midstream_error_event"]["raw"].encode()
    sdk = run_sdk(client, [data])
    _, result = parse_chat([data])
    # Both report the error; the SDK as an exception out of the iteration
    # (the content so far is only in the state's snapshot), chunkwise as a
    # failed result that keeps the content and the error's type and code.
    assert isinstance(sdk.error, openai.APIError)
    assert result.status == "failed"
    assert result.server_error is not None
    assert result.server_error.message == sdk.error.message
    assert result.server_error.type == "server_error"
    assert result.content == sdk.snapshot.choices[0].message.content


def test_only_done_sdk_final_completion_fails(client: Any) -> None:
    sdk = run_sdk(client, [DONE])
    _, result = parse_chat([DONE])
    assert sdk.error is None
    assert isinstance(sdk.final_error, AssertionError)
    assert result.status == "incomplete"
    assert result.reason is chunkwise.IncompleteReason.EMPTY_STREAM


def test_event_larger_than_limit_sdk_buffers_it(client: Any) -> None:
    big = "x" * 8192
    data = (
        event(chunk(choice(role="assistant", content=big)))
        + event(chunk(choice(finish_reason="stop")))
        + DONE
    )
    sdk = run_sdk(client, [data])
    _, result = parse_chat([data], max_event_size=4096)
    # SDK: no limit on an event's size.
    assert sdk.error is None
    assert sdk.final.choices[0].message.content == big
    # chunkwise: a configurable bound (chunkwise.types.DEFAULT_MAX_EVENT_SIZE by default).
    assert result.status == "failed"
    assert isinstance(result.error, chunkwise.errors.EventTooLarge)
    assert parse_chat([data])[1].content == big


def test_nan_in_a_chunk_sdk_accepts_it_chunkwise_fails_invalid_chunk(client: Any) -> None:
    nan = b'data: {"id":"c","object":"chat.completion.chunk","created":NaN,"model":"m",' + (
        b'"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null}]}\n\n'
    )
    data = HELLO_PARTS[0] + nan + DONE
    sdk = run_sdk(client, [data])
    _, result = parse_chat([data])
    # SDK: Python's json.loads accepts NaN, which is not JSON.
    assert sdk.error is None
    # chunkwise: strict JSON only; a NaN would make the result unequal to itself.
    assert result.status == "failed"
    assert isinstance(result.error, chunkwise.errors.InvalidChunk)
    assert result.content == "Hel"


def test_typed_content_parts_sdk_raises_runtime_error(client: Any) -> None:
    # Mistral's Magistral models send content as a list of typed parts.
    thinking = {"type": "thinking", "thinking": [{"type": "text", "text": "Hm."}]}
    data = (
        event(chunk(choice(role="assistant", content=[thinking])))
        + event(chunk(choice(content=[{"type": "text", "text": "Hel"}])))
        + event(chunk(choice(content=[{"type": "text", "text": "lo"}])))
        + event(chunk(choice(finish_reason="stop")))
        + DONE
    )
    with pytest.warns(UserWarning, match="serializ"):  # pydantic: content is not a str
        sdk = run_sdk(client, [data])
    _, result = parse_chat([data])
    # SDK: the first list is kept as the content, the second cannot be merged.
    assert isinstance(sdk.error, RuntimeError)
    assert "Expected list delta entry to have an `index` key" in str(sdk.error)
    # chunkwise: text parts are content, thinking parts reasoning, in order.
    assert result.status == "complete"
    assert (result.content, result.choice(0).reasoning) == ("Hello", "Hm.")


def test_done_without_finish_reason_agrees_with_sdk(client: Any) -> None:
    # Snowflake Cortex and some OpenRouter upstreams never send a finish_reason.
    call = tool_call(index=0, id="call_1", type="function", name="f", arguments='{"a": 1}')
    data = (
        event(chunk({"index": 0, "delta": {"role": "assistant", "content": "Hel"}}))
        + event(chunk({"index": 0, "delta": {"content": "lo", "tool_calls": [call]}}))
        + event(chunk(usage=USAGE))
        + DONE
    )
    sdk = run_sdk(client, [data])
    _, result = parse_chat([data])
    assert (sdk.error, sdk.final_error) == (None, None)
    assert sdk.final.choices[0].finish_reason is None
    assert cw_view(result) == sdk_view(sdk.snapshot)
    # chunkwise: [DONE] finished the choice; its call is finished and parsed.
    assert result.status == "complete"
    (cw_call,) = result.choice(0).tool_calls
    assert cw_call.finished and cw_call.parse_arguments() == {"a": 1}
    assert [a.kind for a in result.anomalies] == ["missing finish_reason"]
    # The SDK consumes [DONE]: from its chunks alone the accumulator cannot
    # tell the server's end from a cut body, unless told (docs/sdk.rst).
    for last in ("end", "[DONE]"):
        acc = chunkwise.chat.Accumulator()
        for sdk_chunk in sdk.chunks:
            acc.feed(sdk_chunk.model_dump(exclude_unset=True))
        if last == "end":
            acc.end()
            assert (acc.result.status, acc.result.reason) == ("incomplete", "unfinished")
        else:
            acc.feed_data("message", "[DONE]")
            assert acc.result == result

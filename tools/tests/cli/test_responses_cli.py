"""The command line with the Responses API: ``chat``, ``inspect``, ``record``, ``probe``.

The servers play fixed Responses bodies written here in the documented
OpenAI shapes (``event:`` + ``data:``, indices and sequence numbers) and in
llama.cpp's (no indices, comment pings, truncation reported as completed).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from chunkwise.testing import RecordedRequest, ResponseWriter, ScriptedResponse, open_test_server
from chunkwise_tools.cli import main
from chunkwise_tools.cli._common import split_http_head
from chunkwise_tools.cli._options import flat_tool
from chunkwise_tools.cli.inspect import detect_api
from helpers.cli import WEATHER_TOOL, run_main
from helpers.data import KEY, KEY_VAR

pytestmark = pytest.mark.usefixtures("api_key")

Event = dict[str, Any]
USAGE = {"input_tokens": 5, "output_tokens": 3, "total_tokens": 8}


def frame(*events: Event | str, eol: str = "\n", named: bool = True) -> bytes:
    """An SSE body: ``event: <type>`` (when ``named``) and ``data: <json>`` per event.

    A string is written as it is (a comment, ``data: [DONE]``...).
    """
    parts = []
    for event in events:
        if isinstance(event, str):
            parts.append(event + eol + eol)
            continue
        head = f"event: {event['type']}{eol}" if named and "type" in event else ""
        parts.append(f"{head}data: {json.dumps(event, ensure_ascii=False)}{eol}{eol}")
    return "".join(parts).encode()


def numbered(*events: Event) -> list[Event]:
    return [{**event, "sequence_number": n} for n, event in enumerate(events)]


def response(status: str, output: list[Any] | None = None, **extra: Any) -> Event:
    return {
        "id": "resp_1",
        "object": "response",
        "model": "gpt-test",
        "status": status,
        "output": output or [],
        **extra,
    }


MESSAGE = {"id": "msg_1", "type": "message", "role": "assistant", "status": "in_progress"}
DONE_MESSAGE = {
    **MESSAGE,
    "status": "completed",
    "content": [{"type": "output_text", "text": "Hello, wörld", "annotations": []}],
}
TEXT_EVENTS = numbered(
    {"type": "response.created", "response": response("in_progress")},
    {"type": "response.in_progress", "response": response("in_progress")},
    {"type": "response.output_item.added", "output_index": 0, "item": {**MESSAGE, "content": []}},
    {
        "type": "response.content_part.added",
        "output_index": 0,
        "content_index": 0,
        "item_id": "msg_1",
        "part": {"type": "output_text", "text": ""},
    },
    *(
        {
            "type": "response.output_text.delta",
            "output_index": 0,
            "content_index": 0,
            "item_id": "msg_1",
            "delta": delta,
        }
        for delta in ("Hello, ", "wörld")
    ),
    {
        "type": "response.output_text.done",
        "output_index": 0,
        "content_index": 0,
        "item_id": "msg_1",
        "text": "Hello, wörld",
    },
    {
        "type": "response.content_part.done",
        "output_index": 0,
        "content_index": 0,
        "item_id": "msg_1",
        "part": DONE_MESSAGE["content"][0],
    },
    {"type": "response.output_item.done", "output_index": 0, "item": DONE_MESSAGE},
    {
        "type": "response.completed",
        "response": response("completed", [DONE_MESSAGE], usage=USAGE),
    },
)
TEXT = frame(*TEXT_EVENTS)

CALL = {
    "id": "fc_1",
    "type": "function_call",
    "call_id": "call_abc",
    "name": "get_weather",
    "arguments": "",
    "status": "in_progress",
}
DONE_CALL = {**CALL, "arguments": '{"city": "Paris"}', "status": "completed"}
CALL_EVENTS = numbered(
    {"type": "response.created", "response": response("in_progress")},
    {"type": "response.output_item.added", "output_index": 0, "item": CALL},
    *(
        {
            "type": "response.function_call_arguments.delta",
            "output_index": 0,
            "item_id": "fc_1",
            "delta": delta,
        }
        for delta in ('{"city": ', '"Paris"}')
    ),
    {
        "type": "response.function_call_arguments.done",
        "output_index": 0,
        "item_id": "fc_1",
        "arguments": '{"city": "Paris"}',
    },
    {"type": "response.output_item.done", "output_index": 0, "item": DONE_CALL},
    {"type": "response.completed", "response": response("completed", [DONE_CALL], usage=USAGE)},
)
FUNCTION_CALL = frame(*CALL_EVENTS)

# llama.cpp: no sequence_number, output_index or content_index; comment pings;
# a bare response.created; truncation by max_output_tokens reported as completed.
LLAMA_MESSAGE = {**DONE_MESSAGE, "content": [{"type": "output_text", "text": "1 2 3"}]}
LLAMA = frame(
    ": ping",
    {
        "type": "response.created",
        "response": {"id": "resp_l", "object": "response", "status": "in_progress"},
    },
    {"type": "response.output_item.added", "item": {**MESSAGE, "content": []}},
    {"type": "response.output_text.delta", "item_id": "msg_1", "delta": "1 2"},
    ": ping",
    {"type": "response.output_text.delta", "item_id": "msg_1", "delta": " 3"},
    {"type": "response.output_item.done", "item": LLAMA_MESSAGE},
    {
        "type": "response.completed",
        "response": response(
            "completed",
            [LLAMA_MESSAGE],
            usage={"input_tokens": 4, "output_tokens": 16, "total_tokens": 20},
        ),
    },
)

# The connection ended before any terminal event: never complete.
CUT = frame(*TEXT_EVENTS[:6])
INCOMPLETE = frame(
    *TEXT_EVENTS[:6],
    {
        "sequence_number": 6,
        "type": "response.incomplete",
        "response": response(
            "incomplete",
            [{**DONE_MESSAGE, "status": "incomplete"}],
            incomplete_details={"reason": "max_output_tokens"},
            usage={"input_tokens": 5, "output_tokens": 16, "total_tokens": 21},
        ),
    },
)
FAILED = frame(
    *numbered(
        {"type": "response.created", "response": response("in_progress")},
        {
            "type": "error",
            "error": {"type": "server_error", "code": "server_error", "message": "The model broke"},
        },
        {
            "type": "response.failed",
            "response": response(
                "failed", error={"code": "server_error", "message": "The model broke"}
            ),
        },
    )
)


def sse_response(body: bytes, **kwargs: Any) -> ScriptedResponse:
    return ScriptedResponse(body=body, write_sizes=kwargs.pop("write_sizes", 11), **kwargs)


def endpoint_args(base_url: str) -> list[str]:
    return ["--base-url", base_url, "--api-key-env", KEY_VAR]


# -- detection ---------------------------------------------------------------------

CHAT_CHUNK = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}}]}
CREATED = {"type": "response.created", "response": {"id": "r", "status": "in_progress"}}


@pytest.mark.parametrize(
    ("body", "api"),
    [
        pytest.param(TEXT, "responses", id="openai"),
        pytest.param(LLAMA, "responses", id="llama.cpp"),
        pytest.param(frame(CREATED, named=False), "responses", id="data type only"),
        pytest.param(b"event: response.created\ndata: not json\n\n", "responses", id="event only"),
        pytest.param(
            b"\xef\xbb\xbf: hello\r\n\r\n"
            + frame({"type": "keepalive"}, "data: [DONE]", CREATED, eol="\r\n"),
            "responses",
            id="BOM, CRLF, comment, keepalive and [DONE] first",
        ),
        pytest.param(
            frame({"error": {"message": "busy"}}, CREATED, named=False),
            "responses",
            id="bare error first",
        ),
        pytest.param(
            frame({"object": "response", "id": "r"}, named=False), "responses", id="object"
        ),
        pytest.param(frame(CHAT_CHUNK, "data: [DONE]"), "chat", id="chat"),
        pytest.param(
            b"\xef\xbb\xbf: keep-alive\r\n\r\n" + frame(CHAT_CHUNK, eol="\r\n"),
            "chat",
            id="chat after BOM and comment",
        ),
        pytest.param(frame({"choices": []}, named=False), "chat", id="choices alone"),
        pytest.param(b"data: [DONE]\n\n", "chat", id="DONE alone"),
        pytest.param(b"", "chat", id="empty"),
        pytest.param(frame({"error": {"message": "x"}}, named=False), "chat", id="error alone"),
        pytest.param(frame(CREATED) + b'data: {"ty', "responses", id="cut in the second event"),
    ],
)
def test_detect_api(body: bytes, api: str) -> None:
    assert detect_api(body) == api


def test_detection_gives_up_after_many_events_that_tell_nothing() -> None:
    body = frame(*[{"type": "keepalive"}] * 100, CREATED)
    assert detect_api(body) == "chat"
    assert detect_api(frame(*[{"type": "keepalive"}] * 10, CREATED)) == "responses"


def test_flat_tool() -> None:
    assert flat_tool(WEATHER_TOOL) == {"type": "function", **WEATHER_TOOL["function"]}
    flat = {"type": "function", "name": "f", "parameters": {}}
    assert flat_tool(flat) == flat
    assert flat_tool({"type": "web_search"}) == {"type": "web_search"}


# -- chat --------------------------------------------------------------------------


async def test_chat_streams_text_and_sends_a_responses_request(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([WEATHER_TOOL]))
    async with open_test_server(sse_response(TEXT)) as server:
        status, out, err = await run_main(
            capsys,
            "chat",
            *endpoint_args(server.base_url),
            "--api",
            "responses",
            "Say hello",
            "--model",
            "my-model",
            "--system",
            "Be brief.",
            "--max-tokens",
            "20",
            "--temperature",
            "0.5",
            "--tools",
            str(tools),
        )
    assert status == 0
    assert out == "Hello, wörld\n"
    assert err.splitlines() == [
        "response_status: completed",
        "usage: input_tokens=5 output_tokens=3 total_tokens=8",
        "status: complete",
    ]
    [request] = server.requests
    assert request.target == "/v1/responses"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.json() == {
        "model": "my-model",
        "input": "Say hello",
        "instructions": "Be brief.",
        "max_output_tokens": 20,
        "temperature": 0.5,
        "tools": [{"type": "function", **WEATHER_TOOL["function"]}],
        "stream": True,
    }


async def test_chat_api_defaults_to_chat_completions(capsys: pytest.CaptureFixture[str]) -> None:
    async with open_test_server(sse_response(TEXT)) as server:
        status, _, _ = await run_main(capsys, "chat", *endpoint_args(server.base_url), "hi")
    # A Responses body read as chat completions has no choice: not complete.
    assert status == 1
    assert server.requests[0].target == "/v1/chat/completions"


async def test_chat_shows_function_calls_with_their_call_id(
    capsys: pytest.CaptureFixture[str],
) -> None:
    async with open_test_server(sse_response(FUNCTION_CALL)) as server:
        status, out, err = await run_main(
            capsys, "chat", *endpoint_args(server.base_url), "--api", "responses", "weather?"
        )
    assert status == 0
    assert out == '[function call 0] get_weather (call_abc): {"city": "Paris"}\n'
    assert err.splitlines()[-1] == "status: complete"


async def test_chat_reasoning_summary_and_refusal(capsys: pytest.CaptureFixture[str]) -> None:
    body = frame(
        {"type": "response.created", "response": response("in_progress")},
        {"type": "response.output_item.added", "output_index": 0, "item": {"type": "reasoning"}},
        {
            "type": "response.reasoning_summary_text.delta",
            "output_index": 0,
            "summary_index": 0,
            "delta": "Thinking.",
        },
        {"type": "response.output_item.added", "output_index": 1, "item": MESSAGE},
        {
            "type": "response.refusal.delta",
            "output_index": 1,
            "content_index": 0,
            "delta": "I can't.",
        },
        {"type": "response.completed", "response": response("completed")},
    )
    async with open_test_server(sse_response(body)) as server:
        status, out, _ = await run_main(
            capsys, "chat", *endpoint_args(server.base_url), "--api", "responses", "x"
        )
    assert status == 0
    assert out.splitlines() == ["[reasoning] Thinking.", "[refusal] I can't."]


@pytest.mark.parametrize(
    ("body", "status_line"),
    [
        (CUT, "status: incomplete (unfinished)"),
        (INCOMPLETE, "status: incomplete (reported by the server: max_output_tokens)"),
        (FAILED, "status: failed: The model broke"),
    ],
)
async def test_chat_says_how_the_answer_ended(
    capsys: pytest.CaptureFixture[str], body: bytes, status_line: str
) -> None:
    async with open_test_server(sse_response(body)) as server:
        status, out, err = await run_main(
            capsys, "chat", *endpoint_args(server.base_url), "--api", "responses", "x"
        )
    assert status == 1
    assert err.splitlines()[-1].startswith(status_line)
    if body is not FAILED:
        assert out == "Hello, wörld\n"


async def test_chat_json_prints_events_and_the_result(capsys: pytest.CaptureFixture[str]) -> None:
    async with open_test_server(sse_response(FUNCTION_CALL)) as server:
        status, out, _ = await run_main(
            capsys, "chat", *endpoint_args(server.base_url), "--api", "responses", "--json", "x"
        )
    assert status == 0
    lines = [json.loads(line) for line in out.splitlines()]
    types = [line["type"] for line in lines]
    assert "OutputItemAdded" in types
    assert types[-1] == "StreamCompleted"
    added = lines[types.index("OutputItemAdded")]
    assert added["item_type"] == "function_call"
    [completed] = [line for line in lines if line["type"] == "ToolCallCompleted"]
    assert completed["call"]["call_id"] == "call_abc"
    result = lines[-1]["result"]
    assert result["status"] == "complete"
    assert result["parsed"] is None
    assert result["output"][0]["call"]["call_id"] == "call_abc"
    assert result["output"][0]["call"]["parsed_arguments"] == {"city": "Paris"}


async def test_chat_refuses_include_usage_for_responses(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, _, err = await run_main(
        capsys, "chat", "--api", "responses", "--include-usage", "--base-url", "http://x/v1", "x"
    )
    assert status == 2
    assert "--include-usage is for --api chat" in err


async def test_chat_http_error_from_responses(capsys: pytest.CaptureFixture[str]) -> None:
    async with open_test_server(ScriptedResponse.error(400, "Unknown parameter")) as server:
        status, out, err = await run_main(
            capsys, "chat", *endpoint_args(server.base_url), "--api", "responses", "x"
        )
    assert status == 1
    assert out == ""
    assert "chunkwise chat: error: HTTP 400: Unknown parameter" in err


# -- inspect -----------------------------------------------------------------------


def inspect(capsys: pytest.CaptureFixture[str], path: Path, *extra: str) -> tuple[int, str]:
    status = main(["inspect", str(path), *extra])
    return status, capsys.readouterr().out


def test_inspect_reconstructs_a_responses_stream(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "text.sse"
    path.write_bytes(TEXT)
    status, out = inspect(capsys, path)
    assert status == 0
    assert out.splitlines() == [
        "item 0: message (msg_1)",
        "  role: assistant",
        "  text:",
        "    Hello, wörld",
        "  status: completed",
        "",
        "usage:",
        "  input_tokens: 5",
        "  output_tokens: 3",
        "  total_tokens: 8",
        "",
        "id: resp_1",
        "model: gpt-test",
        "response_status: completed",
        "status: complete",
    ]
    # Any split gives the same reconstruction.
    assert inspect(capsys, path, "--read-size", "1") == (0, out)
    assert inspect(capsys, path, "--api", "responses", "--read-size", "7") == (0, out)


@pytest.mark.parametrize(
    ("body", "status", "expected"),
    [
        (FUNCTION_CALL, 0, '  [function call 0] get_weather (call_abc): {"city": "Paris"}'),
        (LLAMA, 0, "    1 2 3"),
        (CUT, 1, "status: incomplete (unfinished)"),
        (INCOMPLETE, 1, "incomplete_reason: max_output_tokens"),
        (FAILED, 1, "status: failed: The model broke"),
    ],
)
def test_inspect_outcomes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, body: bytes, status: int, expected: str
) -> None:
    path = tmp_path / "stream.sse"
    path.write_bytes(body)
    got, out = inspect(capsys, path, "--read-size", "3")
    assert got == status
    assert expected in out.splitlines()


def test_inspect_notes_a_llama_answer_cut_at_its_limit_only_with_the_request(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "llama.sse"
    path.write_bytes(LLAMA)
    status, out = inspect(capsys, path)
    # The recording has no request, so no max_output_tokens to compare with.
    assert status == 0
    assert "status: complete" in out.splitlines()


def test_inspect_json_is_the_response_result(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "call.http"
    path.write_bytes(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + FUNCTION_CALL)
    status, out = inspect(capsys, path, "--json")
    assert status == 0
    document = json.loads(out)
    assert document["http_status_line"] == "HTTP/1.1 200 OK"
    assert document["status"] == "complete"
    assert document["response_status"] == "completed"
    assert "parsed" in document and document["parsed"] is None
    [item] = document["output"]
    assert item["type"] == "function_call"
    assert item["call"]["call_id"] == "call_abc"
    assert item["call"]["parsed_arguments"] == {"city": "Paris"}


def test_inspect_api_can_be_forced(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "text.sse"
    path.write_bytes(TEXT)
    status, out = inspect(capsys, path, "--api", "chat")
    assert status == 1
    assert "no choices" in out
    status, out = inspect(capsys, path, "--api", "chat", "--json")
    assert "choices" in json.loads(out)


def test_inspect_sse_is_the_same_for_both_apis(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "text.sse"
    path.write_bytes(TEXT)
    status, out = inspect(capsys, path, "--sse", "--read-size", "5")
    assert status == 0
    events = [json.loads(line) for line in out.splitlines()]
    assert [e["event"] for e in events] == [e["type"] for e in TEXT_EVENTS]
    assert json.loads(events[0]["data"]) == TEXT_EVENTS[0]


# -- record ------------------------------------------------------------------------


async def test_record_responses_keeps_the_bytes_and_inspect_reads_them(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    output = tmp_path / "out.http"
    scripted = sse_response(TEXT, write_sizes=5, headers={"X-Request-Id": "req_9"})
    async with open_test_server(scripted) as server:
        status, out, err = await run_main(
            capsys,
            "record",
            *endpoint_args(server.base_url),
            "--api",
            "responses",
            "-o",
            str(output),
            "--max-tokens",
            "50",
            "hello",
        )
    assert status == 0
    assert out == ""
    data = output.read_bytes()
    assert split_http_head(data) == ("HTTP/1.1 200 OK", TEXT)
    assert b"X-Request-Id: req_9\r\n" in data
    assert err.splitlines() == [
        f"recorded HTTP/1.1 200 OK, {len(TEXT)} body bytes, to {str(output)!r}",
        "status: complete",
    ]
    [request] = server.requests
    assert request.target == "/v1/responses"
    assert request.json() == {
        "model": "gpt-4o-mini",
        "input": "hello",
        "max_output_tokens": 50,
        "stream": True,
    }
    assert KEY.encode() not in data
    assert b"authorization" not in data.lower()
    assert inspect(capsys, output)[0] == 0


async def test_record_responses_warns_about_a_quoted_key_and_reports_the_cut(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    output = tmp_path / "cut.http"
    body = frame(*TEXT_EVENTS[:3], {"type": "keepalive", "note": f"key {KEY}"})
    async with open_test_server(sse_response(body, write_sizes=3)) as server:
        status, out, err = await run_main(
            capsys,
            "record",
            *endpoint_args(server.base_url),
            "--api",
            "responses",
            "-o",
            str(output),
            "x",
        )
    assert status == 1
    assert split_http_head(output.read_bytes())[1] == body  # unchanged, key included
    assert KEY not in out + err
    assert "warning: the server quoted the API key back" in err
    assert err.splitlines()[-1] == "status: incomplete (unfinished)"


# -- probe -------------------------------------------------------------------------


def responses_provider(
    text: bytes = TEXT, truncated: bytes = INCOMPLETE, call: bytes = FUNCTION_CALL
) -> Any:
    """A handler answering each probe request with the body of its kind."""

    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        assert request.target == "/v1/responses"
        body = request.json()
        assert body["stream"] is True
        if "tools" in body:
            assert body["tools"][0]["name"] == "get_weather"  # the flat shape
            chosen = call
        elif "max_output_tokens" in body:
            chosen = truncated
        else:
            chosen = text
        await writer.play(sse_response(chosen))

    return handler


async def run_probe(capsys: pytest.CaptureFixture[str], base_url: str) -> tuple[int, Any]:
    argv = ["probe", *endpoint_args(base_url), "--api", "responses", "--json"]
    status, out, err = await run_main(capsys, *argv)
    assert KEY not in out + err
    return status, json.loads(out)


async def test_probe_responses_of_an_openai_like_server(
    capsys: pytest.CaptureFixture[str],
) -> None:
    async with open_test_server(responses_provider()) as server:
        status, findings = await run_probe(capsys, server.base_url)
    assert status == 0
    assert findings["streaming_works"] is True
    assert findings["sequence_number"] == "present"
    assert findings["output_index"] == "present"
    assert findings["content_index"] == "present"
    assert findings["finishing_events"] == {
        "sent": [
            "response.content_part.added",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.function_call_arguments.done",
        ],
        "not_sent": [],
    }
    assert findings["keepalive_events"] == 0
    assert findings["keep_alive_comments"] == {"count": 0, "examples": []}
    assert findings["done_sent"] is False
    truncation = findings["truncation"]
    assert truncation["verdict"] == ("response.incomplete, status incomplete (max_output_tokens)")
    assert truncation["status"] == "incomplete (reported by the server: max_output_tokens)"
    assert findings["function_calls"]["verdict"] == "streamed"
    assert findings["function_calls"]["call_id"] is True
    assert findings["function_calls"]["arguments_done"] is True
    assert findings["error_shapes"] == []
    assert findings["final_status"] == "complete"
    assert [r["label"] for r in findings["requests"]] == [
        "text",
        "max_output_tokens 16",
        "function call",
    ]


async def test_probe_responses_of_a_llama_like_server(
    capsys: pytest.CaptureFixture[str],
) -> None:
    llama_call = frame(
        {"type": "response.created", "response": {"id": "r", "status": "in_progress"}},
        {"type": "response.output_item.added", "item": CALL},
        {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": "{}"},
        {"type": "response.output_item.done", "item": {**CALL, "arguments": "{}"}},
        {"type": "response.completed", "response": response("completed")},
        "data: [DONE]",
    )
    provider = responses_provider(text=LLAMA, truncated=LLAMA, call=llama_call)
    async with open_test_server(provider) as server:
        status, findings = await run_probe(capsys, server.base_url)
    assert status == 0
    assert findings["sequence_number"] == "missing"
    assert findings["output_index"] == "missing"
    assert findings["content_index"] == "missing"
    assert findings["finishing_events"]["not_sent"] == [
        "response.content_part.added",
        "response.output_text.done",
        "response.content_part.done",
        "response.function_call_arguments.done",
    ]
    assert findings["keep_alive_comments"] == {"count": 4, "examples": ["ping"]}
    assert findings["done_sent"] is True
    assert findings["truncation"]["verdict"] == (
        "response.completed, status completed, output_tokens at the limit"
    )
    assert findings["function_calls"]["arguments_done"] is False


def completed_with(output_tokens: int) -> bytes:
    """A short completed answer whose usage says ``output_tokens``."""
    usage = {"input_tokens": 3, "output_tokens": output_tokens, "total_tokens": 3 + output_tokens}
    return frame(
        {"type": "response.created", "response": response("in_progress")},
        {"type": "response.completed", "response": response("completed", usage=usage)},
    )


@pytest.mark.parametrize(
    ("output_tokens", "verdict"),
    [
        (16, "output_tokens at the limit"),
        (40, "40 output_tokens: max_output_tokens was ignored"),
        (5, "5 output_tokens: finished under the limit, nothing was cut"),
    ],
)
async def test_probe_responses_says_what_a_completed_truncation_request_shows(
    capsys: pytest.CaptureFixture[str], output_tokens: int, verdict: str
) -> None:
    # The request asks for max_output_tokens 16: "completed" means a cut
    # reported as complete (at the limit), a limit the server ignored (over
    # it), or an answer too short to be cut (under it).
    provider = responses_provider(truncated=completed_with(output_tokens))
    async with open_test_server(provider) as server:
        _, findings = await run_probe(capsys, server.base_url)
    assert findings["truncation"]["verdict"] == f"response.completed, status completed, {verdict}"
    assert findings["truncation"]["output_tokens"] == output_tokens


async def test_probe_responses_sees_a_done_sent_after_the_terminal_event(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The stream is over at response.completed; a [DONE] written after it, in a
    # later read, is still part of what the server does, and the probe says so.
    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        await writer.start()
        await writer.write(TEXT)
        await trio.sleep(0.05)
        await writer.write(b"data: [DONE]\n\n")

    async with open_test_server(handler) as server:
        _, findings = await run_probe(capsys, server.base_url)
    assert findings["done_sent"] is True
    assert findings["final_status"] == "complete"


async def test_probe_responses_reports_errors_and_breakage(
    capsys: pytest.CaptureFixture[str],
) -> None:
    async with open_test_server(responses_provider(text=FAILED)) as server:
        status, findings = await run_probe(capsys, server.base_url)
    assert status == 1
    assert findings["streaming_works"] is False
    assert findings["final_status"] == "failed: The model broke"
    assert findings["error_shapes"] == [
        "error event, nested",
        "response.failed with response.error",
    ]


async def test_probe_responses_table(capsys: pytest.CaptureFixture[str]) -> None:
    async with open_test_server(responses_provider(text=LLAMA)) as server:
        status, out, _ = await run_main(
            capsys, "probe", *endpoint_args(server.base_url), "--api", "responses"
        )
    assert status == 0
    lines = out.splitlines()
    assert lines[0].endswith("(model gpt-4o-mini, Responses API)")
    rows = {line.split("  ")[0]: line.split("  ", 1)[1].strip() for line in lines[2:17]}
    assert rows["streaming works"] == "yes"
    assert rows["sequence_number"] == "sometimes missing"
    assert rows["keep-alive comments"] == 'yes (2, e.g. "ping")'
    assert rows["truncation"] == "response.incomplete, status incomplete (max_output_tokens)"
    assert rows["final status"] == "complete"
    assert "  3. function call: HTTP 200, complete" in lines


async def test_probe_responses_when_the_server_has_no_responses_api(
    capsys: pytest.CaptureFixture[str],
) -> None:
    async with open_test_server(ScriptedResponse.error(404, "Not found")) as server:
        status, findings = await run_probe(capsys, server.base_url)
    assert status == 3  # the probe could not start
    assert findings["problems"] == ["text: HTTP 404: Not found"]
    assert findings["sequence_number"] is None
    assert findings["truncation"] == {"verdict": "not tried"}
    assert len(findings["requests"]) == 1

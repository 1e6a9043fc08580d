"""llama.cpp's ``llama-server`` answering ``POST /v1/responses``: real captures, parsed exactly.

The files in ``tests/data/llama_cpp/`` were captured from llama-server (built
from llama-cpp-python 0.3.36's sources) serving the scripted tiny model, by
``tests/llama_server/capture.py`` (see ``responses_server.json``).
The model is greedy: without tools it answers :data:`SENTENCE`, with the
``get_weather`` tool it calls ``get_weather({"city": "Zürich"})``.  Only the
ids, timestamps and ``timings`` change from one capture to the next, so the
expectations read the ids from the captured bytes and state everything else.

What the captures show of llama.cpp (and :func:`test_the_captures_show_llama_cpps_quirks`
checks): no ``sequence_number``, ``output_index`` or ``content_index`` on any
event; no ``response.function_call_arguments.done``; no ``[DONE]``;
``response.created`` with only ``id``, ``object`` and ``status``; a
``completed`` response when ``max_output_tokens`` cut the answer; a mid-stream
error as a bare ``data: {"error": ...}`` frame.  chunkwise parses each (whole
here; the same in any reads, proven over these captures by
``test_split_invariance.py``).

The official SDK (openai 3.57.0) is run on the same bytes at the end of the
file: its ``responses.stream()`` helper keys items by ``output_index`` and
fails on llama.cpp's text streams.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

import chunkwise
from helpers.data import DATA

LLAMA = DATA / "llama_cpp"
STREAMS = ["text", "max_output_tokens", "tool", "tool_max_output_tokens", "error_mid_stream"]
JSONSCHEMA = importlib.util.find_spec("jsonschema") is not None

#: The scripted model's answer without tools (27 tokens with the end token).
SENTENCE = (
    'Hello world!\nThe tiny model streams café, 日本語 🙂 "quotes" back\\slash and jalapeño 😀.'
)
#: One text delta per token, as llama.cpp sent them: "ñ" (2 byte tokens) and
#: "😀" (4) arrive whole, llama.cpp holds incomplete UTF-8 back.
DELTAS = [
    "Hello", " world", "!\n", "The", " tiny", " model", " streams", " caf", "é", ",", " 日本",
    "語", " 🙂", ' "quotes"', " back\\slash", " and", " jalape", "ñ", "o", " ", "😀", ".",
]  # fmt: skip
#: max_output_tokens=18 stops between the two bytes of "ñ": the first is never sent.
CUT_DELTAS = DELTAS[:17]
#: The tool call's argument fragments (10 output tokens in all).
ARGUMENT_FRAGMENTS = ['{"', "city", '": "', "Zürich", '"}']
CUT_ARGUMENT_FRAGMENTS = ARGUMENT_FRAGMENTS[:3]  # max_output_tokens=6
#: What each of the two interleaved completions of error_mid_stream said before the error.
ERROR_DELTAS = DELTAS[:12]
ERROR_MESSAGE = "context shift cannot be used for shared prompt"


def usage(input_tokens: int, output_tokens: int) -> dict[str, Any]:
    return {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "total_tokens": input_tokens + output_tokens,
        "input_tokens_details": {"cached_tokens": 0},
    }


TEXT_USAGE = usage(15, 27)
TOOL_USAGE = usage(375, 10)


def request(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((LLAMA / f"responses_{name}.request.json").read_bytes())
    return loaded


def body(name: str) -> bytes:
    return (LLAMA / f"responses_{name}.sse").read_bytes()


def wire_events(data: bytes) -> list[dict[str, Any]]:
    """The data of each event, decoded by hand (every llama.cpp event is one ``data:`` line)."""
    return [
        json.loads(line.removeprefix("data: "))
        for line in data.decode().split("\n")
        if line.startswith("data: ")
    ]


def ids(name: str, key: str, event_type: str) -> list[str]:
    """The ``key`` of each ``event_type`` event's item or response, in arrival order."""
    found = []
    for event in wire_events(body(name)):
        if event.get("type") == event_type:
            inner: dict[str, Any] = event.get("item") or event["response"]
            found.append(inner[key])
    return found


def parser_for(name: str) -> chunkwise.responses.Parser:
    """A parser told what the captured request asked (tools, max_output_tokens)."""
    sent = request(name)
    return chunkwise.responses.Parser(
        tools=sent.get("tools"), max_output_tokens=sent.get("max_output_tokens")
    )


def parse(
    name: str, reads: Sequence[bytes], parser: chunkwise.responses.Parser | None = None
) -> tuple[list[chunkwise.Event], chunkwise.responses.Result]:
    parser = parser or parser_for(name)
    events: list[chunkwise.Event] = []
    for read in reads:
        events += parser.feed(read)
    events += parser.end()
    return events, parser.result


def text_events(
    item_id: str, deltas: Sequence[str], output_index: int = 0
) -> Iterator[chunkwise.responses.TextDelta]:
    for delta in deltas:
        yield chunkwise.responses.TextDelta(
            output_index=output_index, content_index=0, item_id=item_id, text=delta
        )


# -- the captures ------------------------------------------------------------------


@pytest.mark.parametrize("name", STREAMS)
def test_the_captures_show_llama_cpps_quirks(name: str) -> None:
    data = body(name)
    events = wire_events(data)
    assert b"[DONE]" not in data
    for event in events:
        assert "sequence_number" not in event
        assert "output_index" not in event
        assert "content_index" not in event
    types = [event.get("type") for event in events]
    assert "response.function_call_arguments.done" not in types
    assert types[:2] == ["response.created", "response.in_progress"]
    created = events[0]["response"]
    assert sorted(created) == ["id", "object", "status"]
    if name == "error_mid_stream":
        # The frame has no `event:` line and no type: only `data:`.
        error = {"code": 500, "message": ERROR_MESSAGE, "type": "server_error"}
        frame = b"\n\ndata: " + json.dumps({"error": error}, separators=(",", ":")).encode()
        assert data.endswith(frame + b"\n\n")
        assert types[-1] is None
    else:
        assert types[-1] == "response.completed"
        assert events[-1]["response"]["status"] == "completed"


# -- text ----------------------------------------------------------------------------


def test_text() -> None:
    events, result = parse("text", [body("text")])
    [response_id] = ids("text", "id", "response.created")
    [message_id] = ids("text", "id", "response.output_item.added")

    assert response_id.startswith("resp_") and message_id.startswith("msg_")
    assert result.status == "complete"
    assert result.response_status == "completed"
    assert result.reason is None and result.error is None
    assert result.id == response_id
    assert result.model == "tiny"
    assert result.output_text == SENTENCE
    assert result.usage == TEXT_USAGE
    assert result.anomalies == ()
    assert result.function_calls == ()
    [item] = result.output
    assert (item.index, item.id, item.type, item.role) == (0, message_id, "message", "assistant")
    assert item.status == "completed" and item.done
    [part] = item.content
    assert (part.index, part.type, part.text, part.done) == (0, "output_text", SENTENCE, True)

    assert events == [
        chunkwise.responses.StatusChanged(status="in_progress"),
        chunkwise.responses.OutputItemAdded(
            output_index=0, item_id=message_id, item_type="message"
        ),
        *text_events(message_id, DELTAS),
        chunkwise.responses.OutputItemDone(output_index=0, item=item),
        chunkwise.UsageReported(usage=TEXT_USAGE),
        chunkwise.StreamCompleted(result=result),
    ]


def test_max_output_tokens_cut_inside_a_character_and_llama_cpp_says_completed() -> None:
    assert request("max_output_tokens")["max_output_tokens"] == 18
    events, result = parse("max_output_tokens", [body("max_output_tokens")])
    [message_id] = ids("max_output_tokens", "id", "response.output_item.added")
    cut = "".join(CUT_DELTAS)

    assert cut == SENTENCE[: SENTENCE.index("ñ")]
    # llama.cpp reports completed; chunkwise keeps the server's word and says
    # what the usage shows.
    assert result.status == "complete"
    assert result.response_status == "completed"
    assert result.incomplete_reason is None
    assert result.output_text == cut
    assert result.usage == usage(15, 18)
    [anomaly] = result.anomalies
    assert anomaly.kind == "max_output_tokens reached"
    assert "18 output tokens of max_output_tokens 18" in anomaly.detail
    [item] = result.output
    assert (item.id, item.status, item.done, item.text) == (message_id, "completed", True, cut)

    assert events[:-4] == [
        chunkwise.responses.StatusChanged(status="in_progress"),
        chunkwise.responses.OutputItemAdded(
            output_index=0, item_id=message_id, item_type="message"
        ),
        *text_events(message_id, CUT_DELTAS),
    ]
    assert events[-4:] == [
        chunkwise.responses.OutputItemDone(output_index=0, item=item),
        chunkwise.UsageReported(usage=usage(15, 18)),
        chunkwise.AnomalyDetected(anomaly=anomaly),
        chunkwise.StreamCompleted(result=result),
    ]


def test_without_max_output_tokens_nothing_says_the_answer_was_cut() -> None:
    _, result = parse(
        "max_output_tokens", [body("max_output_tokens")], chunkwise.responses.Parser()
    )
    assert result.status == "complete"
    assert result.anomalies == ()


# -- the get_weather tool ------------------------------------------------------------


def test_tool_call() -> None:
    events, result = parse("tool", [body("tool")])
    [item_id] = ids("tool", "id", "response.output_item.added")
    [call_id] = ids("tool", "call_id", "response.output_item.added")

    assert item_id.startswith("fc_") and call_id.startswith("call_")
    assert result.status == "complete"
    assert result.response_status == "completed"
    assert result.output_text == ""
    assert result.usage == TOOL_USAGE
    assert result.anomalies == ()
    [item] = result.output
    assert (item.index, item.id, item.type, item.status, item.done) == (
        0,
        item_id,
        "function_call",
        "completed",
        True,
    )
    [call] = result.function_calls
    assert call is item.call
    assert (call.index, call.id, call.call_id, call.name) == (0, item_id, call_id, "get_weather")
    assert call.type == "function_call"
    assert call.arguments == '{"city": "Zürich"}'
    assert call.parse_arguments() == {"city": "Zürich"}
    assert call.finished and call.completed and call.error is None
    assert call.validated is (True if JSONSCHEMA else None)

    # No function_call_arguments.done: the finished item completes the call.
    live = chunkwise.PartialJSON()  # each delta carries its patches to the arguments' preview
    assert events == [
        chunkwise.responses.StatusChanged(status="in_progress"),
        chunkwise.responses.OutputItemAdded(
            output_index=0, item_id=item_id, item_type="function_call"
        ),
        chunkwise.responses.ToolCallStarted(
            output_index=0, item_id=item_id, call_id=call_id, name="get_weather"
        ),
        *(
            chunkwise.responses.ToolCallArgumentsDelta(
                output_index=0, item_id=item_id, fragment=f, patches=live.feed(f)
            )
            for f in ARGUMENT_FRAGMENTS
        ),
        chunkwise.responses.ToolCallCompleted(output_index=0, call=call),
        chunkwise.responses.OutputItemDone(output_index=0, item=item),
        chunkwise.UsageReported(usage=TOOL_USAGE),
        chunkwise.StreamCompleted(result=result),
    ]


def test_tool_call_cut_by_max_output_tokens() -> None:
    assert request("tool_max_output_tokens")["max_output_tokens"] == 6
    events, result = parse("tool_max_output_tokens", [body("tool_max_output_tokens")])
    [item_id] = ids("tool_max_output_tokens", "id", "response.output_item.added")
    [call_id] = ids("tool_max_output_tokens", "call_id", "response.output_item.added")

    # llama.cpp finishes the item and the response as completed, with
    # arguments that are not JSON.
    assert result.status == "complete"
    assert result.response_status == "completed"
    assert result.usage == usage(375, 6)
    [anomaly] = result.anomalies
    assert anomaly.kind == "max_output_tokens reached"
    assert "6 output tokens of max_output_tokens 6" in anomaly.detail
    [call] = result.function_calls
    assert (call.id, call.call_id, call.name) == (item_id, call_id, "get_weather")
    assert call.arguments == '{"city": "'
    assert call.finished and call.completed
    assert isinstance(call.error, chunkwise.ToolArgumentsError)
    assert call.error.raw == '{"city": "'
    assert call.error.tool_name == "get_weather"
    with pytest.raises(chunkwise.ToolArgumentsError, match="not valid JSON"):
        call.parse_arguments()

    fragments = [
        e.fragment for e in events if isinstance(e, chunkwise.responses.ToolCallArgumentsDelta)
    ]
    assert fragments == CUT_ARGUMENT_FRAGMENTS
    assert [type(e) for e in events[-5:]] == [
        chunkwise.responses.ToolCallCompleted,
        chunkwise.responses.OutputItemDone,
        chunkwise.UsageReported,
        chunkwise.AnomalyDetected,
        chunkwise.StreamCompleted,
    ]


# -- the mid-stream error ------------------------------------------------------------


def test_error_mid_stream() -> None:
    events, result = parse("error_mid_stream", [body("error_mid_stream")])
    response_ids = ids("error_mid_stream", "id", "response.created")
    message_ids = ids("error_mid_stream", "id", "response.output_item.added")

    # `n: 2`: two completions interleaved in one stream, each with its own
    # response.created, and no index anywhere: the items are told apart by
    # item_id and numbered in arrival order.
    assert len(set(response_ids)) == 2 and len(set(message_ids)) == 2
    assert result.status == "failed"
    assert result.response_status == "in_progress"
    # The first id is kept, and the second response's arrival is recorded.
    assert result.id == response_ids[0]
    assert "response id changed" in [a.kind for a in result.anomalies]
    error = result.server_error
    assert error is not None and error is result.error
    assert (error.message, error.type, error.code) == (ERROR_MESSAGE, "server_error", 500)
    assert result.usage is None
    assert [(i.index, i.id, i.type, i.status, i.done) for i in result.output] == [
        (0, message_ids[0], "message", "in_progress", False),
        (1, message_ids[1], "message", "in_progress", False),
    ]
    assert [i.text for i in result.output] == ["".join(ERROR_DELTAS)] * 2
    assert result.output_text == "".join(ERROR_DELTAS) * 2

    deltas = [e for e in events if isinstance(e, chunkwise.responses.TextDelta)]
    assert deltas == [
        delta
        for pair in zip(
            text_events(message_ids[0], ERROR_DELTAS, 0),
            text_events(message_ids[1], ERROR_DELTAS, 1),
            strict=True,
        )
        for delta in pair
    ]
    assert [type(e) for e in events[-2:]] == [chunkwise.StreamErrorReceived, chunkwise.StreamFailed]
    received, failed = events[-2:]
    assert isinstance(received, chunkwise.StreamErrorReceived) and received.error is error
    assert isinstance(failed, chunkwise.StreamFailed) and failed.error is error


# -- stream: false -------------------------------------------------------------------


@pytest.mark.parametrize("name", ["text", "tool"])
def test_the_non_streamed_answer_says_what_the_stream_said(name: str) -> None:
    document = json.loads((LLAMA / f"responses_{name}_nonstream.json").read_bytes())
    sent = request(f"{name}_nonstream")
    assert sent == {**request(name), "stream": False}
    assert document["status"] == "completed"
    assert "completed_at" in document

    # The document read as the terminal event of a stream that sent nothing else.
    accumulator = chunkwise.responses.Accumulator(tools=sent.get("tools"))
    accumulator.feed({"type": "response.completed", "response": document})
    accumulator.end()
    alone = accumulator.result
    _, streamed = parse(name, [body(name)])

    assert alone.status == streamed.status == "complete"
    assert alone.anomalies == ()
    assert alone.usage == streamed.usage
    assert alone.output_text == streamed.output_text
    assert [(c.name, c.arguments) for c in alone.function_calls] == [
        (c.name, c.arguments) for c in streamed.function_calls
    ]
    assert [(i.type, i.status, i.done) for i in alone.output] == [
        (i.type, i.status, i.done) for i in streamed.output
    ]


# -- the official SDK on the same bytes ------------------------------------------------


def sdk_client(data: bytes) -> Any:
    """An ``openai.OpenAI`` whose every request gets ``data`` as an event stream.

    The SDK's own HTTP client with a mock transport: the whole SDK path runs,
    offline.
    """
    openai = pytest.importorskip("openai")
    try:  # openai >= 3 uses httpx2; earlier versions use httpx.
        httpx = importlib.import_module("httpx2")
    except ImportError:  # pragma: no cover - depends on the installed SDK
        httpx = importlib.import_module("httpx")

    def answer(request: Any) -> Any:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=data)

    return openai.OpenAI(
        api_key="sk-llama-cpp-test",
        base_url="http://llama-cpp.invalid/v1",
        max_retries=0,
        http_client=httpx.Client(transport=httpx.MockTransport(answer)),
    )


def sdk_arguments(name: str) -> dict[str, Any]:
    """The captured request as the SDK's keyword arguments (``n`` is not one of them)."""
    sent = request(name)
    del sent["stream"]
    if "n" in sent:
        sent["extra_body"] = {"n": sent.pop("n")}
    return sent


@pytest.mark.parametrize("name", ["text", "max_output_tokens", "error_mid_stream"])
def test_sdk_stream_helper_fails_on_llama_cpps_text(name: str) -> None:
    """Observed with openai 3.57.0: ``responses.stream()`` keys items by
    ``output_index``, which llama.cpp never sends; the first text delta
    looks its part up with ``content_index`` None and raises a TypeError
    (``list indices must be integers or slices, not NoneType``).  chunkwise
    parses the same bytes (above)."""
    seen: list[str] = []
    with sdk_client(body(name)) as client:
        with pytest.raises(TypeError, match="NoneType"):
            with client.responses.stream(**sdk_arguments(name)) as stream:
                seen.extend(event.type for event in stream)
    assert seen == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]


def test_sdk_raw_iteration_reads_llama_cpps_text() -> None:
    """``responses.create(stream=True)`` does not accumulate: it reads every event."""
    with sdk_client(body("text")) as client:
        events = list(client.responses.create(stream=True, **sdk_arguments("text")))
    assert [e.type for e in events].count("response.output_text.delta") == len(DELTAS)
    assert events[-1].type == "response.completed"
    assert events[-1].response.output_text == SENTENCE


def test_sdk_raw_iteration_raises_the_mid_stream_error() -> None:
    openai = pytest.importorskip("openai")
    events = []
    with sdk_client(body("error_mid_stream")) as client:
        with pytest.raises(openai.APIError, match=ERROR_MESSAGE) as raised:
            for event in client.responses.create(stream=True, **sdk_arguments("error_mid_stream")):
                events.append(event)
    assert raised.value.body == {"code": 500, "message": ERROR_MESSAGE, "type": "server_error"}
    assert len(events) == len(wire_events(body("error_mid_stream"))) - 1


def test_sdk_stream_helper_reads_llama_cpps_single_tool_call() -> None:
    """With a single item, every index-less event lands on the one item the
    helper stored under ``output_index`` None, and no part is looked up."""
    with sdk_client(body("tool")) as client:
        with client.responses.stream(**sdk_arguments("tool")) as stream:
            final = stream.get_final_response()
    assert final.status == "completed"
    [call] = final.output
    assert (call.type, call.name, call.arguments) == (
        "function_call",
        "get_weather",
        '{"city": "Zürich"}',
    )


def test_sdk_stream_helper_calls_the_cut_tool_call_completed() -> None:
    """The SDK passes llama.cpp's word on: completed, arguments that are not
    JSON, nothing to say they were cut.  chunkwise gives the same status, a
    ToolArgumentsError on the call and a ``max_output_tokens reached`` anomaly."""
    with sdk_client(body("tool_max_output_tokens")) as client:
        with client.responses.stream(**sdk_arguments("tool_max_output_tokens")) as stream:
            final = stream.get_final_response()
    assert final.status == "completed"
    assert final.incomplete_details is None
    [call] = final.output
    assert call.arguments == '{"city": "'
    assert call.parsed_arguments is None

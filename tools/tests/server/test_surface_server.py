"""The whole surface on the embedded server: hosted tools with progress, custom tool input, MCP
calls, partial images, audio in both APIs, the fields no client models; streamed from the running
emulator and read by the official ``openai`` SDK's own types, strictly (pydantic validation, so a
misnamed field fails), and by its own accumulators."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
import trio

import chunkwise
from chunkwise import SSEDecoder
from chunkwise.testing import LoopbackServer
from chunkwise_tools.server import RESPONSE_SCENARIOS, SCENARIOS, open_chat_server
from chunkwise_tools.server._response_wire import response_scenario_payloads
from chunkwise_tools.server._scenarios import SPOKEN, scenario_chunks
from helpers.servers import http_exchange

openai = pytest.importorskip("openai")
pydantic = pytest.importorskip("pydantic")

from openai.lib.streaming.chat import ChatCompletionStreamState  # noqa: E402
from openai.types.chat import ChatCompletionChunk  # noqa: E402
from openai.types.responses import ResponseStreamEvent  # noqa: E402

EVENTS = pydantic.TypeAdapter(ResponseStreamEvent)
HOSTED = [
    "web-search",
    "file-search",
    "code-interpreter",
    "image-generation",
    "mcp",
    "custom-tool",
    "shell",
    "audio",
]
MESSAGES = [{"role": "user", "content": "hi"}]


async def _streamed(server: LoopbackServer, path: str, body: dict[str, Any]) -> list[Any]:
    """The JSON of each event the running server streams for ``body`` (``[DONE]`` left out)."""
    raw = json.dumps({**body, "stream": True}).encode()
    status, headers, data = await http_exchange(server, "POST", path, raw)
    assert status == 200, data
    assert headers["content-type"].startswith("text/event-stream")
    decoder = SSEDecoder()
    events = [*decoder.feed(data), *decoder.end()]
    return [json.loads(event.data) for event in events if event.data != "[DONE]"]


async def _responses(name: str) -> list[Any]:
    async with open_chat_server() as server:
        return await _streamed(server, "/v1/responses", {"model": name, "input": "hi"})


async def _chat(name: str, **extra: Any) -> list[Any]:
    async with open_chat_server() as server:
        body = {"model": name, "messages": MESSAGES, **extra}
        return await _streamed(server, "/v1/chat/completions", body)


def _validated(payloads: list[Any]) -> list[Any]:
    """Every event through the SDK's discriminated union, strictly: a wrong name fails."""
    return [EVENTS.validate_python(payload) for payload in payloads]


def _png_ok(b64: str) -> None:
    data = base64.b64decode(b64, validate=True)
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and data.endswith(b"IEND\xaeB`\x82")


# -- Responses: every event a valid SDK event; the structure every stream keeps ------------


@pytest.mark.parametrize("name", HOSTED)
async def test_every_event_is_a_valid_sdk_event(name: str) -> None:
    payloads = await _responses(name)
    assert payloads == response_scenario_payloads(RESPONSE_SCENARIOS[name])
    events = _validated(payloads)
    assert [event.sequence_number for event in events] == list(range(len(events)))
    assert [event.type for event in events] == [payload["type"] for payload in payloads]
    # Each item is added, then its events, then done, before the next one is added.
    open_items: dict[int | None, str] = {}
    done: dict[int | None, Any] = {}
    for event in events:
        index: int | None = getattr(event, "output_index", None)
        if event.type == "response.output_item.added":
            assert not open_items and index not in done
            open_items[index] = event.item.type
        elif event.type == "response.output_item.done":
            assert open_items.pop(index) == event.item.type
            done[index] = event.item
        elif index is not None:
            assert index in open_items, event.type
    final = events[-1]
    assert final.type == "response.completed"
    assert [item.model_dump(exclude_unset=True) for item in final.response.output] == [
        done[index].model_dump(exclude_unset=True) for index in sorted(done, key=lambda i: i or 0)
    ]


async def _sdk_final(name: str) -> Any:
    """``client.responses.stream()``, the SDK's accumulating helper, over the wire."""
    async with open_chat_server() as server:
        client = openai.AsyncOpenAI(
            base_url=server.base_url, api_key="k", max_retries=0, timeout=10
        )
        import asyncio  # only here: the SDK's own event loop, in a worker thread

        async def run() -> Any:
            async with client, client.responses.stream(model=name, input="hi") as stream:
                async for _ in stream:
                    pass
                return await stream.get_final_response()

        return await trio.to_thread.run_sync(lambda: asyncio.run(run()))


@pytest.mark.parametrize("name", HOSTED)
async def test_the_sdk_helper_accumulates_every_scenario(name: str) -> None:
    final = await _sdk_final(name)
    scenario = RESPONSE_SCENARIOS[name]
    assert final.status == "completed"
    assert final.output_text == scenario.text
    types = [item.type for item in final.output]
    expected = [tool.type for tool in scenario.tool_items]
    assert types == expected + (["message"] if scenario.content else [])


# -- Responses: each scenario's own events ------------------------------------------------


def _of(events: list[Any], etype: str) -> list[Any]:
    return [event for event in events if event.type == etype]


def _progress(events: list[Any], kind: str) -> list[str]:
    prefix = f"response.{kind}."
    return [e.type.removeprefix(prefix) for e in events if e.type.startswith(prefix)]


async def test_web_search_progress_then_a_cited_message() -> None:
    events = _validated(await _responses("web-search"))
    assert _progress(events, "web_search_call") == ["in_progress", "searching", "completed"]
    [added] = _of(events, "response.output_text.annotation.added")
    assert added.annotation_index == 0 and added.output_index == 1
    annotation = added.annotation
    assert annotation.type == "url_citation"
    text = RESPONSE_SCENARIOS["web-search"].text
    assert text[annotation.start_index : annotation.end_index] == "says Météo-France."
    # Announced right after the delta that completed the cited text.
    position = events.index(added)
    streamed = "".join(e.delta for e in events[:position] if e.type == "response.output_text.delta")
    assert len(streamed) >= annotation.end_index
    message = events[-1].response.output[1]
    assert [a.model_dump() for a in message.content[0].annotations] == [annotation.model_dump()]
    assert events[-1].response.output[0].action.query == "Paris weather"


async def test_code_interpreter_code_streams_between_progress_events() -> None:
    events = _validated(await _responses("code-interpreter"))
    kinds = [
        e.type.removeprefix("response.")
        for e in events
        if e.type.startswith("response.code_interpreter_call")
    ]
    deltas = len(RESPONSE_SCENARIOS["code-interpreter"].tool_items[0].fragments)
    assert kinds == [
        "code_interpreter_call.in_progress",
        *["code_interpreter_call_code.delta"] * deltas,
        "code_interpreter_call_code.done",
        "code_interpreter_call.interpreting",
        "code_interpreter_call.completed",
    ]
    code = "".join(e.delta for e in _of(events, "response.code_interpreter_call_code.delta"))
    [code_done] = _of(events, "response.code_interpreter_call_code.done")
    item = events[-1].response.output[0]
    assert code == code_done.code == item.code
    assert item.outputs[0].logs == "17.8\n"


async def test_image_generation_sends_two_partial_pngs_and_the_result() -> None:
    events = _validated(await _responses("image-generation"))
    assert _progress(events, "image_generation_call") == [
        "in_progress",
        "generating",
        "partial_image",
        "partial_image",
        "completed",
    ]
    partials = _of(events, "response.image_generation_call.partial_image")
    assert [p.partial_image_index for p in partials] == [0, 1]
    for partial in partials:
        _png_ok(partial.partial_image_b64)
        assert partial.output_format == "png"
    item = events[-1].response.output[0]
    assert item.status == "completed" and item.result is not None
    _png_ok(item.result)
    [added] = _of(events, "response.output_item.added")[:1]
    assert added.item.result is None


async def test_mcp_lists_tools_then_calls_one_with_streamed_arguments() -> None:
    events = _validated(await _responses("mcp"))
    assert _progress(events, "mcp_list_tools") == ["in_progress", "completed"]
    assert _progress(events, "mcp_call") == ["in_progress", "completed"]
    fragments = [e.delta for e in _of(events, "response.mcp_call_arguments.delta")]
    assert len(fragments) > 1
    [arguments] = _of(events, "response.mcp_call_arguments.done")
    assert "".join(fragments) == arguments.arguments
    assert json.loads(arguments.arguments) == {"city": "Zürich", "days": 2}
    tools, call = events[-1].response.output[:2]
    assert tools.type == "mcp_list_tools" and tools.tools[0].name == "get_forecast"
    assert (call.type, call.name) == ("mcp_call", "get_forecast")
    assert call.arguments == arguments.arguments
    assert call.output == "Zürich: 12 °C, then 15 °C."


async def test_custom_tool_input_streams_as_freeform_text() -> None:
    events = _validated(await _responses("custom-tool"))
    fragments = [e.delta for e in _of(events, "response.custom_tool_call_input.delta")]
    [done] = _of(events, "response.custom_tool_call_input.done")
    [item] = events[-1].response.output
    assert "".join(fragments) == done.input == item.input
    assert item.input.startswith("*** Begin Patch") and not item.input.startswith("{")
    assert (item.type, item.name, item.call_id) == (
        "custom_tool_call",
        "apply_patch",
        "call_chunkwise_patch",
    )
    assert [e.item.input for e in _of(events, "response.output_item.added")] == [""]


async def test_file_search_progress_and_results() -> None:
    events = _validated(await _responses("file-search"))
    assert _progress(events, "file_search_call") == ["in_progress", "searching", "completed"]
    item = events[-1].response.output[0]
    assert item.queries == ["unit of temperature"] and item.results[0].filename == "style.md"


async def test_shell_command_and_output_stream() -> None:
    events = _validated(await _responses("shell"))
    command = [e.delta for e in _of(events, "response.shell_call_command.delta")]
    [command_done] = _of(events, "response.shell_call_command.done")
    call, output = events[-1].response.output[:2]
    assert "".join(command) == command_done.command
    assert call.action.commands == [command_done.command]
    pieces = _of(events, "response.shell_call_output_content.delta")
    stdout = "".join(e.delta.stdout for e in pieces)
    [output_done] = _of(events, "response.shell_call_output_content.done")
    assert output_done.output[0].stdout == stdout == output.output[0].stdout
    assert output.output[0].outcome.exit_code == 0
    assert output.call_id == call.call_id


async def test_responses_audio_beside_the_message() -> None:
    events = _validated(await _responses("audio"))
    audio = "".join(e.delta for e in _of(events, "response.audio.delta"))
    transcript = "".join(e.delta for e in _of(events, "response.audio.transcript.delta"))
    assert audio == SPOKEN.data
    assert len(base64.b64decode(audio, validate=True)) == 480 * 2  # PCM16 samples
    assert transcript == SPOKEN.transcript_text == events[-1].response.output_text
    types = [e.type for e in events]
    assert types.index("response.audio.done") < types.index("response.output_text.done")
    assert types.index("response.audio.transcript.done") < types.index("response.output_text.done")
    # The audio events sit between the message's text deltas.
    first_audio = types.index("response.audio.delta")
    assert types.index("response.output_text.delta") < first_audio
    assert first_audio < len(types) - 1 - types[::-1].index("response.output_text.delta")


def test_a_wrong_field_name_fails_the_sdk_validation() -> None:
    # The oracle is strict: the same check that passes the scenarios refuses a renamed field.
    payloads = response_scenario_payloads(RESPONSE_SCENARIOS["image-generation"])
    partial = next(p for p in payloads if p["type"].endswith("partial_image"))
    broken = {**partial, "partial_image": partial["partial_image_b64"]}
    del broken["partial_image_b64"]
    with pytest.raises(pydantic.ValidationError):
        EVENTS.validate_python(broken)


# -- chat completions ---------------------------------------------------------------------


def _chunks(payloads: list[Any]) -> list[Any]:
    return [ChatCompletionChunk.model_validate(payload) for payload in payloads]


def _accumulated(chunks: list[Any]) -> Any:
    state: Any = ChatCompletionStreamState()
    for chunk in chunks:
        state.handle_chunk(chunk)
    return state.get_final_completion()


async def test_chat_audio() -> None:
    payloads = await _chat("audio", stream_options={"include_usage": True})
    assert payloads == scenario_chunks(SCENARIOS["audio"], include_usage=True)
    chunks = _chunks(payloads)
    audio = [c.choices[0].delta.audio for c in chunks if c.choices and c.choices[0].delta.audio]
    assert audio[0].id == SPOKEN.id
    assert "".join(a.data or "" for a in audio) == SPOKEN.data
    assert "".join(a.transcript or "" for a in audio) == SPOKEN.transcript_text
    # The last audio update has only expires_at, after the finish, with no finish_reason.
    last = audio[-1].model_dump(exclude_unset=True)
    assert last == {"expires_at": SPOKEN.expires_at}
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-2:] == ["stop", None]
    assert "finish_reason" not in payloads[-2]["choices"][0]
    assert chunks[-1].usage.completion_tokens_details.audio_tokens == 40
    message = _accumulated(chunks).choices[0].message
    assert message.audio.id == SPOKEN.id
    assert message.audio.data == SPOKEN.data
    assert message.audio.transcript == SPOKEN.transcript_text


async def test_chat_moderation_fields() -> None:
    payloads = await _chat("moderation", stream_options={"include_usage": True})
    chunks = _chunks(payloads)
    assert all(chunk.service_tier == "default" for chunk in chunks)
    assert all(chunk.obfuscation for chunk in chunks)
    assert payloads[0]["prompt_filter_results"][0]["prompt_index"] == 0
    assert all("prompt_filter_results" not in payload for payload in payloads[1:])
    choices = [choice for payload in payloads for choice in payload["choices"]]
    assert all("content_filter_results" in choice for choice in choices)
    assert chunks[0].choices[0].model_extra["content_filter_results"] == {}
    [moderated] = [chunk for chunk in chunks if chunk.moderation is not None]
    assert moderated.choices == [] and moderated.usage is None
    assert moderated.moderation.output.results[0].flagged is False
    position = chunks.index(moderated)
    assert chunks[position - 1].choices[0].finish_reason == "stop"
    assert chunks[-1].usage is not None
    completion = _accumulated(chunks)
    assert completion.choices[0].message.content == SCENARIOS["moderation"].text


async def test_chat_legacy_function_call() -> None:
    payloads = await _chat("function-call")
    chunks = _chunks(payloads)
    calls = [c.choices[0].delta.function_call for c in chunks if c.choices[0].delta.function_call]
    call = SCENARIOS["function-call"].function_call
    assert call is not None
    assert calls[0].name == call.name and calls[0].arguments == ""
    assert all(later.name is None for later in calls[1:])
    assert "".join(c.arguments for c in calls) == call.arguments
    assert chunks[-1].choices[0].finish_reason == "function_call"
    message = _accumulated(chunks).choices[0]
    assert message.finish_reason == "function_call"
    assert message.message.function_call.name == call.name
    assert json.loads(message.message.function_call.arguments) == {
        "city": "Paris",
        "unit": "celsius",
    }


def test_azure_s_real_preamble_chunk_is_refused_by_the_sdk() -> None:
    # Why the moderation scenario puts prompt_filter_results on its first real chunk:
    # Azure sends them on a preamble chunk with "object": "" that the SDK's strict
    # model refuses (its object is Literal["chat.completion.chunk"]).
    preamble = {
        "choices": [],
        "created": 0,
        "id": "",
        "model": "",
        "object": "",
        "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": {}}],
    }
    with pytest.raises(pydantic.ValidationError):
        ChatCompletionChunk.model_validate(preamble)


# -- the same scenarios through chunkwise.chat ---------------------------------------------


async def _chunkwise_chat(name: str) -> Any:
    async with open_chat_server() as server:
        endpoint = chunkwise.Endpoint(base_url=server.base_url, api_key="k")
        request = {"model": name, "messages": MESSAGES, "stream_options": {"include_usage": True}}
        return await chunkwise.chat.complete(endpoint, request)


async def test_chat_audio_assembles_in_chunkwise() -> None:
    result = await _chunkwise_chat("audio")
    assert result.status == "complete" and result.anomalies == ()
    audio = result.choice(0).audio
    assert audio is not None
    assert (audio.id, audio.data, audio.transcript) == (
        SPOKEN.id,
        SPOKEN.data,
        SPOKEN.transcript_text,
    )
    assert audio.expires_at == SPOKEN.expires_at  # sent after the finish_reason


async def test_chat_legacy_function_call_and_moderation_fields_in_chunkwise() -> None:
    call = (await _chunkwise_chat("function-call")).choice(0).function_call
    script = SCENARIOS["function-call"].function_call
    assert call is not None and script is not None
    assert (call.name, call.arguments, call.finished) == (script.name, script.arguments, True)
    moderated = await _chunkwise_chat("moderation")
    assert moderated.extra["service_tier"] == "default"
    assert {"obfuscation", "moderation", "prompt_filter_results"} <= moderated.extra.keys()
    assert "content_filter_results" in moderated.choice(0).extra

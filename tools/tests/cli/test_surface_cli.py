"""``chat`` and ``inspect`` show the whole surface, against the embedded server's scenarios.

Hosted tools' progress, tools' streamed input, partial images, custom tool calls, audio in
both APIs (the transcript as text, the bytes to ``--audio-out``), the legacy function_call,
the fields chunkwise does not model; and exit statuses that say what happened.
"""

from __future__ import annotations

import base64
import io
import json
import wave
from pathlib import Path
from typing import Any

import pytest

import chunkwise
from chunkwise_tools.cli._live import REDRAW_INTERVAL
from chunkwise_tools.cli.chat import TextRenderer
from chunkwise_tools.server import RESPONSE_SCENARIOS, ServerOptions, open_chat_server
from chunkwise_tools.server._scenarios import SPOKEN
from helpers.cli import Terminal, run_main
from helpers.data import KEY_VAR
from helpers.processes import interrupt
from helpers.servers import http_exchange

pytestmark = pytest.mark.usefixtures("api_key")

AUDIO = base64.b64decode(SPOKEN.data)
PATCH = RESPONSE_SCENARIOS["custom-tool"].tool_items[0].input
CODE = RESPONSE_SCENARIOS["code-interpreter"].tool_items[0].input
IMAGES = [
    len(base64.b64decode(image))
    for image in RESPONSE_SCENARIOS["image-generation"].tool_items[0].partial_images
]


def _args(base_url: str, model: str, *extra: str) -> list[str]:
    return [
        "chat",
        "--base-url",
        base_url,
        "--api-key-env",
        KEY_VAR,
        "--model",
        model,
        "hi",
        *extra,
    ]


async def _chat(
    capsys: pytest.CaptureFixture[str],
    model: str,
    *extra: str,
    options: ServerOptions | None = None,
) -> tuple[int, str, str, list[dict[str, Any]]]:
    """``chunkwise chat --model MODEL hi *extra`` against the embedded server; and its requests."""
    async with open_chat_server(options) as server:
        status, out, err = await run_main(capsys, *_args(server.base_url, model, *extra))
    return status, out, err, [request.json() for request in server.requests]


def _summary(err: str) -> list[str]:
    """The summary lines before the server's status (Responses) or the usage."""
    lines = err.splitlines()
    end = next(
        n
        for n, line in enumerate(lines)
        if line.startswith(("response_status:", "usage:", "status:"))
    )
    return lines[:end]


# -- chat --api responses: each hosted scenario, on a pipe ---------------------------------

# model: (stdout, the summary's tool lines)
HOSTED: dict[str, tuple[str, list[str]]] = {
    "web-search": (
        "[web_search_call 0: in_progress]\n"
        "[web_search_call 0: searching]\n"
        "[web_search_call 0: completed]\n"
        "Paris is 18 °C today, says Météo-France. Take a light coat.\n",
        ["tool item 0: web_search_call, completed"],
    ),
    "file-search": (
        "[file_search_call 0: in_progress]\n"
        "[file_search_call 0: searching]\n"
        "[file_search_call 0: completed]\n"
        "The style guide says: temperatures in °C.\n",
        ["tool item 0: file_search_call, completed"],
    ),
    "code-interpreter": (
        "[code_interpreter_call 0: in_progress]\n"
        f"[code_interpreter_call 0] input:\n{CODE}\n"
        "[code_interpreter_call 0: interpreting]\n"
        "[code_interpreter_call 0: completed]\n"
        "64 °F is 17.8 °C.\n",
        ["tool item 0: code_interpreter_call, completed"],
    ),
    "image-generation": (
        "[image_generation_call 0: in_progress]\n"
        "[image_generation_call 0: generating]\n"
        f"[partial image 0: {IMAGES[0]} bytes]\n"
        f"[partial image 1: {IMAGES[1]} bytes]\n"
        "[image_generation_call 0: completed]\n"
        "Here is the sky over Paris.\n",
        ["tool item 0: image_generation_call, completed"],
    ),
    "mcp": (
        "[mcp_list_tools 0: in_progress]\n"
        "[mcp_list_tools 0: completed]\n"
        "[mcp_call 1: in_progress]\n"
        "[mcp_call 1: completed]\n"
        '[mcp_call 1] get_forecast: {"city": "Zürich", "days": 2}\n'
        "Zürich: 12 °C today, 15 °C tomorrow.\n",
        ["tool item 0: mcp_list_tools, done", "tool item 1: mcp_call get_forecast, done"],
    ),
    "custom-tool": (
        f"[custom_tool_call 0] input:\n{PATCH}\n",
        ["[custom tool call 0] apply_patch (call_chunkwise_patch), finished"],
    ),
    "shell": (
        # Two output deltas: one line, the phase changed once.
        "[shell_call 0] input:\ncurl -s wttr.in/Paris?format=3\n"
        "[shell_call_output 1: output]\n"
        "It is 18 °C and sunny in Paris.\n",
        ["tool item 0: shell_call, completed", "tool item 1: shell_call_output, completed"],
    ),
    "audio": (
        # The transcript says what the text says: shown once.
        f"{SPOKEN.transcript_text}\n",
        [f"audio: {len(AUDIO)} bytes, transcript of {len(SPOKEN.transcript_text)} characters"],
    ),
}


@pytest.mark.parametrize("model", list(HOSTED))
async def test_responses_scenarios_show_progress_input_images_and_calls(
    capsys: pytest.CaptureFixture[str], model: str
) -> None:
    status, out, err, [request] = await _chat(capsys, model, "--api", "responses")
    stdout, summary = HOSTED[model]
    assert status == 0, err
    assert out == stdout
    assert _summary(err) == summary
    assert err.splitlines()[-1] == "status: complete"
    assert "modalities" not in request and "audio" not in request


@pytest.mark.parametrize("model", list(HOSTED))
async def test_every_split_shows_the_same(model: str) -> None:
    # The renderer fed the body at every read size shows the same thing.
    async with open_chat_server() as server:
        raw = json.dumps({"model": model, "input": "hi", "stream": True}).encode()
        _, _, body = await http_exchange(server, "POST", "/v1/responses", raw)
    shown = {_render(body, size) for size in (1, 2, 3, 7, 64, len(body))}
    assert shown == {_render(body, len(body))}
    assert shown.pop()[0] == HOSTED[model][0]


def _render(body: bytes, size: int) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    renderer = TextRenderer(out, err)
    parser = chunkwise.responses.Parser()
    for start in range(0, len(body), size):
        for event in parser.feed(body[start : start + size]):
            renderer.event(event)
    for event in parser.end():
        renderer.event(event)
    return out.getvalue(), err.getvalue()


async def test_a_stream_cut_in_a_custom_tool_s_input_says_unfinished(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # created, in_progress, added, then two of the input's four deltas.
    options = ServerOptions(cut_after_events=5)
    status, out, err, _ = await _chat(capsys, "custom-tool", "--api", "responses", options=options)
    assert status == 1
    assert (
        out
        == "[custom_tool_call 0] input:\n"
        + "".join(RESPONSE_SCENARIOS["custom-tool"].tool_items[0].fragments[:2])
        + "\n"
    )
    assert _summary(err) == ["[custom tool call 0] apply_patch (call_chunkwise_patch), unfinished"]
    assert err.splitlines()[-1].startswith("status: incomplete")


async def test_a_hosted_item_cut_short_is_unfinished(capsys: pytest.CaptureFixture[str]) -> None:
    options = ServerOptions(cut_after_events=4)  # created, in_progress, added, in_progress
    status, out, err, _ = await _chat(capsys, "web-search", "--api", "responses", options=options)
    assert status == 1
    assert out == "[web_search_call 0: in_progress]\n"
    assert _summary(err) == ["tool item 0: web_search_call, in_progress (unfinished)"]


def _frame(*events: dict[str, Any]) -> bytes:
    return b"".join(f"data: {json.dumps(event)}\n\n".encode() for event in events)


def test_a_tool_input_sent_whole_is_shown_once() -> None:
    # No delta: the item's done event alone carries the input.
    item = {"id": "ctc_1", "type": "custom_tool_call", "call_id": "c1", "name": "run", "input": ""}
    done = {**item, "input": "ls -l\npwd", "status": "completed"}
    body = _frame(
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {"type": "response.output_item.done", "output_index": 0, "item": done},
        {"type": "response.completed", "response": {"status": "completed", "output": [done]}},
    )
    out, err = _render(body, len(body))
    assert out == "[custom_tool_call 0] input:\nls -l\npwd\n"
    assert "[custom tool call 0] run (c1), finished" in err


def test_progress_and_images_are_dim_on_a_terminal() -> None:
    class FakeTerminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    body = _frame(
        {"type": "response.image_generation_call.in_progress", "output_index": 0, "item_id": "i"},
        {
            "type": "response.image_generation_call.partial_image",
            "output_index": 0,
            "item_id": "i",
            "partial_image_index": 0,
            "partial_image_b64": base64.b64encode(b"12345").decode(),
        },
        {
            "type": "response.image_generation_call.partial_image",
            "output_index": 0,
            "item_id": "i",
            "partial_image_index": 1,
            "partial_image_b64": "not base64!",
        },
    )
    out, err = FakeTerminal(), io.StringIO()
    renderer = TextRenderer(out, err)
    parser = chunkwise.responses.Parser()
    for event in [*parser.feed(body), *parser.end()]:
        renderer.event(event)
    assert out.getvalue() == (
        "\x1b[2m[image_generation_call 0: in_progress]\x1b[0m\n"
        "\x1b[2m[partial image 0: 5 bytes]\x1b[0m\n"
        "\x1b[2m[partial image 1: not base64]\x1b[0m\n"
    )


async def test_mcp_arguments_grow_live_and_stay_in_their_final_form(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Events further apart than the region's redraws (REDRAW_INTERVAL): each delta is drawn.
    options = ServerOptions(delay=REDRAW_INTERVAL * 1.5)
    status, out, err, _ = await _chat(
        capsys, "mcp", "--api", "responses", "--live", "always", options=options
    )
    assert status == 0, err
    terminal = Terminal().feed(out)
    grown = [frame for frame in terminal.frames if "[mcp_call 1] arguments" in frame]
    assert grown, terminal.frames
    assert any(line.startswith('  {"city": "Zü') for frame in grown for line in frame)
    assert terminal.screen == HOSTED["mcp"][0].splitlines()


# -- --json ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("api", "model", "types"),
    [
        ("responses", "code-interpreter", {"ToolProgress", "ToolInputDelta"}),
        ("responses", "mcp", {"ToolProgress", "ToolInputDelta"}),
        ("responses", "custom-tool", {"ToolInputDelta"}),
        ("responses", "image-generation", {"ToolProgress", "PartialImage"}),
        ("responses", "audio", {"AudioDelta", "AudioTranscriptDelta"}),
        ("chat", "audio", {"AudioDelta"}),
        (
            "chat",
            "function-call",
            {"ToolCallStarted", "ToolCallArgumentsDelta", "ToolCallCompleted"},
        ),
    ],
)
async def test_json_lines_carry_the_new_events(
    capsys: pytest.CaptureFixture[str], api: str, model: str, types: set[str]
) -> None:
    status, out, _, _ = await _chat(capsys, model, "--api", api, "--json")
    assert status == 0
    events = [json.loads(line) for line in out.splitlines()]
    assert types <= {event["type"] for event in events}
    audio = "".join(event["data"] for event in events if event["type"] == "AudioDelta")
    assert audio == (SPOKEN.data if model == "audio" else "")


# -- chat completions: audio, function_call, extra ----------------------------------------------


async def test_chat_audio_transcript_is_the_text_and_the_file_is_a_wav(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "answer.wav"
    status, out, err, [request] = await _chat(capsys, "audio", "--audio-out", str(path))
    assert status == 0, err
    assert out == SPOKEN.transcript_text + "\n"
    assert request["modalities"] == ["text", "audio"]
    assert request["audio"] == {"voice": "alloy", "format": "pcm16"}
    with wave.open(str(path), "rb") as wav:
        assert (wav.getnchannels(), wav.getsampwidth(), wav.getframerate()) == (1, 2, 24000)
        assert wav.readframes(wav.getnframes()) == AUDIO
    assert f"audio: {len(AUDIO)} bytes, transcript of 49 characters" in err.splitlines()
    assert err.splitlines()[-1] == (
        f"chunkwise chat: wrote {len(AUDIO)} bytes of PCM16 audio as WAV (24000 Hz, mono) "
        f"to {str(path)!r}"
    )


@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize(
    ("name", "extra"),
    [("answer.pcm", []), ("answer.RAW", []), ("answer.wav", ["--audio-format", "wav"])],
)
async def test_audio_written_as_received(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, api: str, name: str, extra: list[str]
) -> None:
    # PCM16 to .pcm or .raw, and any format but pcm16: the bytes themselves.
    path = tmp_path / name
    status, _, err, [request] = await _chat(
        capsys, "audio", "--api", api, "--voice", "verse", "--audio-out", str(path), *extra
    )
    assert status == 0, err
    assert path.read_bytes() == AUDIO
    if api == "chat":
        assert request["audio"] == {"voice": "verse", "format": (extra or ["", "pcm16"])[1]}


async def test_no_audio_writes_nothing_and_exits_1(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "answer.wav"
    status, out, err, _ = await _chat(capsys, "text", "--audio-out", str(path))
    assert status == 1
    assert out  # the text answer is shown as ever
    assert err.splitlines()[-2:] == [
        "status: complete",
        f"chunkwise chat: note: no audio arrived; nothing written to {str(path)!r}",
    ]
    assert not path.exists()


async def test_an_unwritable_audio_out_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    status, _, err, _ = await _chat(capsys, "audio", "--audio-out", str(tmp_path))
    assert status == 2
    assert f"cannot write {str(tmp_path)!r}" in err


async def test_audio_out_is_refused_for_completions(capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err, requests = await _chat(
        capsys, "text", "--api", "completions", "--audio-out", "x"
    )
    assert (status, requests) == (2, [])
    assert "--audio-out is for --api chat or responses" in err


async def test_interrupted_audio_keeps_what_arrived(tmp_path: Path) -> None:
    """SIGINT to a real ``python -m chunkwise chat`` while its audio streams.

    The scenario sends the transcript, then the audio in four chunks, 0.5 s apart: the
    signal comes between the first and the last.
    """
    path = tmp_path / "cut.wav"
    async with open_chat_server(ServerOptions(delay=0.5)) as server:
        argv = _args(server.base_url, "audio", "--audio-out", str(path))
        said = SPOKEN.transcript_text.encode()
        status, out, err = await interrupt(argv, after_stdout=said, wait=1.25)
    assert status == 130, err
    assert out == SPOKEN.transcript_text + "\n"
    with wave.open(str(path), "rb") as wav:
        arrived = wav.readframes(wav.getnframes())
    assert arrived and AUDIO.startswith(arrived) and len(arrived) < len(AUDIO)
    assert "status: incomplete (interrupted)" in err
    assert err.splitlines()[-1].endswith("(what arrived before the interruption)")


async def test_legacy_function_call_is_shown_like_a_tool_call(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, out, err, _ = await _chat(capsys, "function-call")
    assert status == 0
    assert out == '[function_call] get_weather: {"city": "Paris", "unit": "celsius"}\n'
    assert err.splitlines()[0] == "finish_reason: function_call"


# -- a structured answer that is not what was asked for -------------------------------------


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_a_structured_answer_that_breaks_its_schema_exits_1(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, api: str
) -> None:
    schema = tmp_path / "count.json"
    schema.write_text(
        json.dumps({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
    )
    status, _, err, _ = await _chat(
        capsys, "structured-invalid", "--api", api, "--schema", str(schema)
    )
    assert status == 1
    [line] = [line for line in err.splitlines() if line.startswith("structured answer")]
    assert "'n' is a required property" in line
    assert err.splitlines()[-1] == "status: complete"  # the stream itself was whole


@pytest.mark.parametrize(
    ("api", "why", "last"),
    [
        ("chat", "finish_reason 'length'", "status: complete"),
        ("responses", "incomplete_details.reason 'max_output_tokens'", "status: incomplete"),
    ],
)
async def test_a_structured_answer_cut_by_the_token_limit_exits_1(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, api: str, why: str, last: str
) -> None:
    schema = tmp_path / "weather.json"
    schema.write_text(
        json.dumps(
            {
                "type": "object",
                "properties": {"city": {"type": "string"}, "high": {"type": "number"}},
                "required": ["city", "high"],
            }
        )
    )
    status, _, err, _ = await _chat(capsys, "length", "--api", api, "--schema", str(schema))
    assert status == 1
    [line] = [line for line in err.splitlines() if line.startswith("structured answer")]
    assert f"the answer was cut short ({why})" in line
    assert err.splitlines()[-1].startswith(last)


# -- inspect ----------------------------------------------------------------------------------


async def _recording(tmp_path: Path, api: str, model: str) -> Path:
    async with open_chat_server() as server:
        if api == "responses":
            body: dict[str, Any] = {"model": model, "input": "hi"}
        else:
            body = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
            body["stream_options"] = {"include_usage": True}
        raw = json.dumps({**body, "stream": True}).encode()
        path = "/v1/responses" if api == "responses" else "/v1/chat/completions"
        _, _, data = await http_exchange(server, "POST", path, raw)
    recording = tmp_path / f"{api}-{model}.sse"
    recording.write_bytes(data)
    return recording


# model: lines the report holds, in this order
INSPECTED: dict[str, list[str]] = {
    "web-search": [
        "item 0: web_search_call (ws_chunkwise)",
        "  progress: in_progress, searching, completed",
        "  status: completed",
    ],
    "code-interpreter": [
        "  progress: in_progress, interpreting, completed",
        "  input:",
        *("    " + line for line in CODE.splitlines()),
    ],
    "image-generation": [
        "  progress: in_progress, generating, completed",
        f"  partial image 0: {IMAGES[0]} bytes",
        f"  partial image 1: {IMAGES[1]} bytes",
    ],
    "mcp": [
        "item 1: mcp_call (mcp_chunkwise)",
        "  progress: in_progress, completed",
        "  name: get_forecast",
        "  input:",
        '    {"city": "Zürich", "days": 2}',
    ],
    "custom-tool": [
        "  [custom tool call 0] apply_patch (call_chunkwise_patch), finished",
        "  input:",
        *("    " + line for line in PATCH.splitlines()),
    ],
    "shell": [
        "  input:",
        "    curl -s wttr.in/Paris?format=3",
        "item 1: shell_call_output (sho_chunkwise)",
        "  progress: output",
    ],
    "audio": [
        f"audio: {len(AUDIO)} bytes, transcript of 49 characters",
        "  transcript:",
        f"    {SPOKEN.transcript_text}",
    ],
}


def _in_order(lines: list[str], expected: list[str]) -> bool:
    position = 0
    for line in lines:
        if position < len(expected) and line == expected[position]:
            position += 1
    return position == len(expected)


@pytest.mark.parametrize("model", list(INSPECTED))
async def test_inspect_lists_progress_input_images_calls_and_audio(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, model: str
) -> None:
    recording = await _recording(tmp_path, "responses", model)
    reports = set()
    for size in ("1", "5", "65536"):
        status, out, _ = await run_main(capsys, "inspect", "--read-size", size, str(recording))
        assert status == 0
        reports.add(out)
    [report] = reports  # the same at every split
    assert _in_order(report.splitlines(), INSPECTED[model]), report


async def test_inspect_chat_audio_function_call_and_extra_fields(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    audio = await _recording(tmp_path, "chat", "audio")
    status, out, _ = await run_main(capsys, "inspect", str(audio))
    assert status == 0
    assert _in_order(
        out.splitlines(),
        [
            f"  audio: {len(AUDIO)} bytes, transcript of 49 characters",
            f"    id: {SPOKEN.id}",
            f"    expires_at: {SPOKEN.expires_at}",
            "    transcript:",
            f"      {SPOKEN.transcript_text}",
        ],
    ), out
    call = await _recording(tmp_path, "chat", "function-call")
    status, out, _ = await run_main(capsys, "inspect", str(call))
    assert '  [function_call] get_weather: {"city": "Paris", "unit": "celsius"}' in out.splitlines()
    moderated = await _recording(tmp_path, "chat", "moderation")
    status, out, _ = await run_main(capsys, "inspect", str(moderated))
    lines = out.splitlines()
    assert _in_order(
        lines, ["choice 0", "  extra:", "    content_filter_results:", "  finish_reason: stop"]
    )
    assert _in_order(
        lines, ["extra:", '  service_tier: "default"', "  moderation:", "status: complete"]
    )


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_inspect_writes_the_audio_of_a_recording(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, api: str
) -> None:
    recording = await _recording(tmp_path, api, "audio")
    path = tmp_path / "spoken.wav"
    status, _, err = await run_main(capsys, "inspect", str(recording), "--audio-out", str(path))
    assert status == 0, err
    with wave.open(str(path), "rb") as wav:
        assert wav.readframes(wav.getnframes()) == AUDIO
    status, _, err = await run_main(
        capsys, "inspect", str(recording), "--audio-out", str(tmp_path / "a.pcm")
    )
    assert (tmp_path / "a.pcm").read_bytes() == AUDIO
    text = await _recording(tmp_path, api, "text")
    status, _, err = await run_main(capsys, "inspect", str(text), "--audio-out", str(path))
    assert status == 1
    assert "chunkwise inspect: note: no audio arrived" in err


def test_audio_that_is_not_base64_is_kept_as_received(tmp_path: Path) -> None:
    from chunkwise_tools.cli._audio import save_audio

    result = chunkwise.responses.Result(audio=chunkwise.responses.Audio(data="abc!", transcript=""))
    path = tmp_path / "bad.wav"
    assert save_audio("chat", str(path), result, "pcm16") == 1
    assert path.read_bytes() == b"abc!"

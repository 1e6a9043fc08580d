"""``--api completions`` on the command line: chat, record, inspect, probe and bench.

Against ``chunkwise serve`` in process (every wire style: OpenAI's and the
quirk models), the command's output is held to what the library itself
reconstructs from the same server (:func:`chunkwise.completions.complete`), and
against scripted servers where the exact bytes matter.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

import chunkwise
from chunkwise.testing import ScriptedResponse, open_test_server
from chunkwise_tools.cli._common import split_http_head
from chunkwise_tools.cli._options import COMMAND_APIS
from chunkwise_tools.cli.chat import TextRenderer
from chunkwise_tools.cli.inspect import detect_api
from chunkwise_tools.server import open_chat_server
from helpers.bodies import choice, chunk, completion_chunk, sse, text_choice
from helpers.cli import run_main
from helpers.data import KEY, KEY_VAR

pytestmark = pytest.mark.usefixtures("api_key")

#: OpenAI's wire style and each quirk model of ``chunkwise serve``.
MODELS = ["gpt-4o-mini", "quirks-vllm", "quirks-llama.cpp", "quirks-tgi"]

TWO_CHOICES = sse(
    completion_chunk(text_choice("Hel", 0), text_choice("Bon", 1)),
    completion_chunk(text_choice("lo", 0, "stop"), text_choice("jour", 1, "length")),
    completion_chunk(usage={"prompt_tokens": 2, "completion_tokens": 4, "total_tokens": 6}),
)


def endpoint_args(base_url: str) -> list[str]:
    return ["--base-url", base_url, "--api-key-env", KEY_VAR]


async def reference(base_url: str, model: str) -> chunkwise.completions.Result:
    """What the library reconstructs from the server for ``hello``."""
    endpoint = chunkwise.Endpoint(base_url=base_url, api_key=KEY)
    request = {"model": model, "prompt": "hello", "stream_options": {"include_usage": True}}
    return await chunkwise.completions.complete(endpoint, request)


# -- the API table ---------------------------------------------------------------------


def test_every_api_is_in_the_table_once() -> None:
    assert list(COMMAND_APIS) == ["chat", "responses", "completions", "messages"]
    paths = [entry.api.path for entry in COMMAND_APIS.values()]
    assert paths == ["/chat/completions", "/responses", "/completions", "/messages"]


# -- chat ------------------------------------------------------------------------------


@pytest.mark.parametrize("model", MODELS)
async def test_chat_streams_the_completion_as_the_library_reads_it(
    capsys: pytest.CaptureFixture[str], model: str
) -> None:
    async with open_chat_server() as server:
        argv = [*endpoint_args(server.base_url), "--api", "completions", "--model", model]
        status, out, err = await run_main(capsys, "chat", *argv, "--include-usage", "hello")
        expected = await reference(server.base_url, model)
    assert status == 0
    assert expected.status == "complete" and expected.text
    assert out == expected.text + "\n"
    usage = " ".join(f"{key}={value}" for key, value in (expected.usage or {}).items())
    lines = [f"finish_reason: {expected.choices[0].finish_reason}", f"usage: {usage}"]
    assert err.splitlines() == [*lines, "status: complete"]
    assert server.requests[0].target == "/v1/completions"
    assert server.requests[0].json() == {
        "model": model,
        "prompt": "hello",
        "stream": True,
        "stream_options": {"include_usage": True},
    }


async def test_chat_sends_the_request_options(capsys: pytest.CaptureFixture[str]) -> None:
    async with open_chat_server() as server:
        argv = ["--api", "completions", "--max-tokens", "7", "--temperature", "0.5"]
        status, _, _ = await run_main(capsys, "chat", *endpoint_args(server.base_url), *argv, "x")
    assert status == 0
    assert server.requests[0].json() == {
        "model": "gpt-4o-mini",
        "prompt": "x",
        "max_tokens": 7,
        "temperature": 0.5,
        "stream": True,
    }


async def test_chat_labels_several_choices(capsys: pytest.CaptureFixture[str]) -> None:
    async with open_test_server(ScriptedResponse(body=TWO_CHOICES, write_sizes=7)) as server:
        argv = [*endpoint_args(server.base_url), "--api", "completions", "x"]
        status, out, err = await run_main(capsys, "chat", *argv)
    assert status == 0
    assert out == "Hel\n[choice 1]\nBon\n[choice 0]\nlo\n[choice 1]\njour\n"
    assert err.splitlines() == [
        "finish_reason (choice 0): stop",
        "finish_reason (choice 1): length",
        "usage: prompt_tokens=2 completion_tokens=4 total_tokens=6",
        "status: complete",
    ]


def test_text_deltas_render_as_content_of_their_choice() -> None:
    out, err = io.StringIO(), io.StringIO()
    renderer = TextRenderer(out, err)
    for index, text in [(0, "a"), (1, "b"), (1, "c"), (0, "d")]:
        renderer.event(chunkwise.completions.TextDelta(choice_index=index, text=text))
    assert out.getvalue() == "a\n[choice 1]\nbc\n[choice 0]\nd"


def test_an_interrupted_completion_is_summarised_as_incomplete() -> None:
    out, err = io.StringIO(), io.StringIO()
    renderer = TextRenderer(out, err)
    renderer.event(chunkwise.completions.TextDelta(choice_index=0, text="Once"))
    snapshot = chunkwise.completions.Result(
        choices=(chunkwise.completions.ChoiceResult(index=0, text="Once"),), status="streaming"
    )
    renderer.interrupted(snapshot)
    assert out.getvalue() == "Once\n"
    assert err.getvalue().splitlines() == [
        "finish_reason: none",
        "status: incomplete (interrupted)",
    ]


async def test_chat_json_ends_with_the_completion_result(
    capsys: pytest.CaptureFixture[str],
) -> None:
    async with open_chat_server() as server:
        argv = [*endpoint_args(server.base_url), "--api", "completions", "--json", "hello"]
        status, out, _ = await run_main(capsys, "chat", *argv)
        expected = await reference(server.base_url, "gpt-4o-mini")
    assert status == 0
    lines = [json.loads(line) for line in out.splitlines()]
    deltas = [line["text"] for line in lines if line["type"] == "TextDelta"]
    assert "".join(deltas) == expected.text
    last = lines[-1]
    assert last["type"] == "StreamCompleted"
    assert last["result"]["choices"][0]["text"] == expected.text
    assert last["result"]["choices"][0]["finished"] is True


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--system", "be brief"], "--system is for --api chat or responses"),
        (["--tools", "tools.json"], "--tools is for --api chat or responses"),
        (["--schema", "schema.json"], "--schema is for --api chat or responses"),
    ],
)
async def test_chat_refuses_what_a_completion_cannot_have(
    capsys: pytest.CaptureFixture[str], option: list[str], message: str
) -> None:
    argv = ["chat", "--base-url", "http://127.0.0.1:9/v1", "--api", "completions", *option, "x"]
    status, out, err = await run_main(capsys, *argv)
    assert (status, out) == (2, "")
    assert f"chunkwise chat: error: {message}" in err


async def test_chat_failed_completion_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    async with open_chat_server() as server:
        argv = [*endpoint_args(server.base_url), "--api", "completions", "--model", "error"]
        status, _, err = await run_main(capsys, "chat", *argv, "x")
    assert status == 1
    assert err.splitlines()[-1].startswith("status: failed: ")


# -- record and inspect ----------------------------------------------------------------


@pytest.mark.parametrize("model", MODELS)
async def test_record_then_inspect_tells_a_completion_on_its_own(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, model: str
) -> None:
    output = tmp_path / "out.http"
    async with open_chat_server() as server:
        argv = [*endpoint_args(server.base_url), "--api", "completions", "--model", model]
        status, _, err = await run_main(
            capsys, "record", *argv, "--include-usage", "-o", str(output), "hello"
        )
        expected = await reference(server.base_url, model)
    assert status == 0
    assert err.splitlines()[-1] == "status: complete"
    assert server.requests[0].target == "/v1/completions"
    assert server.requests[0].json()["prompt"] == "hello"
    head, body = split_http_head(output.read_bytes())
    assert head == "HTTP/1.1 200 OK"
    assert detect_api(body) == "completions"
    times = json.loads((tmp_path / "out.http.times.json").read_text())
    assert times["body_bytes"] == len(body)

    status, out, _ = await run_main(capsys, "inspect", str(output), "--json")
    assert status == 0
    document = json.loads(out)
    assert document["choices"][0]["text"] == expected.text
    assert document["choices"][0]["finish_reason"] == expected.choices[0].finish_reason
    assert document["usage"] == expected.usage
    assert "timeline" in document

    status, out, _ = await run_main(capsys, "inspect", str(output))
    assert status == 0
    assert "choice 0\n  text:\n" in out
    assert f"  finish_reason: {expected.choices[0].finish_reason}\n" in out
    assert "status: complete\n" in out
    assert "first token:" in out  # the timeline counts text deltas as output


#: How a stream's first telling event names its API (chunks as the servers send them).
DETECTED = [
    pytest.param(sse(completion_chunk(text_choice("a"))), "completions", id="text_completion"),
    pytest.param(sse({"choices": [{"index": 0, "text": "a"}]}), "completions", id="no-object"),
    pytest.param(
        sse("null", completion_chunk(text_choice("a"))), "completions", id="llama.cpp-null"
    ),
    pytest.param(sse(chunk(choice(content="a"))), "chat", id="chat"),
    pytest.param(sse({"choices": [{"index": 0, "delta": {}}]}), "chat", id="chat-no-object"),
    pytest.param(sse({"choices": []}), "chat", id="empty-choices"),
    pytest.param(sse({"type": "response.created", "response": {}}), "responses", id="responses"),
]


@pytest.mark.parametrize(("body", "api"), DETECTED)
def test_detect_api_knows_three_apis(body: bytes, api: str) -> None:
    assert detect_api(body) == api


async def test_inspect_completions_flag_and_the_other_apis_hint(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    completion = tmp_path / "completion.sse"
    completion.write_bytes(sse(completion_chunk(text_choice("Hi", 0, "stop"))))
    chat = tmp_path / "chat.sse"
    chat.write_bytes(sse(chunk(choice(content="Hi", finish_reason="stop"))))

    status, out, err = await run_main(capsys, "inspect", "--api", "completions", str(completion))
    assert (status, err) == (0, "")
    assert "  text:\n    Hi\n" in out

    status, out, err = await run_main(capsys, "inspect", "--api", "chat", str(completion))
    assert status == 1
    assert "no choices" in out
    assert (
        "note: this file looks like a legacy completions stream, not chat completions "
        "(try --api completions, or leave --api out" in err
    )

    # A chat choice reads as a completion choice without text: the note says why.
    status, out, err = await run_main(capsys, "inspect", "--api", "completions", str(chat))
    assert "  text: (empty)\n" in out
    assert (
        "this file looks like a chat completions stream, not legacy completions "
        "(try --api chat" in err
    )


# -- probe -----------------------------------------------------------------------------


async def run_probe(
    capsys: pytest.CaptureFixture[str], base_url: str, model: str
) -> tuple[int, dict[str, Any]]:
    argv = [*endpoint_args(base_url), "--api", "completions", "--model", model, "--json"]
    status, out, err = await run_main(capsys, "probe", *argv)
    assert KEY not in out + err
    return status, json.loads(out)


@pytest.mark.parametrize(
    ("model", "usage_position", "finish_reason"),
    [
        ("gpt-4o-mini", "final chunk, empty choices", "stop"),
        ("quirks-vllm", "final chunk, empty choices", "stop"),
        ("quirks-llama.cpp", "content chunk", "stop"),
        ("quirks-tgi", "content chunk", "eos_token"),
    ],
)
async def test_probe_completions_of_each_wire_style(
    capsys: pytest.CaptureFixture[str], model: str, usage_position: str, finish_reason: str
) -> None:
    async with open_chat_server() as server:
        status, findings = await run_probe(capsys, server.base_url, model)
    assert status == 0, findings["problems"]
    assert findings["streaming_works"] is True
    assert findings["done_sent"] is True
    assert findings["include_usage"] == {
        "verdict": "honoured",
        "error": None,
        "positions": [usage_position],
    }
    assert findings["finish_reasons"] == [finish_reason]
    assert "tool_calls" not in findings
    # chunkwise serve ignores max_tokens, and the usage (asked for, since it
    # was honoured) shows it.
    cut = findings["max_tokens_cut"]
    assert cut["max_tokens"] == 16
    assert cut["verdict"].endswith("max_tokens was ignored")
    assert [r["label"] for r in findings["requests"]] == ["text + include_usage", "max_tokens 16"]
    bodies = [r.json() for r in server.requests]
    assert {r.target for r in server.requests} == {"/v1/completions"}
    assert bodies[0]["stream_options"] == {"include_usage": True}
    assert bodies[1]["max_tokens"] == 16 and bodies[1]["stream_options"]["include_usage"]


async def test_probe_completions_reports_a_cut_and_the_table(
    capsys: pytest.CaptureFixture[str],
) -> None:
    async with open_chat_server() as server:
        status, findings = await run_probe(capsys, server.base_url, "length")
        argv = [*endpoint_args(server.base_url), "--api", "completions", "--model", "length"]
        table_status, table, _ = await run_main(capsys, "probe", *argv)
    assert status == table_status == 0
    assert findings["max_tokens_cut"]["verdict"] == "finish_reason length"
    assert "max_tokens 16 cut    finish_reason length\n" in table
    assert "tool-call streaming" not in table


async def test_probe_completions_broken_stream_exits_1(
    capsys: pytest.CaptureFixture[str],
) -> None:
    async with open_chat_server() as server:
        status, findings = await run_probe(capsys, server.base_url, "error")
    assert status == 1
    assert findings["problems"][0].startswith("text + include_usage: stream failed: ")


# -- bench -----------------------------------------------------------------------------


@pytest.mark.parametrize("model", MODELS)
async def test_bench_completions(capsys: pytest.CaptureFixture[str], model: str) -> None:
    async with open_chat_server() as server:
        argv = [*endpoint_args(server.base_url), "--api", "completions", "--model", model]
        status, out, _ = await run_main(capsys, "bench", *argv, "--requests", "3", "--json")
    assert status == 0
    document = json.loads(out)
    assert document["api"] == "completions"
    assert document["endpoint"].endswith("/v1/completions")
    assert document["requests"] == {"total": 3, "ok": 3, "failed": {}}
    assert document["output_tokens_per_second"] > 0  # the usage was asked for and read
    assert all(r.json()["stream_options"] == {"include_usage": True} for r in server.requests)


async def test_bench_completions_prompt_objects(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('"one"\n{"prompt": ["two", "three"]}\n')
    async with open_chat_server() as server:
        argv = [*endpoint_args(server.base_url), "--api", "completions", "--prompts", str(prompts)]
        status, _, _ = await run_main(capsys, "bench", *argv, "--requests", "2", "--json")
    assert status == 0
    assert sorted(json.dumps(r.json()["prompt"]) for r in server.requests) == [
        '"one"',
        '["two", "three"]',
    ]

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"messages": []}\n')
    argv = ["--base-url", "http://127.0.0.1:9/v1", "--api", "completions", "--prompts", str(bad)]
    status, _, err = await run_main(capsys, "bench", *argv)
    assert status == 2
    assert '--api completions: a prompt object needs "prompt"' in err

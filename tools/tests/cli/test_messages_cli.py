"""``--api messages`` on the command line: chat, inspect, record, probe and bench.

Against ``chunkwise serve`` in process (its ``POST /v1/messages`` scenarios, by
model name), the command's output is held to what the library itself
reconstructs from the same server (:func:`chunkwise.messages.complete`).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

import chunkwise
from chunkwise_tools._convert import to_json
from chunkwise_tools.cli import _options
from chunkwise_tools.cli._common import split_http_head
from chunkwise_tools.cli._options import COMMAND_APIS, api_of_event
from chunkwise_tools.cli.inspect import detect_api
from chunkwise_tools.server import ServerOptions, open_chat_server
from helpers.cli import WEATHER_TOOL, Terminal, run_main
from helpers.data import KEY, KEY_VAR

pytestmark = pytest.mark.usefixtures("api_key")


def endpoint_args(base_url: str) -> list[str]:
    return ["--base-url", base_url, "--api-key-env", KEY_VAR, "--api", "messages"]


async def reference(base_url: str, model: str, **extra: Any) -> chunkwise.messages.Result:
    """What the library reconstructs from the server for ``hello``."""
    endpoint = chunkwise.Endpoint(base_url=base_url, api_key=KEY)
    request = {
        "model": model,
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": "hello"}],
        **extra,
    }
    return await chunkwise.messages.complete(endpoint, request)


def usage_line(result: chunkwise.messages.Result) -> str:
    usage = (result.usage or {}).items()
    return "usage: " + " ".join(f"{key}={json.dumps(value)}" for key, value in usage)


# -- the shared --api choice -----------------------------------------------------------


def test_messages_is_a_choice_posting_to_messages() -> None:
    entry = COMMAND_APIS["messages"]
    assert (entry.api.path, entry.prompt_key, entry.usage_on_request) == (
        "/messages",
        "messages",
        False,
    )


@pytest.mark.parametrize(
    ("kind", "data"),
    [
        ("message_start", "{}"),
        ("", '{"type": "message_start", "message": {}}'),
        ("", '{"type": "content_block_delta", "index": 0, "delta": {}}'),
        ("message_stop", '{"type": "message_stop"}'),
    ],
)
def test_messages_events_tell_the_messages_api(kind: str, data: str) -> None:
    assert api_of_event(kind, data) == "messages"


def test_ping_and_error_do_not_tell_the_messages_api() -> None:
    assert api_of_event("ping", '{"type": "ping"}') is None
    assert api_of_event("error", '{"type": "error", "error": {}}') is None


async def test_the_request_has_max_tokens_system_and_anthropic_tools(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([WEATHER_TOOL]))
    async with open_chat_server() as server:
        argv = [*endpoint_args(server.base_url), "--model", "text"]
        await run_main(capsys, "chat", *argv, "hello")
        await run_main(
            capsys, "chat", *argv, "--system", "be brief", "--max-tokens", "7", "--tools",
            str(tools), "--temperature", "0.5", "hello",
        )  # fmt: skip
    first, second = (request.json() for request in server.requests)
    assert server.requests[0].target == "/v1/messages"
    assert server.requests[0].headers["x-api-key"] == KEY
    assert first == {
        "model": "text",
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": "hello"}],
        "stream": True,
    }
    function = WEATHER_TOOL["function"]
    assert second == {
        **first,
        "max_tokens": 7,
        "system": "be brief",
        "temperature": 0.5,
        "tools": [{"name": function["name"], "input_schema": function["parameters"]}],
    }


@pytest.mark.parametrize(
    ("option", "said"),
    [
        (["--include-usage"], "always has usage"),
        (["--schema", "x.json"], "not --api messages"),
        (["--audio-out", "x.wav"], "a message has no audio"),
    ],
)
async def test_options_messages_has_no_counterpart_for_are_refused(
    capsys: pytest.CaptureFixture[str], option: list[str], said: str
) -> None:
    status, _, err = await run_main(
        capsys, "chat", *endpoint_args("http://127.0.0.1:9/v1"), *option, "hello"
    )
    assert status == 2
    assert said in err


# -- chat ------------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["text", "length"])
async def test_chat_streams_the_text_and_summarises_stop_reason_and_usage(
    capsys: pytest.CaptureFixture[str], model: str
) -> None:
    async with open_chat_server() as server:
        status, out, err = await run_main(
            capsys, "chat", *endpoint_args(server.base_url), "--model", model, "hello"
        )
        expected = await reference(server.base_url, model)
    assert status == 0
    assert expected.status == "complete" and expected.text
    assert out == expected.text + "\n"
    assert err.splitlines() == [
        f"stop_reason: {expected.stop_reason}",
        usage_line(expected),
        "status: complete",
    ]


async def test_chat_shows_thinking_as_reasoning(capsys: pytest.CaptureFixture[str]) -> None:
    async with open_chat_server() as server:
        status, out, _ = await run_main(
            capsys, "chat", *endpoint_args(server.base_url), "--model", "thinking", "hello"
        )
        expected = await reference(server.base_url, "thinking")
    assert status == 0
    assert expected.thinking and expected.text
    assert out == f"[reasoning] {expected.thinking}\n{expected.text}\n"


async def test_chat_shows_tool_use_blocks_as_tool_calls(
    capsys: pytest.CaptureFixture[str],
) -> None:
    async with open_chat_server() as server:
        status, out, err = await run_main(
            capsys, "chat", *endpoint_args(server.base_url), "--model", "tools", "hello"
        )
        expected = await reference(server.base_url, "tools")
    assert status == 0
    calls = expected.tool_calls
    assert len(calls) == 2
    for call in calls:
        arguments = json.dumps(call.parse_arguments(), ensure_ascii=False)
        assert f"[tool call {call.index}] {call.name} ({call.id}): {arguments}\n" in out
    assert err.splitlines()[0] == "stop_reason: tool_use"


async def test_chat_json_lines_are_the_messages_events(
    capsys: pytest.CaptureFixture[str],
) -> None:
    async with open_chat_server() as server:
        argv = [*endpoint_args(server.base_url), "--model", "demo", "--json", "hello"]
        status, out, _ = await run_main(capsys, "chat", *argv)
    lines = [json.loads(line) for line in out.splitlines()]
    assert status == 0
    types = {line["type"] for line in lines}
    assert {"TextDelta", "ToolCallArgumentsDelta", "ToolCallCompleted", "BlockStopped"} <= types
    assert lines[-1]["type"] == "StreamCompleted"
    assert lines[-1]["result"]["stop_reason"] == "tool_use"


async def test_chat_live_grows_tool_use_input_in_place_and_ends_as_on_a_pipe(
    capsys: pytest.CaptureFixture[str],
) -> None:
    async with open_chat_server(ServerOptions(delay=0.001)) as server:
        argv = [*endpoint_args(server.base_url), "--model", "tools", "hello"]
        _, piped, _ = await run_main(capsys, "chat", *argv)
        status, live, _ = await run_main(capsys, "chat", *argv, "--live", "always")
    assert status == 0
    assert "\x1b[J" in live  # drawn in place at least once
    assert Terminal().feed(live).screen == piped.splitlines()


@pytest.mark.parametrize(
    ("model", "said"),
    [("overloaded", "failed: "), ("cut", "incomplete ("), ("overloaded-before-output", "failed")],
)
async def test_chat_reports_a_message_that_did_not_end(
    capsys: pytest.CaptureFixture[str], model: str, said: str
) -> None:
    async with open_chat_server() as server:
        status, _, err = await run_main(
            capsys, "chat", *endpoint_args(server.base_url), "--model", model, "hello"
        )
    assert status == 1
    assert said in err


# -- record and inspect ----------------------------------------------------------------


async def record(capsys: pytest.CaptureFixture[str], base_url: str, model: str, path: Path) -> int:
    argv = [*endpoint_args(base_url), "--model", model, "-o", str(path), "hello"]
    status, _, _ = await run_main(capsys, "record", *argv)
    return status


async def test_record_posts_to_messages_with_the_key_as_x_api_key(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    output = tmp_path / "text.http"
    async with open_chat_server() as server:
        status = await record(capsys, server.base_url, "text", output)
    assert status == 0
    [request] = server.requests
    assert request.target == "/v1/messages"
    assert request.headers["x-api-key"] == KEY
    assert "authorization" not in {name.lower() for name in request.headers}
    assert request.json()["max_tokens"] == 1024
    head, body = split_http_head(output.read_bytes())
    assert head == "HTTP/1.1 200 OK"
    assert detect_api(body) == "messages"
    assert KEY.encode() not in output.read_bytes()


@pytest.mark.parametrize("model", ["text", "thinking", "tools", "length", "overloaded", "cut"])
async def test_inspect_reads_a_recorded_message_as_the_library_does(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, model: str
) -> None:
    output = tmp_path / f"{model}.http"
    async with open_chat_server() as server:
        recorded = await record(capsys, server.base_url, model, output)
        expected = await reference(server.base_url, model)
    complete = expected.status == "complete"
    assert recorded == (0 if complete else 1)
    status, out, err = await run_main(capsys, "inspect", str(output), "--json")
    assert (status, err) == (0 if complete else 1, "")
    document = json.loads(out)
    assert document["http_status_line"] == "HTTP/1.1 200 OK"
    assert document["content"] == json.loads(json.dumps(to_json(expected.content)))
    assert (document["stop_reason"], document["status"]) == (expected.stop_reason, expected.status)
    status, out, _ = await run_main(capsys, "inspect", str(output))
    lines = out.splitlines()
    assert f"stop_reason: {expected.stop_reason or '(none)'}" in lines
    assert any(line.startswith(f"status: {expected.status}") for line in lines)
    assert "timeline" in out  # record's FILE.times.json, read back
    for block in expected.content:
        assert any(line.startswith(f"block {block.index}: {block.type}") for line in lines)
        for line in block.text.split("\n") if block.text else ():
            assert f"    {line}" in lines
    # Every read size reconstructs the same message (here, one byte at a time).
    again = await run_main(capsys, "inspect", str(output), "--read-size", "1")
    assert again[1] == out


async def test_inspect_shows_thinking_and_tool_calls_of_a_message(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    async with open_chat_server() as server:
        for model in ("thinking", "tools"):
            await record(capsys, server.base_url, model, tmp_path / f"{model}.http")
        expected = await reference(server.base_url, "tools")
    _, out, _ = await run_main(capsys, "inspect", str(tmp_path / "thinking.http"))
    assert "block 0: thinking\n  thinking:\n" in out
    assert "  signature: yes\n" in out
    _, out, _ = await run_main(capsys, "inspect", str(tmp_path / "tools.http"))
    for call in expected.tool_calls:
        assert f"  [tool call {call.index}] {call.name} ({call.id}): " in out


async def test_inspect_with_another_api_on_a_message_says_it_is_messages(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    output = tmp_path / "text.http"
    async with open_chat_server() as server:
        await record(capsys, server.base_url, "text", output)
    status, _, err = await run_main(capsys, "inspect", "--api", "chat", str(output))
    assert status == 1
    assert "looks like a Messages API stream" in err
    assert "try --api messages" in err
    status, forced, err = await run_main(capsys, "inspect", "--api", "messages", str(output))
    assert (status, err) == (0, "")
    assert forced == (await run_main(capsys, "inspect", str(output)))[1]


# -- probe -----------------------------------------------------------------------------


async def run_probe(
    capsys: pytest.CaptureFixture[str], base_url: str, model: str, *more: str
) -> tuple[int, Any]:
    status, out, err = await run_main(
        capsys, "probe", *endpoint_args(base_url), "--model", model, *more
    )
    assert err == ""
    return status, json.loads(out)


@pytest.mark.parametrize("model", ["text", "thinking", "tools", "demo", "length"])
async def test_probe_of_a_working_messages_server(
    capsys: pytest.CaptureFixture[str], model: str
) -> None:
    async with open_chat_server() as server:
        status, findings = await run_probe(capsys, server.base_url, model, "--json")
    assert status == 0
    assert findings["api"] == "messages"
    assert (findings["streaming_works"], findings["problems"]) == (True, [])
    assert [request.target for request in server.requests] == ["/v1/messages"] * 3
    assert all(request.headers["x-api-key"] == KEY for request in server.requests)
    assert [request.json()["max_tokens"] for request in server.requests] == [256, 16, 256]
    assert server.requests[2].json()["tool_choice"] == {"type": "any"}
    assert findings["event_field"] == "names the data type"
    assert (findings["message_stop"], findings["done_sent"]) == (True, False)
    assert findings["ping_events"] == 3
    assert findings["usage_in"] == ["message_start", "message_delta"]
    assert findings["error_shapes"] == []
    assert findings["final_status"] == "complete"
    assert [r["label"] for r in findings["requests"]] == ["text", "max_tokens 16", "tool use"]


async def test_probe_reports_the_cut_and_tool_use_and_the_table(
    capsys: pytest.CaptureFixture[str],
) -> None:
    async with open_chat_server() as server:
        _, cut = await run_probe(capsys, server.base_url, "length", "--json")
        _, tools = await run_probe(capsys, server.base_url, "tools", "--json")
        _, text = await run_probe(capsys, server.base_url, "text", "--json")
        status, table, _ = await run_main(
            capsys, "probe", *endpoint_args(server.base_url), "--model", "tools"
        )
    assert cut["max_tokens_cut"]["verdict"] == "stop_reason max_tokens"
    assert text["max_tokens_cut"]["verdict"].endswith("max_tokens was ignored")
    assert text["tool_use"]["verdict"] == "no tool_use block"
    finding = tools["tool_use"]
    assert (finding["verdict"], finding["calls"], finding["stop_reason"]) == (
        "streamed",
        2,
        "tool_use",
    )
    assert finding["input_json_deltas"] > 2  # the emulator fragments each call's input
    assert status == 0
    assert table.startswith(f"probe of {server.base_url} (model tools, Messages API)\n")
    assert "tool_use streaming   2 calls; input in " in table
    assert "message_stop sent    yes\n" in table


@pytest.mark.parametrize(
    ("model", "problem", "shape"),
    [
        ("cut", "text: stream incomplete", None),
        ("overloaded", "text: stream failed", "error event, nested"),
        ("overloaded-before-output", "text: stream failed", "error event, nested"),
    ],
)
async def test_probe_says_streaming_is_broken(
    capsys: pytest.CaptureFixture[str], model: str, problem: str, shape: str | None
) -> None:
    async with open_chat_server() as server:
        status, findings = await run_probe(capsys, server.base_url, model, "--json")
    assert status == 1
    assert findings["streaming_works"] is False
    assert findings["problems"][0].startswith(problem)
    assert findings["message_stop"] is False
    assert findings["error_shapes"] == ([shape] if shape else [])


# -- bench -----------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["text", "thinking", "tools"])
async def test_bench_messages(capsys: pytest.CaptureFixture[str], model: str) -> None:
    async with open_chat_server() as server:
        argv = [*endpoint_args(server.base_url), "--model", model, "--requests", "3", "--json"]
        status, out, _ = await run_main(capsys, "bench", *argv)
    assert status == 0
    document = json.loads(out)
    assert document["api"] == "messages"
    assert document["endpoint"].endswith("/v1/messages")
    assert document["requests"] == {"total": 3, "ok": 3, "failed": {}}
    assert document["output_tokens_per_second"] > 0  # message_delta's output_tokens, read
    assert all(request.headers["x-api-key"] == KEY for request in server.requests)
    assert all(
        request.json()
        == {
            "model": model,
            "max_tokens": 1024,
            "messages": [{"role": "user", "content": "Hello"}],
            "stream": True,
        }
        for request in server.requests
    )


async def test_bench_messages_counts_failed_streams_by_kind(
    capsys: pytest.CaptureFixture[str],
) -> None:
    async with open_chat_server() as server:
        argv = [*endpoint_args(server.base_url), "--model", "cut", "--requests", "2", "--json"]
        status, out, _ = await run_main(capsys, "bench", *argv)
    assert status == 1
    failed = json.loads(out)["requests"]["failed"]
    assert list(failed) == ["incomplete: unfinished"] and sum(failed.values()) == 2


async def test_bench_messages_prompt_objects(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    conversation = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "again"},
    ]
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(f'"one"\n{json.dumps({"messages": conversation})}\n')
    async with open_chat_server() as server:
        argv = [*endpoint_args(server.base_url), "--prompts", str(prompts), "--model", "text"]
        status, _, _ = await run_main(capsys, "bench", *argv, "--requests", "2", "--json")
    assert status == 0
    sent = sorted((r.json()["messages"] for r in server.requests), key=len)
    assert sent == [[{"role": "user", "content": "one"}], conversation]


@pytest.mark.parametrize(
    ("argv", "environ", "url", "key"),
    [
        # Anthropic's variables, as its SDK reads them: /v1 added to the host's URL.
        (
            [],
            {"ANTHROPIC_BASE_URL": "http://h:1", "ANTHROPIC_API_KEY": "sk-a"},
            "http://h:1/v1",
            "sk-a",
        ),
        (
            [],
            {"OPENAI_BASE_URL": "http://o:2/v1", "OPENAI_API_KEY": "sk-o"},
            "https://api.anthropic.com/v1",
            None,
        ),
        (
            ["--base-url", "http://h:3/v1", "--api-key-env", "MINE"],
            {"MINE": "sk-m"},
            "http://h:3/v1",
            "sk-m",
        ),
    ],
)
def test_api_messages_reads_anthropic_s_environment(
    argv: list[str], environ: dict[str, str], url: str, key: str | None
) -> None:
    parser = argparse.ArgumentParser()
    _options.add_endpoint_options(parser)
    args = parser.parse_args(argv)
    args.api = "messages"
    endpoint = _options.endpoint_from_args(args, environ)
    assert (endpoint.base_url, endpoint.api_key) == (url, key)
    args.api = "chat"  # the other APIs keep OpenAI's
    assert _options.endpoint_from_args(args, {"OPENAI_API_KEY": "sk-o"}).api_key == (
        "sk-o" if "--api-key-env" not in argv else None
    )

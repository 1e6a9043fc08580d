"""The trio examples in ``examples/`` run against a live loopback server.

Each example runs as a subprocess (its own trio loop) while the server runs in
the test's trio loop; ``trio.run_process`` lets both make progress.  The scripted
server answers according to the request's ``model``, so one handler serves
every example; then basic_stream, fan_out, tool_loop and deadline run once
more against the server of ``chunkwise serve``, and responses_stream against
its ``POST /v1/responses``.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator, Mapping
from typing import Any

import attrs
import pytest

from chunkwise.testing import RecordedRequest, ResponseWriter, ScriptedResponse, open_test_server
from chunkwise_tools.server import ServerOptions, open_chat_server
from helpers.bodies import choice, chunk, tool
from helpers.cli import slow_words
from helpers.processes import run_python

pytest.importorskip("jsonschema")  # the tool loop validates arguments

USAGE = {"prompt_tokens": 12, "completion_tokens": 9, "total_tokens": 21}


def text_chunks(words: list[str]) -> Iterator[dict[str, Any]]:
    yield chunk(choice(role="assistant", content=""))
    for word in words:
        yield chunk(choice(content=word))
    yield chunk(choice(finish_reason="stop"))


def tool_call_chunks(arguments: str) -> Iterator[dict[str, Any]]:
    yield chunk(choice(role="assistant", content=None))
    yield chunk(choice(tool_calls=[tool(0, id="call_w1", name="get_weather", arguments="")]))
    for i in range(0, len(arguments), 5):  # arguments arrive in fragments
        yield chunk(choice(tool_calls=[tool(0, arguments=arguments[i : i + 5])]))
    yield chunk(choice(finish_reason="tool_calls"))


async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
    body = request.json()
    model = body["model"]
    assert body["stream"] is True
    include_usage = body.get("stream_options", {}).get("include_usage", False)
    if model == "basic":
        events = list(text_chunks(["Hello", ", wörld", "! こんにちは", " 👋"]))
    elif model == "fan-out":
        events = [
            *list(text_chunks(["Bonjour", " !"]))[:-1],  # no finish yet: a tool call follows
            *list(tool_call_chunks('{"city": "Paris"}'))[1:],
        ]
        if include_usage:
            events.append(chunk(usage=USAGE))
    elif model.startswith("tools"):
        tool_messages = [m for m in body["messages"] if m["role"] == "tool"]
        if tool_messages:
            outcome = tool_messages[-1]["content"]
            events = list(text_chunks([f"The tool said: {outcome}"]))
        elif model == "tools-invalid":
            events = list(tool_call_chunks('{"town": "Paris"}'))  # fails the schema
        else:
            events = list(tool_call_chunks('{"city": "Paris", "unit": "celsius"}'))
    elif model == "slow":
        # One event per write, 0.05 s apart: five seconds in all.
        await writer.play(slow_words(100, delay=0.05))
        return
    else:
        await writer.play(ScriptedResponse.error(404, f"unknown model {model!r}"))
        return
    await writer.play(ScriptedResponse.sse(events, write_sizes=64))


async def run_example(
    name: str, base_url: str, model: str, *args: str, env: Mapping[str, str] | None = None
) -> tuple[int, str, str]:
    """Run ``examples/{name}.py`` against ``base_url`` and ``model``."""
    argv = [f"examples/{name}.py", "--base-url", base_url, "--model", model, *args]
    return await run_python(*argv, env=env)


async def test_basic_stream() -> None:
    async with open_test_server(handler) as server:
        code, out, err = await run_example(
            "basic_stream", server.base_url, "basic", env={"OPENAI_API_KEY": "sk-live-test"}
        )
        assert (code, err) == (0, "")
        assert out == "Hello, wörld! こんにちは 👋\nstatus: complete (finish_reason: stop)\n"
        (request,) = server.requests
        assert request.target == "/v1/chat/completions"
        assert request.headers["authorization"] == "Bearer sk-live-test"
        await server.wait_client_closed()


async def test_basic_stream_without_a_key_sends_no_authorization() -> None:
    async with open_test_server(handler) as server:
        code, _, err = await run_example("basic_stream", server.base_url + "/", "basic")
        assert (code, err) == (0, "")
        assert "authorization" not in server.requests[0].headers


async def test_basic_stream_reports_an_http_error() -> None:
    async with open_test_server(handler) as server:
        code, out, err = await run_example("basic_stream", server.base_url, "no-such-model")
        assert (code, out) == (1, "")
        assert err == "error: HTTP 404: unknown model 'no-such-model'\n"


@attrs.frozen
class FanOutReport:
    """The output of ``examples/fan_out.py``, one consumer's part at a time.

    The three consumers print as the scheduler runs them: a report line may
    come between two pieces of text (the console ends the text's line first),
    so only each consumer's own order is the stream's.
    """

    text: str  # the text consumer's pieces, joined again
    choice: list[str]  # its report lines
    tool_call: list[str]
    lifecycle: list[str]
    text_before_choice: bool  # the text consumer printed all its text first


def fan_out_report(out: str) -> FanOutReport:
    lines = out.splitlines()
    tagged = {
        tag: [line for line in lines if line.startswith(f"[{tag}] ")]
        for tag in ("choice", "tool_call", "lifecycle")
    }
    pieces = [(i, line) for i, line in enumerate(lines) if not line.startswith("[")]
    choice_at = [i for i, line in enumerate(lines) if line.startswith("[choice] ")]
    return FanOutReport(
        text="".join(line for _, line in pieces),
        choice=tagged["choice"],
        tool_call=tagged["tool_call"],
        lifecycle=tagged["lifecycle"],
        text_before_choice=all(i < min(choice_at, default=len(lines)) for i, _ in pieces),
    )


async def test_fan_out() -> None:
    """Each consumer sees its whole family in the stream's order, whatever the interleaving."""
    async with open_test_server(handler) as server:
        code, out, err = await run_example("fan_out", server.base_url, "fan-out")
        assert (code, err) == (0, "")
        assert out.endswith("\n")  # no text left unfinished on its line
        report = fan_out_report(out)
        assert report.text == "Bonjour !"
        assert report.choice == ["[choice] choice 0 finished: tool_calls"]
        assert report.text_before_choice
        assert report.tool_call == ['[tool_call] get_weather({"city": "Paris"}) id=call_w1']
        assert report.lifecycle == [
            "[lifecycle] HTTP 200",
            f"[lifecycle] usage: {json.dumps(USAGE)}",
            "[lifecycle] status: complete",
        ]
        body = server.requests[0].json()
        assert body["tools"][0]["function"]["name"] == "get_weather"
        assert body["stream_options"] == {"include_usage": True}


async def test_tool_loop_runs_a_validated_call_and_sends_the_result_back() -> None:
    async with open_test_server(handler) as server:
        code, out, err = await run_example("tool_loop", server.base_url, "tools")
        assert (code, err) == (0, "")
        expected_result = '{"city": "Paris", "temperature": 18, "unit": "celsius", "sky": "clear"}'
        assert out.splitlines() == [
            '[tool call] get_weather {"city": "Paris", "unit": "celsius"} (valid)',
            f"[tool result] call_w1: {expected_result}",
            f"final answer: The tool said: {expected_result}",
        ]
        first, second = (request.json() for request in server.requests)
        assert [m["role"] for m in first["messages"]] == ["user"]
        assert [m["role"] for m in second["messages"]] == ["user", "assistant", "tool"]
        assistant, tool = second["messages"][1:]
        assert assistant["tool_calls"] == [
            {
                "id": "call_w1",
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "arguments": '{"city": "Paris", "unit": "celsius"}',
                },
            }
        ]
        assert tool == {"role": "tool", "tool_call_id": "call_w1", "content": expected_result}


async def test_tool_loop_does_not_run_a_call_that_fails_its_schema() -> None:
    async with open_test_server(handler) as server:
        code, out, err = await run_example("tool_loop", server.base_url, "tools-invalid")
        assert (code, err) == (0, "")
        lines = out.splitlines()
        assert lines[0].startswith('[tool call] get_weather {"town": "Paris"} (rejected: ')
        assert "do not match its schema" in lines[0]
        assert lines[1].startswith("[tool result] call_w1: error: not run: ")
        tool = server.requests[1].json()["messages"][-1]
        assert tool["role"] == "tool"
        assert tool["tool_call_id"] == "call_w1"
        assert tool["content"].startswith("error: not run: ")
        assert lines[-1].startswith("final answer: The tool said: error: not run: ")


async def test_deadline_keeps_the_partial_text() -> None:
    async with open_test_server(handler) as server:
        code, out, err = await run_example("deadline", server.base_url, "slow", "--seconds", "1")
        assert (code, err) == (0, "")
        lines = out.splitlines()
        assert lines[1:3] == ["deadline of 1 s reached", "status: incomplete (cancelled)"]
        partial = lines[0]
        assert partial.startswith("word0 word1 ")
        assert "word99" not in partial
        # The snapshot holds at least what was printed: the deadline may fire
        # while an event that was already parsed waits to be printed.
        kept = ast.literal_eval(lines[3].removeprefix("partial text: "))
        assert isinstance(kept, str) and kept.startswith(partial), (kept, partial)
        # The example closed its socket when the deadline fired.
        await server.wait_client_closed()


async def test_deadline_not_reached() -> None:
    async with open_test_server(handler) as server:
        code, out, err = await run_example("deadline", server.base_url, "basic", "--seconds", "30")
        assert (code, err) == (0, "")
        assert out == "Hello, wörld! こんにちは 👋\nstatus: complete\n"


# -- the same examples against `chunkwise serve` ----------------------------------


async def test_basic_stream_against_chunkwise_serve() -> None:
    async with open_chat_server(ServerOptions(write_size=7)) as server:
        code, out, err = await run_example("basic_stream", server.base_url, "text")
        assert (code, err) == (0, "")
        assert "日本語のテキスト" in out
        assert out.endswith("\nstatus: complete (finish_reason: stop)\n")


async def test_fan_out_against_chunkwise_serve() -> None:
    async with open_chat_server(ServerOptions(write_size=7)) as server:
        code, out, err = await run_example("fan_out", server.base_url, "demo")
        assert (code, err) == (0, "")
        report = fan_out_report(out)
        (call,) = report.tool_call
        assert call.startswith('[tool_call] get_weather({"city": "Zürich", "unit": "celsius"})')
        assert report.choice == ["[choice] choice 0 finished: tool_calls"]
        assert report.text_before_choice
        assert report.lifecycle[0] == "[lifecycle] HTTP 200"
        assert report.lifecycle[-1] == "[lifecycle] status: complete"
        assert "こんにちは" in report.text


async def test_tool_loop_against_chunkwise_serve() -> None:
    async with open_chat_server(ServerOptions()) as server:
        code, out, err = await run_example(
            "tool_loop", server.base_url, "tools", "--followup-model", "text"
        )
        assert (code, err) == (0, "")
        lines = out.splitlines()
        assert lines[0] == '[tool call] get_weather {"city": "Paris", "unit": "celsius"} (valid)'
        assert lines[2] == '[tool call] get_weather {"city": "東京", "unit": "celsius"} (valid)'
        assert lines[3].startswith('[tool result] call_chunkwise_tokyo: {"city": "東京", ')
        assert lines[-1].startswith("final answer: Hello!")
        assert [request.json()["model"] for request in server.requests] == ["tools", "text"]


async def test_deadline_against_chunkwise_serve() -> None:
    async with open_chat_server(ServerOptions(delay=0.3)) as server:
        code, out, err = await run_example("deadline", server.base_url, "text", "--seconds", "1")
        assert (code, err) == (0, "")
        assert "status: incomplete (cancelled)\n" in out
        await server.wait_client_closed()


@pytest.mark.parametrize("model", ["tools", "quirks-llamacpp-tools"])
async def test_responses_stream_against_chunkwise_serve(model: str) -> None:
    async with open_chat_server(ServerOptions(write_size=7)) as server:
        code, out, err = await run_example("responses_stream", server.base_url, model)
        assert (code, err) == (0, "")
        calls = [line for line in out.splitlines() if line.startswith("[call ")]
        assert len(calls) == 2 and all(" get_weather({'city': " in line for line in calls)
        assert out.endswith("\n") and "status: complete" in out.splitlines()[-1]
        [request] = server.requests
        assert request.target == "/v1/responses"
        assert request.json()["tools"][0]["name"] == "get_weather"


async def test_responses_stream_reports_an_incomplete_answer() -> None:
    async with open_chat_server() as server:
        code, out, err = await run_example("responses_stream", server.base_url, "length")
        assert (code, err) == (1, "")
        assert out.splitlines()[-1] == "status: incomplete (max_output_tokens)"

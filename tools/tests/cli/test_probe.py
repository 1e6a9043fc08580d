"""``chunkwise probe`` against scripted loopback servers (and ``chunkwise serve``'s quirks)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
import trio

from chunkwise.testing import RecordedRequest, ResponseWriter, ScriptedResponse, open_test_server
from chunkwise_tools.cli import _options, main
from chunkwise_tools.cli.probe import analyze_body
from chunkwise_tools.server import ServerOptions, open_chat_server
from helpers.bodies import choice, chunk, sse, tool
from helpers.cli import run_main
from helpers.data import KEY, KEY_VAR
from helpers.processes import interrupt

pytestmark = pytest.mark.usefixtures("api_key")

Chunk = dict[str, Any]

USAGE_CHUNK = chunk(usage={"total_tokens": 9})
TEXT = [
    chunk(choice(role="assistant", content="Hello")),
    chunk(choice(content="!")),
    chunk(choice(finish_reason="stop")),
]
FRAGMENTED_TOOL = [
    chunk(choice(tool_calls=[tool(0, id="call_1", name="get_weather")])),
    chunk(choice(tool_calls=[tool(0, arguments='{"city":')])),
    chunk(choice(tool_calls=[tool(0, arguments=' "Paris"}')])),
    chunk(choice(finish_reason="tool_calls")),
]


def provider(
    text: list[Chunk] = TEXT,
    tools: list[Chunk] = FRAGMENTED_TOOL,
    *,
    reject_usage: bool = False,
    usage: bool = True,
    **style: Any,
) -> Callable[[RecordedRequest, ResponseWriter], Any]:
    """A handler playing an OpenAI-compatible provider with the given habits."""

    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        body = request.json()
        assert body["stream"] is True
        assert request.headers["authorization"] == f"Bearer {KEY}"
        include_usage = body.get("stream_options", {}).get("include_usage", False)
        if include_usage and reject_usage:
            response = ScriptedResponse.error(
                400,
                "Unrecognized request argument supplied: stream_options",
                type="invalid_request_error",
            )
        else:
            chunks = list(tools if "tools" in body else text)
            if include_usage and usage:
                chunks.append(USAGE_CHUNK)
            response = ScriptedResponse(body=sse(*chunks, **style), write_sizes=9)
        await writer.play(response)

    return handler


async def run_probe(
    capsys: pytest.CaptureFixture[str], base_url: str, *extra: str, model: str = "m"
) -> tuple[int, dict[str, Any]]:
    argv = ["probe", "--base-url", base_url, "--model", model, "--api-key-env", KEY_VAR]
    status, out, err = await run_main(capsys, *argv, "--json", *extra)
    assert KEY not in out + err
    return status, json.loads(out)


async def test_a_well_behaved_provider(capsys: pytest.CaptureFixture[str]) -> None:
    async with open_test_server(provider()) as server:
        status, findings = await run_probe(capsys, server.base_url)
    assert status == 0
    assert findings["streaming_works"] is True
    assert findings["problems"] == []
    assert findings["content_type"] == "text/event-stream"
    assert findings["done_sent"] is True
    assert findings["include_usage"] == {
        "verdict": "honoured",
        "error": None,
        "positions": ["final chunk, empty choices"],
    }
    assert findings["tool_calls"] == {
        "verdict": "streamed",
        "calls": 1,
        "arguments": "fragmented",
        "max_argument_deltas": 2,
        "index": "present",
        "id": "on first delta only",
    }
    assert findings["reasoning_fields"] == []
    assert findings["keep_alive_comments"] == {"count": 0, "examples": []}
    assert findings["line_endings"] == ["LF"]
    assert findings["data_spacing"] == ["with space"]
    assert findings["finish_reasons"] == ["stop", "tool_calls"]
    assert findings["ttfb_ms"] > 0
    assert findings["first_token_ms"] >= findings["ttfb_ms"]
    assert [r["label"] for r in findings["requests"]] == ["text + include_usage", "tool call"]
    requests = [r.json() for r in server.requests]
    assert requests[0]["stream_options"] == {"include_usage": True}
    assert requests[1]["tools"][0]["function"]["name"] == "get_weather"
    assert requests[1]["tool_choice"] == "required"


async def test_keepalive_comments_no_space_and_crlf(capsys: pytest.CaptureFixture[str]) -> None:
    handler = provider(eol="\r\n", space=False, keepalive=True)
    async with open_test_server(handler) as server:
        status, findings = await run_probe(capsys, server.base_url)
    assert status == 0
    assert findings["keep_alive_comments"]["count"] == 5 + 5
    assert findings["keep_alive_comments"]["examples"] == [": keep-alive"]
    assert findings["line_endings"] == ["CRLF"]
    assert findings["data_spacing"] == ["without space"]


async def test_cr_line_endings(capsys: pytest.CaptureFixture[str]) -> None:
    async with open_test_server(provider(eol="\r")) as server:
        status, findings = await run_probe(capsys, server.base_url)
    assert status == 0
    assert findings["line_endings"] == ["CR"]


async def test_whole_tool_calls_with_null_index(capsys: pytest.CaptureFixture[str]) -> None:
    def whole(ident: str, city: str) -> Chunk:
        """A whole call in one delta, without an index."""
        return tool(None, id=ident, name="get_weather", arguments=json.dumps({"city": city}))

    tools = [
        chunk(choice(role="assistant", tool_calls=[{**whole("call_a", "Paris"), "index": None}])),
        chunk(choice(tool_calls=[whole("call_b", "Rome")])),
        chunk(choice(finish_reason="tool_calls")),
    ]
    async with open_test_server(provider(tools=tools)) as server:
        status, findings = await run_probe(capsys, server.base_url)
    assert status == 0
    assert findings["tool_calls"] == {
        "verdict": "streamed",
        "calls": 2,
        "arguments": "whole call in one delta",
        "max_argument_deltas": 1,
        "index": "null or missing",
        "id": None,
    }


async def test_id_repeated_on_every_delta(capsys: pytest.CaptureFixture[str]) -> None:
    tools = [
        chunk(choice(tool_calls=[tool(0, id="call_1", name="get_weather")])),
        chunk(choice(tool_calls=[tool(0, id="call_1", arguments='{"ci')])),
        chunk(choice(tool_calls=[tool(0, id="call_1", arguments='ty":1}')])),
        chunk(choice(finish_reason="tool_calls")),
    ]
    async with open_test_server(provider(tools=tools)) as server:
        status, findings = await run_probe(capsys, server.base_url)
    assert status == 0
    assert findings["tool_calls"]["id"] == "repeated on every delta"
    assert findings["tool_calls"]["arguments"] == "fragmented"


async def test_include_usage_rejected(capsys: pytest.CaptureFixture[str]) -> None:
    async with open_test_server(provider(reject_usage=True)) as server:
        status, findings = await run_probe(capsys, server.base_url)
    assert status == 0
    assert findings["include_usage"] == {
        "verdict": "rejected",
        "error": "HTTP 400: Unrecognized request argument supplied: stream_options",
        "positions": [],
    }
    assert [r["status_code"] for r in findings["requests"]] == [400, 200, 200]
    bodies = [r.json() for r in server.requests]
    assert "stream_options" in bodies[0]
    assert "stream_options" not in bodies[1]
    assert "stream_options" not in bodies[2]


async def test_include_usage_ignored(capsys: pytest.CaptureFixture[str]) -> None:
    async with open_test_server(provider(usage=False)) as server:
        status, findings = await run_probe(capsys, server.base_url)
    assert status == 0
    assert findings["include_usage"]["verdict"] == "ignored"


async def test_usage_on_the_last_content_chunk_and_reasoning(
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = [
        chunk(choice(role="assistant", reasoning="Hmm.")),
        chunk(choice(finish_reason="stop", content="Hi"), usage={"total_tokens": 3}),
    ]
    async with open_test_server(provider(text=text, usage=False)) as server:
        status, findings = await run_probe(capsys, server.base_url)
    assert status == 0
    assert findings["include_usage"]["positions"] == ["content chunk"]
    assert findings["reasoning_fields"] == ["reasoning"]


async def test_no_done(capsys: pytest.CaptureFixture[str]) -> None:
    async with open_test_server(provider(done=False)) as server:
        status, findings = await run_probe(capsys, server.base_url)
    assert status == 0  # every choice finished: complete without [DONE]
    assert findings["done_sent"] is False


async def test_tool_request_rejected_is_reported_not_fatal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        if "tools" in request.json():
            await writer.play(ScriptedResponse.error(400, "tools are not supported"))
        else:
            await writer.play(ScriptedResponse(body=sse(*TEXT, USAGE_CHUNK)))

    async with open_test_server(handler) as server:
        status, findings = await run_probe(capsys, server.base_url)
    assert status == 0
    assert findings["tool_calls"] == {
        "verdict": "rejected",
        "error": "HTTP 400: tools are not supported",
    }


@pytest.mark.parametrize(
    ("response", "problem"),
    [
        (ScriptedResponse.error(503, "overloaded"), "HTTP 503: overloaded"),
        (
            ScriptedResponse(content_type="application/json", body=b"{}"),
            "expected a text/event-stream",
        ),
        (ScriptedResponse(body=b"data: [DONE]\n\n"), "no content"),
        (ScriptedResponse(body=sse(*TEXT[:2], done=False)), "stream incomplete"),
        (ScriptedResponse(body=sse(*TEXT), disconnect_after=40), "stream incomplete"),
        (
            ScriptedResponse(body=sse(*TEXT[:1], {"error": {"message": "boom"}})),
            "stream failed: boom",
        ),
    ],
)
async def test_broken_streaming_exits_1(
    capsys: pytest.CaptureFixture[str], response: ScriptedResponse, problem: str
) -> None:
    async with open_test_server(response) as server:
        status, findings = await run_probe(capsys, server.base_url)
    assert status == 1
    assert findings["streaming_works"] is False
    assert any(problem in p for p in findings["problems"]), findings["problems"]


async def test_error_status_sends_one_request(capsys: pytest.CaptureFixture[str]) -> None:
    async with open_test_server(ScriptedResponse.error(401, "Incorrect API key")) as server:
        status, findings = await run_probe(capsys, server.base_url)
    assert status == 3  # the probe could not start
    assert len(server.requests) == 1
    assert findings["include_usage"]["verdict"] == "unknown"
    assert findings["tool_calls"] == {"verdict": "not tried"}


async def test_connection_refused(capsys: pytest.CaptureFixture[str], refused_port: int) -> None:
    status, findings = await run_probe(capsys, f"http://127.0.0.1:{refused_port}/v1")
    assert status == 3
    assert findings["problems"] == [
        f"text + include_usage: cannot connect to 127.0.0.1:{refused_port}: connection refused"
    ]


async def test_what_a_failed_request_never_showed_is_unknown_not_none(
    capsys: pytest.CaptureFixture[str],
) -> None:
    async with open_test_server(ScriptedResponse.error(503, "overloaded")) as server:
        base_url = server.base_url
        status, findings = await run_probe(capsys, base_url)
        assert status == 1
        for key in ("reasoning_fields", "keep_alive_comments", "line_endings", "data_spacing"):
            assert findings[key] is None, key
        assert findings["finish_reasons"] is None
        argv = ["probe", "--base-url", base_url, "--model", "m", "--api-key-env", KEY_VAR]
        status, out, _ = await run_main(capsys, *argv)
    assert status == 1
    rows = dict(line.split("  ", 1) for line in out.splitlines()[2:14] if "  " in line)
    rows = {label.strip(): value.strip() for label, value in rows.items()}
    for label in (
        "content type",
        "[DONE] sent",
        "include_usage",
        "reasoning field",
        "keep-alive comments",
        "line endings",
        "data: spacing",
        "finish reasons",
    ):
        assert rows[label] == "unknown", label


async def test_a_missing_key_is_named_in_a_hint(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEY_VAR)
    async with open_chat_server(ServerOptions(api_key="sk-required-0123456789")) as server:
        argv = ["probe", "--base-url", server.base_url, "--api-key-env", KEY_VAR]
        status, out, err = await run_main(capsys, *argv)
        status_json, findings = await run_probe(capsys, server.base_url)
    assert status == status_json == 3
    hint = f"no API key was sent, because ${KEY_VAR} is unset or empty"
    assert findings["requests"][0]["hint"].startswith(hint)
    assert out == "" and f"\nhint: {hint}" in err


async def test_timeout(capsys: pytest.CaptureFixture[str]) -> None:
    slow = ScriptedResponse(body=sse(*TEXT), write_sizes=20, delay=0.5)
    async with open_test_server(slow) as server:
        status, findings = await run_probe(capsys, server.base_url, "--timeout", "0.3")
    assert status == 1
    assert "incomplete" in findings["problems"][0]


async def test_key_quoted_back_is_redacted(capsys: pytest.CaptureFixture[str]) -> None:
    response = ScriptedResponse.error(401, f"Incorrect API key provided: {KEY}")
    async with open_test_server(response) as server:
        status, findings = await run_probe(capsys, server.base_url)  # asserts KEY absent
    assert status == 3
    assert "Incorrect API key provided: ***" in findings["problems"][0]


async def test_table(capsys: pytest.CaptureFixture[str]) -> None:
    async with open_test_server(provider(keepalive=True)) as server:
        argv = ["probe", "--base-url", server.base_url, "--model", "m", "--api-key-env", KEY_VAR]
        status, out, _ = await run_main(capsys, *argv)
    assert status == 0
    lines = out.splitlines()
    assert lines[0] == f"probe of {server.base_url} (model m)"
    rows = dict(line.split("  ", 1) for line in lines[2:14])
    rows = {label.strip(): value.strip() for label, value in rows.items()}
    assert rows["streaming works"] == "yes"
    assert rows["[DONE] sent"] == "yes"
    assert rows["include_usage"] == "honoured (usage in final chunk, empty choices)"
    assert rows["tool-call streaming"] == (
        "fragmented arguments (up to 2 deltas); index present; id on first delta only; 1 call"
    )
    assert rows["keep-alive comments"] == 'yes (10, e.g. ": keep-alive")'
    assert rows["line endings"] == "LF"
    assert rows["finish reasons"] == "stop, tool_calls"
    assert rows["time to first token"].endswith(" ms")
    assert "requests:" in lines
    assert KEY not in out


async def test_base_url_and_model_come_from_the_environment_like_chat(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    async with open_test_server(provider()) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("CHUNKWISE_MODEL", "env-model")
        argv = ["probe", "--api-key-env", KEY_VAR, "--json"]
        status, out, _ = await run_main(capsys, *argv)
    findings = json.loads(out)
    assert status == 0
    assert findings["base_url"] == server.base_url
    assert findings["model"] == "env-model"
    assert {request.json()["model"] for request in server.requests} == {"env-model"}


async def test_the_endpoint_keeps_its_headers_and_tls_context(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Only the timeouts are the probe's own: everything else of the endpoint
    # the options describe is kept (attrs.evolve, not a rebuilt Endpoint).
    async with open_test_server(provider(), tls=True) as server:
        endpoint = server.endpoint(api_key=KEY, headers={"X-Relay-Token": "t1"})
        monkeypatch.setattr(_options, "endpoint_from_args", lambda args: endpoint)
        argv = ["probe", "--model", "m", "--timeout", "7", "--json"]
        status, out, _ = await run_main(capsys, *argv)
    findings = json.loads(out)
    assert status == 0, findings["problems"]
    assert findings["base_url"].startswith("https://")
    assert all(request.headers["x-relay-token"] == "t1" for request in server.requests)


def test_bad_timeout(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["probe", "--base-url", "http://x/v1", "--model", "m", "--timeout", "0"]) == 2
    assert "must be a number of seconds in (0, 86400], not 0" in capsys.readouterr().err


def test_analyze_body_mixed_line_endings() -> None:
    body = b": hi\r\ndata: {}\n\rdata:{}\r\r"
    analysis = analyze_body(body)
    assert analysis["line_endings"] == {"CRLF": 1, "LF": 1, "CR": 3}
    assert analysis["comment_count"] == 1
    assert analysis["data_with_space"] == 1
    assert analysis["data_without_space"] == 1


# -- against ``chunkwise serve``'s scenarios -----------------------------------------

QUIRKS: dict[str, dict[str, Any]] = {
    "text": {"line_endings": ["LF"], "data_spacing": ["with space"]},
    "quirks-keepalive": {"keep_alive_comments": lambda v: v["count"] > 0},
    "quirks-nospace": {"data_spacing": ["without space"]},
    "quirks-crlf": {"line_endings": ["CRLF"]},
    "quirks-whole-tools": {
        "tool_calls": lambda v: v["arguments"] == "whole call in one delta" and v["calls"] == 2
    },
    "quirks-null-index": {
        "tool_calls": lambda v: v["index"] == "null or missing" and v["arguments"] == "fragmented"
    },
    "quirks-usage-last-chunk": {
        "include_usage": lambda v: (
            v["verdict"] == "honoured" and v["positions"] == ["content chunk"]
        )
    },
    "tools": {"tool_calls": lambda v: v["index"] == "present" and v["id"] == "on first delta only"},
    "reasoning": {"reasoning_fields": ["reasoning_content"]},
}


@pytest.mark.parametrize("model", sorted(QUIRKS))
async def test_serve_scenarios(capsys: pytest.CaptureFixture[str], model: str) -> None:
    async with open_chat_server() as server:
        status, findings = await run_probe(capsys, server.base_url, model=model)
    assert status == 0, findings["problems"]
    for key, expected in QUIRKS[model].items():
        if callable(expected):
            assert expected(findings[key]), findings[key]
        else:
            assert findings[key] == expected


async def test_serve_error_scenarios(capsys: pytest.CaptureFixture[str]) -> None:
    async with open_chat_server() as server:
        status, findings = await run_probe(capsys, server.base_url, model="error")
    assert status == 1
    assert findings["problems"][0].startswith("text + include_usage: stream failed: ")
    options = ServerOptions(status=429)
    async with open_chat_server(options) as server:
        status, findings = await run_probe(capsys, server.base_url)
    assert status == 3  # refused whatever was asked: nothing learnt about streaming
    assert findings["status_code"] == 429


@pytest.mark.parametrize("api", ["chat", "responses", "completions"])
@pytest.mark.parametrize("slip", ["no /v1", "no key", "closed port"])
async def test_a_probe_that_cannot_start_says_why_once_and_exits_3(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, api: str, slip: str
) -> None:
    monkeypatch.delenv(KEY_VAR)
    options = ServerOptions(api_key="sk-required-0123456789" if slip == "no key" else None)
    async with open_chat_server(options) as server:
        url = server.base_url.removesuffix("/v1") if slip == "no /v1" else server.base_url
        if slip == "closed port":
            url = "http://127.0.0.1:1/v1"
        argv = ["probe", "--api", api, "--base-url", url, "--api-key-env", KEY_VAR]
        status, out, err = await run_main(capsys, *argv)
    assert status == 3
    assert out == ""  # no table of unknowns
    first, *rest = err.splitlines()
    message = {"no /v1": "HTTP 404: ", "no key": "HTTP 401: ", "closed port": "cannot connect"}
    assert first.startswith(f"chunkwise probe: error: {message[slip]}"), err
    hints = {
        "no /v1": [f"hint: try --base-url {server.base_url}"],
        "no key": [f"hint: no API key was sent, because ${KEY_VAR} is unset or empty "
                   "(set it, or name another variable with --api-key-env)"],
        "closed port": [],
    }  # fmt: skip
    assert rest == hints[slip]


@pytest.mark.parametrize("json_output", [False, True], ids=["table", "json"])
async def test_ctrl_c_shows_the_requests_that_ended(json_output: bool) -> None:
    async def first_answers(request: RecordedRequest, writer: ResponseWriter) -> None:
        if len(server.requests) > 1:
            await trio.sleep_forever()  # the tool request: never answered
        await writer.play(ScriptedResponse(body=sse(*TEXT, USAGE_CHUNK)))

    async with open_test_server(first_answers) as server:

        async def second_sent() -> None:
            while len(server.requests) < 2:  # noqa: ASYNC110 - the server's own record
                await trio.sleep(0.01)

        argv = ["probe", "--base-url", server.base_url, "--api-key-env", KEY_VAR]
        argv += ["--json"] * json_output
        status, out, err = await interrupt(argv, after=second_sent)
    assert (status, err) == (130, "")
    if json_output:
        document = json.loads(out)
        assert document["interrupted"] is True
        assert [r["stream_status"] for r in document["requests"]] == ["complete"]
    else:
        assert out == "requests (interrupted):\n  1. text + include_usage: HTTP 200, complete\n"

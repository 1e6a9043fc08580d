"""``chunkwise probe``: check an endpoint's streaming behaviour before relying on it.

Theory of operation
-------------------
At most three streamed requests are sent, one after the other:

1. a short text request with ``stream_options.include_usage``;
2. the same request without ``stream_options``, only when the first was
   refused with a 4xx other than 401/403/404/429 (so ``include_usage`` is the
   likely culprit; the server's exact message is kept);
3. a request offering one simple function tool, with ``tool_choice:
   "required"``, to see how tool calls are streamed.

Each response body is read through :func:`chunkwise._http.open_http_response`
and every read is fed both to a :class:`~chunkwise.ChatStreamParser` (what a
client reconstructs: status, finish reasons, usage, first-token time) and kept
for the wire-level analysis, which needs the raw bytes: keep-alive comments,
line endings, ``data:`` spacing, and the shape of each chunk's deltas (tool-call
``index`` and ``id`` habits, which reasoning field is used, where usage comes).

The findings are one JSON-compatible mapping (``--json`` prints it) and a
table.  Streaming counts as *broken* -- exit status 1 -- when the text request
(with or without ``include_usage``) does not give a 2xx ``text/event-stream``
whose stream completes with some output, or when the tool request streams but
does not complete.  A tool request that is refused is reported, not counted.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from .._apis import CHAT
from .._endpoint import Endpoint
from .._errors import ChunkwiseError
from .._events import ContentDelta, ReasoningDelta, ToolCallArgumentsDelta, ToolCallStarted
from .._parser import ChatStreamParser
from .._results import ChatResult
from .._sse import SSEDecoder
from ._common import (
    CommandsAction,
    Exchange,
    comments_cell,
    exchange_summary,
    list_cell,
    ms_cell,
    probe_exchange,
    render_probe_report,
    seconds,
    status_text,
    yes_no,
)
from ._options import (
    DEFAULT_KEY_VARIABLE,
    add_api_option,
    add_endpoint_options,
    add_model_option,
    run_probe_command,
)

__all__ = ["add_probe_command", "analyze_body", "probe", "render_table"]

DEFAULT_TIMEOUT = 60.0

TEXT_PROMPT = "Reply with one short sentence saying hello."
TOOL_PROMPT = "What is the weather in Paris? Use the get_weather tool."
WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city name"}},
            "required": ["city"],
        },
    },
}

# Statuses that say nothing about include_usage: retrying without it is pointless.
_NOT_ABOUT_THE_BODY = {401, 403, 404, 429}


def add_probe_command(
    commands: CommandsAction, responses: Callable[[argparse.Namespace], int]
) -> None:
    """Register ``chunkwise probe``; ``responses`` runs it for ``--api responses``.

    The root passes ``responses`` (``_probe_responses.run_responses_probe``)
    because commands never import each other.
    """
    probe_parser = commands.add_parser(
        "probe",
        help="check an endpoint's streaming behaviour before deployment",
        description=(
            "Send up to three short streamed requests (text with include_usage, the same "
            "without it if the first was refused, one with a tool) and report what the "
            "endpoint really does: content type, [DONE], include_usage, the tool-call "
            "streaming pattern, the reasoning field, keep-alive comments, line endings, "
            "data: spacing, finish reasons and latencies.  With --api responses: a text "
            "request, one cut by max_output_tokens and one with a function tool, reporting "
            "sequence_number/output_index/content_index, the finishing (.done) events, "
            "keep-alive events and comments, [DONE], how truncation is reported, error "
            "shapes and the final status."
        ),
        epilog=(
            "exit status: 0 streaming works, 1 streaming is broken, 2 bad usage, 130 interrupted"
        ),
    )
    add_endpoint_options(probe_parser)
    add_api_option(probe_parser)
    add_model_option(probe_parser)
    probe_parser.add_argument(
        "--timeout",
        metavar="S",
        type=seconds(0, 86400, allow_low=False),
        default=DEFAULT_TIMEOUT,
        help=f"time limit for each request, in seconds (default {DEFAULT_TIMEOUT:g})",
    )
    probe_parser.add_argument(
        "--json", action="store_true", help="print the findings as one JSON object"
    )

    def handler(args: argparse.Namespace) -> int:
        return responses(args) if args.api == "responses" else run_probe(args)

    probe_parser.set_defaults(handler=handler)


def run_probe(args: argparse.Namespace) -> int:
    """The ``probe`` command: returns the exit status."""
    return run_probe_command(args, probe, render_table)


# -- wire analysis ----------------------------------------------------------------

_LINE_END_RE = re.compile(rb"\r\n|\r|\n")


def analyze_body(body: bytes) -> dict[str, Any]:
    """What the raw bytes of one event-stream body show about the server's habits."""
    endings: Counter[str] = Counter()
    comments: list[str] = []
    comment_count = 0
    with_space = without_space = 0
    lines = []
    position = 0
    for match in _LINE_END_RE.finditer(body):
        ending = match.group()
        endings[{b"\r\n": "CRLF", b"\r": "CR", b"\n": "LF"}[ending]] += 1
        lines.append(body[position : match.start()])
        position = match.end()
    for line in lines:
        if line.startswith(b":"):
            comment_count += 1
            if len(comments) < 3:
                text = line.decode("utf-8", "replace")
                if text not in comments:
                    comments.append(text)
        elif line.startswith(b"data:"):
            if line.startswith(b"data: "):
                with_space += 1
            else:
                without_space += 1
    return {
        "line_endings": dict(endings),
        "comment_count": comment_count,
        "comment_examples": comments,
        "data_with_space": with_space,
        "data_without_space": without_space,
        **_analyze_chunks(body),
    }


def _analyze_chunks(body: bytes) -> dict[str, Any]:
    """The deltas' shapes: tool-call index/id/fragment habits, reasoning, usage."""
    decoder = SSEDecoder(legacy_error_field=True)
    try:
        events = decoder.feed(body) + decoder.end()
    except ChunkwiseError:
        events = []
    reasoning: set[str] = set()
    usage_positions: set[str] = set()
    # Per (choice, call): deltas, deltas with an id, argument-bearing deltas, one-delta calls.
    calls: dict[tuple[int, Any], dict[str, int]] = {}
    index_present = index_null = 0
    last_key: dict[int, Any] = {}
    done = False
    for event in events:
        if event.data == "[DONE]":
            done = True
            continue
        try:
            chunk = json.loads(event.data)
        except ValueError:
            continue
        if not isinstance(chunk, dict):
            continue
        choices = chunk.get("choices")
        choices = choices if isinstance(choices, list) else []
        if isinstance(chunk.get("usage"), dict):
            usage_positions.add("final chunk, empty choices" if not choices else "content chunk")
        x_groq = chunk.get("x_groq")
        if isinstance(x_groq, dict) and isinstance(x_groq.get("usage"), dict):
            usage_positions.add("x_groq.usage")
        for choice in choices:
            if not isinstance(choice, dict) or not isinstance(choice.get("delta"), dict):
                continue
            delta = choice["delta"]
            choice_index = choice.get("index", 0)
            for field in ("reasoning_content", "reasoning"):
                if isinstance(delta.get(field), str) and delta[field]:
                    reasoning.add(field)
            tool_calls = delta.get("tool_calls")
            if not isinstance(tool_calls, list):
                continue
            for item in tool_calls:
                if not isinstance(item, dict):
                    continue
                index = item.get("index")
                ident = item.get("id") or None
                if isinstance(index, int) and not isinstance(index, bool):
                    index_present += 1
                    key: Any = index
                else:
                    index_null += 1
                    previous = last_key.get(choice_index)
                    key = ("id", ident) if ident is not None else previous
                last_key[choice_index] = key
                stats = calls.setdefault(
                    (choice_index, key), {"deltas": 0, "with_id": 0, "argument_deltas": 0}
                )
                stats["deltas"] += 1
                stats["with_id"] += ident is not None
                function = item.get("function")
                arguments = function.get("arguments") if isinstance(function, dict) else None
                if isinstance(arguments, str) and arguments:
                    stats["argument_deltas"] += 1
    return {
        "done": done,
        "reasoning_fields": sorted(reasoning),
        "usage_positions": sorted(usage_positions),
        "tool_calls": _tool_pattern(list(calls.values()), index_present, index_null),
    }


def _tool_pattern(
    calls: list[dict[str, int]], index_present: int, index_null: int
) -> dict[str, Any] | None:
    if not calls:
        return None
    if all(c["argument_deltas"] <= 1 for c in calls):
        arguments = (
            "whole call in one delta"
            if all(c["deltas"] == 1 for c in calls)
            else ("arguments in one delta")
        )
    elif all(c["argument_deltas"] > 1 for c in calls):
        arguments = "fragmented"
    else:
        arguments = "mixed"
    if index_null == 0:
        index = "present"
    elif index_present == 0:
        index = "null or missing"
    else:
        index = "mixed"
    multi = [c for c in calls if c["deltas"] > 1]
    ids: str | None
    if not multi:
        ids = None  # one delta per call: nothing to repeat
    elif all(c["with_id"] == c["deltas"] for c in multi):
        ids = "repeated on every delta"
    elif all(c["with_id"] <= 1 for c in multi):
        ids = "on first delta only"
    else:
        ids = "mixed"
    return {
        "calls": len(calls),
        "arguments": arguments,
        "max_argument_deltas": max(c["argument_deltas"] for c in calls),
        "index": index,
        "id": ids,
    }


# -- the probe --------------------------------------------------------------------


def _text_request(model: str, include_usage: bool) -> dict[str, Any]:
    request: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": TEXT_PROMPT}],
    }
    if include_usage:
        request["stream_options"] = {"include_usage": True}
    return request


def _tool_request(model: str) -> dict[str, Any]:
    return {
        "model": model,
        "messages": [{"role": "user", "content": TOOL_PROMPT}],
        "tools": [WEATHER_TOOL],
        "tool_choice": "required",
    }


async def probe(
    endpoint: Endpoint,
    model: str,
    time_limit: float = DEFAULT_TIMEOUT,
    *,
    key_variable: str = DEFAULT_KEY_VARIABLE,
) -> dict[str, Any]:
    """Run the probe requests against ``endpoint`` and return the findings.

    ``key_variable`` names where the key came from, for the hint when none was sent.
    """
    exchanges: list[Exchange[ChatResult]] = []

    async def exchange(request: dict[str, Any], label: str) -> Exchange[ChatResult]:
        done = await probe_exchange(
            endpoint,
            request,
            label,
            time_limit,
            key_variable,
            path=CHAT.path,
            # No tools: validating arguments would need the optional jsonschema,
            # and the probe only looks at how calls are streamed.
            parser=ChatStreamParser(),
            first_token=(ContentDelta, ReasoningDelta, ToolCallStarted, ToolCallArgumentsDelta),
        )
        exchanges.append(done)
        return done

    first = await exchange(_text_request(model, True), "text + include_usage")
    text = first
    usage: dict[str, Any]
    if first.streamed:
        analysis = analyze_body(bytes(first.body))
        assert first.result is not None
        if first.result.usage is not None:
            verdict = "honoured"
        elif first.result.status == "complete":
            verdict = "ignored"
        else:
            verdict = "unknown"  # the stream ended before usage could come
        usage = {
            "verdict": verdict,
            "error": None,
            "positions": analysis["usage_positions"],
        }
    elif (
        first.status_code is not None
        and 400 <= first.status_code < 500
        and first.status_code not in _NOT_ABOUT_THE_BODY
    ):
        second = await exchange(_text_request(model, False), "text")
        text = second
        usage = {
            "verdict": "rejected" if second.streamed else "unknown",
            "error": first.error,
            "positions": [],
        }
    else:
        usage = {"verdict": "unknown", "error": None, "positions": []}
    tools: Exchange[ChatResult] | None = None
    if text.streamed:
        tools = await exchange(_tool_request(model), "tool call")
    return _findings(endpoint, model, exchanges, text, tools, usage)


def _findings(
    endpoint: Endpoint,
    model: str,
    exchanges: list[Exchange[ChatResult]],
    text: Exchange[ChatResult],
    tools: Exchange[ChatResult] | None,
    usage: dict[str, Any],
) -> dict[str, Any]:
    analyses = [analyze_body(bytes(e.body)) for e in exchanges if e.streamed]
    problems: list[str] = []
    text_result = text.result
    if not text.streamed:
        problems.append(f"{text.label}: {text.error or 'no response'}")
    elif text_result is not None:
        if text_result.status != "complete":
            problems.append(f"{text.label}: stream {status_text(text_result)}")
        if not any(c.content or c.reasoning or c.tool_calls for c in text_result.choices):
            problems.append(f"{text.label}: no content")
    if tools is not None and tools.result is not None and tools.result.status != "complete":
        problems.append(f"{tools.label}: stream {status_text(tools.result)}")

    endings: Counter[str] = Counter()
    data_spacing: set[str] = set()
    comment_count = 0
    comment_examples: list[str] = []
    reasoning: set[str] = set()
    for analysis in analyses:
        endings.update(analysis["line_endings"])
        if analysis["data_with_space"]:
            data_spacing.add("with space")
        if analysis["data_without_space"]:
            data_spacing.add("without space")
        comment_count += analysis["comment_count"]
        for example in analysis["comment_examples"]:
            if example not in comment_examples and len(comment_examples) < 3:
                comment_examples.append(example)
        reasoning.update(analysis["reasoning_fields"])
    finish_reasons: list[str] = []
    done_sent: bool | None = None
    for exchange in exchanges:
        if exchange.result is None:
            continue
        done_sent = bool(done_sent) or exchange.result.done_received
        for choice in exchange.result.choices:
            if choice.finish_reason is not None and choice.finish_reason not in finish_reasons:
                finish_reasons.append(choice.finish_reason)

    tool_findings: dict[str, Any]
    if tools is None:
        tool_findings = {"verdict": "not tried"}
    elif not tools.streamed:
        tool_findings = {"verdict": "rejected", "error": tools.error}
    else:
        pattern = analyze_body(bytes(tools.body))["tool_calls"]
        if pattern is None:
            tool_findings = {"verdict": "no tool call made"}
        else:
            tool_findings = {"verdict": "streamed", **pattern}

    # What only a streamed body shows is unknown (null) when no body streamed,
    # rather than an empty list that would read as "none seen".
    observed = bool(analyses)
    return {
        "base_url": endpoint.base_url,
        "model": model,
        "streaming_works": not problems,
        "problems": problems,
        "status_code": text.status_code,
        "content_type": text.content_type,
        "done_sent": done_sent,
        "include_usage": usage,
        "tool_calls": tool_findings,
        "reasoning_fields": sorted(reasoning) if observed else None,
        "keep_alive_comments": (
            {"count": comment_count, "examples": comment_examples} if observed else None
        ),
        "line_endings": sorted(endings) if observed else None,
        "data_spacing": sorted(data_spacing) if observed else None,
        "finish_reasons": finish_reasons if observed else None,
        "ttfb_ms": text.ttfb_ms,
        "first_token_ms": text.first_token_ms,
        "requests": [exchange_summary(e) for e in exchanges],
    }


# -- the table --------------------------------------------------------------------


def render_table(findings: Mapping[str, Any]) -> str:
    """The findings as an aligned two-column table, then the requests sent."""
    status_code = findings["status_code"]
    if status_code is None or not 200 <= status_code < 300:
        content_type = "unknown"  # no response, or an error whose head is not kept
    else:
        content_type = findings["content_type"] or "(none)"
    rows = [
        ("streaming works", "yes" if findings["streaming_works"] else "NO"),
        ("content type", content_type),
        ("[DONE] sent", yes_no(findings["done_sent"])),
        ("include_usage", _usage_cell(findings["include_usage"])),
        ("tool-call streaming", _tool_cell(findings["tool_calls"])),
        ("reasoning field", list_cell(findings["reasoning_fields"], "none")),
        ("keep-alive comments", comments_cell(findings["keep_alive_comments"])),
        ("line endings", list_cell(findings["line_endings"], "(none)")),
        ("data: spacing", list_cell(findings["data_spacing"], "(none)")),
        ("finish reasons", list_cell(findings["finish_reasons"], "none")),
        ("time to first byte", ms_cell(findings["ttfb_ms"])),
        ("time to first token", ms_cell(findings["first_token_ms"])),
    ]
    return render_probe_report(f"model {findings['model']}", rows, findings)


def _usage_cell(usage: Mapping[str, Any]) -> str:
    verdict = usage["verdict"]
    if verdict == "honoured" and usage["positions"]:
        return f"honoured (usage in {', '.join(usage['positions'])})"
    if verdict == "rejected":
        return f"rejected: {usage['error']}"
    return str(verdict)


def _tool_cell(tools: Mapping[str, Any]) -> str:
    verdict = tools["verdict"]
    if verdict == "rejected":
        return f"rejected: {tools['error']}"
    if verdict != "streamed":
        return str(verdict)
    arguments = tools["arguments"]
    if arguments == "fragmented":
        arguments = f"fragmented arguments (up to {tools['max_argument_deltas']} deltas)"
    parts = [arguments, f"index {tools['index']}"]
    if tools["id"] is not None:
        parts.append(f"id {tools['id']}")
    parts.append("1 call" if tools["calls"] == 1 else f"{tools['calls']} calls")
    return "; ".join(parts)

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

``--api completions`` (:func:`probe_completions`) makes the same probe of a
legacy ``/completions`` endpoint: requests 1 and 2 with a ``prompt``, and for
the third, since a completion has no tools, a long answer cut by
``max_tokens`` = :data:`CUT_AT`, to see how the cut is reported (OpenAI:
``finish_reason: "length"``).  ``--api responses`` and ``--api messages`` are
probed by :mod:`._probe_responses` and :mod:`._probe_messages`.  What differs between the two is one
:class:`Plan` (:data:`CHAT_PLAN`, :data:`COMPLETIONS_PLAN`); the requests, the
wire analysis and the findings are the same code.

Each response body is read through :func:`chunkwise._net.http.open_http_response`
and every read is fed both to a :class:`~chunkwise.chat.Parser` (what a
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

import attrs

from chunkwise import ChunkwiseError, Endpoint, SSEDecoder, chat, completions
from chunkwise.lowlevel import CHAT, COMPLETIONS, StreamParser

from ._commands import COMMANDS
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

__all__ = [
    "CHAT_PLAN",
    "COMPLETIONS_PLAN",
    "CUT_AT",
    "Plan",
    "add_probe_command",
    "analyze_body",
    "probe",
    "probe_completions",
    "render_table",
]

DEFAULT_TIMEOUT = 60.0

TEXT_PROMPT = "Reply with one short sentence saying hello."
TOOL_PROMPT = "What is the weather in Paris? Use the get_weather tool."
LONG_PROMPT = "Count from 1 to 200, the numbers separated by spaces:"
#: ``max_tokens`` of the completions probe's cut request.
CUT_AT = 16
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
    commands: CommandsAction,
    responses: Callable[[argparse.Namespace], int],
    messages: Callable[[argparse.Namespace], int],
) -> None:
    """Register ``chunkwise probe``; ``responses`` runs it for ``--api responses``,
    ``messages`` for ``--api messages``.

    The root passes them (``_probe_responses.run_responses_probe``,
    ``_probe_messages.run_messages_probe``) because commands never import each other.
    """
    probe_parser = commands.add_parser(
        "probe",
        help=COMMANDS["probe"],
        description=(
            "Send up to three short streamed requests (text with include_usage, the same "
            "without it if the first was refused, one with a tool) and report what the "
            "endpoint really does: content type, [DONE], include_usage, the tool-call "
            "streaming pattern, the reasoning field, keep-alive comments, line endings, "
            "data: spacing, finish reasons and latencies.  With --api responses: a text "
            "request, one cut by max_output_tokens and one with a function tool, reporting "
            "sequence_number/output_index/content_index, the finishing (.done) events, "
            "keep-alive events and comments, [DONE], how truncation is reported, error "
            "shapes and the final status.  With --api completions: the chat checks that "
            "apply to legacy completions (content type, [DONE], include_usage, "
            "keep-alive comments, line endings, data: spacing, finish reasons, latencies) "
            "and, instead of the tool request, one cut by max_tokens.  With --api messages: "
            "a text request, one cut by max_tokens and one with a tool, reporting the "
            "event: field, message_stop, ping events and comments, [DONE], where usage "
            "comes, the stop_reason of the cut, how tool_use input streams and error shapes."
        ),
        epilog=(
            "exit status: 0 streaming works, 1 streaming is broken, 2 bad usage, 3 the probe "
            "could not start (no answer, a wrong URL or key: said on stderr), 130 interrupted "
            "(the requests that ended are shown)"
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
        if args.api == "responses":
            return responses(args)
        if args.api == "messages":
            return messages(args)
        return run_probe_command(
            args, probe_completions if args.api == "completions" else probe, render_table
        )

    probe_parser.set_defaults(handler=handler)


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


Result = chat.Result | completions.Result


@attrs.frozen(kw_only=True)
class Plan:
    """What differs between the chat and the completions probe."""

    #: Where the requests go.
    path: str
    #: A parser for one answer (no tools: validating arguments would need the
    #: optional jsonschema, and the probe only looks at how calls are streamed).
    parser: Callable[[], StreamParser[Result]]
    #: The events whose first arrival is the first token.
    first_token: tuple[type[Any], ...]
    #: The body asking for :data:`TEXT_PROMPT` (its input) given the model.
    text: Callable[[str], dict[str, Any]]
    #: The third request, given the model and whether include_usage was
    #: honoured, and its label.
    last: Callable[[str, bool], dict[str, Any]]
    last_label: str
    #: The finding the third request gives: its key and how it is found.
    last_key: str
    last_finding: Callable[[Exchange[Any] | None], dict[str, Any]]
    #: Whether an answer holds some output.
    has_output: Callable[[Any], bool]


def _tool_finding(tools: Exchange[Any] | None) -> dict[str, Any]:
    if tools is None:
        return {"verdict": "not tried"}
    if not tools.streamed:
        return {"verdict": "rejected", "error": tools.error}
    pattern = analyze_body(bytes(tools.body))["tool_calls"]
    if pattern is None:
        return {"verdict": "no tool call made"}
    return {"verdict": "streamed", **pattern}


def _cut_finding(cut: Exchange[Any] | None) -> dict[str, Any]:
    """How an answer cut by ``max_tokens`` ends: its finish reason and usage."""
    if cut is None:
        return {"verdict": "not tried"}
    if not cut.streamed or cut.result is None:
        return {"verdict": "rejected", "error": cut.error}
    result = cut.result
    reasons = [c.finish_reason for c in result.choices if c.finish_reason]
    tokens = (result.usage or {}).get("completion_tokens")
    reason = ", ".join(dict.fromkeys(reasons)) or "none"
    if result.status != "complete":
        verdict = f"stream {status_text(result)}"
    elif isinstance(tokens, int) and tokens > CUT_AT:
        verdict = f"finish_reason {reason}, {tokens} completion_tokens: max_tokens was ignored"
    elif "length" in reasons:
        verdict = f"finish_reason {reason}"
    else:
        verdict = f"finish_reason {reason}: no cut reported"
    return {
        "verdict": verdict,
        "finish_reasons": reasons,
        "completion_tokens": tokens,
        "max_tokens": CUT_AT,
        "status": status_text(result),
    }


CHAT_PLAN = Plan(
    path=CHAT.path,
    parser=chat.Parser,
    first_token=(
        chat.TextDelta,
        chat.ReasoningDelta,
        chat.ToolCallStarted,
        chat.ToolCallArgumentsDelta,
    ),
    text=lambda model: {"model": model, "messages": [{"role": "user", "content": TEXT_PROMPT}]},
    last=lambda model, _usage: {
        "model": model,
        "messages": [{"role": "user", "content": TOOL_PROMPT}],
        "tools": [WEATHER_TOOL],
        "tool_choice": "required",
    },
    last_label="tool call",
    last_key="tool_calls",
    last_finding=_tool_finding,
    has_output=lambda result: any(c.content or c.reasoning or c.tool_calls for c in result.choices),
)
COMPLETIONS_PLAN = Plan(
    path=COMPLETIONS.path,
    parser=completions.Parser,
    first_token=(completions.TextDelta,),
    text=lambda model: {"model": model, "prompt": TEXT_PROMPT},
    # With usage when the server gives it, to tell an ignored max_tokens from a short answer.
    last=lambda model, usage: _with_usage(
        {"model": model, "prompt": LONG_PROMPT, "max_tokens": CUT_AT}, usage
    ),
    last_label=f"max_tokens {CUT_AT}",
    last_key="max_tokens_cut",
    last_finding=_cut_finding,
    has_output=lambda result: any(c.text for c in result.choices),
)


def _with_usage(request: dict[str, Any], include_usage: bool) -> dict[str, Any]:
    if include_usage:
        request["stream_options"] = {"include_usage": True}
    return request


async def probe_completions(
    endpoint: Endpoint,
    model: str,
    time_limit: float = DEFAULT_TIMEOUT,
    *,
    key_variable: str = DEFAULT_KEY_VARIABLE,
    sent: list[Exchange[Any]] | None = None,
) -> dict[str, Any]:
    """:func:`probe` of a legacy completions endpoint (:data:`COMPLETIONS_PLAN`)."""
    return await probe(
        endpoint, model, time_limit, key_variable=key_variable, plan=COMPLETIONS_PLAN, sent=sent
    )


async def probe(
    endpoint: Endpoint,
    model: str,
    time_limit: float = DEFAULT_TIMEOUT,
    *,
    key_variable: str = DEFAULT_KEY_VARIABLE,
    plan: Plan = CHAT_PLAN,
    sent: list[Exchange[Any]] | None = None,
) -> dict[str, Any]:
    """Run the probe requests against ``endpoint`` and return the findings.

    ``key_variable`` names where the key came from, for the hint when none was sent;
    ``sent`` gets each request as it ends (what an interrupted probe can still show).
    """
    exchanges: list[Exchange[Result]] = []

    async def exchange(request: dict[str, Any], label: str) -> Exchange[Result]:
        done = await probe_exchange(
            endpoint,
            request,
            label,
            time_limit,
            key_variable,
            path=plan.path,
            parser=plan.parser(),
            first_token=plan.first_token,
        )
        exchanges.append(done)
        if sent is not None:
            sent.append(done)
        return done

    first = await exchange(_with_usage(plan.text(model), True), "text + include_usage")
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
        second = await exchange(_with_usage(plan.text(model), False), "text")
        text = second
        usage = {
            "verdict": "rejected" if second.streamed else "unknown",
            "error": first.error,
            "positions": [],
        }
    else:
        usage = {"verdict": "unknown", "error": None, "positions": []}
    last: Exchange[Result] | None = None
    if text.streamed:
        last = await exchange(plan.last(model, usage["verdict"] == "honoured"), plan.last_label)
    return _findings(endpoint, model, plan, exchanges, text, last, usage)


def _findings(
    endpoint: Endpoint,
    model: str,
    plan: Plan,
    exchanges: list[Exchange[Result]],
    text: Exchange[Result],
    last: Exchange[Result] | None,
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
        if not plan.has_output(text_result):
            problems.append(f"{text.label}: no content")
    if last is not None and last.result is not None and last.result.status != "complete":
        problems.append(f"{last.label}: stream {status_text(last.result)}")

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
        plan.last_key: plan.last_finding(last),
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
        *_last_rows(findings),
        ("keep-alive comments", comments_cell(findings["keep_alive_comments"])),
        ("line endings", list_cell(findings["line_endings"], "(none)")),
        ("data: spacing", list_cell(findings["data_spacing"], "(none)")),
        ("finish reasons", list_cell(findings["finish_reasons"], "none")),
        ("time to first byte", ms_cell(findings["ttfb_ms"])),
        ("time to first token", ms_cell(findings["first_token_ms"])),
    ]
    return render_probe_report(f"model {findings['model']}", rows, findings)


def _last_rows(findings: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Chat's tool-call and reasoning rows, or completions' max_tokens cut."""
    if "max_tokens_cut" in findings:
        cut = findings["max_tokens_cut"]
        text = f"rejected: {cut['error']}" if cut["verdict"] == "rejected" else cut["verdict"]
        return [(f"max_tokens {CUT_AT} cut", str(text))]
    return [
        ("tool-call streaming", _tool_cell(findings["tool_calls"])),
        ("reasoning field", list_cell(findings["reasoning_fields"], "none")),
    ]


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

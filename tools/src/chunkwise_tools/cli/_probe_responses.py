"""``chunkwise probe --api responses``: what a server's Responses API stream really does.

Theory of operation
-------------------
At most three streamed ``POST /responses`` requests are sent, one after the
other, each through the one probe request,
:func:`~._common.probe_exchange`, read by a
:class:`~chunkwise.responses.Parser` (the final status per chunkwise):

1. a short text request;
2. a request asking for a long answer under ``max_output_tokens`` =
   :data:`TRUNCATE_AT`, to see how truncation is reported: OpenAI ends it
   ``response.incomplete`` (``max_output_tokens``), llama.cpp
   ``response.completed`` with the usage at the limit;
3. a request offering one function tool with ``tool_choice: "required"``.

The second and third are sent only when the first streamed.  The wire
analysis, :func:`analyze_responses_body`, is a pure function of one raw body:
which event types came, whether ``sequence_number``, ``output_index`` and
``content_index`` are present, keep-alive events and SSE comments, ``[DONE]``,
the terminal event and the shapes of any error.  Streaming counts as
*broken* (exit status 1) when the text request does not give a 2xx event
stream that completes with some output.

This module is the ``--api responses`` half of ``probe``: ``probe``'s module
calls :func:`run_responses_probe`, which the command-line root hands it
(commands never import each other).
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from chunkwise import ChunkwiseError, Endpoint, SSEDecoder, responses
from chunkwise.lowlevel import RESPONSES

from ._common import (
    Exchange,
    comments_cell,
    exchange_summary,
    list_cell,
    ms_cell,
    probe_exchange,
    render_probe_report,
    status_text,
    yes_no,
)
from ._options import run_probe_command

__all__ = ["TRUNCATE_AT", "analyze_responses_body", "render_responses_table", "run_responses_probe"]

TEXT_PROMPT = "Reply with one short sentence saying hello."
LONG_PROMPT = "Count from 1 to 200, the numbers separated by spaces."
TOOL_PROMPT = "What is the weather in Paris? Use the get_weather tool."
#: ``max_output_tokens`` of the truncation request (OpenAI's smallest allowed value).
TRUNCATE_AT = 16
WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "name": "get_weather",
    "description": "Get the current weather in a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string", "description": "The city name"}},
        "required": ["city"],
    },
}

_FIRST_TOKEN = (
    responses.TextDelta,
    responses.RefusalDelta,
    responses.ReasoningSummaryDelta,
    responses.ReasoningDelta,
    responses.ToolCallStarted,
)
_TERMINAL = ("response.completed", "response.incomplete", "response.failed")
_KEEPALIVE = ("keepalive", "response.keep_alive")
# Events addressed to an output item (so they may carry output_index) and to a part.
_ITEM_PREFIXES: tuple[str, ...] = (
    "response.output_item.",
    "response.content_part.",
    "response.output_text.",
    "response.refusal.",
    "response.function_call_arguments.",
    "response.reasoning_text.",
    "response.reasoning_summary_text.",
)
_PART_PREFIXES: tuple[str, ...] = (
    "response.content_part.",
    "response.output_text.",
    "response.refusal.",
    "response.reasoning_text.",
)
#: The finishing events a client may rely on, each with the event that makes it due.
_DUE_AFTER = {
    "response.content_part.added": "response.output_text.delta",
    "response.output_text.done": "response.output_text.delta",
    "response.content_part.done": "response.output_text.delta",
    "response.output_item.done": "response.output_item.added",
    "response.function_call_arguments.done": "item function_call",
}


# -- wire analysis ----------------------------------------------------------------

_COMMENT_RE = re.compile(rb"^:([^\r\n]*)", re.MULTILINE)


def analyze_responses_body(body: bytes) -> dict[str, Any]:
    """What the raw bytes of one Responses event-stream body show about the server's habits.

    ``types`` are the event types in order of first arrival (plus ``item
    <type>`` for each output item type added); each ``*_index`` and
    ``sequence_number`` count is ``[with, without]`` over the events that
    could carry it.
    """
    comments = [m.group(1).decode("utf-8", "replace").strip() for m in _COMMENT_RE.finditer(body)]
    decoder = SSEDecoder(legacy_error_field=True)
    try:
        events = decoder.feed(body) + decoder.end()
    except ChunkwiseError:
        events = []
    types: list[str] = []
    counts = {"sequence_number": [0, 0], "output_index": [0, 0], "content_index": [0, 0]}
    keepalives = 0
    done = False
    error_shapes: list[str] = []
    terminal: dict[str, Any] | None = None
    for event in events:
        if event.data == "[DONE]":
            done = True
            continue
        try:
            data = json.loads(event.data)
        except (ValueError, RecursionError):
            continue
        if not isinstance(data, dict):
            continue
        value = data.get("type")
        etype = value if isinstance(value, str) else event.event
        _add(types, etype)
        if etype in _KEEPALIVE:
            keepalives += 1
        if "type" in data:
            counts["sequence_number"]["sequence_number" not in data] += 1
        if etype.startswith(_ITEM_PREFIXES):
            counts["output_index"]["output_index" not in data] += 1
        if etype.startswith(_PART_PREFIXES):
            counts["content_index"]["content_index" not in data] += 1
        item = data.get("item")
        if etype == "response.output_item.added" and isinstance(item, dict):
            _add(types, f"item {item.get('type')}")
        shape = _error_shape(etype, data)
        if shape is not None:
            _add(error_shapes, shape)
        if etype in _TERMINAL:
            terminal = _terminal(etype, data)
    return {
        "types": types,
        **counts,
        "keepalive_events": keepalives,
        "comment_count": len(comments),
        "comment_examples": list(dict.fromkeys(comments))[:3],
        "done": done,
        "error_shapes": error_shapes,
        "terminal": terminal,
    }


def _add(values: list[str], value: str) -> None:
    if value not in values:
        values.append(value)


def _error_shape(etype: str, data: Mapping[str, Any]) -> str | None:
    if etype == "error":
        nested = isinstance(data.get("error"), dict)
        return "error event, nested" if nested else "error event, flat"
    if "type" not in data and isinstance(data.get("error"), dict):
        return "bare {error} data"
    response = data.get("response")
    if etype in _TERMINAL and isinstance(response, dict) and response.get("error"):
        return f"{etype} with response.error"
    return None


def _terminal(etype: str, data: Mapping[str, Any]) -> dict[str, Any]:
    response = data.get("response")
    response = response if isinstance(response, dict) else {}
    details = response.get("incomplete_details")
    usage = response.get("usage")
    return {
        "event": etype,
        "status": response.get("status"),
        "incomplete_reason": details.get("reason") if isinstance(details, dict) else None,
        "output_tokens": usage.get("output_tokens") if isinstance(usage, dict) else None,
    }


# -- the probe --------------------------------------------------------------------


def run_responses_probe(args: argparse.Namespace) -> int:
    """``chunkwise probe --api responses``: returns the exit status."""
    return run_probe_command(args, probe_responses, render_responses_table)


async def probe_responses(
    endpoint: Endpoint,
    model: str,
    time_limit: float,
    *,
    key_variable: str,
    sent: list[Exchange[Any]] | None = None,
) -> dict[str, Any]:
    """Run the Responses probe requests against ``endpoint`` and return the findings.

    ``sent`` gets each request as it ends (what an interrupted probe can still show).
    """

    async def exchange(request: dict[str, Any], label: str) -> Exchange[responses.Result]:
        done = await probe_exchange(
            endpoint,
            {"model": model, **request},
            label,
            time_limit,
            key_variable,
            path=RESPONSES.path,
            # No tools: the probe looks at how calls are streamed, not at their schema.
            parser=responses.Parser(),
            first_token=_FIRST_TOKEN,
        )
        if sent is not None:
            sent.append(done)
        return done

    text = await exchange({"input": TEXT_PROMPT}, "text")
    truncated = tools = None
    if text.streamed:
        truncated = await exchange(
            {"input": LONG_PROMPT, "max_output_tokens": TRUNCATE_AT},
            f"max_output_tokens {TRUNCATE_AT}",
        )
        tools = await exchange(
            {"input": TOOL_PROMPT, "tools": [WEATHER_TOOL], "tool_choice": "required"},
            "function call",
        )
    exchanges = [e for e in (text, truncated, tools) if e is not None]
    return responses_findings(endpoint.base_url, model, exchanges, text, truncated, tools)


def responses_findings(
    base_url: str,
    model: str,
    exchanges: Sequence[Exchange[responses.Result]],
    text: Exchange[responses.Result],
    truncated: Exchange[responses.Result] | None,
    tools: Exchange[responses.Result] | None,
) -> dict[str, Any]:
    """The findings of the exchanges (pure: what ``--json`` prints)."""
    analyses = [analyze_responses_body(bytes(e.body)) for e in exchanges if e.streamed]
    problems: list[str] = []
    if text.result is None:
        problems.append(f"{text.label}: {text.error or 'no response'}")
    else:
        if text.result.status != "complete":
            problems.append(f"{text.label}: stream {status_text(text.result)}")
        if not text.result.output:
            problems.append(f"{text.label}: no output")
    observed = bool(analyses)
    types = [t for a in analyses for t in a["types"]]
    sent = [name for name in _DUE_AFTER if name in types]
    not_sent = [name for name, due in _DUE_AFTER.items() if name not in types and due in types]
    comments = [c for a in analyses for c in a["comment_examples"]]
    return {
        "api": "responses",
        "base_url": base_url,
        "model": model,
        "streaming_works": not problems,
        "problems": problems,
        "status_code": text.status_code,
        "content_type": text.content_type,
        "sequence_number": _presence(analyses, "sequence_number") if observed else None,
        "output_index": _presence(analyses, "output_index") if observed else None,
        "content_index": _presence(analyses, "content_index") if observed else None,
        "finishing_events": {"sent": sent, "not_sent": not_sent} if observed else None,
        "keepalive_events": sum(a["keepalive_events"] for a in analyses) if observed else None,
        "keep_alive_comments": (
            {
                "count": sum(a["comment_count"] for a in analyses),
                "examples": list(dict.fromkeys(comments))[:3],
            }
            if observed
            else None
        ),
        "done_sent": any(a["done"] for a in analyses) if observed else None,
        "truncation": _truncation(truncated),
        "error_shapes": sorted({s for a in analyses for s in a["error_shapes"]})
        if observed
        else None,
        "function_calls": _function_calls(tools),
        "final_status": None if text.result is None else status_text(text.result),
        "ttfb_ms": text.ttfb_ms,
        "first_token_ms": text.first_token_ms,
        "requests": [exchange_summary(e) for e in exchanges],
    }


def _presence(analyses: list[dict[str, Any]], key: str) -> str:
    with_it = sum(a[key][0] for a in analyses)
    without = sum(a[key][1] for a in analyses)
    if not with_it and not without:
        return "no event to carry it"
    return "present" if not without else "missing" if not with_it else "sometimes missing"


def _truncation(exchange: Exchange[responses.Result] | None) -> dict[str, Any]:
    if exchange is None:
        return {"verdict": "not tried"}
    if exchange.result is None:
        return {"verdict": "rejected", "error": exchange.error}
    terminal = analyze_responses_body(bytes(exchange.body))["terminal"]
    result = exchange.result
    tokens = (result.usage or {}).get("output_tokens")
    if terminal is None:
        verdict = "no terminal event"
    elif result.response_status == "incomplete":
        verdict = f"{terminal['event']}, status incomplete ({result.incomplete_reason})"
    elif result.response_status == "completed" and tokens == TRUNCATE_AT:
        verdict = f"{terminal['event']}, status completed, output_tokens at the limit"
    elif result.response_status == "completed" and isinstance(tokens, int):
        # Either way, how this server reports a cut answer was not seen.
        if tokens > TRUNCATE_AT:
            verdict = (
                f"{terminal['event']}, status completed, {tokens} output_tokens: "
                "max_output_tokens was ignored"
            )
        else:
            verdict = (
                f"{terminal['event']}, status completed, {tokens} output_tokens: "
                "finished under the limit, nothing was cut"
            )
    else:
        verdict = f"{terminal['event']}, status {result.response_status}"
    return {
        "verdict": verdict,
        "terminal_event": None if terminal is None else terminal["event"],
        "response_status": result.response_status,
        "incomplete_reason": result.incomplete_reason,
        "output_tokens": tokens,
        "max_output_tokens": TRUNCATE_AT,
        "status": status_text(result),
    }


def _function_calls(exchange: Exchange[responses.Result] | None) -> dict[str, Any]:
    if exchange is None:
        return {"verdict": "not tried"}
    if exchange.result is None:
        return {"verdict": "rejected", "error": exchange.error}
    calls = exchange.result.function_calls
    if not calls:
        return {"verdict": "no function call made", "status": status_text(exchange.result)}
    types = analyze_responses_body(bytes(exchange.body))["types"]
    return {
        "verdict": "streamed",
        "calls": len(calls),
        "call_id": all(call.call_id for call in calls),
        "arguments_deltas": "response.function_call_arguments.delta" in types,
        "arguments_done": "response.function_call_arguments.done" in types,
        "status": status_text(exchange.result),
    }


# -- the table --------------------------------------------------------------------


def render_responses_table(findings: Mapping[str, Any]) -> str:
    """The findings as an aligned two-column table, then the requests sent."""
    status_code = findings["status_code"]
    ok = status_code is not None and 200 <= status_code < 300
    finishing = findings["finishing_events"]
    rows = [
        ("streaming works", "yes" if findings["streaming_works"] else "NO"),
        ("content type", (findings["content_type"] or "(none)") if ok else "unknown"),
        ("sequence_number", findings["sequence_number"] or "unknown"),
        ("output_index", findings["output_index"] or "unknown"),
        ("content_index", findings["content_index"] or "unknown"),
        ("finishing events", _finishing_cell(finishing)),
        ("keep-alive events", _count(findings["keepalive_events"])),
        ("keep-alive comments", comments_cell(findings["keep_alive_comments"])),
        ("[DONE] sent", yes_no(findings["done_sent"])),
        ("truncation", _verdict_cell(findings["truncation"])),
        ("function calls", _calls_cell(findings["function_calls"])),
        ("error shapes", list_cell(findings["error_shapes"], "none seen")),
        ("final status", findings["final_status"] or "unknown"),
        ("time to first byte", ms_cell(findings["ttfb_ms"])),
        ("time to first token", ms_cell(findings["first_token_ms"])),
    ]
    return render_probe_report(f"model {findings['model']}, Responses API", rows, findings)


def _short(name: str) -> str:
    return name.removeprefix("response.")


def _finishing_cell(finishing: Mapping[str, Any] | None) -> str:
    if finishing is None:
        return "unknown"
    parts = []
    if finishing["sent"]:
        parts.append("sent " + ", ".join(map(_short, finishing["sent"])))
    if finishing["not_sent"]:
        parts.append("NOT sent " + ", ".join(map(_short, finishing["not_sent"])))
    return "; ".join(parts) or "none due"


def _count(value: int | None) -> str:
    return "unknown" if value is None else str(value) if value else "none"


def _verdict_cell(finding: Mapping[str, Any]) -> str:
    if finding["verdict"] == "rejected":
        return f"rejected: {finding['error']}"
    return str(finding["verdict"])


def _calls_cell(calls: Mapping[str, Any]) -> str:
    if calls["verdict"] != "streamed":
        return _verdict_cell(calls)
    parts = [
        "1 call" if calls["calls"] == 1 else f"{calls['calls']} calls",
        "call_id present" if calls["call_id"] else "call_id MISSING",
        "arguments in deltas" if calls["arguments_deltas"] else "no argument deltas",
        "arguments.done sent" if calls["arguments_done"] else "arguments.done NOT sent",
        calls["status"],
    ]
    return "; ".join(parts)

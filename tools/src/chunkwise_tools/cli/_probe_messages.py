"""``chunkwise probe --api messages``: what a server's Anthropic Messages stream really does.

Theory of operation
-------------------
At most three streamed ``POST /messages`` requests are sent, one after the
other, each through the one probe request, :func:`~._common.probe_exchange`
(the key as ``x-api-key``), read by a :class:`~chunkwise.messages.Parser`:

1. a short text request (``max_tokens`` :data:`TEXT_MAX_TOKENS`);
2. a request asking for a long answer under ``max_tokens`` = :data:`CUT_AT`,
   to see how the cut is reported (Anthropic: ``stop_reason: "max_tokens"``);
3. a request offering one tool with ``tool_choice: {"type": "any"}``, to see
   how ``tool_use`` blocks stream (``input_json_delta`` fragments).

The second and third are sent only when the first streamed.  The wire
analysis, :func:`analyze_messages_body`, is a pure function of one raw body:
the event types, whether every event's ``event:`` field names its data's
``type`` (Anthropic's SDKs dispatch on it), ``ping`` events and SSE comments,
``[DONE]`` (not Anthropic's), where usage came (``message_start``,
``message_delta``), whether ``message_stop`` ended the body, and the shapes
of any error.  Streaming counts as *broken* (exit status 1) when the text
request does not give a 2xx event stream that completes with some output.

Chat's checks that do not apply are not made: ``include_usage`` (a message
always reports usage), the reasoning field (thinking is a block type, and
asking for it needs a budget a server may refuse), tool-call ``index`` and
``id`` habits (a ``tool_use`` block carries both once, at its start), line
endings and ``data:`` spacing.

This module is the ``--api messages`` half of ``probe``: ``probe``'s module
calls :func:`run_messages_probe`, which the command-line root hands it
(commands never import each other).
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from chunkwise import ChunkwiseError, Endpoint, SSEDecoder, messages
from chunkwise.lowlevel import MESSAGES

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

__all__ = ["CUT_AT", "analyze_messages_body", "render_messages_table", "run_messages_probe"]

TEXT_PROMPT = "Reply with one short sentence saying hello."
LONG_PROMPT = "Count from 1 to 200, the numbers separated by spaces."
TOOL_PROMPT = "What is the weather in Paris? Use the get_weather tool."
TEXT_MAX_TOKENS = 256
#: ``max_tokens`` of the cut request.
CUT_AT = 16
WEATHER_TOOL: dict[str, Any] = {
    "name": "get_weather",
    "description": "Get the current weather in a city.",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string", "description": "The city name"}},
        "required": ["city"],
    },
}

_FIRST_TOKEN = (messages.TextDelta, messages.ThinkingDelta, messages.ToolCallStarted)
_COMMENT_RE = re.compile(rb"^:([^\r\n]*)", re.MULTILINE)


# -- wire analysis ----------------------------------------------------------------


def analyze_messages_body(body: bytes) -> dict[str, Any]:
    """What the raw bytes of one Messages event-stream body show about the server's habits.

    ``types`` are the data types in order of first arrival; ``event_field`` is
    ``[naming the type, missing, naming another]`` over the JSON events.
    """
    comments = [m.group(1).decode("utf-8", "replace").strip() for m in _COMMENT_RE.finditer(body)]
    decoder = SSEDecoder(legacy_error_field=True)
    try:
        events = decoder.feed(body) + decoder.end()
    except ChunkwiseError:
        events = []
    types: list[str] = []
    event_field = [0, 0, 0]
    pings = input_deltas = 0
    done = False
    usage_in: list[str] = []
    error_shapes: list[str] = []
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
        etype = data.get("type")
        etype = etype if isinstance(etype, str) else "(no type)"
        _add(types, etype)
        event_field[0 if event.event == etype else 1 if event.event == "message" else 2] += 1
        pings += etype == "ping"
        delta = data.get("delta")
        input_deltas += isinstance(delta, dict) and delta.get("type") == "input_json_delta"
        message = data.get("message")
        if isinstance(data.get("usage"), dict) or (
            isinstance(message, dict) and isinstance(message.get("usage"), dict)
        ):
            _add(usage_in, etype)
        if etype == "error" or "error" in data:
            nested = isinstance(data.get("error"), dict)
            _add(error_shapes, f"{etype} event, {'nested' if nested else 'flat'}")
    return {
        "types": types,
        "event_field": event_field,
        "ping_events": pings,
        "input_json_deltas": input_deltas,
        "comment_count": len(comments),
        "comment_examples": list(dict.fromkeys(comments))[:3],
        "done": done,
        "usage_in": usage_in,
        "error_shapes": error_shapes,
    }


def _add(values: list[str], value: str) -> None:
    if value not in values:
        values.append(value)


# -- the probe --------------------------------------------------------------------


def run_messages_probe(args: argparse.Namespace) -> int:
    """``chunkwise probe --api messages``: returns the exit status."""
    return run_probe_command(args, probe_messages, render_messages_table)


async def probe_messages(
    endpoint: Endpoint,
    model: str,
    time_limit: float,
    *,
    key_variable: str,
    sent: list[Exchange[Any]] | None = None,
) -> dict[str, Any]:
    """Run the Messages probe requests against ``endpoint`` and return the findings.

    ``sent`` gets each request as it ends (what an interrupted probe can still show).
    """

    async def exchange(
        prompt: str, max_tokens: int, label: str, **extra: Any
    ) -> Exchange[messages.Result]:
        request = {
            "model": model,
            "max_tokens": max_tokens,
            "messages": [{"role": "user", "content": prompt}],
            **extra,
        }
        done = await probe_exchange(
            endpoint,
            request,
            label,
            time_limit,
            key_variable,
            path=MESSAGES.path,
            # No tools: the probe looks at how calls are streamed, not at their schema.
            parser=messages.Parser(),
            first_token=_FIRST_TOKEN,
            auth=MESSAGES.auth,
        )
        if sent is not None:
            sent.append(done)
        return done

    text = await exchange(TEXT_PROMPT, TEXT_MAX_TOKENS, "text")
    cut = tools = None
    if text.streamed:
        cut = await exchange(LONG_PROMPT, CUT_AT, f"max_tokens {CUT_AT}")
        tools = await exchange(
            TOOL_PROMPT,
            TEXT_MAX_TOKENS,
            "tool use",
            tools=[WEATHER_TOOL],
            tool_choice={"type": "any"},
        )
    exchanges = [e for e in (text, cut, tools) if e is not None]
    return messages_findings(endpoint.base_url, model, exchanges, text, cut, tools)


def messages_findings(
    base_url: str,
    model: str,
    exchanges: Sequence[Exchange[messages.Result]],
    text: Exchange[messages.Result],
    cut: Exchange[messages.Result] | None,
    tools: Exchange[messages.Result] | None,
) -> dict[str, Any]:
    """The findings of the exchanges (pure: what ``--json`` prints)."""
    analyses = [analyze_messages_body(bytes(e.body)) for e in exchanges if e.streamed]
    problems: list[str] = []
    if text.result is None:
        problems.append(f"{text.label}: {text.error or 'no response'}")
    else:
        if text.result.status != "complete":
            problems.append(f"{text.label}: stream {status_text(text.result)}")
        if not (text.result.text or text.result.thinking or text.result.tool_calls):
            problems.append(f"{text.label}: no content")
    observed = bool(analyses)
    comments = [c for a in analyses for c in a["comment_examples"]]
    field = [sum(a["event_field"][i] for a in analyses) for i in range(3)]
    return {
        "api": "messages",
        "base_url": base_url,
        "model": model,
        "streaming_works": not problems,
        "problems": problems,
        "status_code": text.status_code,
        "content_type": text.content_type,
        "event_field": _event_field(field) if observed else None,
        "message_stop": (all("message_stop" in a["types"] for a in analyses) if observed else None),
        "ping_events": sum(a["ping_events"] for a in analyses) if observed else None,
        "keep_alive_comments": (
            {
                "count": sum(a["comment_count"] for a in analyses),
                "examples": list(dict.fromkeys(comments))[:3],
            }
            if observed
            else None
        ),
        "done_sent": any(a["done"] for a in analyses) if observed else None,
        "usage_in": (
            list(dict.fromkeys(t for a in analyses for t in a["usage_in"])) if observed else None
        ),
        "max_tokens_cut": _cut(cut),
        "tool_use": _tool_use(tools),
        "error_shapes": (
            sorted({s for a in analyses for s in a["error_shapes"]}) if observed else None
        ),
        "stop_reason": None if text.result is None else text.result.stop_reason,
        "final_status": None if text.result is None else status_text(text.result),
        "ttfb_ms": text.ttfb_ms,
        "first_token_ms": text.first_token_ms,
        "requests": [exchange_summary(e) for e in exchanges],
    }


def _event_field(counts: list[int]) -> str:
    named, missing, other = counts
    if not (missing or other):
        return "names the data type" if named else "no event to carry it"
    parts = [f"{n} {what}" for n, what in ((missing, "missing"), (other, "naming another type"))]
    return "; ".join(part for part in parts if not part.startswith("0 "))


def _cut(exchange: Exchange[messages.Result] | None) -> dict[str, Any]:
    """How an answer cut by ``max_tokens`` ends: its stop reason and output tokens."""
    if exchange is None:
        return {"verdict": "not tried"}
    if exchange.result is None:
        return {"verdict": "rejected", "error": exchange.error}
    result = exchange.result
    tokens = (result.usage or {}).get("output_tokens")
    reason = result.stop_reason or "none"
    if result.status != "complete":
        verdict = f"stream {status_text(result)}"
    elif isinstance(tokens, int) and tokens > CUT_AT:
        verdict = f"stop_reason {reason}, {tokens} output_tokens: max_tokens was ignored"
    elif reason == "max_tokens":
        verdict = "stop_reason max_tokens"
    else:
        verdict = f"stop_reason {reason}: no cut reported"
    return {
        "verdict": verdict,
        "stop_reason": result.stop_reason,
        "output_tokens": tokens,
        "max_tokens": CUT_AT,
        "status": status_text(result),
    }


def _tool_use(exchange: Exchange[messages.Result] | None) -> dict[str, Any]:
    if exchange is None:
        return {"verdict": "not tried"}
    if exchange.result is None:
        return {"verdict": "rejected", "error": exchange.error}
    calls = exchange.result.tool_calls
    if not calls:
        return {"verdict": "no tool_use block", "status": status_text(exchange.result)}
    deltas = analyze_messages_body(bytes(exchange.body))["input_json_deltas"]
    return {
        "verdict": "streamed",
        "calls": len(calls),
        "input_json_deltas": deltas,
        "stop_reason": exchange.result.stop_reason,
        "status": status_text(exchange.result),
    }


# -- the table --------------------------------------------------------------------


def render_messages_table(findings: Mapping[str, Any]) -> str:
    """The findings as an aligned two-column table, then the requests sent."""
    status_code = findings["status_code"]
    ok = status_code is not None and 200 <= status_code < 300
    pings = findings["ping_events"]
    rows = [
        ("streaming works", "yes" if findings["streaming_works"] else "NO"),
        ("content type", (findings["content_type"] or "(none)") if ok else "unknown"),
        ("event: field", findings["event_field"] or "unknown"),
        ("message_stop sent", yes_no(findings["message_stop"])),
        ("ping events", "unknown" if pings is None else str(pings) if pings else "none"),
        ("keep-alive comments", comments_cell(findings["keep_alive_comments"])),
        ("[DONE] sent", yes_no(findings["done_sent"])),
        ("usage in", list_cell(findings["usage_in"], "none")),
        (f"max_tokens {CUT_AT} cut", _verdict_cell(findings["max_tokens_cut"])),
        ("tool_use streaming", _tool_cell(findings["tool_use"])),
        ("error shapes", list_cell(findings["error_shapes"], "none seen")),
        ("stop_reason", findings["stop_reason"] or "none"),
        ("final status", findings["final_status"] or "unknown"),
        ("time to first byte", ms_cell(findings["ttfb_ms"])),
        ("time to first token", ms_cell(findings["first_token_ms"])),
    ]
    return render_probe_report(f"model {findings['model']}, Messages API", rows, findings)


def _verdict_cell(finding: Mapping[str, Any]) -> str:
    if finding["verdict"] == "rejected":
        return f"rejected: {finding['error']}"
    return str(finding["verdict"])


def _tool_cell(tools: Mapping[str, Any]) -> str:
    if tools["verdict"] != "streamed":
        return _verdict_cell(tools)
    deltas = tools["input_json_deltas"]
    return "; ".join(
        [
            "1 call" if tools["calls"] == 1 else f"{tools['calls']} calls",
            f"input in {deltas} input_json_delta" + ("" if deltas == 1 else "s"),
            f"stop_reason {tools['stop_reason'] or 'none'}",
            tools["status"],
        ]
    )

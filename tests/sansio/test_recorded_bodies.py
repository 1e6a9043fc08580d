"""Real bodies recorded by other projects (``tests/data/recorded``), at every split.

Each body is checked for what its source's own test asserts
(``manifest.json``'s ``asserts``), as far as chunkwise surfaces it.  A value
chunkwise does not surface yet (issue 32: hosted-tool progress, custom tool
input, partial images, a Responses result's ``service_tier``) is listed in
``NOT_SURFACED_YET``, and a key no test knows fails.
Every body also goes through the raw family: its raw events are what the
WHATWG decoder dispatches, whatever the split.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chunkwise
from chunkwise import RawEvent, SSEDecoder
from helpers.reads import split_at

ROOT = Path(__file__).resolve().parent.parent / "data" / "recorded"
MANIFEST: list[dict[str, Any]] = json.loads((ROOT / "manifest.json").read_text(encoding="utf-8"))
PARSERS: dict[str, Callable[..., Any]] = {
    "chat": chunkwise.chat.Parser,
    "responses": chunkwise.responses.Parser,
    "completions": chunkwise.completions.Parser,
}


def body(entry: dict[str, Any]) -> bytes:
    return (ROOT / str(entry["file"])).read_bytes()


def parse(entry: dict[str, Any], reads: list[bytes], **kwargs: Any) -> tuple[Any, list[Any]]:
    parser = PARSERS[entry["api"]](**kwargs)
    events: list[Any] = []
    for read in reads:
        events += parser.feed(read)
    events += parser.end()
    return parser.result, events


def _error(result: Any, expected: dict[str, Any]) -> None:
    error = result.error
    assert isinstance(error, chunkwise.StreamError)
    assert error.message == expected["message"]
    if "code" in expected:
        assert error.code == expected["code"]


def _usage(result: Any, expected: dict[str, Any]) -> None:
    assert result.usage is not None
    assert {key: result.usage[key] for key in expected} == expected


def _extra_choice_fields(result: Any, expected: list[str]) -> None:
    # Every choice of these bodies carries them (the last chunk's are kept).
    assert [list(choice.extra) for choice in result.choices] == [expected]


def _function_call(result: Any, expected: dict[str, str]) -> None:
    choice = result.choice(0)
    call = choice.function_call
    assert call is not None and choice.tool_calls == ()
    assert (call.name, call.arguments, call.type) == (*expected.values(), "function_call")
    assert call.completed and call.finished and call.error is None


#: What chunkwise surfaces today, and how to check it on a result.
CHECKS: dict[str, Callable[[Any, Any], None]] = {
    "status": lambda r, v: (
        (
            r.response_status == v or r.status == v
            if isinstance(r, chunkwise.responses.Result)
            else r.status == v
        )
        or pytest.fail(f"status {r.status!r}")
    ),
    "output_text": lambda r, v: r.output_text == v or pytest.fail(repr(r.output_text)),
    "item_types": lambda r, v: [i.type for i in r.output] == v or pytest.fail("item types"),
    "content": lambda r, v: r.choice(0).content == (v or "") or pytest.fail("content"),
    "finish_reason": lambda r, v: r.choice(0).finish_reason == v or pytest.fail("finish"),
    "error": _error,
    "usage": _usage,
    "model": lambda r, v: r.model == v or pytest.fail(f"model {r.model!r}"),
    "extra_chunk_fields": lambda r, v: list(r.extra) == v or pytest.fail(f"extra {list(r.extra)}"),
    "extra_choice_fields": _extra_choice_fields,
    "stop_reason": lambda r, v: (
        r.choice(0).extra["stop_reason"] == v or pytest.fail(repr(r.choice(0).extra))
    ),
    "citations": lambda r, v: list(r.extra["citations"]) == v or pytest.fail("citations"),
    "function_call": _function_call,
}
CASES = [
    pytest.param(entry, key, id=f"{entry['file']}:{key}")
    for entry in MANIFEST
    for key in entry["asserts"]
    if key in CHECKS
]
#: What the sources assert that chunkwise does not surface yet (issue 32): each
#: moves into CHECKS when it does.
NOT_SURFACED_YET = {
    "tool_progress": "ToolProgress events (hosted tools)",
    "code_interpreter_code": "ToolInputDelta for code interpreter code",
    "summary_parts": "reasoning summary parts as a count",
    "mcp_call": "an MCP call's arguments and output",
    "annotations": "annotations placed by annotation_index",
    "custom_tool_calls": "Result.custom_tool_calls",
    "moderation_flagged": "Result.response (the terminal response as sent)",
    "moderation_model": "Result.response",
    "logprob_entries": "output text logprobs on the delta and the part",
    # Chat has it (Result.extra["service_tier"]), Responses not yet: one key for both.
    "service_tier": "Result.response (Responses; chat's is in Result.extra)",
    "done": "whether [DONE] arrived",
    "partial_images": "PartialImage events",
    "partial_image_b64_len": "PartialImage events",
    "image_result_len": "an image generation call's result",
    "apply_patch_diff": "ToolInputDelta for apply_patch diffs",
    "path": "an apply_patch call's path",
    "shell_command": "ToolInputDelta for shell commands",
    "output_text_deltas_joined": "the deltas' text beside the authoritative .done text",
    "local_shell_command": "a local shell call's action",
}


def test_every_assertion_of_every_source_is_checked_or_listed_as_not_surfaced() -> None:
    keys = {key for entry in MANIFEST for key in entry["asserts"]}
    assert sorted(keys - CHECKS.keys() - NOT_SURFACED_YET.keys()) == []
    assert sorted(CHECKS.keys() & NOT_SURFACED_YET.keys()) == []  # surfaced: checked


@pytest.mark.parametrize(("entry", "key"), CASES)
def test_what_the_source_asserts_holds(entry: dict[str, Any], key: str) -> None:
    data = body(entry)
    for size in (len(data) or 1, 1_000, 7):
        result, _ = parse(entry, [data[i : i + size] for i in range(0, len(data), size)])
        CHECKS[key](result, entry["asserts"][key])


@pytest.mark.parametrize(
    "entry",
    [e for e in MANIFEST if e["api"] == "chat" and "service_tier" in e["asserts"]],
    ids=lambda e: str(e["file"]),
)
def test_a_chat_bodys_service_tier_is_in_its_extra(entry: dict[str, Any]) -> None:
    # service_tier stays in NOT_SURFACED_YET for the Responses bodies (no Result.response yet).
    result, _ = parse(entry, [body(entry)])
    assert result.extra["service_tier"] == entry["asserts"]["service_tier"]


@settings(max_examples=20, deadline=None)
@given(index=st.integers(0, len(MANIFEST) - 1), cuts=st.lists(st.integers(0, 1 << 17), max_size=8))
def test_raw_events_of_every_recorded_body_at_any_split(index: int, cuts: list[int]) -> None:
    entry = MANIFEST[index]
    data = body(entry)
    decoder = SSEDecoder(legacy_error_field=True)
    sent = decoder.feed(data) + decoder.end()
    _, events = parse(entry, split_at(data, cuts), raw=True)
    assert [e.event for e in events if type(e) is RawEvent] == sent
    _, whole = parse(entry, [data])
    assert [e for e in events if type(e) is not RawEvent] == whole

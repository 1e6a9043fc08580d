"""Real bodies recorded by other projects (``tests/data/recorded``), at every split.

Each body is checked for what its source's own test asserts
(``manifest.json``'s ``asserts``), as far as chunkwise surfaces it.  A value
chunkwise does not surface yet (issue 32) is listed in ``NOT_SURFACED_YET``,
and a key no test knows fails.
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
    "messages": chunkwise.messages.Parser,
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


def _service_tier(result: Any, expected: str) -> None:
    # A Responses result has it in its response as sent, a chat result in its extra.
    if isinstance(result, chunkwise.responses.Result):
        assert result.response is not None
        assert result.response["service_tier"] == expected
    else:
        assert result.extra["service_tier"] == expected


#: What chunkwise surfaces today, and how to check it on a result.
CHECKS: dict[str, Callable[[Any, Any], object]] = {
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
        (
            r.stop_reason == v
            if isinstance(r, chunkwise.messages.Result)
            else r.choice(0).extra["stop_reason"] == v
        )
        or pytest.fail(f"stop_reason of {r!r}")
    ),
    "citations": lambda r, v: list(r.extra["citations"]) == v or pytest.fail("citations"),
    "function_call": _function_call,
    "service_tier": _service_tier,
    "done": lambda r, v: r.done_received is v or pytest.fail(f"done {r.done_received}"),
}


def _items(r: Any, kind: str) -> list[Any]:
    return [item for item in r.output if item.type == kind]


def _custom_calls(r: Any, v: list[dict[str, Any]]) -> None:
    got = [
        {key: getattr(call, key) for key in want}
        for call, want in zip(r.custom_tool_calls, v, strict=False)
    ]
    assert got == v and len(r.custom_tool_calls) == len(v)
    assert all(call.finished for call in r.custom_tool_calls)


#: The Responses surface (issue 32, item 2), checked on the result.
CHECKS |= {
    "annotations": lambda r, v: (
        sum(len(p.annotations) for i in r.output for p in i.content) == v
        or pytest.fail("annotations")
    ),
    "code_interpreter_code": lambda r, v: (
        [i.input for i in _items(r, "code_interpreter_call")] == v or pytest.fail("code")
    ),
    "summary_parts": lambda r, v: (
        sum(len(i.summary) for i in r.output) == v or pytest.fail("summary parts")
    ),
    "mcp_call": lambda r, v: (
        [(i.data["name"], i.input) for i in _items(r, "mcp_call")] == [(v["name"], v["arguments"])]
        or pytest.fail("mcp call")
    ),
    "custom_tool_calls": _custom_calls,
    "moderation_flagged": lambda r, v: (
        {k: m["flagged"] for k, m in r.response["moderation"].items()} == v
        or pytest.fail("moderation")
    ),
    "moderation_model": lambda r, v: (
        {m["model"] for m in r.response["moderation"].values()} == {v}
        or pytest.fail("moderation model")
    ),
    "logprob_entries": lambda r, v: (
        sum(len(p.logprobs) for i in r.output for p in i.content) == v or pytest.fail("logprobs")
    ),
    "image_result_len": lambda r, v: (
        [len(i.data["result"]) for i in _items(r, "image_generation_call")] == [v]
        or pytest.fail("image")
    ),
    "apply_patch_diff": lambda r, v: (
        [i.input for i in _items(r, "apply_patch_call")] == [v] or pytest.fail("diff")
    ),
    "path": lambda r, v: (
        [i.data["operation"]["path"] for i in _items(r, "apply_patch_call")] == [v]
        or pytest.fail("path")
    ),
    "shell_command": lambda r, v: (
        [i.input for i in _items(r, "shell_call")] == [v] or pytest.fail("shell command")
    ),
    "local_shell_command": lambda r, v: (
        [list(i.data["action"]["command"]) for i in _items(r, "local_shell_call")] == [v]
        or pytest.fail("local shell")
    ),
}


def _blocks(r: Any, kind: str) -> list[Any]:
    return [block for block in r.content if block.type == kind]


def _final_text(r: Any) -> str:
    # The text after the last block that is not text: what pydantic-ai outputs.
    tail: list[str] = []
    for block in r.content:
        tail = [*tail, block.text] if block.type == "text" else []
    return "".join(tail)


def _tool_calls(r: Any, v: list[dict[str, Any]]) -> None:
    assert [{"name": c.name, "input": json.loads(c.arguments)} for c in r.tool_calls] == v
    assert all(c.completed and c.error is None for c in r.tool_calls)


#: The Messages surface (issue 35), checked on the result.
CHECKS |= {
    "id": lambda r, v: r.id == v or pytest.fail(f"id {r.id!r}"),
    "block_types": lambda r, v: [b.type for b in r.content] == v or pytest.fail("block types"),
    "text": lambda r, v: r.text == v or pytest.fail(repr(r.text)),
    "text_length": lambda r, v: len(r.text) == v or pytest.fail(f"text length {len(r.text)}"),
    "final_text": lambda r, v: _final_text(r) == v or pytest.fail(repr(_final_text(r))),
    "thinking": lambda r, v: r.thinking == v or pytest.fail(repr(r.thinking)),
    "signature_lengths": lambda r, v: (
        [len(b.signature or "") for b in _blocks(r, "thinking")] == v or pytest.fail("signatures")
    ),
    "redacted_data_lengths": lambda r, v: (
        [len(b.data["data"]) for b in _blocks(r, "redacted_thinking")] == v
        or pytest.fail("redacted")
    ),
    "tool_calls": _tool_calls,
    "server_tool_inputs": lambda r, v: (
        [{k: b.data[k] for k in ("name", "input")} for b in _blocks(r, "server_tool_use")] == v
        or pytest.fail("server tool inputs")
    ),
    "citation_count": lambda r, v: (
        sum(len(b.citations) for b in r.content) == v or pytest.fail("citations")
    ),
}
#: What the sources assert about the events, checked on them.
EVENT_CHECKS: dict[str, Callable[[list[Any], Any], object]] = {
    "tool_progress": lambda e, v: (
        [f"{x.item_type}.{x.phase}" for x in e if type(x) is chunkwise.responses.ToolProgress] == v
        or pytest.fail("tool progress")
    ),
    "partial_images": lambda e, v: (
        len([x for x in e if type(x) is chunkwise.responses.PartialImage]) == v
        or pytest.fail("partial images")
    ),
    "partial_image_b64_len": lambda e, v: (
        [len(x.b64) for x in e if type(x) is chunkwise.responses.PartialImage] == [v]
        or pytest.fail("partial image")
    ),
    "output_text_deltas_joined": lambda e, v: (
        "".join(x.text for x in e if type(x) is chunkwise.responses.TextDelta) == v
        or pytest.fail("deltas")
    ),
}
CASES = [
    pytest.param(entry, key, id=f"{entry['file']}:{key}")
    for entry in MANIFEST
    for key in entry["asserts"]
    if key in CHECKS or key in EVENT_CHECKS
]
#: What the sources assert that chunkwise does not surface yet: each moves into
#: CHECKS when it does (issue 32 surfaced the last of them).
NOT_SURFACED_YET: dict[str, str] = {}


def test_every_assertion_of_every_source_is_checked_or_listed_as_not_surfaced() -> None:
    keys = {key for entry in MANIFEST for key in entry["asserts"]}
    checked = CHECKS.keys() | EVENT_CHECKS.keys()
    assert sorted(keys - checked - NOT_SURFACED_YET.keys()) == []
    assert sorted(checked & NOT_SURFACED_YET.keys()) == []  # surfaced: checked


@pytest.mark.parametrize(("entry", "key"), CASES)
def test_what_the_source_asserts_holds(entry: dict[str, Any], key: str) -> None:
    data = body(entry)
    for size in (len(data) or 1, 1_000, 7):
        result, events = parse(entry, [data[i : i + size] for i in range(0, len(data), size)])
        if key in CHECKS:
            CHECKS[key](result, entry["asserts"][key])
        else:
            EVENT_CHECKS[key](events, entry["asserts"][key])


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


@pytest.mark.parametrize(
    "entry", [e for e in MANIFEST if e["api"] in ("responses", "messages")], ids=lambda e: e["file"]
)
def test_every_event_type_of_a_recorded_body_is_known(entry: dict[str, Any]) -> None:
    result, _ = parse(entry, [body(entry)])
    assert "unknown event type" not in [a.kind for a in result.anomalies]

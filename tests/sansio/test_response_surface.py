"""The whole surface of a Responses stream: every event type the API has, and what each becomes.

Hosted tools' progress, tool input that is not a function call's arguments
(custom tools, MCP, code, shell commands, patch diffs), partial images, audio,
output-text logprobs, annotations by index and the last response object, in
tables of wire shapes and under every split.  The list of types is the
official SDK's own (``openai.types.responses.ResponseStreamEvent``), and the
docs table must name each of them.
"""

from __future__ import annotations

import json
import re
import typing
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chunkwise
from chunkwise import AnomalyDetected, apply_patches
from chunkwise.responses import (
    AudioDelta,
    AudioTranscriptDelta,
    CustomToolCall,
    PartialImage,
    TextDelta,
    ToolInputDelta,
    ToolProgress,
)
from helpers.bodies import numbered, response_object, response_sse, text_events
from helpers.reads import accumulate_response, parse_response, split_at

DOCS = Path(__file__).resolve().parents[2] / "docs" / "responses.rst"
#: Types a server may send that are not (or not yet) in the SDK's union.
EXTRA_TYPES = {
    "keepalive",
    "response.keep_alive",
    "response.apply_patch_call_operation_diff.delta",
    "response.apply_patch_call_operation_diff.done",
}


def sdk_types() -> set[str]:
    openai = pytest.importorskip("openai")
    union = openai.types.responses.ResponseStreamEvent
    members = typing.get_args(union)
    if typing.get_origin(union) is typing.Annotated:
        members = typing.get_args(members[0])
    return {typing.get_args(m.model_fields["type"].annotation)[0] for m in members}


def docs_types() -> list[str]:
    text = DOCS.read_text(encoding="utf-8")
    table = text.split("Every event type\n----------------\n", 1)[1].split("\n\n\n", 1)[0]
    return re.findall(r"^   \* - ``([a-z_.]+)``$", table, flags=re.MULTILINE)


def test_the_docs_table_names_every_event_type_of_the_sdk_once() -> None:
    listed = docs_types()
    assert len(listed) == len(set(listed))
    assert set(listed) == sdk_types() | EXTRA_TYPES


def minimal(kind: str) -> dict[str, Any]:
    """An event of type ``kind`` with every field any type needs (unused ones are ignored)."""
    return {
        "type": kind,
        "output_index": 0,
        "item_id": "it_1",
        "content_index": 0,
        "summary_index": 0,
        "delta": "x",
        "partial_image_b64": "AA==",
        "command_index": 0,
        "command": "ls",
        "item": {"id": "it_1", "type": "message"},
        "part": {"type": "output_text", "text": ""},
        "response": response_object(),
        "annotation": {"type": "url_citation"},
        "message": "boom",
    }


@pytest.mark.parametrize("kind", sorted(EXTRA_TYPES | {"error"}) + sorted(sdk_types() - {"error"}))
def test_every_event_type_is_known(kind: str) -> None:
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": response_object()},
        {"type": "response.output_item.added", "output_index": 0, "item": {"id": "it_1"}},
        minimal(kind),
    ]
    _, result = accumulate_response(events)
    assert "unknown event type" not in [a.kind for a in result.anomalies]
    assert "event for an unknown item" not in [a.kind for a in result.anomalies]


# -- hosted tools: progress, and the stall timeout's view ----------------------------------


def tool_item(
    kind: str, item_id: str, status: str = "in_progress", **fields: Any
) -> dict[str, Any]:
    return {"id": item_id, "type": kind, "status": status, **fields}


def hosted(kind: str, phases: list[str], index: int = 0) -> list[dict[str, Any]]:
    item_id = f"{kind}_1"
    where = {"output_index": index, "item_id": item_id}
    return [
        {
            "type": "response.output_item.added",
            "output_index": index,
            "item": tool_item(kind, item_id),
        },
        *({"type": f"response.{kind}.{phase}", **where} for phase in phases),
        {
            "type": "response.output_item.done",
            "output_index": index,
            "item": tool_item(kind, item_id, "completed"),
        },
    ]


HOSTED = {
    "web_search_call": ["in_progress", "searching", "completed"],
    "file_search_call": ["in_progress", "searching", "completed"],
    "code_interpreter_call": ["in_progress", "interpreting", "completed"],
    "image_generation_call": ["in_progress", "generating", "completed"],
    "mcp_call": ["in_progress", "failed"],
    "mcp_list_tools": ["in_progress", "completed"],
    "compaction": ["compacting"],
}


@pytest.mark.parametrize("kind", sorted(HOSTED))
def test_a_hosted_tool_s_progress_is_a_tool_progress_event_per_phase(kind: str) -> None:
    events, result = accumulate_response(
        numbered(
            [
                {"type": "response.created", "response": response_object()},
                *hosted(kind, HOSTED[kind]),
                {"type": "response.completed", "response": response_object("completed")},
            ]
        )
    )
    progress = [e for e in events if isinstance(e, ToolProgress)]
    assert progress == [
        ToolProgress(output_index=0, item_id=f"{kind}_1", item_type=kind, phase=phase)
        for phase in HOSTED[kind]
    ]
    assert all(e.family == "tool_call" and not e.is_output for e in progress)
    assert result.status == "complete" and result.anomalies == ()


def awaiting_after_each(events: list[dict[str, Any]]) -> list[bool]:
    accumulator = chunkwise.responses.Accumulator()
    seen = []
    for event in events:
        accumulator.feed(event)
        seen.append(accumulator.awaiting_output)
    return seen


@pytest.mark.parametrize(
    ("phases", "running"),
    [
        (["in_progress", "searching"], [True, True]),  # until the item's end
        (["searching", "completed"], [True, False]),  # its completed phase ends it
        (["in_progress", "failed"], [True, False]),
    ],
)
def test_the_stall_timeout_waits_while_a_hosted_tool_runs(
    phases: list[str], running: list[bool]
) -> None:
    body = [{"type": "response.created", "response": response_object()}]
    body += hosted("web_search_call", phases)
    seen = awaiting_after_each(body)
    # created, added: awaiting; each phase as listed; the item's end: awaiting again
    assert seen == [True, True, *(not r for r in running), True]


def test_the_stall_timeout_waits_while_an_image_is_generated_and_a_shell_streams_output() -> None:
    image = {"output_index": 0, "item_id": "ig_1", "partial_image_b64": "AA=="}
    shell = {"output_index": 1, "item_id": "sho_1", "command_index": 0, "delta": {"stdout": "x"}}
    body = [
        {"type": "response.image_generation_call.partial_image", **image},
        {
            "type": "response.output_item.done",
            "output_index": 0,
            "item": tool_item("image_generation_call", "ig_1"),
        },
        {"type": "response.shell_call_output_content.delta", **shell},
        {
            "type": "response.output_item.done",
            "output_index": 1,
            "item": tool_item("shell_call_output", "sho_1"),
        },
    ]
    assert awaiting_after_each(body) == [False, True, False, True]


def test_a_shell_s_streamed_output_is_progress_with_phase_output() -> None:
    where = {"output_index": 1, "item_id": "sho_1"}
    events, result = accumulate_response(
        [
            {
                "type": "response.output_item.added",
                **where,
                "item": tool_item("shell_call_output", "sho_1"),
            },
            {
                "type": "response.shell_call_output_content.delta",
                **where,
                "command_index": 0,
                "delta": {"stdout": "hi"},
            },
            {
                "type": "response.shell_call_output_content.done",
                **where,
                "command_index": 0,
                "output": [],
            },
        ]
    )
    assert [e for e in events if isinstance(e, ToolProgress)] == [
        ToolProgress(output_index=1, item_id="sho_1", item_type="shell_call_output", phase="output")
    ]
    assert "unknown event type" not in [a.kind for a in result.anomalies]


def test_a_phase_named_after_this_version_is_progress_too() -> None:
    events, result = accumulate_response(hosted("web_search_call", ["reading_pages"]))
    assert [e.phase for e in events if isinstance(e, ToolProgress)] == ["reading_pages"]
    assert result.anomalies == ()


# -- tool input -----------------------------------------------------------------------------

#: Each tool whose input streams: its event stem, the final key of .done, the whole item's field.
INPUTS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "custom_tool_call": (
        "custom_tool_call_input",
        "input",
        {"name": "run_sql", "call_id": "call_9"},
    ),
    "mcp_call": ("mcp_call_arguments", "arguments", {"name": "forecast", "server_label": "w"}),
    "code_interpreter_call": ("code_interpreter_call_code", "code", {"container_id": "c"}),
    "apply_patch_call": ("apply_patch_call_operation_diff", "diff", {"call_id": "call_3"}),
}
INPUT_TEXT = {
    "custom_tool_call": ["SELECT * ", "FROM users", " LIMIT 5;"],
    "mcp_call": ['{"city": "Z', 'ürich", "days"', ": 2}"],
    "code_interpreter_call": ["import math\n", "print(math.pi)"],
    "apply_patch_call": ["+## Shopping\n", "+- [ ] Milk\n"],
}


def whole(kind: str, text: str, status: str = "completed") -> dict[str, Any]:
    _, key, fields = INPUTS[kind]
    item = tool_item(kind, f"{kind}_1", status, **fields)
    if kind == "apply_patch_call":
        item["operation"] = {"type": "create_file", "path": "list.md", "diff": text}
    else:
        item[key] = text
    return item


def input_events(
    kind: str, pieces: list[str], final: str | None = None, index: int = 0
) -> list[dict[str, Any]]:
    stem, key, _ = INPUTS[kind]
    final = "".join(pieces) if final is None else final
    where = {"output_index": index, "item_id": f"{kind}_1"}
    return [
        {
            "type": "response.output_item.added",
            "output_index": index,
            "item": whole(kind, "", "in_progress"),
        },
        *({"type": f"response.{stem}.delta", **where, "delta": piece} for piece in pieces),
        {"type": f"response.{stem}.done", **where, key: final},
        {"type": "response.output_item.done", "output_index": index, "item": whole(kind, final)},
    ]


@pytest.mark.parametrize("kind", sorted(INPUTS))
def test_a_tool_s_input_streams_as_tool_input_deltas_into_the_item(kind: str) -> None:
    pieces = INPUT_TEXT[kind]
    events, result = accumulate_response(input_events(kind, pieces))
    deltas = [e for e in events if isinstance(e, ToolInputDelta)]
    assert [(d.item_type, d.fragment, d.index) for d in deltas] == [(kind, p, 0) for p in pieces]
    assert all(d.is_output and d.family == "tool_call" for d in deltas)
    [item] = result.output
    assert item.input == "".join(pieces) and item.done
    assert result.anomalies == ()
    assert result.function_calls == ()


def test_an_mcp_call_s_arguments_are_previewed_by_live_json_patches() -> None:
    pieces = INPUT_TEXT["mcp_call"]
    events, _ = accumulate_response(input_events("mcp_call", pieces))
    value: Any = None
    for delta in (e for e in events if isinstance(e, ToolInputDelta)):
        value = apply_patches(value, delta.patches)
    assert value == json.loads("".join(pieces))


@pytest.mark.parametrize("kind", ["custom_tool_call", "code_interpreter_call", "apply_patch_call"])
def test_only_json_input_has_patches(kind: str) -> None:
    events, _ = accumulate_response(input_events(kind, ["{", '"a": 1}']))
    assert all(e.patches == () for e in events if isinstance(e, ToolInputDelta))


@pytest.mark.parametrize("kind", sorted(INPUTS))
def test_a_final_input_that_differs_from_the_deltas_replaces_them_with_an_anomaly(
    kind: str,
) -> None:
    _, result = accumulate_response(input_events(kind, ["[1", ",2]"], final="[1,3]"))
    assert result.output[0].input == "[1,3]"
    assert [a.kind for a in result.anomalies] == ["final input differs from deltas"]


@pytest.mark.parametrize("kind", sorted(INPUTS))
def test_input_after_its_done_event_is_an_anomaly_not_appended(kind: str) -> None:
    stem, _, _ = INPUTS[kind]
    body = input_events(kind, ["[1]"])
    late = {
        "type": f"response.{stem}.delta",
        "output_index": 0,
        "item_id": f"{kind}_1",
        "delta": "!",
    }
    body.insert(3, late)
    _, result = accumulate_response(body)
    assert result.output[0].input == "[1]"
    assert [a.kind for a in result.anomalies] == ["input after done"]


def test_custom_tool_calls_are_results_finished_only_when_the_server_says() -> None:
    body = input_events("custom_tool_call", INPUT_TEXT["custom_tool_call"])
    text = "".join(INPUT_TEXT["custom_tool_call"])
    call = CustomToolCall(
        index=0,
        id="custom_tool_call_1",
        call_id="call_9",
        name="run_sql",
        input=text,
        finished=True,
    )
    for cut, finished in [(len(body), True), (5, True), (4, False), (2, False)]:
        _, result = accumulate_response(body[:cut])
        assert result.custom_tool_calls == (
            attrs.evolve(call, input=text if cut > 3 else "SELECT * ", finished=finished),
        ), cut
        assert result.output[0].custom_call == result.custom_tool_calls[0]


def test_a_custom_tool_call_sent_whole_when_added_is_one_delta() -> None:
    item = whole("custom_tool_call", "echo hi", "completed")
    events, result = accumulate_response(
        [
            {"type": "response.output_item.added", "output_index": 0, "item": item},
            {"type": "response.output_item.done", "output_index": 0, "item": item},
        ]
    )
    assert [e.fragment for e in events if isinstance(e, ToolInputDelta)] == ["echo hi"]
    assert result.custom_tool_calls[0].input == "echo hi"
    assert result.anomalies == ()


def shell_events(commands: list[list[str]]) -> list[dict[str, Any]]:
    where = {"output_index": 0}
    action = {"commands": ["".join(c) for c in commands]}
    out: list[dict[str, Any]] = [
        {
            "type": "response.output_item.added",
            **where,
            "item": tool_item("shell_call", "sh_1", action={"commands": []}, call_id="call_s"),
        }
    ]
    for number, pieces in enumerate(commands):
        at = {**where, "command_index": number}
        out.append({"type": "response.shell_call_command.added", **at, "command": ""})
        out += [{"type": "response.shell_call_command.delta", **at, "delta": p} for p in pieces]
        out.append({"type": "response.shell_call_command.done", **at, "command": "".join(pieces)})
    out.append(
        {
            "type": "response.output_item.done",
            **where,
            "item": tool_item("shell_call", "sh_1", "completed", action=action, call_id="call_s"),
        }
    )
    return out


def test_a_shell_call_s_commands_stream_by_index_one_per_line() -> None:
    commands = [["ls ", "-a"], ["echo ", "hi"]]
    events, result = accumulate_response(shell_events(commands))
    deltas = [(e.index, e.fragment) for e in events if isinstance(e, ToolInputDelta)]
    assert deltas == [(0, "ls "), (0, "-a"), (1, "echo "), (1, "hi")]
    assert result.output[0].input == "ls -a\necho hi"
    assert result.anomalies == ()


def test_a_shell_command_that_arrives_whole_in_its_added_event_is_one_delta() -> None:
    at = {"output_index": 0, "command_index": 0}
    events, result = accumulate_response(
        [
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": tool_item("shell_call", "sh_1"),
            },
            {"type": "response.shell_call_command.added", **at, "command": "uname -a"},
            {"type": "response.shell_call_command.done", **at, "command": "uname -a"},
        ]
    )
    assert [e.fragment for e in events if isinstance(e, ToolInputDelta)] == ["uname -a"]
    assert result.output[0].input == "uname -a" and result.anomalies == ()


def test_function_calls_keep_their_own_events_and_anomaly_words() -> None:
    # Function calls share the input machinery but not its events.
    _, result = accumulate_response(
        [
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {
                    "id": "fc_1",
                    "type": "function_call",
                    "name": "f",
                    "call_id": "c",
                    "arguments": "",
                },
            },
            {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": "{}"},
            {
                "type": "response.function_call_arguments.done",
                "output_index": 0,
                "arguments": "{ }",
            },
        ]
    )
    assert [a.kind for a in result.anomalies] == ["final arguments differ from deltas"]
    assert result.output[0].input == "{ }" == result.function_calls[0].arguments
    assert result.custom_tool_calls == ()


# -- images, audio, logprobs, annotations, the response -----------------------------------


def test_partial_images_are_events_in_order() -> None:
    where = {"output_index": 0, "item_id": "ig_1"}
    events, result = accumulate_response(
        [
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": tool_item("image_generation_call", "ig_1"),
            },
            *(
                {
                    "type": "response.image_generation_call.partial_image",
                    **where,
                    "partial_image_index": n,
                    "partial_image_b64": b64,
                }
                for n, b64 in enumerate(["AAA=", "BBB="])
            ),
            {
                "type": "response.image_generation_call.partial_image",
                **where,
                "partial_image_b64": 7,
            },
        ]
    )
    assert [e for e in events if isinstance(e, PartialImage)] == [
        PartialImage(output_index=0, item_id="ig_1", index=0, b64="AAA="),
        PartialImage(output_index=0, item_id="ig_1", index=1, b64="BBB="),
    ]
    assert all(e.is_output for e in events if isinstance(e, PartialImage))
    assert result.anomalies == ()


def test_audio_and_its_transcript_are_joined_on_the_result() -> None:
    body = numbered(
        [
            {"type": "response.created", "response": response_object()},
            {"type": "response.audio.delta", "delta": "UklG"},
            {"type": "response.audio.transcript.delta", "delta": "Hel"},
            {"type": "response.audio.delta", "delta": "RiQA"},
            {"type": "response.audio.transcript.delta", "delta": "lo"},
            {"type": "response.audio.delta", "delta": ""},
            {"type": "response.audio.done"},
            {"type": "response.audio.transcript.done"},
        ]
    )
    events, result = accumulate_response(body)
    audio = [e for e in events if isinstance(e, (AudioDelta, AudioTranscriptDelta))]
    assert audio == [
        AudioDelta(data="UklG"),
        AudioTranscriptDelta(text="Hel"),
        AudioDelta(data="RiQA"),
        AudioTranscriptDelta(text="lo"),
    ]
    assert all(e.is_output and e.family == "choice" for e in audio)
    assert result.audio == chunkwise.responses.Audio(data="UklGRiQA", transcript="Hello")
    assert result.anomalies == ()
    assert accumulate_response(body[:1])[1].audio is None


def logprob(token: str) -> dict[str, Any]:
    return {"token": token, "logprob": -0.5, "bytes": list(token.encode()), "top_logprobs": []}


def test_output_text_logprobs_are_kept_on_the_delta_and_joined_on_the_part() -> None:
    body = text_events(0, "msg_1", ["Hel", "lo"])
    body[2]["logprobs"] = [logprob("Hel")]
    body[3]["logprobs"] = [logprob("lo")]
    events, result = accumulate_response(body[:4])
    deltas = [e for e in events if isinstance(e, TextDelta)]
    sent = [json.loads(json.dumps(d.logprobs)) for d in deltas]
    assert sent == [[logprob("Hel")], [logprob("lo")]]
    part = result.output[0].content[0]
    assert [p["token"] for p in part.logprobs] == ["Hel", "lo"]
    with pytest.raises(TypeError):
        part.logprobs[0]["token"] = "x"  # type: ignore[index]
    # A final version's logprobs replace the deltas'.
    body[4]["logprobs"] = [logprob("Hello")]
    _, result = accumulate_response(body)
    assert [p["token"] for p in result.output[0].content[0].logprobs] == ["Hello"]


def test_annotations_are_placed_by_their_annotation_index() -> None:
    body = text_events(0, "msg_1", ["See a and b."])[:3]
    where = {"output_index": 0, "item_id": "msg_1", "content_index": 0}
    for index in (1, 0, 1):
        annotation = {"type": "url_citation", "url": f"https://{index}.example", "n": len(body)}
        body.append(
            {
                "type": "response.output_text.annotation.added",
                **where,
                "annotation_index": index,
                "annotation": annotation,
            }
        )
    body.append(
        {
            "type": "response.output_text.annotation.added",
            **where,
            "annotation": {"type": "file_citation"},
        }
    )
    _, result = accumulate_response(body)
    annotations = result.output[0].content[0].annotations
    assert [a["type"] for a in annotations] == ["url_citation", "url_citation", "file_citation"]
    assert [a.get("url") for a in annotations[:2]] == ["https://0.example", "https://1.example"]
    assert annotations[1]["n"] == 5  # the later version of index 1


def test_the_result_keeps_the_last_response_object_whole_and_read_only() -> None:
    extra: dict[str, Any] = {
        "service_tier": "default",
        "moderation": {"output": {"flagged": False}},
        "metadata": {"k": "v"},
    }
    body = [
        {"type": "response.created", "response": response_object()},
        {"type": "response.in_progress", "response": response_object(service_tier="auto")},
        {"type": "response.completed", "response": response_object("completed", **extra)},
    ]
    _, result = accumulate_response(body[:2])
    assert result.response is not None and result.response["service_tier"] == "auto"
    _, result = accumulate_response(body)
    response = result.response
    assert response is not None
    assert json.loads(json.dumps(response)) == response_object("completed", **extra)
    with pytest.raises(TypeError):
        response["moderation"]["output"]["flagged"] = True
    assert accumulate_response([])[1].response is None


# -- under every split ------------------------------------------------------------------------

SURFACE = numbered(
    [
        {"type": "response.created", "response": response_object()},
        *hosted("web_search_call", HOSTED["web_search_call"]),
        *input_events("custom_tool_call", INPUT_TEXT["custom_tool_call"], index=1),
        {"type": "response.audio.delta", "delta": "UklG"},
        {"type": "response.audio.transcript.delta", "delta": "Zürich ☀"},
        {"type": "response.something_new"},
        {"type": "response.completed", "response": response_object("completed")},
    ]
)


@settings(max_examples=40, deadline=None)
@given(cuts=st.lists(st.integers(0, 1 << 13), max_size=12))
def test_the_surface_reads_the_same_at_every_split(cuts: list[int]) -> None:
    body = response_sse(*SURFACE)
    whole_events, whole_result = parse_response([body])
    events, result = parse_response(split_at(body, cuts))
    assert (events, result) == (whole_events, whole_result)
    kinds = {type(e) for e in events}
    assert {ToolProgress, ToolInputDelta, AudioDelta, AudioTranscriptDelta} <= kinds
    assert [a.kind for a in result.anomalies] == ["unknown event type"]
    assert sum(type(e) is AnomalyDetected for e in events) == 1

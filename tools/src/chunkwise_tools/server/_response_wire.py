"""Responses scenarios on the wire: the events and bytes a :class:`ResponseScenario` streams.

Pure functions turn a scenario (:mod:`._response_scenarios`) into output:

* :func:`response_scenario_payloads`: the event objects, in order;
* :func:`response_scenario_events`: the exact bytes of each SSE event
  (``event: <type>`` + ``data: <json>`` + a blank line);
* :func:`response_scenario_body`: the whole body;
* :func:`response_scenario_document`: the ``response`` object the terminal
  event carries (None when the stream has no terminal event).

Rules
-----
1. OpenAI's style follows the documented shapes: ``response.created`` and
   ``response.in_progress`` carry the whole ``response`` object; each item is
   ``output_item.added``, its parts' ``.added``, the deltas, the parts'
   ``.done`` and ``output_item.done``; function calls end with
   ``function_call_arguments.done``; every event, keepalives included, has a
   ``sequence_number`` counting from 0; every item event has its
   ``output_index``, every part event its ``content_index`` or
   ``summary_index``.
2. Parallel function calls are all added first, then their argument deltas
   take turns, fragment by fragment, then each is finished: a client that
   keys calls by arrival rather than by ``output_index`` mixes them up.
   The calls follow the reasoning and the message, or come between the two
   when the scenario says ``calls_first``; ``output_index`` counts the items
   in the order they are added.
3. A ``max_output_tokens`` scenario ends with ``response.incomplete``
   (``incomplete_details.reason`` ``"max_output_tokens"``), the message item
   ``incomplete`` and its partial text in ``response.output``; its
   ``output_tokens`` is the request's ``max_output_tokens`` when it set one.
4. An error scenario sends its text, then an ``error`` event (nested or flat,
   as the style says), then ``response.failed`` with ``error`` set and
   ``usage`` null.
5. llama.cpp's style is what ``tools/server/server-task.cpp`` writes: no
   ``sequence_number``, ``output_index`` or ``content_index`` anywhere;
   ``response.created`` and ``response.in_progress`` carry only ``id``,
   ``object`` and ``status``; a function-call item's ``id`` is ``"fc_"`` and
   its ``call_id`` ``"call_"`` + the same token, and its argument deltas name
   the item's id (as captured from llama-server in
   ``tests/data/llama_cpp/responses_tool.sse``); no ``content_part.added`` for
   calls, no
   ``function_call_arguments.done``; reasoning is ``reasoning_text``, not a
   summary; the finishing events all come at the end; a response cut by
   ``max_output_tokens`` is reported ``completed``; a mid-stream error is a
   bare ``data: {"error": {...}}`` frame (no ``event:`` line, no ``type``),
   and the stream ends there, with no terminal event.
6. A keepalive style puts ``{"type": "keepalive", "sequence_number": N}``
   events before the first event and after every third one.
7. OpenAI's ``response`` objects echo what the request set, as the real
   API's do: its ``model``, ``max_output_tokens`` and the fields in
   :data:`ECHOED` (``instructions``, ``temperature``, ``text`` with its
   ``format``, ``tools``, ``tool_choice``...); what it left out, or set to
   null, has the API's default.
8. Tool items (:class:`~._response_scenarios.ToolItem`) follow the reasoning,
   each finished before the next begins: ``output_item.added`` (the item with
   its ``pending`` fields, its streamed input empty), the ``before`` progress
   events (``response.<type>.<phase>``, with ``item_id`` and
   ``output_index``), the input's deltas and its ``.done`` (a code
   interpreter's ``response.code_interpreter_call_code.*``, an MCP call's
   ``response.mcp_call_arguments.*``, a custom tool call's
   ``response.custom_tool_call_input.*``), the ``partial_image`` events
   (``partial_image_index`` from 0), the ``after`` progress events, and
   ``output_item.done`` with the finished item, which the terminal ``output``
   holds too.  A shell call streams its command as
   ``response.shell_call_command.added``/``.delta``/``.done``
   (``command_index`` 0; openai-python gives these events no ``item_id``) and
   its ``action.commands`` holds it; a shell output streams its stdout as
   ``response.shell_call_output_content.delta``/``.done``.
9. A citation is announced by ``response.output_text.annotation.added``
   (``annotation_index`` from 0, ``start_index``/``end_index`` in characters
   of the text) right after the delta that completes the text it cites, and
   is in the annotations of the part and the item from then on.
10. Audio (``response.audio.delta``, base64 PCM16, and
    ``response.audio.transcript.delta``) carries no item or index: each
    text delta of the message is followed by one audio chunk and one
    transcript piece, while they last, then the rest of both; then
    ``response.audio.done`` and ``response.audio.transcript.done``, before the
    text's ``.done``.

Pure functions: no I/O, no trio.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from ._response_scenarios import INPUT_TOKENS, ResponseScenario, ToolItem
from ._scenarios import CREATED, wire_json

__all__ = [
    "ECHOED",
    "response_event_bytes",
    "response_scenario_body",
    "response_scenario_document",
    "response_scenario_events",
    "response_scenario_payloads",
]

#: The request fields a ``response`` object repeats (rule 7).
ECHOED = (
    "instructions",
    "metadata",
    "parallel_tool_calls",
    "previous_response_id",
    "reasoning",
    "store",
    "temperature",
    "text",
    "tool_choice",
    "tools",
    "top_p",
    "truncation",
    "user",
)


@attrs.frozen(kw_only=True)
class _Request:
    """What a scenario's output takes from the request."""

    model: str
    max_output_tokens: int | None
    echo: Mapping[str, Any]


def _ids(scenario: ResponseScenario) -> tuple[str, str, str]:
    name = scenario.name
    return f"resp_chunkwise_{name}", f"msg_chunkwise_{name}", f"rs_chunkwise_{name}"


def _output_tokens(scenario: ResponseScenario, request: _Request) -> int:
    if scenario.outcome == "max_output_tokens" and request.max_output_tokens is not None:
        return request.max_output_tokens  # rule 3: the cut came at the limit
    return scenario.output_tokens


def _usage(scenario: ResponseScenario, request: _Request) -> dict[str, Any]:
    output = _output_tokens(scenario, request)
    if scenario.llama_cpp:
        return {
            "input_tokens": INPUT_TOKENS,
            "output_tokens": output,
            "total_tokens": INPUT_TOKENS + output,
        }
    return {
        "input_tokens": INPUT_TOKENS,
        # openai-python 3.63 requires cache_write_tokens (recordings of 2025 lack it).
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": scenario.reasoning_tokens},
        "total_tokens": INPUT_TOKENS + output,
    }


def _status(scenario: ResponseScenario) -> str:
    if scenario.outcome == "error":
        return "failed"
    if scenario.outcome == "max_output_tokens" and not scenario.llama_cpp:
        return "incomplete"
    return "completed"  # llama.cpp reports a cut answer completed (rule 5)


def _response(
    scenario: ResponseScenario,
    request: _Request,
    status: str,
    output: list[dict[str, Any]],
    *,
    final: bool,
) -> dict[str, Any]:
    """The ``response`` object of a lifecycle (``final`` false) or terminal event."""
    response_id = _ids(scenario)[0]
    if scenario.llama_cpp:
        if not final:
            return {"id": response_id, "object": "response", "status": status}
        return {
            "id": response_id,
            "object": "response",
            "created_at": CREATED,
            "status": status,
            "model": request.model,
            "output": output,
            "usage": _usage(scenario, request),
        }
    error = None
    if final and status == "failed" and scenario.error is not None:
        error = {"code": scenario.error.get("code") or "server_error"}
        error["message"] = scenario.error.get("message")
    incomplete = {"reason": "max_output_tokens"} if final and status == "incomplete" else None
    document = {
        "id": response_id,
        "object": "response",
        "created_at": CREATED,
        "status": status,
        "background": False,
        "error": error,
        "incomplete_details": incomplete,
        "instructions": None,
        "max_output_tokens": request.max_output_tokens,
        "model": request.model,
        "output": output,
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None},
        "store": False,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": _usage(scenario, request) if final and status != "failed" else None,
        "user": None,
        "metadata": {},
    }
    # Rule 7: what the request set, over the defaults (objects merged one level).
    for name in ECHOED:
        value = request.echo.get(name)
        if value is None:
            continue
        default = document[name]
        if isinstance(default, dict) and isinstance(value, Mapping):
            value = {**default, **value}
        document[name] = value
    return document


def _text_part(text: str, annotations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "type": "output_text",
        "annotations": list(annotations or ()),
        "logprobs": [],
        "text": text,
    }


def _annotations(scenario: ResponseScenario) -> list[dict[str, Any]]:
    """Rule 9: the ``url_citation`` of each citation whose text the message says."""
    text = scenario.text
    found: list[dict[str, Any]] = []
    for citation in scenario.citations:
        start = text.find(citation.cited)
        if start < 0 or not citation.cited:
            continue
        found.append(
            {
                "type": "url_citation",
                "start_index": start,
                "end_index": start + len(citation.cited),
                "title": citation.title,
                "url": citation.url,
            }
        )
    return found


class _Writer:
    """Builds one stream's events: addressing fields as the dialect has them (rules 1, 5)."""

    def __init__(self, scenario: ResponseScenario) -> None:
        self.llama_cpp = scenario.llama_cpp
        self.events: list[dict[str, Any]] = []

    def add(self, etype: str, **fields: Any) -> None:
        if self.llama_cpp:
            # No indices at all: items are found by item_id and arrival order.
            for key in ("output_index", "content_index", "summary_index"):
                fields.pop(key, None)
        self.events.append({"type": etype, **fields})


def _message(
    scenario: ResponseScenario, writer: _Writer, index: int, *, finish: bool
) -> dict[str, Any]:
    """Stream the message item at ``index``; its final form (finished now when ``finish``)."""
    item_id = _ids(scenario)[1]
    where = {"item_id": item_id, "output_index": index, "content_index": 0}
    writer.add(
        "response.output_item.added",
        output_index=index,
        item={
            "id": item_id,
            "type": "message",
            "status": "in_progress",
            "content": [],
            "role": "assistant",
        },
    )
    empty = {"type": "output_text", "text": ""} if writer.llama_cpp else _text_part("")
    writer.add("response.content_part.added", **where, part=empty)
    annotations = _annotations(scenario)
    pending = list(enumerate(annotations))
    audio = scenario.audio
    chunks = list(audio.chunks) if audio is not None else []
    words = list(audio.transcript) if audio is not None else []
    length = 0
    for piece in scenario.content:
        extra: dict[str, Any] = {} if writer.llama_cpp else {"logprobs": []}
        writer.add("response.output_text.delta", **where, delta=piece, **extra)
        length += len(piece)
        while pending and pending[0][1]["end_index"] <= length:  # rule 9
            number, annotation = pending.pop(0)
            writer.add(
                "response.output_text.annotation.added",
                **where,
                annotation_index=number,
                annotation=annotation,
            )
        if chunks:  # rule 10: beside the text
            writer.add("response.audio.delta", delta=chunks.pop(0))
        if words:
            writer.add("response.audio.transcript.delta", delta=words.pop(0))
    if audio is not None:
        for chunk in chunks:
            writer.add("response.audio.delta", delta=chunk)
        for word in words:
            writer.add("response.audio.transcript.delta", delta=word)
        writer.add("response.audio.done")
        writer.add("response.audio.transcript.done")
    cut = scenario.outcome != "completed" and not writer.llama_cpp
    item = {
        "id": item_id,
        "type": "message",
        "status": "incomplete" if cut else "completed",
        "content": [_text_part(scenario.text, annotations)],
        "role": "assistant",
    }
    if finish:
        _finish_message(scenario, writer, index, item)
    return item


def _finish_message(
    scenario: ResponseScenario, writer: _Writer, index: int, item: dict[str, Any]
) -> None:
    where = {"item_id": item["id"], "output_index": index, "content_index": 0}
    extra: dict[str, Any] = {} if writer.llama_cpp else {"logprobs": []}
    writer.add("response.output_text.done", **where, text=scenario.text, **extra)
    part = item["content"][0] if item["content"] else _text_part(scenario.text)
    writer.add("response.content_part.done", **where, part=part)
    writer.add("response.output_item.done", output_index=index, item=item)


def _reasoning(
    scenario: ResponseScenario, writer: _Writer, index: int, *, finish: bool
) -> dict[str, Any]:
    """Stream the reasoning item at ``index`` (a summary, or llama.cpp's reasoning text)."""
    item_id = _ids(scenario)[2]
    text = "".join(scenario.reasoning)
    if writer.llama_cpp:
        added = {
            "id": item_id,
            "summary": [],
            "type": "reasoning",
            "content": [],
            "encrypted_content": "",
            "status": "in_progress",
        }
        writer.add("response.output_item.added", item=added)
        for piece in scenario.reasoning:
            writer.add("response.reasoning_text.delta", delta=piece, item_id=item_id)
        return {
            "id": item_id,
            "summary": [],
            "type": "reasoning",
            "content": [{"text": text, "type": "reasoning_text"}],
            "encrypted_content": "",
        }
    where = {"item_id": item_id, "output_index": index, "summary_index": 0}
    writer.add(
        "response.output_item.added",
        output_index=index,
        item={"id": item_id, "type": "reasoning", "summary": []},
    )
    writer.add(
        "response.reasoning_summary_part.added", **where, part={"type": "summary_text", "text": ""}
    )
    for piece in scenario.reasoning:
        writer.add("response.reasoning_summary_text.delta", **where, delta=piece)
    writer.add("response.reasoning_summary_text.done", **where, text=text)
    part = {"type": "summary_text", "text": text}
    writer.add("response.reasoning_summary_part.done", **where, part=part)
    item = {"id": item_id, "type": "reasoning", "summary": [part]}
    if finish:
        writer.add("response.output_item.done", output_index=index, item=item)
    return item


def _calls(scenario: ResponseScenario, writer: _Writer, first: int) -> list[dict[str, Any]]:
    """Stream the function calls from output index ``first`` (rule 2); their final forms."""
    calls = scenario.tool_calls
    finished: list[dict[str, Any]] = []
    if writer.llama_cpp:
        # One call after the other, without indices; the deltas name the item
        # by its id.  The items are finished at the very end.
        for call in calls:
            call_id = scenario.call_id(call)
            item_id = "fc_" + call_id.removeprefix("call_")
            writer.add(
                "response.output_item.added",
                item={
                    "id": item_id,
                    "arguments": "",
                    "call_id": call_id,
                    "name": call.name,
                    "type": "function_call",
                    "status": "in_progress",
                },
            )
            for fragment in call.fragments:
                writer.add(
                    "response.function_call_arguments.delta", delta=fragment, item_id=item_id
                )
            finished.append(
                {
                    "id": item_id,
                    "type": "function_call",
                    "status": "completed",
                    "arguments": call.arguments,
                    "call_id": call_id,
                    "name": call.name,
                }
            )
        return finished
    for offset, call in enumerate(calls):
        writer.add(
            "response.output_item.added",
            output_index=first + offset,
            item={
                "id": _call_item_id(scenario, offset),
                "type": "function_call",
                "status": "in_progress",
                "arguments": "",
                "call_id": call.id,
                "name": call.name,
            },
        )
    longest = max((len(call.fragments) for call in calls), default=0)
    for step in range(longest):
        for offset, call in enumerate(calls):
            if step < len(call.fragments):
                writer.add(
                    "response.function_call_arguments.delta",
                    item_id=_call_item_id(scenario, offset),
                    output_index=first + offset,
                    delta=call.fragments[step],
                )
    for offset, call in enumerate(calls):
        item_id = _call_item_id(scenario, offset)
        writer.add(
            "response.function_call_arguments.done",
            item_id=item_id,
            output_index=first + offset,
            name=call.name,
            arguments=call.arguments,
        )
        item = {
            "id": item_id,
            "type": "function_call",
            "status": "completed",
            "arguments": call.arguments,
            "call_id": call.id,
            "name": call.name,
        }
        writer.add("response.output_item.done", output_index=first + offset, item=item)
        finished.append(item)
    return finished


#: Rule 8: the events a tool item's input streams in, and the field holding it.
_STREAMED_INPUT = {
    "code_interpreter_call": ("response.code_interpreter_call_code", "code"),
    "mcp_call": ("response.mcp_call_arguments", "arguments"),
    "custom_tool_call": ("response.custom_tool_call_input", "input"),
}


#: The fields of an image generation call its partial images repeat.
_IMAGE_FIELDS = ("output_format", "quality", "background")


def _with_input(tool: ToolItem, text: str, fields: Mapping[str, Any]) -> dict[str, Any]:
    """The item ``tool`` with ``fields``, its streamed input being ``text`` so far."""
    item: dict[str, Any] = {"id": tool.id, "type": tool.type, **fields}
    if tool.type in _STREAMED_INPUT:
        item[_STREAMED_INPUT[tool.type][1]] = text
    elif tool.type == "shell_call":
        item["action"] = {**item.get("action", {}), "commands": [text] if text else []}
    elif tool.type == "shell_call_output":
        outcome = {"type": "exit", "exit_code": 0}
        item["output"] = [{"stdout": text, "stderr": "", "outcome": outcome}] if text else []
    return item


def _tool_item(tool: ToolItem, writer: _Writer, index: int) -> dict[str, Any]:
    """Stream the tool item at ``index`` (rule 8); its final form."""
    where = {"item_id": tool.id, "output_index": index}
    writer.add(
        "response.output_item.added",
        output_index=index,
        item=_with_input(tool, "", {**tool.fields, **tool.pending}),
    )
    for phase in tool.before:
        writer.add(f"response.{tool.type}.{phase}", **where)
    text = tool.input
    if tool.type in _STREAMED_INPUT:
        prefix, field = _STREAMED_INPUT[tool.type]
        for fragment in tool.fragments:
            writer.add(f"{prefix}.delta", **where, delta=fragment)
        writer.add(f"{prefix}.done", **where, **{field: text})
    elif tool.type == "shell_call":
        command = {"output_index": index, "command_index": 0}
        writer.add("response.shell_call_command.added", **command, command="")
        for fragment in tool.fragments:
            writer.add("response.shell_call_command.delta", **command, delta=fragment)
        writer.add("response.shell_call_command.done", **command, command=text)
    elif tool.type == "shell_call_output":
        for fragment in tool.fragments:
            writer.add(
                "response.shell_call_output_content.delta",
                **where,
                command_index=0,
                delta={"stdout": fragment},
            )
        output = _with_input(tool, text, {})["output"]
        writer.add(
            "response.shell_call_output_content.done", **where, command_index=0, output=output
        )
    image_fields = {
        key: tool.fields[key]
        for key in ("output_format", "quality", "background")
        if key in tool.fields
    }
    for number, image in enumerate(tool.partial_images):
        writer.add(
            f"response.{tool.type}.partial_image",
            **where,
            partial_image_index=number,
            partial_image_b64=image,
            **image_fields,
        )
    for phase in tool.after:
        writer.add(f"response.{tool.type}.{phase}", **where)
    item = _with_input(tool, text, tool.fields)
    writer.add("response.output_item.done", output_index=index, item=item)
    return item


def _call_item_id(scenario: ResponseScenario, offset: int) -> str:
    return f"fc_chunkwise_{scenario.name}_{offset}"


def _error_event(scenario: ResponseScenario) -> dict[str, Any]:
    error = dict(scenario.error or {})
    if scenario.llama_cpp:
        # llama.cpp's own error object: an HTTP-like integer code.
        return {
            "error": {
                "code": 500,
                "message": error.get("message"),
                "type": error.get("type") or "server_error",
            }
        }
    if scenario.style.error_shape == "flat":
        return {
            "type": "error",
            "code": error.get("code") or error.get("type"),
            "message": error.get("message"),
            "param": error.get("param"),
        }
    return {"type": "error", "error": error}


def _payloads(scenario: ResponseScenario, request: _Request) -> list[dict[str, Any]]:
    writer = _Writer(scenario)
    writer.add(
        "response.created", response=_response(scenario, request, "in_progress", [], final=False)
    )
    writer.add(
        "response.in_progress",
        response=_response(scenario, request, "in_progress", [], final=False),
    )
    # llama.cpp finishes every item at the end (rule 5); OpenAI as it goes.
    finish_now = not scenario.llama_cpp
    output: list[dict[str, Any]] = []
    if scenario.reasoning:
        output.append(_reasoning(scenario, writer, len(output), finish=finish_now))
    for tool in scenario.tool_items:  # rule 8
        output.append(_tool_item(tool, writer, len(output)))
    if scenario.calls_first:
        output += _calls(scenario, writer, len(output))  # rule 2: before the message
    message: dict[str, Any] | None = None
    if scenario.content:
        finish_message = finish_now and scenario.outcome != "error"
        message = _message(scenario, writer, len(output), finish=finish_message)
        output.append(message)
    if scenario.outcome == "error":
        writer.events.append(_error_event(scenario))
        if scenario.llama_cpp:
            return writer.events  # the bare frame ends llama.cpp's stream
        if message is not None:
            message["status"] = "incomplete"
        writer.add(
            "response.failed", response=_response(scenario, request, "failed", output, final=True)
        )
        return writer.events
    if not scenario.calls_first:
        output += _calls(scenario, writer, len(output))
    if scenario.llama_cpp:
        for position, item in enumerate(output):
            if item["type"] == "message":
                _finish_message(scenario, writer, position, item)
            else:
                writer.add("response.output_item.done", item=item)
    status = _status(scenario)
    terminal = {"completed": "response.completed", "incomplete": "response.incomplete"}[status]
    writer.add(terminal, response=_response(scenario, request, status, output, final=True))
    return writer.events


def _numbered(scenario: ResponseScenario, payloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Keepalives inserted (rule 6) and sequence numbers given (rule 1)."""
    events: list[dict[str, Any]] = []
    for position, payload in enumerate(payloads):
        if scenario.style.keepalive and position % 3 == 0:
            events.append({"type": "keepalive"})
        events.append(payload)
    if scenario.llama_cpp:
        return events
    # Sequence numbers come right after the type, where OpenAI writes them.
    return [
        {"type": event["type"], "sequence_number": number, **event} if "type" in event else event
        for number, event in enumerate(events)
    ]


def response_scenario_payloads(
    scenario: ResponseScenario,
    *,
    model: str | None = None,
    max_output_tokens: int | None = None,
    echo: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """The JSON objects a scenario streams, in order.

    ``model`` is echoed in the ``response`` objects (the scenario's name
    when None); ``max_output_tokens`` too, and it is the ``output_tokens`` of
    a response cut by it (rule 3); ``echo`` is the request, whose
    :data:`ECHOED` fields the ``response`` objects repeat (rule 7).
    """
    request = _Request(
        model=model if model is not None else scenario.name,
        max_output_tokens=max_output_tokens,
        echo=echo or {},
    )
    return _numbered(scenario, _payloads(scenario, request))


def response_scenario_events(
    scenario: ResponseScenario,
    *,
    model: str | None = None,
    max_output_tokens: int | None = None,
    echo: Mapping[str, Any] | None = None,
) -> list[bytes]:
    """The exact bytes of each SSE event the scenario sends."""
    return [
        response_event_bytes(payload)
        for payload in response_scenario_payloads(
            scenario, model=model, max_output_tokens=max_output_tokens, echo=echo
        )
    ]


def response_event_bytes(payload: Mapping[str, Any]) -> bytes:
    """One SSE event: ``event: <type>`` + ``data: <json>`` + a blank line."""
    data = wire_json(payload)
    etype = payload.get("type")
    # llama.cpp's bare error frame has neither a type nor an event line.
    head = f"event: {etype}\n" if isinstance(etype, str) else ""
    return f"{head}data: {data}\n\n".encode()


def response_scenario_body(
    scenario: ResponseScenario,
    *,
    model: str | None = None,
    max_output_tokens: int | None = None,
) -> bytes:
    """The whole SSE body of a scenario."""
    return b"".join(
        response_scenario_events(scenario, model=model, max_output_tokens=max_output_tokens)
    )


def response_scenario_document(
    scenario: ResponseScenario,
    *,
    model: str | None = None,
    max_output_tokens: int | None = None,
) -> dict[str, Any] | None:
    """The ``response`` object of the scenario's terminal event, or None without one."""
    payloads = response_scenario_payloads(
        scenario, model=model, max_output_tokens=max_output_tokens
    )
    terminal = payloads[-1]
    response = terminal.get("response")
    if terminal.get("type") in _TERMINAL_TYPES and isinstance(response, dict):
        return response
    return None


_TERMINAL_TYPES = frozenset({"response.completed", "response.incomplete", "response.failed"})

"""Chunk shapes: whatever shape a chunk's text comes in, it is read exactly.

A chat delta's ``content``, a tool call's ``arguments`` fragment and a
completion's ``text`` reach the accumulators in many shapes: escaped or raw,
in chunks the same but for their text or varying elsewhere, beside other
fields, after a finish.  Chat has one short path, for a delta that carries
only its ``content`` (:class:`chunkwise.chat.Accumulator`); every other chunk
goes the general way.  Defended here:

* a differential property on generated streams of both chunk APIs (texts
  with quotes, backslashes, escapes, raw control characters, non-ASCII and
  astral characters, empty texts; key orders, whitespace, extra fields that
  stay or vary, several choices, finish, usage and error events, tool calls):
  a chat delta carrying only its text gives the events, the result and the
  snapshot changes the same delta gives beside a null field (which takes the
  general path);
* streams as real servers send them (the same chunk but for its text; a
  tool call's arguments in fragments; reasoning beside an empty content)
  give every text, exactly (whole bodies: reads change nothing, as
  ``test_split_invariance.py`` proves for every parser);
* a text reads as :func:`json.loads` reads its chunk: escapes decoded, raw
  control characters refused.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chunkwise
from helpers.reads import parse_chat, parse_completion

#: Stands for a text that is written into the data raw, unescaped.
RAW = "RAW-TEXT-SLOT-7f3a"
TEXTS = st.text(
    alphabet=st.one_of(
        st.sampled_from('"\\/\x00\x01\n\r\t\x1f\x7f \u2028é東🙂ab'),
        st.characters(codec="utf-8"),
    ),
    max_size=6,
)
USAGE = {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}

Event = tuple[str, str]  # (SSE event type, data)
Accumulator = chunkwise.chat.Accumulator | chunkwise.completions.Accumulator


# -- generated streams -----------------------------------------------------------


def choice_of(api: str, index: int, text: Any, finish: str | None, tool: int | None) -> Any:
    if api == "completions":
        return {"text": text, "index": index, "logprobs": None, "finish_reason": finish}
    if tool is None:
        return {"index": index, "delta": {"content": text}, "finish_reason": finish}
    call = {"index": tool, "function": {"arguments": text}}
    return {"index": index, "delta": {"tool_calls": [call]}, "finish_reason": finish}


def padded(choices: Any) -> Any:
    """The same chat choices, each delta beside a null ``refusal``.

    A null ``refusal`` is no value, so it changes nothing but the path: a
    delta with more than its content goes the general way.
    """
    if type(choices) is not list:
        return choices
    out = []
    for choice in choices:
        delta = choice.get("delta") if type(choice) is dict else None
        if type(delta) is dict:
            choice = {**choice, "delta": {"refusal": None, **delta}}
        out.append(choice)
    return out


def fed_generally(events: Sequence[Event], structured: bool) -> tuple[Any, Any]:
    """:func:`fed`, each chat chunk decoded and padded (:func:`padded`), fed as a mapping.

    Data that is not a JSON object (``[DONE]``, what a raw text broke) and
    error events are fed as they are.
    """
    accumulator = new_accumulator("chat", structured)
    out: list[chunkwise.Event] = []
    kept: list[bool] = []
    snapshot = accumulator.result
    for kind, data in events:
        try:
            chunk = json.loads(data)
        except ValueError:
            chunk = None
        if kind == "message" and type(chunk) is dict:
            chunk["choices"] = padded(chunk.get("choices"))
            out += accumulator.feed(chunk)
        else:
            out += accumulator.feed_sse(chunkwise.ServerSentEvent(event=kind, data=data))
        kept.append(accumulator.result is snapshot)
        snapshot = accumulator.result
    out += accumulator.end()
    return (out, kept), accumulator.result


@st.composite
def streams(draw: st.DrawFn, api: str) -> list[Event]:
    """A stream of one API as (event type, data) pairs, mostly plain text chunks."""
    separators = draw(st.sampled_from([(",", ":"), (", ", ": "), (",", " : ")]))
    ascii_only = draw(st.booleans())
    top = draw(st.permutations(["id", "object", "created", "model", "choices", "extra"]))
    extra = draw(st.sampled_from(["none", "fixed", "varies"]))
    base = {
        "id": draw(st.sampled_from(["cmpl-1", "", "a", " b", "é"])),
        "object": "text_completion" if api == "completions" else "chat.completion.chunk",
        "created": 1,
        "model": draw(st.sampled_from(["m", "a", " b", "東"])),
    }

    def render(choices: list[Any], raw: str | None = None, **more: Any) -> str:
        chunk: dict[str, Any] = {}
        for key in top:
            if key == "choices":
                chunk["choices"] = choices
            elif key == "extra":
                if extra == "fixed":
                    chunk["system_fingerprint"] = "fp"
                elif extra == "varies":
                    chunk["obfuscation"] = draw(st.text("xyz", min_size=1, max_size=3))
            else:
                chunk[key] = base[key]
        chunk.update(more)
        data = json.dumps(chunk, separators=separators, ensure_ascii=ascii_only)
        if raw is not None:
            data = data.replace(f'"{RAW}"', f'"{raw}"')
        return data

    # Mostly one choice and one kind of text, as real streams are.
    usual_tool = draw(st.sampled_from([None, 0])) if api == "chat" else None
    events: list[Event] = []
    if api == "chat":
        opening = {"index": 0, "delta": {"role": "assistant", "content": ""}}
        events.append(("message", render([opening])))
    for _ in range(draw(st.integers(1, 10))):
        kind = draw(st.sampled_from(KINDS))
        index = draw(st.sampled_from([0] * 5 + [1]))
        tool = usual_tool if api == "completions" else draw(st.sampled_from([usual_tool] * 5 + [1]))
        # Each kind of chunk comes one to three times in a row, with its own texts.
        for text in draw(st.lists(TEXTS, min_size=1, max_size=3)):
            events.append(one_chunk(api, kind, index, tool, text, render))
    if draw(st.booleans()):
        events.append(("message", "[DONE]"))
        if draw(st.booleans()):
            events.append(("message", events[1][1] if len(events) > 1 else "{}"))
    return events


KINDS = (
    ["text"] * 4
    + ["raw"] * 2
    + [
        "two",
        "finish",
        "usage",
        "text and usage",
        "timings",
        "error",
        "error object",
        "logprobs",
        "tool",
    ]
)


def one_chunk(
    api: str,
    kind: str,
    index: int,
    tool: int | None,
    text: str,
    render: Callable[..., str],
) -> Event:
    """One event of a kind (see :data:`KINDS`), with this text."""
    if kind == "raw":  # the text written unescaped: maybe not JSON, maybe other JSON
        return ("message", render([choice_of(api, index, RAW, None, tool)], raw=text))
    if kind == "two":
        return ("message", render([choice_of(api, i, text, None, tool) for i in (0, 1)]))
    if kind == "finish":
        return ("message", render([choice_of(api, index, text, "stop" if text else "", None)]))
    if kind == "usage":
        return ("message", render([], usage=USAGE))
    if kind == "error":  # an error event whose data is shaped like a text chunk
        return ("error", render([choice_of(api, index, text, None, tool)]))
    if kind == "tool" and api == "chat":  # a tool call starts
        call = {"index": tool or 0, "id": "call_1", "type": "function"}
        call["function"] = {"name": "f", "arguments": text}
        return ("message", render([{"index": index, "delta": {"tool_calls": [call]}}]))
    choice = choice_of(api, index, text, None, tool)
    if kind == "text and usage":
        return ("message", render([choice], usage=USAGE))
    if kind == "timings":
        return ("message", render([choice], timings={"predicted_n": 1}))
    if kind == "error object":
        return ("message", render([choice], error={"message": "no"}))
    if kind == "logprobs":
        choice["logprobs"] = {"token_logprobs": [-0.5]}
        if api == "chat":
            choice["logprobs"] = {"content": [{"token": "t", "logprob": -0.5}]}
    return ("message", render([choice]))


def new_accumulator(api: str, structured: bool = False) -> Accumulator:
    if api == "completions":
        return chunkwise.completions.Accumulator()
    if structured:
        return chunkwise.chat.Accumulator(response_format={"type": "json_object"})
    return chunkwise.chat.Accumulator()


def fed(api: str, events: Sequence[Event], structured: bool = False) -> tuple[Any, Any]:
    """The events and the result; with them, after each event, whether the snapshot was kept."""
    accumulator = new_accumulator(api, structured)
    out: list[chunkwise.Event] = []
    kept: list[bool] = []
    snapshot = accumulator.result
    for kind, data in events:
        out += accumulator.feed_sse(chunkwise.ServerSentEvent(event=kind, data=data))
        kept.append(accumulator.result is snapshot)
        snapshot = accumulator.result
    out += accumulator.end()
    return (out, kept), accumulator.result


def body_of(events: Sequence[Event]) -> bytes:
    lines = []
    for kind, data in events:
        if kind != "message":
            lines.append(f"event: {kind}\n")
        lines.extend(f"data: {line}\n" for line in data.split("\n"))
        lines.append("\n")
    return "".join(lines).encode("utf-8", "surrogatepass")


def parsed(api: str, reads: Sequence[bytes]) -> tuple[Any, Any]:
    return parse_completion(reads) if api == "completions" else parse_chat(reads)


# -- the differential property -----------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_a_chat_delta_of_only_its_text_gives_what_the_general_path_gives(
    data: st.DataObject,
) -> None:
    """A delta carrying only its text (chat's short path) has exactly the effects of the same
    delta beside a null field: the same events, result and snapshot changes, whatever the text.
    """
    events = data.draw(streams("chat"))
    structured = data.draw(st.booleans())
    assert fed("chat", events, structured) == fed_generally(events, structured)


def plain_stream(api: str, texts: Sequence[str]) -> list[Event]:
    """A stream as vLLM or llama.cpp write one: the same chunk but for its text."""

    def chunk(choice: Any, **more: Any) -> str:
        body = {"id": "x-1", "object": "o", "created": 1, "model": "m", "choices": [choice]}
        return json.dumps({**body, **more}, ensure_ascii=False)

    events = [("message", chunk(choice_of(api, 0, "", None, None)))]
    events += [("message", chunk(choice_of(api, 0, text, None, None))) for text in texts]
    events.append(("message", chunk(choice_of(api, 0, "", "stop", None))))
    events.append(("message", "[DONE]"))
    return events


@pytest.mark.parametrize("api", ["completions", "chat"])
def test_a_stream_the_same_but_for_its_text_gives_every_text_exactly(
    api: str,
) -> None:
    """Chunks repeating but for their text (quotes, backslashes, escapes, astral characters
    among them) give every text exactly."""
    texts = ["Hello", ", ", "wörld", " 🙂", "", ' "quoted"', "\\", "tab\there", "東京", "!"]
    body = body_of(plain_stream(api, texts))
    whole = parsed(api, [body])
    assert whole[1].status == "complete"
    assert (whole[1].text if api == "completions" else whole[1].content) == "".join(texts)


def test_a_tool_calls_arguments_in_fragments_are_joined_exactly() -> None:
    """Each ``{"index", "function": {"arguments"}}`` fragment continues its call, escaped
    quotes included, through the bytes as through decoded chunks."""

    def chunk(call: Any) -> str:
        choice = {"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": None}
        return json.dumps({"id": "c", "choices": [choice]}, separators=(",", ":"))

    start = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "f"}}
    pieces = ['{"a"', ": ", "1", ", ", '"b": "x"', "}"]
    chunks = [chunk(start)]
    chunks += [chunk({"index": 0, "function": {"arguments": p}}) for p in pieces]
    body = "".join(f"data: {text}\n\n" for text in [*chunks, "[DONE]"]).encode()
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]

    accumulator = chunkwise.chat.Accumulator(tools=tools)
    general_events: list[chunkwise.Event] = []
    for text in chunks:
        general_events += accumulator.feed(json.loads(text))
    general_events += accumulator.feed_sse(chunkwise.ServerSentEvent(data="[DONE]"))
    general = (general_events, accumulator.result)
    events, result = parse_chat([body], tools=tools)
    assert (events, result) == general
    call = result.choices[0].tool_calls[0]
    assert call.parse_arguments() == {"a": 1, "b": "x"}
    fragments = [e.fragment for e in events if type(e) is chunkwise.chat.ToolCallArgumentsDelta]
    assert fragments == pieces


# -- reasoning beside an empty content ---------------------------------------------

# Reasoning tokens, some repeated as models repeat them: a chunk identical to
# the one before (the first two too), but for a field that is not the content.
THINKING = ["\n", "\n", "Let", " me", " me", " think", ".", ".", "\n\n", "\n\n", "Done"]
ANSWER = ["The", " answer", " answer", "."]


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
@pytest.mark.parametrize("beside", ["", None], ids=["empty content", "null content"])
@pytest.mark.parametrize("reasoning_first", [False, True], ids=["content first", "field first"])
@pytest.mark.parametrize("separators", [(", ", ": "), (",", ":")], ids=["spaced", "compact"])
def test_reasoning_beside_an_empty_content_is_kept_whole(
    field: str, beside: str | None, reasoning_first: bool, separators: tuple[str, str]
) -> None:
    """A reasoning token beside ``"content": ""`` or a null content (DeepSeek, vLLM) is kept,
    every repeated token too, through the bytes as through decoded chunks.
    """

    def data(content: str | None, reasoning: str | None) -> str:
        delta = {"content": content, field: reasoning}
        if reasoning_first:
            delta = {field: reasoning, "content": content}
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}
        body = {"id": "chatcmpl-r", "object": "chat.completion.chunk", "created": 1}
        return json.dumps({**body, "model": "m", "choices": [choice]}, separators=separators)

    chunks = [data(beside, token) for token in THINKING]
    chunks += [data(token, None if beside is None else "") for token in ANSWER]
    stop = {"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}
    chunks.append(json.dumps({"id": "chatcmpl-r", "model": "m", "choices": [stop]}))
    body = "".join(f"data: {text}\n\n" for text in [*chunks, "[DONE]"]).encode()
    # Decoded chunks, fed as mappings.
    accumulator = chunkwise.chat.Accumulator()
    general_events: list[chunkwise.Event] = []
    for text in chunks:
        general_events += accumulator.feed(json.loads(text))
    general_events += accumulator.feed_sse(chunkwise.ServerSentEvent(data="[DONE]"))
    general = (general_events, accumulator.result)
    events, result = parse_chat([body])
    assert (events, result) == general
    assert result.status == "complete"
    # As the openai SDK's delta merge has it: every string concatenated.
    assert result.choices[0].reasoning == "".join(THINKING)
    assert result.content == "".join(ANSWER)
    assert [e.text for e in events if type(e) is chunkwise.chat.ReasoningDelta] == THINKING
    assert [e.text for e in events if type(e) is chunkwise.chat.TextDelta] == ANSWER


# -- a text reads as JSON reads it ------------------------------------------------

PREFIX, SUFFIX = '{"choices":[{"text":"', '","index":0}]}'


@pytest.mark.parametrize(
    "middle",
    [
        "plain words",
        "",
        "é東🙂\u2028\x7f",  # not control characters in JSON's sense
        "a/b",
        'a"b',
        '","index":1}]}{"x":"',
        "a\\nb",
        "a\\u0041",
        'a\\"b',
        "a\\\\",  # an escaped backslash last: the next quote closes the string
        "\\ud83d\\ude42 \\ud800",  # a pair, and a lone surrogate as json.loads reads it
        "a\\",  # the backslash escapes the closing quote
        'a\\"',  # an escaped quote last, then the closing one
        "a\\x",  # not an escape
        "a\\u00",
        'a\\n","index":0}]}{"x":"',  # the string closes early
        '","text":"over',  # a repeated key, the last one winning (or another field)
        '","content":"over',
        *(f"a{chr(c)}b" for c in range(0x20)),  # strict: no raw control characters
        *(f"a\\n{chr(c)}" for c in range(0x20)),
    ],
)
@pytest.mark.parametrize("api", ["completions", "chat"])
def test_a_text_reads_exactly_as_json_reads_its_chunk(api: str, middle: str) -> None:
    """A text written raw into its chunk is what :func:`json.loads` (strict) reads there: escapes
    decoded, a quote closing it; data JSON refuses fails the stream with an InvalidChunk."""
    prefix, suffix = PREFIX, SUFFIX
    if api == "chat":
        prefix = '{"choices":[{"delta":{"content":"'
        suffix = '"},"index":0}]}'
    data = prefix + middle + suffix
    accumulator = new_accumulator(api)
    accumulator.feed_sse(chunkwise.ServerSentEvent(data=prefix + "opening" + suffix))
    accumulator.feed_sse(chunkwise.ServerSentEvent(data=data))
    result = accumulator.result
    try:
        chunk = json.loads(data)
    except ValueError:
        assert result.status == "failed"
        assert isinstance(result.error, chunkwise.errors.InvalidChunk)
        return
    choice = chunk["choices"][0]
    text = choice["text"] if api == "completions" else choice["delta"].get("content")
    want = "opening" + (text if type(text) is str else "")
    got = result.text if isinstance(result, chunkwise.completions.Result) else result.content
    assert (result.status, got) == ("streaming", want)

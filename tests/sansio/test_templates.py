"""Chunk templates (:mod:`chunkwise._templates`): with them or without, the same stream.

A chunk shaped like the last hot-path chunk but for its text is read without
JSON.  That must change nothing but the time taken:

* a differential property: for generated streams of both chunk APIs (texts
  with quotes, backslashes, escapes, raw control characters, non-ASCII and
  astral characters, empty texts; key orders, whitespace, extra fields that
  stay or vary, several choices, finish, usage and error events, tool calls),
  the events and the result with templates equal those without, through
  ``feed_event`` and through the byte parsers cut anywhere;
* a table of what learning refuses, and of the matches a template refuses;
* on the streams real servers send, templates are actually used, and at most
  one extra parse is spent on a stream whose chunks vary elsewhere.

"Without templates" is :meth:`ChunkTemplate.learn` replaced by one that
never learns, so the accumulator takes its ordinary path every time.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chunkwise
from chunkwise._templates import ChunkTemplate
from helpers import parse_chat, parse_completion, split_at

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


@contextmanager
def templates_off() -> Iterator[None]:
    with mock.patch.object(ChunkTemplate, "learn", return_value=False):
        yield


@contextmanager
def counting_matches() -> Iterator[list[str | None]]:
    """Every :meth:`ChunkTemplate.match` answer, in order."""
    answers: list[str | None] = []
    original = ChunkTemplate.match

    def match(self: ChunkTemplate, data: str) -> str | None:
        answers.append(original(self, data))
        return answers[-1]

    with mock.patch.object(ChunkTemplate, "match", match):
        yield answers


# -- generated streams -----------------------------------------------------------


def choice_of(api: str, index: int, text: Any, finish: str | None, tool: int | None) -> Any:
    if api == "completions":
        return {"text": text, "index": index, "logprobs": None, "finish_reason": finish}
    if tool is None:
        return {"index": index, "delta": {"content": text}, "finish_reason": finish}
    call = {"index": tool, "function": {"arguments": text}}
    return {"index": index, "delta": {"tool_calls": [call]}, "finish_reason": finish}


@st.composite
def streams(draw: st.DrawFn, api: str) -> list[Event]:
    """A stream of one API as (event type, data) pairs, mostly hot-path chunks."""
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

    # Mostly one choice and one kind of text, so that templates are learned and used.
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
    api: str, kind: str, index: int, tool: int | None, text: str, render: Callable[..., str]
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


def same_with_and_without(run: Callable[[], tuple[Any, Any]]) -> None:
    with_templates = run()
    with templates_off():
        without = run()
    assert with_templates == without


# -- the differential property -----------------------------------------------------


@pytest.mark.parametrize("api", ["completions", "chat"])
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_templates_change_no_event_and_no_result_through_feed_event(
    api: str, data: st.DataObject
) -> None:
    events = data.draw(streams(api))
    structured = api == "chat" and data.draw(st.booleans())
    same_with_and_without(lambda: fed(api, events, structured))


@pytest.mark.parametrize("api", ["completions", "chat"])
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_templates_change_nothing_through_the_byte_parser_cut_anywhere(
    api: str, data: st.DataObject
) -> None:
    body = body_of(data.draw(streams(api)))
    cuts = data.draw(st.lists(st.integers(0, len(body)), max_size=8))
    reads = split_at(body, cuts)
    same_with_and_without(lambda: parsed(api, reads))


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
def test_every_split_of_a_templated_stream_gives_what_the_whole_body_gives(api: str) -> None:
    texts = ["Hello", ", ", "wörld", " 🙂", "", ' "quoted"', "\\", "tab\there", "東京", "!"]
    body = body_of(plain_stream(api, texts))
    whole = parsed(api, [body])
    with templates_off():
        assert parsed(api, [body]) == whole
    assert whole[1].status == "complete"
    for cut in range(len(body) + 1):
        assert parsed(api, split_at(body, [cut])) == whole, cut


# -- templates are used, and learning is bounded ---------------------------------


@pytest.mark.parametrize("api", ["completions", "chat"])
def test_a_stream_the_same_but_for_its_text_is_read_by_template(api: str) -> None:
    texts = [f" word{i}" for i in range(50)]
    with counting_matches() as answers:
        _, result = fed(api, plain_stream(api, texts))
    # The opening chunk (an empty text) teaches the template, every text
    # chunk matches it, the finish chunk misses it.
    assert answers == [*texts, None]
    assert (result.text if api == "completions" else result.content) == "".join(texts)


@pytest.mark.parametrize("api", ["completions", "chat"])
def test_a_stream_whose_chunks_vary_elsewhere_spends_one_extra_parse(api: str) -> None:
    events = plain_stream(api, [f" w{i}" for i in range(20)])
    varied = [
        (kind, data.replace('"id": "x-1"', f'"id": "x-1", "obfuscation": "{i:03d}"'))
        for i, (kind, data) in enumerate(events)
    ]
    loads = json.loads
    parses: list[str] = []

    def counted(text: str, *args: Any, **kwargs: Any) -> Any:
        parses.append(text)
        return loads(text, *args, **kwargs)

    with counting_matches() as answers, mock.patch("json.loads", counted):
        outcome = fed(api, varied)
    assert answers == [None]  # learned once, missed once, never tried again
    assert len(parses) == 1  # the one verification
    with templates_off():
        assert fed(api, varied) == outcome


@pytest.mark.parametrize("api", ["completions", "chat"])
def test_a_result_snapshot_is_rebuilt_when_it_would_be_without_templates(api: str) -> None:
    # TGI sends an empty id on every chunk: no id, but the accumulator looks
    # at it each time, and a completion's snapshot is rebuilt even for an
    # empty text.
    events = [
        (kind, data.replace('"id": "x-1"', '"id": ""'))
        for kind, data in plain_stream(api, ["a", "", "b", "", ""])
    ]
    with counting_matches() as answers:
        same_with_and_without(lambda: fed(api, events))
    assert answers.count("") >= 2


def test_a_tool_calls_arguments_are_read_by_template() -> None:
    def chunk(call: Any) -> str:
        choice = {"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": None}
        return json.dumps({"id": "c", "choices": [choice]}, separators=(",", ":"))

    start = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "f"}}
    pieces = ['{"a"', ": ", "1", ", ", '"b": "x"', "}"]
    events = [("message", chunk(start))]
    events += [("message", chunk({"index": 0, "function": {"arguments": p}})) for p in pieces]
    events += [("message", "[DONE]")]
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]

    def run() -> tuple[Any, Any]:
        accumulator = chunkwise.chat.Accumulator(tools=tools)
        out: list[chunkwise.Event] = []
        for kind, data in events:
            out += accumulator.feed_sse(chunkwise.ServerSentEvent(event=kind, data=data))
        return out, accumulator.result

    with counting_matches() as answers:
        outcome = run()
    # Learned from ": "; the escaped '"b": "x"' is read by JSON's scanner
    # (rule 3); [DONE] misses.
    assert answers == ["1", ", ", '"b": "x"', "}", None]
    assert outcome[1].choices[0].tool_calls[0].parse_arguments() == {"a": 1, "b": "x"}
    same_with_and_without(run)


# -- a template is only for chunks with nothing but their text --------------------

# Reasoning tokens, some repeated as models repeat them: a chunk identical to
# the one before (the first two too, so a template would be learned from the
# first and match the second), but for a field that is not the text.
THINKING = ["\n", "\n", "Let", " me", " me", " think", ".", ".", "\n\n", "\n\n", "Done"]
ANSWER = ["The", " answer", " answer", "."]


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
@pytest.mark.parametrize("beside", ["", None], ids=["empty content", "null content"])
@pytest.mark.parametrize("reasoning_first", [False, True], ids=["content first", "field first"])
@pytest.mark.parametrize("separators", [(", ", ": "), (",", ":")], ids=["spaced", "compact"])
def test_reasoning_beside_an_empty_content_is_never_read_by_a_content_template(
    field: str, beside: str | None, reasoning_first: bool, separators: tuple[str, str]
) -> None:
    """A template may read only chunks whose delta is their text alone; a reasoning token beside
    ``"content": ""`` (DeepSeek, vLLM) goes the general way, so every token is kept.
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
    # The general path: decoded chunks (feed_chunk never reads by template).
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
    for cut in range(0, len(body) + 1, 37):  # and read in pieces
        assert parse_chat(split_at(body, [cut, cut + 11])) == general, cut


# -- what learning refuses, what a match refuses ----------------------------------

TEXT_PATH = ("choices", 0, "text")


@pytest.mark.parametrize(
    ("data", "learned"),
    [
        pytest.param('{"id":"c","choices":[{"text":"hi","index":0}]}', True, id="plain"),
        pytest.param('{"choices":[{"text":""}],"id":"c"}', True, id="empty text, unique"),
        pytest.param('{"id":"c","choices":[{"text":"a\\"b"}]}', False, id="escaped quote"),
        pytest.param('{"id":"c","choices":[{"text":"a\\\\b"}]}', False, id="escaped backslash"),
        pytest.param('{"id":"c","choices":[{"text":"a\\nb"}]}', False, id="escaped newline"),
        pytest.param('{"id":"c","choices":[{"text":"caf\\u00e9"}]}', False, id="ensure_ascii"),
        pytest.param('{"id":"c","choices":[{"text":"a\\/b"}]}', False, id="escaped solidus"),
        pytest.param('{"id":"hi","choices":[{"text":"hi"}]}', False, id="text is the id"),
        pytest.param('{"model":"hi","choices":[{"text":"hi"}]}', False, id="text is the model"),
        pytest.param('{"choices":[{"hi":1,"text":"hi"}]}', False, id="text is a key"),
        pytest.param('{"choices":[{"text":""}],"id":""}', False, id="empty text, twice"),
        pytest.param('{"choices":[{"text":","}],"a":"x","b":"y"}', False, id="text is structure"),
        # The only unescaped literal is not the text: the probe shows it.
        pytest.param('{"id":"hi","choices":[{"text":"h\\u0069"}]}', False, id="probe: the id"),
        pytest.param('{"choices":[{"text":"x","text":"x"}]}', False, id="repeated key, twice"),
        pytest.param(
            '{"choices":[{"text":"h\\u0069","text":"hi"}]}', True, id="repeated key, last wins"
        ),
        pytest.param(
            '{"choices":[{"text":"hi","text":"h\\u0069"}]}', False, id="probe: overridden key"
        ),
    ],
)
def test_learning_refuses_what_it_cannot_prove(data: str, learned: bool) -> None:
    template = ChunkTemplate()
    assert template.learn(data, json.loads(data), TEXT_PATH, (0,)) is learned
    assert template.active is learned


def test_a_probe_mismatch_stops_learning_and_a_cheap_refusal_does_not() -> None:
    template = ChunkTemplate()
    escaped = '{"choices":[{"text":"caf\\u00e9"}]}'
    assert not template.learn(escaped, json.loads(escaped), TEXT_PATH, (0,))
    assert template.learning  # no parse was spent
    overridden = '{"choices":[{"text":"hi","text":"h\\u0069"}]}'
    assert not template.learn(overridden, json.loads(overridden), TEXT_PATH, (0,))
    assert not template.learning  # one parse spent: no more this stream


PREFIX, SUFFIX = '{"choices":[{"text":"', '","index":0}]}'


@pytest.mark.parametrize(
    ("middle", "matched"),
    [
        ("plain words", True),
        ("", True),
        ("é東🙂\u2028\x7f", True),  # not control characters in JSON's sense
        ("a/b", True),
        ('a"b', False),
        ('","index":1}]}{"x":"', False),
        # Escapes: read by JSON's scanner when the literal closes where the suffix begins.
        ("a\\nb", True),
        ("a\\u0041", True),
        ('a\\"b', True),
        ("a\\\\", True),  # an escaped backslash last: the next quote closes it
        ("\\ud83d\\ude42 \\ud800", True),  # a pair, and a lone surrogate as json.loads reads it
        ("a\\", False),  # the backslash escapes the suffix's quote
        ('a\\"', True),  # an escaped quote last, then the suffix's closes it
        ("a\\x", False),  # not an escape
        ("a\\u00", False),
        ('a\\n","index":0}]}{"x":"', False),  # the literal closes early
        *((f"a{chr(c)}b", False) for c in range(0x20)),
        *((f"a\\n{chr(c)}", False) for c in range(0x20)),  # strict: no raw control characters
    ],
)
def test_a_match_takes_only_a_middle_json_reads_as_itself(middle: str, matched: bool) -> None:
    template = ChunkTemplate()
    learned = PREFIX + "hi" + SUFFIX
    assert template.learn(learned, json.loads(learned), TEXT_PATH, (0,))
    data = PREFIX + middle + SUFFIX
    want = json.loads(data)["choices"][0]["text"] if matched else None
    assert template.match(data) == want
    assert template.active is matched


@pytest.mark.parametrize(
    "data",
    [
        PREFIX + SUFFIX[1:],  # prefix and suffix overlap
        PREFIX + "x" + SUFFIX + " ",
        " " + PREFIX + "x" + SUFFIX,
        PREFIX + "x" + SUFFIX.replace("0", "1"),
    ],
)
def test_data_that_is_not_prefix_middle_suffix_misses(data: str) -> None:
    template = ChunkTemplate()
    learned = PREFIX + "hi" + SUFFIX
    assert template.learn(learned, json.loads(learned), TEXT_PATH, (0,))
    assert template.match(data) is None


def test_a_template_that_matched_may_be_replaced_one_that_did_not_may_not() -> None:
    template = ChunkTemplate()
    learned = PREFIX + "hi" + SUFFIX
    assert template.learn(learned, json.loads(learned), TEXT_PATH, (0,))
    assert template.match(PREFIX + "x" + SUFFIX) == "x"
    assert template.match("{}") is None
    assert template.learning  # it saved a parse: the next one may be spent
    assert template.learn(learned, json.loads(learned), TEXT_PATH, (0,))
    assert template.match("{}") is None
    assert not template.learning

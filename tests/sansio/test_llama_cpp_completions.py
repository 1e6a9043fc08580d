"""llama.cpp's ``llama-server`` answering ``POST /v1/completions``: real captures, parsed exactly.

The files ``tests/data/llama_cpp/completions_*`` were captured from
llama-server (built from llama-cpp-python 0.3.36's sources) serving the
scripted tiny model, by ``tests/llama_server/capture.py`` (see
``completions_server.json``).  The model is greedy and answers
:data:`SENTENCE` to the prompt ``"Say hi"``; only the ``chatcmpl-`` ids,
``created``, ``system_fingerprint``, ``timings`` and the order in which two
choices interleave change from one capture to the next, so the expectations
read those from the captured bytes and state everything else.

What the captures show of llama.cpp (and :func:`test_the_captures_show_llama_cpps_wire`
checks): one chunk per token, incomplete UTF-8 held back (``ñ``'s and ``😀``'s
byte tokens arrive whole); an empty-text chunk for the end token; the last
chunk of each choice without text, with its ``finish_reason``, its own usage
and ``timings``; ``chatcmpl-`` ids; ``data: [DONE]``; ``data: null`` first
when given several prompts (not with ``n``); chat-style ``logprobs.content``;
``echo`` and ``suffix`` accepted and ignored; a 400 for a prompt longer than
the slot; an error mid-stream as ``data: {"error": ...}`` with no ``[DONE]``.
chunkwise parses each (whole here; the same in any reads, proven over these captures
by ``test_split_invariance.py``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

import chunkwise
from helpers.data import DATA
from helpers.reads import parse_completion

LLAMA = DATA / "llama_cpp"
STREAMS = [
    "text",
    "max_tokens",
    "prompts",
    "n",
    "logprobs",
    "echo",
    "suffix",
    "error_mid_stream",
]

#: The scripted model's answer (27 tokens with the end token).
SENTENCE = (
    'Hello world!\nThe tiny model streams café, 日本語 🙂 "quotes" back\\slash and jalapeño 😀.'
)
#: One text chunk per token, as llama.cpp sent them: "ñ" (2 byte tokens) and
#: "😀" (4) arrive whole, llama.cpp holds incomplete UTF-8 back.
DELTAS = [
    "Hello", " world", "!\n", "The", " tiny", " model", " streams", " caf", "é", ",", " 日本",
    "語", " 🙂", ' "quotes"', " back\\slash", " and", " jalape", "ñ", "o", " ", "😀", ".",
]  # fmt: skip
ERROR_MESSAGE = "context shift cannot be used for shared prompt"


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    return {
        "completion_tokens": completion_tokens,
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": 0},
    }


def request(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((LLAMA / f"completions_{name}.request.json").read_bytes())
    return loaded


def body(name: str) -> bytes:
    return (LLAMA / f"completions_{name}.sse").read_bytes()


def json_body(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((LLAMA / f"completions_{name}.json").read_bytes())
    return loaded


def wire(data: bytes) -> list[Any]:
    """The data of each event, decoded by hand (every llama.cpp event is one ``data:`` line)."""
    datas = [line[6:] for line in data.decode().split("\n") if line.startswith("data: ")]
    return [data if data == "[DONE]" else json.loads(data) for data in datas]


def chunks(name: str) -> list[dict[str, Any]]:
    """The stream's JSON objects (no ``null``, no ``[DONE]``)."""
    return [event for event in wire(body(name)) if isinstance(event, dict)]


def finals(name: str) -> list[dict[str, Any]]:
    """Each choice's last chunk (the one with its finish_reason), in arrival order."""
    return [c for c in chunks(name) if c.get("choices") and c["choices"][0]["finish_reason"]]


def captured_id(name: str) -> str:
    [found] = {c["id"] for c in chunks(name) if "error" not in c}
    assert isinstance(found, str)
    return found


def parse(
    name: str,
) -> tuple[list[chunkwise.Event], chunkwise.completions.Result]:
    return parse_completion([body(name)])


def text_events(deltas: Sequence[str], index: int = 0) -> Iterator[chunkwise.completions.TextDelta]:
    for delta in deltas:
        yield chunkwise.completions.TextDelta(choice_index=index, text=delta)


# -- the wire ------------------------------------------------------------------------


@pytest.mark.parametrize("name", STREAMS)
def test_the_captures_show_llama_cpps_wire(name: str) -> None:
    events = wire(body(name))
    objects = chunks(name)
    assert captured_id(name).startswith("chatcmpl-")
    for chunk in objects:
        if "error" in chunk:
            continue
        assert chunk["object"] == "text_completion"
        assert chunk["model"] == "tiny"
        assert chunk["system_fingerprint"].startswith("b")
        [choice] = chunk["choices"]  # one choice per chunk, whatever the request
        assert sorted(choice) == ["finish_reason", "index", "logprobs", "text"]
        # Usage and timings come with a finish_reason only, on a chunk without text.
        assert ("usage" in chunk) is ("timings" in chunk) is (choice["finish_reason"] is not None)
        if choice["finish_reason"] is not None:
            assert choice["text"] == ""
            assert choice["logprobs"] is None
    if name == "error_mid_stream":
        error = {"code": 500, "message": ERROR_MESSAGE, "type": "server_error"}
        frame = b"\n\ndata: " + json.dumps({"error": error}, separators=(",", ":")).encode()
        assert body(name).endswith(frame + b"\n\n")
        assert "[DONE]" not in events and finals(name) == []
    else:
        assert events[-1] == "[DONE]"
        choices = 2 if name in ("prompts", "n") else 1
        assert len(finals(name)) == choices
    # data: null opens a stream of several prompts only (n's copies share one task).
    assert (events[0] is None) is (name == "prompts")
    assert events.count(None) == (1 if name == "prompts" else 0)


def test_one_token_one_chunk_and_an_empty_chunk_for_the_end_token() -> None:
    texts = [c["choices"][0]["text"] for c in chunks("text")]
    assert texts == [*DELTAS, "", ""]
    assert finals("text")[0]["usage"] == usage(4, 27)
    assert finals("text")[0]["timings"]["predicted_n"] == 27


# -- one prompt ------------------------------------------------------------------------


def test_text() -> None:
    events, result = parse("text")
    assert result.status == "complete" and result.reason is None and result.error is None
    assert result.id == captured_id("text")
    assert result.model == "tiny"
    assert result.created == chunks("text")[0]["created"]
    assert result.system_fingerprint == chunks("text")[0]["system_fingerprint"]
    assert result.text == SENTENCE
    [choice] = result.choices
    assert choice == chunkwise.completions.ChoiceResult(
        index=0, text=SENTENCE, finish_reason="stop", finished=True
    )
    assert result.usage == usage(4, 27)
    assert result.server_timings == {"timings": finals("text")[0]["timings"]}
    assert result.done_received
    assert result.anomalies == ()
    assert events == [
        *text_events(DELTAS),
        chunkwise.chat.ChoiceFinished(choice_index=0, finish_reason="stop"),
        chunkwise.UsageReported(usage=usage(4, 27)),
        chunkwise.StreamCompleted(result=result),
    ]


def test_max_tokens_cut_inside_a_character_finishes_with_length() -> None:
    assert request("max_tokens")["max_tokens"] == 18
    events, result = parse("max_tokens")
    cut = SENTENCE[: SENTENCE.index("ñ")]
    # The 18th token is ñ's first byte: llama.cpp holds it back and never sends it.
    assert "".join(DELTAS[:17]) == cut
    assert result.status == "complete"
    assert result.choice(0) == chunkwise.completions.ChoiceResult(
        index=0, text=cut, finish_reason="length", finished=True
    )
    assert result.usage == usage(4, 18)
    assert result.anomalies == ()
    assert events == [
        *text_events(DELTAS[:17]),
        chunkwise.chat.ChoiceFinished(choice_index=0, finish_reason="length"),
        chunkwise.UsageReported(usage=usage(4, 18)),
        chunkwise.StreamCompleted(result=result),
    ]


@pytest.mark.parametrize("name", ["echo", "suffix"])
def test_echo_and_suffix_are_accepted_and_ignored(name: str) -> None:
    # This llama.cpp's "echo" belongs to its chat parser, and "suffix" is not
    # read: the answer is the one without them, no prompt in the text.
    assert request(name).keys() - request("text").keys() == {name}
    _, result = parse(name)
    _, plain = parse("text")
    assert result.text == SENTENCE
    assert result.choices == plain.choices
    assert result.usage == plain.usage
    assert result.status == "complete" and result.anomalies == ()


def test_the_non_streamed_answer_is_the_streams_result() -> None:
    answer = json_body("text_nonstream")
    assert answer["id"].startswith("chatcmpl-")
    assert answer["object"] == "text_completion"
    accumulator = chunkwise.completions.Accumulator()
    accumulator.feed(answer)
    accumulator.end()
    result = accumulator.result
    _, streamed = parse("text")
    assert result.choices == streamed.choices
    assert result.text == SENTENCE
    assert result.usage == streamed.usage == usage(4, 27)
    assert result.server_timings == {"timings": answer["timings"]}
    # No [DONE] in a JSON answer; every choice finished, so it is complete all the same.
    assert result.status == "complete" and not result.done_received
    assert result.anomalies == ()


# -- several choices -----------------------------------------------------------------


def test_several_prompts_start_with_data_null() -> None:
    assert request("prompts")["prompt"] == ["Say hi", "Say hi again"]
    events, result = parse("prompts")
    start = "".join(DELTAS[:4])
    assert result.status == "complete"
    assert result.id == captured_id("prompts")
    assert result.choices == tuple(
        chunkwise.completions.ChoiceResult(
            index=i, text=start, finish_reason="length", finished=True
        )
        for i in (0, 1)
    )
    # Each choice's last chunk carries that prompt's usage ("Say hi again" has
    # 9 tokens): the last one to arrive is the result's usage.
    per_choice = {f["choices"][0]["index"]: f["usage"] for f in finals("prompts")}
    assert per_choice == {0: usage(4, 4), 1: usage(9, 4)}
    assert result.usage == finals("prompts")[-1]["usage"]
    [anomaly] = result.anomalies
    assert (anomaly.kind, anomaly.count) == ("null event", 1)

    # The two choices interleave; each one's events come in its own order.
    arrived = [
        (c["choices"][0]["index"], c["choices"][0]["text"], c["choices"][0]["finish_reason"])
        for c in chunks("prompts")
    ]
    expected: list[chunkwise.Event] = []
    for index, text, finish_reason in arrived:
        if text:
            expected.append(chunkwise.completions.TextDelta(choice_index=index, text=text))
        if finish_reason:
            expected.append(
                chunkwise.chat.ChoiceFinished(choice_index=index, finish_reason="length")
            )
            expected.append(chunkwise.UsageReported(usage=per_choice[index]))
    assert [type(e) for e in events[:1]] == [chunkwise.AnomalyDetected]
    assert events[1:-1] == expected
    assert events[-1] == chunkwise.StreamCompleted(result=result)


def test_n_gives_two_choices_without_data_null() -> None:
    assert request("n")["n"] == 2
    events, result = parse("n")
    start = "".join(DELTAS[:4])
    assert result.status == "complete"
    assert [(c.index, c.text, c.finish_reason) for c in result.choices] == [
        (0, start, "length"),
        (1, start, "length"),
    ]
    assert result.usage == usage(4, 4)
    assert result.anomalies == ()
    for index in (0, 1):
        mine = [
            e
            for e in events
            if isinstance(e, chunkwise.completions.TextDelta) and e.choice_index == index
        ]
        assert mine == list(text_events(DELTAS[:4], index))


# -- logprobs ------------------------------------------------------------------------


def test_logprobs_arrive_chat_style_one_entry_per_chunk() -> None:
    assert (request("logprobs")["logprobs"], request("logprobs")["max_tokens"]) == (2, 19)
    events, result = parse("logprobs")
    sent = [c["choices"][0]["logprobs"] for c in chunks("logprobs")]
    # One entry per text chunk; the final chunk has none.  "ñ"'s two byte
    # tokens are one entry, as their text is one chunk.
    assert sent[-1] is None
    assert all(len(entry["content"]) == 1 for entry in sent[:-1])
    entries = [entry["content"][0] for entry in sent[:-1]]
    assert [e["token"] for e in entries] == DELTAS[:18]
    assert [bytes(e["bytes"]) for e in entries] == [d.encode() for d in DELTAS[:18]]
    assert all(len(e["top_logprobs"]) == 2 for e in entries)

    choice = result.choice(0)
    assert choice.text == "".join(DELTAS[:18])
    assert choice.finish_reason == "length"
    assert result.usage == usage(4, 19)
    # Merged into one chat-style content list, exactly as sent.
    assert choice.logprobs == {"content": entries}
    assert result.anomalies == ()
    assert [e for e in events if isinstance(e, chunkwise.completions.TextDelta)] == list(
        text_events(DELTAS[:18])
    )


def test_a_logprobs_snapshot_never_changes() -> None:
    parser = chunkwise.completions.Parser()
    data = body("logprobs")
    middle = data.index(b"\n\n", len(data) // 2) + 2
    parser.feed(data[:middle])
    snapshot = parser.result
    before = json.dumps(snapshot.choice(0).logprobs)
    parser.feed(data[middle:])
    parser.end()
    assert json.dumps(snapshot.choice(0).logprobs) == before
    earlier, final = snapshot.choice(0).logprobs, parser.result.choice(0).logprobs
    assert earlier is not None and final is not None
    assert 0 < len(earlier["content"]) < len(final["content"]) == 18


# -- errors --------------------------------------------------------------------------


def test_error_mid_stream_keeps_both_choices_text() -> None:
    assert request("error_mid_stream")["n"] == 2
    events, result = parse("error_mid_stream")
    received = "".join(DELTAS[:13])
    assert result.status == "failed"
    assert result.done_received is False
    assert [(c.index, c.text, c.finish_reason, c.finished) for c in result.choices] == [
        (0, received, None, False),
        (1, received, None, False),
    ]
    assert result.usage is None
    error = result.server_error
    assert error is not None
    assert (error.message, error.code, error.type) == (ERROR_MESSAGE, 500, "server_error")
    assert events[-2:] == [
        chunkwise.StreamErrorReceived(error=error),
        chunkwise.StreamFailed(result=result, error=error),
    ]


def test_a_prompt_longer_than_the_slot_is_a_400() -> None:
    assert len(request("context_exceeded")["prompt"]) == len("Hi " * 600)
    answer = json_body("context_exceeded")
    message = (
        "request (1200 tokens) exceeds the available context size (512 tokens), try increasing it"
    )
    assert answer == {
        "error": {
            "code": 400,
            "message": message,
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 1200,
            "n_ctx": 512,
        }
    }
    # The error body read as every error body is (HTTPStatusError.error too).
    accumulator = chunkwise.completions.Accumulator()
    accumulator.feed(answer)
    error = accumulator.result.server_error
    assert error is not None
    assert (error.message, error.code, error.type) == (message, 400, "exceed_context_size_error")
    assert accumulator.result.status == "failed"

"""``chunkwise serve`` answers ``POST /v1/completions``: streamed and not, in four servers' styles.

The answers are checked through chunkwise's own completions client (the
stream, reconstructed) and as raw documents; the wire quirks of each style
are checked on the chunks themselves; the request checks refuse what OpenAI
refuses, with its 400, over HTTP.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import chunkwise
from chunkwise.testing import LoopbackServer
from chunkwise_tools.server import ServerOptions, open_chat_server
from chunkwise_tools.server._completion_wire import COMPLETION_STYLES, completion_chunks
from chunkwise_tools.server._request_checks import check_completions_request
from chunkwise_tools.server._scenarios import SCENARIOS
from helpers.reads import parse_completion
from helpers.servers import http_exchange

TEXT = SCENARIOS["text"].text
STYLES = ["text", *COMPLETION_STYLES]


def _body(model: Any = "text", **extra: Any) -> dict[str, Any]:
    return {"model": model, "prompt": "Say hi", **extra}


async def _post(server: LoopbackServer, body: Any) -> tuple[int, dict[str, str], bytes]:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return await http_exchange(server, "POST", "/v1/completions", raw)


@pytest.mark.parametrize("model", STYLES)
@pytest.mark.parametrize("write_size", [None, 7])
async def test_each_style_streams_the_scenario_text(model: str, write_size: int | None) -> None:
    async with open_chat_server(ServerOptions(write_size=write_size)) as server:
        endpoint = server.endpoint()
        request = _body(model, prompt=["a", "b"], n=2, stream_options={"include_usage": True})
        async with chunkwise.completions.open_stream(endpoint, request) as stream:
            result = await stream.result()
    assert result.status == "complete"
    assert [c.index for c in result.choices] == [0, 1, 2, 3]
    assert all(c.text == TEXT for c in result.choices)
    stop = "eos_token" if model == "quirks-tgi" else "stop"
    assert all(c.finish_reason == stop for c in result.choices)
    assert result.usage is not None and result.usage["prompt_tokens"] == 10
    kinds = [a.kind for a in result.anomalies]
    assert kinds == (["null event"] if model == "quirks-llama.cpp" else [])
    assert result.id == (None if model == "quirks-tgi" else "cmpl-chunkwise-text")


@pytest.mark.parametrize("model", STYLES)
async def test_a_non_streamed_request_gets_the_document_the_stream_makes(model: str) -> None:
    body = _body(model, echo=True, logprobs=2, suffix=" Bye.", n=2)
    async with open_chat_server() as server:
        status, headers, data = await _post(server, body)
    assert status == 200 and headers["content-type"].startswith("application/json")
    document = json.loads(data)
    assert document["object"] == "text_completion"
    assert [c["index"] for c in document["choices"]] == [0, 1]
    for choice in document["choices"]:
        assert choice["text"] == "Say hi" + TEXT  # echo: the prompt first
        logprobs = choice["logprobs"]
        if model == "quirks-tgi":
            assert logprobs is None
        elif model == "quirks-llama.cpp":
            assert "".join(t["token"] for t in logprobs["content"]) == "Say hi" + TEXT
        else:
            assert "".join(logprobs["tokens"]) == "Say hi" + TEXT
            assert all(len(top) == 2 for top in logprobs["top_logprobs"])
    assert document["usage"]["total_tokens"] > 0


async def test_the_error_scenario_streams_its_error_and_a_document_is_a_500() -> None:
    async with open_chat_server() as server:
        result = await chunkwise.completions.complete(server.endpoint(), _body("error"))
        status, _, data = await _post(server, _body("error"))
    assert result.status == "failed" and result.server_error is not None
    assert result.text == SCENARIOS["error"].text
    assert status == 500 and json.loads(data)["error"]["type"] == "server_error"


async def test_the_length_scenario_finishes_with_length() -> None:
    async with open_chat_server() as server:
        result = await chunkwise.completions.complete(server.endpoint(), _body("length"))
    assert result.status == "complete" and result.choice(0).finish_reason == "length"


def test_style_quirks_on_the_wire() -> None:
    scenario = SCENARIOS["text"]
    request = _body(prompt=["a", "b"], logprobs=1, stream=True)
    openai = completion_chunks(request, scenario, "openai", document=False)
    assert all(c["choices"] for c in openai)  # no usage chunk without include_usage
    assert "usage" not in openai[-1]
    vllm = completion_chunks(request, scenario, "vllm", document=False)
    assert all("stop_reason" in c["choices"][0] for c in vllm)
    llama = completion_chunks(request, scenario, "llama.cpp", document=False)
    assert llama[0] is None  # data: null before a multi-prompt stream
    assert "usage" in llama[-1] and "timings" in llama[-1]
    assert "content" in llama[1]["choices"][0]["logprobs"]
    tgi = completion_chunks(request, scenario, "tgi", document=False)
    assert {c["id"] for c in tgi} == {""}
    assert {c["choices"][0]["finish_reason"] for c in tgi[:-2]} == {""}
    assert tgi[-1]["choices"][0]["finish_reason"] == "eos_token" and "usage" in tgi[-1]
    single = completion_chunks(_body(), scenario, "llama.cpp", document=False)
    assert single[0] is not None  # only several prompts start with null


def test_prompt_shapes_and_n_give_one_choice_each() -> None:
    scenario = SCENARIOS["text"]
    for prompt, choices in [("x", 1), (["x", "y", "z"], 3), ([1, 2, 3], 1), ([[1], [2, 3]], 2)]:
        chunks = completion_chunks(_body(prompt=prompt, n=2), scenario, "openai", document=True)
        indices = {c["index"] for chunk in chunks for c in chunk["choices"]}
        assert indices == set(range(2 * choices))


async def test_a_replayed_body_answers_completions_too() -> None:
    replay = (
        b'data: {"choices":[{"index":0,"text":"hey","finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
    )
    async with open_chat_server(ServerOptions(replay=replay)) as server:
        result = await chunkwise.completions.complete(server.endpoint(), _body())
    assert result.text == "hey" and result.status == "complete"


async def test_the_stream_and_its_bytes_agree() -> None:
    async with open_chat_server(ServerOptions(write_size=5)) as server:
        status, headers, data = await _post(server, _body("quirks-tgi", stream=True))
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    _, result = parse_completion([data])
    assert result.text == TEXT and result.status == "complete"


# -- request checks --------------------------------------------------------------

# body, param, code, words of the message
REFUSED: list[tuple[Any, str | None, str | None, str]] = [
    (b"{bad", None, None, "could not parse the JSON body"),
    ([1], None, None, "must be a JSON object"),
    (
        {"model": "text", "messages": [{"role": "user", "content": "hi"}]},
        None,
        None,
        "Unrecognized request argument supplied: messages",
    ),
    (_body(input="x"), None, None, "Unrecognized request argument supplied: input"),
    ({"prompt": "x"}, None, None, "you must provide a model parameter"),
    (_body(model=3), "model", "invalid_type", "expected a string"),
    ({"model": "text"}, "prompt", "missing_required_parameter", "'prompt'"),
    (_body(prompt=3), "prompt", "invalid_type", "expected a string or an array"),
    (_body(prompt=[]), "prompt", "empty_array", "empty array"),
    (_body(prompt=["a", 1]), "prompt", "invalid_type", "array of token arrays"),
    (_body(prompt=[[]]), "prompt", "invalid_type", "array of token arrays"),
    (_body(prompt=[True]), "prompt", "invalid_type", "array of token arrays"),
    (_body(n=0), "n", "integer_below_min_value", ">= 1"),
    (_body(n=129), "n", "integer_above_max_value", "<= 128"),
    (_body(n="2"), "n", "invalid_type", "expected an integer"),
    (_body(logprobs=6), "logprobs", "integer_above_max_value", "<= 5"),
    (_body(logprobs=True), "logprobs", "invalid_type", "expected an integer"),
    (_body(max_tokens=-1), "max_tokens", "integer_below_min_value", ">= 0"),
    (_body(best_of=21), "best_of", "integer_above_max_value", "<= 20"),
    (_body(echo="yes"), "echo", "invalid_type", "expected a boolean"),
    (_body(suffix=1), "suffix", "invalid_type", "expected a string"),
    (_body(temperature=3), "temperature", "decimal_above_max_value", "<= 2"),
    (_body(top_p=-1), "top_p", "decimal_below_min_value", ">= 0"),
    (_body(stream="yes"), "stream", "invalid_type", "expected a boolean"),
    (
        _body(stream_options={"include_usage": True}),
        "stream_options",
        None,
        "only allowed when 'stream' is enabled",
    ),
    (_body(stream=True, stream_options=1), "stream_options", "invalid_type", "an object"),
]


@pytest.mark.parametrize(("body", "param", "code", "words"), REFUSED)
async def test_completions_refuses_what_openai_refuses(
    body: Any, param: str | None, code: str | None, words: str
) -> None:
    async with open_chat_server() as server:
        status, _, data = await _post(server, body)
    assert status == 400
    error = json.loads(data)["error"]
    assert error["type"] == "invalid_request_error"
    assert (error["param"], error["code"]) == (param, code)
    assert words in error["message"]


ACCEPTED = [
    _body(),
    _body(prompt=["a", "b"]),
    _body(prompt=[1, 2]),
    _body(prompt=[[1], [2, 3]]),
    _body(prompt=""),
    _body(n=None, logprobs=None, suffix=None, echo=None, max_tokens=None),
    _body(max_tokens=0, echo=True, logprobs=0, best_of=1),
    _body(logprobs=5, suffix="x", stream=True, stream_options={"include_usage": True}),
    _body(tools=[]),  # an unknown parameter passes (rule 1)
]


@pytest.mark.parametrize("body", ACCEPTED)
def test_completions_accepts_what_openai_accepts(body: dict[str, Any]) -> None:
    assert check_completions_request(body) is None


async def test_the_client_sees_a_refusal_as_an_http_status_error() -> None:
    async with open_chat_server() as server:
        with pytest.raises(chunkwise.HTTPStatusError) as info:
            await chunkwise.completions.complete(server.endpoint(), _body(n=0))
    assert info.value.status_code == 400
    assert "integer below minimum value" in str(info.value)

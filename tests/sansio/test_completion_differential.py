"""Differential tests for legacy completions: chunkwise against the ``openai`` SDK.

The oracle is the SDK's own code for ``client.completions.create(stream=True)``:
``openai._streaming.Stream`` with ``cast_to=Completion`` (its SSE decoder, the
``[DONE]`` check, JSON, the ``error`` check and ``Completion`` construction),
run over an in-memory HTTP response that yields the same reads chunkwise is
fed.  The SDK does not accumulate completions, so the oracle's view is the
obvious fold of its chunks: text concatenated per ``index``, the last
non-empty ``finish_reason``, the last usage, logprob lists extended.

* agreement: on every clean row of the rule table (and every two-way split
  of it), both give the same text, finish reasons, usage and logprobs;
* layer 3 with SDK objects: the SDK's ``Completion`` chunks, passed through
  ``model_dump(...)`` to :class:`chunkwise.completions.Accumulator`, give the
  same result as chunkwise's own parse of the bytes;
* documented differences (``docs/differences.rst``): an error object mid
  stream (the SDK raises, the text only in the chunks a caller kept),
  ``data: null`` (the SDK yields ``None`` as a chunk), errors without an
  ``error`` key and ``finish_reason: "error"`` (the SDK reports nothing),
  a body cut off (the SDK reports nothing).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import chunkwise
from helpers.bodies import completion_chunk, sse, text_choice
from helpers.reads import parse_completion

openai = pytest.importorskip("openai")

if TYPE_CHECKING:  # checked against the current SDK's HTTP library
    import httpx2 as _httpx
else:
    try:  # openai >= 3 uses httpx2; earlier versions use httpx.
        import httpx2 as _httpx
    except ImportError:  # pragma: no cover - depends on the installed SDK
        import httpx as _httpx

from openai._streaming import Stream  # noqa: E402
from openai.types import Completion  # noqa: E402

_REQUEST = _httpx.Request("POST", "http://127.0.0.1:9/v1/completions")
USAGE = {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}
LEGACY = {
    "tokens": ["a"],
    "token_logprobs": [-0.5],
    "top_logprobs": [{"a": -0.5}],
    "text_offset": [0],
}


class _Reads(_httpx.SyncByteStream):
    def __init__(self, reads: Sequence[bytes]) -> None:
        self._reads = reads

    def __iter__(self) -> Iterator[bytes]:
        yield from self._reads


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    sdk_client = openai.OpenAI(api_key="sk-differential-test", base_url="http://127.0.0.1:9/v1")
    yield sdk_client
    sdk_client.close()


def run_sdk(client: Any, reads: Sequence[bytes]) -> tuple[list[Any], Exception | None]:
    """The SDK's ``Completion`` chunks of a body, and what iterating raised."""
    response = _httpx.Response(
        200,
        headers={"content-type": "text/event-stream"},
        stream=_Reads(reads),
        request=_REQUEST,
    )
    chunks: list[Any] = []
    try:
        for item in Stream(cast_to=Completion, response=response, client=client):
            chunks.append(item)
    except Exception as exc:
        return chunks, exc
    return chunks, None


def sdk_view(chunks: Sequence[Any]) -> dict[str, Any]:
    """The obvious fold of the SDK's chunks."""
    choices: dict[int, dict[str, Any]] = {}
    usage = None
    for chunk in chunks:
        for choice in chunk.choices:
            view = choices.setdefault(
                choice.index, {"text": "", "finish_reason": None, "logprobs": None}
            )
            view["text"] += choice.text or ""
            if choice.finish_reason:
                view["finish_reason"] = choice.finish_reason
            if choice.logprobs is not None:
                merged = view["logprobs"] = view["logprobs"] or {}
                for key, value in choice.logprobs.model_dump(exclude_unset=True).items():
                    merged.setdefault(key, []).extend(value or [])
        if chunk.usage is not None:
            usage = chunk.usage.model_dump(exclude_unset=True)
    return {"choices": choices, "usage": usage}


def cw_view(result: chunkwise.completions.Result) -> dict[str, Any]:
    return {
        "choices": {
            choice.index: {
                "text": choice.text,
                "finish_reason": choice.finish_reason,
                "logprobs": None if choice.logprobs is None else dict(choice.logprobs),
            }
            for choice in result.choices
        },
        "usage": None if result.usage is None else dict(result.usage),
    }


def c(*choices: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return completion_chunk(*choices, **extra)


AGREEING = {
    "single": sse(
        c(text_choice("Hel")), c(text_choice("lo ü")), c(text_choice("", finish_reason="stop"))
    ),
    "usage_chunk": sse(c(text_choice("Hi", finish_reason="length")), c(usage=USAGE)),
    "usage_on_last": sse(c(text_choice("Hi", finish_reason="stop"), usage=USAGE)),
    "n_and_prompts": sse(
        c(text_choice("a", index=0), text_choice("b", index=1)),
        c(text_choice("c", index=2, finish_reason="eos")),
        c(text_choice("d", index=0, finish_reason="stop")),
        c(text_choice("e", index=1, finish_reason="length")),
    ),
    "legacy_logprobs": sse(
        c(text_choice("a", logprobs=LEGACY)),
        c(text_choice("a", logprobs=LEGACY, finish_reason="stop")),
    ),
    "echo_and_crlf": sse(
        c(text_choice("prompt")), c(text_choice(" answer", finish_reason="stop")), eol="\r\n"
    ),
    "tgi_empty_id": sse(c(text_choice("x", finish_reason="eos_token"), id="")),
}


@pytest.mark.parametrize("name", list(AGREEING))
def test_sdk_and_chunkwise_agree(client: Any, name: str) -> None:
    body = AGREEING[name]
    for reads in ([body], [body[: len(body) // 2], body[len(body) // 2 :]]):
        chunks, error = run_sdk(client, reads)
        assert error is None
        _, result = parse_completion(reads)
        assert result.status == "complete"
        assert cw_view(result) == sdk_view(chunks)


@pytest.mark.parametrize("name", list(AGREEING))
@pytest.mark.parametrize("dump", ["exclude_unset", "model_dump"])
def test_sdk_chunks_through_accumulator_match_byte_parse(client: Any, name: str, dump: str) -> None:
    body = AGREEING[name]
    chunks, _ = run_sdk(client, [body])
    accumulator = chunkwise.completions.Accumulator()
    for chunk in chunks:
        accumulator.feed(
            chunk.model_dump(exclude_unset=True) if dump == "exclude_unset" else chunk.model_dump()
        )
    accumulator.end()
    _, parsed = parse_completion([body])
    view = cw_view(accumulator.result)
    if dump == "model_dump" and view["usage"] is not None:
        # model_dump() adds every field the SDK's Usage declares, with None.
        view["usage"] = {k: v for k, v in view["usage"].items() if v is not None}
    assert view == cw_view(parsed)
    assert accumulator.result.status == "complete"


def test_error_object_midstream_sdk_raises_and_loses_the_text(client: Any) -> None:
    body = sse(c(text_choice("partial")), {"error": {"message": "boom", "code": 500}})
    chunks, error = run_sdk(client, [body])
    assert isinstance(error, openai.APIError)
    _, result = parse_completion([body])
    assert result.status == "failed"
    assert result.text == "partial"
    assert "boom" in str(result.error)
    # The text is only in the chunks a caller kept before the exception.
    assert sdk_view(chunks)["choices"][0]["text"] == "partial"


def test_data_null_sdk_yields_none_chunkwise_notes_it(client: Any) -> None:
    body = sse("null", c(text_choice("a", finish_reason="stop")))
    chunks, error = run_sdk(client, [body])
    # The SDK hands the caller None as a chunk: ``chunk.choices`` then raises.
    assert error is None and chunks[0] is None
    _, result = parse_completion([body])
    assert result.status == "complete"
    assert [a.kind for a in result.anomalies] == ["null event"]


ERRORS_WITHOUT_ERROR_KEY = {
    "object_error_body": sse(
        c(text_choice("p")), {"object": "error", "message": "bad", "code": 400}
    ),
    "event_error": sse(c(text_choice("p")), done=False)
    + b'event: error\ndata: {"message": "gone"}\n\n',
    "legacy_error_field": b'data: {"choices":[{"index":0,"text":"p"}]}\n\n'
    b'error: {"message":"slot died"}\n\n',
}


@pytest.mark.parametrize("name", list(ERRORS_WITHOUT_ERROR_KEY))
def test_error_without_error_key_sdk_ignores_it(client: Any, name: str) -> None:
    body = ERRORS_WITHOUT_ERROR_KEY[name]
    chunks, error = run_sdk(client, [body])
    # No exception: the error becomes a Completion whose choices are None, or
    # (the legacy field) is never dispatched.
    assert error is None
    assert all(chunk.choices is None for chunk in chunks[1:])
    _, result = parse_completion([body])
    assert result.status == "failed" and result.text == "p"
    assert result.error is not None


def test_finish_reason_error_sdk_reports_success(client: Any) -> None:
    body = sse(c(text_choice("p", finish_reason="error")))
    chunks, error = run_sdk(client, [body])
    assert error is None and sdk_view(chunks)["choices"][0]["finish_reason"] == "error"
    _, result = parse_completion([body])
    assert result.status == "failed" and result.text == "p"


def test_missing_done_and_finish_reason_sdk_reports_success(client: Any) -> None:
    body = sse(c(text_choice("a")), done=False)
    chunks, error = run_sdk(client, [body])
    assert error is None and sdk_view(chunks)["choices"][0]["text"] == "a"
    _, result = parse_completion([body])
    assert result.status == "incomplete"
    assert result.reason is chunkwise.IncompleteReason.UNFINISHED


def test_every_difference_in_the_docs_has_its_test() -> None:
    text = (Path(__file__).parents[2] / "docs" / "differences.rst").read_text(encoding="utf-8")
    section = text.split("Legacy completions\n------------------", 1)[1]
    section = section.split("\nResponses API\n-------------", 1)[0]
    named = set(re.findall(r"``(test_\w+)``", section))
    tests = {name for name in globals() if name.startswith("test_")}
    assert len(named) >= 7 and named <= tests

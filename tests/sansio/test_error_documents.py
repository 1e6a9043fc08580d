"""A body that is a JSON error document instead of SSE ends ``failed`` with that error.

Relays and servers answer a refused request with a JSON document, sometimes
with a 200 and an event-stream content type; read as SSE it holds no event and
used to end ``incomplete (empty stream)``.  Every API's parser, at every split
of the body, reads it as the same document in an ``error`` event would be read.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import chunkwise
from chunkwise._core.parser import ERROR_DOCUMENT_LIMIT
from helpers.reads import split_at

Parser = Callable[[], Any]
PARSERS: dict[str, Parser] = {
    "chat": chunkwise.chat.Parser,
    "responses": chunkwise.responses.Parser,
    "completions": chunkwise.completions.Parser,
}
OPENAI = {
    "error": {
        "message": "The model `gpt-9` does not exist",
        "type": "invalid_request_error",
        "param": None,
        "code": "model_not_found",
    }
}


def parse(make: Parser, reads: list[bytes]) -> Any:
    parser = make()
    for read in reads:
        parser.feed(read)
    parser.end()
    return parser.result


@pytest.mark.parametrize("api", PARSERS)
@pytest.mark.parametrize("indent", [None, 2], ids=["compact", "pretty"])
def test_an_openai_error_document_fails_with_its_message_type_and_code(
    api: str, indent: int | None
) -> None:
    body = (json.dumps(OPENAI, indent=indent) + "\n").encode()
    result = parse(PARSERS[api], [body])
    assert result.status == "failed"
    error = result.error
    assert isinstance(error, chunkwise.StreamError)
    assert (error.message, error.type, error.code) == (
        "The model `gpt-9` does not exist",
        "invalid_request_error",
        "model_not_found",
    )
    assert not result.anomalies  # its lines were no cut event


@pytest.mark.parametrize("api", PARSERS)
@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"object": "error", "message": "vLLM says no", "type": "BadRequestError"}, "vLLM says no"),
        ([{"error": {"code": 400, "message": "Gemini says no"}}], "Gemini says no"),
        ({"error": "a plain string"}, "a plain string"),
    ],
    ids=["vllm", "gemini", "string"],
)
def test_other_servers_error_documents_fail_with_their_message(
    api: str, document: Any, message: str
) -> None:
    result = parse(PARSERS[api], [json.dumps(document).encode()])
    assert result.status == "failed"
    assert message in str(result.error)


@given(cuts=st.lists(st.integers(0, 200), max_size=8))
def test_an_error_document_reads_the_same_at_every_split(cuts: list[int]) -> None:
    body = json.dumps(OPENAI, indent=2).encode()
    for make in PARSERS.values():
        whole = parse(make, [body])
        split = parse(make, split_at(body, cuts))
        assert (split.status, str(split.error)) == (whole.status, str(whole.error))


@pytest.mark.parametrize("api", PARSERS)
@pytest.mark.parametrize(
    "body",
    [
        b'{"id": "chatcmpl-1", "object": "chat.completion", "choices": []}',  # stream ignored
        b"<html><body>502 Bad Gateway</body></html>",
        b"",
        b'{"error": ',  # cut: not a document
    ],
    ids=["json-not-error", "html", "empty", "cut"],
)
def test_a_body_that_is_no_error_document_stays_an_empty_stream(api: str, body: bytes) -> None:
    result = parse(PARSERS[api], [body])
    assert result.status == "incomplete"
    assert result.reason == chunkwise.IncompleteReason.EMPTY_STREAM


@pytest.mark.parametrize("api", PARSERS)
def test_a_document_after_events_is_not_read_as_the_body(api: str) -> None:
    # Data lines came first: the body is SSE, and the trailing text is not an error.
    first = {
        "chat": b'data: {"choices": [{"index": 0, "delta": {"content": "hi"}}]}\n\n',
        "completions": b'data: {"choices": [{"index": 0, "text": "hi"}]}\n\n',
        "responses": b'data: {"type": "response.created", "response": {"id": "r"}}\n\n',
    }[api]
    result = parse(PARSERS[api], [first, json.dumps(OPENAI).encode()])
    assert result.status == "incomplete"
    assert result.error is None or "gpt-9" not in str(result.error)


@pytest.mark.parametrize("api", PARSERS)
def test_a_body_longer_than_the_limit_is_not_read_as_a_document(api: str) -> None:
    padding = " " * ERROR_DOCUMENT_LIMIT
    result = parse(PARSERS[api], [padding.encode(), json.dumps(OPENAI).encode()])
    assert result.status == "incomplete"

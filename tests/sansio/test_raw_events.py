"""The raw family, sans-IO: every server-sent event as received, for every API.

A parser built with ``raw=True`` emits one :class:`chunkwise.RawEvent` per
server-sent event the decoder dispatches, in order, each ahead of the events it
produced; everything else it emits is what the parser without raw events
emits, at every split of the body.  A parser without ``raw`` emits none.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import chunkwise
from chunkwise import RawEvent, ServerSentEvent, SSEDecoder
from helpers.bodies import choice, chunk, sse, sse_typed
from helpers.json_values import same_json
from helpers.reads import split_at
from helpers.strategies import sse_streams

Make = Callable[..., Any]
PARSERS: dict[str, Make] = {
    "chat": chunkwise.chat.Parser,
    "responses": chunkwise.responses.Parser,
    "completions": chunkwise.completions.Parser,
}
CHAT = b": keep-alive\n\nid: 7\nretry: 1500\n" + sse(
    chunk(choice(role="assistant", content="")),
    chunk(choice(content="Hel")),
    chunk(choice(content="lo"), service_tier="scale"),  # a field chunkwise does not model
    chunk(choice(finish_reason="stop")),
)
RESPONSES = sse_typed(
    {"type": "response.created", "response": {"id": "r", "status": "in_progress"}},
    {"type": "response.web_search_call.searching", "output_index": 0, "item_id": "ws"},
    {"type": "response.completed", "response": {"id": "r", "status": "completed"}},
)
COMPLETIONS = sse(
    {"choices": [{"index": 0, "text": "Hi", "finish_reason": None}]},
    {"choices": [{"index": 0, "text": "", "finish_reason": "stop"}]},
)
BODIES = {"chat": CHAT, "responses": RESPONSES, "completions": COMPLETIONS}


def run(make: Make, reads: list[bytes], **kwargs: Any) -> list[Any]:
    parser = make(**kwargs)
    events: list[Any] = []
    for read in reads:
        events += parser.feed(read)
    events += parser.end()
    return events


def decoded(body: bytes) -> list[ServerSentEvent]:
    decoder = SSEDecoder(legacy_error_field=True)
    return decoder.feed(body) + decoder.end()


@pytest.mark.parametrize("api", PARSERS)
def test_every_server_sent_event_is_emitted_as_received(api: str) -> None:
    events = run(PARSERS[api], [BODIES[api]], raw=True)
    raw = [e for e in events if type(e) is RawEvent]
    assert [e.event for e in raw] == decoded(BODIES[api])
    for event in raw:
        text = event.event.data
        expected = json.loads(text) if text.startswith("{") else None
        assert same_json(event.data, expected) or event.data is expected is None


def test_id_retry_and_fields_chunkwise_does_not_model_are_kept() -> None:
    raw = [e for e in run(PARSERS["chat"], [CHAT], raw=True) if type(e) is RawEvent]
    assert (raw[0].event.id, raw[0].event.retry) == ("7", 1500)
    assert raw[-1].event.data == "[DONE]" and raw[-1].data is None
    assert [e.data["service_tier"] for e in raw if e.data and "service_tier" in e.data] == ["scale"]


def test_the_decoded_data_is_read_only() -> None:
    raw = [e for e in run(PARSERS["chat"], [CHAT], raw=True) if type(e) is RawEvent]
    data = raw[1].data
    assert data is not None
    with pytest.raises(TypeError):
        data["id"] = "x"  # type: ignore[index]
    with pytest.raises(TypeError):
        data["choices"][0]["delta"]["content"] = "x"
    assert isinstance(data["choices"], tuple)


@pytest.mark.parametrize("api", PARSERS)
def test_each_raw_event_comes_ahead_of_the_events_it_produced(api: str) -> None:
    parser = PARSERS[api](raw=True)
    for event in decoded(BODIES[api]):
        fields = "".join(
            f"{name}: {value}\n"
            for name, value in (("event", event.event), ("data", event.data))
            if name == "data" or value != "message"
        )
        produced = parser.feed(f"{fields}\n".encode())
        assert produced and type(produced[0]) is RawEvent and produced[0].event.data == event.data
        assert all(type(e) is not RawEvent for e in produced[1:])


@pytest.mark.parametrize("api", PARSERS)
def test_without_raw_no_raw_event_and_the_same_other_events(api: str) -> None:
    plain = run(PARSERS[api], [BODIES[api]])
    assert all(type(e) is not RawEvent for e in plain)
    cooked = [e for e in run(PARSERS[api], [BODIES[api]], raw=True) if type(e) is not RawEvent]
    assert cooked == plain


@given(body=sse_streams(), cuts=st.lists(st.integers(0, 400), max_size=12))
def test_raw_events_at_every_split_are_the_decoders_events(body: bytes, cuts: list[int]) -> None:
    # Any body, well-formed or not: the raw events are what the WHATWG
    # decoder dispatches, and the rest is what the parser gives without them.
    for make in PARSERS.values():
        split = run(make, split_at(body, cuts), raw=True)
        assert [e.event for e in split if type(e) is RawEvent] == decoded(body)
        whole = run(make, [body])
        assert [e for e in split if type(e) is not RawEvent] == whole


def test_raw_events_turned_on_mid_stream_start_at_the_next_event() -> None:
    parser = chunkwise.chat.Parser()
    first, rest = CHAT[:40], CHAT[40:]  # inside the first data event
    events = parser.feed(first)
    parser.emit_raw()
    events += parser.feed(rest) + parser.end()
    raw = [e.event for e in events if type(e) is RawEvent]
    assert raw == decoded(CHAT)  # the cut event was dispatched after: it is there too
    assert parser.raw


def test_a_resumed_responses_body_keeps_its_raw_events() -> None:
    parser = chunkwise.responses.Parser(raw=True)
    parser.feed(RESPONSES[:80])
    parser.restart()  # a new connection: the old body's cut event is dropped
    events = parser.feed(RESPONSES[RESPONSES.index(b"event: response.web") :])
    assert [type(e) for e in events][:1] == [RawEvent]

"""The four fragmentation scenarios: the same stream, cut where it hurts."""

from __future__ import annotations

import chunkwise
from chunkwise import StreamCompleted, StreamIncomplete, UsageReported, chat
from helpers.bodies import choice, chunk, sse, tool
from helpers.reads import parse_chat, split_at, terminal

USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}


def test_multibyte_character_and_event_delimiter_split_across_reads() -> None:
    body = sse(
        chunk(choice(role="assistant", content="")),
        chunk(choice(content="Grüße 🌍")),
        chunk(choice(content=" ok", finish_reason="stop")),
        ensure_ascii=False,
    )
    emoji = body.index("🌍".encode())
    umlaut = body.index("ü".encode())
    delimiter = body.index(b"\n\n", emoji)
    # Cut inside both multibyte characters and between the two LFs of a delimiter.
    reads = split_at(body, [umlaut + 1, emoji + 1, emoji + 3, delimiter + 1])
    assert any(r.endswith(b"\n") and not r.endswith(b"\n\n") for r in reads)
    events, result = parse_chat(reads)
    assert result.content == "Grüße 🌍 ok"
    assert [e.text for e in events if isinstance(e, chat.TextDelta)] == ["Grüße 🌍", " ok"]
    assert "\ufffd" not in result.content
    assert (events, result) == parse_chat([body])


def test_several_events_in_one_read_with_comments_and_role_only_updates() -> None:
    body = (
        b": keep-alive\n\n"
        + sse(chunk(choice(role="assistant")), done=False)
        + b": processing\n\n"
        + sse(
            chunk(choice(content="one")),
            chunk(choice(role="assistant")),
            chunk(choice(content=" two", finish_reason="stop")),
        )
    )
    parser = chunkwise.chat.Parser()
    events = parser.feed(body)  # everything in one read
    assert [type(e) for e in events] == [
        chat.TextDelta,
        chat.TextDelta,
        chat.ChoiceFinished,
        StreamCompleted,
    ]
    assert parser.end() == []
    assert parser.result.content == "one two"


def test_interleaved_arguments_of_two_parallel_tool_calls_then_usage_chunk() -> None:
    body = sse(
        chunk(choice(role="assistant", tool_calls=[tool(0, id="call_a", name="weather")])),
        chunk(choice(tool_calls=[tool(1, id="call_b", name="time")])),
        chunk(choice(tool_calls=[tool(0, arguments='{"city"')])),
        chunk(choice(tool_calls=[tool(1, arguments='{"tz": ')])),
        chunk(choice(tool_calls=[tool(0, arguments=': "Oslo"}')])),
        chunk(choice(tool_calls=[tool(1, arguments='"CET"}')])),
        chunk(choice(finish_reason="tool_calls")),
        {**chunk(), "choices": [], "usage": USAGE},
        eol="\r\n",
    )
    whole = parse_chat([body])
    for cut in range(1, len(body)):
        assert parse_chat(split_at(body, [cut])) == whole, cut
    events, result = whole
    calls = result.choice(0).tool_calls
    assert [(c.id, c.name, c.parse_arguments()) for c in calls] == [
        ("call_a", "weather", {"city": "Oslo"}),
        ("call_b", "time", {"tz": "CET"}),
    ]
    fragments = [
        (e.tool_index, e.fragment) for e in events if isinstance(e, chat.ToolCallArgumentsDelta)
    ]
    assert fragments == [(0, '{"city"'), (1, '{"tz": '), (0, ': "Oslo"}'), (1, '"CET"}')]
    kinds = [type(e) for e in events]
    assert kinds[-5:] == [
        chat.ToolCallCompleted,
        chat.ToolCallCompleted,
        chat.ChoiceFinished,
        UsageReported,
        StreamCompleted,
    ]
    assert result.usage == USAGE
    assert len(result.choices) == 1


def test_disconnect_before_completion_leaves_partial_output_visibly_incomplete() -> None:
    body = sse(
        chunk(choice(role="assistant", content="")),
        chunk(choice(content="The answer is")),
        chunk(choice(content=" forty-")),
        chunk(choice(content="two", finish_reason="stop")),
    )
    cut = body.index(b"forty-") + 3  # the connection drops mid-event
    parser = chunkwise.chat.Parser()
    events = parser.feed(body[:cut])
    events += parser.end(chunkwise.IncompleteReason.CONNECTION_LOST)
    result = parser.result
    assert result.status == "incomplete"
    assert result.reason is chunkwise.IncompleteReason.CONNECTION_LOST
    assert result.content == "The answer is"
    assert result.choice(0).finish_reason is None
    last = terminal(events)
    assert isinstance(last, StreamIncomplete)
    assert last.reason is chunkwise.IncompleteReason.CONNECTION_LOST
    assert [a.kind for a in result.anomalies] == ["unterminated event"]

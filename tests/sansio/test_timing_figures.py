"""Timings without I/O: the gap statistics, the recorder, server timings, what counts as output.

The clock is a plain counter here (the recorder takes any clock), so every
figure is exact; the trio layer's use of it is tested in
``tests/client/test_stream_timings.py``.
"""

from __future__ import annotations

import gc
import json
import math
import weakref
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import chunkwise
from chunkwise._core.timings import GapHistogram, TimingRecorder, Timings
from chunkwise._net.trace import Timed
from helpers.bodies import (
    choice,
    chunk,
    completion_chunk,
    message_item,
    response_object,
    response_sse,
    sse,
    text_choice,
    text_events,
)
from helpers.data import DATA, load_vectors
from helpers.reads import accumulate, accumulate_response, parse_chat, parse_response


def hello() -> list[dict[str, Any]]:
    """A whole Responses stream saying "Hello"."""
    return [
        {"type": "response.created", "response": response_object()},
        *text_events(0, "msg_1", ["Hel", "lo"]),
        {
            "type": "response.completed",
            "response": response_object("completed", [message_item("msg_1", "Hello")]),
        },
    ]


# -- the gap statistics -----------------------------------------------------------


def nearest_rank(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q * len(ordered))) - 1]


gaps = st.lists(
    st.one_of(
        st.floats(min_value=0.0, max_value=1e-6, exclude_max=True),
        st.floats(min_value=1e-6, max_value=86_400.0),
    ),
    min_size=1,
    max_size=300,
)


@given(gaps)
def test_quantiles_are_within_the_stated_error_count_mean_max_exact(values: list[float]) -> None:
    histogram = GapHistogram()
    for value in values:
        histogram.add(value)
    stats = histogram.statistics()
    assert stats is not None
    assert stats.count == len(values)
    assert stats.max == max(values)
    assert stats.mean == pytest.approx(sum(values) / len(values), rel=1e-12, abs=1e-15)
    for q, got in ((0.5, stats.p50), (0.9, stats.p90), (0.99, stats.p99)):
        want = nearest_rank(values, q)
        if want >= GapHistogram.SMALLEST:
            assert abs(got - want) <= GapHistogram.RELATIVE_ERROR * want * (1 + 1e-9)
        else:
            assert abs(got - want) < GapHistogram.SMALLEST
        assert min(values) <= got <= max(values)


def test_the_stated_error_is_two_and_a_half_percent() -> None:
    assert round(GapHistogram.RELATIVE_ERROR, 4) == 0.0247
    assert GapHistogram.BUCKETS < 600


def test_equal_gaps_give_exact_quantiles() -> None:
    histogram = GapHistogram()
    for _ in range(9):
        histogram.add(0.02)
    stats = histogram.statistics()
    assert stats is not None
    assert (stats.count, stats.p50, stats.p90, stats.p99, stats.max) == (9, 0.02, 0.02, 0.02, 0.02)
    assert stats.mean == pytest.approx(0.02)


def test_memory_is_bounded_whatever_the_number_of_gaps() -> None:
    histogram = GapHistogram()
    for i in range(200_000):
        histogram.add((i % 10_007) * 1e-4 + (i % 13) * 1e3)
    assert histogram.buckets_used <= GapHistogram.BUCKETS
    histogram.add(10 * 86_400.0)  # longer than the last bucket: shares it
    assert histogram.buckets_used <= GapHistogram.BUCKETS
    assert histogram.max == 10 * 86_400.0


def test_no_gap_no_statistics() -> None:
    histogram = GapHistogram()
    assert histogram.statistics() is None
    with pytest.raises(ValueError, match="no gaps"):
        histogram.quantile(0.5)


# -- derived figures ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("first", "last", "tokens", "tpot"),
    [
        (0.2, 0.4, 11, 0.02),  # vLLM: (last - first) / (tokens - 1)
        (0.2, 0.2, 1, None),  # one token: no time per token
        (0.2, 0.4, None, None),  # no usage
        (0.2, 0.4, 0, None),
        (None, None, 5, None),  # no output
    ],
)
def test_time_per_output_token_is_vllms(
    first: float | None, last: float | None, tokens: int | None, tpot: float | None
) -> None:
    timings = Timings(started=0.0, first_output=first, last_output=last, output_tokens=tokens)
    assert timings.time_to_first_token == first
    assert timings.time_per_output_token == pytest.approx(tpot)
    assert timings.output_tokens_per_second == (pytest.approx(1 / tpot) if tpot else None)


# -- the recorder --------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_recorder_counts_from_the_attempt_that_streamed() -> None:
    clock = Clock()
    recorder = TimingRecorder(clock)
    recorder.start_attempt()
    clock.now += 1.0
    recorder.connected_now()  # the failed attempt's stamps are forgotten
    clock.now += 5.0  # its retry wait
    recorder.start_attempt()
    clock.now += 0.25
    recorder.connected_now()
    clock.now += 0.25
    recorder.request_sent_now()
    clock.now += 0.5
    recorder.response_head_now(clock.now - 0.125)
    timings = recorder.timings()
    assert timings.started == 106.0
    assert timings.attempts == 2
    assert (timings.connected, timings.request_sent) == (0.25, 0.5)
    assert (timings.first_byte, timings.response_head) == (0.875, 1.0)
    assert timings.ended is None


def test_the_request_is_never_sent_after_the_first_byte_of_its_reply_arrived() -> None:
    # The kernel's arrival stamp of the reply can precede the clock read after
    # the send returned (loopback): the request was sent by the reply's first byte.
    clock = Clock()
    recorder = TimingRecorder(clock)
    recorder.start_attempt()
    clock.now += 0.5
    recorder.request_sent_now()
    clock.now += 0.25
    recorder.response_head_now(clock.now - 0.5)  # arrived 0.25 s before the send's stamp
    timings = recorder.timings()
    assert (timings.request_sent, timings.first_byte, timings.response_head) == (0.25, 0.25, 0.75)


@pytest.mark.parametrize(
    ("arrived", "stamp"),
    [
        (None, 2.0),  # no arrival known: the clock when the read returned
        (1.75, 1.75),  # when the bytes reached this host, however late the reader ran
        (1.5, 1.5),  # at the previous read's stamp: allowed
        (1.25, 1.5),  # before the previous read: never (one segment stamps both)
    ],
)
def test_a_read_is_stamped_when_its_bytes_arrived_never_before_the_last(
    arrived: float | None, stamp: float
) -> None:
    clock = Clock()
    recorder = TimingRecorder(clock)
    clock.now += 1.0
    recorder.response_head_now(None)
    clock.now += 0.5
    assert recorder.read(clock.now - 0.25) == 101.25
    assert recorder.read() == 101.5
    clock.now += 0.5
    assert recorder.read(None if arrived is None else 100 + arrived) == 100 + stamp


def test_a_first_read_is_never_stamped_before_the_head() -> None:
    # The head and the first event came in one segment: the stamp is the head's.
    clock = Clock()
    recorder = TimingRecorder(clock)
    clock.now += 1.0
    recorder.response_head_now(None)
    clock.now += 0.5
    assert recorder.read(100.5) == 101.0


def test_output_needs_a_read_and_usage_needs_a_count() -> None:
    recorder = TimingRecorder(Clock())
    with pytest.raises(RuntimeError, match="before read"):
        recorder.output(content=True)
    assert recorder.final({"prompt_tokens": 3}).output_tokens is None
    assert recorder.final().ended == 0.0  # never read: ended when asked


def test_one_read_counts_once_and_the_final_figures_are_frozen() -> None:
    clock = Clock()
    recorder = TimingRecorder(clock)
    recorder.start_attempt()
    for gap in (0.5, 0.25, 0.25):
        clock.now += gap
        recorder.read()
        recorder.output(content=False)
        recorder.output(content=True)  # the same read: no gap, no second count
    final = recorder.final({"completion_tokens": 4})
    assert final.first_output == 0.5
    assert final.first_content == 0.5
    assert final.last_output == 1.0
    assert final.ended == 1.0  # the stream ended at the read that ended it
    assert final.gaps == chunkwise.types.GapStatistics(
        count=2, mean=0.25, p50=0.25, p90=0.25, p99=0.25, max=0.25
    )
    clock.now += 1
    recorder.read()
    recorder.output(content=True)
    recorder.end()
    assert recorder.final() is final
    assert recorder.timings() is final


# Multiples of 1/1024 s: the stamps and their differences are exact floats.
# Zero is drawn often on purpose: reads that share a stamp.
exact_pauses = st.lists(
    st.just(0.0) | st.integers(0, 10_240).map(lambda n: n / 1024), min_size=1, max_size=40
)


@given(exact_pauses)
def test_every_output_read_after_the_first_is_a_gap_even_at_the_same_stamp(
    pauses: list[float],
) -> None:
    """Rule 2: N output reads give N - 1 gaps, whatever their stamps.

    Reads stamped alike (the clock did not move, or the kernel stamped one
    segment for both) are two reads and a gap of 0 s between them.
    """
    clock = Clock()
    parser = chunkwise.chat.Parser()
    recorder = TimingRecorder(clock)
    recorder.start_attempt()
    timed = Timed(parser, recorder)
    for i, pause in enumerate([0.0, *pauses]):
        clock.now += pause
        recorder.read()
        timed.carried(parser.feed(sse(chunk(choice(content=f"{i} ")), done=False)))
    recorder.end()
    timed.carried(parser.end(), read=False)
    timings = timed.result.timings
    assert timings is not None and timings.gaps is not None
    assert timings.gaps.count == len(pauses)
    assert timings.gaps.max == max(pauses)
    assert timings.gaps.mean == sum(pauses) / len(pauses)
    assert timings.last_output == sum(pauses)


# -- what the parsers tell the recorder ----------------------------------------------


def timed_chat(reads: list[bytes], gap: float = 0.5) -> chunkwise.chat.Result:
    """Feed each read ``gap`` seconds after the previous one, as the trio layer does."""
    clock = Clock()
    parser = chunkwise.chat.Parser()
    recorder = TimingRecorder(clock)
    recorder.start_attempt()
    timed = Timed(parser, recorder)
    for read in reads:
        clock.now += gap
        recorder.trace("receive_body.complete", {"arrived": None})  # as the transport's trace
        timed.carried(parser.feed(read))
    recorder.end()
    timed.carried(parser.end(), read=False)
    return timed.result


def test_role_only_and_empty_chunks_are_events_not_output() -> None:
    result = timed_chat(
        [
            b": keep-alive\n\n",
            sse(chunk(choice(role="assistant", content="")), done=False),
            sse(chunk(choice(content="")), done=False),
            sse(chunk(choice(reasoning_content="hm")), done=False),
            sse(chunk(choice(content="Hi")), done=False),
            sse(chunk(choice(finish_reason="stop"), usage={"completion_tokens": 2})),
        ]
    )
    timings = result.timings
    assert timings is not None
    assert timings.first_event == 1.0  # the role chunk, not the comment
    assert timings.first_output == 2.0  # reasoning, not the empty content
    assert timings.first_content == 2.5
    assert timings.last_output == 2.5
    assert timings.ended == 3.0
    assert timings.output_tokens == 2
    assert timings.gaps is not None and timings.gaps.count == 1


def test_output_in_the_read_that_ends_the_stream_counts() -> None:
    body = sse(chunk(choice(content="a")), chunk(choice(content="b", finish_reason="stop")))
    result = timed_chat([sse(chunk(choice(role="assistant")), done=False), body])
    assert result.timings is not None
    assert result.timings.first_output == result.timings.last_output == 1.0
    assert result.timings.ended == 1.0


def test_events_of_one_read_share_its_stamp() -> None:
    body = sse(*[chunk(choice(content=f"{i} ")) for i in range(20)], done=False)
    cut = body.index(b"\n\n", 200) + 2  # a read ending with a whole event or two
    result = timed_chat([body[:cut], body[cut:]])
    assert result.timings is not None
    assert (result.timings.first_output, result.timings.last_output) == (0.5, 1.0)
    assert result.timings.gaps is not None and result.timings.gaps.count == 1


def _timed_parsers() -> dict[str, tuple[Any, bytes]]:
    """Each API's parser with a whole stream for it."""
    return {
        "chat": (
            chunkwise.chat.Parser(),
            sse(chunk(choice(content="x", finish_reason="stop"))),
        ),
        "responses": (chunkwise.responses.Parser(), response_sse(*hello())),
        "completions": (
            chunkwise.completions.Parser(),
            sse(completion_chunk(text_choice("x", finish_reason="stop"))),
        ),
    }


@pytest.mark.parametrize("api", ["chat", "responses", "completions"])
@pytest.mark.parametrize("ending", ["terminal event", "end()", "fail()"])
def test_a_timed_parser_is_freed_without_the_cycle_collector(api: str, ending: str) -> None:
    # The trio layer times every stream: a cycle through the parser made each
    # stream's whole parser garbage that only the cycle collector frees.
    parser, body = _timed_parsers()[api]
    gc.collect()
    gc.disable()
    try:
        recorder = TimingRecorder(Clock())
        recorder.start_attempt()
        timed = Timed(parser, recorder)
        recorder.read()
        if ending == "terminal event":
            timed.carried(parser.feed(body))
        elif ending == "end()":
            timed.carried(parser.feed(body[: len(body) // 2]))
            timed.carried(parser.end(), read=False)
        else:
            timed.carried(parser.fail(chunkwise.ConnectionLost("gone")), read=False)
        assert timed.result.timings is not None
        freed = weakref.ref(parser)
        del parser, timed
        assert freed() is None
    finally:
        gc.enable()


def test_results_of_the_sans_io_parsers_alone_have_no_timings() -> None:
    _, chat = parse_chat([sse(chunk(choice(content="x", finish_reason="stop")))])
    _, response = parse_response([response_sse(*hello())])
    assert chat.timings is None and response.timings is None


def test_every_output_delta_counts_and_only_text_is_content() -> None:
    # Every event class of every namespace says what it is: each delta (and a
    # partial image) is output, the three TextDelta classes (answer text) alone are content.
    classes = {
        value
        for module in (chunkwise, chunkwise.chat, chunkwise.responses, chunkwise.completions)
        for value in vars(module).values()
        if isinstance(value, type) and issubclass(value, chunkwise.Event)
    }
    assert len(classes) >= 20
    for cls in classes:
        output = cls.__name__.endswith("Delta") or cls is chunkwise.responses.PartialImage
        assert cls.is_output == output, cls
        assert cls.is_content == (cls.__name__ == "TextDelta"), cls
    assert sum(cls.__name__ == "TextDelta" for cls in classes) == 3


# -- server timings ---------------------------------------------------------------------


def test_llama_cpp_chat_timings_are_kept_raw() -> None:
    (vector,) = [v for v in load_vectors() if v["name"].endswith("usage_timings")]
    raw = vector["raw"].encode()
    _, result = parse_chat([raw])
    last = [json.loads(line[6:]) for line in vector["raw"].splitlines() if '"timings"' in line]
    assert result.server_timings == {"timings": last[-1]["timings"]}


def test_llama_cpp_responses_timings_are_kept_raw() -> None:
    raw = (DATA / "responses" / "llama_cpp_text.sse").read_bytes()
    _, result = parse_response([raw])
    lines = [json.loads(line[6:]) for line in raw.decode().splitlines() if '"timings"' in line]
    assert result.server_timings == {"timings": lines[-1]["timings"]}


def test_vllm_metrics_and_a_response_objects_figures_are_kept() -> None:
    metrics = {"arrival_time": 1.5, "first_token_time": 1.75}
    events = hello()
    events[-1]["response"]["metrics"] = metrics
    _, result = accumulate_response(events)
    assert result.server_timings == {"metrics": metrics}
    _, chat = accumulate([chunk(choice(content="x", finish_reason="stop"), metrics=metrics)])
    assert chat.server_timings == {"metrics": metrics}


def test_the_last_server_timings_win_and_non_objects_are_ignored() -> None:
    chunks: list[dict[str, Any]] = [
        chunk(choice(content="a"), timings={"predicted_n": 1}),
        chunk(choice(content="b"), timings={"predicted_n": 2}),
        chunk(choice(finish_reason="stop"), timings="soon", metrics=[1]),
    ]
    _, result = accumulate(chunks)
    assert result.server_timings == {"timings": {"predicted_n": 2}}
    _, none = accumulate([chunk(choice(content="a", finish_reason="stop"))])
    assert none.server_timings is None


def test_server_timings_of_a_callers_mapping_are_copied() -> None:
    figures = {"predicted_n": 1}
    accumulator = chunkwise.chat.Accumulator()
    accumulator.feed(chunk(choice(content="a"), timings=figures))
    before = accumulator.result
    figures["predicted_n"] = 99
    assert before.server_timings == {"timings": {"predicted_n": 1}}
    assert accumulator.result.server_timings == {"timings": {"predicted_n": 1}}

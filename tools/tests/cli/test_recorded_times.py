"""Recordings with time: the sidecar ``record`` writes, ``inspect``'s timeline, ``serve``'s pacing.

Pacing is checked under trio's ``MockClock`` over memory streams, so the
times a client sees are exactly the scheduled ones (no timed assertion).
"""

from __future__ import annotations

import io
import itertools
import json
import re
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

import chunkwise
from chunkwise.testing import ScriptedResponse, open_test_server
from chunkwise_tools.cli import build_parser
from chunkwise_tools.cli.record import KeyWatch, Recording, record_response, recorded_times
from chunkwise_tools.cli.serve import describe_pacing, options_from_args
from chunkwise_tools.server._chat_server import ChatServer
from chunkwise_tools.server._options import ServerOptions
from chunkwise_tools.server._pacing import (
    LATE_GAP,
    RecordedPacing,
    RecordedTimes,
    TimesFormatError,
    TokenPacing,
    paced_scenario,
    pacing_line,
    schedule,
)
from chunkwise_tools.server._response_scenarios import RESPONSE_SCENARIOS
from chunkwise_tools.server._response_wire import response_scenario_events
from chunkwise_tools.server._scenarios import SCENARIOS, scenario_events
from helpers.bodies import choice, chunk, sse
from helpers.cli import run_main
from helpers.data import KEY_VAR
from helpers.servers import serving

pytestmark = pytest.mark.usefixtures("api_key")

# -- the times format ------------------------------------------------------------

TIMES = RecordedTimes(
    response_head=0.125, body_bytes=30, reads=((0, 0.25), (10, 0.5), (25, 1.75)), complete=True
)


def test_the_times_format_round_trips_and_is_versioned() -> None:
    text = TIMES.dumps()
    document = json.loads(text)
    assert document == {
        "format": "chunkwise-times",
        "version": 1,
        "clock": "seconds since the request was sent",
        "response_head": 0.125,
        "body_bytes": 30,
        "complete": True,
        "reads": [[0, 0.25], [10, 0.5], [25, 1.75]],
    }
    assert text.count("\n") == 5  # one read a line
    assert RecordedTimes.loads(text.encode()) == TIMES
    assert TIMES.pieces() == ((10, 0.25), (15, 0.5), (5, 1.75))


def test_readers_ignore_fields_they_do_not_know() -> None:
    document = {**TIMES.to_json(), "later_field": [1, 2]}
    assert RecordedTimes.from_json(document) == TIMES


def _with(**changes: Any) -> dict[str, Any]:
    return {**TIMES.to_json(), **changes}


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ([], "a JSON object"),
        (_with(format="other"), '"format" is not "chunkwise-times"'),
        (_with(version=2), "version 2 is newer"),
        (_with(version="1"), '"version" is not a positive integer'),
        (_with(body_bytes=-1), '"body_bytes"'),
        (_with(response_head="soon"), '"response_head"'),
        (_with(complete="yes"), '"complete"'),
        (_with(reads={}), '"reads" is not a list'),
        (_with(reads=[[0]]), "reads[0] is not an [offset, seconds] pair"),
        (_with(reads=[[0, -1]]), "reads[0] is not an [offset, seconds] pair"),
        (_with(reads=[[0, True]]), "reads[0] is not an [offset, seconds] pair"),
        (_with(reads=[[3, 0.1]]), "the first read starts at offset 0"),
        (_with(reads=[[0, 0.1], [0, 0.2]]), "reads[1]: offsets must increase"),
        (_with(reads=[[0, 0.3], [5, 0.2]]), "reads[1]: times must not go back"),
        (_with(reads=[[0, 0.1], [30, 0.2]]), "reads[1]: offset 30 is past body_bytes"),
    ],
)
def test_bad_times_documents_are_refused_saying_why(document: Any, message: str) -> None:
    with pytest.raises(TimesFormatError) as caught:
        RecordedTimes.from_json(document)
    assert message in str(caught.value)


def test_a_sidecar_that_is_not_json_is_refused() -> None:
    with pytest.raises(TimesFormatError, match="not JSON"):
        RecordedTimes.loads(b"\xff{")


# -- record writes the sidecar ----------------------------------------------------

WORDS = ScriptedResponse.sse(
    [chunk(choice(content=f"w{i} ")) for i in range(4)] + [chunk(choice(finish_reason="stop"))],
)


def _event_sizes(body: bytes) -> list[int]:
    return [len(event) + 2 for event in body.split(b"\n\n")[:-1]]


async def _record(script: Any) -> Recording:
    recording = Recording(key_watch=KeyWatch(None))
    endpoint = chunkwise.Endpoint(base_url="http://test.invalid/v1")
    body = json.dumps(REQUEST).encode()
    async with serving(script) as (client, _):
        await record_response(endpoint, body, io.BytesIO(), recording, transport=client)
    return recording


async def test_record_stamps_every_read_since_the_request_was_sent(
    autojump_clock: trio.testing.MockClock,
) -> None:
    sizes = _event_sizes(WORDS.body)
    script = ScriptedResponse(body=WORDS.body, write_sizes=sizes, head_delay=0.5, delay=0.25)
    times = recorded_times(await _record(script))
    assert times.response_head == pytest.approx(0.5, abs=1e-9)
    assert times.body_bytes == len(WORDS.body)
    offsets = [sum(sizes[:i]) for i in range(len(sizes))]
    assert [offset for offset, _ in times.reads] == offsets
    assert [seconds for _, seconds in times.reads] == pytest.approx(
        [0.5 + 0.25 * i for i in range(len(sizes))], abs=1e-9
    )
    assert times.complete


async def test_a_cut_recording_says_it_is_not_complete(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = ScriptedResponse(body=WORDS.body, write_sizes=7, delay=0.1, disconnect_after=20)
    recording = Recording(key_watch=KeyWatch(None))
    endpoint = chunkwise.Endpoint(base_url="http://test.invalid/v1")
    async with serving(script) as (client, _):
        with pytest.raises(chunkwise.ChunkwiseError):
            await record_response(endpoint, b"{}", io.BytesIO(), recording, transport=client)
    times = recorded_times(recording)
    assert not times.complete
    assert times.body_bytes == 20 and [offset for offset, _ in times.reads] == [0, 7, 14]


async def test_record_writes_the_sidecar_beside_the_file_and_inspect_shows_a_timeline(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    output = tmp_path / "out.http"
    script = ScriptedResponse(body=WORDS.body, write_sizes=_event_sizes(WORDS.body), delay=0.01)
    async with open_test_server(script) as server:
        args = ["--base-url", server.base_url, "--api-key-env", KEY_VAR, "-o", str(output)]
        status, _, _ = await run_main(capsys, "record", *args, "hi")
    assert status == 0
    times = RecordedTimes.loads((tmp_path / "out.http.times.json").read_bytes())
    # A busy machine may join two writes in one read: every byte is in one all the same.
    assert times.body_bytes == len(WORDS.body) and 1 <= len(times.reads) <= 6
    status, out, _ = await run_main(capsys, "inspect", str(output))
    assert status == 0
    timeline = out[out.index("timeline (from ") :].splitlines()
    assert timeline[0] == (
        f"timeline (from {output}.times.json; seconds since the request was sent):"
    )
    labels = [line.split(":")[0].strip() for line in timeline[1:]]
    assert labels[:4] == ["response head", "first event", "first token", "first text"]
    assert "reads" in labels and "gaps" in labels and "longest stalls" in labels


async def test_record_to_stdout_writes_no_sidecar(
    capsysbinary: pytest.CaptureFixture[bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    async with open_test_server(WORDS) as server:
        args = ["--base-url", server.base_url, "--api-key-env", KEY_VAR, "-o", "-"]
        status, _, _ = await run_main(capsysbinary, "record", *args, "hi")
    assert status == 0
    assert not (tmp_path / "-.times.json").exists()


# -- inspect's timeline -------------------------------------------------------------

# Four words, the third after a long stall; the finish and [DONE] in the last read.
STALLED = sse(
    *(chunk(choice(content=f"word{i} ")) for i in range(4)), chunk(choice(finish_reason="stop"))
)
STALL_SIZES = [*_event_sizes(STALLED)[:3], sum(_event_sizes(STALLED)[3:])]
STALL_TIMES = (0.2, 0.22, 1.72, 1.75)


def _write_recording(tmp_path: Path, body: bytes, times: RecordedTimes) -> Path:
    path = tmp_path / "rec.sse"
    path.write_bytes(body)
    (tmp_path / "rec.sse.times.json").write_text(times.dumps())
    return path


def _stalled_times() -> RecordedTimes:
    offsets = [sum(STALL_SIZES[:i]) for i in range(len(STALL_SIZES))]
    return RecordedTimes(
        response_head=0.1,
        body_bytes=len(STALLED),
        reads=tuple(zip(offsets, STALL_TIMES, strict=True)),
    )


async def test_the_timeline_gives_ttft_gaps_and_where_the_longest_stall_fell(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = _write_recording(tmp_path, STALLED, _stalled_times())
    status, out, _ = await run_main(capsys, "inspect", str(path))
    assert status == 0
    timeline = out[out.index("timeline") :].splitlines()
    assert timeline[1:] == [
        "  response head:     0.100 s",
        "  first event:       0.200 s",
        "  first token:       0.200 s  (time to first token)",
        "  first text:        0.200 s",
        "  last token:        1.750 s",
        "  end:               1.750 s",
        "  reads:          4, 4 carrying output",
        # p50 is read from the gap histogram: within 2.5 % (docs/timings.rst).
        "  gaps:           3, mean 516.7 ms, p50 30.3 ms, p90 1500.0 ms, p99 1500.0 ms, "
        "max 1500.0 ms",
        "  longest stalls:",
        '     1500.0 ms before 1.720 s, at text offset 12: "word0 word1 " | "word2 "',
        '       30.0 ms before 1.750 s, at text offset 18: "word0 word1 word2 " | "word3 "',
        '       20.0 ms before 0.220 s, at text offset 6: "word0 " | "word1 "',
    ]


async def test_the_timeline_in_json(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = _write_recording(tmp_path, STALLED, _stalled_times())
    status, out, _ = await run_main(capsys, "inspect", "--json", str(path))
    assert status == 0
    timeline = json.loads(out)["timeline"]
    assert timeline["reads"] == 4 and timeline["output_reads"] == 4 and timeline["complete"]
    assert timeline["timings"]["first_output"] == pytest.approx(0.2)
    assert timeline["timings"]["gaps"]["max"] == pytest.approx(1.5)
    assert timeline["stalls"][0] == {
        "gap": pytest.approx(1.5),
        "at": pytest.approx(1.72),
        "text_offset": 12,
        "before": "word0 word1 ",
        "after": "word2 ",
    }


async def test_times_of_another_body_are_not_shown_as_its_timeline(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = _write_recording(tmp_path, STALLED + b": more\n\n", _stalled_times())
    status, out, _ = await run_main(capsys, "inspect", str(path))
    assert status == 0
    assert out.rstrip().endswith(
        f"not shown: the times are of a {len(STALLED)}-byte body, this one has {len(STALLED) + 8}"
    )


async def test_a_bad_sidecar_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = _write_recording(tmp_path, STALLED, _stalled_times())
    (tmp_path / "rec.sse.times.json").write_text('{"format": "chunkwise-times", "version": 9}')
    status, _, err = await run_main(capsys, "inspect", str(path))
    assert status == 2
    assert "is not a timing sidecar: version 9 is newer than this chunkwise reads (1)" in err


async def test_without_a_sidecar_there_is_no_timeline(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "rec.sse"
    path.write_bytes(STALLED)
    status, out, _ = await run_main(capsys, "inspect", str(path))
    assert status == 0 and "timeline" not in out


# -- serve's pacing -----------------------------------------------------------------


async def _read_stamps(
    options: ServerOptions, request: dict[str, Any]
) -> tuple[chunkwise.chat.Result, list[float]]:
    """The result and when each read carried output, under the test's (mock) clock."""
    endpoint = chunkwise.Endpoint(base_url="http://test.invalid/v1")
    stamps: list[float] = []
    async with serving(ChatServer(options)) as (client, _):
        start = trio.current_time()
        async with chunkwise.chat.open_stream(endpoint, request, transport=client) as stream:
            async for event in stream:
                if isinstance(event, chunkwise.chat.TextDelta):
                    stamps.append(trio.current_time() - start)
            result = await stream.result()
    return result, stamps


REQUEST = {
    "model": "text",
    "messages": [{"role": "user", "content": "hi"}],
    "stream": True,
    "stream_options": {"include_usage": True},
}


async def test_a_token_pacing_sends_each_token_on_time(
    autojump_clock: trio.testing.MockClock,
) -> None:
    pacing = TokenPacing(first_token=0.2, per_token=0.02, tokens=10)
    result, stamps = await _read_stamps(ServerOptions(pacing=pacing), REQUEST)
    assert result.status == "complete"
    assert result.choices[0].content == "The quick brown fox jumps over the lazy dog. The "
    assert result.usage is not None and result.usage["completion_tokens"] == 10
    assert stamps == pytest.approx([0.2 + 0.02 * k for k in range(10)], abs=1e-9)
    timings = result.timings
    assert timings is not None and timings.gaps is not None
    assert timings.time_to_first_token == pytest.approx(0.2, abs=1e-9)
    assert timings.gaps.count == 9 and timings.gaps.max == pytest.approx(0.02, abs=1e-9)


async def test_a_token_pacing_paces_responses_too(
    autojump_clock: trio.testing.MockClock,
) -> None:
    pacing = TokenPacing(first_token=0.5, per_token=0.1, tokens=3)
    endpoint = chunkwise.Endpoint(base_url="http://test.invalid/v1")
    async with serving(ChatServer(ServerOptions(pacing=pacing))) as (client, _):
        start = trio.current_time()
        request = {"model": "text", "input": "hi", "stream": True}
        async with chunkwise.responses.open_stream(endpoint, request, transport=client) as stream:
            stamps = [
                trio.current_time() - start
                async for event in stream
                if isinstance(event, chunkwise.responses.TextDelta)
            ]
            result = await stream.result()
    assert result.status == "complete" and result.output_text == "The quick brown "
    assert stamps == pytest.approx([0.5, 0.6, 0.7], abs=1e-9)


# The deltas of a reasoning answer a client meets, reasoning's and text's.
_REASONING = (
    chunkwise.chat.ReasoningDelta,
    chunkwise.responses.ReasoningSummaryDelta,
    chunkwise.responses.ReasoningDelta,
)
_TEXT = (chunkwise.chat.TextDelta, chunkwise.responses.TextDelta)


async def _delta_stamps(options: ServerOptions, api: str, model: str) -> list[tuple[str, float]]:
    """Each reasoning or text delta of one streamed answer, and when it came (mock clock)."""
    endpoint = chunkwise.Endpoint(base_url="http://test.invalid/v1")
    stamps: list[tuple[str, float]] = []

    def note(event: object) -> None:
        if isinstance(event, _REASONING + _TEXT):
            kind = "reasoning" if isinstance(event, _REASONING) else "text"
            stamps.append((kind, trio.current_time() - start))

    async with serving(ChatServer(options)) as (client, _):
        start = trio.current_time()
        if api == "chat":
            request = {**REQUEST, "model": model}
            async with chunkwise.chat.open_stream(endpoint, request, transport=client) as chat:
                async for event in chat:
                    note(event)
        else:
            request = {"model": model, "input": "hi", "stream": True}
            async with chunkwise.responses.open_stream(
                endpoint, request, transport=client
            ) as response:
                async for item in response:
                    note(item)
    return stamps


@pytest.mark.parametrize(
    ("api", "model", "reasoning"),
    [
        ("chat", "reasoning", 3),  # reasoning_content deltas
        ("responses", "reasoning", 3),  # response.reasoning_summary_text.delta
        ("responses", "quirks-llamacpp-reasoning", 3),  # response.reasoning_text.delta
    ],
)
async def test_a_token_pacing_paces_each_reasoning_delta_as_a_token(
    autojump_clock: trio.testing.MockClock, api: str, model: str, reasoning: int
) -> None:
    """Reasoning is model output: each reasoning delta (chat's ``reasoning_content``, a
    Responses reasoning text or summary delta) gets a token's time, as a text delta does."""
    pacing = TokenPacing(first_token=0.5, per_token=0.1)
    stamps = await _delta_stamps(ServerOptions(pacing=pacing), api, model)
    kinds = [kind for kind, _ in stamps]
    assert kinds == ["reasoning"] * reasoning + ["text"] * (len(kinds) - reasoning)
    assert len(kinds) > reasoning  # and then it says something
    times = [t for _, t in stamps]
    assert times == pytest.approx([0.5 + 0.1 * k for k in range(len(times))], abs=1e-9)


async def _paced_log(
    options: ServerOptions, *, pause_after: int | None = None, hang_up: bool = False
) -> list[str]:
    """serve's log of one request read as raw bytes (chunkwise's reader would read
    ahead of a paused consumer), over lockstep streams, so the server waits for
    the client: with ``pause_after``, the client stops reading for 50 ms once that
    many tokens came; with ``hang_up``, it closes as soon as it has ``[DONE]``."""
    lines: list[str] = []
    body = json.dumps(REQUEST).encode()
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: test\r\nConnection: close\r\n"
    head += b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
    server = ChatServer(options, log=lines.append)
    async with serving(server, lockstep=True) as (client, _):
        await client.send_all(head + body)
        received = b""
        paused = False
        while data := await client.receive_some():
            received += data
            if not paused and len(re.findall(rb'"content":"[^"]', received)) == pause_after:
                paused = True
                await trio.sleep(0.05)
            if hang_up and received.endswith(b"data: [DONE]\n\n\r\n"):
                await client.aclose()
                break
        await trio.testing.wait_all_tasks_blocked()  # the server has finished
    assert b"data: [DONE]" in received
    return lines


async def test_a_paced_answer_ends_with_a_line_saying_it_was_on_time(
    autojump_clock: trio.testing.MockClock,
) -> None:
    pacing = TokenPacing(first_token=0.2, per_token=0.02, tokens=10)
    lines = await _paced_log(ServerOptions(pacing=pacing))
    assert lines[1:] == [
        "paced answer: 10 writes, the first 0.0 ms late; 0 of 9 gaps more than 2 ms "
        "longer than scripted, the longest by 0.0 ms"
    ]
    # Logged when the client hangs up before the body's end, as chunkwise does.
    assert await _paced_log(ServerOptions(pacing=pacing), hang_up=True) == lines
    assert len(await _paced_log(ServerOptions())) == 1  # not paced: the request's line only


async def test_a_server_held_up_by_its_client_logs_the_late_gap(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The client pauses 50 ms after the third token; the server's write of the
    # fourth blocks until then, so the fifth (due 0.28 s) goes out at 0.29 s, 10 ms
    # late, and the sixth on time again: one late gap, as a client would see it.
    pacing = TokenPacing(first_token=0.2, per_token=0.02, tokens=10)
    lines = await _paced_log(ServerOptions(pacing=pacing), pause_after=3)
    assert lines[1:] == [
        "paced answer: 10 writes, the first 0.0 ms late; 1 of 9 gaps more than 2 ms "
        "longer than scripted, the longest by 10.0 ms"
    ]


@pytest.mark.parametrize(
    ("late", "counted", "longest"),
    [
        ((), "0 of 0", "0.0"),
        ((0.0,), "0 of 0", "0.0"),
        # A gap of exactly LATE_GAP is not late; one a little longer is.
        ((0.0, LATE_GAP, LATE_GAP), "0 of 2", "2.0"),
        ((0.0, 0.0, LATE_GAP + 0.0001, LATE_GAP + 0.0001), "1 of 3", "2.1"),
        # Falling behind once and staying behind is one late gap, not three.
        ((0.0, 0.01, 0.01, 0.01), "1 of 3", "10.0"),
        # Catching up shortens a gap; no gap is negative in the longest.
        ((0.01, 0.0), "0 of 1", "0.0"),
    ],
)
def test_the_pacing_line_counts_gaps_late_beyond_the_bound(
    late: tuple[float, ...], counted: str, longest: str
) -> None:
    line = pacing_line(late)
    assert f"; {counted} gaps more than 2 ms longer than scripted" in line
    assert line.endswith(f"the longest by {longest} ms")
    # The first write's lateness is told when there was a first write.
    assert ("the first" in line) == bool(late)


def test_jitter_is_seeded_per_request_and_never_goes_back() -> None:
    events = scenario_events(SCENARIOS["text"])
    pacing = TokenPacing(first_token=0.2, per_token=0.001, jitter=0.05, seed=7)
    first = schedule(pacing, events, request="req_1")
    assert first == schedule(pacing, events, request="req_1")
    assert first != schedule(pacing, events, request="req_2")
    assert all(b >= a for a, b in zip(first.times, first.times[1:], strict=False))
    assert all(abs(t - (0.2 + 0.001 * k)) <= 0.05 + 1e-12 for k, t in enumerate(first.times))


@given(
    first_token=st.floats(0, 1),
    per_token=st.floats(0, 0.1),
    jitter=st.floats(0, 2, exclude_min=True),
    seed=st.integers(0, 2**32),
    request=st.text(max_size=8),
    count=st.integers(1, 40),
)
def test_a_jittered_schedule_never_starts_before_0_nor_goes_back(
    first_token: float, per_token: float, jitter: float, seed: int, request: str, count: int
) -> None:
    """Jitter moves each write by up to ``jitter`` either way, then is clamped: the first
    write is never due before 0 and no write before the one ahead of it."""
    pacing = TokenPacing(
        first_token=first_token, per_token=per_token, tokens=count, jitter=jitter, seed=seed
    )
    events = scenario_events(paced_scenario(SCENARIOS["text"], pacing))
    times = schedule(pacing, events, request=request).times
    assert len(times) == count  # one write a token
    assert times[0] >= 0
    assert all(later >= earlier for earlier, later in itertools.pairwise(times))
    # The clamps only ever delay a write, and never past its own jitter's reach.
    nominal = [first_token + k * per_token for k in range(len(times))]
    assert all(due <= t + jitter + 1e-9 for due, t in zip(times, nominal, strict=True))


def test_one_answer_scheduled_under_two_pacings_follows_each() -> None:
    events = scenario_events(SCENARIOS["text"])
    steady = schedule(TokenPacing(first_token=0.2, per_token=0.02), events)
    other = schedule(TokenPacing(first_token=0.1, per_token=0.05), events)
    assert steady.sizes == other.sizes
    assert steady.times == pytest.approx([0.2 + 0.02 * k for k in range(len(steady.sizes))])
    assert other.times == pytest.approx([0.1 + 0.05 * k for k in range(len(other.sizes))])
    shorter = schedule(TokenPacing(first_token=0.2, per_token=0.02), events[:4])
    assert sum(shorter.sizes) == len(b"".join(events[:4]))
    assert len(shorter.times) == len(shorter.sizes) < len(steady.sizes)


# The oracle of what carries model output, from the wire shape alone (pacing's rule 2),
# apart from the server's own classifier: the Responses event types whose delta is
# output, and the fields of a chat delta that are.
OUTPUT_EVENT_TYPES = frozenset(
    {
        "response.output_text.delta",
        "response.refusal.delta",
        "response.reasoning_text.delta",
        "response.reasoning_summary_text.delta",
        "response.function_call_arguments.delta",
        "response.custom_tool_call_input.delta",
        "response.mcp_call_arguments.delta",
        "response.code_interpreter_call_code.delta",
        "response.shell_call_command.delta",
        "response.shell_call_output_content.delta",
        "response.audio.delta",
        "response.audio.transcript.delta",
    }
)
CHAT_OUTPUT_FIELDS = ("content", "reasoning_content", "refusal")
#: Chat delta objects whose named fields are output: spoken audio, a legacy function call.
CHAT_OUTPUT_OBJECTS = {"audio": ("data", "transcript"), "function_call": ("arguments",)}


def _carries_output(data: str) -> bool:
    """Whether one event's data is a chunk or a Responses event carrying model output."""
    try:
        payload = json.loads(data)
    except ValueError:
        return False  # [DONE]
    if not isinstance(payload, dict):
        return False
    if "type" in payload:
        return payload["type"] in OUTPUT_EVENT_TYPES and payload.get("delta") not in (None, "")
    for choice_ in payload.get("choices") or ():
        delta = choice_.get("delta") or {}
        if any(delta.get(field) for field in CHAT_OUTPUT_FIELDS):
            return True
        for name, fields in CHAT_OUTPUT_OBJECTS.items():
            if any((delta.get(name) or {}).get(field) for field in fields):
                return True
        calls = delta.get("tool_calls") or ()
        if any((call.get("function") or {}).get("arguments") for call in calls):
            return True
    return False


def _outputs_in(body: bytes) -> int:
    """How many events of ``body`` carry output, decoded as a client decodes them."""
    decoder = chunkwise.SSEDecoder(legacy_error_field=True)
    events = [*decoder.feed(body), *decoder.end()]
    return sum(_carries_output(event.data) for event in events)


ANSWERS = {
    **{f"chat {name}": scenario_events(SCENARIOS[name]) for name in sorted(SCENARIOS)},
    **{
        f"responses {name}": response_scenario_events(RESPONSE_SCENARIOS[name])
        for name in sorted(RESPONSE_SCENARIOS)
    },
}


@pytest.mark.parametrize("answer", ANSWERS)
def test_each_write_of_a_token_pacing_holds_one_output_event(answer: str) -> None:
    """Each write of a token pacing holds exactly one event carrying model output (text,
    reasoning, refusal, a tool call's arguments), read from the wire, not by the classifier."""
    events = ANSWERS[answer]
    paced = schedule(TokenPacing(per_token=0.01), events)
    body = b"".join(events)
    assert sum(paced.sizes) == len(body)
    outputs = _outputs_in(body)
    assert len(paced.sizes) == max(outputs, 1)
    position = 0
    for size in paced.sizes:
        assert _outputs_in(body[position : position + size]) == (1 if outputs else 0)
        position += size


def test_the_output_oracle_sees_every_kind_of_output() -> None:
    """The oracle above can tell output from the rest, so the test using it can fail."""
    kinds = {
        "chat content": ANSWERS["chat text"],
        "chat reasoning": ANSWERS["chat reasoning"],
        "chat tool arguments": ANSWERS["chat tools"],
        "responses text": ANSWERS["responses text"],
        "responses summary": ANSWERS["responses reasoning"],
        "responses reasoning text": ANSWERS["responses quirks-llamacpp-reasoning"],
        "responses arguments": ANSWERS["responses tools"],
        "chat audio": ANSWERS["chat audio"],
        "chat legacy arguments": ANSWERS["chat function-call"],
        "responses custom input": ANSWERS["responses custom-tool"],
        "responses audio": ANSWERS["responses audio"],
    }
    for kind, events in kinds.items():
        assert 1 <= _outputs_in(b"".join(events)) < len(events), kind


async def test_a_recording_replays_with_its_recorded_pacing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Recorded from a server, replayed by serve, recorded again: the same times.
    times = _stalled_times()
    options = ServerOptions(replay=STALLED, pacing=RecordedPacing(times=times))
    again = recorded_times(await _record(ChatServer(options)))
    assert again.body_bytes == times.body_bytes
    assert [offset for offset, _ in again.reads] == [offset for offset, _ in times.reads]
    assert [s for _, s in again.reads] == pytest.approx([s for _, s in times.reads], abs=1e-9)
    assert again.response_head == pytest.approx(times.response_head, abs=1e-9)


def test_a_recorded_pacing_must_match_its_body() -> None:
    with pytest.raises(TimesFormatError, match="38-byte body"):
        ServerOptions(replay=b"x" * 38 + b"y", pacing=RecordedPacing(times=_with_size(38)))
    with pytest.raises(ValueError, match="give replay too"):
        ServerOptions(pacing=RecordedPacing(times=_with_size(38)))


def _with_size(size: int) -> RecordedTimes:
    return RecordedTimes(response_head=None, body_bytes=size, reads=((0, 0.0),))


# -- serve's options ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--pace", "recorded"], "--pace recorded needs --replay FILE"),
        (["--first-token", "0.1", "--delay", "0.1"], "--first-token exclude --write-size"),
        (["--tokens", "5", "--write-size", "3"], "--tokens exclude --write-size and --delay"),
    ],
)
async def test_pacing_usage_errors(
    capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    status, _, err = await run_main(capsys, "serve", "--port", "0", *extra)
    assert status == 2
    assert message in err


async def test_serve_replay_pacing_usage_errors(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "rec.sse"
    path.write_bytes(STALLED)
    status, _, err = await run_main(
        capsys, "serve", "--port", "0", "--replay", str(path), "--pace", "recorded"
    )
    assert status == 2 and "rec.sse.times.json' does not exist" in err
    (tmp_path / "rec.sse.times.json").write_text(_with_size(5).dumps())
    status, _, err = await run_main(capsys, "serve", "--port", "0", "--replay", str(path))
    assert status == 2 and f"the replayed body has {len(STALLED)} bytes" in err
    status, _, err = await run_main(
        capsys, "serve", "--port", "0", "--replay", str(path), "--pace", "recorded",
        "--delay", "1",
    )  # fmt: skip
    assert status == 2 and "--pace recorded excludes --write-size and --delay" in err


async def test_serve_paces_by_the_sidecar_unless_told_fast(tmp_path: Path) -> None:
    path = _write_recording(tmp_path, STALLED, _stalled_times())
    parser = build_parser()
    recorded = options_from_args(parser.parse_args(["serve", "--replay", str(path)]))
    assert recorded.pacing == RecordedPacing(times=_stalled_times())
    fast = options_from_args(parser.parse_args(["serve", "--replay", str(path), "--pace", "fast"]))
    assert fast.pacing is None
    delayed = options_from_args(parser.parse_args(["serve", "--replay", str(path), "--delay", "1"]))
    assert delayed.pacing is None and delayed.delay == 1
    scripted = parser.parse_args(
        ["serve", "--first-token", "0.2", "--per-token", "0.02", "--tokens", "100"]
    )
    assert options_from_args(scripted).pacing == TokenPacing(
        first_token=0.2, per_token=0.02, tokens=100
    )


def test_serve_announces_its_pacing(capsys: pytest.CaptureFixture[str]) -> None:
    describe_pacing(TokenPacing(first_token=0.2, per_token=0.02, tokens=100, jitter=0.005))
    describe_pacing(RecordedPacing(times=_stalled_times()))
    describe_pacing(None)
    assert capsys.readouterr().out.splitlines() == [
        "pacing: first token after 200 ms, then one every 20 ms, 100 tokens an answer, "
        "jitter +-5 ms",
        "pacing: as recorded (4 reads over 1.750 s)",
    ]

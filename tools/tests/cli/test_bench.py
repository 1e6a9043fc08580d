"""``chunkwise bench`` against ``chunkwise serve`` in process, paced at a known timing.

Figures are checked exactly under trio's ``MockClock`` (virtual time), never
against a wall clock; the runs on real time check shapes and counts only.
"""

from __future__ import annotations

import gc
import io
import json
import random
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import chunkwise
from chunkwise.testing import RecordedRequest, ResponseWriter, ScriptedResponse, open_test_server
from chunkwise_tools.bench import (
    GIVE_UP_AFTER,
    BenchPlan,
    RunState,
    bench_document,
    describe_document,
    nice_ticks,
    progress_line,
    quantiles,
    render_report,
    run_plan,
)
from chunkwise_tools.cli import build_parser
from chunkwise_tools.cli._common import COLLECTOR_THRESHOLDS
from chunkwise_tools.cli.bench import DEFAULT_TIMEOUT, plan_from_args
from chunkwise_tools.server import ServerOptions, open_chat_server
from chunkwise_tools.server._pacing import TokenPacing
from helpers.bodies import choice, chunk, sse
from helpers.cli import run_main
from helpers.data import KEY_VAR
from helpers.processes import interrupt

pytestmark = pytest.mark.usefixtures("api_key")

PACED = ServerOptions(pacing=TokenPacing(first_token=0.01, per_token=0.001, tokens=5))
SVG = "{http://www.w3.org/2000/svg}"
XHTML = "{http://www.w3.org/1999/xhtml}"


def _args(base_url: str, *extra: str) -> list[str]:
    return ["bench", "--base-url", base_url, "--api-key-env", KEY_VAR, "--model", "text", *extra]


def _chat_body(prompt: str = "hi") -> bytes:
    request = {
        "model": "text",
        "messages": [{"role": "user", "content": prompt}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    return json.dumps(request).encode()


def _plan(server_url: str, **changes: Any) -> BenchPlan:
    fields: dict[str, Any] = {
        "endpoint": chunkwise.Endpoint(base_url=server_url),
        "path": "/chat/completions",
        "bodies": (_chat_body(),),
        "api": "chat",
        "requests": 5,
        "concurrency": 1,
        "rate": None,
        "duration": None,
    }
    fields.update(changes)
    return BenchPlan(**fields)


# -- the JSON document ----------------------------------------------------------------


async def test_bench_quiets_the_collector_before_its_run(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A full collection walking the startup heap, or every stream's live
    # objects, paused a 300-stream run for 6-31 ms, long enough for two
    # tokens of a stream to share a read.
    order: list[object] = []
    run = trio.run
    monkeypatch.setattr(gc, "freeze", lambda: order.append("freeze"))
    monkeypatch.setattr(gc, "set_threshold", lambda *limits: order.append(limits))

    def recorded_run(*args: Any, **kwargs: Any) -> Any:
        order.append("run")
        return run(*args, **kwargs)

    monkeypatch.setattr(trio, "run", recorded_run)
    async with open_chat_server(PACED) as server:
        status, _, _ = await run_main(capsys, *_args(server.base_url, "--requests", "1"), "--json")
    assert status == 0 and order == ["freeze", COLLECTOR_THRESHOLDS, "run"]


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_json_report_of_a_concurrent_run(
    capsys: pytest.CaptureFixture[str], api: str
) -> None:
    async with open_chat_server(PACED) as server:
        status, out, err = await run_main(
            capsys,
            *_args(server.base_url, "--api", api, "--requests", "6", "--concurrency", "3"),
            "--json",
        )
    assert status == 0 and err == ""  # no progress line on a pipe
    document = json.loads(out)
    assert set(document) == {
        "format", "version", "endpoint", "api", "model", "load", "requests", "elapsed",
        "requests_per_second", "output_tokens", "output_tokens_per_second", "reads", "ttft",
        "interrupted", "gave_up",
        "tpot", "inter_token_gap", "latency", "histograms", "per_second", "samples",
    }  # fmt: skip
    assert document["format"] == "chunkwise-bench" and document["version"] == 1
    assert document["api"] == api and document["model"] == "text"
    path = "/v1/responses" if api == "responses" else "/v1/chat/completions"
    assert document["endpoint"] == server.base_url.removesuffix("/v1") + path
    assert document["load"] == {
        "requests": 6, "concurrency": 3, "rate": None, "duration": None, "seed": None
    }  # fmt: skip
    assert document["requests"] == {"total": 6, "ok": 6, "failed": {}}
    assert document["output_tokens"] == 30
    for key in ("ttft", "tpot", "latency"):
        assert document[key]["count"] == 6
        assert set(document[key]) == {"count", "mean", "p50", "p90", "p99", "max"}
    # Five tokens an answer, four gaps each, fewer when a read held two tokens;
    # a read holding several tokens is counted.
    gaps, reads = document["inter_token_gap"]["count"], document["reads"]
    assert 0 < gaps <= 24
    assert reads["output"] == gaps + 6  # each answer's first output read has no gap
    assert reads["output"] + reads["several_outputs"] <= 30
    assert (reads["several_outputs"] == 0) == (reads["output"] == 30)
    assert len(document["samples"]) == 6 and all(s["ok"] for s in document["samples"])
    histogram = document["histograms"]["ttft"]
    assert sum(histogram["counts"]) == 6 and len(histogram["edges"]) == 41
    assert sum(document["per_second"]["output_tokens"]) == 30
    sent = [request.json() for request in server.requests]
    assert len(sent) == 6 and all(body["stream"] is True for body in sent)
    if api == "chat":
        assert all(body["stream_options"] == {"include_usage": True} for body in sent)


async def test_reads_that_carry_several_tokens_are_counted(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # A server that writes two tokens at a time: three reads, each one gap, each crowded.
    payloads = [chunk(choice(content=f"t{k} ")) for k in range(6)]
    events = [sse(p, done=False) for p in payloads]
    writes = [events[k] + events[k + 1] for k in range(0, 6, 2)]
    last = sse(chunk(choice(finish_reason="stop"), usage={"completion_tokens": 6}))
    script = ScriptedResponse(
        body=b"".join(writes) + last, write_sizes=(*map(len, writes), len(last)), delay=0.02
    )
    async with open_test_server(script) as server:
        status, out, _ = await run_main(
            capsys, *_args(server.base_url, "--json"), "--requests", "1"
        )
    document = json.loads(out)
    assert status == 0
    assert document["reads"] == {"output": 3, "several_outputs": 3}
    assert document["inter_token_gap"]["count"] == 2


async def test_text_report(capsys: pytest.CaptureFixture[str]) -> None:
    async with open_chat_server(PACED) as server:
        status, out, err = await run_main(capsys, *_args(server.base_url, "--requests", "2"))
    assert status == 0 and err == ""
    lines = out.splitlines()
    assert (
        lines[0] == f"bench: {server.base_url}/chat/completions (chat, model text), concurrency 1"
    )
    assert lines[1] == "requests: 2, ok 2, failed 0"
    assert lines[2].startswith("elapsed ") and "requests/s" in lines[2]
    assert lines[4].split() == ["(ms)", "count", "mean", "p50", "p90", "p99", "max"]
    assert [line.split()[0] for line in lines[5:9]] == ["TTFT", "TPOT", "inter-token", "latency"]
    gaps = int(lines[7].split()[2])
    assert 0 < gaps <= 8
    assert lines[9] == ""
    assert lines[10].startswith(f"reads carrying output: {gaps + 2}, ")
    assert lines[10].endswith(" of them with more than one output event (their tokens are one gap)")
    assert len(lines) == 11


async def test_failures_are_counted_by_kind_and_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    async with open_chat_server(ServerOptions(status=429)) as server:
        status, out, _ = await run_main(
            capsys, *_args(server.base_url, "--requests", "3", "--json")
        )
    assert status == 1
    document = json.loads(out)
    assert document["requests"] == {"total": 3, "ok": 0, "failed": {"HTTP 429": 3}}
    assert document["ttft"] is None and document["latency"] is None
    assert document["histograms"] == {"ttft": None, "inter_token_gap": None}


async def test_failed_requests_count_in_no_gap_and_no_read(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Cut mid-answer: a dozen tokens arrived, a dozen gaps measured, none reported.
    pacing = TokenPacing(first_token=0.2, per_token=0.02, tokens=100)
    async with open_chat_server(ServerOptions(pacing=pacing, disconnect_after=2000)) as server:
        plan = _plan(server.base_url, requests=2)
        state = await run_plan(plan)
    document = bench_document(plan, state)
    assert document["requests"] == {"total": 2, "ok": 0, "failed": {"IncompleteBody": 2}}
    assert document["inter_token_gap"] is None and document["histograms"]["inter_token_gap"] is None
    assert document["reads"] == {"output": 0, "several_outputs": 0}


@pytest.mark.parametrize(
    ("base", "options", "extra", "kind", "message", "hint"),
    [
        (
            "without /v1",
            ServerOptions(),
            (),
            "HTTP 404",
            "HTTP 404: Unknown request URL",
            "hint: try --base-url {v1}",
        ),
        (
            "/v1",
            ServerOptions(api_key="sekrit"),
            ("--api-key-env", "CHUNKWISE_TEST_UNSET"),
            "HTTP 401",
            "HTTP 401: ",
            "hint: no API key was sent, because $CHUNKWISE_TEST_UNSET is unset or empty "
            "(set it, or name another variable with --api-key-env)",
        ),
        ("closed port", ServerOptions(), (), "TransportError", "cannot connect to ", None),
    ],
    ids=["no /v1", "no key", "closed port"],
)
async def test_bench_gives_up_when_its_first_requests_all_fail_alike_and_says_why(
    capsys: pytest.CaptureFixture[str],
    base: str,
    options: ServerOptions,
    extra: tuple[str, ...],
    kind: str,
    message: str,
    hint: str | None,
) -> None:
    async with open_chat_server(options) as server:
        v1 = server.base_url
        url = {"without /v1": v1.removesuffix("/v1"), "/v1": v1}.get(base)
        if url is None:
            with trio.socket.socket() as probe:  # a port nobody listens on
                await probe.bind(("127.0.0.1", 0))
                url = f"http://127.0.0.1:{probe.getsockname()[1]}/v1"
        argv = _args(url, "--requests", "200", "--json", *extra)
        status, out, err = await run_main(capsys, *argv)
    assert status == 1
    document = json.loads(out)
    assert document["gave_up"] is True
    assert document["requests"] == {
        "total": GIVE_UP_AFTER, "ok": 0, "failed": {kind: GIVE_UP_AFTER}
    }  # fmt: skip
    assert len(server.requests) == (0 if base == "closed port" else GIVE_UP_AFTER)
    lines = err.splitlines()
    first = f"chunkwise bench: error: all {GIVE_UP_AFTER} requests failed the same way, "
    assert lines[0].startswith(first + "so no more were sent: " + message), err
    assert lines[1:] == ([hint.format(v1=v1)] if hint else [])


async def test_bench_goes_on_when_its_first_requests_fail_differently() -> None:
    script = [ScriptedResponse.error(500 + k % 2, "down", type="server_error") for k in range(8)]
    async with open_test_server(script) as server:
        state = await run_plan(_plan(server.base_url, requests=8))
    assert not state.gave_up and len(state.records) == 8
    assert {r.error for r in state.records} == {"HTTP 500", "HTTP 501"}


async def test_ctrl_c_reports_the_requests_that_finished_and_writes_the_page(
    tmp_path: Path,
) -> None:
    pacing = TokenPacing(first_token=0.01, per_token=0.01, tokens=20)
    page = tmp_path / "bench.html"
    async with open_chat_server(ServerOptions(pacing=pacing)) as server:

        async def some_finished() -> None:
            while len(server.requests) < 4:  # noqa: ASYNC110 - the server's own record
                await trio.sleep(0.01)

        argv = _args(server.base_url, "--requests", "10000", "--json", "--report", str(page))
        status, out, err = await interrupt(argv, after=some_finished)
    assert status == 130, err
    document = json.loads(out)
    assert document["interrupted"] is True
    finished = document["requests"]
    assert 3 <= finished["total"] == finished["ok"] < 10000  # the one cut off counts nowhere
    assert len(document["samples"]) == finished["total"]
    assert "(interrupted: those that finished)" in page.read_text(encoding="utf-8")


def test_the_text_report_says_it_was_interrupted() -> None:
    plan = _plan("http://127.0.0.1:1/v1")
    state = RunState(interrupted=True)
    lines = list(describe_document(bench_document(plan, state)))
    assert lines[1] == "requests: 0, ok 0, failed 0, interrupted: those that finished"


@pytest.mark.parametrize(
    ("options", "model", "kind"),
    [
        (ServerOptions(), "error", "failed: server_error"),
        (ServerOptions(disconnect_after=300), "text", "IncompleteBody"),
        (ServerOptions(status=503), "text", "HTTP 503"),
    ],
)
async def test_failure_kinds(options: ServerOptions, model: str, kind: str) -> None:
    body = json.loads(_chat_body())
    body["model"] = model
    async with open_chat_server(options) as server:
        plan = _plan(server.base_url, requests=2, bodies=(json.dumps(body).encode(),))
        state = await run_plan(plan)
    assert [record.error for record in state.records] == [kind, kind]
    assert state.errors == 2


async def test_prompts_from_jsonl_are_used_in_turn(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    prompts = tmp_path / "prompts.jsonl"
    lines = [
        '"first"',
        '{"prompt": "second"}',
        "",
        '{"messages": [{"role": "user", "content": "third"}]}',
    ]
    prompts.write_text("\n".join(lines) + "\n")
    async with open_chat_server(PACED) as server:
        status, _, _ = await run_main(
            capsys, *_args(server.base_url, "--prompts", str(prompts), "--requests", "4")
        )
    assert status == 0
    said = [request.json()["messages"][-1]["content"] for request in server.requests]
    assert said == ["first", "second", "third", "first"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "no prompts"),
        ("{oops", ":1: not JSON"),
        ("42", ':1: expected a string or an object with "prompt"'),
        ('{"input": "x"}', 'a prompt object needs "messages"'),
    ],
)
async def test_bad_prompt_files_are_usage_errors(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: str, message: str
) -> None:
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(content)
    status, _, err = await run_main(
        capsys, *_args("http://127.0.0.1:9/v1", "--prompts", str(prompts))
    )
    assert status == 2 and message in err


async def test_rate_and_concurrency_exclude_each_other(capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = await run_main(
        capsys, *_args("http://127.0.0.1:9/v1", "--rate", "2", "--concurrency", "3")
    )
    assert status == 2 and "not allowed with argument" in err


# -- exact figures in virtual time --------------------------------------------------


async def test_figures_are_exact_against_a_known_timing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    pacing = TokenPacing(first_token=0.2, per_token=0.02, tokens=100)
    async with open_chat_server(ServerOptions(pacing=pacing)) as server:
        plan = _plan(server.base_url, requests=4, concurrency=2)
        state = await run_plan(plan)
    document = bench_document(plan, state)
    assert document["requests"]["ok"] == 4
    for key, value in (("ttft", 0.2), ("tpot", 0.02), ("inter_token_gap", 0.02)):
        for name in ("mean", "p50", "p90", "p99", "max"):
            assert document[key][name] == pytest.approx(value, abs=1e-9), (key, name)
    assert document["inter_token_gap"]["count"] == 4 * 99
    assert document["latency"]["max"] == pytest.approx(0.2 + 99 * 0.02, abs=1e-9)
    assert [s["start"] for s in document["samples"]] == pytest.approx([0, 0, 2.18, 2.18], abs=1e-9)


async def test_rate_issues_at_seeded_poisson_arrivals(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_chat_server(PACED) as server:
        plan = _plan(server.base_url, requests=6, concurrency=None, rate=4.0, seed=11)
        state = await run_plan(plan)
    rng = random.Random(11)
    arrivals, due = [], 0.0
    for _ in range(6):
        due += rng.expovariate(4.0)
        arrivals.append(due)
    starts = sorted(record.start for record in state.records)
    assert starts == pytest.approx(arrivals, abs=1e-9)
    # Each is timed from its arrival: TTFT is the server's, exactly.
    assert all(r.ttft == pytest.approx(0.01, abs=1e-9) for r in state.records)


async def test_duration_stops_issuing_and_lets_requests_finish(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Each request takes 0.3 s: issued at 0, 0.3, 0.6 and 0.9, none at 1.2.
    pacing = TokenPacing(first_token=0.1, per_token=0.1, tokens=3)
    async with open_chat_server(ServerOptions(pacing=pacing)) as server:
        plan = _plan(server.base_url, requests=None, duration=1.0)
        state = await run_plan(plan)
    assert [r.start for r in state.records] == pytest.approx([0, 0.3, 0.6, 0.9], abs=1e-9)
    assert all(r.ok for r in state.records)
    assert state.finished - state.started == pytest.approx(1.2, abs=1e-9)


async def test_a_server_that_stops_answering_gives_a_report_of_timeouts_not_a_hang(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # As a server blocked on its own stdout: connections accepted, never answered.
    async def silent(request: RecordedRequest, writer: ResponseWriter) -> None:
        await trio.sleep_forever()

    async with open_test_server(silent) as server:
        endpoint = chunkwise.Endpoint(server.base_url, timeouts=chunkwise.Timeouts(idle=5))
        plan = _plan(server.base_url, endpoint=endpoint, requests=4, concurrency=2)
        state = await run_plan(plan)
    document = bench_document(plan, state)
    assert document["requests"] == {"total": 4, "ok": 0, "failed": {"IdleTimeout": 4}}
    assert state.finished - state.started == pytest.approx(10, abs=1e-9)


@pytest.mark.parametrize(("extra", "idle"), [((), DEFAULT_TIMEOUT), (("--timeout", "2.5"), 2.5)])
def test_timeout_is_the_idle_timeout_of_every_request(extra: tuple[str, ...], idle: float) -> None:
    plan = plan_from_args(build_parser().parse_args(_args("http://127.0.0.1:9/v1", *extra)))
    assert plan.endpoint.timeouts.idle == idle
    assert plan.endpoint.retries.max_retries == 0


async def test_requests_bounds_a_rate_run_too(autojump_clock: trio.testing.MockClock) -> None:
    async with open_chat_server(PACED) as server:
        state = await run_plan(_plan(server.base_url, requests=3, concurrency=None, rate=100.0))
    assert len(state.records) == 3


# -- the progress line ----------------------------------------------------------------


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


async def test_the_progress_line_is_drawn_then_erased_on_a_terminal(
    autojump_clock: trio.testing.MockClock,
) -> None:
    terminal = Terminal()
    pacing = TokenPacing(first_token=0.4, per_token=0.1, tokens=3)
    async with open_chat_server(ServerOptions(pacing=pacing)) as server:
        await run_plan(_plan(server.base_url, requests=2), terminal)
    shown = terminal.getvalue().split("\r\x1b[K")
    assert shown[0] == "" and shown[-1] == ""  # erased before the report
    assert shown[1].startswith("done 0/2  in flight ")  # drawn at once
    assert "done 1/2  in flight 1  errors 0  TTFT p50 400.0 ms" in shown


def test_progress_line_without_a_request_limit() -> None:
    state = RunState()
    plan = _plan("http://127.0.0.1:9/v1", requests=None, duration=5.0)
    assert progress_line(state, plan) == "done 0  in flight 0  errors 0  TTFT p50 -"


def test_quantiles_are_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert quantiles(values) == {"mean": 50.5, "p50": 50, "p90": 90, "p99": 99, "max": 100}
    assert quantiles([3.0]) == {"mean": 3, "p50": 3, "p90": 3, "p99": 3, "max": 3}


# -- the HTML report ------------------------------------------------------------------


async def test_the_html_report_parses_and_holds_four_charts(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    page = tmp_path / "bench.html"
    async with open_chat_server(PACED) as server:
        status, out, _ = await run_main(
            capsys, *_args(server.base_url, "--requests", "8", "--concurrency", "4"),
            "--report", str(page), "--json",
        )  # fmt: skip
    assert status == 0
    document = json.loads(out)
    text = page.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>")
    assert "http://" not in text.replace(document["endpoint"], "").replace(
        "http://www.w3.org/", ""
    )  # self-contained: nothing fetched
    root = ET.fromstring(text.removeprefix("<!DOCTYPE html>"))
    assert root.find(f"{XHTML}head/{XHTML}title") is not None
    reads = document["reads"]
    assert (
        f"{reads['output']} reads carried output, {reads['several_outputs']} of them more than "
        "one output event (tokens that came in one read are one gap)"
    ) in [p.text for p in root.iter(f"{XHTML}p")]
    svgs = root.findall(f".//{SVG}svg")
    titles = [svg.findtext(f"{SVG}title") for svg in svgs]
    assert titles == [
        "TTFT distribution",
        "Inter-token gap distribution",
        "Output throughput over time",
        "Latency over time",
    ]
    for svg in svgs:
        texts = [t.text for t in svg.iter(f"{SVG}text")]
        assert len(texts) > 6  # title, axis labels, tick labels
        assert svg.get("viewBox") == "0 0 560 300"
    ttft, gaps, throughput, latency = svgs
    assert sum(1 for _ in ttft.iter(f"{SVG}rect")) >= 1
    assert "TTFT (ms)" in [t.text for t in ttft.iter(f"{SVG}text")]
    assert sum(1 for _ in gaps.iter(f"{SVG}rect")) >= 1
    assert throughput.find(f"{SVG}polyline") is not None
    dots = [c for c in latency.iter(f"{SVG}circle") if c.find(f"{SVG}title") is not None]
    assert len(dots) == 16  # latency and TTFT of each request
    cells = [td.text for td in root.iter(f"{XHTML}td")]
    assert cells[:3] == ["8", "8", "0"]


def test_the_html_report_of_a_failed_run_says_so() -> None:
    document = {
        "endpoint": "http://x/v1/chat/completions",
        "api": "chat",
        "model": None,
        "load": {"requests": 2, "concurrency": 1, "rate": None, "duration": None, "seed": None},
        "requests": {"total": 2, "ok": 0, "failed": {"HTTP 500 <&>": 2}},
        "elapsed": 0.5,
        "requests_per_second": 0.0,
        "output_tokens_per_second": 0.0,
        "reads": {"output": 0, "several_outputs": 0},
        "ttft": None,
        "tpot": None,
        "inter_token_gap": None,
        "latency": None,
        "histograms": {"ttft": None, "inter_token_gap": None},
        "per_second": {"second": [0.0], "output_tokens": [0.0], "requests": [0.0]},
        "samples": [
            {"start": 0.0, "ok": False, "ttft": None, "latency": None, "error": "HTTP 500 <&>"},
            {"start": 0.2, "ok": False, "ttft": None, "latency": None, "error": "HTTP 500 <&>"},
        ],
    }
    root = ET.fromstring(render_report(document).removeprefix("<!DOCTYPE html>"))
    assert "HTTP 500 <&>" in [td.text for td in root.iter(f"{XHTML}td")]
    svgs = root.findall(f".//{SVG}svg")
    no_data = [any(t.text == "no data" for t in svg.iter(f"{SVG}text")) for svg in svgs]
    assert no_data == [True, True, True, False]  # failures still show on the latency chart
    marks = list(svgs[3].iter(f"{SVG}path"))
    assert len(marks) == 2


@pytest.mark.parametrize(
    ("low", "high", "ticks"),
    [
        (0, 1, [0, 0.2, 0.4, 0.6, 0.8, 1.0]),
        (0, 7, [0, 2, 4, 6, 8]),
        (193.2, 207.9, [190, 195, 200, 205, 210]),
        (0, 0, [0, 0.2, 0.4, 0.6, 0.8, 1.0]),
    ],
)
def test_nice_ticks_cover_the_range_in_round_steps(
    low: float, high: float, ticks: list[float]
) -> None:
    assert nice_ticks(low, high) == pytest.approx(ticks)

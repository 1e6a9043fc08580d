"""Background Responses on the embedded server: created, polled, streamed again from any
sequence number, cancelled, retained, refused a re-stream, and cut by every fault option.

The server runs over memory streams in virtual time (``autojump_clock``), with its
background nursery owned by the test, so "while running" and "after retention" are
exact, never timed.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing

import chunkwise
from chunkwise.testing import serve_stream
from chunkwise_tools.cli import build_parser
from chunkwise_tools.cli.serve import options_from_args
from chunkwise_tools.server import RESPONSE_SCENARIOS, ChatServer, ServerOptions, open_chat_server
from chunkwise_tools.server._response_wire import response_scenario_payloads
from helpers.servers import Exchange, exchange, http_exchange

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import ExceptionGroup

Send = Callable[..., Awaitable[Exchange]]


@asynccontextmanager
async def server(**options: Any) -> AsyncIterator[Send]:
    """A ChatServer whose background runs live in this block's nursery; yields ``send``."""
    async with trio.open_nursery() as nursery:
        handler = ChatServer(ServerOptions(**options), nursery=nursery)

        async def send(method: str, path: str, body: Any = None) -> Exchange:
            client, served = trio.testing.memory_stream_pair()
            nursery.start_soon(serve_stream, served, handler)
            async with client:
                data = b"" if body is None else json.dumps(body).encode()
                return await exchange(client, method, path, data)

        yield send
        nursery.cancel_scope.cancel()


def create(model: str = "text", **extra: Any) -> dict[str, Any]:
    return {"model": model, "input": "hi", "background": True, **extra}


def events_of(body: bytes) -> list[dict[str, Any]]:
    decoder = chunkwise.SSEDecoder()
    return [json.loads(e.data) for e in [*decoder.feed(body), *decoder.end()]]


def document(got: Exchange) -> dict[str, Any]:
    value = json.loads(got.body)
    assert isinstance(value, dict)
    return value


def error_body(message: str, param: str | None = None) -> dict[str, Any]:
    error = {"message": message, "type": "invalid_request_error", "param": param, "code": None}
    return {"error": error}


def not_found(response_id: str) -> dict[str, Any]:
    return error_body(f"Response with id '{response_id}' not found.")


TERMINAL = {"response.completed", "response.incomplete", "response.failed"}
OPENAI_NAMES = [name for name, s in RESPONSE_SCENARIOS.items() if not s.llama_cpp]


# --- creating -------------------------------------------------------------------------


@pytest.mark.parametrize("name", OPENAI_NAMES)
async def test_a_streamed_background_response_is_the_scenario_in_background_mode(
    name: str,
) -> None:
    async with server() as send:
        got = await send("POST", "/v1/responses", create(name, stream=True))
    assert got.status == 200 and got.complete
    events = events_of(got.body)
    # Every event numbered from 0, one per event.
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    lifecycle = [e for e in events if e["type"] != "keepalive"][:3]
    assert [e["type"] for e in lifecycle] == [
        "response.created",
        "response.queued",
        "response.in_progress",
    ]
    assert [e["response"]["status"] for e in lifecycle] == ["queued", "queued", "in_progress"]
    responses = [e["response"] for e in events if "response" in e]
    response_id = responses[0]["id"]
    assert all(r["id"] == response_id and r["background"] and r["store"] for r in responses)
    # The same events as the non-background stream, after the lifecycle: nothing lost.
    plain = response_scenario_payloads(RESPONSE_SCENARIOS[name], model=name, echo=create(name))

    def bare(stream: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [
            {k: v for k, v in e.items() if k not in ("sequence_number", "response")}
            for e in stream
            if e["type"] != "response.queued"
        ]

    assert bare(events) == bare(plain)
    parser = chunkwise.responses.Parser()
    parser.feed(got.body)
    parser.end()
    assert parser.result.output_text == RESPONSE_SCENARIOS[name].text
    assert not parser.result.anomalies


async def test_each_background_response_has_its_own_id() -> None:
    async with server() as send:
        first = document(await send("POST", "/v1/responses", create()))
        second = document(await send("POST", "/v1/responses", create()))
    assert first["id"] != second["id"]
    assert first["id"].startswith("resp_") and second["id"].startswith("resp_")


async def test_a_percent_encoded_id_reaches_its_response() -> None:
    # A client quotes the id as one path segment; the server reads it decoded.
    async with server() as send:
        response_id = document(await send("POST", "/v1/responses", create()))["id"]
        encoded = "".join(f"%{ord(c):02X}" for c in response_id)
        got = await send("GET", f"/v1/responses/{encoded}")
        cancel = await send("POST", f"/v1/responses/{encoded}/cancel")
    assert got.status == 200 and document(got)["id"] == response_id
    assert cancel.status in (200, 400)  # cancelled, or already finished: found either way


async def test_a_background_create_is_answered_queued_then_polled_to_its_end(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with server(delay=1.0) as send:
        created = await send("POST", "/v1/responses", create())
        assert created.status == 200
        queued = document(created)
        assert (queued["status"], queued["background"], queued["output"]) == ("queued", True, [])
        path = f"/v1/responses/{queued['id']}"
        statuses: list[str] = []
        while not statuses or statuses[-1] in ("queued", "in_progress"):
            polled = await send("GET", path)
            assert polled.status == 200
            statuses.append(document(polled)["status"])
            await trio.sleep(1.0)
        final = document(await send("GET", path))
    assert statuses[0] == "queued" and "in_progress" in statuses
    assert statuses[-1] == "completed"
    assert final["output"][0]["content"][0]["text"] == RESPONSE_SCENARIOS["text"].text
    assert final["usage"]["output_tokens"] > 0


# --- streaming again ------------------------------------------------------------------


async def test_get_stream_replays_exactly_the_events_after_starting_after(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with server(delay=0.5) as send:
        created = await send("POST", "/v1/responses", create("tools", stream=True))
        full = events_of(created.body)
        path = f"/v1/responses/{full[0]['response']['id']}?stream=true"
        again = await send("GET", path)
        assert again.complete and again.body == created.body
        for after in range(-1, len(full) + 1):
            query = "" if after < 0 else f"&starting_after={after}"
            got = await send("GET", path + query)
            assert got.status == 200 and got.complete
            assert events_of(got.body) == full[after + 1 :]


async def test_get_stream_while_running_follows_the_run_to_its_end(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with server(delay=1.0) as send:
        response_id = document(await send("POST", "/v1/responses", create()))["id"]
        await trio.sleep(3.5)  # a few events in
        got = await send("GET", f"/v1/responses/{response_id}?stream=true&starting_after=1")
        full = events_of((await send("GET", f"/v1/responses/{response_id}?stream=true")).body)
    assert got.complete
    assert events_of(got.body) == full[2:]
    assert full[-1]["type"] == "response.completed"


async def test_the_run_goes_on_after_its_client_leaves(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        handler = ChatServer(ServerOptions(delay=1.0), nursery=nursery)
        client, served = trio.testing.memory_stream_pair()
        nursery.start_soon(serve_stream, served, handler)
        body = json.dumps(create(stream=True)).encode()
        head = b"POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body)
        await client.send_all(head + body)
        received = b""
        while b"response.in_progress" not in received:
            received += await client.receive_some(65536)
        await client.aclose()  # the client leaves mid-answer
        found = re.search(rb'"id":"(resp_[^"]+)"', received)
        assert found is not None
        response_id = found.group(1).decode()
        await trio.sleep(100)
        retained = handler.retained(response_id)
        assert retained is not None and retained["status"] == "completed"
        nursery.cancel_scope.cancel()


# --- cancelling -----------------------------------------------------------------------


async def test_cancel_a_running_response(autojump_clock: trio.testing.MockClock) -> None:
    async with server(delay=1.0) as send, trio.open_nursery() as watchers:
        response_id = document(await send("POST", "/v1/responses", create()))["id"]
        path = f"/v1/responses/{response_id}"
        streamed: list[Exchange] = []

        async def watch() -> None:
            streamed.append(await send("GET", path + "?stream=true"))

        watchers.start_soon(watch)
        await trio.sleep(3.5)
        cancelled = await send("POST", path + "/cancel")
        assert cancelled.status == 200
        assert document(cancelled)["status"] == "cancelled"
        assert document(cancelled)["id"] == response_id
        await trio.sleep(100)
        assert document(await send("GET", path))["status"] == "cancelled"
        again = await send("POST", path + "/cancel")  # idempotent
        assert (again.status, document(again)["status"]) == (200, "cancelled")
        replay = events_of((await send("GET", path + "?stream=true")).body)
    # The stream that was watching ends with what was produced: no terminal event.
    assert streamed[0].complete
    watched = events_of(streamed[0].body)
    assert watched == replay
    assert 0 < len(watched) < 10 and not {e["type"] for e in watched} & TERMINAL


@pytest.mark.parametrize(
    ("name", "words"),
    [("text", "a completed"), ("length", "an incomplete"), ("error", "a failed")],
)
async def test_cancel_a_response_that_finished_on_its_own_is_refused(name: str, words: str) -> None:
    async with server() as send:
        created = await send("POST", "/v1/responses", create(name, stream=True))
        response_id = events_of(created.body)[0]["response"]["id"]
        got = await send("POST", f"/v1/responses/{response_id}/cancel")
        polled = await send("GET", f"/v1/responses/{response_id}")
    assert got.status == 400
    assert document(got) == error_body(f"Cannot cancel {words} response.")
    assert document(polled) == events_of(created.body)[-1]["response"]


async def test_cancel_an_unknown_or_non_background_response() -> None:
    async with server() as send:
        unknown = await send("POST", "/v1/responses/resp_nope/cancel")
        plain = document(await send("POST", "/v1/responses", {"model": "text", "input": "hi"}))
        refused = await send("POST", f"/v1/responses/{plain['id']}/cancel")
    assert (unknown.status, document(unknown)) == (404, not_found("resp_nope"))
    assert refused.status == 400
    assert document(refused) == error_body(
        "Only responses created with background=true can be cancelled."
    )


# --- what is stored, and for how long ------------------------------------------------


async def test_a_non_background_response_is_retrievable_but_not_by_stream() -> None:
    async with server() as send:
        plain = await send("POST", "/v1/responses", {"model": "text", "input": "hi"})
        path = f"/v1/responses/{document(plain)['id']}"
        got = await send("GET", path)
        streamed = await send("GET", path + "?stream=true")
    assert (got.status, document(got)) == (200, document(plain))
    assert streamed.status == 400
    assert document(streamed) == error_body(
        "This response cannot be streamed because it was not created with background=true.",
        param="stream",
    )


async def test_store_false_is_not_retrievable_nor_allowed_in_background() -> None:
    async with server() as send:
        plain = await send("POST", "/v1/responses", {"model": "text", "input": "x", "store": False})
        got = await send("GET", f"/v1/responses/{document(plain)['id']}")
        refused = await send("POST", "/v1/responses", create(store=False))
    assert (got.status, document(got)) == (404, not_found(document(plain)["id"]))
    assert refused.status == 400
    assert document(refused) == error_body("Background mode requires store=true.", param="store")


async def test_a_llama_cpp_scenario_has_no_background_mode() -> None:
    async with server() as send:
        got = await send("POST", "/v1/responses", create("quirks-llamacpp"))
    assert got.status == 400 and document(got)["error"]["param"] == "background"


async def test_a_response_expires_retention_seconds_after_it_ended(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with server(delay=10.0, retention=60.0) as send:
        response_id = document(await send("POST", "/v1/responses", create()))["id"]
        path = f"/v1/responses/{response_id}"
        # Running longer than the retention: kept all along.
        events = events_of((await send("GET", path + "?stream=true")).body)
        assert trio.current_time() > 60 and events[-1]["type"] == "response.completed"
        await trio.sleep(59.0)
        assert (await send("GET", path)).status == 200
        await trio.sleep(1.0)
        gone = await send("GET", path)
    assert (gone.status, document(gone)) == (404, not_found(response_id))


@pytest.mark.parametrize(
    ("window", "words"), [(300.0, "5 minutes"), (60.0, "1 minute"), (2.5, "2.5 seconds")]
)
async def test_a_re_stream_is_refused_once_the_response_is_too_old(
    autojump_clock: trio.testing.MockClock, window: float, words: str
) -> None:
    async with server(resume_window=window, retention=10_000.0) as send:
        response_id = document(await send("POST", "/v1/responses", create()))["id"]
        path = f"/v1/responses/{response_id}"
        await trio.sleep(window - 0.5)
        assert (await send("GET", path + "?stream=true")).complete
        await trio.sleep(0.5)
        refused = await send("GET", path + "?stream=true&starting_after=3")
        polled = await send("GET", path)  # polling still works
    assert refused.status == 400
    assert document(refused) == error_body(
        f"This response can no longer be streamed because it is more than {words} old",
        param="stream",
    )
    assert document(polled)["status"] == "completed"


async def test_resume_window_zero_refuses_every_re_stream() -> None:
    async with server(resume_window=0.0) as send:
        created = await send("POST", "/v1/responses", create(stream=True))
        response_id = events_of(created.body)[0]["response"]["id"]
        refused = await send("GET", f"/v1/responses/{response_id}?stream=true")
    assert created.complete  # the creating stream itself is not a re-stream
    assert refused.status == 400


@pytest.mark.parametrize("value", ["x", "-1", "1.5"])
async def test_a_bad_starting_after_is_refused(value: str) -> None:
    async with server() as send:
        response_id = document(await send("POST", "/v1/responses", create()))["id"]
        got = await send("GET", f"/v1/responses/{response_id}?stream=true&starting_after={value}")
    assert got.status == 400 and document(got)["error"]["param"] == "starting_after"


async def test_stored_response_paths_allow_their_one_method() -> None:
    async with server() as send:
        get_cancel = await send("GET", "/v1/responses/resp_x/cancel")
        post_get = await send("POST", "/v1/responses/resp_x")
        deeper = await send("GET", "/v1/responses/resp_x/cancel/more")
    assert (get_cancel.status, get_cancel.headers["allow"]) == (405, "POST")
    assert (post_get.status, post_get.headers["allow"]) == (405, "GET")
    assert deeper.status == 404


# --- faults: cuts ---------------------------------------------------------------------


async def _full_stream(name: str = "tools") -> list[bytes]:
    async with server() as send:
        body = (await send("POST", "/v1/responses", create(name, stream=True))).body
    return [block + b"\n\n" for block in body.split(b"\n\n")[:-1]]


async def test_cut_after_events_cuts_every_connection_after_exactly_n_events() -> None:
    full = await _full_stream()
    for n in range(len(full) + 2):
        async with server(cut_after_events=n) as send:
            created = await send("POST", "/v1/responses", create("tools", stream=True))
            assert created.body == b"".join(full[:n])
            assert created.complete == (n >= len(full))
            if n:
                response_id = events_of(created.body)[0]["response"]["id"]
                again = await send(
                    "GET", f"/v1/responses/{response_id}?stream=true&starting_after=2"
                )
                assert events_of(again.body) == events_of(b"".join(full))[3 : 3 + n]


async def test_disconnect_after_cuts_every_connection_at_exactly_that_byte() -> None:
    full = b"".join(await _full_stream())
    for offset in [*range(0, 40), *range(len(full) - 3, len(full) + 2), len(full) // 2]:
        async with server(disconnect_after=offset, write_size=7) as send:
            created = await send("POST", "/v1/responses", create("tools", stream=True))
        assert created.body == full[:offset]
        assert not created.complete or offset > len(full)


async def _resume_until_done(send: Send) -> tuple[list[dict[str, Any]], list[bytes]]:
    """Create a streamed background response, then resume after every cut until its end."""
    got = await send("POST", "/v1/responses", create("tools", stream=True))
    bodies = [got.body]
    events = events_of(got.body.rpartition(b"\n\n")[0] + b"\n\n") if b"\n\n" in got.body else []
    response_id = "resp_chunkwise_tools_1"
    while not events or events[-1]["type"] not in TERMINAL:
        after = events[-1]["sequence_number"] if events else None
        query = "" if after is None else f"&starting_after={after}"
        got = await send("GET", f"/v1/responses/{response_id}?stream=true{query}")
        bodies.append(got.body)
        if b"\n\n" in got.body:
            events += events_of(got.body.rpartition(b"\n\n")[0] + b"\n\n")
    return events, bodies


@pytest.mark.parametrize("seed", range(12))
async def test_a_random_cut_is_reproducible_and_resuming_gets_every_event(seed: int) -> None:
    full = events_of(b"".join(await _full_stream()))
    async with server(cut_seed=seed) as send:
        events, bodies = await _resume_until_done(send)
    async with server(cut_seed=seed) as send:
        events_again, bodies_again = await _resume_until_done(send)
    assert events == full
    assert bodies == bodies_again and events_again == full


async def test_different_seeds_cut_differently() -> None:
    cuts = set()
    for seed in range(6):
        async with server(cut_seed=seed) as send:
            got = await send("POST", "/v1/responses", create("tools", stream=True))
        cuts.add(len(got.body))
    assert len(cuts) > 1


async def test_cut_options_cut_non_background_streams_too() -> None:
    async with server(cut_after_events=2) as send:
        got = await send("POST", "/v1/responses", {"model": "text", "input": "x", "stream": True})
    assert not got.complete
    assert [e["type"] for e in events_of(got.body)] == ["response.created", "response.in_progress"]


# --- the real server ------------------------------------------------------------------


async def test_the_loopback_server_runs_background_responses_and_ends_them() -> None:
    async with open_chat_server(ServerOptions(delay=0.001)) as running:
        status, _, body = await http_exchange(
            running, "POST", "/v1/responses", json.dumps(create(stream=True)).encode()
        )
        response_id = events_of(body)[0]["response"]["id"]
        polled = await http_exchange(running, "GET", f"/v1/responses/{response_id}")
        assert status == 200 and json.loads(polled[2])["status"] == "completed"
    # A run still going when the server ends is cancelled with it (no hang).
    async with open_chat_server(ServerOptions(delay=3600.0)) as running:
        status, _, body = await http_exchange(
            running, "POST", "/v1/responses", json.dumps(create()).encode()
        )
        assert json.loads(body)["status"] == "queued"


def test_serve_flags_set_the_background_options() -> None:
    args = build_parser().parse_args(
        [
            "serve",
            "--cut-after-events",
            "3",
            "--cut-seed",
            "7",
            "--retention",
            "30",
            "--resume-window",
            "0",
        ]
    )
    options = options_from_args(args)
    assert (options.cut_after_events, options.cut_seed) == (3, 7)
    assert (options.retention, options.resume_window) == (30.0, 0.0)
    defaults = options_from_args(build_parser().parse_args(["serve"]))
    assert (defaults.retention, defaults.resume_window) == (300.0, 300.0)
    assert (defaults.cut_after_events, defaults.cut_seed) == (None, None)


@pytest.mark.parametrize(
    "bad",
    [{"retention": -1.0}, {"resume_window": float("nan")}, {"cut_after_events": -1}],
)
def test_bad_background_options_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=next(iter(bad))):
        ServerOptions(**bad)


# --- the official openai SDK as an oracle ---------------------------------------------


async def test_the_sdk_creates_resumes_polls_and_cancels() -> None:
    openai = pytest.importorskip("openai")
    # The SDK runs on asyncio; trio runs this test, so it runs in a thread.
    import asyncio  # only here: the SDK's own event loop, in a worker thread

    async with (
        open_chat_server() as quick,
        open_chat_server(ServerOptions(delay=3600.0)) as slow,
    ):

        async def run() -> tuple[Any, ...]:
            def sdk(server: Any) -> Any:
                return openai.AsyncOpenAI(
                    base_url=server.base_url, api_key="k", max_retries=0, timeout=10
                )

            async with sdk(quick) as client, sdk(slow) as slow_client:
                streamed = await client.responses.create(
                    model="tools", input="hi", background=True, stream=True
                )
                full = [event async for event in streamed]
                response_id = full[0].response.id
                resumed = await client.responses.retrieve(
                    response_id, stream=True, starting_after=3
                )
                tail = [event async for event in resumed]
                polled = await client.responses.retrieve(response_id)
                with pytest.raises(openai.BadRequestError, match="Cannot cancel a completed"):
                    await client.responses.cancel(response_id)
                queued = await slow_client.responses.create(
                    model="text", input="hi", background=True
                )
                cancelled = await slow_client.responses.cancel(queued.id)
                with pytest.raises(openai.NotFoundError):
                    await client.responses.retrieve("resp_missing")
            return full, tail, polled, queued, cancelled

        full, tail, polled, queued, cancelled = await trio.to_thread.run_sync(
            lambda: asyncio.run(run())
        )
    assert [e.sequence_number for e in full] == list(range(len(full)))
    assert [e.model_dump() for e in tail] == [e.model_dump() for e in full[4:]]
    assert (polled.status, polled.background) == ("completed", True)
    assert [c.name for c in polled.output if c.type == "function_call"] == ["get_weather"] * 2
    assert (queued.status, cancelled.status, cancelled.id) == ("queued", "cancelled", queued.id)


async def test_cut_options_cut_chat_streams_too() -> None:
    body = {"model": "text", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    async with server(cut_after_events=2) as send:
        got = await send("POST", "/v1/chat/completions", body)
    assert not got.complete
    assert len(events_of(got.body)) == 2 and got.body.endswith(b"\n\n")


async def test_a_stream_without_a_terminal_event_is_not_stored() -> None:
    async with server() as send:
        body = {"model": "quirks-llamacpp-error", "input": "hi", "stream": True}
        streamed = await send("POST", "/v1/responses", body)
        response_id = events_of(streamed.body)[0]["response"]["id"]
        got = await send("GET", f"/v1/responses/{response_id}")
    assert (got.status, document(got)) == (404, not_found(response_id))


async def test_a_chat_server_without_a_nursery_cannot_run_background_responses() -> None:
    client, served = trio.testing.memory_stream_pair()
    async with client:
        with pytest.raises(ExceptionGroup) as info:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(serve_stream, served, ChatServer())
                await exchange(client, "POST", "/v1/responses", json.dumps(create()).encode())
    assert info.group_contains(RuntimeError, match="nursery")

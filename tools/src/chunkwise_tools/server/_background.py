"""Stored and background Responses: runs that outlive their connection, replayable and cancellable.

Theory of operation
-------------------
OpenAI's background mode (``"background": true``) starts a response that runs
on the server whatever happens to the connection that asked for it: the
client may poll ``GET /v1/responses/{id}``, stream it again with ``GET
/v1/responses/{id}?stream=true&starting_after=N`` (the events after sequence
number ``N``), or ``POST /v1/responses/{id}/cancel`` it.  :class:`ResponseStore`
is that part of ``chunkwise serve``.  A background response is a :class:`Run`:
the scenario's whole stream, planned up front (:func:`background_payloads`),
and a task that *produces* it one event at a time, ``delay`` seconds apart.
The task runs in a nursery the server owns (:func:`~._chat_server.open_chat_server`
opens it), never in a connection's: a client that leaves, or a cut, does not
stop it; ``cancel`` cancels its scope; the server's end cancels them all.
Every connection streaming a run (the creating one and each ``GET``) reads the
events produced so far, then waits for the next, so all of them see one
sequence, and a stream is replayable from any sequence number.

Rules
-----
1. A background stream is the scenario's stream as OpenAI sends it in
   background mode: each ``response`` object has the run's own id,
   ``background: true`` and ``store: true``; ``response.created`` says
   ``queued`` and is followed by a ``response.queued`` event; every event
   carries ``sequence_number``, from 0, one per event.
2. ``POST`` with ``stream: false`` answers at once with the ``queued``
   response; with ``stream: true`` it streams the run from its first event.
   Background mode needs ``store`` (not false) and a scenario in OpenAI's
   dialect (llama-server has no background mode), else 400.
3. ``GET /v1/responses/{id}``: the latest ``response`` object the run has
   produced (``queued``, ``in_progress``, then the terminal one), or its
   ``cancelled`` version.  With ``stream=true``: the events after
   ``starting_after`` (all of them without it), as they are produced, until
   the run ends.  A response not created in background mode cannot be
   streamed (400), nor one at least ``resume_window`` seconds old (400, with
   the words OpenAI uses: openai-python #2828).
4. ``POST /v1/responses/{id}/cancel``: a queued or running run is cancelled
   (200 and the response, ``cancelled``; its streams end after the events
   already produced, with no terminal event); cancelling it again answers the
   same (idempotent, as OpenAI documents); one that finished on its own gets
   400 ``Cannot cancel a completed response.`` (as OpenAI answers, seen in
   litellm #39617; ``failed`` and ``incomplete`` alike); a response not created
   in background mode gets 400.
5. A response is retained ``retention`` seconds after it ended (a
   non-background one: after it was answered); then, like an id never seen,
   it is 404 ``Response with id '...' not found.``.  A running one is kept.
   Non-background responses are stored unless the request said ``store:
   false`` (under the scenario's fixed id: the latest one wins).
6. Cuts (:class:`StreamCuts`) apply to each streaming connection on its own,
   counted from its first body byte: after ``disconnect_after`` bytes, after
   ``cut_after_events`` events, or, with ``cut_seed``, after a random number
   of whole events and a random number of the next one's bytes (the same seed
   gives the same cuts, connection after connection).  A cut connection ends
   without finishing its body; the run goes on.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import parse_qs, unquote

import trio

from chunkwise.lowlevel import TERMINAL_STATUSES
from chunkwise.testing import RecordedRequest, ResponseWriter

from ._replies import send_error, send_json
from ._response_wire import response_event_bytes

__all__ = ["ResponseStore", "Run", "StreamCuts", "background_payloads"]

#: How long a finished response stays retrievable by default (seconds).
DEFAULT_RETENTION = 300.0
#: How old a background response may be and still be streamed again (seconds).
DEFAULT_RESUME_WINDOW = 300.0


def background_payloads(
    payloads: Sequence[Mapping[str, Any]], response_id: str
) -> list[dict[str, Any]]:
    """A scenario's events as a background response streams them (rule 1)."""
    events: list[dict[str, Any]] = []
    for payload in payloads:
        event = {key: value for key, value in payload.items() if key != "sequence_number"}
        response = event.get("response")
        if isinstance(response, Mapping):
            response = {**response, "id": response_id, "background": True, "store": True}
            if event.get("type") == "response.created":
                response["status"] = "queued"
            event["response"] = response
        events.append(event)
        if event.get("type") == "response.created":
            events.append({"type": "response.queued", "response": dict(response or {})})
    return [
        {"type": event.get("type"), "sequence_number": number, **event}
        for number, event in enumerate(events)
    ]


class StreamCuts:
    """Where each streaming connection is cut (rule 6); one per server."""

    def __init__(
        self,
        *,
        disconnect_after: int | None = None,
        after_events: int | None = None,
        seed: int | None = None,
    ) -> None:
        self.disconnect_after = disconnect_after
        self.after_events = after_events
        self._random = random.Random(seed) if seed is not None else None

    def offset(self, events: Sequence[bytes]) -> int | None:
        """The body bytes a connection about to send ``events`` sends before its cut."""
        offsets: list[int] = []
        if self.disconnect_after is not None:
            offsets.append(self.disconnect_after)
        if self.after_events is not None and self.after_events < len(events):
            offsets.append(sum(len(e) for e in events[: self.after_events]))
        if self._random is not None:
            whole = self._random.randint(0, len(events))
            if whole < len(events):
                into = self._random.randrange(len(events[whole]) or 1)
                offsets.append(sum(len(e) for e in events[:whole]) + into)
        return min(offsets, default=None)


class Run:
    """One stored response: its planned events, how many were produced, its state."""

    def __init__(
        self,
        response_id: str,
        payloads: Sequence[Mapping[str, Any]],
        *,
        background: bool,
        now: float,
    ) -> None:
        self.id = response_id
        self.background = background
        self.created_at = now
        self.events = [response_event_bytes(payload) for payload in payloads]
        # The response object as it stands after each event (rule 3).
        self._snapshots: list[dict[str, Any]] = []
        latest: dict[str, Any] = {}
        for payload in payloads:
            response = payload.get("response")
            if isinstance(response, Mapping):
                latest = dict(response)
            self._snapshots.append(latest)
        self.produced = len(self.events) if not background else 0
        self.cancelled = False
        self.ended_at: float | None = None if background else now
        self.scope = trio.CancelScope()
        self._changed = trio.Event()

    @property
    def ended(self) -> bool:
        return self.ended_at is not None

    @property
    def document(self) -> dict[str, Any]:
        """The response object as it stands now."""
        document = self._snapshots[max(self.produced - 1, 0)] if self._snapshots else {}
        if self.cancelled:
            return {**document, "status": "cancelled"}
        return document

    def produce(self) -> None:
        self.produced += 1
        self._notify()

    def end(self, now: float) -> None:
        if self.ended_at is None:
            self.ended_at = now
        self._notify()

    async def wait_changed(self) -> None:
        await self._changed.wait()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()


class ResponseStore:
    """The responses the server keeps, and the tasks producing the background ones.

    ``nursery`` is the server's own (rule 1 of the theory above); without one,
    a background request is a programming error (:class:`RuntimeError`).
    """

    def __init__(
        self,
        *,
        nursery: trio.Nursery | None,
        delay: float = 0.0,
        write_size: int | None = None,
        retention: float = DEFAULT_RETENTION,
        resume_window: float | None = DEFAULT_RESUME_WINDOW,
        cuts: StreamCuts | None = None,
    ) -> None:
        self._nursery = nursery
        self._delay = delay
        self._write_size = write_size
        self._retention = retention
        self._resume_window = resume_window
        self.cuts = cuts if cuts is not None else StreamCuts()
        self._runs: dict[str, Run] = {}
        self._numbers = itertools.count(1)

    def get(self, response_id: str) -> Run | None:
        """The retained response ``response_id``, or None (never seen, or expired: rule 5)."""
        self._expire()
        return self._runs.get(response_id)

    def keep(self, payloads: Sequence[Mapping[str, Any]]) -> None:
        """Store a finished non-background response (rule 5): its terminal ``response``."""
        response = payloads[-1].get("response") if payloads else None
        if not isinstance(response, Mapping) or response.get("status") not in TERMINAL_STATUSES:
            return  # no terminal event: nothing OpenAI would have stored either
        response_id = response.get("id")
        if isinstance(response_id, str):
            self._expire()
            self._runs[response_id] = Run(
                response_id, payloads, background=False, now=trio.current_time()
            )

    async def create(
        self,
        payloads: Sequence[Mapping[str, Any]],
        *,
        stream: bool,
        writer: ResponseWriter,
        request_id: str,
    ) -> None:
        """Start a background run (rule 2) and answer its ``POST``."""
        if self._nursery is None:
            raise RuntimeError("background responses need the server's nursery (open_chat_server)")
        # The scenario's id, numbered: each run has its own (keepalives carry none).
        base_id = next(str(p["response"]["id"]) for p in payloads if "response" in p)
        response_id = f"{base_id}_{next(self._numbers)}"
        run = Run(
            response_id,
            background_payloads(payloads, response_id),
            background=True,
            now=trio.current_time(),
        )
        self._expire()
        self._runs[response_id] = run
        self._nursery.start_soon(self._produce, run)
        if stream:
            await self._stream(run, writer, request_id, starting_after=None)
        else:
            await send_json(writer, 200, run.document, request_id)

    async def answer(
        self, request: RecordedRequest, writer: ResponseWriter, request_id: str
    ) -> None:
        """``GET /v1/responses/{id}`` or ``POST /v1/responses/{id}/cancel`` (rules 3-5)."""
        path, _, query = request.target.partition("?")
        # The id is one path segment, percent-encoded as a client quotes it.
        response_id = unquote(path.split("/")[3])
        run = self.get(response_id)
        if run is None:
            await send_error(
                writer,
                404,
                f"Response with id '{response_id}' not found.",
                request_id,
                type="invalid_request_error",
            )
        elif path.endswith("/cancel"):
            await self._cancel(run, writer, request_id)
        else:
            await self._retrieve(run, parse_qs(query), writer, request_id)

    async def _retrieve(
        self, run: Run, query: Mapping[str, list[str]], writer: ResponseWriter, request_id: str
    ) -> None:
        if query.get("stream", ["false"])[-1].lower() != "true":
            await send_json(writer, 200, run.document, request_id)
            return
        refusal = self._stream_refusal(run)
        if refusal is not None:
            await send_error(
                writer, 400, refusal, request_id, type="invalid_request_error", param="stream"
            )
            return
        raw = query.get("starting_after", [None])[-1]
        starting_after = None
        if raw is not None:
            try:
                starting_after = int(raw)
            except ValueError:
                starting_after = -1
            if starting_after < 0:
                await send_error(
                    writer,
                    400,
                    f"Invalid 'starting_after': expected a non-negative integer, got {raw!r}.",
                    request_id,
                    type="invalid_request_error",
                    param="starting_after",
                    code="invalid_value",
                )
                return
        await self._stream(run, writer, request_id, starting_after=starting_after)

    def _stream_refusal(self, run: Run) -> str | None:
        if not run.background:
            return (
                "This response cannot be streamed because it was not created with background=true."
            )
        window = self._resume_window
        if window is not None and trio.current_time() - run.created_at >= window:
            return (
                "This response can no longer be streamed because it is more than "
                f"{_duration(window)} old"
            )
        return None

    async def _cancel(self, run: Run, writer: ResponseWriter, request_id: str) -> None:
        if not run.background:
            await send_error(
                writer,
                400,
                "Only responses created with background=true can be cancelled.",
                request_id,
                type="invalid_request_error",
            )
            return
        if run.ended and not run.cancelled:
            status = str(run.document.get("status"))
            article = "an" if status[:1] in "aeiou" else "a"
            await send_error(
                writer,
                400,
                f"Cannot cancel {article} {status} response.",
                request_id,
                type="invalid_request_error",
            )
            return
        if not run.ended:
            run.cancelled = True
            run.scope.cancel()
            run.end(trio.current_time())
        await send_json(writer, 200, run.document, request_id)

    async def _produce(self, run: Run) -> None:
        with run.scope:
            for position in range(len(run.events)):
                if position:
                    # Streams take each event in turn; the last one and the end are one step,
                    # so a cancel cannot fall between a terminal event and the run's end.
                    await trio.sleep(self._delay)
                run.produce()
        run.end(trio.current_time())

    async def _stream(
        self, run: Run, writer: ResponseWriter, request_id: str, *, starting_after: int | None
    ) -> None:
        """Stream ``run`` from after ``starting_after`` until it ends, or a cut (rule 6)."""
        # Sequence numbers count events from 0, so the event after N is at index N + 1.
        index = 0 if starting_after is None else starting_after + 1
        cut = self.cuts.offset(run.events[index:])
        await writer.start(
            200,
            (("Cache-Control", "no-cache"), ("x-request-id", request_id)),
            content_type="text/event-stream; charset=utf-8",
        )
        sent = 0
        while True:
            while index < run.produced:
                for piece in _pieces(run.events[index], self._write_size):
                    if cut is not None and sent + len(piece) > cut:
                        if cut > sent:
                            await writer.write(piece[: cut - sent])
                        await writer.disconnect()
                        return
                    await writer.write(piece)
                    sent += len(piece)
                index += 1
            if cut is not None and sent >= cut:
                await writer.disconnect()
                return
            if run.ended:
                break
            await run.wait_changed()
        await writer.end()

    def _expire(self) -> None:
        now = trio.current_time()
        for response_id, run in list(self._runs.items()):
            if run.ended_at is not None and now - run.ended_at >= self._retention:
                del self._runs[response_id]


def _pieces(data: bytes, size: int | None) -> list[bytes]:
    if size is None:
        return [data]
    return [data[start : start + size] for start in range(0, len(data), size)]


def _duration(seconds: float) -> str:
    """``300`` -> ``"5 minutes"``, as OpenAI words its window; other values in seconds."""
    if seconds >= 60 and seconds % 60 == 0:
        minutes = int(seconds // 60)
        return f"{minutes} minute{'s' if minutes != 1 else ''}"
    return f"{seconds:g} second{'s' if seconds != 1 else ''}"

"""An OpenAI-compatible server (chat, Responses, completions) for demos and testing clients.

Theory of operation
-------------------
The server is a handler (:class:`ChatServer`) plugged into the loopback server
engine (:mod:`chunkwise.testing._http_server`), which owns the sockets, h11
request parsing and connection lifetime.  The handler only routes a request and
writes one response; what a chat request streams comes from a scenario
(:mod:`chunkwise_tools.server._scenarios`), what a Responses request (``POST
/v1/responses``) streams from a Responses scenario
(:mod:`chunkwise_tools.server._response_scenarios`), what a legacy completions
request (``POST /v1/completions``) streams from :mod:`._completion_wire`, what
a Messages request (``POST /v1/messages``) streams from :mod:`._messages_wire`,
any of them from a replayed recording.  The request's ``model`` names the scenario.

Rules
-----
1. A streamed answer, of either API, is played as one
   :class:`ScriptedResponse`: write sizes, the delay between writes and the
   cut-off after N bytes are the engine's pacing, not a second implementation
   here.
2. A ``stream: false`` request is answered from the same stream: the server
   parses it (:class:`~chunkwise.chat.Parser`,
   :class:`~chunkwise.responses.Parser`) and writes one document: the
   ``chat.completion`` the chat parser reconstructs, or the ``response``
   object the Responses stream's terminal event carries.  So the streamed and
   the non-streamed answers cannot drift apart (and a replay works for both).
   A stream that failed is answered with a 500 and its error.
3. Errors are shaped like OpenAI's: ``{"error": {"message", "type", "param",
   "code"}}``; a request OpenAI refuses is refused with its 400
   (:mod:`._request_checks`).
4. A client that hangs up mid-answer (chunkwise closes as soon as it has
   ``[DONE]``) is normal, not a server error: the handler ends that response
   quietly.
5. A request that asks for JSON (chat's ``response_format``, the Responses
   API's ``text.format``) gets the scenario of its model with the text
   replaced by a JSON document for its schema
   (:mod:`._structured_answers`): valid, cut (``length``, ``error``) or
   breaking the schema (``structured-invalid``).  A schema the generator
   cannot promise a valid document for gets a 400 saying so
   (``unsupported_schema``), never an answer that might break it.

6. A Responses request with ``"background": true``, and ``GET`` and
   ``cancel`` of a stored response, are the :class:`~._background.ResponseStore`'s:
   its runs live in the nursery :func:`open_chat_server` owns, not a
   connection's, and a live stream is written event by event there (the one
   exception to rule 1: it cannot be scripted up front).  Where a stream is
   cut (``disconnect_after``, ``cut_after_events``, ``cut_seed``) is decided
   in one place for every streamed answer, :class:`~._background.StreamCuts`.
7. ``faults`` fail a share of the other streamed answers before or after
   their first output, each in one way (:mod:`._faults`), drawn in request
   order from one seeded generator.

:class:`ServerOptions` applies to every chat and Responses request: a
replayed body instead of a scenario, bytes per write, a delay between writes,
cuts of each streaming connection (after N body bytes, after N events, at
random with a seed), a fixed HTTP error status, a required API key, and how
long responses are kept and can be streamed again.
:func:`open_chat_server` runs the server for an ``async with`` block (an
ephemeral loopback port by default), in a nursery of its own for background
responses, logging one line per request to ``log`` (and, for a paced answer,
a second line when it ends: how late its writes went out, :mod:`._pacing`'s
rule 5); ``chunkwise serve`` runs it until Ctrl-C.
"""

from __future__ import annotations

import hmac
import itertools
import json
import random
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import attrs
import trio

from chunkwise import ChunkwiseError, SSEDecoder, StreamError, chat, messages, responses
from chunkwise.lowlevel import OutputSchema, exceptions_unwrapped, load_json, parse_json
from chunkwise.testing import (
    LoopbackServer,
    RecordedRequest,
    ResponseWriter,
    ScriptedResponse,
    open_test_server,
)

from .._convert import completion_document
from ._background import ResponseStore, StreamCuts
from ._completion_wire import completion_events, text_completion_document
from ._faults import IDLE_SILENCE
from ._messages_wire import MESSAGES_SCENARIOS, message_document, messages_events
from ._options import DEFAULT_HOST, ServerOptions
from ._pacing import paced_scenario, pacing_line, schedule
from ._replies import send_error, send_json, send_status_error
from ._request_checks import (
    RequestProblem,
    check_chat_request,
    check_completions_request,
    check_messages_request,
    check_responses_request,
)
from ._response_scenarios import (
    RESPONSE_SCENARIOS,
    ResponseScenario,
    answering_tool_results,
)
from ._response_wire import response_event_bytes, response_scenario_payloads
from ._scenarios import (
    CREATED,
    INVALID_SCENARIO,
    SCENARIOS,
    scenario_events,
    split_events,
)
from ._schema_documents import UnsupportedSchema
from ._structured_answers import Answer, structured_answer

__all__ = [
    "ChatServer",
    "describe_request",
    "open_chat_server",
]


_CHAT_PATH = "/v1/chat/completions"
_RESPONSES_PATH = "/v1/responses"
_COMPLETIONS_PATH = "/v1/completions"
_MESSAGES_PATH = "/v1/messages"
_MODELS_PATH = "/v1/models"


class ChatServer:
    """The request handler: ``async def __call__(request, writer)`` for :mod:`chunkwise.testing`."""

    def __init__(
        self,
        options: ServerOptions | None = None,
        *,
        log: Callable[[str], None] | None = None,
        nursery: trio.Nursery | None = None,
    ) -> None:
        self.options = options = options if options is not None else ServerOptions()
        self._log = log
        self._request_ids = itertools.count(1)
        faults = options.faults
        self._faults = random.Random(faults.seed) if faults is not None else None  # rule 7
        # The stored responses; background ones run in ``nursery`` (rule 6).
        self._store = ResponseStore(
            nursery=nursery,
            delay=options.delay,
            write_size=options.write_size,
            retention=options.retention,
            resume_window=options.resume_window,
            cuts=StreamCuts(
                disconnect_after=options.disconnect_after,
                after_events=options.cut_after_events,
                seed=options.cut_seed,
            ),
        )

    def retained(self, response_id: str) -> dict[str, Any] | None:
        """The stored response ``response_id`` as it stands now, or None (unknown, expired).

        What ``GET /v1/responses/{id}`` answers, without a request: a test can
        see that a background response went on after its client left.
        """
        run = self._store.get(response_id)
        return None if run is None else run.document

    async def __call__(self, request: RecordedRequest, writer: ResponseWriter) -> None:
        if self._log is not None:
            self._log(describe_request(request))
        try:
            await self._answer(request, writer)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            # The client hung up, e.g. right after the [DONE] it needed, while the
            # rest of the body was on its way.  That is the client's right, not a
            # server error: end quietly.  (chunkwise.testing would treat an
            # exception escaping a handler as a test failure.)
            await writer.disconnect()

    async def _answer(self, request: RecordedRequest, writer: ResponseWriter) -> None:
        request_id = f"req_chunkwise_{next(self._request_ids)}"
        path = request.target.partition("?")[0]
        stored = _stored_response_path(path)
        if path in (_CHAT_PATH, _RESPONSES_PATH, _COMPLETIONS_PATH, _MESSAGES_PATH):
            allowed = "POST"
        elif stored:
            allowed = "POST" if path.endswith("/cancel") else "GET"
        elif path == _MODELS_PATH or path.startswith(_MODELS_PATH + "/"):
            allowed = "GET"
        else:
            await send_error(
                writer,
                404,
                f"Unknown request URL: {request.method} {path}.",
                request_id,
                type="invalid_request_error",
                code="unknown_url",
            )
            return
        if request.method != allowed:
            await send_error(
                writer,
                405,
                f"Method {request.method} is not allowed for {path}; use {allowed}.",
                request_id,
                type="invalid_request_error",
                headers=(("Allow", allowed),),
            )
            return
        if not self._authorized(request):
            await send_status_error(writer, 401, request_id)
            return
        if stored:
            await self._store.answer(request, writer, request_id)
        elif allowed == "GET":
            await self._models(path, writer, request_id)
        elif path == _RESPONSES_PATH:
            await self._responses(request, writer, request_id)
        elif path == _COMPLETIONS_PATH:
            await self._completions(request, writer, request_id)
        elif path == _MESSAGES_PATH:
            await self._messages(request, writer, request_id)
        else:
            await self._chat(request, writer, request_id)

    def _authorized(self, request: RecordedRequest) -> bool:
        key = self.options.api_key
        if key is None:
            return True
        scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
        if "x-api-key" in request.headers:  # Anthropic's header (Messages clients send it)
            scheme, credentials = "bearer", request.headers["x-api-key"]
        # Constant-time, as a key check should be even in a test server.
        return scheme.lower() == "bearer" and hmac.compare_digest(
            credentials.strip().encode(), key.encode()
        )

    async def _models(self, path: str, writer: ResponseWriter, request_id: str) -> None:
        def model(name: str) -> dict[str, Any]:
            return {"id": name, "object": "model", "created": CREATED, "owned_by": "chunkwise"}

        if path.rstrip("/") == _MODELS_PATH:
            document = {"object": "list", "data": [model(name) for name in SCENARIOS]}
            await send_json(writer, 200, document, request_id)
            return
        name = path[len(_MODELS_PATH) + 1 :]
        if name in SCENARIOS:
            await send_json(writer, 200, model(name), request_id)
        else:
            await send_error(
                writer,
                404,
                f"The model '{name}' does not exist",
                request_id,
                type="invalid_request_error",
                code="model_not_found",
            )

    async def _chat(
        self, request: RecordedRequest, writer: ResponseWriter, request_id: str
    ) -> None:
        options = self.options
        body = await _request_body(request, writer, request_id, options, check_chat_request)
        if body is None:
            return
        stream = body.get("stream") is True
        n = body.get("n")
        n = 1 if n is None else n
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        model = body.get("model")
        if options.replay is not None:
            events = split_events(options.replay)
        else:
            scenario = SCENARIOS.get(model) if isinstance(model, str) else None
            scenario = scenario or SCENARIOS[options.scenario]
            if scenario.tool_calls and _answers_tool_results(body):
                # A tool loop's second turn: answer the results with text, as a
                # model would, instead of asking for the same tools again.
                scenario = SCENARIOS["text"]
            output = OutputSchema.from_response_format(body.get("response_format"))
            if output is not None and scenario.content:
                # Rule 5: the scenario says the JSON the request asked for.
                cut = scenario.finish_reason == "length" or scenario.error is not None
                answer = _answer(output, scenario.name, cut=cut)
                if isinstance(answer, UnsupportedSchema):
                    where = "response_format.json_schema.schema"
                    await _send_unsupported(writer, answer, where, request_id)
                    return
                scenario = attrs.evolve(scenario, content=answer)
            scenario = paced_scenario(scenario, options.pacing)
            events = scenario_events(
                scenario,
                n=n,
                # A non-streamed answer always reports usage, as OpenAI's does.
                include_usage=include_usage or not stream,
                model=model if isinstance(model, str) else None,
            )
        if stream:
            await self._stream(writer, events, request_id, "chat")
        else:
            await self._document(writer, b"".join(events), request_id)

    async def _stream(
        self, writer: ResponseWriter, events: Sequence[bytes], request_id: str, api: str
    ) -> None:
        options = self.options
        if options.pacing is not None:
            paced = schedule(options.pacing, events, request=request_id)
            sizes: int | tuple[int, ...] | None = paced.sizes
            times: tuple[float, ...] | None = paced.times
            head_delay = paced.head
        else:
            # Without --write-size each event is one write, so --delay paces events.
            sizes = options.write_size or tuple(len(e) for e in events if e) or None
            times = None
            head_delay = 0.0
        response = ScriptedResponse(
            content_type="text/event-stream; charset=utf-8",
            headers=(("Cache-Control", "no-cache"), ("x-request-id", request_id)),
            body=b"".join(events),
            write_sizes=sizes,
            delay=options.delay,
            head_delay=head_delay,
            times=times,
            disconnect_after=self._store.cuts.offset(events),
        )
        faults = options.faults
        plan = faults.draw(self._faults) if faults and self._faults else None
        if plan is not None:
            response = plan.response(api, events, response)
        try:
            await writer.play(response)
            if plan is not None and plan.way == "idle":
                await trio.sleep(IDLE_SILENCE)
        finally:
            # Also when the client hung up after the last token (or before).
            if times is not None and self._log is not None:
                self._log(pacing_line(writer.lateness))

    async def _document(self, writer: ResponseWriter, body: bytes, request_id: str) -> None:
        parser = chat.Parser()
        parser.feed(body)
        parser.end()
        result = parser.result
        if result.status == "failed":
            await send_json(writer, 500, _error_body(result.error), request_id)
            return
        await send_json(writer, 200, completion_document(result), request_id)

    async def _completions(
        self, request: RecordedRequest, writer: ResponseWriter, request_id: str
    ) -> None:
        # Legacy completions: the answer is _completion_wire's; the stream and
        # the document are played and sent as chat's (rules 1 and 2).
        options = self.options
        body = await _request_body(request, writer, request_id, options, check_completions_request)
        if body is None:
            return
        stream = body.get("stream") is True
        if options.replay is not None:
            events = split_events(options.replay)
        else:
            events = completion_events(body, document=not stream)
        if stream:
            await self._stream(writer, events, request_id, "completions")
            return
        result, document = text_completion_document(events)
        if result.status == "failed":
            await send_json(writer, 500, _error_body(result.error), request_id)
        else:
            await send_json(writer, 200, document, request_id)

    async def _messages(
        self, request: RecordedRequest, writer: ResponseWriter, request_id: str
    ) -> None:
        # Anthropic Messages: the answer is _messages_wire's (rules 1 and 2).
        options = self.options
        body = await _request_body(request, writer, request_id, options, check_messages_request)
        if body is None:
            return
        if options.replay is not None:
            events = split_events(options.replay)
        else:
            scenario = MESSAGES_SCENARIOS.get(body["model"]) or MESSAGES_SCENARIOS.get(
                options.scenario, MESSAGES_SCENARIOS["text"]
            )
            events = messages_events(scenario, model=body["model"])
        if body.get("stream") is True:
            await self._stream(writer, events, request_id, "messages")
            return
        parser = messages.Parser()
        parser.feed(b"".join(events))
        parser.end()
        result = parser.result
        if result.status == "complete":
            await send_json(writer, 200, message_document(result), request_id)
            return
        error = result.error
        kind, text = (error.type, error.message) if isinstance(error, StreamError) else (None, None)
        # Anthropic's error body; a failed stream is a 529 when overloaded, else a 500.
        status = 529 if kind == "overloaded_error" else 500
        detail = {"type": kind or "api_error", "message": text or "The stream did not finish."}
        await send_json(writer, status, {"type": "error", "error": detail}, request_id)

    async def _responses(
        self, request: RecordedRequest, writer: ResponseWriter, request_id: str
    ) -> None:
        options = self.options
        body = await _request_body(request, writer, request_id, options, check_responses_request)
        if body is None:
            return
        model = body.get("model")
        model = model if isinstance(model, str) else None
        background = body.get("background") is True
        refusal = _background_refusal(body, options) if background else None
        if refusal is not None:
            message, param = refusal
            await send_error(
                writer, 400, message, request_id, type="invalid_request_error", param=param
            )
            return
        if options.replay is not None:
            events = split_events(options.replay)
        else:
            scenario = _response_scenario(options, model, body)
            text = body.get("text")
            text_format = text.get("format") if isinstance(text, dict) else None
            output = OutputSchema.from_text_format(text_format)
            if output is not None and scenario.content:
                answer = _answer(output, scenario.name, cut=scenario.outcome != "completed")
                if isinstance(answer, UnsupportedSchema):
                    await _send_unsupported(writer, answer, "text.format.schema", request_id)
                    return
                scenario = attrs.evolve(scenario, content=answer)
            scenario = paced_scenario(scenario, options.pacing)
            payloads = response_scenario_payloads(
                scenario,
                model=model,
                max_output_tokens=body.get("max_output_tokens"),
                echo=body,
            )
            if background:
                stream = body.get("stream") is True
                await self._store.create(
                    payloads, stream=stream, writer=writer, request_id=request_id
                )
                return
            if body.get("store") is not False:
                self._store.keep(payloads)
            events = [response_event_bytes(payload) for payload in payloads]
        if body.get("stream") is True:
            await self._stream(writer, events, request_id, "responses")
        else:
            await self._response_document(writer, b"".join(events), request_id)

    async def _response_document(
        self, writer: ResponseWriter, body: bytes, request_id: str
    ) -> None:
        # Rule 2: the terminal event's response object, unless the stream failed.
        parser = responses.Parser()
        parser.feed(body)
        parser.end()
        result = parser.result
        document = _terminal_response(body) if result.status != "failed" else None
        if document is None:
            error = result.error
            if result.status != "failed":
                error = StreamError(
                    "The stream ended before its terminal event.", type="server_error"
                )
            await send_json(writer, 500, _error_body(error), request_id)
            return
        await send_json(writer, 200, document, request_id)


def describe_request(request: RecordedRequest) -> str:
    """One log line: the request line, and the model and stream flag of a chat request."""
    line = f"{request.method} {request.target}"
    try:
        body = _parse_body(request.body) if request.body else None
    except ValueError:
        return f"{line} (malformed JSON body)"
    if isinstance(body, dict) and "model" in body:
        line += f" model={body['model']!r} stream={body.get('stream', False)!r}"
    return line


def _parse_body(body: bytes) -> Any:
    """A request body's JSON value, by RFC 8259 as OpenAI parses it (rule 3).

    ``NaN``, ``Infinity`` and ``-Infinity`` are not JSON: Python's ``json.loads``
    takes them as numbers, OpenAI refuses the body as unparseable, and so does
    this (:func:`~chunkwise._core.payloads.parse_json`).  Encodings are detected as
    ``json.loads`` does for bytes.

    Raises:
        ValueError: the body is not JSON (UnicodeDecodeError included).
    """
    return parse_json(body.decode(json.detect_encoding(body), "surrogatepass"))


async def _request_body(
    request: RecordedRequest,
    writer: ResponseWriter,
    request_id: str,
    options: ServerOptions,
    check: Callable[[Any], RequestProblem | None],
) -> dict[str, Any] | None:
    """The request's JSON object, or None once an error is sent (``--status``, a 400)."""
    if options.status is not None:
        await send_status_error(writer, options.status, request_id)
        return None
    try:
        body = _parse_body(request.body)
    except ValueError:
        await send_error(
            writer,
            400,
            "We could not parse the JSON body of your request. (HINT: This likely means "
            "you aren't using your HTTP library correctly. The OpenAI API expects a JSON "
            "payload, but what was sent was not valid JSON.)",
            request_id,
            type="invalid_request_error",
        )
        return None
    problem = check(body)
    if problem is not None:
        await send_error(
            writer,
            400,
            problem.message,
            request_id,
            type="invalid_request_error",
            param=problem.param,
            code=problem.code,
        )
        return None
    assert isinstance(body, dict)  # check() refuses anything else
    return body


def _error_body(error: ChunkwiseError | None) -> dict[str, Any]:
    """The OpenAI-shaped error body of a failed stream (rule 3)."""
    if isinstance(error, StreamError):
        return {
            "error": {
                "message": error.message,
                "type": error.type,
                "param": error.param,
                "code": error.code,
            }
        }
    return {"error": {"message": str(error), "type": "server_error", "param": None, "code": None}}


def _answer(output: OutputSchema, name: str, *, cut: bool) -> tuple[str, ...] | UnsupportedSchema:
    """The text fragments of a structured answer (rule 5), or why there is none."""
    kind: Answer = "invalid" if name == INVALID_SCENARIO else "cut" if cut else "valid"
    try:
        return structured_answer(output, kind)
    except UnsupportedSchema as exc:
        return exc


async def _send_unsupported(
    writer: ResponseWriter, problem: UnsupportedSchema, param: str, request_id: str
) -> None:
    message = f"chunkwise serve cannot generate a document for this schema: {problem}"
    await send_error(
        writer,
        400,
        message,
        request_id,
        type="invalid_request_error",
        param=param,
        code="unsupported_schema",
    )


def _stored_response_path(path: str) -> bool:
    """``/v1/responses/{id}`` or ``/v1/responses/{id}/cancel``."""
    parts = path.split("/")
    return (
        len(parts) in (4, 5)
        and path.startswith(_RESPONSES_PATH + "/")
        and bool(parts[3])
        and (len(parts) == 4 or parts[4] == "cancel")
    )


def _background_refusal(body: Mapping[str, Any], options: ServerOptions) -> tuple[str, str] | None:
    """Why a background request cannot be run (message, param), or None."""
    if body.get("store") is False:
        return "Background mode requires store=true.", "store"
    if options.replay is not None:
        return "chunkwise serve cannot run a replayed body in background mode.", "background"
    model = body.get("model")
    scenario = _response_scenario(options, model if isinstance(model, str) else None, body)
    if scenario.llama_cpp:
        # llama-server has no background mode, and its events no sequence numbers.
        message = f"The scenario {scenario.name!r} (llama.cpp) has no background mode."
        return message, "background"
    return None


def _response_scenario(
    options: ServerOptions, model: str | None, body: Mapping[str, Any]
) -> ResponseScenario:
    scenario = RESPONSE_SCENARIOS.get(model) if model is not None else None
    scenario = scenario or RESPONSE_SCENARIOS[options.default_response_scenario]
    items = body.get("input")
    if (
        scenario.tool_calls
        and isinstance(items, list)
        and items
        and isinstance(items[-1], dict)
        and items[-1].get("type") == "function_call_output"
    ):
        # A tool loop's second turn: answered with text, not the same calls.
        scenario = answering_tool_results(scenario)
    return scenario


def _terminal_response(body: bytes) -> dict[str, Any] | None:
    """The ``response`` of the last terminal event in an SSE body, or None."""
    decoder = SSEDecoder()
    found: dict[str, Any] | None = None
    for event in [*decoder.feed(body), *decoder.end()]:
        try:
            data = load_json(event.data)
        except ChunkwiseError:
            continue  # not JSON: the parser has judged the stream already
        if (
            isinstance(data, dict)
            and data.get("type") in _TERMINAL_TYPES
            and isinstance(data.get("response"), dict)
        ):
            found = data["response"]
    return found


_TERMINAL_TYPES = frozenset({"response.completed", "response.incomplete", "response.failed"})


def _answers_tool_results(body: Mapping[str, Any]) -> bool:
    messages = body.get("messages")
    return (
        isinstance(messages, list)
        and bool(messages)
        and isinstance(messages[-1], dict)
        and messages[-1].get("role") == "tool"
    )


@asynccontextmanager
async def open_chat_server(
    options: ServerOptions | None = None,
    *,
    host: str = DEFAULT_HOST,
    port: int = 0,
    log: Callable[[str], None] | None = None,
    record: bool = True,
) -> AsyncIterator[LoopbackServer]:
    """Run the chat server for the duration of an ``async with`` block.

    Yields the :class:`~chunkwise.testing.LoopbackServer`: ``server.base_url``
    (e.g. ``"http://127.0.0.1:54321/v1"``), ``server.endpoint()`` and the
    recorded ``server.requests``.  ``port=0`` picks a free port.  ``log``, if
    given, is called with one line describing each request as it arrives, and
    with one more when a paced answer ends (how late its writes went out).
    ``record=False`` keeps no history (``chunkwise serve``:
    :attr:`~chunkwise.testing.LoopbackServer.record`).
    """
    with exceptions_unwrapped():
        async with trio.open_nursery() as nursery:
            # Background responses run here, in the server's nursery, not a connection's.
            handler = ChatServer(options, log=log, nursery=nursery)
            try:
                async with open_test_server(handler, host=host, port=port, record=record) as server:
                    yield server
            finally:
                nursery.cancel_scope.cancel()

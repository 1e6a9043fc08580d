"""An OpenAI-compatible server (chat completions and Responses) for demos and testing clients.

Theory of operation
-------------------
The server is a handler (:class:`ChatServer`) plugged into the loopback server
engine (:mod:`chunkwise._server._http_server`), which owns the sockets, h11
request parsing and connection lifetime.  The handler only routes a request and
writes one response; what a chat request streams comes from a scenario
(:mod:`chunkwise._server._scenarios`), what a Responses request (``POST
/v1/responses``) streams from a Responses scenario
(:mod:`chunkwise._server._response_scenarios`), either from a replayed
recording.  The request's ``model`` names the scenario.

Rules
-----
1. A streamed answer, of either API, is played as one
   :class:`ScriptedResponse`: write sizes, the delay between writes and the
   cut-off after N bytes are the engine's pacing, not a second implementation
   here.
2. A ``stream: false`` request is answered from the same stream: the server
   parses it (:class:`~chunkwise.ChatStreamParser`,
   :class:`~chunkwise.ResponseStreamParser`) and writes one document: the
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

:class:`ServerOptions` applies to every chat and Responses request: a
replayed body instead of a scenario, bytes per write, a delay between writes,
a disconnect after N body bytes, a fixed HTTP error status, and a required API
key.
:func:`open_chat_server` runs the server for an ``async with`` block (an
ephemeral loopback port by default), logging one line per request to ``log``;
``chunkwise serve`` runs it until Ctrl-C.
"""

from __future__ import annotations

import hmac
import itertools
import json
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import attrs
import trio

from .._convert import completion_document
from .._errors import ChunkwiseError, StreamError
from .._parser import ChatStreamParser, ResponseStreamParser
from .._payloads import load_json
from .._sse import SSEDecoder
from .._structured import OutputSchema
from ._http_server import LoopbackServer, open_test_server
from ._pacing import Pacing, check_pacing, paced_scenario, schedule
from ._request_checks import RequestProblem, check_chat_request, check_responses_request
from ._response_scenarios import (
    DEFAULT_RESPONSE_SCENARIO,
    RESPONSE_SCENARIOS,
    ResponseScenario,
    answering_tool_results,
)
from ._response_wire import response_scenario_events
from ._responses import RecordedRequest, ResponseWriter, ScriptedResponse
from ._scenarios import (
    CREATED,
    DEFAULT_SCENARIO,
    INVALID_SCENARIO,
    SCENARIOS,
    scenario_events,
    split_events,
)
from ._schema_documents import UnsupportedSchema
from ._structured_answers import Answer, structured_answer

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "ChatServer",
    "ServerOptions",
    "describe_request",
    "open_chat_server",
]

DEFAULT_HOST = "127.0.0.1"
#: The port ``chunkwise serve`` listens on unless told otherwise (vLLM's default too).
DEFAULT_PORT = 8000


def _positive_or_none(_: Any, attribute: attrs.Attribute[Any], value: int | None) -> None:
    if value is not None and value < 1:
        raise ValueError(f"{attribute.name} must be at least 1")


def _check_scenario(_: Any, __: Any, value: str) -> None:
    if value not in SCENARIOS:
        raise ValueError(f"unknown scenario {value!r}; choose from {', '.join(SCENARIOS)}")


def _check_response_scenario(_: Any, __: Any, value: str | None) -> None:
    if value is not None and value not in RESPONSE_SCENARIOS:
        raise ValueError(
            f"unknown Responses scenario {value!r}; choose from {', '.join(RESPONSE_SCENARIOS)}"
        )


def _check_status(_: Any, __: Any, value: int | None) -> None:
    if value is not None and not 400 <= value <= 599:
        raise ValueError(f"status must be an HTTP error status (400-599), not {value}")


def _check_delay(_: Any, __: Any, value: float) -> None:
    if not value >= 0:  # also refuses NaN
        raise ValueError("delay must be a non-negative number of seconds")


def _check_disconnect(_: Any, __: Any, value: int | None) -> None:
    if value is not None and value < 0:
        raise ValueError("disconnect_after must not be negative")


@attrs.frozen(kw_only=True)
class ServerOptions:
    """How the server answers every chat and Responses request.

    Attributes:
        scenario: the scenario used when a chat request's ``model`` names none.
        response_scenario: the Responses scenario used when a Responses
            request's ``model`` names none; ``None`` takes ``scenario`` when
            that names a Responses scenario too (``text``, ``tools``,
            ``reasoning``, ``length``, ``error``, ``demo``,
            ``structured-invalid`` say the same things in both APIs), else
            ``text``.
        replay: an SSE body sent for every chat and Responses request instead
            of a scenario.
        write_size: bytes per write (each write is one HTTP chunk); ``None``
            writes each event at once.  This, ``delay`` and
            ``disconnect_after`` shape streamed answers only; ``stream:
            false`` documents are sent whole.
        delay: seconds to wait between events.
        disconnect_after: close the connection after this many body bytes,
            without finishing the response.
        status: answer every chat and Responses request with this HTTP error
            status and an OpenAI-shaped error body (429 and 503 also get
            ``Retry-After: 1``).
        api_key: when set, requests without ``Authorization: Bearer <api_key>``
            get a 401.
        pacing: when set, streamed answers are paced by it instead of
            ``write_size`` and ``delay`` (:mod:`._pacing`): a recording's
            timing (with ``replay``, whose length it must match) or a known
            time to first token and per token.
    """

    scenario: str = attrs.field(default=DEFAULT_SCENARIO, validator=_check_scenario)
    response_scenario: str | None = attrs.field(default=None, validator=_check_response_scenario)
    replay: bytes | None = None
    write_size: int | None = attrs.field(default=None, validator=_positive_or_none)
    delay: float = attrs.field(default=0.0, validator=_check_delay)
    disconnect_after: int | None = attrs.field(default=None, validator=_check_disconnect)
    status: int | None = attrs.field(default=None, validator=_check_status)
    api_key: str | None = attrs.field(default=None, repr=False)
    pacing: Pacing | None = None

    def __attrs_post_init__(self) -> None:
        check_pacing(self.pacing, self.replay)

    @property
    def default_response_scenario(self) -> str:
        """The Responses scenario for a model that names none (see ``response_scenario``)."""
        if self.response_scenario is not None:
            return self.response_scenario
        if self.scenario in RESPONSE_SCENARIOS:
            return self.scenario
        return DEFAULT_RESPONSE_SCENARIO


# OpenAI's error type and code for the statuses a client most often meets.
_STATUS_ERRORS: Mapping[int, tuple[str, str, str | None]] = {
    400: ("Invalid request.", "invalid_request_error", None),
    401: ("Incorrect API key provided", "invalid_request_error", "invalid_api_key"),
    403: ("You are not allowed to use this model.", "invalid_request_error", None),
    404: (
        "The model does not exist or you do not have access to it.",
        "invalid_request_error",
        "model_not_found",
    ),
    429: (
        "Rate limit reached for requests. Please try again in 1s.",
        "requests",
        "rate_limit_exceeded",
    ),
    500: (
        "The server had an error while processing your request. Sorry about that!",
        "server_error",
        None,
    ),
    503: ("The engine is currently overloaded, please try again later.", "server_error", None),
}

_CHAT_PATH = "/v1/chat/completions"
_RESPONSES_PATH = "/v1/responses"
_MODELS_PATH = "/v1/models"


class ChatServer:
    """The request handler: ``async def __call__(request, writer)`` for :mod:`chunkwise.testing`."""

    def __init__(
        self, options: ServerOptions | None = None, *, log: Callable[[str], None] | None = None
    ) -> None:
        self.options = options if options is not None else ServerOptions()
        self._log = log
        self._request_ids = itertools.count(1)

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
        if path in (_CHAT_PATH, _RESPONSES_PATH):
            allowed = "POST"
        elif path == _MODELS_PATH or path.startswith(_MODELS_PATH + "/"):
            allowed = "GET"
        else:
            await _send_error(
                writer,
                404,
                f"Unknown request URL: {request.method} {path}.",
                request_id,
                type="invalid_request_error",
                code="unknown_url",
            )
            return
        if request.method != allowed:
            await _send_error(
                writer,
                405,
                f"Method {request.method} is not allowed for {path}; use {allowed}.",
                request_id,
                type="invalid_request_error",
                headers=(("Allow", allowed),),
            )
            return
        if not self._authorized(request):
            await _send_status_error(writer, 401, request_id)
            return
        if allowed == "GET":
            await self._models(path, writer, request_id)
        elif path == _RESPONSES_PATH:
            await self._responses(request, writer, request_id)
        else:
            await self._chat(request, writer, request_id)

    def _authorized(self, request: RecordedRequest) -> bool:
        key = self.options.api_key
        if key is None:
            return True
        scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
        # Constant-time, as a key check should be even in a test server.
        return scheme.lower() == "bearer" and hmac.compare_digest(
            credentials.strip().encode(), key.encode()
        )

    async def _models(self, path: str, writer: ResponseWriter, request_id: str) -> None:
        def model(name: str) -> dict[str, Any]:
            return {"id": name, "object": "model", "created": CREATED, "owned_by": "chunkwise"}

        if path.rstrip("/") == _MODELS_PATH:
            document = {"object": "list", "data": [model(name) for name in SCENARIOS]}
            await _send_json(writer, 200, document, request_id)
            return
        name = path[len(_MODELS_PATH) + 1 :]
        if name in SCENARIOS:
            await _send_json(writer, 200, model(name), request_id)
        else:
            await _send_error(
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
            await self._stream(writer, events, request_id)
        else:
            await self._document(writer, b"".join(events), request_id)

    async def _stream(
        self, writer: ResponseWriter, events: Sequence[bytes], request_id: str
    ) -> None:
        options = self.options
        response = ScriptedResponse(
            content_type="text/event-stream; charset=utf-8",
            headers=(("Cache-Control", "no-cache"), ("x-request-id", request_id)),
            body=b"".join(events),
            # Without --write-size each event is one write, so --delay paces events.
            write_sizes=options.write_size or tuple(len(e) for e in events if e) or None,
            delay=options.delay,
            disconnect_after=options.disconnect_after,
        )
        if options.pacing is not None:
            paced = schedule(options.pacing, events, request=request_id)
            response = attrs.evolve(
                response, write_sizes=paced.sizes, times=paced.times, head_delay=paced.head
            )
        await writer.play(response)

    async def _document(self, writer: ResponseWriter, body: bytes, request_id: str) -> None:
        parser = ChatStreamParser()
        parser.feed(body)
        parser.end()
        result = parser.result
        if result.status == "failed":
            await _send_json(writer, 500, _error_body(result.error), request_id)
            return
        await _send_json(writer, 200, completion_document(result), request_id)

    async def _responses(
        self, request: RecordedRequest, writer: ResponseWriter, request_id: str
    ) -> None:
        options = self.options
        body = await _request_body(request, writer, request_id, options, check_responses_request)
        if body is None:
            return
        model = body.get("model")
        model = model if isinstance(model, str) else None
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
            events = response_scenario_events(
                scenario,
                model=model,
                max_output_tokens=body.get("max_output_tokens"),
                echo=body,
            )
        if body.get("stream") is True:
            await self._stream(writer, events, request_id)
        else:
            await self._response_document(writer, b"".join(events), request_id)

    async def _response_document(
        self, writer: ResponseWriter, body: bytes, request_id: str
    ) -> None:
        # Rule 2: the terminal event's response object, unless the stream failed.
        parser = ResponseStreamParser()
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
            await _send_json(writer, 500, _error_body(error), request_id)
            return
        await _send_json(writer, 200, document, request_id)


def describe_request(request: RecordedRequest) -> str:
    """One log line: the request line, and the model and stream flag of a chat request."""
    line = f"{request.method} {request.target}"
    try:
        body = json.loads(request.body) if request.body else None
    except (ValueError, RecursionError):
        return f"{line} (malformed JSON body)"
    if isinstance(body, dict) and "model" in body:
        line += f" model={body['model']!r} stream={body.get('stream', False)!r}"
    return line


async def _request_body(
    request: RecordedRequest,
    writer: ResponseWriter,
    request_id: str,
    options: ServerOptions,
    check: Callable[[Any], RequestProblem | None],
) -> dict[str, Any] | None:
    """The request's JSON object, or None once an error is sent (``--status``, a 400)."""
    if options.status is not None:
        await _send_status_error(writer, options.status, request_id)
        return None
    try:
        body = json.loads(request.body)
    except (ValueError, RecursionError):
        await _send_error(
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
        await _send_error(
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
    await _send_error(
        writer,
        400,
        message,
        request_id,
        type="invalid_request_error",
        param=param,
        code="unsupported_schema",
    )


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


async def _send_json(
    writer: ResponseWriter,
    status: int,
    document: Any,
    request_id: str,
    headers: Sequence[tuple[str, str]] = (),
) -> None:
    data = json.dumps(document, ensure_ascii=False).encode()
    await writer.start(
        status,
        (("x-request-id", request_id), *headers),
        content_type="application/json",
        framing="content-length",
        content_length=len(data),
    )
    await writer.write(data)
    await writer.end()


async def _send_error(
    writer: ResponseWriter,
    status: int,
    message: str,
    request_id: str,
    *,
    type: str | None,
    code: str | None = None,
    param: str | None = None,
    headers: Sequence[tuple[str, str]] = (),
) -> None:
    error = {"message": message, "type": type, "param": param, "code": code}
    await _send_json(writer, status, {"error": error}, request_id, headers)


async def _send_status_error(writer: ResponseWriter, status: int, request_id: str) -> None:
    message, type, code = _STATUS_ERRORS.get(
        status,
        (
            "The server answered with an error." if status >= 500 else "The request was refused.",
            "server_error" if status >= 500 else "invalid_request_error",
            None,
        ),
    )
    # Tell clients how long to back off, as OpenAI does on rate limits.
    headers = (("Retry-After", "1"),) if status in (429, 503) else ()
    await _send_error(writer, status, message, request_id, type=type, code=code, headers=headers)


@asynccontextmanager
async def open_chat_server(
    options: ServerOptions | None = None,
    *,
    host: str = DEFAULT_HOST,
    port: int = 0,
    log: Callable[[str], None] | None = None,
) -> AsyncIterator[LoopbackServer]:
    """Run the chat server for the duration of an ``async with`` block.

    Yields the :class:`~chunkwise.testing.LoopbackServer`: ``server.base_url``
    (e.g. ``"http://127.0.0.1:54321/v1"``), ``server.endpoint()`` and the
    recorded ``server.requests``.  ``port=0`` picks a free port.  ``log``, if
    given, is called with one line describing each request as it arrives.
    """
    handler = ChatServer(options, log=log)
    async with open_test_server(handler, host=host, port=port) as server:
        yield server

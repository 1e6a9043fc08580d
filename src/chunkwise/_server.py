"""An OpenAI-compatible chat-completions server for demos and for testing clients.

Theory of operation
-------------------
The server is a handler (:class:`ChatServer`) plugged into the loopback server of
:mod:`chunkwise.testing`, which owns the sockets, h11 request parsing and
connection lifetime.  The handler only routes a request and writes one response
through a :class:`~chunkwise.testing.ResponseWriter`; because the writer sends
body bytes as given, the server can fragment, delay and cut its streams at will.

What a chat request streams comes from a :class:`Scenario`: plain data saying
*what* the assistant says (reasoning, content pieces, tool calls with their
argument fragments, finish reason, usage) and a :class:`WireStyle` saying *how*
a particular provider puts it on the wire (tool-call delta shape, where usage
goes, keep-alive comments, ``data:`` spacing, line endings).  Two pure
functions turn a scenario into output: :func:`scenario_chunks` gives the chunk
dicts (one choice per chunk, ``n`` choices interleaved step by step, as OpenAI
does), and :func:`scenario_events` gives the exact bytes of each SSE event.
Tests and ``chunkwise probe`` use the same functions, so the expected output of
a scenario is never written down twice.

A ``stream: false`` request is answered from the same stream: the server
parses it with :class:`~chunkwise.ChatStreamParser` and writes the
reconstruction as one ``chat.completion`` document, so the streamed and the
non-streamed answers cannot drift apart (and ``--replay`` works for both).

:class:`ServerOptions` applies to every chat request: a replayed body instead
of a scenario, bytes per write, a delay between events, a disconnect after N
body bytes, a fixed HTTP error status, and a required API key.  Errors are
shaped like OpenAI's: ``{"error": {"message", "type", "param", "code"}}``.

:func:`open_chat_server` runs the server for an ``async with`` block (an
ephemeral loopback port by default); :func:`serve_forever` is what
``chunkwise serve`` runs until Ctrl-C, logging one line per request.  A client
that hangs up mid-answer (chunkwise closes as soon as it has ``[DONE]``) is
normal, not a server error: the handler ends that response quietly.
"""

from __future__ import annotations

import argparse
import functools
import hmac
import itertools
import json
import os
import re
import sys
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, Literal, TextIO

import attrs
import trio

from ._parser import ChatStreamParser
from ._results import ChatResult, ChoiceResult, ToolCall
from .testing import LoopbackServer, RecordedRequest, ResponseWriter, open_test_server

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "DEFAULT_SCENARIO",
    "SCENARIOS",
    "ChatServer",
    "Scenario",
    "ServerOptions",
    "ToolCallScript",
    "WireStyle",
    "add_serve_command",
    "completion_document",
    "open_chat_server",
    "options_from_args",
    "run_serve",
    "scenario_body",
    "scenario_chunks",
    "scenario_events",
    "serve_forever",
    "split_events",
]

DEFAULT_HOST = "127.0.0.1"
#: The port ``chunkwise serve`` listens on unless told otherwise (vLLM's default too).
DEFAULT_PORT = 8000
DEFAULT_SCENARIO = "text"

#: ``created`` of every generated chunk: a fixed value keeps the output reproducible.
CREATED = 1735689600
_FINGERPRINT = "fp_chunkwise"
_PROMPT_TOKENS = 19
#: OpenAI's limit on ``n``; more would only make a typo expensive.
_MAX_N = 128


# -- scenarios: what is said ---------------------------------------------------


@attrs.frozen(kw_only=True)
class ToolCallScript:
    """One tool call of a scenario, with its arguments as they are streamed."""

    id: str
    name: str
    fragments: tuple[str, ...]

    @property
    def arguments(self) -> str:
        """The complete arguments text."""
        return "".join(self.fragments)


ToolStyle = Literal["fragmented", "whole", "null-index"]
UsageStyle = Literal["separate", "last-chunk"]


@attrs.frozen(kw_only=True)
class WireStyle:
    """How a provider writes a stream.

    Attributes:
        tools: ``"fragmented"`` (OpenAI: the first delta of a call has its
            ``index``, ``id`` and name, later ones only ``index`` and an
            arguments fragment), ``"whole"`` (Ollama: every call complete in one
            delta) or ``"null-index"`` (no usable index: the opening delta has
            ``"index": null`` and the id, continuations have neither).
        usage: ``"separate"`` (OpenAI: a final ``choices: []`` chunk) or
            ``"last-chunk"`` (usage on the chunk carrying the last finish_reason).
            Either way, usage is sent only when ``stream_options.include_usage``
            asks for it.
        keepalive: send ``: keep-alive`` comments before the first chunk and
            between chunks.
        data_prefix: ``"data: "``, or ``"data:"`` as some servers write it.
        line_ending: ``"\\n"``, ``"\\r\\n"`` or ``"\\r"``.
    """

    tools: ToolStyle = "fragmented"
    usage: UsageStyle = "separate"
    keepalive: bool = False
    data_prefix: str = "data: "
    line_ending: str = "\n"


@attrs.frozen(kw_only=True)
class Scenario:
    """A scripted assistant reply, and the wire style it is sent in.

    Attributes:
        name: the model name that selects it.
        summary: one line for ``/v1/models`` and ``--help``.
        reasoning: reasoning text pieces (sent as ``reasoning_content``).
        content: content text pieces, one delta each.
        tool_calls: tool calls, sent after the content.
        finish_reason: sent on each choice's last chunk.
        usage: completion-side token counts for one choice (``completion_tokens``
            and any details); prompt and total counts are added when sent.
        error: when set, this error object is sent as a mid-stream
            ``{"error": ...}`` payload after the content, and the stream ends
            there: no finish_reason, no usage, no ``[DONE]``.
        style: see :class:`WireStyle`.
    """

    name: str
    summary: str
    reasoning: tuple[str, ...] = ()
    content: tuple[str, ...] = ()
    tool_calls: tuple[ToolCallScript, ...] = ()
    finish_reason: str = "stop"
    usage: Mapping[str, Any] = attrs.field(factory=lambda: {"completion_tokens": 20})
    error: Mapping[str, Any] | None = None
    style: WireStyle = WireStyle()

    @property
    def text(self) -> str:
        """The complete content of one choice."""
        return "".join(self.content)

    @property
    def reasoning_text(self) -> str | None:
        """The complete reasoning of one choice, or None when there is none."""
        return "".join(self.reasoning) if self.reasoning else None


_TEXT = (
    "Hello! ",
    "This reply streams ",
    "in small pieces, ",
    "the way a model writes it. ",
    "Multibyte characters survive every split: ",
    "café, naïve, ",
    "日本語のテキスト, ",
    "and emoji 🎉🚀👩‍💻. ",
    "That's all.",
)

_WEATHER_CALLS = (
    ToolCallScript(
        id="call_chunkwise_paris",
        name="get_weather",
        fragments=('{"ci', 'ty": "Pa', 'ris", "un', 'it": "cel', 'sius"}'),
    ),
    ToolCallScript(
        id="call_chunkwise_tokyo",
        name="get_weather",
        fragments=('{"city"', ': "東', '京", "unit": ', '"celsius"', "}"),
    ),
)

_ERROR = {
    "message": "The server had an error while processing your request. Sorry about that!",
    "type": "server_error",
    "param": None,
    "code": None,
}


def _text_scenario(name: str, summary: str, style: WireStyle) -> Scenario:
    return Scenario(
        name=name, summary=summary, content=_TEXT, usage={"completion_tokens": 42}, style=style
    )


def _tools_scenario(name: str, summary: str, style: WireStyle) -> Scenario:
    return Scenario(
        name=name,
        summary=summary,
        tool_calls=_WEATHER_CALLS,
        finish_reason="tool_calls",
        usage={"completion_tokens": 36},
        style=style,
    )


_ALL_SCENARIOS = (
    _text_scenario(
        "text", "a few sentences with multibyte characters (é, 日本語, emoji)", WireStyle()
    ),
    _tools_scenario(
        "tools",
        "two parallel get_weather calls with fragmented arguments; finish tool_calls",
        WireStyle(),
    ),
    Scenario(
        name="reasoning",
        summary="reasoning_content first, then the content",
        reasoning=(
            "The user wants a short answer. ",
            "Two plus two is four; ",
            "say so plainly.",
        ),
        content=("2 + 2 = ", "4."),
        usage={"completion_tokens": 24, "completion_tokens_details": {"reasoning_tokens": 18}},
    ),
    Scenario(
        name="length",
        summary="text cut off by the token limit: finish_reason length",
        content=("Once upon a time, ", "in a land far, ", "far away, there"),
        finish_reason="length",
        usage={"completion_tokens": 16},
    ),
    Scenario(
        name="error",
        summary="some text, then a mid-stream error payload and no [DONE]",
        content=("Let me think about ", "that for a "),
        error=_ERROR,
    ),
    Scenario(
        name="demo",
        summary="multibyte text, then one get_weather call; finish tool_calls (chunkwise demo)",
        content=(
            "Bonjour ! ",
            "I can check ",
            "the weather ",
            "in Zürich ",
            "for you — ",
            "and say hello ",
            "in 日本語: ",
            "こんにちは ",
            "☀️🌧️ ",
            "One moment…",
        ),
        tool_calls=(
            ToolCallScript(
                id="call_chunkwise_demo",
                name="get_weather",
                fragments=('{"ci', 'ty": "Zü', 'rich", ', '"unit": "cel', 'sius"}'),
            ),
        ),
        finish_reason="tool_calls",
        usage={"completion_tokens": 31},
    ),
    _text_scenario(
        "quirks-keepalive",
        "the text scenario with ': keep-alive' comments between events",
        WireStyle(keepalive=True),
    ),
    _text_scenario(
        "quirks-nospace",
        "the text scenario written 'data:' without a space",
        WireStyle(data_prefix="data:"),
    ),
    _text_scenario(
        "quirks-crlf", "the text scenario with CRLF line endings", WireStyle(line_ending="\r\n")
    ),
    _tools_scenario(
        "quirks-whole-tools",
        "the tools scenario with both calls whole in one delta (like Ollama)",
        WireStyle(tools="whole"),
    ),
    _tools_scenario(
        "quirks-null-index",
        "the tools scenario with null/missing tool index; a new id opens a call",
        WireStyle(tools="null-index"),
    ),
    _text_scenario(
        "quirks-usage-last-chunk",
        "the text scenario with usage on the last content chunk, not a separate chunk",
        WireStyle(usage="last-chunk"),
    ),
)

#: The built-in scenarios by name, in the order ``/v1/models`` lists them.
SCENARIOS: Mapping[str, Scenario] = {s.name: s for s in _ALL_SCENARIOS}


# -- scenarios on the wire -----------------------------------------------------


def _tool_deltas(calls: Sequence[ToolCallScript], style: ToolStyle) -> list[dict[str, Any]]:
    """The deltas that stream ``calls`` in ``style`` (see :class:`WireStyle`)."""
    if not calls:
        return []
    if style == "whole":
        return [
            {
                "tool_calls": [
                    {
                        "index": index,
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": call.arguments},
                    }
                    for index, call in enumerate(calls)
                ]
            }
        ]
    deltas: list[dict[str, Any]] = []
    for index, call in enumerate(calls):
        if style == "null-index":
            # The opening delta says "index": null, continuations leave it out:
            # both spellings occur, and only the id tells the calls apart.
            first, rest = call.fragments[0], call.fragments[1:]
            deltas.append(
                {
                    "tool_calls": [
                        {
                            "index": None,
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": first},
                        }
                    ]
                }
            )
            deltas.extend({"tool_calls": [{"function": {"arguments": f}}]} for f in rest)
            continue
        deltas.append(
            {
                "tool_calls": [
                    {
                        "index": index,
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": ""},
                    }
                ]
            }
        )
        deltas.extend(
            {"tool_calls": [{"index": index, "function": {"arguments": f}}]} for f in call.fragments
        )
    return deltas


def _usage(scenario: Scenario, n: int) -> dict[str, Any]:
    completion = int(scenario.usage.get("completion_tokens", 0)) * n
    usage: dict[str, Any] = {
        "prompt_tokens": _PROMPT_TOKENS,
        "completion_tokens": completion,
        "total_tokens": _PROMPT_TOKENS + completion,
    }
    for key, value in scenario.usage.items():
        if key != "completion_tokens":
            usage[key] = value
    return usage


def scenario_chunks(
    scenario: Scenario,
    *,
    n: int = 1,
    include_usage: bool = False,
    model: str | None = None,
) -> list[dict[str, Any]]:
    """The JSON payloads a scenario streams, in order (``[DONE]`` not included).

    Each chunk carries one choice; with ``n`` > 1 the choices take turns, step
    by step.  With ``include_usage`` every chunk has ``"usage": null`` and the
    usage arrives as the style says.  An error scenario ends with its
    ``{"error": ...}`` payload.
    """
    if n < 1:
        raise ValueError("n must be at least 1")
    envelope: dict[str, Any] = {
        "id": f"chatcmpl-chunkwise-{scenario.name}",
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": model if model is not None else scenario.name,
        "system_fingerprint": _FINGERPRINT,
    }
    steps: list[tuple[dict[str, Any], str | None]] = [({"role": "assistant", "content": ""}, None)]
    # DeepSeek writes "content": null beside each reasoning piece.
    steps += [({"content": None, "reasoning_content": p}, None) for p in scenario.reasoning]
    steps += [({"content": p}, None) for p in scenario.content]
    if scenario.error is None:
        steps += [(d, None) for d in _tool_deltas(scenario.tool_calls, scenario.style.tools)]
        steps.append(({}, scenario.finish_reason))
    chunks: list[dict[str, Any]] = []
    for delta, finish_reason in steps:
        for index in range(n):
            choice = {
                "index": index,
                "delta": delta,
                "logprobs": None,
                "finish_reason": finish_reason,
            }
            chunk = {**envelope, "choices": [choice]}
            if include_usage:
                chunk["usage"] = None
            chunks.append(chunk)
    if scenario.error is not None:
        chunks.append({"error": dict(scenario.error)})
    elif include_usage:
        if scenario.style.usage == "last-chunk":
            chunks[-1]["usage"] = _usage(scenario, n)
        else:
            chunks.append({**envelope, "choices": [], "usage": _usage(scenario, n)})
    return chunks


def scenario_events(
    scenario: Scenario,
    *,
    n: int = 1,
    include_usage: bool = False,
    model: str | None = None,
) -> list[bytes]:
    """The exact bytes of each SSE event the scenario sends (comments count as events)."""
    style = scenario.style
    eol = style.line_ending
    keepalive = f": keep-alive{eol}{eol}".encode()
    payloads = [
        json.dumps(chunk, ensure_ascii=False, separators=(",", ":"))
        for chunk in scenario_chunks(scenario, n=n, include_usage=include_usage, model=model)
    ]
    if scenario.error is None:
        payloads.append("[DONE]")
    events: list[bytes] = []
    for position, payload in enumerate(payloads):
        if style.keepalive and position % 3 == 0:
            events.append(keepalive)
        events.append(f"{style.data_prefix}{payload}{eol}{eol}".encode())
    return events


def scenario_body(
    scenario: Scenario,
    *,
    n: int = 1,
    include_usage: bool = False,
    model: str | None = None,
) -> bytes:
    """The whole SSE body of a scenario."""
    return b"".join(scenario_events(scenario, n=n, include_usage=include_usage, model=model))


_EVENT_RE = re.compile(rb".*?(?:\r\n\r\n|\n\n|\r\r|\r\n\n|\n\r\n)|.+", re.DOTALL)


def split_events(body: bytes) -> list[bytes]:
    """Split a recorded SSE body after each blank line, keeping every byte.

    Only used to pace a replay (``--delay`` between events), so a blank line
    spelled with mixed line endings is good enough to find.
    """
    return [match.group() for match in _EVENT_RE.finditer(body)]


# -- stream to document --------------------------------------------------------


def _tool_call_document(call: ToolCall) -> dict[str, Any]:
    return {
        "id": call.id,
        "type": call.type or "function",
        "function": {"name": call.name, "arguments": call.arguments},
    }


def _message(choice: ChoiceResult) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": choice.role or "assistant",
        # OpenAI sends null content beside tool calls, "" never.
        "content": choice.content or (None if choice.tool_calls else ""),
        "refusal": choice.refusal,
    }
    if choice.reasoning is not None:
        message["reasoning_content"] = choice.reasoning
    if choice.tool_calls:
        message["tool_calls"] = [_tool_call_document(call) for call in choice.tool_calls]
    return message


def completion_document(result: ChatResult) -> dict[str, Any]:
    """A ``chat.completion`` JSON document holding what ``result`` reconstructs."""
    return {
        "id": result.id,
        "object": "chat.completion",
        "created": result.created,
        "model": result.model,
        "system_fingerprint": result.system_fingerprint,
        "choices": [
            {
                "index": choice.index,
                "message": _message(choice),
                "logprobs": None,
                "finish_reason": choice.finish_reason,
            }
            for choice in result.choices
        ],
        "usage": None if result.usage is None else dict(result.usage),
    }


# -- the server ----------------------------------------------------------------


def _positive_or_none(_: Any, attribute: attrs.Attribute[Any], value: int | None) -> None:
    if value is not None and value < 1:
        raise ValueError(f"{attribute.name} must be at least 1")


def _check_scenario(_: Any, __: Any, value: str) -> None:
    if value not in SCENARIOS:
        raise ValueError(f"unknown scenario {value!r}; choose from {', '.join(SCENARIOS)}")


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
    """How the server answers every chat request.

    Attributes:
        scenario: the scenario used when the request's ``model`` names none.
        replay: an SSE body sent for every chat request instead of a scenario.
        write_size: bytes per write (each write is one HTTP chunk); ``None``
            writes each event at once.  This, ``delay`` and
            ``disconnect_after`` shape streamed answers only; ``stream:
            false`` documents are sent whole.
        delay: seconds to wait between events.
        disconnect_after: close the connection after this many body bytes,
            without finishing the response.
        status: answer every chat request with this HTTP error status and an
            OpenAI-shaped error body (429 and 503 also get ``Retry-After: 1``).
        api_key: when set, requests without ``Authorization: Bearer <api_key>``
            get a 401.
    """

    scenario: str = attrs.field(default=DEFAULT_SCENARIO, validator=_check_scenario)
    replay: bytes | None = None
    write_size: int | None = attrs.field(default=None, validator=_positive_or_none)
    delay: float = attrs.field(default=0.0, validator=_check_delay)
    disconnect_after: int | None = attrs.field(default=None, validator=_check_disconnect)
    status: int | None = attrs.field(default=None, validator=_check_status)
    api_key: str | None = attrs.field(default=None, repr=False)


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
            self._log(_describe_request(request))
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
        if path == _CHAT_PATH:
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
        if options.status is not None:
            await _send_status_error(writer, options.status, request_id)
            return
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
            return
        problem = _check_chat_request(body)
        if problem is not None:
            message, param = problem
            await _send_error(
                writer, 400, message, request_id, type="invalid_request_error", param=param
            )
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
        await writer.start(
            200,
            (("Cache-Control", "no-cache"), ("x-request-id", request_id)),
            content_type="text/event-stream; charset=utf-8",
        )
        cut = options.disconnect_after
        sent = 0
        for position, event in enumerate(events):
            if position and options.delay:
                await trio.sleep(options.delay)
            for piece in _pieces(event, options.write_size):
                if cut is not None and sent + len(piece) > cut:
                    await writer.write(piece[: cut - sent])
                    await writer.disconnect()
                    return
                await writer.write(piece)
                sent += len(piece)
        if cut is not None:
            # The body was shorter than the cut: still hang up without the last chunk.
            await writer.disconnect()
        else:
            await writer.end()

    async def _document(self, writer: ResponseWriter, body: bytes, request_id: str) -> None:
        parser = ChatStreamParser()
        parser.feed(body)
        parser.end()
        result = parser.result
        server_error = result.server_error
        if result.status == "failed":
            if server_error is not None:
                error = {
                    "message": server_error.message,
                    "type": server_error.type,
                    "param": server_error.param,
                    "code": server_error.code,
                }
            else:
                error = {
                    "message": str(result.error),
                    "type": "server_error",
                    "param": None,
                    "code": None,
                }
            await _send_json(writer, 500, {"error": error}, request_id)
            return
        await _send_json(writer, 200, completion_document(result), request_id)


def _describe_request(request: RecordedRequest) -> str:
    """One log line: the request line, and the model and stream flag of a chat request."""
    line = f"{request.method} {request.target}"
    try:
        body = json.loads(request.body) if request.body else None
    except (ValueError, RecursionError):
        return f"{line} (malformed JSON body)"
    if isinstance(body, dict) and "model" in body:
        line += f" model={body['model']!r} stream={body.get('stream', False)!r}"
    return line


def _check_chat_request(body: Any) -> tuple[str, str | None] | None:
    """Why a chat request is invalid, as OpenAI would say it, or None."""
    if not isinstance(body, dict):
        return "The request body must be a JSON object.", None
    n = body.get("n")
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= _MAX_N):
        return f"Invalid 'n': must be an integer between 1 and {_MAX_N}.", "n"
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        return "Invalid type for 'stream': expected a boolean.", "stream"
    options = body.get("stream_options")
    if options is not None:
        if not isinstance(options, dict):
            return "Invalid type for 'stream_options': expected an object.", "stream_options"
        if stream is not True:
            return (
                "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
                "stream_options",
            )
    return None


def _pieces(data: bytes, size: int | None) -> Iterator[bytes]:
    if size is None:
        yield data
        return
    for start in range(0, len(data), size):
        yield data[start : start + size]


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


async def serve_forever(
    options: ServerOptions | None = None,
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    out: TextIO | None = None,
    task_status: trio.TaskStatus[LoopbackServer] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve until cancelled (Ctrl-C), announcing the base URL on ``out`` (stdout)."""
    out = sys.stdout if out is None else out
    options = options if options is not None else ServerOptions()

    def log(line: str) -> None:
        print(line, file=out, flush=True)

    async with open_chat_server(options, host=host, port=port, log=log) as server:
        print(f"serving on {server.base_url}", file=out)
        if options.replay is not None:
            print(f"replaying a recorded body ({len(options.replay)} bytes)", file=out)
        else:
            print(
                f"scenario: chosen by the request's model (default {options.scenario!r}); "
                f"models: {', '.join(SCENARIOS)}",
                file=out,
            )
        print("press Ctrl-C to stop", file=out, flush=True)
        task_status.started(server)
        await trio.sleep_forever()


# -- the command line ------------------------------------------------------------


def add_serve_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``chunkwise serve``."""
    from ._cli import _positive_int

    scenarios = "\n".join(f"  {s.name:<25}{s.summary}" for s in SCENARIOS.values())
    serve = commands.add_parser(
        "serve",
        help="run a local OpenAI-compatible server that streams scripted replies",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Run an OpenAI-compatible server (POST /v1/chat/completions, GET /v1/models)\n"
            "that answers with scripted streams, for trying chunkwise or testing any client.\n"
            "The request's model names the scenario; other models get --scenario.\n"
            "stream_options.include_usage, n and stream: false are honoured."
        ),
        epilog=(
            f"scenarios (model names):\n{scenarios}\n\n"
            "example:\n"
            "  chunkwise serve --port 8000 --write-size 7 --delay 0.05\n"
            '  OPENAI_BASE_URL=http://127.0.0.1:8000/v1 chunkwise chat --model tools "hi"\n\n'
            "Runs until Ctrl-C (exit status 130)."
        ),
    )
    serve.add_argument(
        "--host",
        default=DEFAULT_HOST,
        help=f"address to listen on (default {DEFAULT_HOST}: this machine only)",
    )
    serve.add_argument(
        "--port",
        type=_port,
        default=DEFAULT_PORT,
        metavar="N",
        help=f"TCP port (default {DEFAULT_PORT}; 0 picks a free one)",
    )
    serve.add_argument(
        "--scenario",
        choices=list(SCENARIOS),
        default=DEFAULT_SCENARIO,
        metavar="NAME",
        help=f"scenario for models that name none (default {DEFAULT_SCENARIO})",
    )
    serve.add_argument(
        "--replay",
        metavar="FILE",
        help="answer every chat request with this recorded SSE body (an HTTP head, as "
        "'chunkwise record' writes, is skipped)",
    )
    serve.add_argument(
        "--write-size", type=_positive_int, metavar="N", help="send the body N bytes per write"
    )
    serve.add_argument(
        "--delay",
        type=_seconds,
        default=0.0,
        metavar="S",
        help="wait S seconds between events (default 0)",
    )
    serve.add_argument(
        "--disconnect-after",
        type=_non_negative_int,
        metavar="N",
        help="close the connection after N body bytes, without finishing the response",
    )
    serve.add_argument(
        "--status",
        type=_error_status,
        metavar="CODE",
        help="answer every chat request with this HTTP error status and an OpenAI-shaped "
        "error (429 and 503 add Retry-After: 1)",
    )
    serve.add_argument(
        "--api-key",
        metavar="K",
        help="require 'Authorization: Bearer K'; other requests get 401",
    )
    serve.add_argument(
        "--api-key-env",
        metavar="NAME",
        help="like --api-key, with the key read from environment variable NAME "
        "(keeps it out of the process list)",
    )
    serve.set_defaults(handler=run_serve)


def _port(text: str) -> int:
    value = _non_negative_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"must be a port number (0-65535), not {value}")
    return value


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {value}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 <= value < 3600:  # also refuses NaN and infinity
        raise argparse.ArgumentTypeError(f"must be between 0 and 3600 seconds, not {text}")
    return value


def _error_status(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not 400 <= value <= 599:
        raise argparse.ArgumentTypeError(f"must be an HTTP error status (400-599), not {value}")
    return value


def options_from_args(args: argparse.Namespace) -> ServerOptions:
    """The :class:`ServerOptions` that ``chunkwise serve``'s arguments ask for."""
    from ._cli import _read_input, _UsageError, split_http_head

    api_key = args.api_key
    if args.api_key_env is not None:
        if api_key is not None:
            raise _UsageError("give --api-key or --api-key-env, not both")
        api_key = os.environ.get(args.api_key_env)
        if not api_key:
            raise _UsageError(f"environment variable {args.api_key_env} is not set or empty")
    replay = None
    if args.replay is not None:
        _, replay = split_http_head(_read_input(args.replay))
    return ServerOptions(
        scenario=args.scenario,
        replay=replay,
        write_size=args.write_size,
        delay=args.delay,
        disconnect_after=args.disconnect_after,
        status=args.status,
        api_key=api_key,
    )


def run_serve(args: argparse.Namespace) -> int:
    """``chunkwise serve``: serve until Ctrl-C (``KeyboardInterrupt`` reaches ``main``)."""
    from ._cli import _UsageError

    options = options_from_args(args)
    try:
        trio.run(functools.partial(serve_forever, options, host=args.host, port=args.port))
    except OSError as exc:
        where = f"{args.host}:{args.port}"
        raise _UsageError(f"cannot listen on {where}: {exc.strerror or exc}") from None
    return 0

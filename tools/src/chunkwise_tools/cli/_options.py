"""The options shared by the commands that send a request (``chat``, ``record``, ``probe``).

Where the endpoint is and which key to use (``--base-url``, ``--api-key-env``,
else ``$OPENAI_BASE_URL`` and ``$OPENAI_API_KEY``), which model
(``--model``, else ``$CHUNKWISE_MODEL``, else :data:`DEFAULT_MODEL`), which API
(``--api``: chat completions, the default, the Responses API, legacy
completions or Anthropic's Messages), and how each API's request body is built from the same
command-line options; and :func:`run_probe_command`, what every API's probe
does with those options.

What differs between the APIs is held once, in :data:`COMMAND_APIS` (one
:class:`CommandApi` a ``--api`` choice): the library's :class:`~chunkwise._stream.Api`
(where to post, which parser) and how the options become its request body.
Commands look their API up there rather than branching on its name.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

import attrs
import trio

from chunkwise import Endpoint, InvalidEndpoint, Retries, Timeouts
from chunkwise.lowlevel import CHAT, COMPLETIONS, MESSAGES, RESPONSES, Api, redact
from chunkwise.types import DEFAULT_BASE_URL

from ._common import (
    EXIT_INTERRUPTED,
    EXIT_NOT_PROBED,
    EXIT_OK,
    EXIT_STREAM,
    PROG,
    Exchange,
    UsageError,
    exchange_summary,
    json_text,
    positive_int,
    prepare_json_output,
    print_failure,
    request_lines,
    setup_failure,
)

__all__ = [
    "COMMAND_APIS",
    "DEFAULT_KEY_VARIABLE",
    "DEFAULT_MODEL",
    "ApiName",
    "CommandApi",
    "add_api_option",
    "add_endpoint_options",
    "add_model_option",
    "add_request_options",
    "api_of_event",
    "build_completion_request",
    "build_messages_request",
    "build_request",
    "build_response_request",
    "command_api",
    "endpoint_from_args",
    "flat_tool",
    "messages_tool",
    "model_from_args",
    "read_json_file",
    "run_probe_command",
]

#: The APIs a command can speak, by the names of ``--api``.
ApiName = Literal["chat", "responses", "completions", "messages"]

DEFAULT_MODEL = "gpt-4o-mini"
DEFAULT_KEY_VARIABLE = "OPENAI_API_KEY"
#: ``max_tokens`` for ``--api messages`` without ``--max-tokens``: the API requires one.
DEFAULT_MESSAGES_MAX_TOKENS = 1024


def add_endpoint_options(parser: argparse.ArgumentParser) -> None:
    """``--base-url`` and ``--api-key-env``."""
    parser.add_argument(
        "--base-url",
        metavar="URL",
        help=(
            "the API base URL; /chat/completions (with --api responses: /responses, "
            "--api completions: /completions, --api messages: /messages) is appended "
            f"(default: $OPENAI_BASE_URL, else {DEFAULT_BASE_URL})"
        ),
    )
    parser.add_argument(
        "--api-key-env",
        metavar="NAME",
        default=DEFAULT_KEY_VARIABLE,
        help=(
            "name of the environment variable holding the API key "
            f"(default: {DEFAULT_KEY_VARIABLE}; with --api messages ANTHROPIC_API_KEY, "
            "and $ANTHROPIC_BASE_URL for the URL); unset or empty sends no key"
        ),
    )


def add_model_option(parser: argparse.ArgumentParser) -> None:
    """``--model``."""
    parser.add_argument(
        "--model",
        metavar="MODEL",
        default=None,
        help=f"the model (default: $CHUNKWISE_MODEL, else {DEFAULT_MODEL})",
    )


def add_api_option(parser: argparse.ArgumentParser) -> None:
    """``--api {chat,responses,completions,messages}`` (default ``chat``)."""
    parser.add_argument(
        "--api",
        choices=tuple(COMMAND_APIS),
        default="chat",
        help=(
            "which API to call: chat completions (POST /chat/completions, the default), "
            "the Responses API (POST /responses), legacy completions (POST /completions) "
            "or Anthropic's Messages (POST /messages, the key sent as x-api-key)"
        ),
    )


def add_request_options(parser: argparse.ArgumentParser) -> None:
    """The options that build the request body (model, system prompt, ...)."""
    add_model_option(parser)
    parser.add_argument(
        "--system",
        metavar="TEXT",
        help=(
            "a system message before the prompt (Responses API: instructions, Messages: "
            "system; not for --api completions)"
        ),
    )
    parser.add_argument(
        "--max-tokens",
        metavar="N",
        type=positive_int,
        help=(
            "max_tokens (Responses API: max_output_tokens; Messages requires it: "
            f"default {DEFAULT_MESSAGES_MAX_TOKENS})"
        ),
    )
    parser.add_argument("--temperature", metavar="T", type=float, help="temperature")
    parser.add_argument(
        "--tools",
        metavar="FILE.json",
        help=(
            "a JSON list of tool definitions to send (chat's nested function tools are "
            "flattened for the Responses API, given input_schema for Messages; not for "
            "--api completions)"
        ),
    )
    parser.add_argument(
        "--include-usage",
        action="store_true",
        help=(
            "ask for a usage chunk (stream_options.include_usage; chat and completions: "
            "a Responses or Messages stream always reports usage)"
        ),
    )


def endpoint_from_args(
    args: argparse.Namespace, environ: Mapping[str, str] | None = None
) -> Endpoint:
    """The endpoint named by ``--base-url`` / ``--api-key-env`` or the environment.

    Raises:
        UsageError: the URL or the key cannot be used (the key is never quoted).
    """
    env = os.environ if environ is None else environ
    # --api messages reads Anthropic's variables, as Endpoint.from_env and its SDK do,
    # unless the options name others.
    prefix = "ANTHROPIC" if getattr(args, "api", "chat") == "messages" else "OPENAI"
    key_variable = args.api_key_env
    if prefix == "ANTHROPIC" and key_variable == DEFAULT_KEY_VARIABLE:
        key_variable = "ANTHROPIC_API_KEY"
    base_url = args.base_url if args.base_url is not None else env.get(f"{prefix}_BASE_URL", "")
    variables = {f"{prefix}_BASE_URL": base_url, f"{prefix}_API_KEY": env.get(key_variable, "")}
    try:
        return Endpoint.from_env(variables, api="messages" if prefix == "ANTHROPIC" else "chat")
    except InvalidEndpoint as exc:
        raise UsageError(str(exc)) from None


def model_from_args(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> str:
    """The model named by ``--model``, else ``$CHUNKWISE_MODEL``, else :data:`DEFAULT_MODEL`."""
    env = os.environ if environ is None else environ
    return str(args.model or env.get("CHUNKWISE_MODEL", "").strip() or DEFAULT_MODEL)


def build_request(
    args: argparse.Namespace, prompt: str, environ: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The chat-completions request body the options describe (without ``stream``)."""
    model = model_from_args(args, environ)
    messages: list[dict[str, str]] = []
    if args.system is not None:
        messages.append({"role": "system", "content": args.system})
    messages.append({"role": "user", "content": prompt})
    request: dict[str, Any] = {"model": model, "messages": messages}
    if args.max_tokens is not None:
        request["max_tokens"] = args.max_tokens
    if args.temperature is not None:
        request["temperature"] = args.temperature
    if args.tools is not None:
        request["tools"] = _read_tools(args.tools)
    if args.include_usage:
        request["stream_options"] = {"include_usage": True}
    return request


def build_response_request(
    args: argparse.Namespace, prompt: str, environ: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The Responses API request body the same options describe (without ``stream``).

    ``--system`` becomes ``instructions``, ``--max-tokens`` ``max_output_tokens``,
    and each chat-shaped tool (``{"type": "function", "function": {...}}``) the
    flat Responses shape; ``--include-usage`` has no counterpart and is refused.
    """
    if args.include_usage:
        raise UsageError("--include-usage is for --api chat: a Responses stream always has usage")
    request: dict[str, Any] = {"model": model_from_args(args, environ), "input": prompt}
    if args.system is not None:
        request["instructions"] = args.system
    if args.max_tokens is not None:
        request["max_output_tokens"] = args.max_tokens
    if args.temperature is not None:
        request["temperature"] = args.temperature
    if args.tools is not None:
        request["tools"] = [flat_tool(tool) for tool in _read_tools(args.tools)]
    return request


def build_completion_request(
    args: argparse.Namespace, prompt: str, environ: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The legacy completions request body the options describe (without ``stream``).

    ``{"model", "prompt"}`` with ``max_tokens``, ``temperature`` and
    ``stream_options.include_usage`` as for chat; a completion has no system
    message and no tools, so ``--system`` and ``--tools`` are refused.
    """
    for given, option in ((args.system, "--system"), (args.tools, "--tools")):
        if given is not None:
            raise UsageError(f"{option} is for --api chat or responses: a completion has none")
    request: dict[str, Any] = {"model": model_from_args(args, environ), "prompt": prompt}
    if args.max_tokens is not None:
        request["max_tokens"] = args.max_tokens
    if args.temperature is not None:
        request["temperature"] = args.temperature
    if args.include_usage:
        request["stream_options"] = {"include_usage": True}
    return request


def build_messages_request(
    args: argparse.Namespace, prompt: str, environ: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The Messages API request body the options describe (without ``stream``).

    ``{"model", "max_tokens", "messages"}``: the API requires ``max_tokens``,
    so without ``--max-tokens`` it is :data:`DEFAULT_MESSAGES_MAX_TOKENS`.
    ``--system`` becomes the top-level ``system``, each chat-shaped tool
    Anthropic's (:func:`messages_tool`); ``--include-usage`` has no
    counterpart and is refused.
    """
    if args.include_usage:
        raise UsageError("--include-usage is for --api chat: a Messages stream always has usage")
    max_tokens = DEFAULT_MESSAGES_MAX_TOKENS if args.max_tokens is None else args.max_tokens
    request: dict[str, Any] = {
        "model": model_from_args(args, environ),
        "max_tokens": max_tokens,
        "messages": [{"role": "user", "content": prompt}],
    }
    if args.system is not None:
        request["system"] = args.system
    if args.temperature is not None:
        request["temperature"] = args.temperature
    if args.tools is not None:
        request["tools"] = [messages_tool(tool) for tool in _read_tools(args.tools)]
    return request


@attrs.frozen(kw_only=True)
class CommandApi:
    """One ``--api`` choice: what the commands need to know about that API."""

    #: The ``--api`` value.
    name: str
    #: What the API is called in messages ("chat completions"...).
    title: str
    #: Where to post and how to parse (the library's own table entry).
    api: Api[Any]
    #: The request body (without ``stream``) for a prompt and the options.
    build: Callable[[argparse.Namespace, str], dict[str, Any]]
    #: The body's member that holds the prompt (``bench --prompts`` objects).
    prompt_key: str
    #: Usage comes only when asked for (``stream_options.include_usage``).
    usage_on_request: bool


#: Every ``--api`` choice, the default first.
COMMAND_APIS: Mapping[str, CommandApi] = {
    entry.name: entry
    for entry in (
        CommandApi(
            name="chat",
            title="chat completions",
            api=CHAT,
            build=build_request,
            prompt_key="messages",
            usage_on_request=True,
        ),
        CommandApi(
            name="responses",
            title="Responses API",
            api=RESPONSES,
            build=build_response_request,
            prompt_key="input",
            usage_on_request=False,
        ),
        CommandApi(
            name="completions",
            title="legacy completions",
            api=COMPLETIONS,
            build=build_completion_request,
            prompt_key="prompt",
            usage_on_request=True,
        ),
        CommandApi(
            name="messages",
            title="Messages API",
            api=MESSAGES,
            build=build_messages_request,
            prompt_key="messages",
            usage_on_request=False,
        ),
    )
}


def command_api(args: argparse.Namespace) -> CommandApi:
    """The :class:`CommandApi` ``--api`` chose."""
    return COMMAND_APIS[args.api]


def flat_tool(tool: dict[str, Any]) -> dict[str, Any]:
    """A chat function tool in the Responses API's flat shape; any other tool unchanged.

    The same tools file then serves both APIs.
    """
    function = tool.get("function")
    if tool.get("type", "function") != "function" or not isinstance(function, dict):
        return tool
    rest = {key: value for key, value in tool.items() if key not in ("function", "type")}
    return {"type": "function", **function, **rest}


def messages_tool(tool: dict[str, Any]) -> dict[str, Any]:
    """A chat function tool in the Messages API's shape (``name``, ``description``,
    ``input_schema``); any other tool (already Anthropic's) unchanged."""
    function = tool.get("function")
    if tool.get("type", "function") != "function" or not isinstance(function, dict):
        return tool
    shaped = {key: value for key, value in function.items() if key not in ("parameters", "strict")}
    return {**shaped, "input_schema": function.get("parameters", {"type": "object"})}


def read_json_file(name: str) -> Any:
    """The JSON document in the file ``name``; a :class:`UsageError` saying why not."""
    try:
        with open(name, "rb") as file:
            return json.load(file)
    except OSError as exc:
        raise UsageError(f"cannot read {name!r}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise UsageError(f"{name!r} is not valid JSON: {exc}") from None


def _read_tools(name: str) -> list[Any]:
    tools = read_json_file(name)
    if not isinstance(tools, list) or not all(isinstance(tool, dict) for tool in tools):
        raise UsageError(f"{name!r} must hold a JSON list of tool definitions (objects)")
    return tools


def run_probe_command(
    args: argparse.Namespace,
    probe: Callable[..., Awaitable[dict[str, Any]]],
    render: Callable[[Mapping[str, Any]], str],
) -> int:
    """Run one API's ``probe`` and print its findings: the table, or JSON with ``--json``.

    ``probe(endpoint, model, time_limit, key_variable=..., sent=...)`` returns
    the findings, and appends each request to ``sent`` as it ends.  The exit
    status says whether streaming works; when the probe could not start (see
    :func:`~._common.setup_failure`) the cause is said once, on stderr, instead
    of a table of unknowns, with status 3.  Ctrl-C prints the requests that
    ended (status 130).
    """
    # No retries: a probe reports what the server does to one request.
    endpoint = attrs.evolve(
        endpoint_from_args(args),
        timeouts=Timeouts(connect=args.timeout, idle=args.timeout),
        retries=Retries(max_retries=0),
    )
    sent: list[Exchange[Any]] = []
    try:
        findings = trio.run(
            functools.partial(
                probe,
                endpoint,
                model_from_args(args),
                args.timeout,
                key_variable=args.api_key_env,
                sent=sent,
            )
        )
    except KeyboardInterrupt:
        requests = [exchange_summary(exchange) for exchange in sent]
        if args.json:
            prepare_json_output()
            text = json_text({"interrupted": True, "requests": requests}, indent=2)
        elif requests:
            text = "\n".join(["requests (interrupted):", *request_lines(requests)])
        else:
            print(f"{PROG} probe: interrupted before any request ended", file=sys.stderr)
            return EXIT_INTERRUPTED
        sys.stdout.write(redact(text, endpoint.api_key) + "\n")
        return EXIT_INTERRUPTED
    failure = setup_failure(findings)
    if failure is not None and not args.json:
        print_failure(failure, f"{PROG} probe: error: ")
        return EXIT_NOT_PROBED
    if args.json:
        prepare_json_output()
        text = json_text(findings, indent=2)
    else:
        text = render(findings)
    sys.stdout.write(redact(text, endpoint.api_key) + "\n")
    if failure is not None:
        return EXIT_NOT_PROBED
    return EXIT_OK if findings["streaming_works"] else EXIT_STREAM


def api_of_event(kind: str, data: str) -> ApiName | None:
    """Which API one server-sent event (its type and data) belongs to, when it tells.

    A ``response.*`` type (the ``event:`` field or the data's ``type``) or a
    ``response`` object is the Responses API; a Messages event type
    (``message_start``, ``content_block_delta``...) the Messages API; a ``text_completion`` object,
    or choices with ``text`` and no ``delta``, legacy completions; a
    ``chat.completion.chunk`` or other choices, chat.  ``inspect`` tells a
    recording's API by it, and ``chat --api responses`` notices a chat server.
    """
    if kind.startswith("response."):
        return "responses"
    if kind in _MESSAGES_EVENTS:
        return "messages"
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict):
        return None
    etype, obj = value.get("type"), value.get("object")
    if isinstance(etype, str) and etype.startswith("response."):
        return "responses"
    if obj == "response":
        return "responses"
    if etype in _MESSAGES_EVENTS:
        return "messages"
    if obj == "text_completion":
        return "completions"
    choices = value.get("choices")
    if obj != "chat.completion.chunk" and isinstance(choices, list):
        shapes = [choice for choice in choices if isinstance(choice, dict)]
        if any("text" in c for c in shapes) and not any("delta" in c for c in shapes):
            return "completions"
    if obj == "chat.completion.chunk" or "choices" in value:
        return "chat"
    return None


#: The event types only the Messages API sends (``ping`` and ``error`` are not telling).
_MESSAGES_EVENTS = frozenset(
    f"{what}_{phase}"
    for what in ("message", "content_block")
    for phase in ("start", "delta", "stop")
)

"""A tool-execution loop: run a tool call only once its arguments are complete and valid.

The request carries the tools' JSON schemas.  chunkwise assembles each call's
argument fragments and, when the call is over, parses them and validates them
against the schema (this needs the ``jsonschema`` extra:
``pip install -e '.[jsonschema]'``).  Only a call whose
:class:`~chunkwise.chat.ToolCallCompleted` shows ``call.error is None`` and
``call.validated`` is run, as soon as that event arrives; its result goes back
as a ``role: "tool"`` message in the next request, until the model answers
with text.  A call is either valid, rejected (``call.error`` says why), or not
validated (``call.validation_skipped`` says why, e.g. jsonschema is not
installed); only a valid one is run.

Against the embedded server (no network, no key).  Its replies are scripted
and chosen by model name, so the first request asks the ``tools`` scenario
(two parallel ``get_weather`` calls) and the follow-up the ``text`` one::

    chunkwise serve --port 8000 &
    python examples/tool_loop.py --base-url http://127.0.0.1:8000/v1 \
        --model tools --followup-model text

Against a real endpoint (the key is read from ``OPENAI_API_KEY``)::

    python examples/tool_loop.py --base-url https://api.openai.com/v1 --model gpt-4o-mini

Exit status: 0 when the model gave a final answer, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from typing import Any

import trio

import chunkwise

LOCAL_BASE_URL = "http://127.0.0.1:8000/v1"
MAX_ROUNDS = 4


def get_weather(city: str, unit: str = "celsius") -> dict[str, Any]:
    """The local function the model may call (a stand-in for a real lookup)."""
    temperature = 18 if unit == "celsius" else 64
    return {"city": city, "temperature": temperature, "unit": unit, "sky": "clear"}


FUNCTIONS: dict[str, Callable[..., Any]] = {"get_weather": get_weather}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                },
                "required": ["city"],
                "additionalProperties": False,
            },
        },
    }
]


def verdict(call: chunkwise.ToolCall) -> str:
    """``valid``, ``rejected: <why>`` or ``not validated: <why>``."""
    if call.error is not None:
        return f"rejected: {call.error}"
    if call.validated:
        return "valid"
    return f"not validated: {call.validation_skipped}"


def tool_message(call: chunkwise.ToolCall) -> dict[str, Any]:
    """Run a validated call, or explain why it was not run; either way, answer it."""
    if call.error is not None or not call.validated:
        content = f"error: not run: {verdict(call)}"
    else:
        output = FUNCTIONS[call.name or ""](**call.parse_arguments())
        content = json.dumps(output, ensure_ascii=False)
    return {"role": "tool", "tool_call_id": call.id, "content": content}


def assistant_message(choice: chunkwise.chat.ChoiceResult) -> dict[str, Any]:
    """The model's turn, as it must be sent back before the tool results."""
    calls = [
        {
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": call.arguments},
        }
        for call in choice.tool_calls
    ]
    return {"role": "assistant", "content": choice.content or None, "tool_calls": calls}


async def main(base_url: str, model: str, followup_model: str, prompt: str) -> int:
    endpoint = chunkwise.Endpoint(base_url, api_key=os.environ.get("OPENAI_API_KEY", "").strip())
    messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
    for round_number in range(MAX_ROUNDS):
        request = {
            "model": followup_model if round_number else model,
            "messages": messages,
            "tools": TOOLS,
        }
        replies: list[dict[str, Any]] = []
        async with chunkwise.chat.open_stream(endpoint, request) as stream:
            async for event in stream.subscribe("tool_call"):
                # Fragments and starts are ignored: a call is usable only once
                # it is complete, parsed and validated.
                if type(event) is chunkwise.chat.ToolCallCompleted and event.choice_index == 0:
                    call = event.call
                    print(f"[tool call] {call.name} {call.arguments} ({verdict(call)})")
                    replies.append(tool_message(call))
                    print(f"[tool result] {call.id}: {replies[-1]['content']}")
            result = await stream.result()
        if result.status != "complete":
            print(f"status: {result.status} ({result.reason or result.error})")
            return 1
        choice = result.choice(0)
        if not choice.tool_calls:
            print(f"final answer: {choice.content}")
            return 0
        messages.append(assistant_message(choice))
        messages.extend(replies)
    print(f"no final answer after {MAX_ROUNDS} rounds")
    return 1


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Run tool calls and send the results back.")
    parser.add_argument(
        "--base-url",
        default=os.environ.get("OPENAI_BASE_URL") or LOCAL_BASE_URL,
        help=f"OpenAI-compatible base URL (default: $OPENAI_BASE_URL, else {LOCAL_BASE_URL})",
    )
    parser.add_argument("--model", default="gpt-4o-mini")
    parser.add_argument(
        "--followup-model", help="model for the requests carrying tool results (default: --model)"
    )
    parser.add_argument("--prompt", default="What is the weather in Paris?")
    return parser.parse_args()


if __name__ == "__main__":
    args = parse_args()
    try:
        followup = args.followup_model or args.model
        sys.exit(trio.run(main, args.base_url, args.model, followup, args.prompt))
    except chunkwise.ChunkwiseError as exc:
        sys.exit(f"error: {exc}")

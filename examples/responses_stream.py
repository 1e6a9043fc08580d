"""Stream one Responses API answer (``POST /responses``): text as it arrives, then function calls.

Against the embedded server (no network, no key)::

    chunkwise serve --port 8000 &
    python examples/responses_stream.py --base-url http://127.0.0.1:8000/v1

Against a real endpoint (the key is read from ``OPENAI_API_KEY``)::

    python examples/responses_stream.py --base-url https://api.openai.com/v1 --model gpt-4.1-mini

Two consumers share the stream: one prints the text, the other the function
calls once their arguments are complete, parsed and validated against the
request's tool.  Exit status: 0 when the answer is complete, 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import sys

import trio

import chunkwise

LOCAL_BASE_URL = "http://127.0.0.1:8000/v1"
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The current weather in a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}


async def show_text(channel: trio.MemoryReceiveChannel[chunkwise.Event]) -> None:
    async for event in channel:
        if type(event) is chunkwise.responses.TextDelta:
            print(event.text, end="", flush=True)


async def show_calls(channel: trio.MemoryReceiveChannel[chunkwise.Event]) -> None:
    async for event in channel:
        if type(event) is chunkwise.responses.ToolCallCompleted:
            call = event.call
            if call.error is None:
                print(f"\n[call {call.call_id}] {call.name}({call.parse_arguments()})")
            else:
                print(f"\n[call {call.call_id}] {call.name}: unusable arguments: {call.error}")


async def main(base_url: str, model: str, prompt: str) -> int:
    endpoint = chunkwise.Endpoint(base_url, api_key=os.environ.get("OPENAI_API_KEY", "").strip())
    request = {"model": model, "input": prompt, "tools": [WEATHER]}
    async with chunkwise.responses.open_stream(endpoint, request) as stream:
        stream.start_soon(show_text, stream.subscribe("choice"))
        stream.start_soon(show_calls, stream.subscribe("tool_call"))
        result = await stream.result()
    print()
    if result.status == "complete":
        print(f"status: complete (usage: {dict(result.usage or {})})")
    elif result.status == "incomplete":
        detail = result.incomplete_reason or result.reason
        print(f"status: incomplete ({detail})")
    else:
        print(f"status: failed: {result.error}")
    return 0 if result.status == "complete" else 1


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Stream one Responses API answer.")
    parser.add_argument(
        "--base-url",
        default=os.environ.get("OPENAI_BASE_URL") or LOCAL_BASE_URL,
        help=f"base URL (default: OPENAI_BASE_URL, else {LOCAL_BASE_URL})",
    )
    parser.add_argument("--model", default="text", help="model name (default: text)")
    parser.add_argument("prompt", nargs="?", default="What's the weather in Zürich?")
    return parser.parse_args()


if __name__ == "__main__":
    args = parse_args()
    try:
        sys.exit(trio.run(main, args.base_url, args.model, args.prompt))
    except chunkwise.ChunkwiseError as exc:  # HTTP error, connection refused, bad URL...
        sys.exit(f"error: {exc}")

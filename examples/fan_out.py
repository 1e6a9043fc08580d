"""Fan one stream out to three independent consumers: text, tool calls, lifecycle.

Each consumer is a task in the stream's nursery (``stream.start_soon``) with its
own subscription, so each sees every event of its family, in order, and none
can make another miss anything.  The terminal event reaches all three.  Across
consumers there is no order: their lines interleave as the scheduler runs them
(a lifecycle line may well come before the text is finished).

Against the embedded server (no network, no key)::

    chunkwise serve --port 8000 &
    python examples/fan_out.py --base-url http://127.0.0.1:8000/v1 --model demo

Against a real endpoint (the key is read from ``OPENAI_API_KEY``)::

    python examples/fan_out.py --base-url https://api.openai.com/v1 --model gpt-4o-mini

Exit status: 0 when the stream is complete, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import trio

import chunkwise

LOCAL_BASE_URL = "http://127.0.0.1:8000/v1"

WEATHER_TOOL = {
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
        },
    },
}


class Console:
    """Keeps the live text and the consumers' report lines from running together."""

    def __init__(self) -> None:
        self.mid_line = False

    def text(self, text: str) -> None:
        print(text, end="", flush=True)
        self.mid_line = not text.endswith("\n")

    def line(self, line: str) -> None:
        if self.mid_line:
            print()
            self.mid_line = False
        print(line, flush=True)


async def render_text(events: trio.MemoryReceiveChannel[chunkwise.Event], out: Console) -> None:
    async for event in events:
        match event:
            case chunkwise.chat.TextDelta(text=text):
                out.text(text)
            case chunkwise.chat.ChoiceFinished(choice_index=index, finish_reason=reason):
                out.line(f"[choice] choice {index} finished: {reason}")


async def run_tool_calls(events: trio.MemoryReceiveChannel[chunkwise.Event], out: Console) -> None:
    async for event in events:
        if type(event) is chunkwise.chat.ToolCallCompleted:
            call = event.call
            if call.error is not None:
                out.line(f"[tool_call] {call.name}: unusable: {call.error}")
            else:
                arguments = json.dumps(call.parse_arguments(), ensure_ascii=False)
                out.line(f"[tool_call] {call.name}({arguments}) id={call.id}")


async def watch_lifecycle(events: trio.MemoryReceiveChannel[chunkwise.Event], out: Console) -> None:
    async for event in events:
        match event:
            case chunkwise.HeadReceived(status_code=status):
                out.line(f"[lifecycle] HTTP {status}")
            case chunkwise.UsageReported(usage=usage):
                out.line(f"[lifecycle] usage: {json.dumps(usage)}")
            case chunkwise.StreamCompleted():
                out.line("[lifecycle] status: complete")
            case chunkwise.StreamIncomplete(reason=reason):
                out.line(f"[lifecycle] status: incomplete ({reason})")
            case chunkwise.StreamFailed(error=error):
                out.line(f"[lifecycle] status: failed: {error}")


async def main(base_url: str, model: str, prompt: str) -> int:
    endpoint = chunkwise.Endpoint(base_url, api_key=os.environ.get("OPENAI_API_KEY", "").strip())
    request = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "tools": [WEATHER_TOOL],
        "stream_options": {"include_usage": True},
    }
    out = Console()
    async with chunkwise.chat.open_stream(endpoint, request) as stream:
        # Subscribe before the first checkpoint: every subscriber sees every event.
        stream.start_soon(render_text, stream.subscribe("choice"), out)
        stream.start_soon(run_tool_calls, stream.subscribe("tool_call"), out)
        stream.start_soon(watch_lifecycle, stream.subscribe("lifecycle"), out)
        result = await stream.result()
    # Leaving the block waited for the three consumers to drain their channels.
    return 0 if result.status == "complete" else 1


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Fan one stream out to three consumers.")
    parser.add_argument(
        "--base-url",
        default=os.environ.get("OPENAI_BASE_URL") or LOCAL_BASE_URL,
        help=f"OpenAI-compatible base URL (default: $OPENAI_BASE_URL, else {LOCAL_BASE_URL})",
    )
    parser.add_argument("--model", default="gpt-4o-mini")
    parser.add_argument(
        "--prompt", default="Say hello, then look up the weather in Paris with the tool."
    )
    return parser.parse_args()


if __name__ == "__main__":
    args = parse_args()
    try:
        sys.exit(trio.run(main, args.base_url, args.model, args.prompt))
    except chunkwise.ChunkwiseError as exc:
        sys.exit(f"error: {exc}")

"""Stream one chat completion and print its text as it arrives, then its status.

Against the embedded server (no network, no key)::

    chunkwise serve --port 8000 &
    python examples/basic_stream.py --base-url http://127.0.0.1:8000/v1

Against a real endpoint (the key is read from ``OPENAI_API_KEY``)::

    python examples/basic_stream.py --base-url https://api.openai.com/v1 --model gpt-4o-mini

Exit status: 0 when the stream is complete, 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import sys

import trio

import chunkwise

LOCAL_BASE_URL = "http://127.0.0.1:8000/v1"


async def main(base_url: str, model: str, prompt: str) -> int:
    endpoint = chunkwise.Endpoint(base_url, api_key=os.environ.get("OPENAI_API_KEY", "").strip())
    request = {"model": model, "messages": [{"role": "user", "content": prompt}]}
    async with chunkwise.chat.open_stream(endpoint, request) as stream:
        # One consumer: iterate the stream itself (a plain subscription).
        async for event in stream:
            if type(event) is chunkwise.chat.TextDelta and event.choice_index == 0:
                print(event.text, end="", flush=True)
        result = await stream.result()
    print()
    if result.status == "complete":
        print(f"status: complete (finish_reason: {result.choice(0).finish_reason})")
    elif result.status == "incomplete":
        print(f"status: incomplete ({result.reason})")
    else:
        print(f"status: failed: {result.error}")
    return 0 if result.status == "complete" else 1


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Stream one chat completion.")
    parser.add_argument(
        "--base-url",
        default=os.environ.get("OPENAI_BASE_URL") or LOCAL_BASE_URL,
        help=f"OpenAI-compatible base URL (default: $OPENAI_BASE_URL, else {LOCAL_BASE_URL})",
    )
    parser.add_argument("--model", default="gpt-4o-mini")
    parser.add_argument("--prompt", default="Say hello in three languages.")
    return parser.parse_args()


if __name__ == "__main__":
    args = parse_args()
    try:
        sys.exit(trio.run(main, args.base_url, args.model, args.prompt))
    except chunkwise.ChunkwiseError as exc:  # HTTP error, connection refused, bad URL...
        sys.exit(f"error: {exc}")

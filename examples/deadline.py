"""Give a stream a deadline with trio's own cancel scope, and keep what arrived.

``trio.move_on_after`` around the ``async with`` bounds the whole request:
connecting, waiting for the first token, and streaming.  When it fires, the
socket is closed before the block is left, and ``stream.snapshot`` holds the
partial answer with status ``incomplete`` and reason ``cancelled``.

Against the embedded server, slowed down so that the deadline fires::

    chunkwise serve --port 8000 --delay 0.2 &
    python examples/deadline.py --base-url http://127.0.0.1:8000/v1 --seconds 1

Against a real endpoint (the key is read from ``OPENAI_API_KEY``)::

    python examples/deadline.py --base-url https://api.openai.com/v1 --model gpt-4o-mini

Exit status: 0 whether or not the deadline fired (both are expected outcomes),
1 when the stream failed.
"""

from __future__ import annotations

import argparse
import os
import sys

import trio

import chunkwise

LOCAL_BASE_URL = "http://127.0.0.1:8000/v1"


async def main(base_url: str, model: str, prompt: str, seconds: float) -> int:
    endpoint = chunkwise.Endpoint(base_url, api_key=os.environ.get("OPENAI_API_KEY", "").strip())
    request = {"model": model, "messages": [{"role": "user", "content": prompt}]}
    stream: chunkwise.chat.Stream | None = None
    with trio.move_on_after(seconds) as deadline:
        async with chunkwise.chat.open_stream(endpoint, request) as stream:
            async for event in stream:
                if type(event) is chunkwise.chat.TextDelta and event.choice_index == 0:
                    print(event.text, end="", flush=True)
    print()
    if deadline.cancelled_caught:
        print(f"deadline of {seconds:g} s reached")
    if stream is None:
        print("no response before the deadline")
        return 0
    # The socket is already closed here, whichever way the block was left.
    result = stream.snapshot
    if result.status == "incomplete":
        print(f"status: incomplete ({result.reason})")
        print(f"partial text: {result.content!r}")
    elif result.status == "failed":
        print(f"status: failed: {result.error}")
        return 1
    else:
        print("status: complete")
    return 0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Stream with a deadline.")
    parser.add_argument(
        "--base-url",
        default=os.environ.get("OPENAI_BASE_URL") or LOCAL_BASE_URL,
        help=f"OpenAI-compatible base URL (default: $OPENAI_BASE_URL, else {LOCAL_BASE_URL})",
    )
    parser.add_argument("--model", default="gpt-4o-mini")
    parser.add_argument("--prompt", default="Count slowly from one to fifty, in words.")
    parser.add_argument(
        "--seconds", type=float, default=1.0, help="deadline for the whole request (%(default)s)"
    )
    return parser.parse_args()


if __name__ == "__main__":
    args = parse_args()
    try:
        sys.exit(trio.run(main, args.base_url, args.model, args.prompt, args.seconds))
    except chunkwise.ChunkwiseError as exc:
        sys.exit(f"error: {exc}")

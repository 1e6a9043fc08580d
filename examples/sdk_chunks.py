"""Keep the official ``openai`` SDK for the HTTP side, and let chunkwise assemble the stream.

With the SDK, ``client.chat.completions.create(..., stream=True)`` yields
``ChatCompletionChunk`` objects; each one, as a mapping, goes to
``chunkwise.chat.Accumulator().feed_chunk(...)``, which turns the deltas into
stream events and a ``chat.Result`` (text, tool calls with parsed arguments,
usage and an honest status).

By default this runs offline: it replays a recording shipped in
``examples/recordings/`` through the SDK's own ``ChatCompletionChunk`` type,
so the accumulator sees exactly the objects a live stream would give::

    python examples/sdk_chunks.py                       # parallel tool calls
    python examples/sdk_chunks.py examples/recordings/text.sse

``--live`` streams from a real endpoint instead (needs ``OPENAI_API_KEY``;
``OPENAI_BASE_URL`` points it at any OpenAI-compatible server, such as
``chunkwise serve``)::

    python examples/sdk_chunks.py --live --model gpt-4o-mini --prompt "Say hello"

When the SDK raises mid-stream (a broken connection, a timeout, an error
chunk), what arrived is kept and the status says why the stream stopped:
``incomplete (connection lost)``, ``incomplete (idle timeout)`` or
``failed: <the server's message>``.

Exit status: 0 when the stream is complete, 1 when it is incomplete or failed,
2 for bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import openai
from openai.types.chat import ChatCompletionChunk

import chunkwise

RECORDINGS = Path(__file__).resolve().parent / "recordings"


def recorded_chunks(path: Path) -> Iterator[ChatCompletionChunk]:
    """Replay a recorded raw body as the SDK's chunk objects, without a network."""
    # The SDK decodes SSE itself; OpenAI's bodies hold one data line per event,
    # so taking the data lines is enough to stand in for it here.
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("data:"):
            continue
        data = line.removeprefix("data:").removeprefix(" ")
        if data == "[DONE]":
            return  # the SDK stops here too, without handing the marker on
        yield ChatCompletionChunk.model_validate(json.loads(data))


def live_chunks(
    model: str, prompt: str, *, timeout: float = 600.0, max_retries: int = 2
) -> Iterator[ChatCompletionChunk]:
    """The real-network form: the SDK's own streaming call."""
    # Reads OPENAI_API_KEY and OPENAI_BASE_URL.
    client = openai.OpenAI(timeout=timeout, max_retries=max_retries)
    stream = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": prompt}],
        stream=True,
        # Without this the usage chunk is never sent.
        stream_options={"include_usage": True},
    )
    with stream:
        yield from stream


def accumulate(chunks: Iterable[ChatCompletionChunk]) -> chunkwise.chat.Result:
    """Feed the SDK's chunks to chunkwise, showing text and tool calls as they complete."""
    acc = chunkwise.chat.Accumulator()
    display = Display()
    try:
        for chunk in chunks:
            # exclude_unset: pass the fields the server sent, not the None
            # defaults the SDK's types add (they would show up in usage).
            display.show(acc.feed(chunk.model_dump(exclude_unset=True)))
    except openai.APITimeoutError as exc:  # before APIConnectionError: it is one
        # Nothing arrived for too long: end the stream, saying why it stopped.
        # What arrived is kept; the status is "incomplete" unless every choice
        # had already finished.
        display.stopped(exc)
        display.show(acc.end(chunkwise.IncompleteReason.IDLE_TIMEOUT))
    except openai.APIConnectionError as exc:
        # The connection broke (or never opened): the same, another reason.
        display.stopped(exc)
        display.show(acc.end(chunkwise.IncompleteReason.CONNECTION_LOST))
    except openai.APIError as exc:
        # The SDK raises on an error chunk (or an HTTP error status) instead of
        # yielding it; record it, so the result is "failed" and keeps what
        # arrived before.
        display.stopped(exc)
        body = exc.body if isinstance(exc.body, Mapping) else None
        error = chunkwise.StreamError(
            exc.message, type=exc.type, code=exc.code, param=exc.param, body=body
        )
        display.show(acc.fail(error))
    else:
        display.show(acc.end())
    return acc.result


class Display:
    """Prints choice 0's text as it streams, and each tool call once it is complete."""

    def __init__(self) -> None:
        self.mid_line = False

    def show(self, events: Iterable[chunkwise.Event]) -> None:
        for event in events:
            if type(event) is chunkwise.chat.TextDelta and event.choice_index == 0:
                print(event.text, end="", flush=True)
                self.mid_line = not event.text.endswith("\n")
            elif type(event) is chunkwise.chat.ToolCallCompleted:
                call = event.call
                try:
                    arguments = json.dumps(call.parse_arguments(), ensure_ascii=False)
                except chunkwise.ToolArgumentsError as exc:
                    arguments = f"unusable: {exc}"
                self.line(
                    f"[choice {event.choice_index}] tool call {call.name} ({call.id}): {arguments}"
                )
            elif type(event) is chunkwise.chat.ChoiceFinished:
                self.line(f"[choice {event.choice_index}] finish_reason: {event.finish_reason}")

    def line(self, text: str) -> None:
        if self.mid_line:
            print()
            self.mid_line = False
        print(text)

    def stopped(self, exc: openai.APIError) -> None:
        """The SDK raised: say what it raised, on stderr, after any half-written line."""
        if self.mid_line:
            print(flush=True)
            self.mid_line = False
        print(f"the SDK raised {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)


def summarize(result: chunkwise.chat.Result) -> None:
    for choice in result.choices:
        if choice.index != 0 and choice.content:
            print(f"[choice {choice.index}] content: {choice.content}")
        if choice.refusal is not None:
            print(f"[choice {choice.index}] refusal: {choice.refusal}")
    print(f"model: {result.model}")
    print(f"usage: {json.dumps(result.usage)}")
    if result.status == "failed":
        print(f"status: failed: {result.error}")
    elif result.status == "incomplete":
        print(f"status: incomplete ({result.reason})")
    else:
        print(f"status: {result.status}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "recording",
        nargs="?",
        type=Path,
        default=RECORDINGS / "parallel_tool_calls.sse",
        help="recorded body to replay offline (default: %(default)s)",
    )
    parser.add_argument("--live", action="store_true", help="stream from a real endpoint")
    parser.add_argument("--model", default="gpt-4o-mini", help="model for --live")
    parser.add_argument("--prompt", default="Say hello in three languages.", help="for --live")
    parser.add_argument(
        "--timeout", type=float, default=600.0, help="the SDK's timeout for --live, in seconds"
    )
    parser.add_argument(
        "--max-retries", type=int, default=2, help="the SDK's retries for --live (%(default)s)"
    )
    args = parser.parse_args()

    if args.live:
        if not os.environ.get("OPENAI_API_KEY"):
            print("--live needs OPENAI_API_KEY in the environment", file=sys.stderr)
            return 2
        chunks = live_chunks(
            args.model, args.prompt, timeout=args.timeout, max_retries=args.max_retries
        )
    else:
        if not args.recording.is_file():
            parser.error(f"no such recording: {args.recording}")
        print(f"replaying {args.recording.name} as openai ChatCompletionChunk objects")
        chunks = recorded_chunks(args.recording)
    result = accumulate(chunks)
    summarize(result)
    return 0 if result.status == "complete" else 1


if __name__ == "__main__":
    sys.exit(main())

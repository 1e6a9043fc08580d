"""Capture llama.cpp's ``/v1/responses``, ``/v1/completions`` and ``/v1/messages`` answers.

Not a test (pytest collects only ``test_*.py``): run it by hand when the peer
changes, then review the diff::

    .venv/bin/python tests/llama_server/capture.py                 # everything
    .venv/bin/python tests/llama_server/capture.py completions     # one API
    .venv/bin/python tests/llama_server/capture.py responses_text  # one capture

It starts ``llama-server`` (built by ``setup.sh`` beside this file when the
binary or the model is missing) on a free loopback port, sends each request of
:data:`CAPTURES` to its API's path, and writes, for a capture named ``NAME``
(``responses_text``, ``completions_prompts``, ...):

- ``NAME.request.json``: the request body, exactly the bytes sent;
- ``NAME.sse`` (an event stream came back) or ``NAME.json`` (anything else: a
  ``stream: false`` answer, an HTTP error): the response body exactly as
  received (HTTP framing removed, nothing else);

and ``API_server.json`` for each API captured: the server's version and
arguments, which the opt-in live tests (``tests/live/``) reuse.

The scripted model is greedy, so the text, the calls and the usage are the
same on every run; the ids (``resp_``, ``msg_``, ``fc_``, ``call_``,
``chatcmpl-``), ``created``/``created_at``, ``system_fingerprint`` and
``timings`` are not, nor is the order in which two completions served in
parallel interleave.  ``--no-cache-prompt`` keeps ``cached_tokens`` at 0
whatever was asked before.

Environment (or the options of the same meaning): ``CHUNKWISE_LLAMA_SERVER``
(the binary), ``CHUNKWISE_LLAMA_MODEL`` (the scripted ``tiny.gguf``; default:
``tiny.gguf`` in the directory above ``build/``), ``LLAMA_PEER_DIR`` (where
``setup.sh`` builds; default ``llama/`` in the system temp directory).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

HERE = Path(__file__).resolve().parent
OUT = HERE.parent / "data" / "llama_cpp"

#: llama-cpp-python's sdist that setup.sh builds llama.cpp from.
LLAMA_CPP_PYTHON = "0.3.36"

#: 4 slots of 512 tokens.  --context-shift is what makes the mid-stream error
#: possible (see ``responses_error_mid_stream``); it changes nothing for the
#: requests that fit.  --no-cache-prompt: ``cached_tokens`` is 0 on every run.
SERVER_ARGS = ["-c", "2048", "-np", "4", "--alias", "tiny", "--context-shift", "--no-cache-prompt"]

#: The API -> its path on the server.
PATHS = {
    "responses": "/v1/responses",
    "completions": "/v1/completions",
    "messages": "/v1/messages",
}


class Capture(NamedTuple):
    """One request to send, and what its answer must show."""

    body: dict[str, Any]
    #: Byte strings the answer must hold; a change of the peer fails the capture.
    checks: tuple[bytes, ...]
    #: The HTTP status expected.
    status: int = 200


GET_WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Get the current weather for a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
}
TEXT = {"model": "tiny", "input": "Say hello.", "temperature": 0}
TOOL = {
    "model": "tiny",
    "input": "What is the weather in Zürich?",
    "tools": [GET_WEATHER],
    "temperature": 0,
}
#: Anthropic Messages: the same question and tool in that API's shapes.
MESSAGES_TEXT = {
    "model": "tiny",
    "max_tokens": 64,
    "messages": [{"role": "user", "content": "Say hello."}],
    "temperature": 0,
}
MESSAGES_TOOL = {
    **MESSAGES_TEXT,
    "messages": [{"role": "user", "content": "What is the weather in Zürich?"}],
    "tools": [
        {
            "name": "get_weather",
            "description": GET_WEATHER["description"],
            "input_schema": GET_WEATHER["parameters"],
        }
    ],
}
#: The model's bigrams run on from the prompt's last token: a prompt ending in
#: one of the sentence's tokens ("Say hello." ends in ".") gets only its rest.
PROMPT = {"model": "tiny", "prompt": "Say hi", "temperature": 0}
SENTENCE_END = "jalapeño 😀.".encode()
#: A streamed completion's chunk with the whole "😀" (4 byte tokens) as its text.
EMOJI_CHUNK = '"text":"😀"'.encode()

#: ``API_NAME`` -> the request.  The model answers the README's sentence (27
#: tokens, end token included) to any prompt and to Responses without tools,
#: get_weather({"city": "Zürich"}) (10 tokens) with the tool.
CAPTURES: dict[str, Capture] = {
    "responses_text": Capture({**TEXT, "stream": True}, (b'"status":"completed"', SENTENCE_END)),
    "responses_text_nonstream": Capture({**TEXT, "stream": False}, (b'"status":"completed"',)),
    # 18 output tokens stop between the two bytes of "ñ": the text ends in
    # "jalape" and the response still says completed.
    "responses_max_output_tokens": Capture(
        {**TEXT, "max_output_tokens": 18, "stream": True},
        (b'"status":"completed"', b'"output_tokens":18'),
    ),
    "responses_tool": Capture(
        {**TOOL, "stream": True}, (b'"name":"get_weather"', "Zürich".encode())
    ),
    "responses_tool_nonstream": Capture({**TOOL, "stream": False}, (b'"name":"get_weather"',)),
    # 6 output tokens stop inside the call: arguments '{"city": "', completed.
    "responses_tool_max_output_tokens": Capture(
        {**TOOL, "max_output_tokens": 6, "stream": True}, (b'"output_tokens":6',)
    ),
    # The only mid-stream error found that a request can cause: `n` (llama.cpp's
    # n_cmpl) makes two completions share the prompt, which fills the 512-token
    # slot but 12 tokens; when a slot is full, context shift refuses a shared
    # prompt and the stream ends in a bare `data: {"error": ...}` frame.  The
    # two completions arrive interleaved in one stream, each with its own
    # response.created.
    "responses_error_mid_stream": Capture(
        {"model": "tiny", "input": "Hi " * 246, "n": 2, "stream": True},
        (b'data: {"error":', b"context shift cannot be used for shared prompt"),
    ),
    "messages_text": Capture(
        {**MESSAGES_TEXT, "stream": True}, (b"event: message_stop", b'"stop_reason":"end_turn"')
    ),
    "messages_text_nonstream": Capture(
        {**MESSAGES_TEXT, "stream": False}, (b'"stop_reason":"end_turn"', SENTENCE_END)
    ),
    # 18 output tokens stop between the two bytes of "ñ", as for the other APIs.
    "messages_max_tokens": Capture(
        {**MESSAGES_TEXT, "max_tokens": 18, "stream": True}, (b'"stop_reason":"max_tokens"',)
    ),
    "messages_tool": Capture(
        {**MESSAGES_TOOL, "stream": True}, (b"input_json_delta", "Zürich".encode())
    ),
    # Each chunk carries the text of one token, llama.cpp holding incomplete
    # UTF-8 back; the last has no text, the finish_reason, usage and timings.
    "completions_text": Capture(
        {**PROMPT, "stream": True}, (b'"finish_reason":"stop"', EMOJI_CHUNK, b"data: [DONE]")
    ),
    "completions_text_nonstream": Capture(
        {**PROMPT, "stream": False}, (b'"finish_reason":"stop"', SENTENCE_END)
    ),
    # 18 tokens stop between the two bytes of "ñ".
    "completions_max_tokens": Capture(
        {**PROMPT, "max_tokens": 18, "stream": True},
        (b'"finish_reason":"length"', b'"completion_tokens":18'),
    ),
    # Two prompts: two choices (index 0 and 1) in one stream.
    "completions_prompts": Capture(
        {**PROMPT, "prompt": ["Say hi", "Say hi again"], "max_tokens": 4, "stream": True},
        (b"data: null", b'"index":1'),
    ),
    "completions_n": Capture({**PROMPT, "n": 2, "max_tokens": 4, "stream": True}, (b'"index":1',)),
    # 19 tokens end with the two byte tokens of "ñ": the first one's chunk has
    # no text but its logprobs.
    "completions_logprobs": Capture(
        {**PROMPT, "logprobs": 2, "max_tokens": 19, "stream": True},
        (b'"logprobs":{"content":[', '"text":"ñ"'.encode()),
    ),
    # Accepted and ignored (no prompt echoed; this llama.cpp's "echo" belongs
    # to its chat parser), as is "suffix": the same sentence comes back.
    "completions_echo": Capture({**PROMPT, "echo": True, "stream": True}, (EMOJI_CHUNK,)),
    "completions_suffix": Capture(
        {**PROMPT, "suffix": " Goodbye.", "stream": True}, (EMOJI_CHUNK,)
    ),
    # The one 400 found for /v1/completions: 1200 prompt tokens, 512 a slot.
    "completions_context_exceeded": Capture(
        {**PROMPT, "prompt": "Hi " * 600, "stream": True},
        (b"exceeds the available context size",),
        status=400,
    ),
    # As responses_error_mid_stream: 499 prompt tokens shared by two
    # completions fill the slot after 13 tokens; the stream ends in
    # `data: {"error": ...}` without [DONE].
    "completions_error_mid_stream": Capture(
        {**PROMPT, "prompt": "Hi " * 249 + "Hi", "n": 2, "stream": True},
        (b"context shift cannot be used for shared prompt",),
    ),
}


def peer_dir() -> Path:
    return Path(os.environ.get("LLAMA_PEER_DIR") or Path(tempfile.gettempdir()) / "llama")


def default_model(binary: Path) -> Path:
    """``tiny.gguf`` beside ``build/`` (setup.sh's layout: ROOT/build/bin/llama-server)."""
    return binary.resolve().parent.parent.parent / "tiny.gguf"


def find_peer(binary: str | None, model: str | None) -> tuple[Path, Path]:
    """The binary and the model, building them with setup.sh when the defaults are missing."""
    binary = binary or os.environ.get("CHUNKWISE_LLAMA_SERVER")
    model = model or os.environ.get("CHUNKWISE_LLAMA_MODEL")
    if binary is not None:
        found = Path(binary)
        if not found.is_file():
            sys.exit(f"no llama-server at {found}")
        found_model = Path(model) if model else default_model(found)
        if not found_model.is_file():
            sys.exit(f"no model at {found_model}: run {HERE / 'setup.sh'}")
        return found, found_model
    found = peer_dir() / "build" / "bin" / "llama-server"
    found_model = Path(model) if model else peer_dir() / "tiny.gguf"
    if not (found.is_file() and found_model.is_file()):
        print(f"building the peer with {HERE / 'setup.sh'} (about 10 minutes)", file=sys.stderr)
        out = subprocess.run(
            ["bash", str(HERE / "setup.sh")], check=True, stdout=subprocess.PIPE, text=True
        )
        found = Path(out.stdout.strip().splitlines()[-1])
    return found, found_model


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def server_version(binary: Path) -> str:
    out = subprocess.run(
        [str(binary), "--version"], check=False, capture_output=True, text=True, timeout=30
    )
    lines = [line for line in (out.stdout + out.stderr).splitlines() if "version" in line]
    return lines[0].strip() if lines else "unknown"


@contextmanager
def running_server(
    binary: Path, model: Path, args: list[str], log: Path
) -> Iterator[tuple[str, int]]:
    """Start llama-server on a free loopback port; yield (host, port) once /health answers."""
    port = free_port()
    command = [str(binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(port), *args]
    with log.open("wb") as log_file:
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT
        )
        try:
            deadline = time.monotonic() + 60
            while True:
                if process.poll() is not None:
                    raise RuntimeError(f"llama-server exited early; see {log}")
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                        break
                except (urllib.error.URLError, OSError):
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"llama-server is not healthy; see {log}") from None
                    time.sleep(0.1)
            yield "127.0.0.1", port
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def request_bytes(body: Mapping[str, Any]) -> bytes:
    """The request as sent and as stored: indented UTF-8 JSON and a final newline."""
    return (json.dumps(body, ensure_ascii=False, indent=2) + "\n").encode()


def post(host: str, port: int, path: str, body: bytes) -> tuple[int, str, bytes]:
    """POST ``body`` to ``path``; the status, the content type and the whole body as received."""
    connection = http.client.HTTPConnection(host, port, timeout=120)
    try:
        connection.request(
            "POST",
            path,
            body=body,
            headers={"Content-Type": "application/json", "Accept-Encoding": "identity"},
        )
        response = connection.getresponse()
        return response.status, response.getheader("Content-Type") or "", response.read()
    finally:
        connection.close()


def selected(names: list[str]) -> list[str]:
    """The captures named: a capture's name, or an API's name for all of its captures."""
    if not names:
        return list(CAPTURES)
    chosen: list[str] = []
    for name in names:
        if name in PATHS:
            chosen += [c for c in CAPTURES if c.startswith(f"{name}_") and c not in chosen]
        elif name in CAPTURES:
            chosen += [name] if name not in chosen else []
        else:
            raise KeyError(name)
    return chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--llama-server", help="the binary (default: $CHUNKWISE_LLAMA_SERVER)")
    parser.add_argument("--model", help="the scripted tiny.gguf")
    parser.add_argument("--out", type=Path, default=OUT, help=f"default: {OUT}")
    parser.add_argument("names", nargs="*", help="captures or APIs to capture (default: all)")
    options = parser.parse_args(argv)
    try:
        names = selected(options.names)
    except KeyError as unknown:
        parser.error(f"unknown capture {unknown}; known: {list(PATHS)}, {list(CAPTURES)}")

    binary, model = find_peer(options.llama_server, options.model)
    out: Path = options.out
    out.mkdir(parents=True, exist_ok=True)
    log = Path(tempfile.gettempdir()) / "chunkwise-llama-capture.log"
    failed = False
    with running_server(binary, model, SERVER_ARGS, log) as (host, port):
        for name in names:
            capture = CAPTURES[name]
            api = name.split("_", 1)[0]
            sent = request_bytes(capture.body)
            status, content_type, body = post(host, port, PATHS[api], sent)
            suffix = ".sse" if content_type.startswith("text/event-stream") else ".json"
            for stale in (".sse", ".json"):
                (out / f"{name}{stale}").unlink(missing_ok=True)
            (out / f"{name}.request.json").write_bytes(sent)
            (out / f"{name}{suffix}").write_bytes(body)
            missing = [m for m in capture.checks if m not in body]
            problem = (
                f"expected HTTP {capture.status}"
                if status != capture.status
                else f"missing {missing}"
                if missing
                else ""
            )
            failed = failed or bool(problem)
            print(f"{name}: {status} {content_type}, {len(body)} bytes {problem}".rstrip())
    info = {
        "llama_cpp_python": LLAMA_CPP_PYTHON,
        "llama_server_version": server_version(binary),
        "llama_server_args": SERVER_ARGS,
        "model": "tiny.gguf from tests/llama_server/make_model.py (scripted)",
    }
    for api in sorted({name.split("_", 1)[0] for name in names}):
        (out / f"{api}_server.json").write_text(json.dumps(info, indent=2) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Seed inputs for the harnesses: the hard cases found so far, as harness inputs.

Each seed is a whole ``TestOneInput`` input: the prefix bytes choose the
parameters (see each harness), the rest is the response body.  The test suite
runs every seed (tests/test_fuzz.py); to start a long run from them::

    .venv/bin/python fuzz/_seeds.py fuzz/corpus      # writes corpus/sse/*, corpus/parser/*
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))


from _bytes import MAX_BODY

# Bodies worth keeping, by name, parsed with the default max_event_size: JSON
# the parser must turn into InvalidChunk or accept (nesting past the recursion
# limit, integers past the digit limit, non-finite numbers), and an id the
# end of the stream cuts off.
_NEST = 1500  # past the default recursion limit of 1000, within MAX_BODY
BODIES: dict[str, bytes] = {
    "deep-array": b"data: " + b"[" * _NEST + b"]" * _NEST + b"\n\n",
    "deep-object": b"data: " + b'{"a":' * _NEST + b"1" + b"}" * _NEST + b"\n\n",
    "deep-in-a-delta": (
        b'data: {"choices":[{"index":0,"delta":{"content":"hi","tool_calls":{"x":'
        + b"[" * _NEST
        + b"]" * _NEST
        + b"}}}]}\n\n"
    ),
    "deep-error-event": b"event: error\ndata: " + b"[" * _NEST + b"]" * _NEST + b"\n\n",
    "huge-integer": b'data: {"choices":[],"usage":{"total_tokens":' + b"7" * 5000 + b"}}\n\n",
    "float-overflow": b'data: {"choices":[],"usage":{"cost":1e999,"x":-1e999}}\n\n',
    "nan": b'data: {"choices":[{"index":0,"delta":{"content":"a"},"logprobs":NaN}]}\n\n',
    "infinity": b'data: {"choices":[],"usage":{"cost":-Infinity}}\n\n',
    "id-cut-off": b"id: 1\ndata: a\n\nid: 2\ndata: b",
}


def cut_off_line(limit: int) -> bytes:
    """A line whose value fills ``limit``; the U+FFFD flushed at end of stream is one more."""
    return b"data: " + b"x" * limit + b"\xc2"


def _size(body: bytes) -> bytes:
    assert len(body) < MAX_BODY, len(body)
    return len(body).to_bytes(2, "big")


def sse_seeds() -> dict[str, bytes]:
    """Inputs for fuzz_sse.py (limit: index into its LIMITS; legacy error field on)."""
    seeds = {name: b"\x00\x06\x01" + _size(body) + body for name, body in BODIES.items()}
    body = cut_off_line(100)
    seeds["cut-off-line-over-the-limit-at-end"] = b"\x00\x04\x01" + _size(body) + body
    return seeds


def parser_seeds() -> dict[str, bytes]:
    """Inputs for fuzz_parser.py (raw mode; limit: index into its LIMITS)."""
    seeds = {name: b"\x01\x00\x02" + _size(body) + body for name, body in BODIES.items()}
    body = cut_off_line(64)
    seeds["cut-off-line-over-the-limit-at-end"] = b"\x01\x00\x00" + _size(body) + body
    return seeds


def main() -> None:
    corpus = Path(sys.argv[1] if len(sys.argv) > 1 else "fuzz/corpus")
    for harness, seeds in (("sse", sse_seeds()), ("parser", parser_seeds())):
        (corpus / harness).mkdir(parents=True, exist_ok=True)
        for name, data in seeds.items():
            (corpus / harness / f"seed-{name}").write_bytes(data)


if __name__ == "__main__":
    main()

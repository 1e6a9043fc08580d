"""What the root needs before any command is imported: the commands, their helps, the statuses.

Kept light (the standard library only: no trio, no chunkwise), so that
``chunkwise --help`` and a Ctrl-C during start-up cost no heavy import: the
root imports one command's module, the one named on the command line, and
only then (see :mod:`chunkwise_tools.cli`).
"""

from __future__ import annotations

__all__ = [
    "COMMANDS",
    "EXIT_BROKEN_PIPE",
    "EXIT_INTERRUPTED",
    "EXIT_NOT_PROBED",
    "EXIT_OK",
    "EXIT_STREAM",
    "EXIT_USAGE",
    "PROG",
]

PROG = "chunkwise"

EXIT_OK = 0
EXIT_STREAM = 1
EXIT_USAGE = 2
EXIT_NOT_PROBED = 3
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141

#: Each command, in the order ``chunkwise --help`` lists them: its one-line help.
COMMANDS = {
    "inspect": "parse a recorded stream and show what a client reconstructs",
    "chat": "stream a chat completion from an OpenAI-compatible endpoint",
    "record": "save a raw streamed response (status, headers, body) for a bug report",
    "probe": "check an endpoint's streaming behaviour before deployment",
    "serve": "run a local OpenAI-compatible server that streams scripted replies",
    "bench": "load and latency (TTFT, TPOT, inter-token gaps) against an endpoint",
    "demo": "see chunkwise stream from a local server (no network, no API key)",
}

"""What the two chunk APIs share: chat completions and legacy completions, sans-IO.

Both stream ``choices`` per ``index`` in JSON chunks (``chat.completion.chunk``
and ``text_completion``), so both keep per-choice state the same way.  This
module is the core both API packages (:mod:`chunkwise._chat`,
:mod:`chunkwise._completions`) build on; API packages never import each
other.

Rules kept here:

1. ``logprobs`` merge by extending their lists, copying a merged dict first
   when a snapshot holds it (copy on write: a result never changes).
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["LogprobsOwner", "merge_logprobs"]


class LogprobsOwner(Protocol):
    """A choice that keeps merged ``logprobs``: a chat choice or a legacy completion's."""

    logprobs: dict[str, Any] | None
    logprobs_shared: bool


def merge_logprobs(state: LogprobsOwner, logprobs: Any) -> None:
    """Rule 1: extend the choice's ``logprobs`` with a chunk's (either API's shape)."""
    if type(logprobs) is not dict:
        return
    merged = state.logprobs
    if merged is None:
        merged = state.logprobs = {}
    elif state.logprobs_shared:
        # A snapshot holds this dict and its lists, and a snapshot never
        # changes: extend copies instead (copy on write, so streams nobody
        # snapshots mid-way pay nothing).
        merged = state.logprobs = {
            key: list(value) if type(value) is list else value for key, value in merged.items()
        }
    state.logprobs_shared = False
    for key, value in logprobs.items():
        if type(value) is list:
            current = merged.get(key)
            if type(current) is list:
                current.extend(value)
            else:
                merged[key] = list(value)
        elif value is not None or key not in merged:
            merged[key] = value

"""Answers that fail on purpose, before or after their first output (``--fail-*``).

Theory of operation
-------------------
A client that sends an answer again when it fails before its first output
(chunkwise's ``Retries(before_output=True)``) must do so for every way an
answer can fail there, and never once output was sent.  :class:`Faults` makes
a share of streamed answers fail in one of those ways, at a chosen side of
the first output event, so either can be tried against a real server.

Rules
-----
1. Each streamed answer (chat, completions, Messages, a Responses stream that
   is not a background one) draws once from the server's ``random.Random(seed)``:
   with probability ``before_output`` it fails before its first output event,
   else with probability ``after_output`` just after it, else it is whole.
   The way is drawn from ``ways``.  The same seed and the same requests, in
   the same order, fail the same way.
2. The first output event is the first whose parse (the API's own
   :class:`~chunkwise.chat.Parser`, ...) gives an output event; an answer
   without one fails at its end.
3. The ways (:data:`FAULT_WAYS`): ``cut`` closes the connection there without
   ending the body; ``end`` ends the body there, cleanly; ``server-error``,
   ``overloaded`` and ``rate-limit`` send the API's in-stream error there
   (Responses: an ``error`` event, then ``response.failed``; Messages: an
   ``error`` event of Anthropic's type) and end;
   ``idle`` sends nothing more for :data:`IDLE_SILENCE` seconds, then closes
   (the client's idle timeout ends it first).
4. A failed answer says so in its head, ``x-chunkwise-fault: <side> <way>``
   (``before-output cut``), so a client can count what it was sent.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs

from chunkwise import chat, completions, messages, responses
from chunkwise.testing import ScriptedResponse

from ._messages_wire import messages_error_bytes
from ._response_wire import response_event_bytes

__all__ = ["FAULT_HEADER", "FAULT_WAYS", "IDLE_SILENCE", "FaultPlan", "Faults"]

#: Rule 3: each way's in-stream error, or None for the ways without one.
FAULT_WAYS: dict[str, dict[str, Any] | None] = {
    "cut": None,
    "end": None,
    "server-error": {
        "message": "The server had an error while processing your request.",
        "type": "server_error",
    },
    "overloaded": {"message": "The engine is currently overloaded.", "type": "overloaded_error"},
    "rate-limit": {
        "message": "Rate limit reached for requests.",
        "type": "requests",
        "code": "rate_limit_exceeded",
    },
    "idle": None,
}
#: Rule 3: how long an ``idle`` answer is silent before its connection closes.
IDLE_SILENCE = 3600.0
#: Rule 4: the response header naming the fault.
FAULT_HEADER = "x-chunkwise-fault"


def _check_rate(_: Any, attribute: attrs.Attribute[Any], value: float) -> None:
    if not 0 <= value <= 1:  # also refuses NaN
        raise ValueError(f"{attribute.name} must be a share between 0 and 1, not {value}")


def _ways(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


def _check_ways(_: Any, __: Any, value: tuple[str, ...]) -> None:
    unknown = [way for way in value if way not in FAULT_WAYS]
    if unknown or not value:
        raise ValueError(f"fault ways must be some of {', '.join(FAULT_WAYS)}, not {value}")


@attrs.frozen(kw_only=True)
class FaultPlan:
    """How one answer fails: its side (``before-output``, ``after-output``) and way."""

    side: str
    way: str

    def response(
        self, api: str, events: Sequence[bytes], whole: ScriptedResponse
    ) -> ScriptedResponse:
        """``whole``, the answer ``events`` played in full, failing this way (rules 2 to 4)."""
        at = min(_first_output(api, events) + (self.side == "after-output"), len(events))
        sent = b"".join(events[:at])
        headers = (*whole.headers, (FAULT_HEADER, f"{self.side} {self.way}"))
        if self.way == "cut":
            return attrs.evolve(whole, headers=headers, disconnect_after=len(sent))
        error = FAULT_WAYS[self.way]
        if error is not None:
            sent += _error_bytes(api, error)
        # A shorter body: written at once, as the pacing's writes no longer fit it.
        return attrs.evolve(
            whole,
            headers=headers,
            body=sent,
            write_sizes=None,
            times=None,
            disconnect_after=None,
            # Close-delimited, so the silence after it is not the body's end (rule 3).
            framing="close" if self.way == "idle" else whole.framing,
        )


@attrs.frozen(kw_only=True)
class Faults:
    """Which share of streamed answers fails, where and how (rule 1).

    Attributes:
        before_output: the share failing before their first output event.
        after_output: the share failing just after it.
        ways: the ways drawn from (:data:`FAULT_WAYS`), all by default.
        seed: the seed of the draws.
    """

    before_output: float = attrs.field(default=0.0, validator=_check_rate)
    after_output: float = attrs.field(default=0.0, validator=_check_rate)
    ways: tuple[str, ...] = attrs.field(
        default=tuple(FAULT_WAYS), converter=_ways, validator=_check_ways
    )
    seed: int = 0

    def __attrs_post_init__(self) -> None:
        if self.before_output + self.after_output > 1:
            raise ValueError("before_output and after_output must add up to at most 1")

    def draw(self, rand: random.Random) -> FaultPlan | None:
        """Rule 1: how the next streamed answer fails, or None (``rand``: the server's)."""
        share = rand.random()
        way = rand.choice(self.ways)  # drawn always, so one answer moves no other
        if share < self.before_output:
            return FaultPlan(side="before-output", way=way)
        if share < self.before_output + self.after_output:
            return FaultPlan(side="after-output", way=way)
        return None


_PARSERS: dict[str, Callable[[], Any]] = {
    "chat": chat.Parser,
    "completions": completions.Parser,
    "responses": responses.Parser,
    "messages": messages.Parser,
}


def _first_output(api: str, events: Sequence[bytes]) -> int:
    """Rule 2: the index of the first event that gives output, or ``len(events)``."""
    parser = _PARSERS[api]()
    for index, event in enumerate(events):
        if any(parsed.is_output for parsed in parser.feed(event)):
            return index
    return len(events)


def _error_bytes(api: str, error: dict[str, Any]) -> bytes:
    """The API's in-stream error: chat's and completions' ``data: {"error"}``, Responses' events."""
    if api == "messages":
        return messages_error_bytes(error)
    if api != "responses":
        return response_event_bytes({"error": error})
    failed = {"type": "response.failed", "response": {"status": "failed", "error": error}}
    return response_event_bytes({"type": "error", "error": error}) + response_event_bytes(failed)

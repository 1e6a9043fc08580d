"""When each write of a streamed answer goes out: recorded and scripted pacing.

Theory of operation
-------------------
``chunkwise serve`` normally writes an answer as fast as it can (or with a fixed
``--delay``).  A *pacing* turns an answer's events into a schedule instead:
write sizes and, for each write, the time it is due, counted from the moment
the server began answering.  The engine plays the schedule
(:class:`~._responses.ScriptedResponse`'s ``times``), so there is one
implementation of writing and sleeping.  Two pacings exist:

* :class:`RecordedPacing`: a real server's timing, from the sidecar
  ``FILE.times.json`` that ``chunkwise record`` writes beside ``FILE``
  (:class:`RecordedTimes`, the *times format*, below).  Each recorded read
  becomes one write, due when it arrived at the recording client.
* :class:`TokenPacing`: a server whose timing is known: the first output
  event due ``first_token`` seconds in, each later one ``per_token`` seconds
  after the one before (optionally jittered), so a load tester can be checked
  against the truth.

The times format (version 1)
----------------------------
A JSON object::

    {"format": "chunkwise-times", "version": 1,
     "clock": "seconds since the request was sent",
     "response_head": 0.182, "body_bytes": 5120, "complete": true,
     "reads": [[0, 0.203], [312, 0.231], ...]}

``reads`` holds one ``[offset, seconds]`` pair per read of the body, in order:
``offset`` is the position of the read's first byte in the recorded body (after
transfer decoding: the bytes after the head in ``FILE``), ``seconds`` the read's
stamp (when its bytes arrived where the transport can tell, else when the read
returned: :mod:`chunkwise._core.timings`), since the request was sent.  A read's
bytes run to the next read's offset (the last one's to ``body_bytes``).
``complete`` is false when the recording stopped before the body ended
(interrupted, connection lost).
Readers refuse another ``format`` or a newer ``version``, and ignore fields
they do not know, so later versions may add some.

Rules
-----
1. A schedule's times never go back, and a write is never sent before its
   time; being late (a busy machine) does not push later writes back, because
   each time is a deadline from the same start.
2. In a token pacing an *output event* is one carrying model output: a chat
   chunk with content, reasoning, refusal, tool-call or legacy function-call
   arguments, audio data or its transcript, a Responses ``*.delta`` event.
   Events before the first output event go out with it, events after the
   last one with the last, and every other event with the
   output event that follows it, so each write holds exactly one output event
   (one token): the first at ``first_token``, the ``k``-th at ``first_token +
   k * per_token``.
3. Jitter moves each output event's time by a uniform amount in
   ``[-jitter, +jitter]``, from a generator seeded per request, then rule 1
   clamps it (never before 0, never before the previous write).
4. A recorded pacing must match its body: the sidecar's ``body_bytes`` is the
   replayed body's length, or loading it is refused with a
   :class:`TimesFormatError`.
5. A paced answer says how well it was kept.  The engine measures how late
   the writer ran for each timed write
   (:attr:`~._responses.ResponseWriter.lateness`), and the server logs a line
   per paced answer (:func:`pacing_line`): how late its first write was, and
   how many of its gaps were more than :data:`LATE_GAP` longer than scripted.
   A gap's excess is the difference of its two writes' lateness, so a server
   that falls behind once and stays behind counts one late gap, as a client
   sees it.  This is every write of every stream, where a client's sample of
   streams sees only its own; a client's timings can be no more exact than
   these.
"""

from __future__ import annotations

import functools
import itertools
import json
import random
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import attrs

from ._response_scenarios import ResponseScenario
from ._scenarios import Scenario

__all__ = [
    "LATE_GAP",
    "TIMES_FORMAT",
    "TIMES_SUFFIX",
    "TIMES_VERSION",
    "Pacing",
    "RecordedPacing",
    "RecordedTimes",
    "Schedule",
    "TimesFormatError",
    "TokenPacing",
    "check_pacing",
    "is_output_event",
    "paced_scenario",
    "paced_tokens",
    "pacing_line",
    "schedule",
]

TIMES_FORMAT = "chunkwise-times"
TIMES_VERSION = 1
#: The sidecar of recording ``FILE`` is ``FILE + TIMES_SUFFIX``.
TIMES_SUFFIX = ".times.json"
#: A paced gap is late when it is more than this much longer than scripted
#: (rule 5): the error a client on a small machine is asked to stay within.
LATE_GAP = 0.002


class TimesFormatError(ValueError):
    """A sidecar is not a times document this version can read (the message says why)."""


@attrs.frozen(kw_only=True)
class RecordedTimes:
    """A recording's timing: the times format, version 1 (see the module).

    Attributes:
        response_head: seconds from the request sent to the response head, or
            ``None`` when unknown.
        body_bytes: the recorded body's length.
        reads: ``(offset, seconds)`` per read of the body, in order.
        complete: whether the body ended (rather than the recording stopping).
    """

    response_head: float | None
    body_bytes: int
    reads: tuple[tuple[int, float], ...]
    complete: bool = True

    def to_json(self) -> dict[str, Any]:
        """The JSON document (``json.dumps`` it; :meth:`from_json` reads it back)."""
        return {
            "format": TIMES_FORMAT,
            "version": TIMES_VERSION,
            "clock": "seconds since the request was sent",
            "response_head": _rounded(self.response_head),
            "body_bytes": self.body_bytes,
            "complete": self.complete,
            "reads": [[offset, _rounded(seconds)] for offset, seconds in self.reads],
        }

    @classmethod
    def from_json(cls, document: Any) -> RecordedTimes:
        """Read a times document (raises :class:`TimesFormatError`, saying what is wrong)."""
        if not isinstance(document, Mapping):
            raise TimesFormatError("a times document is a JSON object")
        if document.get("format") != TIMES_FORMAT:
            raise TimesFormatError(f'"format" is not "{TIMES_FORMAT}"')
        version = document.get("version")
        if type(version) is not int or version < 1:
            raise TimesFormatError('"version" is not a positive integer')
        if version > TIMES_VERSION:
            raise TimesFormatError(
                f"version {version} is newer than this chunkwise reads ({TIMES_VERSION})"
            )
        body_bytes = document.get("body_bytes")
        if type(body_bytes) is not int or body_bytes < 0:
            raise TimesFormatError('"body_bytes" is not a non-negative integer')
        head = document.get("response_head")
        if head is not None and not _seconds(head):
            raise TimesFormatError('"response_head" is not a number of seconds')
        complete = document.get("complete", True)
        if not isinstance(complete, bool):
            raise TimesFormatError('"complete" is not true or false')
        raw = document.get("reads")
        if not isinstance(raw, list):
            raise TimesFormatError('"reads" is not a list')
        reads: list[tuple[int, float]] = []
        for index, read in enumerate(raw):
            where = f"reads[{index}]"
            if not (isinstance(read, list) and len(read) == 2):
                raise TimesFormatError(f"{where} is not an [offset, seconds] pair")
            offset, seconds = read
            if type(offset) is not int or not _seconds(seconds):
                raise TimesFormatError(f"{where} is not an [offset, seconds] pair")
            if reads:
                previous_offset, previous_seconds = reads[-1]
                if offset <= previous_offset:
                    raise TimesFormatError(f"{where}: offsets must increase")
                if seconds < previous_seconds:
                    raise TimesFormatError(f"{where}: times must not go back")
            elif offset != 0:
                raise TimesFormatError("reads[0]: the first read starts at offset 0")
            if offset >= body_bytes:
                raise TimesFormatError(f"{where}: offset {offset} is past body_bytes")
            reads.append((offset, float(seconds)))
        return cls(
            response_head=None if head is None else float(head),
            body_bytes=body_bytes,
            reads=tuple(reads),
            complete=complete,
        )

    @classmethod
    def loads(cls, data: bytes) -> RecordedTimes:
        """Parse a sidecar's bytes (raises :class:`TimesFormatError`)."""
        try:
            document = json.loads(data.decode("utf-8"))
        except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
            raise TimesFormatError(f"not JSON: {exc}") from None
        return cls.from_json(document)

    def dumps(self) -> str:
        """The sidecar's text: one read per line, so a diff or a grep can read it."""
        document = self.to_json()
        reads = document.pop("reads")
        head = json.dumps(document)[:-1]
        lines = ",\n  ".join(json.dumps(read) for read in reads)
        return f'{head}, "reads": [\n  {lines}\n]}}\n' if reads else f'{head}, "reads": []}}\n'

    def pieces(self) -> tuple[tuple[int, float], ...]:
        """``(size, seconds)`` per read."""
        ends = [offset for offset, _ in self.reads[1:]] + [self.body_bytes]
        return tuple(
            (end - offset, seconds) for (offset, seconds), end in zip(self.reads, ends, strict=True)
        )


def _seconds(value: Any) -> bool:
    return type(value) in (int, float) and value >= 0


def _rounded(value: float | None) -> float | None:
    # Microseconds: finer than any network, and the files stay readable.
    return None if value is None else round(value, 6)


@attrs.frozen(kw_only=True)
class RecordedPacing:
    """Replay each recorded read as one write, at its recorded time (rule 4)."""

    times: RecordedTimes


@attrs.frozen(kw_only=True)
class TokenPacing:
    """A known timing: the first token after ``first_token``, then one per ``per_token``.

    Attributes:
        first_token: seconds from the request to the first output event.
        per_token: seconds between output events.
        tokens: when set, every answer's text is this many tokens (one delta
            each), and its usage says so; ``None`` keeps the scenario's text.
        jitter: each output event's time moves by up to this many seconds
            either way (rule 3).
        seed: seeds the jitter (with the request's number), so a run repeats.
    """

    first_token: float = attrs.field(default=0.0, validator=attrs.validators.ge(0))
    per_token: float = attrs.field(default=0.0, validator=attrs.validators.ge(0))
    tokens: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.ge(1))
    )
    jitter: float = attrs.field(default=0.0, validator=attrs.validators.ge(0))
    seed: int = 0


Pacing = RecordedPacing | TokenPacing


@attrs.frozen(kw_only=True)
class Schedule:
    """A paced answer: write sizes, each write's time, and the head's (seconds from the start)."""

    head: float
    sizes: tuple[int, ...]
    times: tuple[float, ...]


#: The words of a paced answer's tokens, cycled.
_WORDS = ("The ", "quick ", "brown ", "fox ", "jumps ", "over ", "the ", "lazy ", "dog. ")


def paced_tokens(count: int) -> tuple[str, ...]:
    """``count`` text pieces, one token each, for a token pacing's answers."""
    return tuple(_WORDS[i % len(_WORDS)] for i in range(count))


# Pure in its bytes, and a scenario's events repeat from request to request: the
# cache spares each paced answer a JSON parse per event, half of preparing it.
@functools.lru_cache(maxsize=4096)
def is_output_event(event: bytes) -> bool:
    """Whether one server-sent event carries model output (rule 2)."""
    for line in event.splitlines():
        if not line.startswith(b"data:"):
            continue
        try:
            payload = json.loads(line[5:])
        except ValueError:
            return False
        if not isinstance(payload, dict):
            return False
        kind = payload.get("type")
        if isinstance(kind, str):
            return kind.endswith(".delta") and bool(payload.get("delta"))
        return any(_chat_output(choice) for choice in payload.get("choices") or ())
    return False


def _chat_output(choice: Any) -> bool:
    delta = choice.get("delta") if isinstance(choice, dict) else None
    if not isinstance(delta, dict):
        return False
    if delta.get("content") or delta.get("reasoning_content") or delta.get("refusal"):
        return True
    audio, legacy = delta.get("audio"), delta.get("function_call")
    if isinstance(audio, dict) and (audio.get("data") or audio.get("transcript")):
        return True
    if isinstance(legacy, dict) and legacy.get("arguments"):
        return True
    return any(
        isinstance(call, dict) and (call.get("function") or {}).get("arguments")
        for call in delta.get("tool_calls") or ()
    )


def schedule(pacing: Pacing, events: Sequence[bytes], *, request: str = "") -> Schedule:
    """When each write of an answer made of ``events`` goes out under ``pacing``.

    ``request`` (the request's ID) seeds a token pacing's jitter.
    """
    if isinstance(pacing, RecordedPacing):
        pieces = pacing.times.pieces()
        return Schedule(
            head=pacing.times.response_head or 0.0,
            sizes=tuple(size for size, _ in pieces),
            times=tuple(seconds for _, seconds in pieces),
        )
    sizes = _token_writes(tuple(events))
    times = _due_times(pacing.first_token, pacing.per_token, len(sizes))
    if pacing.jitter:
        rng = random.Random(f"{pacing.seed}:{request}")
        jittered: list[float] = []
        for due in times:
            due += rng.uniform(-pacing.jitter, pacing.jitter)
            jittered.append(max(due, jittered[-1] if jittered else 0.0))
        times = tuple(jittered)
    return Schedule(head=0.0, sizes=sizes, times=times)


# The two halves of a token schedule are pure; a server schedules the same
# answer for request after request (scenario_events caches the events, so the
# key's bytes hash once), and a wave of starts should cost no more than needed.
@functools.lru_cache(maxsize=16)
def _token_writes(events: tuple[bytes, ...]) -> tuple[int, ...]:
    """Rule 2: the size of each write, holding one output event and what precedes it."""
    writes: list[int] = []
    pending = 0
    for event in events:
        pending += len(event)
        if is_output_event(event):
            writes.append(pending)
            pending = 0
    if pending:
        if writes:
            writes[-1] += pending
        else:
            writes.append(pending)
    return tuple(writes)


@functools.lru_cache(maxsize=16)
def _due_times(first_token: float, per_token: float, count: int) -> tuple[float, ...]:
    """Rule 2's times, before jitter: ascending and never negative, as rule 1 asks."""
    return tuple(first_token + k * per_token for k in range(count))


def pacing_line(late: Sequence[float]) -> str:
    """The request log's line for a paced answer whose writes were ``late`` (rule 5).

    ``late`` is how late each write went out, as
    :attr:`~._responses.ResponseWriter.lateness` gives it.
    """
    gaps = [after - before for before, after in itertools.pairwise(late)]
    over = sum(gap > LATE_GAP for gap in gaps)
    longest = max(gaps, default=0.0)
    # An answer stopped before its first write (a cancel in the wait) has none to time.
    first = f", the first {late[0] * 1000:.1f} ms late" if late else ""
    return (
        f"paced answer: {len(late)} writes{first}; "
        f"{over} of {len(gaps)} gaps more than {LATE_GAP * 1000:g} ms longer than "
        f"scripted, the longest by {max(longest, 0.0) * 1000:.1f} ms"
    )


def check_pacing(pacing: Pacing | None, replay: bytes | None) -> None:
    """Refuse a recorded pacing without its body, or for another body (rule 4)."""
    if not isinstance(pacing, RecordedPacing):
        return
    if replay is None:
        raise ValueError("a recorded pacing replays a recorded body: give replay too")
    if len(replay) != pacing.times.body_bytes:
        raise TimesFormatError(
            f"the timings are of a {pacing.times.body_bytes}-byte body, "
            f"the replayed body has {len(replay)} bytes"
        )


_Scenario = TypeVar("_Scenario", Scenario, ResponseScenario)


def paced_scenario(scenario: _Scenario, pacing: Pacing | None) -> _Scenario:
    """``scenario`` with a token pacing's answer length: its text ``tokens`` deltas long."""
    if not isinstance(pacing, TokenPacing) or pacing.tokens is None or not scenario.content:
        return scenario
    content = paced_tokens(pacing.tokens)
    if isinstance(scenario, Scenario):
        usage = {**scenario.usage, "completion_tokens": pacing.tokens}
        return attrs.evolve(scenario, content=content, reasoning=(), usage=usage)
    return attrs.evolve(
        scenario, content=content, reasoning=(), output_tokens=pacing.tokens, reasoning_tokens=0
    )

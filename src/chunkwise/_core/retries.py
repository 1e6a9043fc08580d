"""When a request is tried again, and after how long: pure rules, no I/O.

Rules (openai-python's, httpcore's and Go's behaviour, with their known bugs fixed)
--------------------------------------------------------------------------------
1. A request is retried before the first byte of a 2xx body reaches the
   parser, and (rule 7) after it only while no output has arrived; once
   output has, a failure is the stream's outcome, never a second request.
2. Retried: connection errors (refused, reset, closed before the response head),
   connect timeouts, and HTTP 408, 409, 429 and every 5xx.  Not retried: every other
   status, a proxy's 407 and an HTTPS proxy's refusal of CONNECT.
3. ``x-should-retry: true`` / ``false`` from the server overrides rule 2's status
   rule (OpenAI sends it).
4. The wait is the server's when it says one: ``retry-after-ms``, else
   ``Retry-After`` (delta-seconds or an HTTP date), when it is in
   ``(0, max_retry_after]``.  A server asking for longer is not waited for: the
   error is raised at once, carrying its ``retry_after``.
5. Otherwise the wait is ``min(initial_delay * 2**n, max_delay)`` for the n-th
   retry (n from 0), shortened at random by up to 25% so that clients that failed
   together do not come back together.
6. At most ``max_retries`` retries in all, before the response and before the
   output alike; the wait is a trio sleep, so the caller's cancel scope or
   deadline cuts it.
7. ``before_output`` (on by default): a 2xx stream that fails before its first
   output event is sent again, when it failed in a transient way
   (:func:`transient`): its connection lost, its idle or stall timeout, a body
   that ended before it was over, or a server's error whose ``type`` or
   ``code`` is in :data:`TRANSIENT_ERRORS` (waiting its ``retry_after`` as
   rule 4 waits a header's).  A stream that was answered -- complete, or
   stopped by the server for a lasting reason (an invalid request, a
   context too long, a quota, a content filter) -- is never sent again.
"""

from __future__ import annotations

import email.utils
import random
import re
import time
from collections.abc import Callable, Mapping

import attrs

from .checks import non_negative_int, non_negative_seconds
from .errors import (
    ChunkwiseError,
    ConnectionLost,
    ConnectTimeout,
    HTTPStatusError,
    IdleTimeout,
    ProxyError,
    StallTimeout,
    StreamError,
    TransportError,
)

__all__ = [
    "RETRYABLE_STATUSES",
    "TRANSIENT_ERRORS",
    "Retries",
    "backoff",
    "retry_after",
    "retry_delay",
    "retryable_status",
    "transient",
    "with_attempts",
]

#: Rule 2's statuses, beside every 5xx.
RETRYABLE_STATUSES = frozenset({408, 409, 429})
#: Rule 7: a server's in-stream error worth asking again for, by its ``type``
#: or ``code`` (OpenAI's, Anthropic's, vLLM's and the relays' spellings).  Any
#: other (``invalid_request_error``, ``context_length_exceeded``,
#: ``insufficient_quota``, ``content_filter``...) is the answer.
TRANSIENT_ERRORS = frozenset(
    {
        "server_error",
        "internal_error",
        "overloaded_error",
        "overloaded",
        "service_unavailable",
        "rate_limit_exceeded",
        "rate_limit_error",
    }
)

_DELTA_SECONDS_RE = re.compile(r"\d+(?:\.\d+)?")


@attrs.frozen
class Retries:
    """How often and how patiently a request is tried again (see the module's rules).

    ``Retries(max_retries=0)`` turns retrying off; ``before_output=False``
    keeps it to failures before the response (rule 7).
    """

    max_retries: int = attrs.field(default=2, validator=non_negative_int)
    initial_delay: float = attrs.field(default=0.5, validator=non_negative_seconds)
    max_delay: float = attrs.field(default=8.0, validator=non_negative_seconds)
    max_retry_after: float = attrs.field(default=60.0, validator=non_negative_seconds)
    before_output: bool = attrs.field(default=True, validator=attrs.validators.instance_of(bool))


def retryable_status(status: int, headers: Mapping[str, str]) -> bool:
    """Rules 2 and 3: whether a response with ``status`` may be retried."""
    if status == 407:
        return False  # the proxy wants credentials: asking again changes nothing
    verdict = headers.get("x-should-retry", "").strip().lower()
    if verdict == "true":
        return True
    if verdict == "false":
        return False
    return status in RETRYABLE_STATUSES or 500 <= status <= 599


def retry_after(headers: Mapping[str, str], now: Callable[[], float] = time.time) -> float | None:
    """Seconds the server asks to wait: ``retry-after-ms``, else ``Retry-After``.

    ``Retry-After`` is either delta-seconds or an HTTP date (RFC 9110 10.2.3); a
    date in the past means 0.  Anything absent or unparseable means ``None``.
    """
    milliseconds = headers.get("retry-after-ms", "").strip()
    if _DELTA_SECONDS_RE.fullmatch(milliseconds):
        return float(milliseconds) / 1000
    text = headers.get("retry-after", "").strip()
    if not text:
        return None
    if _DELTA_SECONDS_RE.fullmatch(text):
        return float(text)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # "-0000": email.utils's way of saying "no zone given"
        return None
    return max(0.0, when.timestamp() - now())


def backoff(
    retries: Retries, retry_number: int, rand: Callable[[], float] = random.random
) -> float:
    """Rule 5: the wait before retry ``retry_number`` (0 for the first retry)."""
    # Capped before the power can overflow a float.
    exponent = min(retry_number, 64)
    delay = min(retries.initial_delay * 2.0**exponent, retries.max_delay)
    return delay * (1 - 0.25 * rand())


def retry_delay(
    failure: BaseException,
    retries: Retries,
    retry_number: int,
    rand: Callable[[], float] = random.random,
    *,
    before_output: bool = False,
) -> float | None:
    """Seconds to wait before retry ``retry_number`` (from 0), or ``None``: raise ``failure``.

    Applies rules 2 to 6 to a failure before any byte of a 2xx body reached
    the parser, and rule 7 to one after (``before_output``), before any output
    (the caller asks only then).
    """
    if retry_number >= retries.max_retries or (before_output and not retries.before_output):
        return None
    if isinstance(failure, (HTTPStatusError, StreamError)):
        if isinstance(failure, StreamError):
            if not transient(failure):
                return None
        elif not retryable_status(failure.status_code, failure.headers or {}):
            return None
        asked = failure.retry_after
        if asked is not None and asked > 0:
            return asked if asked <= retries.max_retry_after else None
        return backoff(retries, retry_number, rand)
    if before_output and isinstance(failure, (ConnectionLost, IdleTimeout, StallTimeout)):
        return backoff(retries, retry_number, rand)  # rule 7: the server said nothing yet
    if isinstance(failure, (ProxyError, IdleTimeout)):
        return None  # a refusal, or a server that took the request and went quiet
    if isinstance(failure, (ConnectTimeout, ConnectionLost)):
        return backoff(retries, retry_number, rand)
    if isinstance(failure, TransportError) and isinstance(failure.__cause__, OSError):
        return backoff(retries, retry_number, rand)  # TCP: refused, reset, unreachable
    return None


def transient(error: StreamError) -> bool:
    """Rule 7: whether a server's in-stream error is worth asking again for."""
    return error.type in TRANSIENT_ERRORS or error.code in TRANSIENT_ERRORS


def with_attempts(exc: ChunkwiseError, attempts: int) -> ChunkwiseError:
    """``exc``, saying how many attempts were made when there were several."""
    if attempts > 1 and exc.args and isinstance(exc.args[0], str):
        exc.args = (f"{exc.args[0]} (after {attempts} attempts)", *exc.args[1:])
        exc.attempts = attempts  # type: ignore[attr-defined]
    return exc

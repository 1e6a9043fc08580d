"""The retry rules of ``chunkwise._core.retries`` as tables: which statuses, how long to wait."""

from __future__ import annotations

import email.utils

import pytest

from chunkwise import (
    ChunkwiseError,
    ConnectionLost,
    IdleTimeout,
    RemoteProtocolError,
    StallTimeout,
    StreamError,
)
from chunkwise._core.payloads import parse_error_payload
from chunkwise._core.retries import (
    TRANSIENT_ERRORS,
    Retries,
    backoff,
    retry_after,
    retry_delay,
    retryable_status,
)

NOW = 1_700_000_000.0


@pytest.mark.parametrize(
    ("status", "retried"),
    [
        *[(status, True) for status in (408, 409, 429, 500, 502, 503, 504, 599)],
        *[(status, False) for status in (400, 401, 403, 404, 405, 407, 410, 413, 422, 451, 499)],
    ],
)
def test_which_statuses_are_retried(status: int, retried: bool) -> None:
    assert retryable_status(status, {}) is retried


@pytest.mark.parametrize("status", [400, 404, 429, 500, 503])
@pytest.mark.parametrize(
    ("header", "retried"), [("true", True), ("false", False), (" TRUE ", True)]
)
def test_x_should_retry_overrides_the_status(status: int, header: str, retried: bool) -> None:
    assert retryable_status(status, {"x-should-retry": header}) is retried


def test_x_should_retry_with_another_value_leaves_the_status_rule() -> None:
    assert retryable_status(503, {"x-should-retry": "maybe"}) is True
    assert retryable_status(400, {"x-should-retry": "1"}) is False


def test_a_proxy_407_is_never_retried() -> None:
    assert retryable_status(407, {"x-should-retry": "true"}) is False


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({}, None),
        ({"retry-after": "3"}, 3.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after": "0"}, 0.0),
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),  # the precise one wins
        ({"retry-after-ms": "soon", "retry-after": "9"}, 9.0),
        ({"retry-after-ms": "-5", "retry-after": "2"}, 2.0),
        ({"retry-after-ms": "inf"}, None),
        ({"retry-after": "-1"}, None),
        ({"retry-after": "soon"}, None),
        ({"retry-after": "nan"}, None),
        ({"retry-after": email.utils.formatdate(NOW + 30, usegmt=True)}, 30.0),
        ({"retry-after": email.utils.formatdate(NOW - 30, usegmt=True)}, 0.0),  # past: now
        ({"retry-after": "Thu, 01 Dec 2094 16:00:00"}, None),  # no zone: not an HTTP date
    ],
)
def test_retry_after(headers: dict[str, str], seconds: float | None) -> None:
    assert retry_after(headers, now=lambda: NOW) == seconds


@pytest.mark.parametrize(
    ("retry_number", "full"),
    [(0, 0.5), (1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (5, 8.0), (500, 8.0)],
)
def test_backoff_doubles_up_to_the_cap_and_jitter_only_shortens(
    retry_number: int, full: float
) -> None:
    retries = Retries()
    assert backoff(retries, retry_number, rand=lambda: 0.0) == full
    assert backoff(retries, retry_number, rand=lambda: 0.999999) == pytest.approx(full * 0.75)


def test_backoff_with_zero_initial_delay_is_zero() -> None:
    assert backoff(Retries(initial_delay=0.0), 3, rand=lambda: 0.5) == 0.0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_retries": -1},
        {"max_retries": 1.5},
        {"max_retries": True},
        {"initial_delay": -0.1},
        {"max_delay": float("inf")},
        {"max_retry_after": float("nan")},
        {"initial_delay": "1"},
    ],
)
def test_bad_retry_settings_are_refused(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        Retries(**kwargs)  # type: ignore[arg-type]


def test_defaults_are_the_documented_ones() -> None:
    assert Retries() == Retries(
        max_retries=2, initial_delay=0.5, max_delay=8.0, max_retry_after=60.0
    )


def _error(**fields: str) -> StreamError:
    return parse_error_payload({"error": {"message": "m", **fields}})


@pytest.mark.parametrize(
    ("failure", "before_output", "retried"),
    [
        # Rule 7: after the head, before any output.
        (ConnectionLost("cut"), True, True),
        (IdleTimeout("h", 1, 5.0), True, True),
        (StallTimeout("h", 1, 5.0), True, True),
        *[(_error(type=kind), True, True) for kind in sorted(TRANSIENT_ERRORS)],
        *[(_error(code=kind), True, True) for kind in sorted(TRANSIENT_ERRORS)],
        (_error(type="invalid_request_error"), True, False),
        (_error(code="context_length_exceeded"), True, False),
        (_error(type="insufficient_quota"), True, False),
        (_error(code="content_filter"), True, False),
        (_error(), True, False),
        (RemoteProtocolError("bad chunk size"), True, False),
        # Rules 2-3: before the response, an idle timeout is a server that took the request.
        (IdleTimeout("h", 1, 5.0), False, False),
        (ConnectionLost("cut"), False, True),
    ],
    ids=repr,
)
def test_which_failures_are_asked_again(
    failure: ChunkwiseError, before_output: bool, retried: bool
) -> None:
    delay = retry_delay(failure, Retries(), 0, rand=lambda: 0.0, before_output=before_output)
    assert (delay is not None) is retried
    assert retry_delay(failure, Retries(max_retries=0), 0, before_output=before_output) is None


def test_before_output_false_keeps_retries_to_failures_before_the_response() -> None:
    off = Retries(before_output=False)
    assert retry_delay(ConnectionLost("cut"), off, 0, before_output=True) is None
    assert retry_delay(ConnectionLost("cut"), off, 0) is not None
    assert retry_delay(_error(type="server_error"), off, 0, before_output=True) is None


@pytest.mark.parametrize(
    ("fields", "seconds"),
    [
        ({"retry_after": 3}, 3.0),
        ({"retry_after": 0.5}, 0.5),
        ({"retry_after_ms": 250}, 0.25),
        ({"retry_after": 2, "retry_after_ms": 9000}, 2.0),
        ({"retry_after": -1}, None),
        ({"retry_after": "3"}, None),
        ({"retry_after": True}, None),
        ({}, None),
    ],
)
def test_an_in_stream_error_s_retry_after(fields: dict[str, object], seconds: float | None) -> None:
    error = parse_error_payload(
        {"error": {"message": "m", "code": "rate_limit_exceeded", **fields}}
    )
    assert error.retry_after == seconds
    expected = seconds if seconds else backoff(Retries(), 0, rand=lambda: 0.0)
    assert retry_delay(error, Retries(), 0, rand=lambda: 0.0, before_output=True) == expected

"""What ``chunkwise serve`` and :func:`~chunkwise.testing.open_chat_server` are told to play.

:class:`ServerOptions` is the whole configuration of a
:class:`~chunkwise_tools.server._chat_server.ChatServer`: which scenario, how the
bytes are written (sizes, delays, pacing), which faults to inject (statuses,
disconnects, cuts), and how long background responses are kept.  Every field
is checked when the options are made, so a server never starts with settings
it cannot play.
"""

from __future__ import annotations

from typing import Any

import attrs

from ._background import DEFAULT_RESUME_WINDOW, DEFAULT_RETENTION
from ._faults import Faults
from ._pacing import Pacing, check_pacing
from ._response_scenarios import DEFAULT_RESPONSE_SCENARIO, RESPONSE_SCENARIOS
from ._scenarios import DEFAULT_SCENARIO, SCENARIOS

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "ServerOptions"]

DEFAULT_HOST = "127.0.0.1"
#: The port ``chunkwise serve`` listens on unless told otherwise (vLLM's default too).
DEFAULT_PORT = 8000


def _positive_or_none(_: Any, attribute: attrs.Attribute[Any], value: int | None) -> None:
    if value is not None and value < 1:
        raise ValueError(f"{attribute.name} must be at least 1")


def _check_scenario(_: Any, __: Any, value: str) -> None:
    if value not in SCENARIOS:
        raise ValueError(f"unknown scenario {value!r}; choose from {', '.join(SCENARIOS)}")


def _check_response_scenario(_: Any, __: Any, value: str | None) -> None:
    if value is not None and value not in RESPONSE_SCENARIOS:
        raise ValueError(
            f"unknown Responses scenario {value!r}; choose from {', '.join(RESPONSE_SCENARIOS)}"
        )


def _check_status(_: Any, __: Any, value: int | None) -> None:
    if value is not None and not 400 <= value <= 599:
        raise ValueError(f"status must be an HTTP error status (400-599), not {value}")


def _check_disconnect(_: Any, attribute: attrs.Attribute[Any], value: int | None) -> None:
    if value is not None and value < 0:
        raise ValueError(f"{attribute.name} must not be negative")


def _check_seconds(_: Any, attribute: attrs.Attribute[Any], value: float | None) -> None:
    if value is not None and not value >= 0:  # also refuses NaN
        raise ValueError(f"{attribute.name} must be a non-negative number of seconds")


@attrs.frozen(kw_only=True)
class ServerOptions:
    """How the server answers every chat and Responses request.

    Attributes:
        scenario: the scenario used when a chat request's ``model`` names none.
        response_scenario: the Responses scenario used when a Responses
            request's ``model`` names none; ``None`` takes ``scenario`` when
            that names a Responses scenario too (``text``, ``tools``,
            ``reasoning``, ``length``, ``error``, ``demo``,
            ``structured-invalid`` say the same things in both APIs), else
            ``text``.
        replay: an SSE body sent for every chat and Responses request instead
            of a scenario.
        write_size: bytes per write (each write is one HTTP chunk); ``None``
            writes each event at once.  This, ``delay`` and
            ``disconnect_after`` shape streamed answers only; ``stream:
            false`` documents are sent whole.
        delay: seconds to wait between events.
        disconnect_after: close the connection after this many body bytes,
            without finishing the response.
        status: answer every chat and Responses request with this HTTP error
            status and an OpenAI-shaped error body (429 and 503 also get
            ``Retry-After: 1``).
        api_key: when set, requests without ``Authorization: Bearer <api_key>``
            get a 401.
        cut_after_events: close each streaming connection after this many
            events, without finishing the response (``0``: right after the
            head).  With ``disconnect_after`` and ``cut_seed``, the earliest
            cut wins; each counts from the connection's first body byte, so a
            resumed background stream is cut again (see :mod:`._background`).
        cut_seed: cut each streaming connection at random: after a random
            number of whole events and a random number of the next one's
            bytes (or not at all, when the number drawn is all of them); the
            same seed cuts the same way, connection after connection.
        retention: seconds a stored response stays retrievable after it ended
            (``GET /v1/responses/{id}``); then 404, as OpenAI's.
        resume_window: a background response at least this many seconds old
            can no longer be streamed again (400, as OpenAI refuses one older
            than five minutes); ``0`` refuses every re-stream, ``None`` none.
        pacing: when set, streamed answers are paced by it instead of
            ``write_size`` and ``delay`` (:mod:`._pacing`): a recording's
            timing (with ``replay``, whose length it must match) or a known
            time to first token and per token.
        faults: when set, a share of streamed answers fails before or after
            its first output (:mod:`._faults`).
    """

    scenario: str = attrs.field(default=DEFAULT_SCENARIO, validator=_check_scenario)
    response_scenario: str | None = attrs.field(default=None, validator=_check_response_scenario)
    replay: bytes | None = None
    write_size: int | None = attrs.field(default=None, validator=_positive_or_none)
    delay: float = attrs.field(default=0.0, validator=_check_seconds)
    disconnect_after: int | None = attrs.field(default=None, validator=_check_disconnect)
    status: int | None = attrs.field(default=None, validator=_check_status)
    api_key: str | None = attrs.field(default=None, repr=False)
    cut_after_events: int | None = attrs.field(default=None, validator=_check_disconnect)
    cut_seed: int | None = None
    retention: float = attrs.field(default=DEFAULT_RETENTION, validator=_check_seconds)
    resume_window: float | None = attrs.field(
        default=DEFAULT_RESUME_WINDOW, validator=_check_seconds
    )
    pacing: Pacing | None = None
    faults: Faults | None = None

    def __attrs_post_init__(self) -> None:
        check_pacing(self.pacing, self.replay)

    @property
    def default_response_scenario(self) -> str:
        """The Responses scenario for a model that names none (see ``response_scenario``)."""
        if self.response_scenario is not None:
            return self.response_scenario
        if self.scenario in RESPONSE_SCENARIOS:
            return self.scenario
        return DEFAULT_RESPONSE_SCENARIO

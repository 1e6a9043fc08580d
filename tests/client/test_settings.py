"""Every public setting, in one table: what it accepts, and how it refuses the rest.

All of them are checked by ``chunkwise._core.checks``, so they refuse alike: the
exception type each has always raised (:class:`~chunkwise.InvalidEndpoint` for an
endpoint's, :class:`TypeError` where a wrong type always was one), and a message
that names the setting and shows the value, ``"{name} must be ..., not {value!r}"``.
The settings that may hold a secret (the key, a header value, the base URL, the
proxy URL) are named but never shown.

The usual mistakes are in every row that can make them: a bool where a number is
wanted, a negative, NaN, infinity where it is not allowed, the wrong type.
"""

from __future__ import annotations

import math
import re
import ssl
from collections.abc import Callable
from typing import Any

import attrs
import pytest

import chunkwise
from chunkwise import Client, Endpoint, InvalidEndpoint, PartialJSON, Retries, SSEDecoder, Timeouts
from chunkwise._fanout import Broadcaster
from chunkwise.testing import ScriptedResponse

URL = "http://127.0.0.1:1/v1"
ENDPOINT = Endpoint(URL)
NAN = float("nan")
INF = math.inf


@attrs.frozen
class Setting:
    """One public setting: how to give it a value, which values it takes, which it refuses."""

    name: str  # as the message names it
    give: Callable[[Any], object]
    valid: tuple[Any, ...]
    invalid: tuple[tuple[Any, type[Exception]], ...]
    secret: bool = False  # the message names the setting but never shows the value

    def __str__(self) -> str:
        return self.name


def _timeout(field: str) -> Setting:
    return Setting(
        f"{field} timeout",
        lambda value: Timeouts(**{field: value}),
        valid=(0.5, 10, INF, None),
        invalid=tuple((bad, InvalidEndpoint) for bad in (0, -1, -0.5, NAN, -INF, True, "5", [1])),
    )


def _count(name: str, give: Callable[[Any], object], low: int) -> Setting:
    """An int >= ``low``, refused with ValueError whatever the mistake (Retries, pool)."""
    return Setting(
        name,
        give,
        valid=(low, low + 1, 1000),
        invalid=tuple((bad, ValueError) for bad in (low - 1, -5, 1.5, True, "3", NAN, INF, None)),
    )


def _seconds(name: str, give: Callable[[Any], object]) -> Setting:
    """A finite number of seconds >= 0, refused with ValueError (Retries, pool)."""
    return Setting(
        name,
        give,
        valid=(0, 0.5, 3, 86400.0),
        invalid=tuple((bad, ValueError) for bad in (-0.1, -1, INF, NAN, True, "1", None)),
    )


def _size(name: str, give: Callable[[Any], object]) -> Setting:
    """An int >= 1: a wrong value is a ValueError, a wrong type a TypeError (sans-IO)."""
    return Setting(
        name,
        give,
        valid=(1, 1024),
        invalid=(
            (0, ValueError),
            (-1, ValueError),
            (True, TypeError),
            (1.5, TypeError),
            (INF, TypeError),
            (NAN, TypeError),
            ("5", TypeError),
            (None, TypeError),
        ),
    )


def _retries(field: str) -> Callable[[Any], object]:
    return lambda value: Retries(**{field: value})


def _subscribe(**kwargs: Any) -> object:
    return Broadcaster().subscribe(**kwargs)


SETTINGS = (
    # -- chunkwise.Timeouts and chunkwise.Endpoint: InvalidEndpoint, always
    *(_timeout(field) for field in ("connect", "idle", "error_body", "stall")),
    Setting(
        "ssl_context",
        lambda value: Endpoint(URL, ssl_context=value),
        valid=(None, ssl.create_default_context()),
        invalid=((object(), InvalidEndpoint), ("ctx", InvalidEndpoint), (True, InvalidEndpoint)),
    ),
    Setting(
        "timeouts",
        lambda value: Endpoint(URL, timeouts=value),
        valid=(Timeouts(), Timeouts(idle=None)),
        invalid=((5, InvalidEndpoint), (None, InvalidEndpoint), (Retries(), InvalidEndpoint)),
    ),
    Setting(
        "retries",
        lambda value: Endpoint(URL, retries=value),
        valid=(Retries(), Retries(max_retries=0)),
        invalid=((2, InvalidEndpoint), (None, InvalidEndpoint), (Timeouts(), InvalidEndpoint)),
    ),
    Setting(
        "trust_env",
        lambda value: Endpoint(URL, trust_env=value),
        valid=(True, False),
        invalid=((1, InvalidEndpoint), ("no", InvalidEndpoint), (None, InvalidEndpoint)),
    ),
    Setting(
        "base URL",
        Endpoint,
        valid=(URL, "https://api.openai.com/v1/"),
        invalid=(
            (b"https://x.example", InvalidEndpoint),
            ("https://user:pw@x.example", InvalidEndpoint),
            (None, InvalidEndpoint),
        ),
        secret=True,
    ),
    Setting(
        "api_key",
        lambda value: Endpoint(URL, api_key=value),
        valid=(None, "", "sk-abc"),
        invalid=(
            (7, InvalidEndpoint),
            ("sk-a\nb", InvalidEndpoint),
            (" sk-abc", InvalidEndpoint),
            ("sk-é", InvalidEndpoint),
        ),
        secret=True,
    ),
    Setting(
        "header 'X-Key'",
        lambda value: Endpoint(URL, headers={"X-Key": value}),
        valid=("", "secret-1"),
        invalid=((7, InvalidEndpoint), ("a\r\nb", InvalidEndpoint)),
        secret=True,
    ),
    Setting(
        "proxy",
        lambda value: Endpoint(URL, proxy=value),
        valid=(None, "http://user:pw@proxy.example:3128"),
        invalid=((7, InvalidEndpoint), ("ftp://user:pw@proxy.example", InvalidEndpoint)),
        secret=True,
    ),
    # -- chunkwise.Retries: ValueError, always
    _count("max_retries", lambda value: Retries(max_retries=value), 0),
    *(
        _seconds(field, _retries(field))
        for field in ("initial_delay", "max_delay", "max_retry_after")
    ),
    # -- chunkwise.Client: its pool's settings raise ValueError, the endpoint a TypeError
    Setting(
        "endpoint",
        Client,
        valid=(ENDPOINT,),
        invalid=((URL, TypeError), (None, TypeError), (Timeouts(), TypeError)),
    ),
    _count("max_connections", lambda value: Client(ENDPOINT, max_connections=value), 1),
    _count("max_idle_connections", lambda value: Client(ENDPOINT, max_idle_connections=value), 0),
    _seconds("idle_expiry", lambda value: Client(ENDPOINT, idle_expiry=value)),
    # -- stream.subscribe(): as trio's channels, a wrong type is a TypeError
    Setting(
        "buffer_size",
        lambda value: _subscribe(buffer_size=value),
        valid=(0, 1, 5, INF),
        invalid=(
            (-1, ValueError),
            (1.5, TypeError),
            ("3", TypeError),
            (True, TypeError),
            (NAN, TypeError),
            (-INF, TypeError),
            (None, TypeError),
        ),
    ),
    Setting(
        "a lossy subscriber's buffer_size",
        lambda value: _subscribe(buffer_size=value, lossy=True),
        valid=(1, 5),
        invalid=((0, ValueError), (INF, ValueError)),
    ),
    Setting(
        "family",
        lambda value: _subscribe(family=value),
        valid=(None, "lifecycle", "choice", "tool_call"),
        invalid=(("choices", ValueError), (7, ValueError), ([], ValueError)),
    ),
    Setting(
        "lossy",
        lambda value: _subscribe(lossy=value),
        valid=(False,),
        invalid=((1, TypeError), ("yes", TypeError), (None, TypeError)),
    ),
    Setting(
        "batched",
        lambda value: _subscribe(batched=value),
        valid=(True, False),
        invalid=((0, TypeError), ("yes", TypeError)),
    ),
    # -- chunkwise.responses.attach()
    Setting(
        "response_id",
        lambda value: chunkwise.responses.attach(ENDPOINT, value),
        valid=("resp_1",),
        invalid=(("", TypeError), (7, TypeError), (None, TypeError)),
    ),
    Setting(
        "starting_after",
        lambda value: chunkwise.responses.attach(ENDPOINT, "resp_1", value),
        valid=(None, 0, 41),
        invalid=tuple((bad, ValueError) for bad in (-1, 1.5, True, "3", NAN, INF)),
    ),
    # -- the sans-IO parsers: a wrong value is a ValueError, a wrong type a TypeError
    _size("max_event_size", lambda value: SSEDecoder(max_event_size=value)),
    Setting(
        "max_event_size",
        lambda value: chunkwise.chat.Parser(max_event_size=value),
        valid=(1, 1024),
        invalid=((0, ValueError), (True, TypeError), (2.5, TypeError)),
    ),
    Setting(
        "last_event_id",
        lambda value: SSEDecoder(last_event_id=value),
        valid=("", "resp_1:41"),
        invalid=(
            (7, TypeError),
            (None, TypeError),
            (b"1", TypeError),
            ("a\nb", ValueError),
            ("a\x00b", ValueError),
            ("\r", ValueError),
        ),
    ),
    Setting(
        "legacy_error_field",
        lambda value: SSEDecoder(legacy_error_field=value),
        valid=(True, False),
        invalid=((1, TypeError), (None, TypeError)),
    ),
    Setting(
        "strings",
        PartialJSON,
        valid=("partial", "whole"),
        invalid=(("some", ValueError), (None, ValueError), (1, ValueError), ([], ValueError)),
    ),
    _size("max_depth", lambda value: PartialJSON(max_depth=value)),
    _size("max_size", lambda value: PartialJSON(max_size=value)),
    # -- chunkwise.testing
    Setting(
        "framing",
        lambda value: ScriptedResponse(framing=value),
        valid=("chunked", "content-length", "close"),
        invalid=(("gzip", ValueError), (None, ValueError)),
    ),
    Setting(
        "write_sizes",
        lambda value: ScriptedResponse(write_sizes=value),
        valid=(None, 1, (1, 2)),
        invalid=tuple((bad, ValueError) for bad in (0, -1, True, (), (1, 0), (1, True))),
    ),
    Setting(
        "times",
        lambda value: ScriptedResponse(times=value),
        valid=(None, (), (0.0, 0.0, 1.5)),
        invalid=(((-1.0,), ValueError), ((2.0, 1.0), ValueError), ((NAN,), ValueError)),
    ),
)


def _label(setting: Setting, value: object) -> str:
    # Without the object's address: xdist's workers must collect the same ids.
    return f"{setting}={re.sub(r' at 0x[0-9a-f]+', '', repr(value))}"


VALID = [
    pytest.param(setting, value, id=_label(setting, value))
    for setting in SETTINGS
    for value in setting.valid
]
INVALID = [
    pytest.param(setting, value, error, id=_label(setting, value))
    for setting in SETTINGS
    for value, error in setting.invalid
]


@pytest.mark.parametrize(("setting", "value"), VALID)
def test_a_valid_setting_is_taken(setting: Setting, value: Any) -> None:
    setting.give(value)


@pytest.mark.parametrize(("setting", "value", "error"), INVALID)
def test_an_invalid_setting_is_refused_by_name_and_value(
    setting: Setting, value: Any, error: type[Exception]
) -> None:
    with pytest.raises(Exception) as info:  # noqa: PT011 - its exact type is checked below
        setting.give(value)
    assert type(info.value) is error
    message = str(info.value)
    assert setting.name in message
    if setting.secret:
        # A credential may be in the value, or it may be one: never shown.
        assert not isinstance(value, str) or value.strip() not in message
    else:
        assert message.endswith(f", not {value!r}")


def test_the_table_holds_every_mistake_somewhere() -> None:
    """A bool, a negative, NaN, inf and a wrong type each meet some counting setting."""
    refused = [value for setting in SETTINGS for value, _ in setting.invalid]
    assert any(value is True for value in refused)
    assert any(type(value) is int and value < 0 for value in refused)
    assert any(isinstance(value, float) and math.isnan(value) for value in refused)
    assert any(value == INF for value in refused)
    assert any(isinstance(value, str) for value in refused)

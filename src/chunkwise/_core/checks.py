"""attrs validators for settings: counts and durations, each refused with its name.

Shared by :class:`~chunkwise.Retries` and the client's pool settings, so every
setting says the same thing about the same mistake.
"""

from __future__ import annotations

import math
from typing import Any

import attrs

__all__ = ["non_negative_int", "non_negative_seconds", "positive_int"]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def positive_int(_: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not _is_int(value) or value < 1:
        raise ValueError(f"{attribute.name} must be an int >= 1, not {value!r}")


def non_negative_int(_: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not _is_int(value) or value < 0:
        raise ValueError(f"{attribute.name} must be an int >= 0, not {value!r}")


def non_negative_seconds(_: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
        raise ValueError(f"{attribute.name} must be a finite number of seconds >= 0, not {value!r}")

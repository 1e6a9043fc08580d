"""Settings validators: every public setting is checked here, and refused in one voice.

Theory of operation: a setting is checked once, where it is given (an attrs
class's field, or a constructor's or method's argument), so a mistake raises at
the line that made it, never later inside a nursery.  A :class:`Check` is one
kind of setting (a count, a duration, a type, a choice): it is an attrs
validator as it stands, and ``check.check(name, value)`` checks a plain
argument.  Each caller chooses the exception, because the library's error types
are part of its API: endpoint settings raise :class:`~chunkwise.InvalidEndpoint`,
older argument checks a :class:`TypeError` for a wrong type.

Rules:

1. One message shape: ``"{name} must be {expected}, not {value!r}"``.  The
   message names the setting and shows the value (shortened by :mod:`reprlib`);
   secrets (the API key, header values, a proxy URL) never come here, their
   checks live beside the code that keeps them secret.
2. ``bool`` is never an int nor a number of seconds: ``True`` is not a count.
3. NaN is never a number; ``math.inf`` only where the check says so (a
   timeout, a buffer size).
4. The type is checked before the value, so a comparison never raises a
   :class:`TypeError` of its own; ``wrong_type`` (default: the ``error``)
   is what a wrong type raises.
"""

from __future__ import annotations

import math
import reprlib
from collections.abc import Callable
from typing import Any

import attrs

__all__ = [
    "Check",
    "instance_of",
    "non_empty_str",
    "non_negative_int",
    "non_negative_seconds",
    "one_of",
    "positive_int",
    "positive_seconds",
    "size_or_inf",
]

_repr = reprlib.Repr()
_repr.maxstring = 80  # a long string is shown by its ends, never whole
_repr.maxother = 100


def _anything(_: Any) -> bool:
    return True


@attrs.frozen
class Check:
    """One kind of setting: what it accepts, how a refusal reads, what it raises."""

    expected: str  # completes "{name} must be ...", e.g. "an int >= 1"
    type_ok: Callable[[Any], bool]  # rule 4: asked first
    value_ok: Callable[[Any], bool] = _anything  # for a value of an accepted type
    error: type[Exception] = ValueError
    wrong_type: type[Exception] | None = None  # None: error

    def __call__(self, _: object, attribute: attrs.Attribute[Any], value: Any) -> None:
        """The attrs validator: the field's name is the setting's."""
        self.check(attribute.name, value)

    def check(self, name: str, value: Any) -> None:
        """Refuse ``value`` for the setting ``name`` unless this check accepts it."""
        if not self.type_ok(value):
            raise (self.wrong_type or self.error)(self.message(name, value))
        if not self.value_ok(value):
            raise self.error(self.message(name, value))

    def accepts(self, value: Any) -> bool:
        """Whether :meth:`check` takes ``value`` (to build a check of a sequence)."""
        return self.type_ok(value) and self.value_ok(value)

    def message(self, name: str, value: Any) -> str:
        """Rule 1's message."""
        return f"{name} must be {self.expected}, not {_repr.repr(value)}"

    def raising(
        self, error: type[Exception], *, wrong_type: type[Exception] | None = None
    ) -> Check:
        """This check, raising ``error`` (and ``wrong_type`` for a wrong type)."""
        return attrs.evolve(self, error=error, wrong_type=wrong_type)

    def or_none(self) -> Check:
        """This check, accepting ``None`` too."""
        type_ok, value_ok = self.type_ok, self.value_ok
        return attrs.evolve(
            self,
            expected=f"{self.expected} or None",
            type_ok=lambda value: value is None or type_ok(value),
            value_ok=lambda value: value is None or value_ok(value),
        )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)  # rule 2


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)  # rule 2


#: A count of at least one: connections, bytes, nesting levels.
positive_int = Check("an int >= 1", _is_int, lambda value: value >= 1)
#: A count that may be zero: retries, idle connections, a resumption point.
non_negative_int = Check("an int >= 0", _is_int, lambda value: value >= 0)
#: A delay or a lifetime: finite, may be zero (rule 3: not NaN, not inf).
non_negative_seconds = Check(
    "a finite number of seconds >= 0", _is_number, lambda value: 0 <= value < math.inf
)
#: A time limit: more than zero, ``math.inf`` allowed (no limit); not NaN.
positive_seconds = Check("a number of seconds > 0", _is_number, lambda value: value > 0)
#: A buffer's size: a count that may be zero, or ``math.inf`` (unbounded).
size_or_inf = Check(
    "an int >= 0 or math.inf",
    lambda value: _is_int(value) or (type(value) is float and value == math.inf),
    lambda value: value >= 0,
)
#: A name that cannot be empty (an id).
non_empty_str = Check("a non-empty str", lambda value: type(value) is str and value != "")


def instance_of(kind: type, expected: str) -> Check:
    """An object of ``kind`` (``bool`` means exactly ``True`` or ``False``).

    ``expected`` is how the message names it, article included:
    ``"a chunkwise.Timeouts"``.
    """
    return Check(expected, lambda value: isinstance(value, kind))


def one_of(*choices: object) -> Check:
    """One of a few values, compared with ``==`` (a :class:`str` setting's spellings)."""
    allowed = frozenset(choices)
    shown = ", ".join(repr(choice) for choice in choices)
    return Check(f"one of {shown}", lambda value: _hashable(value) and value in allowed)


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True

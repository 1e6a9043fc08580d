"""Comparing JSON values bit for bit, and the growth rules of live JSON snapshots."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def same_json(a: Any, b: Any) -> bool:
    """``a == b`` for JSON values, bit for bit: types, float signs and bits, key order.

    Mappings compare with dicts and tuples with lists (a snapshot with a
    plain value).
    """
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return list(a) == list(b) and all(same_json(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(map(same_json, a, b))
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return bool(a.hex() == b.hex())
    return bool(a == b)


def grows(old: Any, new: Any) -> bool:
    """``new`` is ``old`` grown by the rules of chunkwise.PartialJSON snapshots.

    Keys only added (in order), arrays only extended, strings only appended to,
    anything else unchanged.  (A snapshot of None, no value yet, grows into
    anything: check that before calling.)
    """
    if isinstance(old, Mapping):
        return (
            isinstance(new, Mapping)
            and list(new)[: len(old)] == list(old)
            and all(grows(old[k], new[k]) for k in old)
        )
    if isinstance(old, tuple):
        return (
            isinstance(new, tuple)
            and len(new) >= len(old)
            and all(map(grows, old, new[: len(old)]))
        )
    if isinstance(old, str):
        return isinstance(new, str) and new.startswith(old)
    return same_json(old, new)


def as_snapshot(value: Any) -> Any:
    """A plain JSON value as a snapshot holds it: lists as tuples (for :func:`grows`)."""
    if isinstance(value, Mapping):
        return {key: as_snapshot(item) for key, item in value.items()}
    if isinstance(value, list):
        return tuple(as_snapshot(item) for item in value)
    return value

"""Patches: how a live JSON value changes, and how a consumer mirrors it.

:class:`~chunkwise.PartialJSON` describes each change of its snapshot as a
:class:`Patch`; :func:`apply_patches` replays them on a plain mirror (dicts,
lists, strings) that the consumer owns, e.g. the model behind a UI.  The
snapshots themselves are read-only (:class:`ReadOnlyDict` and tuples);
:func:`thaw` makes a plain copy of one.  Standard library and attrs only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

import attrs

__all__ = ["Patch", "PathItem", "ReadOnlyDict", "apply_patches", "freeze", "thaw"]

#: One step of a :attr:`Patch.path`: an object key or an array index.
PathItem = str | int


class ReadOnlyDict(dict[str, Any]):
    """A JSON object in a snapshot: a dict that refuses to change.

    A dict, so it prints, compares and ``json.dumps`` as one; unlike
    :class:`types.MappingProxyType` it also copies and pickles (results are
    copied and pickled whole).  Every mutating method raises :class:`TypeError`.
    """

    __slots__ = ()

    def _read_only(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("a live JSON snapshot is read-only (chunkwise.apply_patches builds a copy)")

    __setitem__ = __delitem__ = __ior__ = _read_only
    clear = pop = popitem = setdefault = update = _read_only

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuilt from a plain dict: pickle would otherwise set items one by one.
        return (type(self), (dict(self),))

    def __copy__(self) -> ReadOnlyDict:
        return self  # immutable: a copy is itself

    def __deepcopy__(self, memo: Any) -> ReadOnlyDict:
        return self  # the values are immutable too (tuples, strings, read-only dicts)


@attrs.frozen
class Patch:
    """One change from a snapshot to the next.

    Attributes:
        op: ``"add"``: a new key, a new array element, or the root
            (``path == ()``); ``value`` is a complete scalar, a string's
            first text (``""`` in ``strings="partial"`` mode) or an empty
            ``{}`` / ``[]``.  ``"append"``: ``value`` is text added to the
            string at ``path``.  ``"replace"``: a duplicate key's later value
            (complete, read-only) replaces the earlier one, as
            :func:`json.loads` decides.
        path: Keys (``str``) and array indices (``int``) from the root.
    """

    op: Literal["add", "append", "replace"]
    path: tuple[PathItem, ...]
    value: Any


def freeze(value: Any) -> Any:
    """A read-only copy of a plain JSON value (:func:`thaw` undoes it)."""
    if type(value) is dict:
        return ReadOnlyDict({key: freeze(item) for key, item in value.items()})
    if type(value) is list:
        return tuple(freeze(item) for item in value)
    return value


def thaw(value: Any) -> Any:
    """A plain copy of a snapshot: dicts for its mappings, lists for its tuples."""
    if isinstance(value, Mapping):
        return {key: thaw(item) for key, item in value.items()}
    if isinstance(value, (tuple, list)):
        return [thaw(item) for item in value]
    return value


def apply_patches(doc: Any, patches: Iterable[Patch]) -> Any:
    """Apply ``patches`` to ``doc`` (a plain mirror of a snapshot) in place; return the new doc.

    The root itself changes only by its first ``"add"`` (and by ``"append"``
    when it is a string), so keep the returned value: ``doc = apply_patches(doc,
    patches)``.  Containers are copied in, never shared with the patch.

    Raises:
        ValueError: A patch does not fit ``doc`` (a path that does not exist).
    """
    for patch in patches:
        path = patch.path
        if not path:
            if patch.op == "append":
                doc += patch.value
            else:
                doc = thaw(patch.value)
            continue
        parent = doc
        try:
            for step in path[:-1]:
                parent = parent[step]
            last = path[-1]
            if patch.op == "append":
                parent[last] += patch.value
            elif patch.op == "add" and isinstance(parent, list):
                if last != len(parent):
                    raise ValueError(f"cannot add index {last} to an array of {len(parent)}")
                parent.append(thaw(patch.value))
            else:
                parent[last] = thaw(patch.value)
        except (LookupError, TypeError) as exc:
            raise ValueError(f"patch {patch.op} at {list(path)} does not fit the document") from exc
    return doc

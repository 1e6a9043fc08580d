"""PartialJSON's machine: its states, JSON's lexical tables, and the frame of an open container.

Split from :mod:`chunkwise._core.partial_json` (whose docstring is the theory of
operation): the names the parser reads, kept apart from how it reads them.
"""

from __future__ import annotations

import re
from typing import Any, Final

from .json_patches import PathItem, ReadOnlyDict

__all__ = [
    "AFTER",
    "ARRAY",
    "COLON",
    "DELIMITERS",
    "DIGITS",
    "DONE",
    "FAST_DIGITS",
    "FAST_NONE",
    "FAST_STRING",
    "HEX",
    "KEY",
    "KEY_OR_CLOSE",
    "LITERAL",
    "LITERALS",
    "NUMBER",
    "N_COMPLETE",
    "N_DOT",
    "N_E",
    "N_EXP",
    "N_FRAC",
    "N_INT",
    "N_MINUS",
    "N_MORE_DIGITS",
    "N_SIGN",
    "N_ZERO",
    "OBJECT",
    "ROOT",
    "RUN",
    "SIMPLE_ESCAPES",
    "STRING",
    "VALUE",
    "VALUE_OR_CLOSE",
    "WS",
    "Frame",
]

# -- states: what the next significant character may be --------------------
VALUE: Final = 0  # a value (root, after ':', after ',' in an array)
VALUE_OR_CLOSE: Final = 1  # a value or ']' (after '[')
KEY: Final = 2  # a key (after ',' in an object)
KEY_OR_CLOSE: Final = 3  # a key or '}' (after '{')
COLON: Final = 4  # ':' after a key
AFTER: Final = 5  # ',' or the container's close, after a value
STRING: Final = 6  # inside a string (a key or a value)
NUMBER: Final = 7  # inside a number
LITERAL: Final = 8  # inside true, false or null
DONE: Final = 9  # the root value is complete: only whitespace may follow

# -- frame kinds --------------------------------------------------------------
ROOT: Final = 0
OBJECT: Final = 1
ARRAY: Final = 2

# -- number sub-states (RFC 8259 section 6) -----------------------------------
N_MINUS: Final = 0  # after '-'
N_ZERO: Final = 1  # a leading 0
N_INT: Final = 2  # in the integer digits
N_DOT: Final = 3  # after '.'
N_FRAC: Final = 4  # in the fraction digits
N_E: Final = 5  # after 'e' or 'E'
N_SIGN: Final = 6  # after the exponent's sign
N_EXP: Final = 7  # in the exponent digits
N_COMPLETE: Final = frozenset((N_ZERO, N_INT, N_FRAC, N_EXP))
N_MORE_DIGITS: Final = frozenset((N_INT, N_FRAC, N_EXP))  # more digits keep the sub-state

# -- fast paths of feed(): what a whole fragment may be read as, without the machine
FAST_NONE: Final = 0
FAST_STRING: Final = 1  # inside a string, no escape or surrogate pending: a run of text
FAST_DIGITS: Final = 2  # inside a number's digits: more ASCII digits

# What may end a number, by the kind of the frame holding it (rule 1: a
# number is shown only once a character that may follow it proves it complete).
DELIMITERS: Final = {ROOT: " \t\n\r", OBJECT: " \t\n\r,}", ARRAY: " \t\n\r,]"}
WS: Final = re.compile(r"[ \t\n\r]*")
RUN: Final = re.compile(r'[^"\\\x00-\x1f]+')
DIGITS: Final = re.compile(r"[0-9]*")
HEX: Final = re.compile(r"[0-9a-fA-F]*")
SIMPLE_ESCAPES: Final = {
    '"': '"',
    "\\": "\\",
    "/": "/",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
}
LITERALS: Final[dict[str, tuple[str, Any]]] = {
    "t": ("true", True),
    "f": ("false", False),
    "n": ("null", None),
}


class Frame:
    """An open container (or the root holder) and the views of its children."""

    __slots__ = ("dirty", "dup", "items", "key", "kind", "path", "view", "visible")

    def __init__(self, kind: int, path: tuple[PathItem, ...], visible: bool) -> None:
        self.kind = kind
        self.path = path
        # Shown in the snapshot (False inside a duplicate key's value, which is
        # parsed silently and shown whole by one "replace").
        self.visible = visible
        self.items: Any = {} if kind == OBJECT else []
        self.key = ""  # the current key (objects)
        self.dup = False  # the current key was seen before (objects)
        self.view: Any = None  # the cached read-only view, None when dirty
        self.dirty = True

    def freeze(self) -> Any:
        """The read-only view of this container (a copy: the frame may change)."""
        if self.kind == OBJECT:
            return ReadOnlyDict(self.items)
        return tuple(self.items)

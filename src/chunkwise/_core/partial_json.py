"""Live structured values: JSON text parsed as it streams, sans-IO, standard library only.

Theory of operation
-------------------
:class:`PartialJSON` is a push parser: :meth:`~PartialJSON.feed` takes the
next fragment of JSON text and returns the :class:`Patch` objects that turn the
previous snapshot into the new one; :attr:`~PartialJSON.value` is the newest
snapshot, read-only; :meth:`~PartialJSON.end` says the text is over and returns
the whole value, equal to :func:`json.loads` of the whole text.

The parser keeps one state (what the next character may be) and a stack of
open containers (frames).  Each frame holds the values of its children as they
are shown: scalars, strings, and the read-only views of closed containers.
Nothing already consumed is kept as text except the token being read (a
number, a literal, an escape, at most a few characters besides long numbers),
so no character is examined twice.  Strings are consumed in runs with a
regular expression (``RUN``), never one character at a time in Python; a
fragment that only extends the open string, or a number's digits, skips the
machine (``feed()``'s fast paths, said possible by ``_fast`` after each fragment).

Snapshots are read-only: objects are :class:`ReadOnlyDict` (a dict that
refuses to change, copied from the frame's private dict), arrays are tuples.
A closed container's view is built once, when it closes.  An open container
keeps its last view until something under it changes (its frame is then
*dirty*, and so is every frame below it on the stack); reading
:attr:`~PartialJSON.value` rebuilds only the dirty frames, so reading it after
every fragment costs the width of the open containers, not the size of the
document.

Rules this module keeps:

1. Snapshots only grow.  A key is added, never removed; an array gets
   elements at its end; a string gets text at its end; a number is shown only
   once a delimiter (or :meth:`~PartialJSON.end`) proves it complete, a
   literal once fully spelled, an escape (``\\uXXXX``, a surrogate pair) once
   whole.  Nothing shown changes, except a duplicate key's value, which is
   replaced (one ``"replace"`` patch) once the later value is complete, as
   :func:`json.loads` keeps the last value at the first key's position.
2. A snapshot is a function of the text fed so far, never of how it was split:
   ``PartialJSON().feed(a) + feed(b)`` shows what ``partial_json(a + b)``
   shows.  In ``strings="whole"`` mode a string is shown only once closed.
3. The end value is :func:`json.loads` of the whole text, bit for bit, with the
   same rejections (and ``NaN``/``Infinity`` rejected, as chunkwise's
   :func:`~chunkwise._core.payloads.parse_json` rejects them): whitespace around
   the value is fine, anything else after it is :class:`InvalidJSON`.
4. Limits: ``max_depth`` nested containers (128, like openai-node) and
   ``max_size`` characters of text (the SSE event limit).  Past one, and on
   any text that can no longer become JSON, :class:`InvalidJSON` is raised at
   the first offending character, the snapshot stays at the last valid state,
   and every later :meth:`~PartialJSON.feed` or :meth:`~PartialJSON.end`
   raises the same error.
5. Each patch describes one change to the previous snapshot, in order:
   applying them with :func:`apply_patches` to a copy of the previous snapshot
   gives the new one.
"""

from __future__ import annotations

import re
from typing import Any, Final, Literal

from .checks import one_of, positive_int
from .errors import InvalidJSON, LocalProtocolError, raise_itself
from .json_patches import Patch, PathItem, ReadOnlyDict, thaw
from .sse import DEFAULT_MAX_EVENT_SIZE

__all__ = ["DEFAULT_MAX_DEPTH", "LiveJSON", "PartialJSON", "partial_json"]

#: How deeply arrays and objects may nest (openai-node's partial JSON parser's limit).
DEFAULT_MAX_DEPTH: Final = 128

_STRINGS = one_of("partial", "whole")
_COUNT = positive_int.raising(ValueError, wrong_type=TypeError)

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


class PartialJSON:
    """A push parser for one JSON value, showing it as it grows.

    Args:
        strings: ``"partial"`` shows a string as it arrives (text appended
            piece by piece); ``"whole"`` shows a string only once closed.
            Keys are always whole.
        max_depth: How deeply arrays and objects may nest.
        max_size: How many characters of text may be fed in all.

    See the module's rules: snapshots only grow, they depend on the text and
    never on its split, and :meth:`end` equals :func:`json.loads`.
    """

    def __init__(
        self,
        strings: Literal["partial", "whole"] = "partial",
        *,
        max_depth: int = DEFAULT_MAX_DEPTH,
        max_size: int = DEFAULT_MAX_EVENT_SIZE,
    ) -> None:
        _STRINGS.check("strings", strings)
        _COUNT.check("max_depth", max_depth)
        _COUNT.check("max_size", max_size)
        self.strings = strings
        self.max_depth = max_depth
        self.max_size = max_size
        self._partial_strings = strings == "partial"
        self._state = VALUE
        self._root = Frame(ROOT, (), True)
        self._stack: list[Frame] = [self._root]
        self._offset = 0  # characters consumed before the current fragment
        self._fast = FAST_NONE  # how feed() may read a fragment that is all text, or all digits
        self._error: InvalidJSON | None = None
        self._ended = False
        #: The patches of the valid start of the fragment whose feed() raised.
        self.error_patches: tuple[Patch, ...] = ()
        self._patches: list[Patch] = []
        # The token being read.
        self._token: list[str] = []  # a number's pieces, or an escape's characters
        self._token_start = 0  # where the number starts (for its error)
        self._number_state = N_MINUS
        self._literal = ""  # the literal's spelling
        self._literal_value: Any = None
        self._literal_seen = 0  # characters of it seen so far
        # The string being read.
        self._in_key = False
        self._str_shown = False  # shown as it grows (a visible value, partial mode)
        self._str_path: tuple[PathItem, ...] = ()  # where it is shown
        self._str_text = ""  # text materialized so far
        self._str_parts: list[str] = []  # decoded text not yet joined into _str_text
        self._str_unsent: list[str] = []  # decoded text not yet in an "append" patch
        self._escape = ""  # an unfinished escape, from its backslash
        self._high = ""  # a high surrogate from an escape, waiting for its pair

    # -- public face ------------------------------------------------------------

    @property
    def done(self) -> bool:
        """True once the root value is complete (a root number: once delimited or ended)."""
        return self._state == DONE

    @property
    def error(self) -> InvalidJSON | None:
        """The error that stopped the parser, or None."""
        return self._error

    @property
    def value(self) -> Any:
        """The newest snapshot, read-only: None before the value starts."""
        stack = self._stack
        if self._state == STRING and self._str_shown and self._str_parts:
            self._str_text += "".join(self._str_parts)
            self._str_parts.clear()
            self._set_last(stack[-1], self._str_text)
        # Rebuild the dirty visible frames, the deepest first (rule: a dirty
        # frame's ancestors are dirty too).
        for i in range(len(stack) - 1, 0, -1):
            frame = stack[i]
            if not frame.visible or not frame.dirty:
                continue
            frame.view = frame.freeze()
            frame.dirty = False
            self._set_last(stack[i - 1], frame.view)
        items = self._root.items
        return items[0] if items else None

    def feed(self, fragment: str) -> tuple[Patch, ...]:
        """Parse the next fragment; return the patches that turn the last snapshot into the new one.

        Raises:
            InvalidJSON: The text can no longer become JSON, or passed a limit.
                The snapshot stays at the last valid state: that of the text
                before the offending character.  The patches of the valid
                start of ``fragment`` are in :attr:`error_patches`.
            LocalProtocolError: ``feed()`` after :meth:`end`.
        """
        # The fast paths do what the machine would do with a fragment that only
        # extends the open string or number; anything else goes through it.
        fast = self._fast
        if (
            fast
            and isinstance(fragment, str)
            and fragment
            and len(fragment) <= self.max_size - self._offset
        ):
            if fast == FAST_STRING:
                # No quote, backslash or control character: one run (``RUN``;
                # isprintable() refuses more, which the machine then reads).
                if '"' not in fragment and "\\" not in fragment and fragment.isprintable():
                    self._offset += len(fragment)
                    self._str_parts.append(fragment)
                    if not self._str_shown:
                        return ()
                    if not self._stack[-1].dirty:
                        self._touch()
                    return (Patch("append", self._str_path, fragment),)
            elif fragment.isascii() and fragment.isdigit():
                self._offset += len(fragment)
                self._token.append(fragment)
                return ()
        return self._feed(fragment)

    def _feed(self, fragment: str) -> tuple[Patch, ...]:
        # The machine: one loop over the fragment, a state at a time.
        if not isinstance(fragment, str):
            raise TypeError(f"feed() takes str, not {type(fragment).__name__}")
        if self._error is not None:
            raise_itself(self._error, fresh_traceback=True)
        if self._ended:
            raise LocalProtocolError("feed() called after end()")
        room = self.max_size - self._offset
        text = fragment if len(fragment) <= room else fragment[:room]
        pos = 0
        end = len(text)
        try:
            while pos < end:
                state = self._state
                if state == STRING:
                    if self._escape or self._high:
                        pos = self._string(text, pos)
                        continue
                    # _string's common case inline (_decoded too): a run, then the
                    # closing quote; a backslash or control character goes to _string.
                    run = RUN.match(text, pos)
                    if run is not None:
                        piece = run.group()
                        self._str_parts.append(piece)
                        if self._str_shown:
                            self._str_unsent.append(piece)
                        pos = run.end()
                        if pos == end:
                            break
                    if text[pos] == '"':
                        self._close_string()
                        pos += 1
                    else:
                        pos = self._string(text, pos)
                    continue
                if state == NUMBER:
                    pos = self._number(text, pos)
                    continue
                if state == LITERAL:
                    pos = self._literal_chars(text, pos)
                    continue
                char = text[pos]
                if char in " \t\n\r":
                    pos = WS.match(text, pos).end()  # type: ignore[union-attr]
                    if pos == end:
                        break
                    char = text[pos]
                if state == AFTER:
                    if char == ",":  # the common case, inline
                        self._state = KEY if self._stack[-1].kind == OBJECT else VALUE
                    else:
                        self._after(char, pos)
                elif state == COLON:
                    if char != ":":
                        self._fail(f"expected ':' after an object key, found {char!r}", pos)
                    self._state = VALUE
                elif state in (KEY, KEY_OR_CLOSE):
                    if char == '"':
                        self._open_string(key=True)
                    elif char == "}" and state == KEY_OR_CLOSE:
                        self._close()
                    else:
                        self._fail(f"expected an object key, found {char!r}", pos)
                elif state == DONE:
                    self._fail(f"extra data after the JSON value: {char!r}", pos)
                else:  # VALUE, VALUE_OR_CLOSE
                    if char == "]" and state == VALUE_OR_CLOSE:
                        self._close()
                    else:
                        self._start_value(char, pos)
                pos += 1
            if end < len(fragment):
                self._fail(f"the text is longer than max_size ({self.max_size} characters)", end)
        except InvalidJSON as exc:
            self._emit_append()
            self.error_patches = tuple(self._patches)
            self._patches.clear()
            self._error = exc
            self._fast = FAST_NONE
            raise
        finally:
            self._offset += end
        state = self._state
        if state == STRING:
            self._emit_append()
            self._fast = FAST_NONE if self._escape or self._high else FAST_STRING
        elif state == NUMBER and self._number_state in N_MORE_DIGITS:
            self._fast = FAST_DIGITS
        else:
            self._fast = FAST_NONE
        if not self._patches:
            return ()
        patches = tuple(self._patches)
        self._patches.clear()
        return patches

    def end(self) -> Any:
        """The text is over: return the whole value, as :func:`json.loads` would.

        The value is plain (dicts and lists), a new copy on each call.

        Raises:
            InvalidJSON: The text is not one whole JSON value.
        """
        if self._error is not None:
            raise_itself(self._error, fresh_traceback=True)
        if not self._ended:
            self._ended = True
            self._fast = FAST_NONE
            try:
                if self._state == NUMBER and len(self._stack) == 1:
                    self._finish_number(0)
                    self._patches.clear()  # the root number is shown by .value
                if self._state != DONE:
                    self._fail("the text ends before the JSON value does", 0)
            except InvalidJSON as exc:
                self._error = exc
                raise
        return thaw(self.value)

    # -- the machine ------------------------------------------------------------

    def _fail(self, message: str, pos: int) -> None:
        raise InvalidJSON(message, offset=self._offset + pos)

    def _after(self, char: str, pos: int) -> None:
        kind = self._stack[-1].kind  # (a "," is read by _feed)
        if (char == "}" and kind == OBJECT) or (char == "]" and kind == ARRAY):
            self._close()
        else:
            close = "}" if kind == OBJECT else "]"
            self._fail(f"expected ',' or {close!r}, found {char!r}", pos)

    def _start_value(self, char: str, pos: int) -> None:
        if char == '"':
            self._open_string(key=False)
        elif char == "{" or char == "[":
            if len(self._stack) > self.max_depth:
                self._fail(f"arrays and objects nest deeper than max_depth ({self.max_depth})", pos)
            kind = OBJECT if char == "{" else ARRAY
            parent = self._stack[-1]
            visible = parent.visible and not parent.dup
            path = self._child_path(parent) if visible else ()
            frame = Frame(kind, path, visible)
            if visible:
                self._add(parent, path, {} if kind == OBJECT else [], frame.freeze())
            self._stack.append(frame)
            self._state = KEY_OR_CLOSE if kind == OBJECT else VALUE_OR_CLOSE
        elif char == "-" or "0" <= char <= "9":
            self._state = NUMBER
            self._token = [char]
            self._token_start = self._offset + pos
            self._number_state = N_MINUS if char == "-" else N_ZERO if char == "0" else N_INT
        elif char in LITERALS:
            self._state = LITERAL
            self._literal, self._literal_value = LITERALS[char]
            self._literal_seen = 1
        else:
            self._fail(f"expected a JSON value, found {char!r}", pos)

    def _close(self) -> None:
        # A visible frame was added when it opened; a hidden one is placed now
        # (into its hidden parent, or by a "replace" of a duplicate key).
        frame = self._stack.pop()
        self._complete(frame.freeze(), placed=frame.visible)

    def _child_path(self, parent: Frame) -> tuple[PathItem, ...]:
        if parent.kind == OBJECT:
            return (*parent.path, parent.key)
        if parent.kind == ARRAY:
            return (*parent.path, len(parent.items))
        return ()

    def _set_last(self, frame: Frame, value: Any) -> None:
        """Put ``value`` as ``frame``'s newest child (it was shown already)."""
        if frame.kind == OBJECT:
            frame.items[frame.key] = value
        else:
            frame.items[-1] = value

    def _touch(self) -> None:
        """The top frame changed: it and every frame under it are dirty."""
        for frame in reversed(self._stack):
            if frame.dirty or not frame.visible:
                return
            frame.dirty = True

    def _add(self, parent: Frame, path: tuple[PathItem, ...], patch_value: Any, shown: Any) -> None:
        """A new child of the visible ``parent`` appears (rule 1)."""
        if parent.kind == OBJECT:
            parent.items[parent.key] = shown
        else:
            parent.items.append(shown)
        self._touch()
        self._patches.append(Patch("add", path, patch_value))

    def _complete(self, value: Any, *, placed: bool) -> None:
        """A value is complete; ``placed``: it was added when it started (a container, a string)."""
        parent = self._stack[-1]
        if parent.visible:
            if parent.dup:
                parent.items[parent.key] = value
                self._touch()
                self._patches.append(Patch("replace", (*parent.path, parent.key), value))
            elif placed:
                self._set_last(parent, value)
                self._touch()
            else:
                self._add(parent, self._child_path(parent), value, value)
        elif parent.kind == OBJECT:
            parent.items[parent.key] = value
        else:
            parent.items.append(value)
        if parent.kind == ROOT:
            self._state = DONE
        else:
            self._state = AFTER
            parent.dup = False

    # -- strings ---------------------------------------------------------------

    def _open_string(self, *, key: bool) -> None:
        self._state = STRING
        self._in_key = key
        self._str_text = ""
        self._str_parts.clear()
        self._str_unsent.clear()
        parent = self._stack[-1]
        self._str_shown = not key and self._partial_strings and parent.visible and not parent.dup
        if self._str_shown:
            self._str_path = self._child_path(parent)
            self._add(parent, self._str_path, "", "")

    def _decoded(self, text: str) -> None:
        self._str_parts.append(text)
        if self._str_shown:
            self._str_unsent.append(text)

    def _emit_append(self) -> None:
        # The shown string's text decoded since its last "append" patch, if any.
        if not self._str_unsent:
            return
        text = "".join(self._str_unsent)
        self._str_unsent.clear()
        if not self._stack[-1].dirty:
            self._touch()
        self._patches.append(Patch("append", self._str_path, text))

    def _string(self, text: str, pos: int) -> int:
        end = len(text)
        while pos < end:
            if self._escape:
                pos = self._escape_chars(text, pos)
                continue
            run = RUN.match(text, pos)
            if run is not None:
                if self._high:
                    self._lone_high()
                self._decoded(run.group())
                pos = run.end()
                if pos == end:
                    break
            char = text[pos]
            if char == "\\":
                self._escape = "\\"
                pos += 1
            elif char == '"':
                if self._high:
                    self._lone_high()
                self._close_string()
                return pos + 1
            else:
                self._fail(f"unescaped control character {char!r} in a string", pos)
        return pos

    def _lone_high(self) -> None:
        # A high surrogate with no low one after it: kept alone, as json.loads does.
        self._decoded(self._high)
        self._high = ""

    def _escape_chars(self, text: str, pos: int) -> int:
        escape = self._escape
        if len(escape) == 1:
            char = text[pos]
            if char != "u":
                decoded = SIMPLE_ESCAPES.get(char)
                if decoded is None:
                    self._fail(f"invalid escape {escape + char!r} in a string", pos)
                if self._high:
                    self._lone_high()
                self._escape = ""
                self._decoded(decoded)  # type: ignore[arg-type]
                return pos + 1
            escape = "\\u"
            pos += 1
        stop = min(len(text), pos + 6 - len(escape))  # the hex digits wanted, or the text's end
        hexes = HEX.match(text, pos, stop).end()  # type: ignore[union-attr]
        if hexes < stop:
            self._fail(f"invalid \\uXXXX escape: {text[hexes]!r} is not a hex digit", hexes)
        escape += text[pos:hexes]
        pos = hexes
        if len(escape) < 6:
            self._escape = escape
            return pos
        self._escape = ""
        code = int(escape[2:], 16)
        if self._high:
            if 0xDC00 <= code <= 0xDFFF:
                pair = 0x10000 + ((ord(self._high) - 0xD800) << 10) + (code - 0xDC00)
                self._high = ""
                self._decoded(chr(pair))
                return pos
            self._lone_high()
        if 0xD800 <= code <= 0xDBFF:
            self._high = chr(code)  # shown once its pair (or its absence) is known
        else:
            self._decoded(chr(code))
        return pos

    def _close_string(self) -> None:
        value = self._str_text + "".join(self._str_parts)
        self._str_text = ""
        self._str_parts.clear()
        parent = self._stack[-1]
        if self._in_key:
            parent.key = value
            parent.dup = value in parent.items
            self._state = COLON
            return
        shown = self._str_shown
        if shown:
            self._emit_append()
            self._str_shown = False
        self._complete(value, placed=shown)

    # -- numbers and literals ------------------------------------------------------

    def _number(self, text: str, pos: int) -> int:
        end = len(text)
        state = self._number_state
        token = self._token
        while pos < end:
            char = text[pos]
            if "0" <= char <= "9":
                if state == N_ZERO:
                    self._fail("a number has a leading zero", pos)
                if state == N_MINUS and char == "0":
                    state = N_ZERO
                    token.append(char)
                    pos += 1
                    continue
                if state == N_MINUS:
                    state = N_INT
                elif state == N_DOT:
                    state = N_FRAC
                elif state in (N_E, N_SIGN):
                    state = N_EXP
                digits = DIGITS.match(text, pos).end()  # type: ignore[union-attr]
                token.append(text[pos:digits])
                pos = digits
                continue
            if char == "." and state in (N_ZERO, N_INT):
                state = N_DOT
            elif (char == "e" or char == "E") and state in (N_ZERO, N_INT, N_FRAC):
                state = N_E
            elif (char == "+" or char == "-") and state == N_E:
                state = N_SIGN
            elif state in N_COMPLETE and char in DELIMITERS[self._stack[-1].kind]:
                self._number_state = state
                self._finish_number(pos)
                return pos  # the delimiter is read by the main loop
            else:
                self._fail(f"unexpected {char!r} in a number", pos)
            token.append(char)
            pos += 1
        self._number_state = state
        return pos

    def _finish_number(self, pos: int) -> None:
        if self._number_state not in N_COMPLETE:
            self._fail("the text ends inside a number", pos)
        literal = "".join(self._token)
        self._token = []
        try:
            if self._number_state in (N_ZERO, N_INT):
                value: Any = int(literal)
            else:
                value = float(literal)
        except ValueError as exc:  # more digits than sys.get_int_max_str_digits()
            raise InvalidJSON(
                f"a number Python will not convert: {exc}", offset=self._token_start
            ) from None
        self._complete(value, placed=False)

    def _literal_chars(self, text: str, pos: int) -> int:
        word = self._literal
        seen = self._literal_seen
        take = text[pos : pos + len(word) - seen]
        for i, char in enumerate(take):
            if char != word[seen + i]:
                self._fail(f"expected {word!r}, found {char!r}", pos + i)
        seen += len(take)
        self._literal_seen = seen
        if seen == len(word):
            self._complete(self._literal_value, placed=False)
        return pos + len(take)


def partial_json(text: str, strings: Literal["partial", "whole"] = "partial") -> Any:
    """The snapshot of a prefix of JSON text: what :attr:`PartialJSON.value` shows after it.

    A pure function: read-only, None when no value has started.

    Raises:
        InvalidJSON: ``text`` is not a prefix of JSON (or passes a limit).
    """
    parser = PartialJSON(strings)
    parser.feed(text)
    return parser.value


class LiveJSON:
    """A :class:`PartialJSON` for the accumulators: it stops at its first error instead of raising.

    The one way every API previews streamed JSON (tool-call arguments,
    structured outputs): a preview never raises into a stream.
    """

    __slots__ = ("_parser", "error")

    def __init__(self) -> None:
        self._parser = PartialJSON()
        self.error: InvalidJSON | None = None

    @classmethod
    def of(cls, text: str) -> LiveJSON:
        """The preview of ``text`` fed whole (a final text that replaced the streamed one)."""
        live = cls()
        live.feed(text)
        return live

    @property
    def value(self) -> Any:
        """The read-only snapshot (None before the value starts)."""
        return self._parser.value

    def feed(self, fragment: str) -> tuple[tuple[Patch, ...], InvalidJSON | None]:
        """The patches of ``fragment``, and, once, the error that stopped the preview."""
        if self.error is not None:
            return (), None
        try:
            return self._parser.feed(fragment), None
        except InvalidJSON as exc:
            self.error = exc
            return self._parser.error_patches, exc

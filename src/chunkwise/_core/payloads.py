"""JSON values from the server, sans-IO: read, copied, written back and described safely.

Theory of operation
-------------------
Everything here takes values a server (or a caller of
:meth:`~chunkwise.chat.Accumulator.feed`) chose, so nothing here may fail in
a way the caller did not ask for.  :func:`parse_json` makes every way JSON
text can fail a :class:`ValueError`: Python's parser raises
:class:`json.JSONDecodeError` for text that is not JSON,
:class:`RecursionError` for nesting deeper than the interpreter's limit, and a
plain :class:`ValueError` for integers longer than
:func:`sys.get_int_max_str_digits`.  The grammar is RFC 8259's: ``NaN`` and
``Infinity`` are not JSON (a NaN would also make a result unequal to itself),
and ``1e999`` becomes ``inf``, as in JavaScript.  :func:`load_json` and
:func:`load_object` are the same for event data, failing with
:class:`~chunkwise.errors.InvalidChunk`.  :func:`copy_json` needs no recursion,
:func:`dump_json` and :func:`preview` never fail, and
:func:`parse_error_payload` reads any JSON value as some error.
"""

from __future__ import annotations

import json
import math
import reprlib
from collections.abc import Callable, Mapping
from typing import Any, Final

from .errors import InvalidChunk, StreamError

__all__ = [
    "DATA_LIMIT",
    "copy_json",
    "dump_json",
    "load_json",
    "parse_error_event",
    "parse_error_payload",
    "parse_json",
    "preview",
    "scan_json",
]

#: How much of an offending event's data an error keeps.
DATA_LIMIT: Final = 2000


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


_DECODER: Final = json.JSONDecoder(parse_constant=_reject_constant)

#: ``scan_json(text, 0)`` returns ``(value, end)``: the C scanner under
#: :func:`parse_json` without its two Python wrappers (no surrounding
#: whitespace, no check that the value ends the text; it raises StopIteration,
#: ValueError or RecursionError).  On any failure, or when ``end`` is not
#: ``len(text)``, fall back to :func:`load_json`, for the value or the error.
scan_json: Callable[[str, int], tuple[Any, int]] = _DECODER.scan_once  # type: ignore[attr-defined]


def parse_json(text: str) -> Any:
    """Parse ``text`` as one JSON value; every failure is a :class:`ValueError`."""
    try:
        return _DECODER.decode(text)
    except RecursionError:
        raise ValueError("arrays or objects nested deeper than the recursion limit") from None


def load_json(data: str) -> Any:
    """Parse event ``data`` as one JSON value.

    Raises:
        InvalidChunk: as :func:`parse_json`, keeping the start of ``data``.
    """
    try:
        return parse_json(data)
    except json.JSONDecodeError as exc:
        message = f"event data is not valid JSON: {exc}"
    except ValueError as exc:
        # JSON text Python will not turn into a value.
        message = f"event data cannot be parsed as JSON: {exc}"
    raise InvalidChunk(message, data[:DATA_LIMIT])


def load_object(data: str) -> dict[str, Any]:
    """Parse event ``data`` as one JSON object: what every accumulator reads, once per event.

    Compact data that starts with ``{`` takes :data:`scan_json` alone.

    Raises:
        InvalidChunk: as :func:`load_json`, or the data is JSON but not an object.
    """
    if data[:1] == "{":
        try:
            value, end = scan_json(data, 0)
        except (StopIteration, ValueError, RecursionError):
            pass
        else:
            if end == len(data):
                return value  # type: ignore[no-any-return]
    value = load_json(data)
    if type(value) is not dict:
        what = f"event data is JSON {type(value).__name__}, not an object"
        raise InvalidChunk(what, data[:DATA_LIMIT])
    return value


def copy_json(value: Any) -> Any:
    """A deep copy of ``value``'s mappings (as dicts) and lists, without recursion."""
    if not isinstance(value, (Mapping, list)):
        return value
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(root, 0, value)]
    while stack:
        target, key, item = stack.pop()
        if isinstance(item, Mapping):
            copied: Any = dict(item)
            pairs = copied.items()
        else:
            copied = list(item)
            pairs = enumerate(copied)
        target[key] = copied
        stack.extend((copied, k, v) for k, v in pairs if isinstance(v, (Mapping, list)))
    return root[0]


def dump_json(value: Any) -> str | None:
    """``value`` as compact JSON text, or None when JSON cannot write it (or not this deep)."""
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return None


_REPR: Final = reprlib.Repr()
# Bounded depth and breadth: the cost does not depend on the value's size.
_REPR.maxlevel = 4
_REPR.maxdict = _REPR.maxlist = _REPR.maxtuple = _REPR.maxset = 12
_REPR.maxstring = _REPR.maxother = _REPR.maxlong = 200


def preview(value: Any, limit: int = 200) -> str:
    """A ``repr``-like description of ``value`` of at most ``limit`` characters."""
    try:
        return _REPR.repr(value)[:limit]
    except Exception:
        # An int past the digit limit, or a caller's object whose repr fails.
        return f"<{type(value).__name__}>"[:limit]


def parse_error_payload(payload: Any) -> StreamError:
    """The error a server reported in ``payload``, an already-decoded JSON value.

    The rules, the same for HTTP error bodies and in-stream errors:

    1. A list is Gemini's form, ``[{"error": {...}}]``: its first element, when
       that is an object, is read instead.
    2. A string is the message.
    3. In an object, an ``"error"`` holding a string is the message (``body`` is
       the object); one holding an object is the error object.  Otherwise the
       object itself is the error object (OpenAI's bare object, vLLM's
       ``{"object": "error", ...}``, FastAPI's ``{"detail": ...}``).
    4. The message is the error object's first non-null ``message``, ``detail``
       or ``msg``; a non-string one is compact JSON text.  With none of them
       the message is the error object as compact JSON text.
    5. ``code`` is an int or a string (a bool is not a code); ``type`` and
       ``param`` are strings; anything else is None.  ``body`` is the error
       object (a dict copy).  ``retry_after`` is its ``retry_after`` (seconds)
       or ``retry_after_ms``, a non-negative number, else None.
    6. Any other value becomes its compact JSON text, without a body.
    """
    if isinstance(payload, list) and payload and isinstance(payload[0], Mapping):
        payload = payload[0]
    if isinstance(payload, str):
        return StreamError(payload)
    if not isinstance(payload, Mapping):
        return StreamError(_json_text(payload))
    error = payload.get("error")
    if isinstance(error, str):
        return StreamError(error, body=dict(payload))
    if not isinstance(error, Mapping):
        error = payload
    message = error.get("message")
    for key in ("detail", "msg"):
        if message is None:
            message = error.get(key)
    if not isinstance(message, str):
        message = _json_text(message if message is not None else error)
    code = error.get("code")
    if isinstance(code, bool) or not isinstance(code, (int, str)):
        code = None
    kind = error.get("type")
    param = error.get("param")
    return StreamError(
        message,
        type=kind if isinstance(kind, str) else None,
        code=code,
        param=param if isinstance(param, str) else None,
        body=dict(error),
        retry_after=_seconds(error.get("retry_after"), error.get("retry_after_ms")),
    )


def _seconds(seconds: Any, milliseconds: Any) -> float | None:
    for value, scale in ((seconds, 1), (milliseconds, 1000)):
        if type(value) in (int, float) and 0 <= value < math.inf:
            return float(value) / scale
    return None


def parse_error_event(event: Mapping[str, Any]) -> StreamError:
    """The error of a Responses ``error`` event, nested (``"error": {...}``) or flat.

    A flat one is read without the event's own ``type``, which names the event.
    """
    if isinstance(event.get("error"), (Mapping, str)):
        return parse_error_payload(event)
    return parse_error_payload({key: value for key, value in event.items() if key != "type"})


def _json_text(value: Any) -> str:
    text = dump_json(value)
    return text if text is not None else preview(value)

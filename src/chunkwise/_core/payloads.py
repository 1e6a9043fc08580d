"""JSON values from the server, sans-IO: read, copied, written back and described safely.

Theory of operation
-------------------
Everything here takes values a server (or a caller of
:meth:`~chunkwise.chat.Accumulator.feed`) chose, so nothing here may fail in
a way the caller did not ask for:

* :func:`parse_json` makes every way JSON text can fail a :class:`ValueError`.
  Python's parser fails in three ways: a :class:`json.JSONDecodeError` for
  text that is not JSON, a :class:`RecursionError` for arrays or objects
  nested deeper than the interpreter's recursion limit, and a plain
  :class:`ValueError` for integers longer than
  :func:`sys.get_int_max_str_digits` (a guard against quadratic conversion).
  The grammar accepted is RFC 8259's: ``NaN``, ``Infinity`` and ``-Infinity``
  are not JSON (Python accepts them, JavaScript does not), and a NaN would
  also make a result unequal to itself.  A number too large for a float, such
  as ``1e999``, is valid JSON and becomes ``inf``, as in JavaScript's
  ``JSON.parse``.  :func:`load_json` is the same for event data, failing
  with :class:`~chunkwise.errors.InvalidChunk`.  :data:`scan_json` is the bare C
  scanner of the same grammar, for a hot path that falls back to them.
* :func:`copy_json` deep-copies containers without recursion, so a value
  that could be parsed can always be copied.
* :func:`dump_json` writes a value back as compact JSON text, or says it
  cannot (a value parsed at the edge of the recursion limit may be too deep to
  write from a deeper stack frame).
* :func:`preview` describes any value in bounded time and space, for anomaly
  details and messages: never ``repr`` of a whole server value.
* :func:`parse_error_payload` is the one reading of an OpenAI-shaped error,
  wherever it arrives (an HTTP error body, an ``event: error``, a chunk with
  an ``error`` key): it never fails, and any JSON value is some error.
"""

from __future__ import annotations

import json
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
#: :func:`parse_json`, without its wrappers (no surrounding whitespace, no
#: check that the value ends the text, and it raises StopIteration, ValueError
#: or RecursionError), so a hot path that parses one value per call can skip
#: two Python calls.  On any failure, or when ``end`` is not ``len(text)``,
#: fall back to :func:`parse_json` or :func:`load_json`, for the value or the error.
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
        InvalidChunk: ``data`` is not JSON, is nested too deeply for the
            interpreter, or holds a number Python will not convert; the
            error keeps the first :data:`DATA_LIMIT` characters of ``data``.
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
    """Parse event ``data`` as one JSON object: what every accumulator reads.

    The hot path, once per event: the bare scanner on compact data that starts
    with ``{``.  Anything unusual (surrounding space, any failure, another
    value) goes through :func:`load_json`, for its value or its one typed error.

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
    """A deep copy of ``value``'s mappings (as dicts) and lists; other values are shared.

    Iterative, so any depth that could be parsed can be copied.
    """
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
    """``value`` as compact JSON text, or None when it has none.

    None when it holds something JSON cannot write (a non-finite float, an
    object that is not a JSON type) or is nested too deeply to write here.
    """
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
       object (a dict copy).
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
    )


def parse_error_event(event: Mapping[str, Any]) -> StreamError:
    """The error of a Responses ``error`` event, in either of its two shapes.

    Nested, ``{"type": "error", "error": {...}}`` (and llama.cpp's bare
    ``{"error": {...}}``), is read as any payload; flat, ``{"type": "error",
    "code", "message", "param"}``, without the event's own ``type``, which
    names the event, not the error.
    """
    if isinstance(event.get("error"), (Mapping, str)):
        return parse_error_payload(event)
    return parse_error_payload({key: value for key, value in event.items() if key != "type"})


def _json_text(value: Any) -> str:
    text = dump_json(value)
    return text if text is not None else preview(value)

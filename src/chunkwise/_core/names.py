"""The public names: where they report they live, which load lazily, which were renamed.

Theory of operation
-------------------
Users import the names of :mod:`chunkwise` and of its namespaces; the classes
and functions are defined in private modules.  Three mechanisms make that
work, each once, here:

1. :func:`fixup_module_metadata`: a public class or function reports the
   module it is imported from (``chunkwise.chat.Parser``), in reprs,
   tracebacks and the documentation, as trio's do.
2. Lazy names (a PEP 562 ``__getattr__``): the trio layer (``Client``,
   each namespace's ``Stream``, ``open_stream``, ``complete``...) is imported
   on first use, so that sans-IO use (``from chunkwise.chat import Parser``)
   never imports trio or h11.
3. :data:`RENAMED`, the one table of the round-3 spellings: each keeps
   working for one release, and using it warns (:class:`DeprecationWarning`)
   with the new spelling.  Module attributes go through the same
   ``__getattr__``; renamed methods call :func:`warn_renamed` and do what the
   new one does.

Each public module ends with one call of :func:`public_face`, which sets up
rules 1 to 3 for it.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any, Final

__all__ = ["RENAMED", "fixup_module_metadata", "public_face", "warn_renamed"]

#: Every round-3 spelling that changed, and its new spelling.
RENAMED: Final[Mapping[str, str]] = {
    "chunkwise.ChatStreamParser": "chunkwise.chat.Parser",
    "chunkwise.ChatAccumulator": "chunkwise.chat.Accumulator",
    "chunkwise.ChatResult": "chunkwise.chat.Result",
    "chunkwise.ChoiceResult": "chunkwise.chat.ChoiceResult",
    "chunkwise.ChatStream": "chunkwise.chat.Stream",
    "chunkwise.ChatEvent": "chunkwise.chat.Event",
    "chunkwise.ChoiceEvent": "chunkwise.chat.ChoiceEvent",
    "chunkwise.ToolCallEvent": "chunkwise.chat.ToolCallEvent",
    "chunkwise.ContentDelta": "chunkwise.chat.TextDelta",
    "chunkwise.RefusalDelta": "chunkwise.chat.RefusalDelta",
    "chunkwise.ReasoningDelta": "chunkwise.chat.ReasoningDelta",
    "chunkwise.ChoiceFinished": "chunkwise.chat.ChoiceFinished",
    "chunkwise.ToolCallStarted": "chunkwise.chat.ToolCallStarted",
    "chunkwise.ToolCallArgumentsDelta": "chunkwise.chat.ToolCallArgumentsDelta",
    "chunkwise.ToolCallCompleted": "chunkwise.chat.ToolCallCompleted",
    "chunkwise.open_chat_stream": "chunkwise.chat.open_stream",
    "chunkwise.complete_chat": "chunkwise.chat.complete",
    "chunkwise.ResponseStreamParser": "chunkwise.responses.Parser",
    "chunkwise.ResponseAccumulator": "chunkwise.responses.Accumulator",
    "chunkwise.ResponseResult": "chunkwise.responses.Result",
    "chunkwise.ResponseStream": "chunkwise.responses.Stream",
    "chunkwise.ResponseEvent": "chunkwise.responses.Event",
    "chunkwise.OutputEvent": "chunkwise.responses.OutputEvent",
    "chunkwise.FunctionCallEvent": "chunkwise.responses.ToolCallEvent",
    "chunkwise.OutputItem": "chunkwise.responses.OutputItem",
    "chunkwise.ContentPart": "chunkwise.responses.ContentPart",
    "chunkwise.FunctionCall": "chunkwise.responses.FunctionCall",
    "chunkwise.OutputItemAdded": "chunkwise.responses.OutputItemAdded",
    "chunkwise.OutputItemDone": "chunkwise.responses.OutputItemDone",
    "chunkwise.OutputTextDelta": "chunkwise.responses.TextDelta",
    "chunkwise.OutputRefusalDelta": "chunkwise.responses.RefusalDelta",
    "chunkwise.ReasoningTextDelta": "chunkwise.responses.ReasoningDelta",
    "chunkwise.ReasoningSummaryDelta": "chunkwise.responses.ReasoningSummaryDelta",
    "chunkwise.FunctionCallStarted": "chunkwise.responses.ToolCallStarted",
    "chunkwise.FunctionCallArgumentsDelta": "chunkwise.responses.ToolCallArgumentsDelta",
    "chunkwise.FunctionCallCompleted": "chunkwise.responses.ToolCallCompleted",
    "chunkwise.ResponseStatusChanged": "chunkwise.responses.StatusChanged",
    "chunkwise.open_response_stream": (
        "chunkwise.responses.open_stream (chunkwise.responses.attach for a response_id)"
    ),
    "chunkwise.complete_response": "chunkwise.responses.complete",
    "chunkwise.cancel_response": "chunkwise.responses.cancel",
    "chunkwise.CompletionStreamParser": "chunkwise.completions.Parser",
    "chunkwise.CompletionAccumulator": "chunkwise.completions.Accumulator",
    "chunkwise.CompletionResult": "chunkwise.completions.Result",
    "chunkwise.CompletionChoice": "chunkwise.completions.ChoiceResult",
    "chunkwise.CompletionStream": "chunkwise.completions.Stream",
    "chunkwise.CompletionEvent": "chunkwise.completions.Event",
    "chunkwise.TextDelta": "chunkwise.completions.TextDelta",
    "chunkwise.open_completion_stream": "chunkwise.completions.open_stream",
    "chunkwise.complete_completion": "chunkwise.completions.complete",
    "chunkwise.ResponseStarted": "chunkwise.HeadReceived",
    "chunkwise.LifecycleEvent": "chunkwise.types.LifecycleEvent",
    "chunkwise.GapStatistics": "chunkwise.types.GapStatistics",
    "chunkwise.Headers": "chunkwise.types.Headers",
    "chunkwise.PoolStats": "chunkwise.types.PoolStats",
    "chunkwise.Batch": "chunkwise.types.Batch",
    "chunkwise.Family": "chunkwise.types.Family",
    "chunkwise.DEFAULT_BASE_URL": "chunkwise.types.DEFAULT_BASE_URL",
    "chunkwise.DEFAULT_BUFFER_SIZE": "chunkwise.types.DEFAULT_BUFFER_SIZE",
    "chunkwise.DEFAULT_MAX_EVENT_SIZE": "chunkwise.types.DEFAULT_MAX_EVENT_SIZE",
    "chunkwise.EventTooLarge": "chunkwise.errors.EventTooLarge",
    "chunkwise.InvalidChunk": "chunkwise.errors.InvalidChunk",
    "chunkwise.IncompleteBody": "chunkwise.errors.IncompleteBody",
    "chunkwise.UnexpectedContentType": "chunkwise.errors.UnexpectedContentType",
    "chunkwise.UnexpectedContentEncoding": "chunkwise.errors.UnexpectedContentEncoding",
    # methods
    "chunkwise.Client.open_chat_stream": "chunkwise.Client.chat.open_stream",
    "chunkwise.Client.complete_chat": "chunkwise.Client.chat.complete",
    "chunkwise.Client.open_response_stream": (
        "chunkwise.Client.responses.open_stream (Client.responses.attach for a response_id)"
    ),
    "chunkwise.Client.complete_response": "chunkwise.Client.responses.complete",
    "chunkwise.Client.cancel_response": "chunkwise.Client.responses.cancel",
    "chunkwise.Client.open_completion_stream": "chunkwise.Client.completions.open_stream",
    "chunkwise.Client.complete_completion": "chunkwise.Client.completions.complete",
    "chunkwise.chat.Accumulator.feed_chunk": "chunkwise.chat.Accumulator.feed",
    "chunkwise.chat.Accumulator.feed_event": "chunkwise.chat.Accumulator.feed_sse",
    "chunkwise.completions.Accumulator.feed_chunk": "chunkwise.completions.Accumulator.feed",
    "chunkwise.completions.Accumulator.feed_event": "chunkwise.completions.Accumulator.feed_sse",
    "chunkwise.responses.Accumulator.feed_event": "chunkwise.responses.Accumulator.feed",
}

#: Renamed names whose old spelling took other arguments than the new one:
#: the old name resolves to a function that keeps the old signature.
_OLD_SIGNATURES: Final[Mapping[str, str]] = {
    # open_response_stream(endpoint, request=None, *, response_id=None, ...)
    # both opened and attached; now responses.open_stream and responses.attach.
    "chunkwise.open_response_stream": "chunkwise.responses._stream:open_response_stream",
}


def warn_renamed(old: str, *, stacklevel: int = 3) -> None:
    """Warn that ``old`` (a key of :data:`RENAMED`) is deprecated, naming the new spelling.

    ``stacklevel`` 3 points at the caller of the function that calls this.
    """
    new = RENAMED[old]
    warnings.warn(
        f"{old} is deprecated and will be removed: use {new}",
        DeprecationWarning,
        stacklevel=stacklevel,
    )


def _resolve(spelling: str) -> Any:
    # "chunkwise.chat.Parser" -> the object; "module:attr" names the module at once.
    module, _, attr = spelling.partition(":") if ":" in spelling else spelling.rpartition(".")
    return getattr(importlib.import_module(module), attr)


def public_face(namespace: dict[str, Any], lazy: Mapping[str, str] | None = None) -> None:
    """Rules 1 to 3 for the public module whose globals are ``namespace``.

    ``lazy`` maps a public name to the private module that defines it; the
    first access imports it, fixes its metadata (rule 1) and keeps it in
    ``namespace``.  A name of :data:`RENAMED` warns, every time.  The
    module's ``__getattr__`` is set here, out of sight of type checkers,
    which would take any attribute for a lazy one.
    """
    module_name = namespace["__name__"]
    namespace["__getattr__"] = _lazy_getattr(module_name, namespace, lazy or {})
    fixup_module_metadata(module_name, namespace)


def _lazy_getattr(
    module_name: str, namespace: dict[str, Any], lazy: Mapping[str, str]
) -> Callable[[str], Any]:
    # The module's __getattr__: lazy names first, then the renamed ones.

    def __getattr__(name: str) -> Any:
        where = lazy.get(name)
        if where is not None:
            value = getattr(importlib.import_module(where), name)
            fixup_module_metadata(module_name, {"__all__": [name], name: value})
            namespace[name] = value
            return value
        old = f"{module_name}.{name}"
        if old in RENAMED:
            warn_renamed(old)
            return _resolve(_OLD_SIGNATURES.get(old, RENAMED[old]))
        raise AttributeError(f"module {module_name!r} has no attribute {name!r}")

    return __getattr__


def fixup_module_metadata(module_name: str, namespace: Mapping[str, Any]) -> None:
    """Make the public names in ``namespace["__all__"]`` and their methods report ``module_name``.

    Only an object defined in a private module or below ``module_name``: a
    class two namespaces share (``ChoiceFinished``) keeps its first public home.
    """
    seen: set[int] = set()

    def fix(obj: Any, qualname: str) -> None:
        if id(obj) in seen:
            return
        seen.add(id(obj))
        module = getattr(obj, "__module__", None)
        if not isinstance(module, str) or not _defined_below(module, module_name):
            return
        obj.__module__ = module_name
        if isinstance(obj, type):
            for attr_name, value in list(vars(obj).items()):
                if isinstance(value, (type, staticmethod, classmethod, property)):
                    continue
                if callable(value) and getattr(value, "__qualname__", "").startswith(qualname):
                    fix(value, f"{qualname}.{attr_name}")

    for name in namespace["__all__"]:
        obj = namespace.get(name)  # a lazy name is fixed when it loads
        if isinstance(obj, type) or callable(obj):
            fix(obj, getattr(obj, "__qualname__", name))


def _defined_below(module: str, public: str) -> bool:
    # chunkwise._core.events, chunkwise.chat.events (below chunkwise.chat): yes;
    # chunkwise.chat, once fixed there: not again for chunkwise.completions.
    if not module.startswith("chunkwise."):
        return False
    if module.startswith(public + "."):
        return True
    return any(part.startswith("_") for part in module.split("."))

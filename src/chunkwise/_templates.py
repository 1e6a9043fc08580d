"""Chunk templates: a chunk that repeats the last one but for its text, read without JSON.

Theory of operation
-------------------
Consecutive chunks of a real stream (vLLM, llama.cpp, TGI, Ollama, OpenAI's
legacy completions) are byte-identical except for the streamed text.  When a
chunk took an accumulator's hot path (one choice, only text), its raw event
data is cut around the text's string literal into a ``prefix`` ending with the
literal's opening ``"`` and a ``suffix`` starting with its closing ``"``.  A
later event whose data is ``prefix + middle + suffix``, where ``middle``
holds no ``"``, no ``\\`` and no control character (U+0000 to U+001F), is
that same chunk with ``middle`` as its text, so the accumulator can do what
its hot path would do without parsing the JSON.  Anything else goes the
ordinary way.  This module only reads text; which chunks may be learned, and
what a match does, is the accumulator's (each says so at its hook).

Why a match is exact.  JSON is read left to right, and a string literal ends
at its first ``"`` not escaped by ``\\``; inside it, a character that is none
of ``"``, ``\\`` or a control character stands for itself.  So for every such
``middle`` the data reads as the same tokens as the learned chunk: the
prefix's, then one string whose value is exactly ``middle``, then the
suffix's, from the same state.  The value is the same but for that one
string, provided the string sits where the text was (not in a key, not in
another field, not overridden by a repeated key): learning checks that once,
by parsing ``prefix + probe + suffix`` with a ``probe`` longer than the whole
data.  No string of the prefix or suffix can decode to anything that long, so
if the value at the text's path is the probe, that string is the one at the
path, and with the text put back the value must equal the learned chunk.

Rules
-----
1. A template is learned from a chunk's data, the chunk parsed from it, and
   the path of its text, only when the text's literal appears in the data
   exactly once, unescaped; a text that needs escapes (``"``, ``\\``, a
   control character), or is written with escapes (``\\u00e9``, ``\\/``), or
   whose literal also appears elsewhere (in the id, the model) is not learned.
2. Before use, the template is verified by one parse of ``prefix + probe +
   suffix`` (see above); a template that fails it is not used.
3. A match is ``data.startswith(prefix)``, ``data.endswith(suffix)``, the two
   not overlapping, and a middle free of ``"``, ``\\`` and control characters
   (one precompiled search): the middle is then the chunk's text, exactly.  A
   middle with escapes (a newline written ``\\n``, a quote, ``\\u00e9``)
   matches too when the literal from the prefix's last quote to the
   suffix's first, alone, is one JSON string (:func:`json.loads`, strict):
   its closing quote is then the suffix's, so the data is the same tokens
   with that one string, and its value is the text.
4. Learning is bounded to one wasted parse per stream: the verifying parse of
   rule 2 is spent only while :attr:`ChunkTemplate.learning` is true, which it
   stops being when a verification fails or when a template is dropped (at
   its first miss) without having matched once.  A template that matched
   saved at least the parse that learned the next one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Final

__all__ = ["ChunkTemplate"]

#: What a string literal's body cannot hold unescaped (RFC 8259, section 7).
_UNSAFE: Final = re.compile('["\\\\\x00-\x1f]').search

#: A path to a chunk's text: keys and list indices, from the chunk down.
Path = tuple[str | int, ...]


class ChunkTemplate:
    """The text slot of the last hot-path chunk, and whether another may be learned.

    ``key`` is the accumulator's own note of what a match means (which choice,
    which tool call); this class only keeps it.
    """

    __slots__ = ("active", "hits", "key", "learning", "prefix", "shortest", "suffix", "tail")

    def __init__(self) -> None:
        self.active = False
        self.learning = True
        self.hits = 0
        self.prefix = ""
        self.suffix = ""
        self.shortest = 0  # len(prefix)
        self.tail = 0  # len(suffix)
        self.key: tuple[int, ...] = ()

    def match(self, data: str) -> str | None:
        """Rule 3: the text of a chunk shaped like the learned one, or None.

        A miss drops the template (rule 4).
        """
        if data.startswith(self.prefix) and data.endswith(self.suffix):
            end = len(data) - self.tail
            if end >= self.shortest:
                text = data[self.shortest : end]
                if _UNSAFE(text) is None:
                    self.hits += 1
                    return text
                try:  # escapes: from the prefix's quote to the suffix's, one literal
                    value = json.loads(data[self.shortest - 1 : end + 1])
                except ValueError:  # json.JSONDecodeError: not one string literal
                    pass
                else:
                    if type(value) is str:  # it starts with a quote: nothing else parses
                        self.hits += 1
                        return value
        self.active = False
        self.learning = self.hits > 0
        return None

    def learn(self, data: str, chunk: Mapping[str, Any], path: Path, key: tuple[int, ...]) -> bool:
        """Rules 1 and 2: learn the slot of ``chunk``'s text at ``path``; True when learned.

        ``chunk`` is what ``data`` parsed to, and holds a string at ``path``.
        """
        text: Any = chunk
        for step in path:
            text = text[step]
        if _UNSAFE(text) is not None:
            return False
        literal = f'"{text}"'
        start = data.find(literal)
        if start < 0 or data.find(literal, start + 1) >= 0:
            return False
        # Rule 4: a verification spends a parse, so it is once per stream
        # unless the template it gives earns it back.
        self.learning = False
        prefix = data[: start + 1]
        suffix = data[start + len(literal) - 1 :]
        probe = "#" * (len(data) + 1)
        try:
            value = json.loads(prefix + probe + suffix)
        except (ValueError, RecursionError):
            return False
        parent = _parent(value, path)
        if parent is None or parent[path[-1]] != probe:  # type: ignore[index]
            return False
        parent[path[-1]] = text  # type: ignore[index]
        if value != chunk:
            return False
        self.prefix, self.suffix = prefix, suffix
        self.shortest, self.tail = len(prefix), len(suffix)
        self.key = key
        self.hits = 0
        self.active = True
        return True


def _parent(value: Any, path: Path) -> dict[str, Any] | list[Any] | None:
    # The container holding the value at ``path``, if ``value`` has that path.
    for i, step in enumerate(path):
        if type(step) is str:
            if type(value) is not dict or step not in value:
                return None
        elif type(value) is not list or not 0 <= step < len(value):  # type: ignore[operator]
            return None
        if i == len(path) - 1:
            return value  # type: ignore[no-any-return]
        value = value[step]
    return None

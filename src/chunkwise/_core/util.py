"""Small helpers of the sans-IO and trio layers alike: secrets kept out of text, host names."""

from __future__ import annotations

from typing import Any, TypeVar

__all__ = [
    "MIN_KEY_PREFIX",
    "MIN_SECRET_LENGTH",
    "authority",
    "redact",
    "secret",
    "url_host",
]

#: A key shorter than this is not treated as a secret to mask.  Local servers
#: accept any key and people type ``x``, ``e`` or ``test``: replacing every
#: ``e`` in received text with ``***`` destroys output and hides nothing.  Real
#: provider keys are several times longer.
MIN_SECRET_LENGTH = 16


def secret(key: str | None) -> str | None:
    """``key`` when it is long enough to be a secret worth masking, else ``None``."""
    return key if key is not None and len(key) >= MIN_SECRET_LENGTH else None


#: The shortest start of a key masked at the end of a cut text (see :func:`redact`).
MIN_KEY_PREFIX = 4

AnyText = TypeVar("AnyText", str, bytes)


def redact(text: AnyText, key: str | None, *, cut: bool = False) -> AnyText:
    """``text`` with every occurrence of ``key`` replaced by ``***``, if ``key`` is a secret.

    The one redaction rule of the library and the command line (see
    :data:`MIN_SECRET_LENGTH`): for messages, printed documents and the start
    of an error body a server quoted the key in, never for the bytes a
    recording keeps.  ``cut=True`` says ``text`` was cut short (by a size
    limit, or a connection that broke), so it may end inside an echo of the
    key: that start of the key (at least :data:`MIN_KEY_PREFIX` characters) is
    masked too.
    """
    secret_key = secret(key)
    if not secret_key:
        return text
    needle: Any = secret_key.encode() if isinstance(text, bytes) else secret_key
    mask: Any = b"***" if isinstance(text, bytes) else "***"
    text = text.replace(needle, mask)
    if cut:
        for length in range(len(needle) - 1, MIN_KEY_PREFIX - 1, -1):
            if text.endswith(needle[:length]):
                cut_text: AnyText = text[:-length] + mask
                return cut_text
    return text


def url_host(host: str) -> str:
    """``host`` as it is written in a URL or a ``Host`` header: IPv6 in brackets."""
    return f"[{host}]" if ":" in host else host


def authority(host: str, port: int) -> str:
    """``host:port``, with an IPv6 address in brackets (``[::1]:8000``)."""
    return f"{url_host(host)}:{port}"

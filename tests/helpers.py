"""The helpers every test module shares (pytest puts ``tests/`` on ``sys.path``).

Kept small on purpose, as h11's ``h11/tests/helpers.py`` is: anything used by
one test module lives in that module.  Five groups:

* data: :data:`RECORDINGS` (real OpenAI streams) and :func:`load_vectors`
  (provider streams with their expected results);
* building streams: :func:`chunk`, :func:`choice`, :func:`tool` make
  ``chat.completion.chunk`` objects and :func:`sse` frames them as a body;
  the hypothesis strategy :data:`chunk_values` makes arbitrary JSON shaped
  like chunks;
* cutting bytes into reads: :func:`split_at`, :func:`pieces_of`,
  :func:`byte_reads`, :func:`as_buffers`;
* running the layers: :func:`decode_sse` (the SSE decoder, checked against
  :func:`reference_decode_sse`), :func:`parse_chat` and :func:`accumulate`
  (the chat parser), and, for the trio client, :func:`serving` (a
  :func:`chunkwise.testing.serve_stream` server on a memory stream) with the
  client-side transports :class:`TrackedStream` and :class:`ResettingStream`;
* live JSON values: the strategy :data:`json_texts` makes JSON documents
  written every way ``json.dumps`` writes them; :func:`same_json` compares
  values bit for bit, :func:`grows` checks the growth rules between two
  snapshots, :func:`split_text` cuts text;
* the command line: :func:`run_main` runs ``main()`` in-process, :func:`run_python`
  runs a Python process to its end and :func:`interrupt` sends one a Ctrl-C,
  :func:`slow_words` is a stream to interrupt; :data:`KEY_VAR` and :data:`KEY`
  are the API key the tests pass (``tools/tests/cli/conftest.py`` cleans the
  environment of every command-line test and has the ``api_key`` fixture).
"""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AnyStr, Literal, overload

import attrs
import h11
import pytest
import trio
import trio.testing
from hypothesis import strategies as st

import chunkwise
from chunkwise.testing import (
    Handler,
    LoopbackServer,
    RecordedRequest,
    ResponseWriter,
    Script,
    ScriptedResponse,
    ServerConnection,
    serve_stream,
)
from chunkwise_tools.cli import main
from chunkwise_tools.server import ChatServer, ServerOptions

# --- data ------------------------------------------------------------------------------

DATA = Path(__file__).parent / "data"
#: Real OpenAI streams, recorded byte for byte (see data/README.md).
RECORDINGS = sorted((DATA / "openai_recordings").glob("*.sse"))


def load_vectors() -> list[dict[str, Any]]:
    """The provider streams of ``data/provider_streams.json``, each with its expectations."""
    with open(DATA / "provider_streams.json", encoding="utf-8") as f:
        vectors: list[dict[str, Any]] = json.load(f)
    return vectors


# --- building streams ------------------------------------------------------------------


def chunk(
    *choices: Mapping[str, Any],
    usage: Mapping[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A ``chat.completion.chunk`` with these choices (see :func:`choice`)."""
    body: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "test-model",
        "choices": list(choices),
    }
    if usage is not None:
        body["usage"] = usage
    body.update(extra)
    return body


def choice(index: int = 0, finish_reason: str | None = None, **delta: Any) -> dict[str, Any]:
    """One entry of a chunk's ``choices``; keyword arguments form its ``delta``."""
    return {"index": index, "delta": delta, "finish_reason": finish_reason}


def tool(
    index: int | None = 0,
    *,
    id: str | None = None,
    name: str | None = None,
    arguments: str | None = None,
) -> dict[str, Any]:
    """One entry of a delta's ``tool_calls``; ``None`` leaves a field out."""
    call: dict[str, Any] = {"function": {}}
    if index is not None:
        call["index"] = index
    if id is not None:
        call["id"] = id
        call["type"] = "function"
    if name is not None:
        call["function"]["name"] = name
    if arguments is not None:
        call["function"]["arguments"] = arguments
    return call


def sse(
    *payloads: Mapping[str, Any] | str,
    done: bool = True,
    eol: str = "\n",
    ensure_ascii: bool = False,
    space: bool = True,
    keepalive: bool = False,
) -> bytes:
    """An SSE body with one ``data:`` event per payload (JSON unless a str), then ``[DONE]``.

    ``space=False`` writes ``data:`` with no space after the colon, and
    ``keepalive=True`` puts a ``: keep-alive`` comment before each event.
    """
    prefix = "data: " if space else "data:"
    texts = [
        payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=ensure_ascii)
        for payload in payloads
    ]
    parts = []
    for text in [*texts, "[DONE]"] if done else texts:
        if keepalive:
            parts.append(f": keep-alive{eol}{eol}")
        parts.append(f"{prefix}{text}{eol}{eol}")
    return "".join(parts).encode()


# --- generating chunks (hypothesis) ---------------------------------------------------

#: Any short text that UTF-8 can encode (no lone surrogates).
any_text = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]),
    min_size=1,
    max_size=12,
)
# JSON has no NaN or infinity: json.dumps would write text the parser rejects.
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | any_text,
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.sampled_from(["a", "index", "delta", "content"]), children, max_size=3)
    ),
    max_leaves=8,
)
delta_values = st.fixed_dictionaries(
    {},
    optional={
        "role": json_values,
        "content": json_values,
        "refusal": json_values,
        "reasoning": json_values,
        "reasoning_content": json_values,
        "tool_calls": st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    "index": st.none() | st.integers(-1, 3) | any_text,
                    "id": st.none() | st.sampled_from(["", "a", "b"]),
                    "type": json_values,
                    "function": st.fixed_dictionaries(
                        {}, optional={"name": json_values, "arguments": json_values}
                    )
                    | json_values,
                },
            )
            | json_values,
            max_size=3,
        )
        | json_values,
    },
)
chunk_values = st.fixed_dictionaries(
    {},
    optional={
        "id": json_values,
        "model": json_values,
        "created": json_values,
        "usage": json_values,
        "error": st.none() | json_values,
        "choices": st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    "index": st.integers(0, 2) | json_values,
                    "delta": delta_values | json_values,
                    "finish_reason": st.none()
                    | st.sampled_from(["stop", "", "length"])
                    | json_values,
                    "logprobs": json_values,
                },
            )
            | json_values,
            max_size=3,
        )
        | json_values,
    },
)


# --- live JSON values (chunkwise.PartialJSON) ------------------------------------------

# Text with every kind of character: escapes (ensure_ascii), astral characters
# (surrogate pairs once escaped), control characters, quotes and backslashes.
_json_text = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"])
    | st.sampled_from(['"', "\\", "/", "\n", "\x00", "\x1f", "\u2028", "😀", "é"]),
    max_size=10,
)
json_documents = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(-(10**40), 10**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _json_text,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(_json_text, children, max_size=4)
    ),
    max_leaves=12,
)
json_texts = st.builds(
    lambda value, ascii_only, indent, lead, trail: (
        lead + json.dumps(value, ensure_ascii=ascii_only, indent=indent) + trail
    ),
    json_documents,
    st.booleans(),
    st.sampled_from([None, 0, 2]),
    st.sampled_from(["", " ", "\n\t "]),
    st.sampled_from(["", " ", "\r\n"]),
)


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


def split_text(text: str, cuts: Iterable[int]) -> list[str]:
    """``text`` cut at the given offsets (clamped, any order; repeats give empty pieces)."""
    points = [0, *sorted(min(max(cut, 0), len(text)) for cut in cuts), len(text)]
    return [text[a:b] for a, b in itertools.pairwise(points)]


# --- cutting bytes into reads -------------------------------------------------------


def split_at(data: bytes, cuts: Iterable[int]) -> list[bytes]:
    """``data`` cut at the given offsets, which may come in any order.

    Offsets are clamped to ``0..len(data)``; a repeated offset, or one at
    either end, gives an empty read, which every layer must also accept.
    """
    points = [0, *sorted(min(max(cut, 0), len(data)) for cut in cuts), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(points)]


def pieces_of(data: bytes, size: int) -> list[bytes]:
    """``data`` as reads of ``size`` bytes (the last one may be shorter)."""
    return [data[i : i + size] for i in range(0, len(data), size)]


def byte_reads(data: bytes) -> list[bytes]:
    """``data`` as one-byte reads."""
    return pieces_of(data, 1)


def as_buffers(
    reads: Sequence[bytes], kinds: Sequence[int]
) -> list[bytes | bytearray | memoryview]:
    """Each read as bytes (0), a bytearray (1) or a memoryview (2), cycling through ``kinds``."""
    out: list[bytes | bytearray | memoryview] = []
    for i, read in enumerate(reads):
        kind = kinds[i % len(kinds)] if kinds else 0
        if kind == 1:
            out.append(bytearray(read))
        elif kind == 2:
            # A view into the middle of a larger buffer, not offset 0.
            out.append(memoryview(b"#" + read + b"#")[1:-1])
        else:
            out.append(read)
    return out


# --- the SSE decoder --------------------------------------------------------------------

BOM = "\ufeff"
_LINE_END = re.compile(r"\r\n|\r|\n")
_ASCII_DIGITS = frozenset("0123456789")


@attrs.frozen(kw_only=True)
class SSEOutcome:
    """Everything observable after a whole stream has been decoded and ended."""

    events: tuple[chunkwise.ServerSentEvent, ...]
    unterminated: bool
    last_event_id: str
    retry: int | None


def decode_sse(
    reads: Iterable[bytes | bytearray | memoryview],
    *,
    legacy_error_field: bool = False,
    max_event_size: int | None = None,
) -> SSEOutcome:
    """Feed every read to a fresh :class:`chunkwise.SSEDecoder`, then ``end()`` it."""
    if max_event_size is None:
        decoder = chunkwise.SSEDecoder(legacy_error_field=legacy_error_field)
    else:
        decoder = chunkwise.SSEDecoder(
            max_event_size=max_event_size, legacy_error_field=legacy_error_field
        )
    events: list[chunkwise.ServerSentEvent] = []
    for read in reads:
        events.extend(decoder.feed(read))
    events.extend(decoder.end())
    return SSEOutcome(
        events=tuple(events),
        unterminated=decoder.unterminated,
        last_event_id=decoder.last_event_id,
        retry=decoder.retry,
    )


def ev(
    data: str, *, event: str = "message", id: str = "", retry: int | None = None
) -> chunkwise.ServerSentEvent:
    """Shorthand for an expected event."""
    return chunkwise.ServerSentEvent(event=event, data=data, id=id, retry=retry)


def reference_decode_sse(data: bytes, *, legacy_error_field: bool = False) -> SSEOutcome:
    """The WHATWG "Interpreting an event stream" algorithm, transcribed naively.

    It decodes the whole stream, splits it into lines and walks them: slow and
    unbounded, but obviously correct, so the incremental decoder is compared
    with it (``max_event_size`` does not exist here).
    """
    text = data.decode("utf-8", errors="replace")
    if text.startswith(BOM):
        text = text[1:]
    *lines, partial = _LINE_END.split(text)

    events: list[chunkwise.ServerSentEvent] = []
    data_lines: list[str] = []
    error_lines: list[str] = []
    event_type = ""
    last_event_id = ""
    id_buffer = ""  # WHATWG's "last event ID buffer": committed at each blank line
    retry: int | None = None
    block_retry: int | None = None
    pending_fields = False  # any non-comment line since the last blank line
    for line in lines:
        if line == "":
            last_event_id = id_buffer
            if data_lines:
                events.append(
                    chunkwise.ServerSentEvent(
                        event=event_type or "message",
                        data="\n".join(data_lines),
                        id=last_event_id,
                        retry=block_retry,
                    )
                )
            elif legacy_error_field and error_lines:
                events.append(
                    chunkwise.ServerSentEvent(
                        event="error",
                        data="\n".join(error_lines),
                        id=last_event_id,
                        retry=block_retry,
                    )
                )
            data_lines, error_lines = [], []
            event_type, block_retry, pending_fields = "", None, False
            continue
        if line.startswith(":"):
            continue
        pending_fields = True
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            data_lines.append(value)
        elif name == "event":
            event_type = value
        elif name == "id":
            if "\0" not in value:
                id_buffer = value
        elif name == "retry":
            if value and set(value) <= _ASCII_DIGITS:
                retry = block_retry = int(value)
        elif name == "error" and legacy_error_field:
            error_lines.append(value)

    # A partial line or any field line (known or not) not yet followed by a
    # blank line is discarded: "unterminated".  Comments never count.
    partial_is_field = bool(partial) and not partial.startswith(":")
    return SSEOutcome(
        events=tuple(events),
        unterminated=pending_fields or partial_is_field,
        last_event_id=last_event_id,
        retry=retry,
    )


# --- the chat parser --------------------------------------------------------------------


def parse_chat(
    reads: Iterable[bytes], **kwargs: Any
) -> tuple[list[chunkwise.Event], chunkwise.chat.Result]:
    """Feed every read to a fresh :class:`chunkwise.chat.Parser`; its events and result."""
    parser = chunkwise.chat.Parser(**kwargs)
    events: list[chunkwise.Event] = []
    for read in reads:
        events += parser.feed(read)
    events += parser.end()
    return events, parser.result


def accumulate(
    chunks: Sequence[Mapping[str, Any]], **kwargs: Any
) -> tuple[list[chunkwise.Event], chunkwise.chat.Result]:
    """Feed decoded chunks to a fresh :class:`chunkwise.chat.Accumulator`."""
    accumulator = chunkwise.chat.Accumulator(**kwargs)
    events: list[chunkwise.Event] = []
    for c in chunks:
        events += accumulator.feed(c)
    events += accumulator.end()
    return events, accumulator.result


def completion_chunk(
    *choices: Mapping[str, Any], id: str = "cmpl-1", **extra: Any
) -> dict[str, Any]:
    """A legacy ``text_completion`` chunk with these choices."""
    return {
        "id": id,
        "object": "text_completion",
        "created": 1,
        "model": "m",
        "choices": list(choices),
        **extra,
    }


def text_choice(
    text: str | None = "", index: int = 0, finish_reason: str | None = None, **extra: Any
) -> dict[str, Any]:
    """One choice of a legacy completion chunk."""
    return {"index": index, "text": text, "finish_reason": finish_reason, **extra}


def parse_completion(
    reads: Iterable[bytes],
) -> tuple[list[chunkwise.Event], chunkwise.completions.Result]:
    """Feed every read to a fresh :class:`chunkwise.completions.Parser`."""
    parser = chunkwise.completions.Parser()
    events: list[chunkwise.Event] = []
    for read in reads:
        events += parser.feed(read)
    events += parser.end()
    return events, parser.result


def accumulate_completion(
    chunks: Sequence[Mapping[str, Any]],
) -> tuple[list[chunkwise.Event], chunkwise.completions.Result]:
    """Feed decoded chunks to a fresh :class:`chunkwise.completions.Accumulator`."""
    accumulator = chunkwise.completions.Accumulator()
    events: list[chunkwise.Event] = []
    for c in chunks:
        events += accumulator.feed(c)
    events += accumulator.end()
    return events, accumulator.result


def terminal(events: Sequence[chunkwise.Event]) -> chunkwise.Event:
    """The one terminal event, checked to be the last one."""
    terminals = [e for e in events if isinstance(e, chunkwise.TerminalEvent)]
    assert len(terminals) == 1, terminals
    assert events[-1] is terminals[0]
    return terminals[0]


# --- the trio client: a served memory stream and client-side transports ----------------


@asynccontextmanager
async def serving(
    script: Script, *, lockstep: bool = False
) -> AsyncIterator[tuple[trio.abc.HalfCloseableStream, ServerConnection]]:
    """Serve ``script`` on one end of a memory stream; yield the client's end and the connection.

    The server is :func:`chunkwise.testing.serve_stream`, so ``script`` is a
    :class:`~chunkwise.testing.ScriptedResponse`, a list of them or a handler,
    and the :class:`~chunkwise.testing.ServerConnection` records the requests
    and sets ``client_closed`` once the client has closed its end.  Memory
    streams run in virtual time under ``autojump_clock``; ``lockstep=True``
    hands the server's bytes over only as the client reads them, so what the
    client received is all the server could send.  Leaving the block stops the
    server, finished or not.
    """
    pair = trio.testing.lockstep_stream_pair if lockstep else trio.testing.memory_stream_pair
    client, server = pair()
    async with trio.open_nursery() as nursery:
        connection: ServerConnection = await nursery.start(serve_stream, server, script)
        yield client, connection
        nursery.cancel_scope.cancel()


def sse_typed(*events: Mapping[str, Any], eol: str = "\n") -> bytes:
    """A Responses API body: ``event: <type>`` + ``data: <json>`` per event, no ``[DONE]``."""
    return "".join(
        f"event: {event['type']}{eol}data: {json.dumps(event, ensure_ascii=False)}{eol}{eol}"
        for event in events
    ).encode()


def close_delimited(body: bytes, **kwargs: Any) -> ScriptedResponse:
    """A response whose body has no length: the server's close ends it."""
    return ScriptedResponse(body=body, framing="close", **kwargs)


def then_hang(response: ScriptedResponse) -> Handler:
    """A handler playing ``response``, then neither ending it nor closing: a silent server.

    Only a close-delimited body can be left open this way: the connection,
    which would end it, is closed when the handler returns, and it never does.
    """
    if response.framing != "close":
        raise ValueError("then_hang needs framing='close': other framings end the body")

    async def handler(request: RecordedRequest, writer: ResponseWriter) -> None:
        await writer.play(response)
        await trio.sleep_forever()

    return handler


class TrackedStream(trio.abc.Stream):
    """Delegates to ``inner``; keeps the bytes received and remembers closing."""

    def __init__(self, inner: trio.abc.Stream) -> None:
        self.inner = inner
        self.data = bytearray()
        self.closed = False

    @property
    def received(self) -> int:
        """How many bytes were received."""
        return len(self.data)

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        data = await self.inner.receive_some(max_bytes)
        self.data += data
        return data

    async def aclose(self) -> None:
        self.closed = True
        await self.inner.aclose()


class ResettingStream(TrackedStream):
    """A client transport whose peer resets the connection instead of closing it.

    While ``reset`` is true, the end of the peer's data raises
    :class:`trio.BrokenResourceError`, as receiving on a socket that got a TCP
    reset does; the data before it is delivered as usual.
    """

    def __init__(self, inner: trio.abc.Stream, *, reset: bool = True) -> None:
        super().__init__(inner)
        self.reset = reset

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        data = await super().receive_some(max_bytes)
        if not data and self.reset:
            raise trio.BrokenResourceError("connection reset by peer")
        return data


class CutStream(trio.abc.Stream):
    """A server's end of a connection that breaks after ``body_bytes`` bytes of its body.

    Bytes are counted from the end of the response head (the first blank
    line sent), framing included, and kept in ``body``; at the cut the
    connection is closed and every later send raises
    :class:`trio.BrokenResourceError`, as a reset socket would.  ``None``: no cut.
    ``how="hang"`` goes silent at the cut instead (the connection stays open);
    ``how="garble"`` sends an invalid chunk-size line, then closes.
    """

    def __init__(
        self,
        inner: trio.abc.Stream,
        body_bytes: int | None,
        how: Literal["close", "hang", "garble"] = "close",
    ) -> None:
        self.inner = inner
        self.how = how
        self.left = sys.maxsize if body_bytes is None else body_bytes
        self.body = bytearray()
        self.head: bytearray | None = bytearray()  # None once the head was sent
        self.cut = False

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        if self.cut:
            raise trio.BrokenResourceError("the connection was cut")
        data = bytes(data)
        if self.head is not None:
            seen = len(self.head)
            self.head += data
            end = self.head.find(b"\r\n\r\n")
            if end < 0:
                await self.inner.send_all(data)
                return
            body_start = end + 4 - seen
            self.head = None
            await self.inner.send_all(data[:body_start])
            data = data[body_start:]
        if len(data) > self.left:
            self.body += data[: self.left]
            await self.inner.send_all(data[: self.left])
            self.cut = True
            if self.how == "hang":
                await trio.sleep_forever()
            if self.how == "garble":
                await self.inner.send_all(b"\r\nzz\r\n")
            await self.inner.aclose()
            raise trio.BrokenResourceError("the connection was cut")
        self.left -= len(data)
        self.body += data
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        if self.cut:
            raise trio.ClosedResourceError("the connection was cut")
        return await self.inner.receive_some(max_bytes)

    async def aclose(self) -> None:
        await self.inner.aclose()


@attrs.define
class MemoryNetwork:
    """Connections the client opens (``trio.open_tcp_stream``), served in memory by ``handler``.

    ``cuts[n]`` (a body byte offset, or None) cuts the n-th connection's
    body there (:class:`CutStream`); later connections are whole.
    ``streams`` are the server's ends, in the order they were opened.
    """

    nursery: trio.Nursery
    handler: Any
    cuts: Sequence[int | None] = ()
    how: Literal["close", "hang", "garble"] = "close"
    streams: list[CutStream] = attrs.Factory(list)

    @property
    def opened(self) -> int:
        """How many connections the client opened."""
        return len(self.streams)

    async def open_tcp_stream(self, host: str, port: int, **kwargs: Any) -> trio.abc.Stream:
        client, served = trio.testing.memory_stream_pair()
        cut = self.cuts[self.opened] if self.opened < len(self.cuts) else None
        server = CutStream(served, cut, self.how)
        self.streams.append(server)
        self.nursery.start_soon(serve_stream, server, self.handler)
        return client


@asynccontextmanager
async def memory_network(
    monkeypatch: pytest.MonkeyPatch,
    cuts: Sequence[int | None] = (),
    how: Literal["close", "hang", "garble"] = "close",
    **options: Any,
) -> AsyncIterator[MemoryNetwork]:
    """A :class:`~chunkwise_tools.server.ChatServer` (``options``) that every connection reaches.

    Its background runs live in this block's nursery, so virtual time
    (``autojump_clock``) is exact; leaving the block stops them.
    """
    async with trio.open_nursery() as nursery:
        handler = ChatServer(ServerOptions(**options), nursery=nursery)
        network = MemoryNetwork(nursery, handler, cuts, how)
        monkeypatch.setattr(trio, "open_tcp_stream", network.open_tcp_stream)
        yield network
        nursery.cancel_scope.cancel()


# --- the command line ---------------------------------------------------------------

#: The repository: the examples and the docs are read, and processes run, from here.
REPO = Path(__file__).resolve().parent.parent
#: The variable the command-line tests name with ``--api-key-env``, and the key
#: the ``api_key`` fixture (``tools/tests/cli/conftest.py``) puts in it.
KEY_VAR = "CHUNKWISE_TEST_KEY"
KEY = "sk-test-SECRET-0123456789abcdef"

#: A tool with a schema: ``{"city": str}``, ``city`` required.
WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


async def run_main(capsys: pytest.CaptureFixture[AnyStr], *argv: str) -> tuple[int, AnyStr, AnyStr]:
    """Run ``chunkwise *argv`` in-process: its exit status and what it wrote to stdout and stderr.

    ``main()`` runs its own ``trio.run``, so it runs in a worker thread while the
    test's trio loop goes on (serving the requests it sends, say).  ``capsys``
    or ``capsysbinary`` says whether the output is text or bytes.
    """
    status = await trio.to_thread.run_sync(main, list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def slow_words(count: int = 200, delay: float = 0.05) -> ScriptedResponse:
    """``count`` words (``"word0 "``, ``"word1 "``...), an event a write, ``delay`` s apart."""
    words = [chunk(choice(content=f"word{i} ")) for i in range(count)]
    body = sse(*words, chunk(choice(finish_reason="stop")))
    sizes = [len(event) + 2 for event in body.split(b"\n\n")[:-1]]
    return ScriptedResponse(body=body, write_sizes=sizes, delay=delay)


def child_environment(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The test's environment, in UTF-8 mode and unbuffered, with ``env`` added.

    For the command-line tests that environment is already clean: their
    conftest removes the variables (``OPENAI_*`` and others) a command reads.
    """
    return {**os.environ, "PYTHONUTF8": "1", "PYTHONUNBUFFERED": "1", **(env or {})}


@overload
async def run_python(
    *args: str,
    env: Mapping[str, str] | None = None,
    text: Literal[True] = True,
) -> tuple[int, str, str]: ...


@overload
async def run_python(
    *args: str,
    env: Mapping[str, str] | None = None,
    text: Literal[False],
) -> tuple[int, bytes, bytes]: ...


async def run_python(
    *args: str,
    env: Mapping[str, str] | None = None,
    text: bool = True,
) -> tuple[int, str, str] | tuple[int, bytes, bytes]:
    """Run ``python *args`` in the repository to its end: its exit status, stdout and stderr.

    The process has the test's environment and ``env``, in UTF-8 mode (which a
    ``PYTHONIOENCODING`` in ``env`` overrides); its output is decoded from
    UTF-8 unless ``text`` is false.  It must end within two minutes.
    """
    with trio.fail_after(120):
        process = await trio.run_process(
            [sys.executable, *args],
            cwd=REPO,
            env=child_environment(env),
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    if text:
        return process.returncode, process.stdout.decode(), process.stderr.decode()
    return process.returncode, process.stdout, process.stderr


async def read_until(stream: trio.abc.ReceiveStream, into: bytearray, marker: bytes) -> bool:
    """Receive from ``stream`` into ``into`` until ``marker`` is there; false if it ended first."""
    while marker not in into:
        data = await stream.receive_some()
        if not data:
            return False
        into.extend(data)
    return True


async def collect(stream: trio.abc.ReceiveStream, into: bytearray) -> None:
    """Receive everything ``stream`` sends, up to its end, into ``into``."""
    async for data in stream:
        into.extend(data)


# ``python -m chunkwise``, once chunkwise is imported and it said so on stderr:
# a SIGINT during the imports would come before main() can handle anything.
_READY = b"ready\n"
_BOOT = (
    "import runpy, sys, chunkwise_tools.cli\n"
    "print('ready', file=sys.stderr, flush=True)\n"
    "runpy.run_module('chunkwise', run_name='__main__', alter_sys=True)\n"
)


async def interrupt(
    argv: Sequence[str],
    *,
    after_stdout: bytes | None = None,
    after: Callable[[], Awaitable[object]] | None = None,
    wait: float = 0.0,
) -> tuple[int, str, str]:
    """Run ``python -m chunkwise *argv``, then SIGINT it: its exit status, stdout and stderr.

    The signal comes once chunkwise is imported and then, in this order, once
    ``after_stdout`` is on its stdout, ``after()`` has returned and ``wait``
    more seconds have passed.  The process has the test's environment (see
    :func:`child_environment`) and a stdin that stays open and empty
    (``inspect -`` waits on it).  It must all take less than 30 seconds.
    """
    out = bytearray()
    err = bytearray()
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            process = await trio.lowlevel.open_process(
                [sys.executable, "-c", _BOOT, *argv],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=child_environment(),
            )
            assert process.stdin is not None
            assert process.stdout is not None and process.stderr is not None
            try:
                assert await read_until(process.stderr, err, _READY), bytes(err)
                nursery.start_soon(collect, process.stderr, err)
                if after_stdout is not None:
                    assert await read_until(process.stdout, out, after_stdout), bytes(err)
                nursery.start_soon(collect, process.stdout, out)
                if after is not None:
                    await after()
                await trio.sleep(wait)
                process.send_signal(signal.SIGINT)
                status = await process.wait()
            finally:
                if process.returncode is None:
                    process.kill()
            await process.stdin.aclose()
    return status, out.decode(), err.decode().removeprefix(_READY.decode())


# --- the Responses API --------------------------------------------------------------


def response_sse(
    *payloads: Mapping[str, Any] | str, eol: str = "\n", event_field: bool = True
) -> bytes:
    """A Responses SSE body: each payload as ``event: <type>`` and one ``data:`` line.

    A str payload is written as the data as is (``[DONE]``, invalid JSON...);
    ``event_field=False`` leaves the ``event:`` lines out.
    """
    parts = []
    for payload in payloads:
        if isinstance(payload, str):
            parts.append(f"data: {payload}{eol}{eol}")
            continue
        kind = payload.get("type")
        head = f"event: {kind}{eol}" if event_field and isinstance(kind, str) else ""
        parts.append(f"{head}data: {json.dumps(payload, ensure_ascii=False)}{eol}{eol}")
    return "".join(parts).encode()


def parse_response(
    reads: Iterable[bytes], **kwargs: Any
) -> tuple[list[chunkwise.Event], chunkwise.responses.Result]:
    """Feed every read to a fresh :class:`chunkwise.responses.Parser`; its events and result."""
    parser = chunkwise.responses.Parser(**kwargs)
    events: list[chunkwise.Event] = []
    for read in reads:
        events += parser.feed(read)
    events += parser.end()
    return events, parser.result


def accumulate_response(
    events: Iterable[Mapping[str, Any]], **kwargs: Any
) -> tuple[list[chunkwise.Event], chunkwise.responses.Result]:
    """Feed decoded events to a fresh :class:`chunkwise.responses.Accumulator`, then end it."""
    accumulator = chunkwise.responses.Accumulator(**kwargs)
    out: list[chunkwise.Event] = []
    for event in events:
        out += accumulator.feed(event)
    out += accumulator.end()
    return out, accumulator.result


def response_object(
    status: str = "in_progress",
    output: Sequence[Mapping[str, Any]] | None = (),
    usage: Mapping[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A Responses ``response`` object as OpenAI sends it in lifecycle and terminal events."""
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 1741290958,
        "status": status,
        "error": None,
        "incomplete_details": None,
        "model": "gpt-4.1-2025-04-14",
        "output": None if output is None else list(output),
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": None if usage is None else dict(usage),
        **extra,
    }


def response_usage(input_tokens: int = 10, output_tokens: int = 5) -> dict[str, Any]:
    """A Responses ``usage`` object, with its detail objects."""
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input_tokens + output_tokens,
    }


def message_item(
    item_id: str = "msg_1", *texts: str, status: str = "completed", refusal: str | None = None
) -> dict[str, Any]:
    """A finished ``message`` item: one ``output_text`` part per text (then a refusal part)."""
    content: list[dict[str, Any]] = [
        {"type": "output_text", "text": text, "annotations": [], "logprobs": []} for text in texts
    ]
    if refusal is not None:
        content.append({"type": "refusal", "refusal": refusal})
    return {
        "id": item_id,
        "type": "message",
        "status": status,
        "role": "assistant",
        "content": content,
    }


def call_item(
    item_id: str, call_id: str, name: str, arguments: str, status: str = "completed"
) -> dict[str, Any]:
    """A ``function_call`` item."""
    return {
        "id": item_id,
        "type": "function_call",
        "status": status,
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
    }


def text_events(
    output_index: int | None, item_id: str, pieces: Sequence[str], content_index: int | None = 0
) -> list[dict[str, Any]]:
    """The events of one message with one ``output_text`` part, OpenAI's order, without
    ``sequence_number`` (see :func:`numbered`); a None index is left out (llama.cpp)."""
    text = "".join(pieces)
    where = _indices(output_index, content_index)
    part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
    events: list[dict[str, Any]] = [
        {
            "type": "response.output_item.added",
            **_indices(output_index, None),
            "item": {**message_item(item_id, status="in_progress"), "content": []},
        },
        {"type": "response.content_part.added", "item_id": item_id, **where, "part": part},
    ]
    events += [
        {"type": "response.output_text.delta", "item_id": item_id, **where, "delta": p}
        for p in pieces
    ]
    events += [
        {"type": "response.output_text.done", "item_id": item_id, **where, "text": text},
        {
            "type": "response.content_part.done",
            "item_id": item_id,
            **where,
            "part": {**part, "text": text},
        },
        {
            "type": "response.output_item.done",
            **_indices(output_index, None),
            "item": message_item(item_id, text),
        },
    ]
    return events


def call_events(
    output_index: int | None, item_id: str, call_id: str, name: str, pieces: Sequence[str]
) -> list[dict[str, Any]]:
    """The events of one function call, OpenAI's order (see :func:`text_events`)."""
    arguments = "".join(pieces)
    where = {**_indices(output_index, None), "item_id": item_id}
    events: list[dict[str, Any]] = [
        {
            "type": "response.output_item.added",
            **_indices(output_index, None),
            "item": call_item(item_id, call_id, name, "", status="in_progress"),
        }
    ]
    events += [
        {"type": "response.function_call_arguments.delta", **where, "delta": p} for p in pieces
    ]
    events += [
        {"type": "response.function_call_arguments.done", **where, "arguments": arguments},
        {
            "type": "response.output_item.done",
            **_indices(output_index, None),
            "item": call_item(item_id, call_id, name, arguments),
        },
    ]
    return events


def _indices(output_index: int | None, content_index: int | None) -> dict[str, int]:
    where = {}
    if output_index is not None:
        where["output_index"] = output_index
    if content_index is not None:
        where["content_index"] = content_index
    return where


def numbered(events: Iterable[Mapping[str, Any]], start: int = 0) -> list[dict[str, Any]]:
    """The events with ``sequence_number`` 0, 1, 2... (from ``start``), as OpenAI numbers them."""
    return [{**event, "sequence_number": start + i} for i, event in enumerate(events)]


def rotated(events: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``events`` as a Copilot Responses endpoint sends them: a new response id and a new
    item id on every event that carries one (``capture-id-N``, as in its recordings)."""
    fresh = iter(f"capture-id-{n}" for n in itertools.count(1))
    out = []
    for event in json.loads(json.dumps(list(events))):
        if "response" in event:
            event["response"]["id"] = next(fresh)
            for item in event["response"].get("output") or ():
                item["id"] = next(fresh)
        if "item" in event:
            event["item"]["id"] = next(fresh)
        if "item_id" in event:
            event["item_id"] = next(fresh)
        out.append(event)
    return out


#: Short texts for Responses streams: any UTF-8 text, with astral characters,
#: combining marks and ZWJ sequences made likely.
response_text = st.lists(
    st.sampled_from(["😀", "e\u0301", "\u0301", "𝄞", "\U0001f468\u200d\U0001f469", "ß", " "])
    | st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=3),
    max_size=3,
).map("".join)


@attrs.frozen(kw_only=True)
class GeneratedResponse:
    """A generated Responses stream (:func:`response_streams`) and what it must give.

    ``events`` are the decoded events in order (keepalives included, the
    comments and a proxy's ``[DONE]`` are only in ``body``); ``parts`` maps
    ``(output position, "content" or "summary", part index)`` to the part's
    type and text; ``calls`` are ``(call_id, name, arguments)`` in output order;
    ``terminal_end`` is the offset in ``body`` just after the terminal event.
    ``indexed`` is false for a llama.cpp-style stream (no ``output_index``,
    ``content_index``, ``summary_index`` nor ``sequence_number``).
    """

    events: tuple[Mapping[str, Any], ...]
    body: bytes
    parts: Mapping[tuple[int, str, int], tuple[str, str]]
    calls: tuple[tuple[str, str, str], ...]
    output_text: str
    terminal_end: int
    indexed: bool


#: For messages and reasoning items: the part list, its index key, the part
#: events' and the text events' names.
_PART_NAMES = {
    "message": ("content", "content_index", "content_part", "output_text"),
    "reasoning": ("summary", "summary_index", "reasoning_summary_part", "reasoning_summary_text"),
}


def _generated_item(
    draw: st.DrawFn, position: int, indexed: bool
) -> tuple[
    list[dict[str, Any]], dict[str, Any], dict[tuple[int, str, int], tuple[str, str]], list[str]
]:
    """One item's events (its own order), the finished item, its parts' texts and call."""
    kind = draw(st.sampled_from(["message", "function_call", "reasoning"]))
    at = {"output_index": position} if indexed else {}
    item_id = f"{kind[:2]}_{position}"
    parts: dict[tuple[int, str, int], tuple[str, str]] = {}
    if kind == "function_call":
        pieces = draw(st.lists(response_text, max_size=4))
        call_id, name = f"call_{position}", draw(st.sampled_from(["f", "get_weather"]))
        events = call_events(position if indexed else None, item_id, call_id, name, pieces)
        return events, events[-1]["item"], parts, [call_id, name, "".join(pieces)]
    which, index_key, part_event, delta_event = _PART_NAMES[kind]
    done_event, text_key, list_key = f"response.{delta_event}.done", "text", which
    head: dict[str, Any] = {"id": item_id, "type": kind}
    head.update({"summary": []} if kind == "reasoning" else {"role": "assistant", "content": []})
    events = [
        {"type": "response.output_item.added", **at, "item": {**head, "status": "in_progress"}}
    ]
    finished: list[dict[str, Any]] = []
    for p in range(draw(st.integers(1, 3)) if indexed else 1):
        part_type = "summary_text" if kind == "reasoning" else "output_text"
        is_refusal = kind == "message" and indexed and draw(st.integers(0, 3)) == 0
        delta_type, done_type, key = (
            ("response.refusal.delta", "response.refusal.done", "refusal")
            if is_refusal
            else (f"response.{delta_event}.delta", done_event, text_key)
        )
        part_type = "refusal" if is_refusal else part_type
        where = {"item_id": item_id, **at, **({index_key: p} if indexed else {})}
        pieces = draw(st.lists(response_text, max_size=4))
        text = "".join(pieces)
        empty = {"type": part_type, key: ""}
        events.append({"type": f"response.{part_event}.added", **where, "part": empty})
        events += [
            {"type": delta_type, **where, "delta": piece, "obfuscation": "x1"}
            for piece in pieces
            if piece
        ]
        events.append({"type": done_type, **where, key: text})
        events.append(
            {"type": f"response.{part_event}.done", **where, "part": {**empty, key: text}}
        )
        finished.append({"type": part_type, key: text})
        parts[(position, which, p)] = (part_type, text)
    item = {**head, "status": "completed", list_key: finished}
    events.append({"type": "response.output_item.done", **at, "item": item})
    return events, item, parts, []


@st.composite
def response_streams(draw: st.DrawFn) -> GeneratedResponse:
    """A Responses stream: interleaved items, keepalives, comments, any line ending."""
    indexed = draw(st.booleans())
    queues: list[list[dict[str, Any]]] = []
    items: list[dict[str, Any]] = []
    parts: dict[tuple[int, str, int], tuple[str, str]] = {}
    calls: list[tuple[str, str, str]] = []
    for position in range(draw(st.integers(1, 4))):
        events, item, item_parts, call = _generated_item(draw, position, indexed)
        queues.append(events)
        items.append(item)
        parts.update(item_parts)
        if call:
            calls.append((call[0], call[1], call[2]))
    # Interleave the items, each in its own order; items are added in output order.
    order: list[dict[str, Any]] = [
        {"type": "response.created", "response": response_object()},
        {"type": "response.in_progress", "response": response_object()},
    ]
    started = 0
    while any(queues):
        ready = [i for i, q in enumerate(queues) if q and i <= started]
        i = draw(st.sampled_from(ready))
        started = max(started, i + 1)
        order.append(queues[i].pop(0))
        if draw(st.integers(0, 7)) == 0:
            order.append({"type": "keepalive"})
    output = draw(st.sampled_from(["items", "null", "empty"]))
    final = response_object(
        "completed", None if output == "null" else ([] if output == "empty" else items)
    )
    final["usage"] = response_usage(3, 4)
    order.append({"type": "response.completed", "response": final})
    if indexed:
        order = numbered(order)
    else:
        order = [{k: v for k, v in e.items() if k != "sequence_number"} for e in order]
        order[0]["response"] = {"id": "resp_1", "object": "response", "status": "in_progress"}
    eol = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    event_field = draw(st.booleans())
    ascii_only = draw(st.booleans())
    chunks: list[str] = []
    for event in order:
        if draw(st.integers(0, 6)) == 0:
            chunks.append(f": ping{eol}{eol}")
        head = f"event: {event['type']}{eol}" if event_field else ""
        chunks.append(f"{head}data: {json.dumps(event, ensure_ascii=ascii_only)}{eol}{eol}")
    terminal_end = len("".join(chunks).encode())
    if draw(st.booleans()):
        chunks.append(f"data: [DONE]{eol}{eol}")
    output_text = "".join(
        text for _, (kind, text) in sorted(parts.items()) if kind == "output_text"
    )
    return GeneratedResponse(
        events=tuple(order),
        body="".join(chunks).encode(),
        parts=parts,
        calls=tuple(calls),
        output_text=output_text,
        terminal_end=terminal_end,
        indexed=indexed,
    )


@attrs.frozen(kw_only=True)
class Exchange:
    """One HTTP/1.1 exchange as the client saw it; ``complete`` is false for a cut body."""

    status: int
    headers: dict[str, str]
    body: bytes
    complete: bool


async def exchange(
    stream: trio.abc.Stream,
    method: str,
    path: str,
    body: bytes = b"",
    headers: tuple[tuple[str, str], ...] = (),
) -> Exchange:
    """One raw HTTP/1.1 exchange on ``stream``; a cut body is returned as far as it got."""
    client = h11.Connection(h11.CLIENT)
    fields = [("Host", "127.0.0.1"), ("Content-Length", str(len(body))), *headers]
    data = client.send(h11.Request(method=method, target=path, headers=fields))
    if body:
        data = (data or b"") + (client.send(h11.Data(data=body)) or b"")
    await stream.send_all((data or b"") + (client.send(h11.EndOfMessage()) or b""))
    status, received = 0, b""
    response_headers: dict[str, str] = {}
    while True:
        try:
            event = client.next_event()
        except h11.RemoteProtocolError:
            return Exchange(status=status, headers=response_headers, body=received, complete=False)
        if event is h11.NEED_DATA:
            client.receive_data(bytes(await stream.receive_some(65536)))
        elif isinstance(event, h11.Response):
            status = event.status_code
            response_headers = {
                name.decode().lower(): value.decode() for name, value in event.headers
            }
        elif isinstance(event, h11.Data):
            received += event.data
        elif isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
            complete = isinstance(event, h11.EndOfMessage)
            return Exchange(
                status=status, headers=response_headers, body=received, complete=complete
            )


async def http_exchange(
    server: LoopbackServer,
    method: str,
    path: str,
    body: bytes = b"",
    headers: tuple[tuple[str, str], ...] = (),
) -> tuple[int, dict[str, str], bytes]:
    """One raw HTTP/1.1 exchange: (status, lower-cased headers, body)."""
    stream = await trio.open_tcp_stream(server.host, server.port)
    async with stream:
        got = await exchange(stream, method, path, body, headers)
    return got.status, got.headers, got.body


# --- a terminal, for the live output ----------------------------------------------------

_CSI = re.compile(r"\x1b\[(\d*)([A-Za-z])")


class Terminal:
    """The few escapes ``chunkwise chat`` / ``demo`` write, played on a grid of lines.

    Text, ``\\n``, ``\\r``, cursor up (``ESC [ n A``), erase to the end of the
    screen (``ESC [ J``) and SGR (``ESC [ ... m``, ignored).  Any other escape
    fails the test; lines are never wrapped (a live row that would wrap is a
    bug the region's own tests catch).  ``frames`` is the screen as it was
    before each erase: what a person saw between two redraws.
    """

    def __init__(self) -> None:
        self.lines: list[str] = [""]
        self.row = 0
        self.column = 0
        self.frames: list[list[str]] = []

    def feed(self, output: str) -> Terminal:
        position = 0
        for match in _CSI.finditer(output):
            self._text(output[position : match.start()])
            count, command = match.groups()
            if command == "A":
                self.row = max(self.row - int(count or "1"), 0)
            elif command == "J":
                self.frames.append(self.screen)
                del self.lines[self.row + 1 :]
                self.lines[self.row] = self.lines[self.row][: self.column]
            else:
                assert command == "m", f"unexpected escape {match.group()!r}"
            position = match.end()
        self._text(output[position:])
        return self

    def _text(self, text: str) -> None:
        for char in text:
            if char == "\n":
                self.row += 1
                self.column = 0
                if self.row == len(self.lines):
                    self.lines.append("")
            elif char == "\r":
                self.column = 0
            else:
                line = self.lines[self.row].ljust(self.column)
                self.lines[self.row] = line[: self.column] + char + line[self.column + 1 :]
                self.column += 1

    @property
    def screen(self) -> list[str]:
        """The lines shown, the empty last line (where the cursor waits) left off."""
        return self.lines[:-1] if self.lines[-1] == "" else list(self.lines)

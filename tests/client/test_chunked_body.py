"""Chunked bodies are read as h11 reads them (:mod:`chunkwise._chunked`, rule 1).

h11 is the oracle.  Generated bodies, valid and corrupted (a byte changed,
inserted or dropped, a cut), split into reads every way, go:

- to :class:`ChunkedBody`, then, from the last chunk's line on, to h11, as
  :mod:`chunkwise._http11` does; and to h11 alone.  Both must hand out the same
  data and agree on how it ends: the message's end, an error, or more to come;
- through a whole :class:`~chunkwise._http11.Connection`, head first (with a
  1xx before it, the blank line split anywhere), once reading the chunks itself
  and once with h11 reading everything.  Same data, same error type.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import h11
import pytest
import trio
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from chunkwise import _http11
from chunkwise._chunked import MAX_LINE, ChunkedBody
from chunkwise._endpoint import Endpoint
from chunkwise._errors import ChunkwiseError
from chunkwise._http import open_http_response
from chunkwise._retries import Retries
from helpers import split_at

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
REQUEST = b'{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}'


@st.composite
def chunk_lines(draw: st.DrawFn, size: int) -> bytes:
    digits = f"{size:x}"
    digits = "0" * draw(st.integers(0, 2)) + draw(st.sampled_from([digits, digits.upper()]))
    extension = draw(st.sampled_from(["", ";a=1", ';name="q\\"x"', ";\r;"]))
    space = draw(st.sampled_from(["", " ", "\t "]))
    return f"{digits}{extension}{space}\r\n".encode()


@st.composite
def chunked_bodies(draw: st.DrawFn) -> bytes:
    parts: list[bytes] = []
    for data in draw(st.lists(st.binary(min_size=1, max_size=40), max_size=6)):
        parts += [draw(chunk_lines(len(data))), data, b"\r\n"]
    parts.append(draw(chunk_lines(0)))
    for name, value in draw(st.lists(st.sampled_from([(b"X-T", b"1"), (b"Y", b"a b")]))):
        parts.append(name + b": " + value + b"\r\n")
    parts.append(b"\r\n")
    body = b"".join(parts)
    how = draw(st.sampled_from(["valid", "change", "insert", "drop", "cut"]))
    if how != "valid":
        at = draw(st.integers(0, len(body) - 1))
        byte = bytes([draw(st.sampled_from(b"\r\n0aAz; \t:\x00"))])
        body = {
            "change": body[:at] + byte + body[at + 1 :],
            "insert": body[:at] + byte + body[at:],
            "drop": body[:at] + body[at + 1 :],
            "cut": body[:at],
        }[how]
    return body


def split(data: bytes, cuts: Sequence[int]) -> list[bytes]:
    # An empty read would be the peer's close: none here but the real one.
    return [read for read in split_at(data, cuts) if read]


def h11_after_head() -> h11.Connection:
    connection = h11.Connection(h11.CLIENT)
    connection.send(h11.Request(method="POST", target="/", headers=[("Host", "x")]))
    connection.send(h11.EndOfMessage())
    connection.receive_data(HEAD)
    assert isinstance(connection.next_event(), h11.Response)
    return connection


def drain_h11(connection: h11.Connection, out: list[bytes]) -> str:
    """Events until h11 needs data: ``"end"``, ``"error"`` or ``"more"``; data into ``out``."""
    while True:
        try:
            event = connection.next_event()
        except h11.RemoteProtocolError:
            return "error"
        if event is h11.NEED_DATA:
            return "more"
        if isinstance(event, h11.EndOfMessage):
            return "end"
        assert isinstance(event, h11.Data)
        out.append(bytes(event.data))


def by_h11(reads: list[bytes]) -> tuple[bytes, str]:
    connection, state = h11_after_head(), "more"
    out: list[bytes] = []
    for data in reads:
        connection.receive_data(data)
        state = drain_h11(connection, out)
        if state != "more":
            break
    return b"".join(out), state


def by_chunked_body(reads: list[bytes]) -> tuple[bytes, str]:
    """What :mod:`chunkwise._http11` does: the chunks, then h11 from the last chunk's line."""
    body, connection, state = ChunkedBody(), h11_after_head(), "more"
    out: list[bytes] = []
    for data in reads:
        if body.ended:
            connection.receive_data(data)
            state = drain_h11(connection, out)
        else:
            out.append(body.feed(data))
            if body.error is not None:
                return b"".join(out), "error"
            if body.rest is not None:
                connection.receive_data(body.rest)
                state = drain_h11(connection, out)
        if state != "more":
            break
    return b"".join(out), state


@given(chunked_bodies(), st.lists(st.integers(0, 400), max_size=8))
@settings(max_examples=1500)
def test_the_chunks_are_read_as_h11_reads_them(raw: bytes, cuts: list[int]) -> None:
    reads = split(raw, cuts)
    assert by_chunked_body(reads) == by_h11(reads)


def test_the_generated_bodies_reach_every_outcome() -> None:
    # The property above is only as good as its inputs: each outcome must occur.
    outcomes = set()

    @given(chunked_bodies())
    @settings(max_examples=300, database=None)
    def collect(raw: bytes) -> None:
        outcomes.add(by_h11([raw])[1])

    collect()
    assert outcomes == {"end", "error", "more"}


@pytest.mark.parametrize(
    ("raw", "outcome"),
    [
        (b"5\r\nhello\r\n0\r\n\r\n", (b"hello", "end")),
        (b"5\r\nhelloXX0\r\n\r\n", (b"hello", "error")),  # not CRLF after the data
        (b"zz\r\n", (b"", "error")),
        (b"1" * 21 + b"\r\n", (b"", "error")),  # more than 20 hex digits
        (b"5 ;x\r\nhello\r\n0\r\n\r\n", (b"", "error")),  # a space before the extension
        (b"5;x\r \r\nhello\r\n0\r\n\r\n", (b"hello", "end")),  # CR inside the extension
        (b"5\r\nhel", (b"hel", "more")),
        (b"5;" + b"x" * MAX_LINE, (b"", "error")),  # an incomplete line past h11's limit
        (b"5;" + b"x" * (MAX_LINE - 2), (b"", "more")),
    ],
)
def test_edges_of_the_grammar(raw: bytes, outcome: tuple[bytes, str]) -> None:
    assert by_h11([raw]) == outcome
    assert by_chunked_body([raw]) == outcome


def test_feeding_after_the_end_or_an_error_is_a_bug() -> None:
    for raw in (b"0\r\n\r\n", b"zz\r\n"):
        body = ChunkedBody()
        body.feed(raw)
        with pytest.raises(RuntimeError):
            body.feed(b"")


class ScriptedTransport(trio.abc.Stream):
    """A connection whose peer sends ``reads`` (one a receive), then closes."""

    def __init__(self, reads: list[bytes]) -> None:
        self.reads = list(reads)

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await trio.lowlevel.checkpoint()

    async def wait_send_all_might_not_block(self) -> None:
        await trio.lowlevel.checkpoint()

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        await trio.lowlevel.checkpoint()
        return self.reads.pop(0) if self.reads else b""

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()


async def read_response(reads: list[bytes]) -> tuple[bytes, str]:
    endpoint = Endpoint("http://127.0.0.1:9/v1", retries=Retries(max_retries=0))
    out: list[bytes] = []
    try:
        async with open_http_response(
            endpoint, REQUEST, transport=ScriptedTransport(reads)
        ) as response:
            while data := await response.receive_some():
                out.append(data)
    except ChunkwiseError as exc:
        return b"".join(out), type(exc).__name__
    return b"".join(out), "end"


@given(
    informational=st.sampled_from(
        [b"", b"HTTP/1.1 100 Continue\r\n\r\n", b"HTTP/1.1 103 Early\r\nA: b\n\n"]
    ),
    raw=chunked_bodies(),
    cuts=st.lists(st.integers(0, 400), max_size=6),
)
@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_connection_reads_the_chunks_as_h11_alone_would(
    informational: bytes, raw: bytes, cuts: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Synchronous, one trio.run an example: hypothesis drives the examples.
    reads = split(informational + HEAD + raw, cuts)
    assume(reads)
    ours = trio.run(read_response, reads)
    with monkeypatch.context() as patch:
        # No head is cut from what follows it: h11 holds body bytes, so h11 reads them all.
        patch.setattr(_http11, "_BLANK_LINE", re.compile(b"(?!)"))
        alone = trio.run(read_response, reads)
    assert ours == alone


async def test_the_chunks_are_read_without_h11_when_the_head_came_with_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The head cut works: with head and body in one read, h11 still gives no Data.
    seen: list[Any] = []
    next_event = h11.Connection.next_event

    def recording(self: h11.Connection) -> Any:
        event = next_event(self)
        seen.append(type(event))
        return event

    monkeypatch.setattr(h11.Connection, "next_event", recording)
    assert await read_response([HEAD + b"5\r\nhello\r\n0\r\n\r\n"]) == (b"hello", "end")
    assert h11.Data not in seen
    assert h11.EndOfMessage in seen

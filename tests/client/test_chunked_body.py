"""Chunked bodies: a whole response reads them as h11 alone reads them.

h11 is the oracle.  Generated bodies, valid and corrupted (a byte changed,
inserted or dropped, a cut), go to h11 alone, in one piece, and through a whole
response (:func:`~chunkwise._net.http.open_http_response` over a scripted
transport), head first (with a 1xx before it), split into reads every way.
Both must hand out the same data and agree on how it ends: the message's end,
an error, or (the peer closing before the end) an incomplete body.
"""

from __future__ import annotations

from collections.abc import Iterable

import h11
import pytest
import trio
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from chunkwise._core.endpoint import Endpoint
from chunkwise._core.errors import ChunkwiseError
from chunkwise._core.retries import Retries
from chunkwise._net.http import open_http_response
from helpers.reads import pieces_of, split_at

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
#: h11's default limit on the bytes of an incomplete event (max_incomplete_event_size).
MAX_LINE = 16 * 1024
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


def split(data: bytes, cuts: Iterable[int]) -> list[bytes]:
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
        if not data:
            continue  # to h11, an empty read is the peer's close: none here
        connection.receive_data(data)
        state = drain_h11(connection, out)
        if state != "more":
            break
    return b"".join(out), state


def test_the_generated_bodies_reach_every_outcome() -> None:
    # The properties below are only as good as their inputs: each outcome must occur.
    outcomes = set()

    @given(chunked_bodies())
    @settings(max_examples=300, database=None)
    def collect(raw: bytes) -> None:
        outcomes.add(by_h11([raw])[1])

    collect()
    assert outcomes == {"end", "error", "more"}


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


#: How a whole response ends, for each way h11 alone leaves the body: at its
#: end; on bytes that are not HTTP; or still waiting when the peer closes.
OUTCOMES = {"end": "end", "error": "RemoteProtocolError", "more": "IncompleteBody"}


@given(
    informational=st.sampled_from(
        [b"", b"HTTP/1.1 100 Continue\r\n\r\n", b"HTTP/1.1 103 Early\r\nA: b\n\n"]
    ),
    raw=chunked_bodies(),
    cuts=st.lists(st.integers(0, 400), max_size=6),
)
# One trio.run an example: its time varies with the machine's load, so no deadline.
@settings(max_examples=300, deadline=None)
def test_a_response_hands_out_what_h11_reads_under_every_split(
    informational: bytes, raw: bytes, cuts: list[int]
) -> None:
    """A chunked response gives the data h11 reads from its body, and ends as h11 says.

    However the head (after any 1xx) and the body are split into reads, the data
    is handed out whole, and the end is the message's end, a protocol error, or,
    when the peer closes before h11 saw the end, an incomplete body.
    """
    # Synchronous, one trio.run an example: hypothesis drives the examples.
    reads = split(informational + HEAD + raw, cuts)
    assume(reads)
    data, outcome = by_h11([raw])
    assert trio.run(read_response, reads) == (data, OUTCOMES[outcome])


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
        (b"5\r\nhello\r\n0\r\nX-T: 1\r\n\r\n", (b"hello", "end")),  # a trailer
    ],
)
@pytest.mark.parametrize("size", [1 << 20, 3, 2], ids=["one read", "3 bytes", "2 bytes"])
async def test_edges_of_the_grammar_end_a_response_as_they_end_h11(
    raw: bytes, outcome: tuple[bytes, str], size: int
) -> None:
    """Each edge of the chunk grammar ends a whole response as it ends h11's reading."""
    assert by_h11([raw]) == outcome
    body = HEAD + raw
    data, end = outcome
    assert await read_response(pieces_of(body, size)) == (data, OUTCOMES[end])

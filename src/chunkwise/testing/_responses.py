"""Scripted HTTP/1.1 responses, written byte by byte, and the requests they answer.

Responses are written as scripted, not through h11's writer, so a script can
produce what a correct server never would: a body cut inside a chunk, a
``Content-Length`` that is never reached, a close-delimited body.  Pacing
(bytes per write, a delay between writes, a cut-off after N bytes) lives here
once, in :meth:`ResponseWriter.play`; the chat server uses it too.
"""

from __future__ import annotations

import http
import itertools
import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Literal

import attrs
import trio

from .._core.checks import Check, one_of, positive_int
from ..types import Headers

__all__ = ["Framing", "RecordedRequest", "ResponseWriter", "ScriptedResponse"]

Framing = Literal["chunked", "content-length", "close"]


def _header_pairs(
    headers: Mapping[str, str] | Iterable[tuple[str, str]],
) -> tuple[tuple[str, str], ...]:
    items = headers.items() if isinstance(headers, Mapping) else headers
    return tuple((str(name), str(value)) for name, value in items)


_TIMES = Check(
    "seconds >= 0 that never go back",
    lambda times: all(t >= 0 for t in times) and all(a <= b for a, b in itertools.pairwise(times)),
)
_WRITE_SIZES = Check(
    "an int >= 1, a non-empty sequence of them, or None",
    lambda sizes: (
        sizes is None
        or positive_int.accepts(sizes)
        or (type(sizes) is tuple and sizes != () and all(map(positive_int.accepts, sizes)))
    ),
)


def _int_tuple(values: Iterable[int]) -> tuple[int, ...]:
    return tuple(values)


def _times(value: Iterable[float] | None) -> tuple[float, ...] | None:
    if value is None:
        return None
    times = tuple(float(t) for t in value)
    _TIMES.check("times", times)
    return times


def _write_sizes(value: int | Iterable[int] | None) -> int | tuple[int, ...] | None:
    sizes = value if value is None or isinstance(value, int) else tuple(value)
    _WRITE_SIZES.check("write_sizes", sizes)
    return sizes


@attrs.frozen(kw_only=True)
class ScriptedResponse:
    """One response, replayed exactly as described.

    Attributes:
        status: the status code; ``reason`` defaults to its standard phrase.
        content_type: sent as ``Content-Type`` unless ``None``.
        headers: further header fields, a mapping or ``(name, value)`` pairs.
        body: the complete body.
        framing: ``"chunked"`` (one chunk per write), ``"content-length"``, or
            ``"close"`` (no length: the server closes to end the body).
        write_sizes: bytes per write: an int, or a sequence used cyclically;
            ``None`` writes the body at once.  Each write is a separate ``send_all``
            and, when chunked, a separate chunk.
        delay: seconds to sleep between writes.
        head_delay: seconds to sleep before the status line.
        times: when given, write ``i`` goes out ``times[i]`` seconds after
            :meth:`ResponseWriter.play` began (a deadline, so lateness never
            adds up), instead of after ``delay``; writes beyond the last time
            go out at once.  ``head_delay`` is then a deadline too.
        disconnect_after: close the connection after this many body bytes,
            without finishing the message (no last chunk; a ``Content-Length``
            never reached).  A cut inside a write is a cut inside that chunk.
        informational: 1xx status codes sent before the response.
    """

    status: int = 200
    reason: str | None = None
    content_type: str | None = "text/event-stream"
    headers: tuple[tuple[str, str], ...] = attrs.field(default=(), converter=_header_pairs)
    body: bytes = b""
    framing: Framing = attrs.field(
        default="chunked", validator=one_of("chunked", "content-length", "close")
    )
    write_sizes: int | tuple[int, ...] | None = attrs.field(default=None, converter=_write_sizes)
    delay: float = 0.0
    head_delay: float = 0.0
    times: tuple[float, ...] | None = attrs.field(default=None, converter=_times)
    disconnect_after: int | None = None
    informational: tuple[int, ...] = attrs.field(default=(), converter=_int_tuple)

    @classmethod
    def sse(
        cls, events: Iterable[Mapping[str, Any] | str], *, done: bool = True, **kwargs: Any
    ) -> ScriptedResponse:
        """An event stream with one ``data:`` event per item, then ``[DONE]``.

        Mappings are sent as JSON, strings as they are.
        """
        lines = [e if isinstance(e, str) else json.dumps(e) for e in events]
        if done:
            lines.append("[DONE]")
        body = "".join(f"data: {line}\n\n" for line in lines).encode()
        return cls(body=body, **kwargs)

    @classmethod
    def error(
        cls,
        status: int,
        message: Any,
        *,
        type: str | None = None,
        code: int | str | None = None,
        param: str | None = None,
        **kwargs: Any,
    ) -> ScriptedResponse:
        """An OpenAI-shaped JSON error: ``{"error": {"message", "type", "code", "param"}}``."""
        error = {"message": message, "type": type, "code": code, "param": param}
        kwargs.setdefault("framing", "content-length")
        return cls(
            status=status,
            content_type="application/json",
            body=json.dumps({"error": error}).encode(),
            **kwargs,
        )


@attrs.frozen(kw_only=True)
class RecordedRequest:
    """A request as the server received it."""

    method: str
    target: str
    http_version: str
    headers: Headers
    body: bytes

    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.body)


def _head(status: int, reason: str | None, fields: Iterable[tuple[str, str]]) -> bytes:
    if reason is None:
        try:
            reason = http.HTTPStatus(status).phrase
        except ValueError:
            reason = ""
    lines = "".join(f"{name}: {value}\r\n" for name, value in fields)
    return f"HTTP/1.1 {status} {reason}\r\n".encode("latin-1") + lines.encode() + b"\r\n"


def _frame_chunk(data: bytes, declared: int) -> bytes:
    # ``declared`` exceeds len(data) only when a script cuts the body inside a chunk.
    tail = b"\r\n" if declared == len(data) else b""
    return b"%x\r\n" % declared + data + tail


class ResponseWriter:
    """Writes one response to the client, in whatever shape the script wants.

    Call :meth:`start`, then :meth:`write` any number of times, then :meth:`end`;
    or :meth:`play` a :class:`ScriptedResponse`.  A handler that returns without
    ending the response has it ended for it (or gets a 500 if it never started).
    """

    def __init__(self, stream: trio.abc.Stream, request: RecordedRequest) -> None:
        self.request = request
        self._stream = stream
        self._framing: Framing | None = None
        self._ended = False
        self._late: list[float] = []
        #: Reset (RST) rather than close (FIN) when the connection ends.
        self.reset: bool = False
        self._close = request.http_version == "1.0" or "close" in (
            request.headers.get("connection", "").lower()
        )

    @property
    def started(self) -> bool:
        """The status line has been sent."""
        return self._framing is not None

    @property
    def ended(self) -> bool:
        """The response is complete, or was cut off on purpose."""
        return self._ended

    @property
    def closes_connection(self) -> bool:
        """The server will close the connection after this response."""
        return self._close

    async def informational(
        self, status: int = 100, headers: Mapping[str, str] | Iterable[tuple[str, str]] = ()
    ) -> None:
        """Send a 1xx response (e.g. 103 Early Hints) before the real one."""
        await self._stream.send_all(_head(status, None, _header_pairs(headers)))

    async def start(
        self,
        status: int = 200,
        headers: Mapping[str, str] | Iterable[tuple[str, str]] = (),
        *,
        reason: str | None = None,
        content_type: str | None = "text/event-stream",
        framing: Framing = "chunked",
        content_length: int | None = None,
    ) -> None:
        """Send the status line and header fields.

        ``content_length`` is required with ``framing="content-length"``.
        """
        if self.started:
            raise RuntimeError("the response has already started")
        if framing == "chunked" and self.request.http_version == "1.0":
            framing = "close"  # chunked coding does not exist in HTTP/1.0
        fields = [("Content-Type", content_type)] if content_type is not None else []
        fields.extend(_header_pairs(headers))
        if framing == "chunked":
            fields.append(("Transfer-Encoding", "chunked"))
        elif framing == "content-length":
            if content_length is None:
                raise ValueError('framing="content-length" needs content_length')
            fields.append(("Content-Length", str(content_length)))
        else:
            fields.append(("Connection", "close"))
            self._close = True
        self._framing = framing
        await self._stream.send_all(_head(status, reason, fields))

    async def write(self, data: bytes) -> None:
        """Send body bytes in one write (one chunk when chunked)."""
        await self._write(data, len(data))

    async def _write(self, data: bytes, declared: int) -> None:
        if self._framing is None or self._ended:
            raise RuntimeError("write() outside of a started, unfinished response")
        if not data:
            await trio.lowlevel.checkpoint()  # an empty chunk would end the body
            return
        if self._framing == "chunked":
            data = _frame_chunk(data, declared)
        await self._stream.send_all(data)

    async def end(self) -> None:
        """Finish the body: the last chunk, or closing the connection for ``"close"``."""
        if self._framing == "chunked" and not self._ended:
            await self._stream.send_all(b"0\r\n\r\n")
        else:
            await trio.lowlevel.checkpoint()
        self._ended = True

    def close_after(self, *, reset: bool = False) -> None:
        """Close the connection after this response, without announcing it.

        The response says nothing of it (no ``Connection: close``), so a client
        keeps the connection for its next request and finds it closed: what a
        server does to an idle keep-alive connection.  ``reset=True`` resets
        it (TCP RST) instead of closing it (FIN).
        """
        self._close = True
        self.reset = reset

    async def disconnect(self) -> None:
        """Stop here: the connection is closed without finishing the response."""
        self._ended = True
        self._close = True
        await trio.lowlevel.checkpoint()

    async def send_raw(self, data: bytes) -> None:
        """Write bytes verbatim (anything at all); the connection closes afterwards."""
        self._framing = self._framing or "close"
        self._close = True
        await self._stream.send_all(data)

    @property
    def lateness(self) -> tuple[float, ...]:
        """How late each timed write of :meth:`play` went out, so far.

        Seconds from a write's time to when the writer ran to make it, for the
        writes that have a time (``ScriptedResponse.times``); kept when the
        client hangs up midway.  A server busy with other connections runs
        late, and a client's timings can be no more exact than these.
        """
        return tuple(self._late)

    async def play(self, response: ScriptedResponse) -> None:
        """Send ``response`` as scripted, sleeps and cut-offs included."""
        begun = trio.current_time()
        times = response.times
        for status in response.informational:
            await self.informational(status)
        if times is not None:
            await trio.sleep_until(begun + response.head_delay)
        elif response.head_delay:
            await trio.sleep(response.head_delay)
        body = response.body
        await self.start(
            response.status,
            response.headers,
            reason=response.reason,
            content_type=response.content_type,
            framing=response.framing,
            content_length=len(body),
        )
        cut = response.disconnect_after
        position = 0
        for index, size in enumerate(_sizes(response.write_sizes, len(body))):
            if times is not None:
                if index < len(times):
                    due = begun + times[index]
                    await trio.sleep_until(due)
                    # Taken before the write: the write's checkpoint yields to
                    # every other ready task before returning.
                    self._late.append(trio.current_time() - due)
            elif position and response.delay:
                await trio.sleep(response.delay)
            piece = body[position : position + size]
            if cut is not None and position + len(piece) > cut:
                await self._write(piece[: cut - position], len(piece))
                break
            await self.write(piece)
            position += len(piece)
        if cut is not None:
            await self.disconnect()
        else:
            await self.end()


def _sizes(write_sizes: int | tuple[int, ...] | None, total: int) -> Iterator[int]:
    """Write sizes covering ``total`` bytes (the last one may be cut by the caller)."""
    if write_sizes is None:
        pattern: Iterable[int] = (total,)
    elif isinstance(write_sizes, int):
        pattern = itertools.repeat(write_sizes)
    else:
        pattern = itertools.cycle(write_sizes)
    remaining = total
    for size in pattern:
        if remaining <= 0:
            return
        yield min(size, remaining)
        remaining -= size

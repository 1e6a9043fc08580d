"""One HTTP/1.1 connection: the h11 client state machine and the trio stream under it.

Theory of operation
-------------------
h11 parses the whole response, the head and the body in every framing; this
module only moves bytes and translates outcomes.  :class:`Connection` takes an
origin and a prepared request (httpcore's ``_async/http11.py`` is the model);
the request's lifecycle is :mod:`chunkwise._net.http`'s.  A chunked body costs
one h11 ``Data`` event a chunk, about five microseconds a read that only a
load test sees; an earlier version read the chunks itself, a second parser of
h11's grammar, and it is gone on purpose.

States
------
A :class:`Connection` is in one :class:`State` at a time (h11's ``_state.py``
is the model); these transitions are all there are:

===================== =================================================== =============
from                  on                                                  to
===================== =================================================== =============
IDLE                  ``send_request()`` handed the request to the socket AWAITING_HEAD
AWAITING_HEAD         ``receive_head()`` read a final (non-1xx) response  BODY
BODY                  h11's ``EndOfMessage``                              DONE
AWAITING_HEAD or BODY reading failed: the peer closed or reset, the idle  FAILED
                      timeout, bytes that are not HTTP
DONE                  ``start_next_exchange()`` (only when reusable)      IDLE
any                   ``aclose()``                                        CLOSED
===================== =================================================== =============

A failure while sending leaves the state as it was (the attempt closes the
connection).  In FAILED every :meth:`Connection.receive_some` raises the error
again; in DONE it returns ``b""``; in CLOSED it raises
:exc:`trio.ClosedResourceError`.  Only a DONE connection whose h11 says both
sides are done is :attr:`reusable`.

Rules
-----
1. Every wait for the peer goes through ``Connection._read``, which applies the
   idle timeout and turns a broken socket into :class:`ConnectionLost`
   (:class:`IncompleteBody` once the body had begun).
2. Once h11 has answered ``NEED_DATA`` it is not asked again until it was given
   bytes (a read ending on ``NEED_DATA`` would cost one more h11 call).
3. Every h11 error goes through ``Connection._translate``: when the peer had
   closed, it hung up (:class:`ConnectionLost`, or :class:`IncompleteBody` once
   the body had begun); otherwise it sent bytes that are not HTTP
   (:class:`RemoteProtocolError`, in h11's words).
4. Body bytes are handed out as soon as they arrive.  When a read both delivers
   data and reveals an error (the peer closed mid-chunk), the data is returned
   first and the next :meth:`Connection.receive_some` raises the error.

On plain TCP under Linux the socket is read through :mod:`chunkwise._net.arrivals`:
``Connection.arrived`` is when the last bytes handed out reached this host, or
``None``.  Thousands of connections may be open at once (``bench/load.py``):
:class:`Connection` has no instance dict.
"""

from __future__ import annotations

import enum
import math
from typing import Any

import h11
import trio

from .._core.errors import (
    ChunkwiseError,
    ConnectionLost,
    IdleTimeout,
    IncompleteBody,
    LocalProtocolError,
    RemoteProtocolError,
    raise_itself,
)
from .arrivals import open_reader
from .connect import Origin, socket_of
from .request import Request
from .tasks import close_now

__all__ = ["Connection", "State"]

_READ_SIZE = 64 * 1024


class State(enum.Enum):
    """The phase of one :class:`Connection` (the transitions are in the module's table)."""

    IDLE = "idle"
    AWAITING_HEAD = "awaiting head"
    BODY = "body"
    DONE = "done"
    FAILED = "failed"
    CLOSED = "closed"


class Connection:
    """The h11 client state machine and the stream under it: the one place with I/O."""

    __slots__ = (
        "_busy",
        "_eof",
        "_error",
        "_expected",
        "_h11",
        "_idle",
        "_origin",
        "_reader",
        "_received",
        "_starved",
        "_state",
        "_transport",
        "_where",
        "arrived",
        "first_byte_at",
        "response_started",
    )

    def __init__(
        self, transport: trio.abc.Stream, origin: Origin, *, idle_timeout: float | None
    ) -> None:
        self._transport = transport
        self._reader = open_reader(transport)
        self._h11 = h11.Connection(h11.CLIENT)
        self._origin = origin
        self._where = origin.authority
        self._idle = math.inf if idle_timeout is None else idle_timeout
        self._state = State.IDLE
        self._start_exchange()

    def _start_exchange(self) -> None:
        self._eof = False  # the peer closed (and h11 was told)
        self._starved = False  # h11 said NEED_DATA and has had no bytes since
        self._received = 0
        self._expected: int | None = None
        # What FAILED the exchange: raised by every later receive_some, after
        # the data that preceded it.
        self._error: ChunkwiseError | None = None
        self._busy = False
        #: Some bytes of a response arrived (a request that failed before any
        #: did may be sent again on a new connection).
        self.response_started: bool = False
        #: When they did (trio's clock), for the stream's timings.
        self.first_byte_at: float | None = None
        #: When the last bytes read reached this host (trio's clock), if the kernel said.
        self.arrived: float | None = None

    @property
    def state(self) -> State:
        """The connection's phase (the module's table)."""
        return self._state

    @property
    def reusable(self) -> bool:
        """The exchange completed on both sides and neither asked to close."""
        return self.why_not_reusable is None

    @property
    def why_not_reusable(self) -> str | None:
        """Why the connection cannot carry another request, in words; ``None`` if it can."""
        state = self._state
        if state is State.CLOSED:
            return "it was closed"
        if state is State.FAILED:
            return f"the response broke off ({type(self._error).__name__})"
        if state is not State.DONE:
            return "the response was not read to its end"
        if self._h11.their_state is not h11.DONE or self._h11.our_state is not h11.DONE:
            return (
                "the server ends the connection after this response (Connection: close, "
                "HTTP/1.0, or a body that ends when the connection does)"
            )
        return None

    def readable_while_idle(self) -> bool:
        """Bytes or an EOF arrived while no response is expected: not reusable."""
        sock = socket_of(self._transport)
        return sock is not None and sock.is_readable()

    def start_next_exchange(self) -> None:
        """Make a :attr:`reusable` connection ready for the next request (DONE to IDLE)."""
        if not self.reusable:
            raise RuntimeError(f"a connection cannot start an exchange when {self._state.value}")
        self._h11.start_next_cycle()
        self._state = State.IDLE
        self._start_exchange()

    async def drain(self, grace: float, limit: int) -> None:
        """Read what is left of the body for up to ``grace`` seconds and ``limit`` bytes.

        Errors just leave the connection unreusable.
        """
        with trio.move_on_after(grace):
            total = 0
            try:
                while self._state is State.BODY and total <= limit:
                    total += len(await self.receive_some())
            except (ChunkwiseError, trio.ClosedResourceError, trio.BusyResourceError):
                pass

    async def send_request(self, request: Request) -> None:
        """Send the whole request (IDLE to AWAITING_HEAD)."""
        if self._state is not State.IDLE:
            raise RuntimeError(f"a connection cannot send a request when {self._state.value}")
        head = h11.Request(
            method=request.method, target=request.target, headers=list(request.headers)
        )
        try:
            data = b"".join(
                self._h11.send(event) or b""
                for event in (head, h11.Data(data=request.body), h11.EndOfMessage())
            )
        except h11.LocalProtocolError:
            # Endpoint checked every header, so this is a chunkwise bug.  Not chained:
            # h11's message quotes the offending header value, which may be the key.
            raise LocalProtocolError("h11 refused to serialise the request") from None
        with trio.move_on_after(self._idle):
            try:
                await self._transport.send_all(data)
            except (trio.BrokenResourceError, OSError) as exc:
                raise ConnectionLost(
                    f"connection to {self._where} lost while sending the request"
                ) from exc
            self._state = State.AWAITING_HEAD
            return
        raise IdleTimeout(self._origin.host, self._origin.port, self._idle)

    async def receive_head(self) -> h11.Response:
        """The final response's head, 1xx skipped (AWAITING_HEAD to BODY, or FAILED)."""
        while True:
            event = self._next_event()
            if event is h11.NEED_DATA:
                await self._fill()
            elif isinstance(event, h11.Response):
                self._state = State.BODY
                self._expected = _declared_length(event)
                return event
            elif not isinstance(event, h11.InformationalResponse):  # 1xx are skipped
                raise self._fail(_unexpected(event))

    async def receive_some(self) -> bytes:
        if self._state is State.CLOSED:
            raise trio.ClosedResourceError("the HTTP response was closed")
        if self._busy:
            raise trio.BusyResourceError("another task is already receiving this response")
        await trio.lowlevel.checkpoint_if_cancelled()
        self._busy = True
        try:
            return await self._receive_body()
        finally:
            self._busy = False

    async def _receive_body(self) -> bytes:
        """The next body data from h11's events; data before the error it revealed (rule 4)."""
        if self._error is not None:
            raise_itself(self._error, fresh_traceback=True)
        chunks: list[bytes] = []
        waited = False
        while self._state is State.BODY:
            try:
                event = self._next_event()
            except ChunkwiseError:
                if chunks:
                    break
                raise
            if event is h11.NEED_DATA:
                if chunks:
                    break
                await self._fill()
                waited = True
            elif isinstance(event, h11.Data):
                # h11 hands out a bytearray sliced from its buffer: one copy to
                # immutable bytes here, none further up.
                data = bytes(event.data)
                self._received += len(data)
                chunks.append(data)
            elif isinstance(event, h11.EndOfMessage):
                self._state = State.DONE
            else:
                raise self._fail(_unexpected(event))
        if not waited:
            # Nothing was awaited, but callers may rely on this being a checkpoint.
            # Shielded: the bytes already taken from h11 must not be lost to a cancel.
            await trio.lowlevel.cancel_shielded_checkpoint()
        return b"".join(chunks)

    def _fail(self, error: ChunkwiseError) -> ChunkwiseError:
        """Reading failed (to FAILED): ``error``, which every later read raises again."""
        self._error = error
        if self._state is not State.CLOSED:
            self._state = State.FAILED
        return error

    def _next_event(self) -> Any:
        if self._starved:
            return h11.NEED_DATA  # what h11 would say again: it has nothing new
        try:
            event = self._h11.next_event()
        except h11.RemoteProtocolError as exc:
            raise self._fail(self._translate(exc)) from exc
        self._starved = event is h11.NEED_DATA
        return event

    def _translate(self, exc: h11.RemoteProtocolError) -> ChunkwiseError:
        if not self._eof:
            return RemoteProtocolError(f"invalid HTTP response from {self._where}: {exc}")
        if self._state is State.AWAITING_HEAD:
            return ConnectionLost(f"{self._where} closed the connection before a complete response")
        return self._incomplete("closed the connection")

    def _incomplete(self, what: str) -> IncompleteBody:
        if self._expected is not None:
            detail = f"after {self._received} of {self._expected} body bytes"
        else:
            detail = f"inside the response body, after {self._received} bytes"
        return IncompleteBody(
            f"{self._where} {what} {detail}", received=self._received, expected=self._expected
        )

    async def _fill(self) -> None:
        """Wait for the next bytes and give them to h11; a failed wait fails the connection."""
        try:
            data = await self._read()
        except ChunkwiseError as exc:
            self._fail(exc)
            raise
        self._h11.receive_data(data)
        self._starved = False

    async def _read(self) -> bytes:
        """The next bytes from the peer, ``b""`` when it closed: the one wait for it."""
        with trio.move_on_after(self._idle):
            data: bytes | bytearray
            try:
                if self._reader is not None:
                    data, self.arrived = await self._reader.receive(_READ_SIZE)
                else:
                    data = await self._transport.receive_some(_READ_SIZE)
            except (trio.BrokenResourceError, OSError) as exc:
                # A reset is never a clean end, even of a close-delimited body.
                if self._state is State.BODY:
                    raise self._incomplete("reset the connection") from exc
                raise ConnectionLost(f"connection to {self._where} lost: {exc}") from exc
            if not data:
                self._eof = True
            else:
                if not self.response_started:
                    self.response_started = True
                    self.first_byte_at = (
                        trio.current_time() if self.arrived is None else self.arrived
                    )
            return bytes(data)  # a no-op for bytes; streams may give bytearray
        raise IdleTimeout(self._origin.host, self._origin.port, self._idle)

    async def aclose(self) -> None:
        self._state = State.CLOSED
        await close_now(self._transport)


def _unexpected(event: object) -> RemoteProtocolError:
    # h11 produces nothing else in these states; reaching this is a bug, but raising
    # beats looping forever on an event h11 will keep returning.
    return RemoteProtocolError(f"unexpected HTTP event {event!r}")


def _declared_length(head: h11.Response) -> int | None:
    fields = dict(head.headers)  # h11 lower-cases names and allows one Content-Length
    if b"transfer-encoding" in fields or b"content-length" not in fields:
        return None
    return int(fields[b"content-length"])

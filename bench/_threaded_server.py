"""A thread-per-connection HTTP/1.1 server for ``bench/pool.py --server threads``.

The loopback server of :mod:`chunkwise.testing` runs on trio: each write of a
TLS record is two trips through trio's scheduler, so with one event per write
the server sets the pace of a short response.  This one has no event loop:
blocking ``socket``/``ssl`` calls, a thread per connection, h11 for the
framing, one ``sendall`` per write.  It answers every request with the same
``200 text/event-stream`` body, chunked, keeps connections alive, and counts
connections and requests.  It is a measuring instrument, not a product: no
request limits, no timeouts, nothing but what ``bench/pool.py`` sends.
"""

from __future__ import annotations

import socket
import socketserver
import ssl
import threading
from collections.abc import Sequence

import h11

__all__ = ["ThreadedServer"]

_HEAD = h11.Response(
    status_code=200,
    headers=[("Content-Type", "text/event-stream"), ("Transfer-Encoding", "chunked")],
)


class _Handler(socketserver.BaseRequestHandler):
    server: ThreadedServer

    def handle(self) -> None:
        server = self.server
        sock: socket.socket = self.request
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as trio sets it
        with server.lock:
            server.connections += 1
        try:
            if server.ssl_context is not None:
                sock = server.ssl_context.wrap_socket(sock, server_side=True)
            conn = h11.Connection(h11.SERVER)
            while self._read_request(sock, conn):
                with server.lock:
                    server.requests += 1
                sock.sendall(conn.send(_HEAD) or b"")
                for piece in server.writes:
                    sock.sendall(conn.send(h11.Data(data=piece)) or b"")
                sock.sendall(conn.send(h11.EndOfMessage()) or b"")
                if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                    return
                conn.start_next_cycle()
        except (OSError, h11.ProtocolError):
            return  # the client went away (or the bench sent nonsense): nothing to report

    @staticmethod
    def _read_request(sock: socket.socket, conn: h11.Connection) -> bool:
        """Read one whole request; False once the client has closed the connection."""
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = sock.recv(65536)
                conn.receive_data(data)
            elif isinstance(event, h11.EndOfMessage):
                return True
            elif isinstance(event, h11.ConnectionClosed):
                return False


class ThreadedServer(socketserver.ThreadingTCPServer):
    """Serves ``writes`` (one ``sendall`` each) on 127.0.0.1, plain or over TLS."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, writes: Sequence[bytes], ssl_context: ssl.SSLContext | None) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.writes = tuple(writes)
        self.ssl_context = ssl_context
        self.lock = threading.Lock()
        self.connections = 0
        self.requests = 0
        threading.Thread(target=self.serve_forever, name="bench-server", daemon=True).start()

    @property
    def base_url(self) -> str:
        scheme = "https" if self.ssl_context is not None else "http"
        return f"{scheme}://127.0.0.1:{self.server_address[1]}/v1"

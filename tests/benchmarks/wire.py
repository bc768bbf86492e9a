"""Count network round trips on the wire: a loopback TCP proxy in front of PostgreSQL.

A round trip is a turn of the conversation: the client sends, then waits for the server's answer.
The proxy notes the direction of every chunk it forwards and counts each switch from "client
sent" to "server answered". That needs nothing from the server (``pg_stat_statements`` needs
``shared_preload_libraries``) and nothing from the client library, so the same counter measures
our backend, raw psycopg and the peer tool alike. Pipelined statements that share one flush count
as one trip, which is what they cost in latency.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress

from psycopg.conninfo import conninfo_to_dict, make_conninfo


class RoundTripCounter:
    """A proxy from ``127.0.0.1:<port>`` to ``(host, port)``; ``trips`` counts turns."""

    def __init__(self, host: str, port: int) -> None:
        self._upstream = (host, port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._trips = 0
        self._connections = 0
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True, name="bench-proxy").start()

    @property
    def trips(self) -> int:
        with self._lock:
            return self._trips

    @property
    def connections(self) -> int:
        """Connections opened through the proxy so far."""
        with self._lock:
            return self._connections

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            server = socket.create_connection(self._upstream)
            for sock in (client, server):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._sockets += [client, server]
                self._connections += 1
            # Per connection: the last direction seen; a list so both pumps share it.
            last = ["server"]
            threading.Thread(
                target=self._pump, args=(client, server, "client", last), daemon=True
            ).start()
            threading.Thread(
                target=self._pump, args=(server, client, "server", last), daemon=True
            ).start()

    def _pump(self, source: socket.socket, sink: socket.socket, side: str, last: list[str]) -> None:
        try:
            while chunk := source.recv(65536):
                with self._lock:
                    if side == "server" and last[0] == "client":
                        self._trips += 1
                    last[0] = side
                # The direction is recorded before forwarding, so an answer can never be seen
                # before the request that caused it.
                sink.sendall(chunk)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        """Stop accepting and close every proxied connection."""
        self._listener.close()
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            sock.close()


@contextmanager
def counting_dsn(dsn: str) -> Iterator[tuple[str, RoundTripCounter]]:
    """``dsn`` rerouted through a :class:`RoundTripCounter`; closed on exit."""
    params = conninfo_to_dict(dsn)
    host = str(params.get("host") or "127.0.0.1")
    counter = RoundTripCounter(host, int(params.get("port") or 5432))
    try:
        yield make_conninfo(dsn, host="127.0.0.1", port=str(counter.port)), counter
    finally:
        counter.close()

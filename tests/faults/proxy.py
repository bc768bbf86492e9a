"""A TCP proxy on 127.0.0.1 that a test can cut and restore: the server "going away"."""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading

from persistence import Closing


class CuttableProxy(Closing):
    """Forwards connections from ``127.0.0.1:port`` to ``target``.

    ``cut()`` closes the listener and every open connection (clients see a reset and further
    connects are refused); ``restore()`` listens on the same port again. One thread per
    connection pair; all of them stop at ``close()``.
    """

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = 0
        self._listener: socket.socket | None = None
        self._lock = threading.Lock()
        self._conns: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self.restore()

    def restore(self) -> None:
        """Listen (again) on the proxy's port."""
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(32)
        self.port = listener.getsockname()[1]
        self._listener = listener
        thread = threading.Thread(target=self._accept, args=(listener,), daemon=True)
        thread.start()
        self._threads.append(thread)

    def cut(self) -> None:
        """Refuse new connections and reset every open one."""
        with self._lock:
            listener, self._listener = self._listener, None
            conns, self._conns = self._conns, []
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()

    def close(self) -> None:
        """Cut and wait for the forwarding threads to end."""
        self.cut()
        for thread in self._threads:
            thread.join(timeout=5)

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # the listener was cut
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                if self._listener is not listener:
                    client.close()
                    upstream.close()
                    return
                self._conns += [client, upstream]
            thread = threading.Thread(target=self._pipe, args=(client, upstream), daemon=True)
            thread.start()
            self._threads.append(thread)

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket) -> None:
        peers = {a: b, b: a}
        with selectors.DefaultSelector() as selector:
            for sock in peers:
                sock.setblocking(True)
                selector.register(sock, selectors.EVENT_READ)
            while True:
                try:
                    events = selector.select(timeout=1)
                except (OSError, ValueError):
                    return
                for key, _ in events:
                    sock = peers_of(key.fileobj, peers)
                    try:
                        data = sock.recv(65536)
                        if not data:
                            raise OSError("closed")
                        peers[sock].sendall(data)
                    except OSError:
                        for s in peers:
                            with contextlib.suppress(OSError):
                                s.close()
                        return


def peers_of(fileobj: object, peers: dict[socket.socket, socket.socket]) -> socket.socket:
    """The registered socket behind a selector key."""
    for sock in peers:
        if sock is fileobj:
            return sock
    raise OSError("unknown socket")

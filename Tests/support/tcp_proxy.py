"""A TCP proxy a test controls, in front of one server: `cut` resets every connection
through it (as a dropped link looks to both ends) and, with `hold`, refuses new ones
until `restore`. The conformance runner puts one before each node; the Patroni harness
one before each member for the standby's replication (the members cut apart)."""
from __future__ import annotations

import socket
import threading
from typing import List, Tuple


class TCPProxy:
    """A TCP proxy in front of one node: `cut` resets every connection through it,
    and with `hold` refuses new ones (accepted, then closed at once) until `restore`."""

    def __init__(self, upstream: Tuple[str, int]) -> None:
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.lock = threading.Lock()
        self.open: List[socket.socket] = []
        self.holding = False
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                if self.holding or self.closed:
                    _reset(client)
                    continue
            try:
                server = socket.create_connection(self.upstream, timeout=5)
                server.settimeout(None)
            except OSError:
                _reset(client)
                continue
            with self.lock:
                self.open += [client, server]
            for source, target in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, target), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                target.sendall(data)
        except OSError:
            pass
        for end in (source, target):
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self, hold: bool) -> None:
        with self.lock:
            self.holding = hold
            connections, self.open = self.open, []
        for connection in connections:
            _reset(connection)

    def restore(self) -> None:
        with self.lock:
            self.holding = False

    def close(self) -> None:
        with self.lock:
            self.closed = True
        self.listener.close()
        self.cut(hold=True)


def _reset(connection: socket.socket) -> None:
    """Closes with a reset (SO_LINGER 0), as a dropped link looks to both ends. The
    shutdown first wakes a pump blocked reading it (a close alone would not)."""
    try:
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        connection.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    connection.close()

"""A scripted line server for the error paths a real server does not take on cue:
silence, half-open connections, lines that are not JSON, a `bye` mid-command, and a
hostile server's tricks (an endless line, a flood of events, hostile numbers).

Each accepted connection runs ``script(peer)`` in its own thread; ``peer`` sends
and receives lines, and every line a client sent is kept in ``lines``."""
from __future__ import annotations

import json
import select
import socket
import threading
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple


class Peer:
    def __init__(self, server: "FakeServer", sock: socket.socket, number: int) -> None:
        self.server = server
        self.sock = sock
        self.number = number
        self._buffer = b""

    def send(self, message: Any) -> None:
        line = message if isinstance(message, (bytes, str)) else json.dumps(message)
        data = line.encode() if isinstance(line, str) else line
        self.sock.sendall(data + b"\n")

    def welcome(self, session: str = "s1", token: str = "t" * 48) -> None:
        self.send({"type": "welcome", "protocol": 1, "session": session, "token": token, "server": "fake/1.1"})

    def receive(self, timeout: float = 5) -> Optional[Dict[str, Any]]:
        """The next line the client sent, as JSON; None when it closed."""
        self.sock.settimeout(timeout)
        while b"\n" not in self._buffer:
            try:
                chunk = self.sock.recv(65536)
            except OSError:
                return None
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        message = json.loads(line)
        self.server.lines.append(message)
        return message  # type: ignore[no-any-return]

    def reply(self, request: Dict[str, Any], result: Any = None, error: Optional[Dict[str, Any]] = None) -> None:
        if error is None:
            self.send({"type": "reply", "re": request.get("id"), "ok": True, "result": result if result is not None else {}})
        else:
            self.send({"type": "reply", "re": request.get("id"), "ok": False, "error": error})

    def stream(self, chunk: bytes, most: int) -> int:
        """Sends ``chunk`` again and again, up to ``most`` bytes, until the client
        stops taking them (closes, or reads nothing for 2 s); returns the bytes sent."""
        sent = 0
        self.sock.settimeout(2)
        try:
            while sent < most:
                sent += self.sock.send(chunk)
        except OSError:
            pass
        return sent

    def flood(self, chunks: Iterator[bytes], most: int, stall: float = 0.5) -> Tuple[bool, bytes, int]:
        """Writes ``chunks`` (whole lines) until the client stops reading — nothing
        could be written for ``stall`` s — or ``most`` bytes went out. Returns whether
        it stopped reading, what is left of the chunk being written, and the bytes
        sent. The send buffer is kept small, so "stopped" means the client's."""
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
        self.sock.setblocking(False)
        sent, pending = 0, b""
        try:
            while sent < most:
                if not pending:
                    pending = next(chunks)
                if not select.select([], [self.sock], [], stall)[1]:
                    return True, pending, sent
                written = self.sock.send(pending)
                sent += written
                pending = pending[written:]
            return False, pending, sent
        finally:
            self.sock.setblocking(True)

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


class FakeServer:
    def __init__(self, script: Callable[[Peer], None]) -> None:
        self.script = script
        self.lines: List[Dict[str, Any]] = []
        self.connections = 0
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        self._peers: List[Peer] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            peer = Peer(self, sock, self.connections)
            self.connections += 1
            self._peers.append(peer)
            threading.Thread(target=self._run, args=(peer,), daemon=True).start()

    def _run(self, peer: Peer) -> None:
        try:
            self.script(peer)
        except OSError:
            pass

    def stop(self) -> None:
        try:
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread; the port closes now
        except OSError:
            pass
        self.listener.close()
        for peer in self._peers:
            try:
                peer.close()
            except OSError:
                pass

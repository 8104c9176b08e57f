"""What the phases speak to the server with: WebSocket framing (a client's masked
frames, the upgrade request), LineConn (a blocking line-protocol connection, from a
chosen source address if need be), a reply's code, an attach that waits out
attach_throttled, and Readers (a session's connections that read everything on a
thread of their own, counting the bytes)."""
from __future__ import annotations

import base64
import json
import os
import random
import selectors
import socket
import threading
import time


def ws_frame(opcode: int, payload: bytes, fin: bool = True, rng: random.Random | None = None) -> bytes:
    """A client frame: masked, the shortest length form."""
    rng = rng or random
    head = bytes([(0x80 if fin else 0) | opcode])
    n = len(payload)
    if n < 126:
        head += bytes([0x80 | n])
    elif n < 65536:
        head += bytes([0x80 | 126]) + n.to_bytes(2, "big")
    else:
        head += bytes([0x80 | 127]) + n.to_bytes(8, "big")
    mask = bytes(rng.getrandbits(8) for _ in range(4))
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def ws_upgrade(port: int) -> bytes:
    key = base64.b64encode(os.urandom(16)).decode()
    return (f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode()


class LineConn:
    """A blocking line-protocol connection, from a chosen source address if need be."""

    def __init__(self, port: int, source: str | None = None, rcvbuf: int = 0, timeout: float = 10.0) -> None:
        self.sock = socket.socket()
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        if source:
            self.sock.bind((source, 0))
        self.sock.settimeout(timeout)
        self.sock.connect(("127.0.0.1", port))
        self.buffer = bytearray()

    def send(self, line: str) -> None:
        self.sock.sendall(line.encode() + b"\n")

    def message(self) -> dict | None:
        """The next message; None once the connection is closed or silent past the timeout."""
        while (end := self.buffer.find(b"\n")) < 0:
            try:
                data = self.sock.recv(65536)
            except OSError:
                return None
            if not data:
                return None
            self.buffer += data
        line = bytes(self.buffer[:end])
        del self.buffer[: end + 1]
        return json.loads(line)

    def reply(self) -> dict | None:
        """The next reply (or bye), skipping events."""
        while (message := self.message()) is not None:
            if message.get("type") in ("reply", "bye"):
                return message
        return None

    def close(self) -> None:
        self.sock.close()


def code(reply: dict | None) -> str:
    """ok, an error's code, bye: its reason, or closed."""
    if reply is None:
        return "closed"
    if reply.get("type") == "bye":
        return f"bye: {reply.get('reason')}"
    return "ok" if reply.get("ok") else reply.get("error", {}).get("code", "?")


def attach(conn: LineConn, token: str, patience: float = 10.0) -> dict | None:
    """attach, waiting out attach_throttled (the phase's own attaches are no attack)."""
    deadline = time.monotonic() + patience
    while True:
        conn.send(f"attach {token}")
        reply = conn.reply()
        if code(reply) == "attach_throttled" and time.monotonic() < deadline:
            time.sleep(min(float(reply["error"].get("retryAfter", 1)), 1.0))  # type: ignore[index]
            continue
        return reply


class Readers:
    """Connections of one session that read everything they are sent, on a thread of
    their own, counting the bytes."""

    def __init__(self, conns: list[LineConn]) -> None:
        self.conns = conns
        self.bytes = 0
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.selector = selectors.DefaultSelector()
        for conn in conns:
            conn.sock.setblocking(False)
            self.selector.register(conn.sock, selectors.EVENT_READ, conn)
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        while not self.stopped.is_set():
            for key, _ in self.selector.select(timeout=0.05):
                try:
                    data = key.fileobj.recv(1 << 20)  # type: ignore[union-attr]
                except (BlockingIOError, OSError):
                    continue
                with self.lock:
                    self.bytes += len(data)

    def settled(self) -> int:
        """The bytes read so far, once nothing has arrived for 0.3 s."""
        last = -1
        while True:
            time.sleep(0.3)
            with self.lock:
                now = self.bytes
            if now == last:
                return now
            last = now

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(timeout=5)
        for conn in self.conns:
            conn.close()

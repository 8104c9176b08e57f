"""A raw TCP protocol client for Python tests (browser, operations): lines out,
JSON lines in, the welcome read at connect."""
from __future__ import annotations

import json
import socket
from typing import Callable


class LineClient:
    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.buffer = b""
        self.welcome = self.next()

    def send(self, line: str) -> None:
        self.sock.sendall(line.encode() + b"\n")

    def next(self) -> dict:
        while b"\n" not in self.buffer:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("the server closed the connection")
            self.buffer += data
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def until(self, predicate: Callable[[dict], bool]) -> dict:
        """Reads until a message satisfies `predicate` and returns it."""
        while True:
            message = self.next()
            if predicate(message):
                return message

    def reply(self) -> dict:
        return self.until(lambda m: m.get("type") == "reply")

    def command(self, line: str) -> dict:
        """Sends a line and returns its reply."""
        self.send(line)
        return self.reply()

"""One client connection over raw TCP: newline-delimited JSON read with a deadline,
inline commands sent and their replies awaited, and every event observed as it
passes (revs must strictly increase on a connection; the views, the alert and a
`bye` are kept). A command unanswered in time, a closed socket or a `bye` raise
`Dropped`, and each command with its answer goes into its client's journal."""
from __future__ import annotations

import json
import socket
from typing import Dict, Optional, Tuple

from .constants import COMMAND_TIMEOUT, now


class Dropped(Exception):
    pass


class Connection:
    def __init__(self, address: Tuple[str, int], record):
        self.sock = socket.create_connection(address, timeout=2)
        self.sock.settimeout(COMMAND_TIMEOUT)
        self.address = address
        self.buffer = b""
        self.record = record
        self.last_rev = 0
        self.alert: Optional[dict] = None
        self.views: Dict[str, dict] = {}
        self.closed_by_server: Optional[str] = None
        self.welcome = self.read_message()

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def read_message(self, deadline: Optional[float] = None) -> dict:
        while b"\n" not in self.buffer:
            if deadline is not None:
                left = deadline - now()
                if left <= 0:
                    raise Dropped("timeout")
                self.sock.settimeout(left)
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                # Past the deadline a caller gave (events_until's wait ends without
                # dropping anything); with no deadline, the command timed out.
                raise Dropped("timeout" if deadline is not None else "timed out")
            except OSError as error:
                raise Dropped(str(error))
            if not data:
                raise Dropped("closed")
            self.buffer += data
        line, self.buffer = self.buffer.split(b"\n", 1)
        message = json.loads(line)
        self.observe(message)
        return message

    def observe(self, message: dict) -> None:
        kind = message.get("type")
        if "rev" in message and kind != "reply":
            rev = message["rev"]
            if rev <= self.last_rev:
                self.record.violation(f"rev {rev} after {self.last_rev} on one connection ({kind})")
            self.last_rev = max(self.last_rev, rev)
            self.record.rev = max(self.record.rev, rev)
        if kind == "display":
            self.views[message["view"]] = message["state"]
        elif kind == "alert":
            self.alert = message
        elif kind == "dismiss" and self.alert and self.alert.get("id") == message.get("id"):
            self.alert = None
        elif kind == "bye":
            self.closed_by_server = message.get("reason")

    def command(self, line: str) -> dict:
        """Sends an inline command and returns its reply (events seen meanwhile are
        observed)."""
        self.record.doing = (line.split()[0] if line else "", now(), self.address[1])
        journal = getattr(self.record, "journal", None)
        try:
            self.sock.sendall(line.encode() + b"\n")
        except OSError as error:
            raise Dropped(str(error))
        deadline = now() + COMMAND_TIMEOUT
        try:
            while True:
                message = self.read_message(deadline)
                if message.get("type") == "reply":
                    if journal is not None:
                        journal.append((now(), self.address[1], line, "ok" if message["ok"] else message["error"]["code"]))
                    return message
                if message.get("type") == "bye":
                    raise Dropped(f"bye {message.get('reason')}")
        except Dropped as error:
            if journal is not None:
                journal.append((now(), self.address[1], line, f"no reply: {error}"))
            raise

    def events_until(self, predicate, seconds: float) -> bool:
        deadline = now() + seconds
        while not predicate():
            try:
                self.read_message(deadline)
            except Dropped as error:
                if str(error) == "timeout":
                    return False
                raise
            if self.closed_by_server:
                raise Dropped(f"bye {self.closed_by_server}")
        return True

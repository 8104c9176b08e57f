"""Each client's reader: a second device on its session that stays on its node and
reads the state there until the server ends its connection, so a node that missed
its lease's lapse is seen serving in the serve log."""
from __future__ import annotations

import random
import threading
import time
from typing import TYPE_CHECKING, Optional, Tuple

from .connection import Connection, Dropped

if TYPE_CHECKING:
    from .client import Client
    from .run import Run


class Reader(threading.Thread):
    """A second device on a client's session that stays where it is (PROTOCOL §2.2's
    "the old owner's client is never told" case): it attaches on the node its client
    is on and reads the session's state there every few tenths of a second, leaving
    only when the server ends its connection (`bye`, a drop) or its client moves on to
    another session. An `unavailable` does not move it: a device nobody tells keeps
    asking. Any read a node serves for a session another node claimed meanwhile (a
    lapse the node missed) is then in the serve log, which the one-owner check reads."""

    def __init__(self, client: "Client", run: "Run"):
        super().__init__(daemon=True)
        self.client = client
        self.run_state = run
        self.random = random.Random(run.seed * 1000 + 500 + client.index)
        self.rev = 0
        self.doing: Tuple[str, float, int] = ("", 0.0, 0)

    def violation(self, text: str) -> None:
        self.run_state.violation(f"reader of client {self.client.index}: {text}")

    def attach(self, token: str, address: Tuple[str, int]) -> Optional[Connection]:
        """A connection attached to `token` on the node at `address`, or on the node
        it is sent on to; None when the session is not there to read."""
        for _ in range(3):
            connection = Connection(address, self)
            reply = connection.command(f"attach {token}")
            if reply["ok"]:
                return connection
            connection.close()
            if reply["error"]["code"] != "moved":
                return None
            host, port = reply["error"]["address"].rsplit(":", 1)
            address = (host, int(port))
        return None

    def run(self) -> None:
        connection: Optional[Connection] = None
        token: Optional[str] = None
        while not self.run_state.done.is_set():
            try:
                if connection is None or token != self.client.token:
                    if connection:
                        connection.close()
                        connection = None
                    token, current = self.client.token, self.client.connection
                    if token is None or current is None or token == self.client.quitting:
                        time.sleep(0.2)
                        continue
                    self.rev = 0
                    connection = self.attach(token, current.address)
                    if connection is None:
                        time.sleep(0.3 + self.random.random() * 0.3)
                        continue
                reply = connection.command("state")
                with self.run_state.lock:
                    if reply["ok"]:
                        self.run_state.reader_reads += 1
                    else:
                        code = reply["error"]["code"]
                        self.run_state.reader_refusals[code] = self.run_state.reader_refusals.get(code, 0) + 1
                time.sleep(0.2 + self.random.random() * 0.3)
            except (Dropped, OSError) as error:
                reason = str(error) if str(error).startswith("bye") else "dropped"
                with self.run_state.lock:
                    self.run_state.reader_ends[reason] = self.run_state.reader_ends.get(reason, 0) + 1
                if connection:
                    connection.close()
                connection = None
                time.sleep(0.2)
        if connection:
            connection.close()

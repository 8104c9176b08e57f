"""Idle sessions past the housekeeping horizon: a few sessions opened on one node,
each showing a search of its own, left idle and handed over by a SIGTERM (their
node leaves: no node holds them, only their records do), then — after the database's
clock stepped two days ahead and back — attached again: each must come back showing
its search. Housekeeping deletes records whose node left that nobody attached to for
a day; a two-day step of the database's clock must not make them look that old
(PROTOCOL §2.2). The clients' own "no session is lost" check sees only sessions in
use, never one left idle."""
from __future__ import annotations

import random
import time
from typing import TYPE_CHECKING, List, Optional, Tuple

from .connection import Connection, Dropped
from .constants import NODE_TIMEOUT, now

if TYPE_CHECKING:
    from .nodes import Node
    from .run import Run

IDLE_SESSIONS = 5
# How long an idle session may take to attach somewhere once the step is over.
ATTACH_WITHIN = 15.0


class Probe:
    """What a `Connection` records into: no journal, revs only per connection."""

    def __init__(self, run: "Run"):
        self.run_state = run
        self.doing: Tuple[str, float, int] = ("", 0.0, 0)
        self.rev = 0

    def violation(self, text: str) -> None:
        self.run_state.violation(f"idle session: {text}")


def open_idle(node: "Node", run: "Run") -> List[Tuple[str, str]]:
    """Opens IDLE_SESSIONS sessions on `node`, each with an acknowledged search of its
    own, and leaves them detached; returns (token, query) of each."""
    sessions: List[Tuple[str, str]] = []
    for _ in range(IDLE_SESSIONS):
        with run.lock:
            run.idle_opened += 1
            number = run.idle_opened
        query = f"idle {number}"
        try:
            connection = Connection(node.address, Probe(run))
            try:
                token = connection.welcome["token"]
                reply = connection.command(f"search {query}")
            finally:
                connection.close()
        except (Dropped, OSError):
            continue
        if reply["ok"]:
            sessions.append((token, query))
    return sessions


def attach_anywhere(token: str, nodes: List["Node"], run: "Run", rng: random.Random) -> Tuple[str, Optional[str]]:
    """Attaches `token` on some node (following `moved`, retrying `unavailable` and
    the like) and reads its state: ("ok", the search shown), ("lost", the error) on
    `bad_token`, or ("unanswered", the last error) after ATTACH_WITHIN."""
    deadline = now() + ATTACH_WITHIN
    last = "-"
    address = rng.choice(nodes).address
    while now() < deadline:
        try:
            connection = Connection(address, Probe(run))
            try:
                reply = connection.command(f"attach {token}")
                if reply["ok"]:
                    state = connection.command("state")
                    if state["ok"]:
                        return "ok", state["result"]["views"].get("search", {}).get("query")
                    last = state["error"]["code"]
                else:
                    last = reply["error"]["code"]
                    if last == "bad_token":
                        return "lost", last
                    if last == "moved":
                        host, port = reply["error"]["address"].rsplit(":", 1)
                        address = (host, int(port))
                        continue
            finally:
                connection.close()
        except (Dropped, OSError) as error:
            last = str(error)
        time.sleep(NODE_TIMEOUT / 5)
        address = rng.choice(nodes).address
    return "unanswered", last


def check_idle(sessions: List[Tuple[str, str]], nodes: List["Node"], run: "Run", rng: random.Random, step: str) -> None:
    """Every idle session attaches and shows its search; anything else is a violation."""
    for token, query in sessions:
        outcome, detail = attach_anywhere(token, nodes, run, rng)
        with run.lock:
            run.idle_checked += 1
        lookup = token[:16]
        if outcome == "ok" and detail == query:
            continue
        with run.lock:
            run.idle_lost += 1
        if outcome == "ok":
            run.violation(f"idle session {lookup}, handed over by SIGTERM, shows search {detail!r}, not {query!r},"
                          f" after the database's clock stepped {step}")
        elif outcome == "lost":
            run.violation(f"idle session {lookup}, handed over by SIGTERM, is lost ({detail} on attach)"
                          f" after the database's clock stepped {step}")
        else:
            run.violation(f"idle session {lookup}, handed over by SIGTERM, attached nowhere in {ATTACH_WITHIN:.0f} s"
                          f" (last: {detail}) after the database's clock stepped {step}")

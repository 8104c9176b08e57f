"""The client load: each client thread drives every seed flow (search, drafts with
saves and failing saves, contacts with syncs, log-in-gated playlist paging,
end-others, quit, reattaching from a random node) over raw TCP, following `moved`
to whichever node holds its session, and records every acknowledged effect, each
refusal streak and each recovery in the run for the checks at the end."""
from __future__ import annotations

import random
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Dict, List, Optional, Tuple

from .connection import Connection, Dropped
from .constants import JOURNAL_LENGTH, NODE_TIMEOUT, TRAIL_LENGTH, USER_GENERATIONS, now
from .history import HistoryChecks
from .nodes import Node

if TYPE_CHECKING:
    from .run import Run


class Client(HistoryChecks, threading.Thread):
    def __init__(self, index: int, nodes: List[Node], run: "Run"):
        super().__init__(daemon=True)
        self.index = index
        self.nodes = nodes
        self.run_state = run
        self.random = random.Random(run.seed * 1000 + index)
        self.generation = 0
        self.user = ""
        self.token: Optional[str] = None
        self.rev = 0
        self.connection: Optional[Connection] = None
        # The last connection on this session: what it showed (views, the alert) is
        # what a client resuming with its last-rev still shows (a replay sends only
        # what came after, PROTOCOL §2.1), as the Python and Node clients keep it.
        self.previous: Optional[Connection] = None
        self.acknowledged: Dict[str, List[str]] = {}    # user → acknowledged draft texts, in order
        self.drafts_for_user = 0
        self.unsaved = False         # a draft was acknowledged and not yet seen saved
        self.counter = 0
        self.failing_since: Optional[float] = None
        self.refused_since: Optional[Tuple[float, int, str, Optional[int]]] = None
        # The node that last served this session: while it has a fault, the session is
        # related to that fault wherever the client is refused (its owner is that node).
        self.served_by: Optional[int] = None
        self.lost_token: Optional[str] = None   # end-others' reply lost: this token may be revoked
        self.session_started = 0.0
        self.doing: Tuple[str, float, int] = ("", 0.0, 0)   # last command, when, to which port
        # The session's history, checked against a model of it: the acknowledged search
        # queries with when each was acknowledged, and those sent whose reply was lost
        # (they may or may not have run).
        self.searches: List[Tuple[str, float, int]] = []   # query, sent at (acknowledged later), by which port
        self.in_doubt: set = set()
        self.history_checks = 0
        self.quitting: Optional[str] = None
        # What failed since `failing_since`, newest last (at most TRAIL_LENGTH): kept in
        # the report when the client took long to work again.
        self.trail: List[str] = []
        # Every command with its answer, newest last (at most JOURNAL_LENGTH): written
        # beside the node logs when the run finds a violation, to read it against them.
        self.journal: deque = deque(maxlen=JOURNAL_LENGTH)

    # recording
    def violation(self, text: str) -> None:
        self.run_state.violation(f"client {self.index}: {text}")

    def refused(self, port: int) -> None:
        """An `unavailable` from the node at `port`: a refusal streak begins (or goes on)."""
        if self.refused_since is None and self.token:
            self.refused_since = (now(), port, self.token[:16], self.served_by, {port})
        elif self.refused_since is not None:
            self.refused_since[4].add(port)  # the streak went on at another node

    def success(self, port: Optional[int] = None) -> None:
        if self.refused_since is not None:
            since, refused_by, lookup, home, ports = self.refused_since
            with self.run_state.lock:
                self.run_state.refusals.append((since, now(), refused_by, lookup, home, frozenset(ports)))
            self.refused_since = None
        self.served_by = port if port is not None else self.doing[2] or self.served_by
        self.run_state.successes += 1
        minute = int((now() - self.run_state.started) // 60)
        self.run_state.per_minute[minute] = self.run_state.per_minute.get(minute, 0) + 1
        if self.failing_since is not None:
            self.run_state.recovered(self.index, self.failing_since, now(), self.trail)
            self.failing_since = None
            self.trail = []

    def failure(self, why: str = "") -> None:
        if self.failing_since is None:
            self.failing_since = now()
        command, _, port = self.doing
        self.trail.append(f"{now() - self.run_state.started:.1f} s {command or '-'} on :{port}: {why or '?'}")
        del self.trail[:-TRAIL_LENGTH]

    # connecting
    def connect(self) -> Connection:
        """A connection on this client's session, on whichever node holds it now."""
        while not self.run_state.done.is_set():
            node = self.random.choice(self.nodes)
            address = node.address
            try:
                for _ in range(3):
                    connection = Connection(address, self)
                    if self.token is None:
                        self.token = connection.welcome["token"]
                        try:
                            self.login(connection)
                        except Dropped:
                            self.new_session()   # nothing acknowledged on it: let it go
                            raise
                        self.session_started = now()   # its first acknowledgement
                        return connection
                    prior = self.rev
                    reply = connection.command(f"attach {self.token} {prior}")
                    if reply["ok"]:
                        self.served_by = address[1]
                        self.check_attach(connection, reply["result"])
                        # A resumed session is where a lost change would show: read it at once.
                        self.check_history(connection.command("state"), connection)
                        # A snapshot on a resume is a failover (a restore), or a log that
                        # no longer reaches back: either way a second device with the
                        # same last-rev must get one too. (Keyed on the snapshot, not on
                        # the restored revs' jump: a server without the jump must be
                        # caught, not skipped.)
                        if reply["result"].get("snapshot") and prior > 0:
                            self.second_device(address, prior)
                        return connection
                    code = reply["error"]["code"]
                    connection.close()
                    self.run_state.attach_errors[code] = self.run_state.attach_errors.get(code, 0) + 1
                    why = f"attach {code}"
                    if code == "moved":
                        host, port = reply["error"]["address"].rsplit(":", 1)
                        address = (host, int(port))
                        continue
                    if code == "bad_token":
                        # Lost with its first record unwritten: allowed only when a fault
                        # that may lose the last moments began within a node timeout of
                        # its first acknowledgement (a node acknowledges nothing once its
                        # records are that far behind), or records were held when it began
                        # (a node with nothing unwritten acknowledges a new session then).
                        if (now() - self.session_started > 5 and self.token != self.quitting and self.token != self.lost_token
                                and not self.run_state.lossy_fault_began(self.session_started - NODE_TIMEOUT - 0.5,
                                                                         before=self.session_started + NODE_TIMEOUT + 0.5)):
                            self.run_state.lost_sessions += 1
                            self.violation(f"session {self.token[:16]} of {now() - self.session_started:.1f} s"
                                           f" lost (bad_token on attach at {address[0]}:{address[1]})")
                        self.new_session()
                        break
                    if code == "record_unreadable":
                        # A release that cannot read the session's record: in this run
                        # every release reads every older record, and a newer one is
                        # sent on (`moved`) or refused with `unavailable`, never this.
                        with self.run_state.lock:
                            self.run_state.unreadable_sessions += 1
                            self.run_state.lost_sessions += 1
                        self.violation(f"session {self.token[:16]} refused as unreadable at {address[0]}:{address[1]}")
                        self.new_session()
                        break
                    if code == "unavailable":
                        self.run_state.unavailable += 1
                        self.refused(address[1])
                    break
                else:
                    why = "moved three times"
            except (Dropped, OSError) as error:
                why = f"connecting to :{address[1]}: {error}"
            self.failure(why)
            time.sleep(0.1 + self.random.random() * 0.2)
        raise Dropped("run over")

    def new_session(self) -> None:
        self.token = None
        self.previous = None
        self.rev = 0   # a new session's revs start again
        self.searches, self.in_doubt = [], set()

    def search(self, c: Connection, distinct: bool = False) -> None:
        query = self.random.choice(['pizza', 'thai', 'ramen', 'tacos', 'sushi', 'curry'])
        if distinct:
            self.counter += 1
            query += f" {self.counter}"
        self.in_doubt.add(query)
        sent = now()
        reply = self.expect_ok(c.command(f"search {query}"))
        if reply["ok"]:
            # When it was sent, not answered: the node may have acknowledged it at any
            # moment between the two (a reply written just before a pause arrives after it).
            self.searches.append((query, sent, c.address[1]))
            self.in_doubt.discard(query)

    def end_others(self, c: Connection) -> None:
        """`end-others`: the session's token changes and every other device (this
        client's reader) is let go. Answered ok, the new token is the session's;
        answered `unavailable` (the database down), nothing changed and the old one
        must still work (PROTOCOL §2.2). Only a lost reply leaves the token in doubt."""
        old = self.token
        try:
            reply = c.command("end-others")
        except Dropped:
            self.lost_token = old
            with self.run_state.lock:
                self.run_state.end_others["in doubt"] += 1
            raise
        if reply["ok"]:
            self.token = reply["result"]["token"]
            with self.run_state.lock:
                self.run_state.end_others["ok"] += 1
        elif reply["error"]["code"] == "unavailable":
            with self.run_state.lock:
                self.run_state.end_others["unavailable"] += 1
        self.expect_ok(reply)

    def quit(self, c: Connection) -> None:
        """Ends the session; once `quit` is acknowledged its token must never attach
        again, on any node, whatever crashes after."""
        token = self.token
        self.quitting = token   # until its reply: a quit whose reply was lost may have run
        reply = c.command("quit")
        if reply["ok"]:
            self.success()
            with self.run_state.lock:
                self.run_state.quit_tokens.append((token, now()))
                if self.run_state.quit_kill_wanted:
                    # The "quit, then SIGKILL" fault: the node that acknowledged it dies now.
                    self.run_state.quit_kill_wanted = False
                    self.run_state.quit_kill_port = c.address[1]
                    self.run_state.quit_kill_ready.set()
        c.close()
        self.connection = None
        self.new_session()

    def let_go(self) -> None:
        """Closes this client's connection, keeping what it showed for the resume."""
        if self.connection:
            self.connection.close()
            self.previous = self.connection
        self.connection = None

    def login(self, connection: Connection) -> None:
        if not self.user or self.drafts_for_user >= 80:
            # Users take turns (the server hashes every user's password at start): a
            # user keeps its newest 100 saved drafts, the check looks at the last 80.
            self.user = f"u{self.index}g{self.generation % USER_GENERATIONS}"
            self.generation += 1
            self.drafts_for_user = 0
            self.run_state.users.add(self.user)
        reply = connection.command(f"login {self.user} pw-{self.user}")
        if not reply["ok"]:
            raise Dropped(f"login failed: {reply['error']['code']}")

    # flows
    def step(self) -> None:
        if self.unsaved:
            self.save_until_done()   # never overwrite an acknowledged draft
        c = self.connection
        if self.run_state.burst_until > now() and c.address[1] == self.run_state.burst_port:
            # Its node is about to get a SIGTERM: searches back to back, so the last
            # acknowledged ones are newer than the last record the rate limit let
            # through (the final flush must write them all).
            self.search(c, distinct=True)
            with self.run_state.lock:
                self.run_state.burst_searches += 1
            return
        choice = self.random.random()
        if choice < 0.25:
            self.search(c)
        elif choice < 0.5:
            self.draft_flow(c)
        elif choice < 0.6:
            self.expect_ok(c.command("contacts"))
            self.expect_ok(c.command("sync"), allowed=("busy",))
        elif choice < 0.7:
            reply = c.command("playlist")
            self.expect_ok(reply, allowed=("busy",))
            for _ in range(self.random.randint(0, 2)):
                self.answer_alerts(c)
                self.expect_ok(c.command("more"), allowed=("busy", "nothing_pending"))
        elif choice < 0.85:
            self.check_history(self.expect_ok(c.command("state")), c)
        elif choice < 0.87 and not self.unsaved:
            self.quit(c)
            self.connection = self.connect()
        elif choice < 0.88:
            self.end_others(c)
        else:
            # Reattach: drop the connection on purpose and attach again from a random node.
            self.let_go()
            self.connection = self.connect()
        self.answer_alerts(self.connection)

    def expect_ok(self, reply: dict, allowed: Tuple[str, ...] = ()) -> dict:
        if reply["ok"]:
            self.success()
            return reply
        code = reply["error"]["code"]
        if code == "unavailable":
            self.run_state.unavailable += 1
            self.refused(self.doing[2])
            self.failure("unavailable")
            raise Dropped("unavailable")
        if code in allowed:
            self.success()
            return reply
        self.run_state.errors[code] = self.run_state.errors.get(code, 0) + 1
        return reply

    def answer_alerts(self, c: Connection) -> None:
        for _ in range(5):
            alert = c.alert
            if not alert:
                return
            fields = alert.get("fields") or []
            values = " ".join(f"{f['name']}={self.user if f['name'] == 'user' else 'pw-' + self.user}" for f in fields)
            reply = c.command(f"confirm {alert['id']} {values}".strip())
            if not reply["ok"] and reply["error"]["code"] not in ("no_alert",):
                self.expect_ok(reply)
            if c.alert is alert:
                c.alert = None

    def draft_flow(self, c: Connection) -> None:
        self.counter += 1
        text = f"d{self.index}-{self.counter}"
        if self.random.random() < 0.3:
            self.expect_ok(c.command("fault save 1 chaos"))      # this save fails once: "save again?"
        reply = c.command(f"draft {text}")
        if not reply["ok"]:
            self.expect_ok(reply)
            return
        self.acknowledged.setdefault(self.user, []).append(text)
        self.unsaved = True
        self.drafts_for_user += 1
        self.success()
        self.save_until_done()

    def save_until_done(self) -> None:
        """`save` until the database holds no pending draft for this user."""
        for _ in range(40):
            c = self.connection
            reply = c.command("save")
            if reply["ok"]:
                self.success()
                c.events_until(lambda: (c.alert is not None) or not c.views.get("draft", {}).get("pending", True), 3)
                self.answer_alerts(c)
                continue
            code = reply["error"]["code"]
            if code == "nothing_to_save":
                self.success()
                self.unsaved = False
                return
            if code == "busy":
                # A save is running, or waiting on an alert (the draft left pending
                # is offered again after a restore or a log-in): answer it.
                self.answer_alerts(c)
                c.events_until(lambda: c.alert is not None, 0.3)
                continue
            if code == "login_required":
                # Restored from a record written before the log-in reached it (a node
                # died within a batch of a new session's log-in: PROTOCOL §2.2 lets that
                # go): log in again, as a person would, and the pending draft is offered.
                self.run_state.errors[code] = self.run_state.errors.get(code, 0) + 1
                self.login(c)
                continue
            self.expect_ok(reply)
            time.sleep(0.1)
        self.violation("a draft could not be saved in 40 attempts")

    def run(self) -> None:
        while not self.run_state.done.is_set():
            try:
                if self.connection is None:
                    self.connection = self.connect()
                self.step()
            except Dropped as error:
                self.failure(f"dropped: {error}")
                self.let_go()
            except Exception as error:       # a bug in this script, or a broken reply
                self.violation(f"unexpected {type(error).__name__}: {error}")
                if self.connection:
                    self.connection.close()
                self.connection = None
                time.sleep(0.2)
        # Finish what was acknowledged: the last draft is saved or stays pending.
        if self.connection:
            self.connection.close()

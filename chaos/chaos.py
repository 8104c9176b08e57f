#!/usr/bin/env python3
"""./dev chaos: a cluster under faults, checked like Jepsen would.

Three viewline-server nodes share one throwaway PostgreSQL. Client threads drive
every seed flow (search, drafts with saves and failing saves, contacts with syncs,
log-in-gated playlist paging, attach/reattach, quit) through raw TCP, recording every
acknowledged effect. Meanwhile faults are injected one at a time, at random, every
kind at least once: SIGKILL a node (and restart it; or just after it acknowledged a `quit`), SIGSTOP a node past the node
timeout (and SIGCONT it), cut a node off from PostgreSQL (each node reaches the
database through a TCP proxy this script controls: the link is blackholed, then
healed), slow a node's link to PostgreSQL past the lease (its renewals, sent in
time, run late), hold every node's draft writes in PostgreSQL (a lock on the draft
tables) while one node's link is slowed past its lease (its writes, begun while it
held the lease, finish after another node may have claimed the session), restart PostgreSQL, SIGTERM a node under the full load (a rolling
restart's step: it must hand every acknowledged change over; every other one comes
back with a node timeout of its own, which it must not use), hold every session
record write in PostgreSQL (a lock on the records table) past three node timeouts
while leases renew, then SIGKILL a node just before the writes go on (it must have
stopped acknowledging once its records fell behind), silence a node's open
connections to PostgreSQL for good while new ones work (a NAT that forgot its
flows: statements must end at their deadlines), hold one session's record row in
another transaction past the node timeout (that session alone may be refused), slow
a node's link so renewals land late but inside the node timeout, and fill the
contacts table so every session showing it has a record over 256 KiB, then SIGKILL a
node (records of any size are written and restored). Clients also send `end-others`
now and then (during a database restart it must answer `unavailable` and change
nothing). One node runs with its clock minutes ahead (faketime).

At the end it checks, and writes a markdown report:
- every acknowledged draft is saved or still pending in the database (0 lost);
- each session's history against a model of it: every state read shows the last
  acknowledged search (or one whose reply was lost), unless a fault that may lose the
  last moments (kill, pause, cut, slow link, database restart, held records; never a
  SIGTERM) began after it was sent or at most a node timeout before (a node whose
  records are further behind acknowledges nothing; the node may have acknowledged it
  any time until the reply came), or unless its node stepped down on its own (its
  records two node timeouts behind with no fault injected: a batch hung on a loaded
  machine) and the search was sent before it stopped acknowledging — read at random
  and right after every resume;
- no session is lost: a token that was never quit and had a command acknowledged
  attaches somewhere, unless such a fault began within a node timeout of that
  first acknowledgement (its first record unwritten);
- every acknowledged `quit` stays quit: no live record of it in the database, and its
  token attaches on no node;
- per connection, event revs strictly increase, and an attach delivers a replay or a
  snapshot, never both, and nothing twice; after a resume answered with a snapshot
  (a failover) a second device attaching with the old owner's last-rev gets a
  snapshot above it, and the session's history;
- no node served a command for a session after another node claimed it (from the
  nodes' debug logs: `command record=…` and `claimed record=…`, time-stamped here as
  they are read) — each client has a reader, a second device on its session that
  stays on its node and reads the state there until the server ends its connection
  (`unavailable` does not move it), so a node that missed its lapse is seen serving;
- time from each fault to its clients working again, `unavailable` replies;
- liveness: a session refused (`unavailable`) by a node with no fault near it (none
  on that node — nor on any other node that refused it in the same streak, as when
  the client tried elsewhere meanwhile — within two node timeouts and a half before,
  none cluster-wide, no lock on the session's own record) for longer than one node
  timeout is listed (and is a violation with --strict-liveness);
- each node's RSS at the start and the end.
Exits 1 on any violation.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Dict, FrozenSet, List, Optional, Tuple

NODE_TIMEOUT = 2.0          # seconds: --node-timeout of every node
COMMAND_TIMEOUT = 6.0       # a command unanswered this long: the connection is dropped
USER_GENERATIONS = 6         # users per client, taking turns
FAULT_KINDS = ["kill", "quitkill", "pause", "partition", "slow", "heldwrites", "postgres", "term", "heldrecords",
               "silent", "rowlock", "slowrenew", "bigrecords"]
# Injected only when asked for (--faults); none today.
OPT_IN_FAULT_KINDS: List[str] = []
JOURNAL_LENGTH = 5000       # commands each client's journal keeps
LIVENESS_BOUND = NODE_TIMEOUT   # an unrelated session refused longer than this is a violation
RECOVERY_WINDOW = 2 * NODE_TIMEOUT + 0.5   # after a fault, its node may refuse this long
LONG_RECOVERY = 30.0        # seconds without a success: the report shows what failed meanwhile
TRAIL_LENGTH = 12           # the last failures kept per client while it fails
TOLERANCE = 0.2             # log lines are time-stamped as read: scheduling slack
PAUSED_LINES = 1.0          # a SIGCONTed node's lines written before its SIGSTOP arrive within this
SIGTERM_BURST = 1.0         # seconds of back-to-back searches on a node before its SIGTERM
# A node steps down once its records are two node timeouts behind (and its lease loop
# notices, every fifth of one): a fault this long before a step-down may have caused it.
STEP_DOWN_WINDOW = 2 * NODE_TIMEOUT + NODE_TIMEOUT / 5 + TOLERANCE


def now() -> float:
    return time.monotonic()


def free_port() -> int:
    """A free port below Linux's ephemeral range: a client retrying a dead node's
    port must never be handed that port as its own (a TCP self-connect would then
    hold it, and the node could not start again)."""
    while True:
        port = random.randint(20000, 32000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue


def libfaketime() -> str:
    """libfaketime's multithreaded library, from Debian's faketime package."""
    listing = subprocess.run(["dpkg", "-L", "libfaketime"], capture_output=True, text=True).stdout.split()
    for path in listing:
        if path.endswith("libfaketimeMT.so.1"):
            return path
    raise SystemExit("libfaketime is missing: apt-get install faketime")


# --------------------------------------------------------------------------- proxy

class Link:
    """A node's path to PostgreSQL: a TCP proxy that can be cut (blackholed: bytes
    are swallowed, new connections hang) and healed (what was open during the cut is
    reset, as a real partition's timeouts would)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, upstream: Tuple[str, int]):
        self.loop = loop
        self.upstream = upstream
        self.cut = False
        self.delay = 0.0                    # seconds each byte is held (a slow link)
        self.port = 0
        self.serial = 0
        self.pairs: Dict[int, List[asyncio.StreamWriter]] = {}   # serial → both ends
        self.tainted: set = set()                                # serials open during a cut
        self.silenced: set = set()                               # serials gone silent for good

    async def start(self) -> None:
        server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held = False
        while self.cut:                     # a SYN into the void: wait for the heal
            held = True
            await asyncio.sleep(0.05)
        if held:
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.transport.abort()
            return
        self.serial += 1
        serial = self.serial
        self.pairs[serial] = [writer, up_writer]

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            # Bytes go on in order, each `delay` after it arrived (a slow link: a
            # statement sent in time runs late in PostgreSQL).
            queue: asyncio.Queue = asyncio.Queue()

            async def forward() -> None:
                while True:
                    due, data = await queue.get()
                    if data is None:
                        return
                    wait = due - self.loop.time()
                    if wait > 0:
                        await asyncio.sleep(wait)
                    dst.write(data)
                    await dst.drain()
            forwarder = asyncio.ensure_future(forward())
            try:
                while True:
                    data = await src.read(65536)
                    if not data:
                        break
                    if self.cut:
                        self.tainted.add(serial)
                        continue            # swallowed
                    if serial in self.silenced:
                        continue            # swallowed, and nobody is told
                    if serial in self.tainted:
                        break
                    queue.put_nowait((self.loop.time() + self.delay, data))
                queue.put_nowait((0.0, None))
                await forwarder
            except (OSError, ConnectionError):
                pass
            finally:
                forwarder.cancel()
                for end in self.pairs.get(serial, []):
                    end.transport.abort()
        await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))
        self.pairs.pop(serial, None)
        self.tainted.discard(serial)
        self.silenced.discard(serial)

    def upstream_ports(self) -> List[int]:
        """The local ports of this link's open connections to PostgreSQL: its
        backends' `client_port`s."""
        async def ports() -> List[int]:
            return [pair[1].get_extra_info("sockname")[1] for pair in self.pairs.values()]
        return asyncio.run_coroutine_threadsafe(ports(), self.loop).result()

    def silence(self) -> None:
        """Every connection open now goes silent for good (what either side sends is
        dropped, nothing is closed); new connections work: a NAT or firewall that
        forgot its flows. The node must notice by its own deadlines."""
        def apply() -> None:
            self.silenced.update(self.pairs)
        self.loop.call_soon_threadsafe(apply)

    def set_delay(self, seconds: float) -> None:
        def apply() -> None:
            self.delay = seconds
        self.loop.call_soon_threadsafe(apply)

    def set_cut(self, cut: bool) -> None:
        def apply() -> None:
            self.cut = cut
            if cut:
                self.tainted.update(self.pairs)
            else:
                for serial in list(self.tainted):
                    for end in self.pairs.get(serial, []):
                        end.transport.abort()
                self.tainted.clear()
        self.loop.call_soon_threadsafe(apply)


# --------------------------------------------------------------------------- nodes

@dataclass
class Incarnation:
    pid: int
    label: str
    started: float
    rss_start: Optional[int] = None


class Node:
    def __init__(self, index: int, args, link: Link, log_dir: str, skewed: bool, events: "ServeLog"):
        self.index = index
        self.args = args
        self.link = link
        self.port = free_port()
        self.skewed = skewed
        self.log_dir = log_dir
        self.events = events
        self.process: Optional[subprocess.Popen] = None
        self.incarnations: List[Incarnation] = []
        self.stopped = False
        self.failed_starts = 0

    @property
    def address(self) -> Tuple[str, int]:
        return ("127.0.0.1", self.port)

    def start(self, node_timeout: float = NODE_TIMEOUT) -> None:
        """Starts the node; a `node_timeout` other than the cluster's is adopted from
        the database with a warning (the node must never measure leases its own way)."""
        url = f"postgres://postgres@127.0.0.1:{self.link.port}/viewline?sslmode=disable"
        command = [
            os.path.join(self.args.bin, "viewline-server"), "--port", str(self.port), "--postgres", url,
            "--node-timeout", str(int(node_timeout)), "--admin", "--users", self.args.users,
            "--remote-contacts", self.args.contacts, "--log-level", "debug",
            "--max-clients-per-address", "0", "--max-sessions-per-address", "0", "--max-logins-per-address", "0",
        ]
        env = dict(os.environ)
        if self.skewed:
            # libfaketime preloaded into the node itself (the `faketime` wrapper forks:
            # signals sent to it would miss the node). Through `env`, which execs in
            # place: a Swift program exec'd straight from here with libfaketime
            # preloaded sees no arguments at all (it ran as a default server on port
            # 7878, with SQLite, for every run before this was found).
            env["LD_PRELOAD"] = libfaketime()
            env["FAKETIME"] = f"+{self.args.skew_minutes}m"
            env["FAKETIME_DONT_FAKE_MONOTONIC"] = "1"
            command = ["/usr/bin/env"] + command
        label = f"node{self.index}.{len(self.incarnations)}"
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        self.incarnations.append(Incarnation(self.process.pid, label, now()))
        self.stopped = False
        log = open(os.path.join(self.log_dir, label + ".log"), "w")
        threading.Thread(target=self.events.read, args=(self.process.stderr, label, log), daemon=True).start()
        line = self.process.stdout.readline().decode()
        if line.startswith("listening on") and not line.strip().endswith(f":{self.port}"):
            # Not the node this script started (its arguments were lost): stop here.
            self.process.kill()
            raise SystemExit(f"{label} listens elsewhere than --port {self.port}: {line.strip()!r}")
        if not line.startswith("listening on"):
            # Like a supervisor (systemd's Restart=on-failure): note it, start again.
            self.process.wait()
            self.failed_starts += 1
            if self.failed_starts > 20:
                raise SystemExit(f"{label} did not start: {line!r}; see {log.name}")
            print(f"  {label} did not start (see {log.name}); starting it again", flush=True)
            time.sleep(1)
            return self.start(node_timeout)
        threading.Thread(target=self.process.stdout.read, daemon=True).start()

    def rss(self) -> Optional[int]:
        try:
            with open(f"/proc/{self.process.pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            return None
        return None

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            if self.stopped:
                self.process.send_signal(signal.SIGCONT)
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()


class ServeLog:
    """Which node served or claimed which session record, time-stamped as read."""
    PATTERN = re.compile(r"record=(\w+)")
    REV = re.compile(r"\brev=(\d+)")

    # A node stepping down on its own: its records fell two node timeouts behind with
    # no fault injected (a batch that hung on a loaded machine).
    STEP_DOWN = "session records cannot be written; letting this node's lease run out"

    def __init__(self):
        self.lock = threading.Lock()
        self.entries: List[Tuple[float, str, str, str, int]] = []   # (time, record, label, kind, claim's epoch)
        self.step_downs: List[Tuple[float, str]] = []           # (time, label)

    def read(self, stream, label: str, log) -> None:
        for raw in iter(stream.readline, b""):
            t = now()
            line = raw.decode(errors="replace")
            log.write(f"{t:.3f} {line}")
            if self.STEP_DOWN in line:
                with self.lock:
                    self.step_downs.append((t, label))
            if "record=" not in line:
                continue
            match = self.PATTERN.search(line)
            if not match:
                continue
            kind = "claim" if line.rstrip().endswith(" claimed") else ("serve" if line.rstrip().endswith(" command") else None)
            if kind:
                # A claim raises the record's rev by 2^32 (SessionRecord.maximumLag): its
                # epoch is the database's order of claims, whenever each was logged.
                rev = self.REV.search(line) if kind == "claim" else None
                epoch = int(rev.group(1)) >> 32 if rev else -1
                with self.lock:
                    self.entries.append((t, match.group(1), label, kind, epoch))
        log.close()

    def records_stopped(self, after: float) -> bool:
        """Whether a node that stepped down on its own stopped writing records after
        `after`: two node timeouts (and a lease check) before its step-down. It
        acknowledged for at most a node timeout less the margin after that, and what
        it acknowledged then may be lost with it (PROTOCOL §2.2); what it acknowledged
        later is not excused."""
        with self.lock:
            return any(t - STEP_DOWN_WINDOW >= after for t, _ in self.step_downs)

    def violations(self, pauses: List[Tuple[float, float, str]] = ()) -> Tuple[List[str], int]:
        """Commands served by a node after another node claimed the session.

        `pauses` are the SIGSTOPs (start, end, label): a claim a node logged just
        before it was stopped can reach this log only once it runs again, after
        another node may have claimed the session from it — so a claim read within
        PAUSED_LINES of a pause's end is dated to the pause's start. Commands are not
        moved: a node that serves after waking up is still seen doing so."""
        by_record: Dict[str, List[Tuple[float, str, str, int]]] = {}
        with self.lock:
            for t, record, label, kind, epoch in self.entries:
                if kind == "claim":
                    t = next((start for start, end, paused in pauses
                              if paused == label and end <= t <= end + PAUSED_LINES), t)
                by_record.setdefault(record, []).append((t, label, kind, epoch))
        found: List[str] = []
        near = 0
        for record, entries in by_record.items():
            entries.sort()
            owner: Optional[str] = None
            claimed_at = 0.0
            owner_epoch = -1
            for t, label, kind, epoch in entries:
                if kind == "claim":
                    # A claim logged after one the database made later (a higher epoch)
                    # was already superseded when it was read: a node stalled between
                    # its claim and its log line (held records, load). It moves nothing;
                    # that node serving the session afterwards is still caught.
                    if epoch >= 0 and epoch < owner_epoch:
                        continue
                    owner, claimed_at, owner_epoch = label, t, epoch
                elif owner is None:
                    owner = label
                elif label != owner:
                    if t - claimed_at > TOLERANCE:
                        found.append(f"{label} served record {record[:6]}… {t - claimed_at:.3f} s after {owner} claimed it")
                    else:
                        near += 1
        return found, near


# --------------------------------------------------------------------------- clients

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


class Client(threading.Thread):
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

    def second_device(self, address: Tuple[str, int], prior: int) -> None:
        """After a resume answered with a snapshot (a failover: the session restored
        on another node, its revs in a new space), a second device that saw the same
        revs on the old node attaches with the same last-rev: it must get a snapshot
        numbered above it (a replay would be of this owner's events, read as if they
        followed the old owner's), and the session's history as the first device
        sees it."""
        self.run_state.second_devices += 1
        try:
            device = Connection(address, self)
            try:
                reply = device.command(f"attach {self.token} {prior}")
                if not reply["ok"]:
                    return      # moved on again meanwhile: nothing to compare
                result = reply["result"]
                if not result.get("snapshot") or result.get("replayed", 0):
                    self.violation(f"a second device attaching with the old owner's last-rev {prior}"
                                   f" after a failover got a replay ({result.get('replayed', 0)} events), not a snapshot")
                if result.get("rev", 0) < prior:
                    self.violation(f"a second device after a failover got rev {result.get('rev')} below its last-rev {prior}")
                device.last_rev = prior
                self.check_history(device.command("state"), device)
            finally:
                device.close()
        except (Dropped, OSError):
            pass

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

    def check_history(self, reply: dict, via: Connection) -> None:
        """A state read against the model: the search query shown is one this session
        acknowledged (or sent and lost the reply of); and unless a fault that loses
        the last moments (a kill, a pause, a cut, a database restart) began after the
        last acknowledgement, it is the last one acknowledged: a clean shutdown
        (SIGTERM) hands every acknowledged change over."""
        if not reply["ok"] or not self.searches:
            return
        shown = reply["result"]["views"]["search"]["query"]
        last, sent_at, acknowledged_by = self.searches[-1]
        self.history_checks += 1
        if shown == last or shown in self.in_doubt:
            return
        # A fault that began up to a node timeout before the search was sent, or after:
        # a node whose records are further behind than that acknowledges nothing, and
        # the node may have acknowledged it any time until the reply came.
        lossy = (self.run_state.lossy_fault_began(sent_at - NODE_TIMEOUT - 0.5)
                 or (self.run_state.serve_log is not None
                     and self.run_state.serve_log.records_stopped(sent_at - NODE_TIMEOUT - 0.5)))
        if lossy and (shown in {q for q, _, _ in self.searches} or shown == ""):
            return
        self.violation(f"state shows search {shown!r} after {last!r} was acknowledged"
                       f" (sent {now() - sent_at:.1f} s ago) with no fault since that may lose it"
                       f" (session {(self.token or '?')[:16]}, acknowledged on port {acknowledged_by}, read on port {via.address[1]})")

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

    def check_attach(self, connection: Connection, result: dict) -> None:
        """Replay or snapshot, never both; replayed events come after the last rev."""
        replayed, snapshot, rev = result.get("replayed", 0), result.get("snapshot", False), result.get("rev", 0)
        if replayed and snapshot:
            self.violation("an attach both replayed and sent a snapshot")
        # Replayed or snapshot events alike come after the last rev this client saw
        # (a restored session whose record trails it continues after it).
        if rev < self.rev:
            self.violation(f"attach answered rev {rev} below last-rev {self.rev}")
        connection.last_rev = self.rev
        if not snapshot and self.previous is not None:
            connection.views = dict(self.previous.views)
            connection.alert = self.previous.alert
        self.previous = None

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


# --------------------------------------------------------------------------- run

class Run:
    def __init__(self, seed: int):
        self.seed = seed
        self.done = threading.Event()
        self.lock = threading.Lock()
        self.violations: List[str] = []
        self.successes = 0
        self.started = now()
        self.serve_log: Optional["ServeLog"] = None   # set once the nodes' logs are read
        self.per_minute: Dict[int, int] = {}
        self.unavailable = 0
        self.lost_sessions = 0
        self.second_devices = 0
        self.reader_reads = 0
        self.reader_refusals: Dict[str, int] = {}   # error code → state reads a reader was refused
        self.reader_ends: Dict[str, int] = {}       # why a reader's connection ended → how often
        self.stalls = 0
        self.attach_errors: Dict[str, int] = {}
        self.errors: Dict[str, int] = {}
        self.users: set = set()
        self.faults: List[Tuple[float, float, str]] = []   # (start, end, description)
        # Where each fault is near, for the liveness check: (start, end, node port or
        # None for every node, a session's lookup or None).
        self.fault_scope: List[Tuple[float, float, Optional[int], Optional[str]]] = []
        # Each time a client's session was refused (`unavailable`) until it worked
        # again: (first refusal, next success, the refusing node's port, the lookup).
        self.refusals: List[Tuple[float, float, int, str, Optional[int], FrozenSet[int]]] = []
        self.end_others = {"ok": 0, "unavailable": 0, "in doubt": 0}
        self.big_records = 0   # largest session record seen during a big-records fault (bytes)
        self.current: Optional[Tuple[float, float, str]] = None   # the fault under way
        self.quit_tokens: List[Tuple[str, float]] = []
        # "quit, then SIGKILL": the next acknowledged quit names its node, which is killed.
        self.quit_kill_wanted = False
        self.quit_kill_port = 0
        self.quit_kill_ready = threading.Event()
        # "SIGTERM under a high command rate": until `burst_until`, every client on the
        # node at `burst_port` sends searches back to back (each a query of its own).
        self.burst_port = 0
        self.burst_until = 0.0
        self.burst_searches = 0
        self.recoveries: List[Tuple[int, float, float]] = []
        self.long_recoveries: List[Tuple[int, float, float, List[str]]] = []

    def violation(self, text: str) -> None:
        with self.lock:
            self.violations.append(f"{now() - self.started:.1f} s: {text}")
        print(f"VIOLATION {text}", file=sys.stderr, flush=True)

    def lossy_fault_began(self, after: float, before: Optional[float] = None) -> bool:
        """Whether a fault that may lose a node's last moments (a kill, a pause, a cut, a
        slow link, a database restart; never a SIGTERM) began after `after` (and
        before `before`), or is one of held records that was still going on at `after`.

        Held records lose more than the moments before their kill: a node with nothing
        waiting to be written goes on acknowledging while a batch hangs, and refuses
        only once its oldest unwritten change is older than the node timeout less the
        margin (PROTOCOL §2.2). A session that began (or a change made) anywhere in the
        hold, on the node that is then killed before its records go on, may be lost."""
        with self.lock:
            faults = self.faults + ([(self.current[0], now(), self.current[2])] if self.current else [])
        return any(not what.startswith("SIGTERM")
                   and ((start >= after and (before is None or start <= before))
                        or (held_records(what) and start <= after and end >= after))
                   for start, end, what in faults)

    def recovered(self, client: int, since: float, at: float, trail: List[str]) -> None:
        with self.lock:
            self.recoveries.append((client, since, at))
            if at - since >= LONG_RECOVERY:
                self.long_recoveries.append((client, since, at, list(trail)))


def held_records(what: str) -> bool:
    """Whether a fault (its kind while it goes on, its description once over) is the
    one of held records."""
    return what == "heldrecords" or what.startswith("records held")


def hold_tables(args, tables: str, seconds: float) -> subprocess.Popen:
    """A psql that takes `tables` in EXCLUSIVE mode (reads go on, every write queues
    behind it) for `seconds`, then lets go; wait() on it."""
    return subprocess.Popen(
        args.psql + ["-Atc", f"BEGIN; LOCK TABLE {tables} IN EXCLUSIVE MODE; SELECT pg_sleep({seconds:.2f}); COMMIT;"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def psql(args, sql: str) -> List[str]:
    # The statement goes in on standard input: a long run's checks list thousands of
    # tokens, past what one command-line argument may hold.
    out = subprocess.run(args.psql + ["-At", "-v", "ON_ERROR_STOP=1", "-f", "-"], input=sql, capture_output=True, text=True,
                         check=True).stdout
    return [line for line in out.splitlines() if line]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", required=True)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--pg-port", type=int, required=True)
    parser.add_argument("--pg-restart", required=True, help="the command line that restarts PostgreSQL on its port (Tests/support/postgres restart DIR)")
    parser.add_argument("--psql", required=True, help="the psql command line, connection options included")
    parser.add_argument("--dir", required=True)
    parser.add_argument("--report", required=True)
    parser.add_argument("--clients", type=int, default=9)
    parser.add_argument("--strict-liveness", action="store_true",
                        help="count an unrelated session refused longer than one node timeout as a violation"
                             " (reported either way; see the report's liveness line)")
    parser.add_argument("--skew-minutes", type=int, default=10)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--faults", default=",".join(FAULT_KINDS),
                        help=f"the fault kinds to inject, comma-separated (default: {', '.join(FAULT_KINDS)};"
                             f" also: {', '.join(OPT_IN_FAULT_KINDS)}); one kind aims a run at one fix, as a mutation check does")
    args = parser.parse_args()
    args.faults = [kind for kind in args.faults.split(",") if kind]
    unknown = [kind for kind in args.faults if kind not in FAULT_KINDS + OPT_IN_FAULT_KINDS]
    if unknown or not args.faults:
        parser.error(f"--faults: unknown kind {', '.join(unknown) or '(none given)'}; kinds: {', '.join(FAULT_KINDS + OPT_IN_FAULT_KINDS)}")
    args.pg_restart = args.pg_restart.split()
    args.psql = args.psql.split()
    run = Run(args.seed)
    rng = random.Random(args.seed)

    users = [{"user": f"u{i}g{g}", "password": f"pw-u{i}g{g}"} for i in range(args.clients) for g in range(USER_GENERATIONS)]
    args.users = os.path.join(args.dir, "users.json")
    with open(args.users, "w") as f:
        json.dump(users, f)
    args.contacts = os.path.join(args.dir, "contacts.json")
    with open(args.contacts, "w") as f:
        json.dump([{"name": f"Contact {i}", "phone": f"555-{i:04}", "address": f"{i} Chaos Street"} for i in range(20)], f)

    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    serve_log = ServeLog()
    run.serve_log = serve_log
    nodes: List[Node] = []
    for i in range(3):
        link = Link(loop, ("127.0.0.1", args.pg_port))
        asyncio.run_coroutine_threadsafe(link.start(), loop).result()
        nodes.append(Node(i, args, link, args.dir, skewed=(i == 2), events=serve_log))
    try:
        return drive(args, run, rng, nodes, serve_log)
    finally:
        for node in nodes:
            node.stop()


def drive(args, run: Run, rng: random.Random, nodes: List[Node], serve_log: ServeLog) -> int:
    for node in nodes:
        node.start()

    clients = [Client(i, nodes, run) for i in range(args.clients)]
    readers = [Reader(client, run) for client in clients]
    for thread in clients + readers:
        thread.start()
    # One time base for the report: faults, violations and the clients' journals.
    started = run.started = now()
    time.sleep(2)
    for node in nodes:
        node.incarnations[-1].rss_start = node.rss()

    kinds = args.faults
    plan = kinds[:]
    rng.shuffle(plan)
    end = started + args.seconds
    print(f"chaos: {args.seconds:.0f} s, {args.clients} clients, 3 nodes (node2 {args.skew_minutes} min ahead), seed {args.seed}", flush=True)
    def watch() -> None:
        """Liveness: the load must make progress; when it stalls, say what each
        client is doing (a stall is reported as a violation at the end)."""
        last, stalled_since = run.successes, None
        while not run.done.wait(5):
            if run.successes != last:
                last, stalled_since = run.successes, None
                continue
            stalled_since = stalled_since or now()
            if now() - stalled_since >= 20:
                run.stalls += 1
                print(f"  no command acknowledged for {now() - stalled_since:.0f} s; clients: " + "; ".join(
                    f"{c.index}: {c.doing[0]} to :{c.doing[2]} {now() - c.doing[1]:.0f} s ago" for c in clients), flush=True)
                stalled_since = now()
    threading.Thread(target=watch, daemon=True).start()
    while now() < end - 4:
        kind = plan.pop(0) if plan else rng.choice(kinds)
        node = rng.choice(nodes)
        t0 = now()
        with run.lock:
            run.current = (t0, float("inf"), "SIGTERM" if kind == "term" else kind)
        if kind == "kill":
            node.kill()
            time.sleep(rng.uniform(0.5, 2.0))
            node.start()
            what = f"SIGKILL {node.incarnations[-2].label}, restarted"
        elif kind == "pause":
            node.process.send_signal(signal.SIGSTOP)
            node.stopped = True
            time.sleep(NODE_TIMEOUT + rng.uniform(1.0, 3.0))
            node.process.send_signal(signal.SIGCONT)
            node.stopped = False
            what = f"SIGSTOP {node.incarnations[-1].label} for {now() - t0:.1f} s"
        elif kind == "partition":
            node.link.set_cut(True)
            time.sleep(NODE_TIMEOUT + rng.uniform(1.0, 4.0))
            node.link.set_cut(False)
            what = f"cut {node.incarnations[-1].label} off PostgreSQL for {now() - t0:.1f} s"
        elif kind == "term":
            # A rolling restart's step under the full load: every acknowledged change
            # must reach the node that restores the session.
            # Every other one comes back with a node timeout of its own (an operator's
            # mistake): it must adopt the cluster's, or it would claim live sessions.
            # The clients on it search back to back for a second before and through the
            # drain: a high command rate at the shutdown (the one search every
            # 60 ms lost 1–6 acknowledged searches when the final flush was rate-limited).
            label = node.incarnations[-1].label
            mismatched = rng.random() < 0.5
            with run.lock:
                run.burst_port, run.burst_until = node.port, now() + 1.0 + SIGTERM_BURST
            time.sleep(SIGTERM_BURST)
            node.stop()
            with run.lock:
                run.burst_until = 0.0
            node.start(node_timeout=NODE_TIMEOUT * 5 if mismatched else NODE_TIMEOUT)
            what = f"SIGTERM {label} (clean shutdown), restarted" + (
                f" with --node-timeout {int(NODE_TIMEOUT * 5)}" if mismatched else "")
        elif kind == "quitkill":
            # An acknowledged quit, then at once a SIGKILL of the node that acknowledged
            # it: the quit must hold on every node (its record was ended before the reply).
            # Nothing is lost while it waits for a quit: the fault begins at the kill
            # (which may come up to 30 s later), and that is the time the history check
            # excuses losses from.
            with run.lock:
                run.current = None
                run.quit_kill_ready.clear()
                run.quit_kill_wanted = True
            if run.quit_kill_ready.wait(30):
                node = next((n for n in nodes if n.port == run.quit_kill_port), node)
                label = node.incarnations[-1].label
                t0 = now()
                with run.lock:
                    run.current = (t0, float("inf"), kind)
                node.kill()
                time.sleep(rng.uniform(0.5, 2.0))
                node.start()
                what = f"SIGKILL {label} just after it acknowledged a quit, restarted"
            else:
                with run.lock:
                    run.quit_kill_wanted = False
                what = "quit then SIGKILL: no quit acknowledged in 30 s"
        elif kind == "slow":
            # Every byte between the node and PostgreSQL held longer than the node
            # timeout: renewals sent in time run after the lease expired, by the
            # database's clock, while other nodes may claim its sessions.
            node.link.set_delay(NODE_TIMEOUT * 1.5)
            time.sleep(NODE_TIMEOUT + rng.uniform(2.0, 4.0))
            node.link.set_delay(0.0)
            what = f"slowed {node.incarnations[-1].label}'s link to PostgreSQL by {NODE_TIMEOUT * 1.5:.1f} s for {now() - t0:.1f} s"
        elif kind == "heldwrites":
            # A slow store write at a lease loss: PostgreSQL holds every draft write
            # (a lock the writes queue behind) for longer than the node timeout, while
            # one node's renewals run late. Its writes that began under its lease and
            # hold the session's record must finish before a claim can; its writes
            # that begin after must be refused, so nothing it writes lands for a session
            # another node serves.
            hold = NODE_TIMEOUT * 1.5 + rng.uniform(0.5, 1.5)
            locker = hold_tables(args, "viewline_drafts, viewline_saved_drafts", hold)
            node.link.set_delay(NODE_TIMEOUT * 1.5)
            locker.wait()
            node.link.set_delay(0.0)
            what = (f"held draft writes {hold:.1f} s in PostgreSQL, {node.incarnations[-1].label}'s link"
                    f" slowed by {NODE_TIMEOUT * 1.5:.1f} s meanwhile")
        elif kind == "heldrecords":
            # Leases renew but no session record can be written: PostgreSQL holds every
            # record write (a lock on the records table) for over three node timeouts,
            # then a node dies just before the writes go on. A node must stop
            # acknowledging once its last written batch is older than the node timeout
            # less the margin (PROTOCOL §2.2), so what it lost was acknowledged at most
            # that long after the records stopped: the fault counts as beginning when
            # the lock is taken, and the kill does not count as a fault of its own.
            hold = NODE_TIMEOUT * 3.5 + rng.uniform(0.5, 1.0)
            locker = hold_tables(args, "viewline_sessions", hold)
            for _ in range(100):
                if locker.poll() is not None or psql(args, "SELECT count(*) FROM pg_locks WHERE granted AND mode = 'ExclusiveLock'"
                                                           " AND relation = 'viewline_sessions'::regclass") == ["1"]:
                    break
                time.sleep(0.02)
            t0 = now()
            with run.lock:
                run.current = (t0, float("inf"), kind)
            time.sleep(max(0.0, hold - 0.7))
            label = node.incarnations[-1].label
            ports = node.link.upstream_ports()
            node.kill()
            # Its statements still queued behind the lock end with it (as they would
            # with client_connection_check_interval, or a host's keepalives): a dead
            # node's backends never write what it had not written before it died.
            if ports:
                psql(args, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                           f" WHERE client_port IN ({', '.join(str(p) for p in ports)})")
            locker.wait()
            time.sleep(rng.uniform(0.5, 2.0))
            node.start()
            what = f"records held {hold:.1f} s in PostgreSQL, then SIGKILL {label} just before they went on, restarted"
        elif kind == "silent":
            # Every connection the node has to PostgreSQL goes silent (nothing is closed,
            # nothing answers; new connections work): its statements must end at their
            # deadlines and its connections be replaced, not hang for the kernel's ~15 min.
            node.link.silence()
            time.sleep(NODE_TIMEOUT + rng.uniform(1.0, 3.0))
            what = f"silenced {node.incarnations[-1].label}'s open connections to PostgreSQL"
        elif kind == "rowlock":
            # Another node's open transaction holds one session's record row (its
            # write's fence) past the node timeout: that session alone may be refused;
            # its node goes on serving every other session and does not step down.
            victim = rng.choice([c for c in clients if c.token] or clients)
            lookup = (victim.token or "")[:16]
            hold = NODE_TIMEOUT * 3 + rng.uniform(0.5, 1.5)
            locker = subprocess.Popen(
                args.psql + ["-Atc", f"BEGIN; SELECT 1 FROM viewline_sessions WHERE lookup = '{lookup}' FOR UPDATE;"
                                     f" SELECT pg_sleep({hold:.2f}); COMMIT;"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            locker.wait()
            what = f"row of client {victim.index}'s session record held {hold:.1f} s in another transaction"
        elif kind == "slowrenew":
            # Renewals slower than before but inside the node timeout: the node must go
            # on serving (or hand over cleanly), never livelock with its sessions
            # unavailable everywhere.
            delay = NODE_TIMEOUT * 0.35
            node.link.set_delay(delay)
            time.sleep(NODE_TIMEOUT * 2 + rng.uniform(1.0, 3.0))
            node.link.set_delay(0.0)
            what = f"renewals slowed: {node.incarnations[-1].label}'s link to PostgreSQL {delay:.1f} s each way for {now() - t0:.1f} s"
        elif kind == "bigrecords":
            # 4,000 contacts: every session showing the contacts view has a record over
            # 256 KiB (until the next sync puts the source's back). They must be written
            # whole, and restored whole after a kill.
            psql(args, "INSERT INTO viewline_contacts (name, phone, address) SELECT 'Chaos contact ' || i, '+1 555 ' || i,"
                       " repeat('Long Street ', 6) || i FROM generate_series(1, 4000) i")
            # Until a record over 256 KiB is in the database (the sessions showing
            # contacts display them, then their records are written), 10 s at most.
            largest = 0
            for _ in range(50):
                time.sleep(0.2)
                sizes = psql(args, "SELECT coalesce(max(octet_length(snapshot)), 0) FROM viewline_sessions")
                largest = int(sizes[0]) if sizes else 0
                if largest > 256 * 1024:
                    break
            with run.lock:
                run.big_records = max(run.big_records, largest)
            label = node.incarnations[-1].label
            # The kill is what may lose the node's last moments: the fault counts from it
            # (as a held-records kill does), not from the insert up to 10 s before.
            t0 = now()
            with run.lock:
                run.current = (t0, float("inf"), kind)
            node.kill()
            time.sleep(rng.uniform(0.5, 1.5))
            node.start()
            time.sleep(1.0)
            psql(args, "DELETE FROM viewline_contacts WHERE name LIKE 'Chaos contact %'")
            what = f"4,000 contacts (records over 256 KiB), then SIGKILL {label}, restarted"
        else:
            # Output to nowhere: a server holding this script's pipes would never let go.
            subprocess.run(args.pg_restart, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, check=True)
            what = "restarted PostgreSQL"
        with run.lock:
            run.faults.append((t0, now(), what))
            run.current = None
            # Records over 256 KiB load every node (every session showing contacts).
            scope_port = None if kind in ("heldwrites", "postgres", "heldrecords", "rowlock", "bigrecords") else node.port
            run.fault_scope.append((t0, now(), scope_port, lookup if kind == "rowlock" else None))
        print(f"  {t0 - started:6.1f} s  {what}", flush=True)
        time.sleep(rng.uniform(2.0, 4.0))
    while now() < end:
        time.sleep(0.1)
    run.done.set()
    for thread in clients + readers:
        thread.join(COMMAND_TIMEOUT * 3)
    rss_end = {node.incarnations[-1].label: node.rss() for node in nodes}

    # Acknowledged drafts: saved, or the user's pending draft.
    saved: Dict[str, set] = {}
    for row in psql(args, "SELECT user_name || '|' || text FROM viewline_saved_drafts"):
        user, text = row.split("|", 1)
        saved.setdefault(user, set()).add(text)
    pending: Dict[str, str] = {}
    for row in psql(args, "SELECT user_name || '|' || text FROM viewline_drafts"):
        user, text = row.split("|", 1)
        pending[user] = text
    acknowledged = checked = lost = 0
    for client in clients:
        for user, texts in client.acknowledged.items():
            acknowledged += len(texts)
            for text in texts[-80:]:
                checked += 1
                if text not in saved.get(user, set()) and pending.get(user) != text:
                    lost += 1
                    run.violation(f"acknowledged draft {text!r} of {user} is neither saved nor pending")

    # Every acknowledged quit stays quit: no record is left for any node to restore it
    # from, and its token attaches nowhere (a sample is tried on every node; all the
    # probes come from one address, which the server throttles after a few misses).
    revived = 0
    lookups = sorted({token[:16] for token, _ in run.quit_tokens})
    if lookups:
        listed = ",".join("'" + lookup + "'" for lookup in lookups if lookup.isalnum())
        for lookup in psql(args, f"SELECT lookup FROM viewline_sessions WHERE lookup IN ({listed}) AND NOT ended"):
            revived += 1
            run.violation(f"the record of a session whose quit was acknowledged is back ({lookup})")
    probe = Client(-1, nodes, run)   # records nothing of its own: it only attaches
    for token, _ in run.quit_tokens[:3]:
        for node in nodes:
            try:
                connection = Connection(node.address, probe)
                reply = connection.command(f"attach {token}")
                connection.close()
            except (Dropped, OSError):
                continue
            if reply["ok"] or reply["error"]["code"] == "moved":
                revived += 1
                run.violation(f"a session whose quit was acknowledged came back on {node.incarnations[-1].label}")
    history_checks = sum(client.history_checks for client in clients)

    if run.stalls:
        run.violation(f"the client load made no progress for 20 s or more, {run.stalls} time(s)")
    pauses = [(start, end, match.group(1)) for start, end, what in run.faults
              for match in [re.match(r"SIGSTOP (\S+) for", what)] if match]
    served, near = serve_log.violations(pauses)
    # Step-downs no fault explains (a batch that hung on a loaded machine, or a bug).
    alone = [(t, label) for t, label in serve_log.step_downs
             if not any(start <= t and end >= t - STEP_DOWN_WINDOW for start, end, _ in run.faults)]
    for text in served:
        run.violation(text)

    # Recovery after each fault: from the fault's start to each affected client's
    # first success after it failed (a failure from the fault's start to 10 s after
    # its end counts as the fault's).
    recovery: Dict[str, List[float]] = {}
    for client, since, at in run.recoveries:
        fault = max((f for f in run.faults if f[0] <= since + 0.5), default=None, key=lambda f: f[0])
        if fault and since <= fault[1] + 10:
            kind = fault[2].split()[0]
            recovery.setdefault(kind, []).append(at - fault[0])
    for values in recovery.values():
        values.sort()

    def pct(values, p):
        return values[min(len(values) - 1, int(len(values) * p))] if values else 0.0

    # Liveness: how long a session was refused (`unavailable`) by a node with no fault
    # near it — none on that node or on the node that last served it, none
    # cluster-wide, no lock on that session's own
    # record — between RECOVERY_WINDOW before the first refusal and the next success
    # (a node whose lease lapsed pauses its renewals one node timeout, then renews
    # and checks its sessions: up to two node timeouts after its fault ended).
    # A fault on the node that last served the session counts too: the session's
    # owner is that node, and another node may claim it only once its lease expired.
    # A streak that went on at other nodes (the client tried elsewhere) counts a fault
    # on any node that refused it as near: it is that node's refusal the client saw.
    def fault_near(start: float, end: float, ports: frozenset, lookup: str, home: Optional[int]) -> bool:
        return any(f_start <= end and f_end >= start - RECOVERY_WINDOW
                   and (f_port is None and f_lookup is None or f_port in ports or f_port == home or f_lookup == lookup)
                   for f_start, f_end, f_port, f_lookup in run.fault_scope)
    streaks = [(start, end, port, lookup) for start, end, port, lookup, home, ports in run.refusals
               if not fault_near(start, end, ports, lookup, home)]
    unrelated = sorted(end - start for start, end, _, _ in streaks)
    over = [v for v in unrelated if v > LIVENESS_BOUND]
    for start, end, port, lookup in streaks:
        if end - start > LIVENESS_BOUND and args.strict_liveness:
            run.violation(f"session {lookup} was refused by :{port} from {start - run.started:.1f} s for {end - start:.1f} s"
                          f" with no fault near it (bound {LIVENESS_BOUND:.1f} s)")

    def mib(value):
        return f"{value / 1048576:.1f} MiB" if value else "?"

    names = {"silenced": "connections to PostgreSQL silenced", "row": "one session's record row locked elsewhere",
             "renewals": "renewals slowed within the node timeout", "4,000": "records over 256 KiB, then the node killed",
             "SIGKILL": "node killed", "SIGSTOP": "node paused", "cut": "node cut off", "slowed": "link slowed past the lease",
             "held": "draft writes held, a link slowed past the lease",
             "records": "record writes held, then the node killed",
             "restarted": "PostgreSQL restarted"}
    recovery_lines = [
        f"  - {names.get(kind, kind)}: p50 {pct(v, 0.5):.2f}, p99 {pct(v, 0.99):.2f}, max {v[-1]:.2f} ({len(v)} clients)"
        for kind, v in sorted(recovery.items())
    ]

    lines = [
        f"# Chaos run: {args.seconds:.0f} s, seed {args.seed}" + ("" if args.faults == FAULT_KINDS else f", faults: {', '.join(args.faults)}"),
        "",
        f"3 nodes (node timeout {NODE_TIMEOUT:.0f} s; node2 runs {args.skew_minutes} min ahead under faketime), "
        f"{args.clients} clients, one throwaway PostgreSQL.",
        "",
        f"- faults injected: {len(run.faults)} ({', '.join(f'{k} {sum(1 for f in run.faults if f[2].startswith(p))}' for k, p in (('kill', 'SIGKILL'), ('pause', 'SIGSTOP'), ('partition', 'cut'), ('slow link', 'slowed'), ('held writes', 'held draft'), ('held records', 'records'), ('postgres restart', 'restarted'), ('clean restart', 'SIGTERM'), ('silenced', 'silenced'), ('row lock', 'row of'), ('slowed renewals', 'renewals'), ('big records', '4,000')))})",
        f"- commands acknowledged: {run.successes}; `unavailable` replies: {run.unavailable}; other errors: {json.dumps(run.errors, sort_keys=True)}",
        f"- attach answers other than ok (reattaching during faults): {json.dumps(run.attach_errors, sort_keys=True)}",
        f"- commands acknowledged per minute: {', '.join(str(run.per_minute.get(m, 0)) for m in range(int(args.seconds // 60) + 1))}",
        f"- acknowledged drafts: {acknowledged} (each user's newest 80 checked against the database: {checked}), lost: {lost}",
        f"- commands served after another node claimed the session: {len(served)} (within {TOLERANCE} s of a claim, read order only: {near})",
        f"- sessions lost: {run.lost_sessions}",
        f"- second devices attached with the old owner's last-rev after a failover (snapshot expected): {run.second_devices}",
        f"- readers (a second device per client that stays on its node): {run.reader_reads} state reads served;"
        f" refused: {json.dumps(run.reader_refusals, sort_keys=True)}; connections ended: {json.dumps(run.reader_ends, sort_keys=True)}",
        f"- state reads checked against each session's history of acknowledged searches: {history_checks}",
        f"- searches sent back to back just before and during SIGTERMs' drains: {run.burst_searches}",
        f"- nodes that stepped down (records two node timeouts behind; what they acknowledged in the lease margin"
        f" before may be lost, as after a kill): {len(serve_log.step_downs)}, with no fault in the"
        f" {STEP_DOWN_WINDOW:.1f} s before: {len(alone)}"
        + (f" ({', '.join(f'{t - run.started:.1f} s {label}' for t, label in alone)})" if alone else ""),
        f"- acknowledged quits: {len(run.quit_tokens)}, come back on any node: {revived}",
        f"- liveness: refusals of a session on a node with no fault near it: {len(unrelated)}, longest"
        f" {max(unrelated, default=0.0):.2f} s, over the bound of one node timeout ({LIVENESS_BOUND:.1f} s): {len(over)}"
        + ("" if args.strict_liveness else " (violations only with VIEWLINE_CHAOS_STRICT_LIVENESS=1)")
        + (": " + ", ".join(f"{lookup} on :{port} from {start - run.started:.1f} s for {end - start:.1f} s"
                            for start, end, port, lookup in streaks if end - start > LIVENESS_BOUND)[:2000] if over else "")
        + f"; all refusal streaks: {len(run.refusals)}",
        f"- end-others: {json.dumps(run.end_others, sort_keys=True)} (answered `unavailable`: the old token must go on working)",
        f"- largest session record during a big-records fault: {run.big_records} bytes",
        f"- node starts that failed (and were retried, as a supervisor would): {sum(n.failed_starts for n in nodes)}",
        "- seconds from a fault's start until its clients work again (the fault's own length included):",
    ] + recovery_lines + [
        "- RSS: " + "; ".join(f"node{n.index}: {mib(n.incarnations[0].rss_start)} at start, {mib(rss_end[n.incarnations[-1].label])} at end ({len(n.incarnations)} start(s))" for n in nodes),
        f"- violations: {len(run.violations)}",
        "",
        "## Faults",
        "",
    ] + [f"- {t0 - started:.1f} s: {what}" for t0, _, what in run.faults]
    if run.long_recoveries:
        lines += ["", f"## Clients that failed for {LONG_RECOVERY:.0f} s or more (their last failures)", ""]
        for client, since, at, trail in sorted(run.long_recoveries, key=lambda r: r[1] - r[2])[:10]:
            lines.append(f"- client {client}: {since - run.started:.1f} s → {at - run.started:.1f} s ({at - since:.1f} s)")
            lines += [f"  - {entry}" for entry in trail]
    if run.violations:
        lines += ["", "## Violations", ""] + [f"- {v}" for v in run.violations[:200]]
        # Each client's last commands, to read against the node logs (same clock: the
        # first column of every node log line).
        for client in clients:
            with open(os.path.join(args.dir, f"client{client.index}.journal"), "w") as f:
                for t, port, line, answer in list(client.journal):
                    f.write(f"{t:.3f} {t - run.started:.1f} s :{port} {line!r} → {answer}\n")
        lines += ["", f"Each client's last {JOURNAL_LENGTH} commands and their answers: {args.dir}/client*.journal"]
    report = "\n".join(lines) + "\n"
    with open(args.report, "w") as f:
        f.write(report)
    print(report)
    return 1 if run.violations else 0


if __name__ == "__main__":
    sys.exit(main())

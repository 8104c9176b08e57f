"""The faults, one at a time: what each kind does to a node, its link, PostgreSQL or
one session's record (kill, quit then kill, pause, partition, slow link, held draft
writes, PostgreSQL restart, SIGTERM under a burst, held records then a kill,
silenced connections, a row lock, slowed renewals, big records then a kill, the
database's clock stepped, a node's wall clock stepped), and how it is described in
the run's output and report."""
from __future__ import annotations

import random
import signal
import subprocess
import threading
import time
from typing import List, Optional, Tuple

from .client import Client
from .clocks import DAY, spoken, step_database, step_node
from .constants import NODE_TIMEOUT, SIGTERM_BURST, now
from .database import hold_tables, psql
from .idle import check_idle, open_idle
from .nodes import Node
from .run import Run


def inject(kind: str, node: Node, t0: float, args, run: Run, rng: random.Random, nodes: List[Node],
           clients: List[Client]) -> Tuple[float, str, Node, Optional[str]]:
    """Injects one fault of `kind` (on `node`, begun at `t0`) and waits it out; returns
    when it began (a kind may count from a later moment), what it was, the node it hit
    (quit then kill picks the node that acknowledged the quit) and, for a row lock,
    the session's lookup."""
    lookup: Optional[str] = None
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
    elif kind == "db-clock-step":
        # PostgreSQL's clock steps (±10–25 s, −1 h or +2 days) and back: it stamps
        # heartbeats and dates what housekeeping clears, and decides no owner. Before
        # a +2-day step, a few idle sessions are handed over by a SIGTERM of their
        # node (no node holds them then, only their records, which housekeeping
        # clears a day after their node left); after it they must all attach again.
        # The node starts again while the clock is stepped (a start takes seconds):
        # its first renewals read the stepped clock, with nothing to compare it to.
        step = run.clock_plan.next("database")
        idle: List[Tuple[str, str]] = []
        handed = ""
        restart: Optional[threading.Thread] = None
        failed: List[BaseException] = []
        if step >= DAY:
            idle = open_idle(node, run)
            time.sleep(0.5)   # a batch every 100 ms: their records are written
            label = node.incarnations[-1].label
            node.stop()

            def start() -> None:
                try:
                    node.start()
                except BaseException as error:   # SystemExit included: raised again below
                    failed.append(error)
            restart = threading.Thread(target=start, daemon=True)
            restart.start()
            handed = f" ({len(idle)} idle sessions handed over by SIGTERM {label} first, attached again after)"
        held = step_database(args.pg_clock, step, rng)
        if restart:
            restart.join()
            if failed:
                raise failed[0]
        if idle:
            check_idle(idle, nodes, run, rng, spoken(step))
        what = f"db clock stepped {spoken(step)} for {held:.1f} s, then back" + handed
    elif kind == "upgrade":
        # A deploy: every node replaced in turn by the next release of the seed apps
        # (release 2: the search view records its state in a new form, version 2,
        # migrated from 1), each stopped cleanly (SIGTERM) and started on the new
        # release before the next goes. Meanwhile two releases own sessions side by
        # side: a session of an old node is restored on a new one through the
        # migration; one recorded by a new node is sent on by an old one (`moved`),
        # never read or overwritten by it. Nothing may be lost, no view reset. Once
        # every node runs release 2, an upgrade is a rolling restart on it.
        target = 2
        labels = []
        for replaced in nodes:
            labels.append(replaced.incarnations[-1].label)
            replaced.stop()
            replaced.release = target
            replaced.start()
            time.sleep(rng.uniform(0.5, 1.5))
        with run.lock:
            run.upgrades += 1
            run.upgraded_nodes += len(labels)
        what = f"rolling upgrade to seed-apps release {target}: {', '.join(labels)} replaced one at a time by SIGTERM"
    elif kind == "failover":
        # The primary's machine is gone (Patroni and PostgreSQL killed) while the load
        # runs: the standby is promoted and HAProxy follows it. Synchronous replication
        # acknowledged every commit on both, so nothing acknowledged may be lost and
        # one node owns each session throughout. Only with a synchronous standby (the
        # killed member rejoins as one when its machine is back, after the promotion).
        cluster = args.cluster
        old = cluster.primary()
        if old is None or cluster.synchronous_standby() is None:
            what = "failover skipped: no synchronous standby yet"
        else:
            cluster.kill(old)
            new = cluster.wait_for_primary(other_than=old, seconds=90)
            promoted = now() - t0
            cluster.restart(old)
            what = f"failover: killed the primary {old}; {new} promoted in {promoted:.1f} s, {old} rejoining as standby"
    elif kind == "node-clock-step":
        # One node's wall clock steps (±10–25 s or ±1–3 days) and back: it is read
        # for timestamps only (PROTOCOL §2.2), so nothing may change.
        what = step_node(node, run.clock_plan.next("node"), rng)
    else:
        # Output to nowhere: a server holding this script's pipes would never let go.
        subprocess.run(args.pg_restart, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=True)
        what = "restarted PostgreSQL"
    return t0, what, node, lookup

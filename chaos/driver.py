"""The run itself: start the nodes, the clients and their readers, watch that the
load makes progress, inject faults at random (every kind at least once) until the
time is up, then stop the load and hand over to the checks and the report."""
from __future__ import annotations

import random
import threading
import time
from typing import List

from . import checks, faults, report
from .client import Client
from .constants import COMMAND_TIMEOUT, now
from .nodes import Node
from .reader import Reader
from .run import Run
from .servelog import ServeLog


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
    print(f"chaos: {args.seconds:.0f} s, {args.clients} clients, 3 nodes (node2 {args.skew_minutes} min ahead), seed {args.seed},"
          f" faults: {', '.join(kinds)}", flush=True)
    def watch() -> None:
        """Liveness: the load must make progress; when it stalls, say what each
        client is doing (a stall is reported as a violation at the end)."""
        last, stalled_since = run.successes, None
        while not run.done.wait(5):
            if run.successes != last:
                last, stalled_since = run.successes, None
                continue
            with run.lock:
                failing_over = run.current is not None and run.current[2] == "failover"
            if failing_over:
                # No database for the leader key's TTL (20 s) until the standby is
                # promoted: every node refuses meanwhile, by design, not a stall.
                stalled_since = None
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
            # Clean shutdowns (a SIGTERM, a rolling upgrade) and clock kinds: never lossy.
            run.current = (t0, float("inf"), "SIGTERM" if kind == "term" else kind)
        t0, what, node, lookup = faults.inject(kind, node, t0, args, run, rng, nodes, clients)
        with run.lock:
            run.faults.append((t0, now(), what))
            run.current = None
            # Records over 256 KiB load every node (every session showing contacts). A
            # step of the database's clock past the node timeout is a lapse of every
            # lease by the database's clock (each node checks its sessions before it
            # serves again). A node's wall clock is near nothing: it decides nothing.
            scope_port = None if kind in ("heldwrites", "postgres", "heldrecords", "rowlock", "bigrecords",
                                          "db-clock-step", "upgrade", "failover") else node.port
            if kind != "node-clock-step":
                run.fault_scope.append((t0, now(), scope_port, lookup if kind == "rowlock" else None))
        print(f"  {t0 - started:6.1f} s  {what}", flush=True)
        time.sleep(rng.uniform(2.0, 4.0))
    while now() < end:
        time.sleep(0.1)
    run.done.set()
    for thread in clients + readers:
        thread.join(COMMAND_TIMEOUT * 3)
    rss_end = {node.incarnations[-1].label: node.rss() for node in nodes}
    findings = checks.check(args, run, nodes, clients, serve_log)
    return report.write(args, run, nodes, clients, serve_log, rss_end, findings)

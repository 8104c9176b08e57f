"""The command line (what `./dev chaos` passes): the flags, the users and contacts
files the nodes start with, one link per node on an asyncio loop of its own, then the
driver; every node is stopped however the run ends."""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import threading
import time
from typing import List

from . import __doc__ as OVERVIEW
from .clocks import ClockFile
from .constants import FAULT_KINDS, HA_POSTGRES_EXCLUDED, OPT_IN_FAULT_KINDS, USER_GENERATIONS
from .driver import drive
from .link import Link
from .nodes import Node
from .run import Run
from .servelog import ServeLog


def main() -> int:
    parser = argparse.ArgumentParser(description=OVERVIEW.splitlines()[0])
    parser.add_argument("--bin", required=True)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--pg-port", type=int, help="PostgreSQL's port (not with --ha-postgres)")
    parser.add_argument("--pg-restart", help="the command line that restarts PostgreSQL on its port (Tests/support/postgres restart DIR)")
    parser.add_argument("--psql", help="the psql command line, connection options included")
    parser.add_argument("--ha-postgres", metavar="DIR",
                        help="run PostgreSQL as two members under Patroni and etcd behind HAProxy (Tests/support/patroni_cluster.py,"
                             " synchronous replication) in DIR instead; the `failover` fault kills the primary")
    parser.add_argument("--dir", required=True)
    parser.add_argument("--report", required=True)
    parser.add_argument("--clients", type=int, default=9)
    parser.add_argument("--strict-liveness", action="store_true",
                        help="count an unrelated session refused longer than one node timeout as a violation"
                             " (reported either way; see the report's liveness line)")
    parser.add_argument("--skew-minutes", type=int, default=10)
    parser.add_argument("--pg-clock", help="the file PostgreSQL's clock reads its offset from under libfaketime"
                                           " (Tests/support/postgres start with VIEWLINE_PG_FAKETIME_FILE);"
                                           " without it there is no db-clock-step")
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--faults", default=None,
                        help=f"the fault kinds to inject, comma-separated (default: {', '.join(FAULT_KINDS)};"
                             f" also: {', '.join(OPT_IN_FAULT_KINDS)}); one kind aims a run at one fix, as a mutation check does")
    args = parser.parse_args()
    chosen = args.faults is not None
    default_kinds = FAULT_KINDS if not args.ha_postgres else [k for k in FAULT_KINDS if k not in HA_POSTGRES_EXCLUDED] + ["failover"]
    args.faults = [kind for kind in (args.faults or ",".join(default_kinds)).split(",") if kind]
    unknown = [kind for kind in args.faults if kind not in FAULT_KINDS + OPT_IN_FAULT_KINDS]
    if unknown or not args.faults:
        parser.error(f"--faults: unknown kind {', '.join(unknown) or '(none given)'}; kinds: {', '.join(FAULT_KINDS + OPT_IN_FAULT_KINDS)}")
    if args.ha_postgres:
        wrong = [kind for kind in args.faults if kind in HA_POSTGRES_EXCLUDED]
        if wrong:
            parser.error(f"--faults {', '.join(wrong)}: not with --ha-postgres (Patroni restarts its members; no libfaketime)")
    elif "failover" in args.faults:
        parser.error("--faults failover needs --ha-postgres (a PostgreSQL that fails over)")
    elif args.pg_port is None or args.pg_restart is None or args.psql is None:
        parser.error("--pg-port, --pg-restart and --psql are needed without --ha-postgres")
    if args.pg_clock is None and "db-clock-step" in args.faults:
        if chosen:
            parser.error("--faults db-clock-step needs --pg-clock (PostgreSQL started under libfaketime)")
        args.faults.remove("db-clock-step")
    if args.pg_clock is not None:
        # PostgreSQL's clock as the run starts: true (a file a run left stepped would be kept).
        args.pg_clock = ClockFile(args.pg_clock)
    args.cluster = None
    if args.ha_postgres:
        args.cluster = start_ha_postgres(args.ha_postgres)
        args.pg_port = args.cluster.haproxy_port
        args.pg_restart = None
        args.psql = [SUPPORT + "/postgres", "psql", f"postgres://postgres@127.0.0.1:{args.pg_port}/viewline?sslmode=disable"]
    else:
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
        if args.cluster is not None:
            args.cluster.stop()


SUPPORT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "Tests", "support")


def start_ha_postgres(directory: str):
    """The Patroni cluster (two members, synchronous, HAProxy following the primary)
    with the nodes' database made, ready."""
    import subprocess
    import sys
    sys.path.insert(0, SUPPORT)
    from patroni_cluster import PatroniCluster, missing
    lacking = missing()
    if lacking:
        raise SystemExit(f"--ha-postgres: {lacking}")
    cluster = PatroniCluster(directory)
    subprocess.run([SUPPORT + "/postgres", "psql", cluster.url, "-c", "CREATE DATABASE viewline"], check=True,
                   stdout=subprocess.DEVNULL)
    return cluster

#!/usr/bin/env python3
"""What a session change costs PostgreSQL, at 1, 2 and 4 nodes (docs/capacity.md).

Starts a throwaway PostgreSQL (Tests/support/postgres), then for each node count
that many viewline-server nodes on it, drives every node with viewline-bench
(`--connections` sessions each sending `search thai` back to back: every search
changes its session, so every session's record is due at every batch, at most five
times a second), and reads over the measured window:

- records written: the nodes' own `viewline_cluster_records_per_batch_sum`;
- PostgreSQL's transactions (`pg_stat_database.xact_commit`), WAL bytes
  (`pg_current_wal_lsn()`), and CPU (user + system of every `postgres` process);

and prints, per node count, records/s and what one record write cost: WAL bytes,
PostgreSQL CPU µs, transactions. The load generator and the nodes share the
machine with PostgreSQL: the per-record figures are what matter, not the rates.

    python3 benchmarks/pg_cost.py --bin .build/release [--nodes 1,2,4] [--seconds 10] [--sessions 200]
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PG = str(ROOT / "Tests" / "support" / "postgres")
TICKS = os.sysconf("SC_CLK_TCK")


def postgres_cpu_seconds() -> float:
    """User + system CPU of every process named `postgres` on the machine."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        if name != "postgres" and not name.startswith("postgres:"):
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        total += int(fields[11]) + int(fields[12])
    return total / TICKS


def psql(url: str, query: str) -> str:
    return subprocess.run([PG, "psql", url, "-t", "-c", query], check=True, capture_output=True, text=True).stdout.strip()


def records_written(metrics_urls: list[str]) -> float:
    total = 0.0
    for url in metrics_urls:
        text = urllib.request.urlopen(url, timeout=5).read().decode()
        for line in text.splitlines():
            if line.startswith("viewline_cluster_records_per_batch_sum"):
                total += float(line.split()[-1])
    return total


def start_node(binary: Path, url: str, directory: Path, index: int) -> tuple[subprocess.Popen, int, str]:
    out = open(directory / f"node{index}.out", "w+")
    process = subprocess.Popen(
        [str(binary / "viewline-server"), "--port", "0", "--metrics-port", "0", "--postgres", url, "--demo",
         "--log-level", "error", "--max-clients-per-address", "0", "--max-sessions-per-address", "0"],
        stdout=out, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    port = metrics = None
    while time.monotonic() < deadline and (port is None or metrics is None):
        out.seek(0)
        text = out.read()
        if m := re.search(r"^listening on .*:(\d+)$", text, re.M):
            port = int(m.group(1))
        if m := re.search(r"^metrics on (\S+)$", text, re.M):
            metrics = m.group(1)
        time.sleep(0.05)
    if port is None or metrics is None:
        process.kill()
        sys.exit(f"node {index} did not start")
    return process, port, metrics


def measure(binary: Path, admin_url: str, nodes: int, seconds: float, sessions: int, directory: Path) -> dict:
    url = subprocess.run([PG, "createdb", admin_url, f"cost{nodes}"], check=True, capture_output=True, text=True).stdout.strip()
    started = [start_node(binary, url, directory, index) for index in range(nodes)]
    try:
        benches = []
        # Warm up: every session opened and its first record written before the window.
        for _, port, _ in started:
            benches.append(subprocess.Popen(
                [str(binary / "viewline-bench"), "--port", str(port), "--connections", str(sessions),
                 "--seconds", str(seconds + 4), "--brief", "--command", "search thai"],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL))
        time.sleep(3)
        metrics = [m for _, _, m in started]
        before = (records_written(metrics), postgres_cpu_seconds(),
                  int(psql(url, "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")),
                  psql(url, "SELECT pg_current_wal_lsn()"))
        t0 = time.monotonic()
        time.sleep(seconds)
        after = (records_written(metrics), postgres_cpu_seconds(),
                 int(psql(url, "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")),
                 psql(url, "SELECT pg_current_wal_lsn()"))
        elapsed = time.monotonic() - t0
        wal = int(psql(url, f"SELECT pg_wal_lsn_diff('{after[3]}', '{before[3]}')::int8"))
        for bench in benches:
            bench.wait(60)
        records = after[0] - before[0]
        if records <= 0:
            sys.exit(f"{nodes} node(s): no session record was written in {elapsed:.1f} s")
        return {
            "nodes": nodes, "sessions": nodes * sessions, "records_per_second": records / elapsed,
            "wal_bytes_per_record": wal / records if records else float("nan"),
            "pg_cpu_us_per_record": (after[1] - before[1]) * 1e6 / records if records else float("nan"),
            "transactions_per_record": (after[2] - before[2]) / records if records else float("nan"),
            "pg_cpu_share": (after[1] - before[1]) / elapsed,
        }
    finally:
        for process, _, _ in started:
            process.terminate()
        for process, _, _ in started:
            process.wait(15)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin", type=Path, default=ROOT / ".build" / "release")
    parser.add_argument("--nodes", default="1,2,4")
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--sessions", type=int, default=200, help="sessions per node")
    args = parser.parse_args()
    directory = Path(tempfile.mkdtemp(prefix="viewline-pg-cost."))
    directory.chmod(0o755)  # the postgres user enters it (initdb refuses root)
    admin_url = subprocess.run([PG, "start", str(directory / "pg")], check=True, capture_output=True, text=True).stdout.strip()
    try:
        print(f"{'nodes':>5} {'sessions':>8} {'records/s':>10} {'WAL B/record':>13} {'PG CPU µs/record':>17} "
              f"{'xacts/record':>13} {'PG CPU':>7}")
        for nodes in [int(n) for n in args.nodes.split(",")]:
            row = measure(args.bin, admin_url, nodes, args.seconds, args.sessions, directory)
            print(f"{row['nodes']:>5} {row['sessions']:>8} {row['records_per_second']:>10.0f} "
                  f"{row['wal_bytes_per_record']:>13.0f} {row['pg_cpu_us_per_record']:>17.1f} "
                  f"{row['transactions_per_record']:>13.3f} {row['pg_cpu_share']:>6.0%}", flush=True)
    finally:
        subprocess.run([PG, "remove", str(directory / "pg")], capture_output=True)
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()

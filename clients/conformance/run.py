#!/usr/bin/env python3
"""Runs the conformance scenarios (scenarios.json) against real servers, once per
client driver, and says by name which client failed which scenario.

For each scenario and driver: fresh nodes (one on SQLite in memory, or several over
one PostgreSQL), each behind a TCP proxy this runner controls; the driver is started,
handed the scenario and the nodes' addresses on its standard input, and runs the
steps with its client library. Steps that act on the servers (`control`: cut a
link, restore it, drain a node) are sent back to this runner, which does them and
answers. See README.md for the format and the driver protocol.

    python3 clients/conformance/run.py --server .build/debug/viewline-server \\
        --driver python="python3 clients/conformance/drivers/python.py" \\
        --driver node="node clients/conformance/drivers/node.mjs" \\
        --driver swift=.build/debug/viewline-conformance [--scenario NAME] [--repeat N]
"""
from __future__ import annotations

import argparse
import faulthandler
import json
import pathlib
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "Tests" / "support"))
from tcp_proxy import TCPProxy  # noqa: E402  (Tests/support: one proxy for the suites)

SCENARIO_SECONDS = 90  # a driver still running after this is hung: killed, failed


class Node:
    """A viewline-server on port 0, with a proxy in front."""

    def __init__(self, server: str, args: List[str], log: pathlib.Path) -> None:
        self.log = open(log, "ab")
        self.proc = subprocess.Popen(
            [server, "--port", "0", "--log-level", "warning", "--demo", "--admin", "--drain-seconds", "2", *args],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self.log)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().decode()
        if not line.startswith("listening on "):
            raise RuntimeError(f"the server did not start: {line!r} (log: {log})")
        self.port = int(line.rsplit(":", 1)[1])
        self.proxy = TCPProxy(("127.0.0.1", self.port))

    def drain(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()

    def stop(self) -> None:
        self.proxy.close()
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.log.close()


def start_nodes(server: str, count: int, postgres: Any, logs: pathlib.Path) -> List[Node]:
    if count == 1:
        return [Node(server, ["--db", ":memory:"], logs / "node0.log")]
    url = postgres.new_database()
    return [Node(server, ["--postgres", url, "--node-timeout", "2"], logs / f"node{i}.log") for i in range(count)]


def control(step: Dict[str, Any], nodes: List[Node]) -> Optional[str]:
    """Does a `control` step; returns an error, or None."""
    index = step.get("node", 0)
    if not 0 <= index < len(nodes):
        return f"no node {index}"
    node = nodes[index]
    action = step.get("action")
    if action == "cut":
        node.proxy.cut(hold=bool(step.get("hold", False)))
    elif action == "restore":
        node.proxy.restore()
    elif action == "drain":
        after = step.get("after_ms")
        if after is None:
            node.drain()
        else:
            threading.Timer(after / 1000, node.drain).start()
    else:
        return f"unknown control action {action!r}"
    return None


def run_scenario(scenario: Dict[str, Any], driver: List[str], server: str, postgres: Any,
                 logs: pathlib.Path) -> Tuple[bool, str, float]:
    logs.mkdir(parents=True, exist_ok=True)
    nodes = start_nodes(server, scenario.get("nodes", 1), postgres, logs)
    started = time.monotonic()
    proc = None
    try:
        setup = {
            "scenario": scenario,
            "nodes": [{"host": "127.0.0.1", "port": n.proxy.port} for n in nodes],
            "direct": [{"host": "127.0.0.1", "port": n.port} for n in nodes],
        }
        with open(logs / "driver.log", "wb") as driver_log:
            proc = subprocess.Popen(driver, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=driver_log)
            assert proc.stdin is not None and proc.stdout is not None
            timer = threading.Timer(SCENARIO_SECONDS, proc.kill)
            timer.start()
            try:
                proc.stdin.write((json.dumps(setup) + "\n").encode())
                proc.stdin.flush()
                result: Optional[Dict[str, Any]] = None
                for raw in proc.stdout:
                    try:
                        message = json.loads(raw)
                        assert isinstance(message, dict)
                    except (ValueError, AssertionError):
                        return False, f"the driver wrote a line that is not a JSON object: {raw[:200]!r}", \
                            time.monotonic() - started
                    if "control" in message:
                        error = control(message["control"], nodes)
                        answer = {"done": True} if error is None else {"error": error}
                        proc.stdin.write((json.dumps(answer) + "\n").encode())
                        proc.stdin.flush()
                    elif "pass" in message and isinstance(message["pass"], bool):
                        result = message
                        break
                    else:
                        return False, f"the driver wrote a line that is neither a control step nor a result: {raw[:200]!r}", \
                            time.monotonic() - started
                proc.stdin.close()
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    return False, "the driver did not exit within 15 s of its result", time.monotonic() - started
                after = proc.stdout.read(201) if result is not None else b""
                if after:
                    return False, f"the driver wrote after its result: {after[:200]!r}", time.monotonic() - started
                if result is not None and result["pass"] and proc.returncode != 0:
                    return False, f"the driver passed but exited {proc.returncode}", time.monotonic() - started
            finally:
                timer.cancel()
        seconds = time.monotonic() - started
        if result is None:
            hung = seconds >= SCENARIO_SECONDS
            return False, ("hung: no result within %d s" % SCENARIO_SECONDS if hung
                           else f"the driver exited {proc.returncode} without a result"), seconds
        if result["pass"]:
            # The Swift runtime reports a continuation a client dropped unresumed: a
            # task of it waits forever, though the steps went on.
            if b"CONTINUATION MISUSE" in (logs / "driver.log").read_bytes():
                return False, "the driver's runtime reports a leaked continuation (see driver.log)", seconds
            return True, "", seconds
        return False, f"step {result.get('step')} ({result.get('op')}): {result.get('message')}", seconds
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
        for node in nodes:
            node.stop()


def main() -> int:
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # `kill -USR1` shows where a run is stuck
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", required=True, help="the viewline-server binary")
    parser.add_argument("--driver", action="append", required=True, metavar="NAME=COMMAND",
                        help="a client's driver (repeatable)")
    parser.add_argument("--scenario", action="append", help="run only these scenarios (repeatable)")
    parser.add_argument("--repeat", type=int, default=1, help="run each scenario this many times")
    parser.add_argument("--logs", help="where the nodes' and drivers' logs go (default: a temporary directory)")
    args = parser.parse_args()

    scenarios = json.loads((HERE / "scenarios.json").read_text())["scenarios"]
    if args.scenario:
        unknown = set(args.scenario) - {s["name"] for s in scenarios}
        if unknown:
            parser.error(f"no scenario {', '.join(sorted(unknown))}")
        scenarios = [s for s in scenarios if s["name"] in args.scenario]
    drivers = []
    for spec in args.driver:
        name, _, command = spec.partition("=")
        drivers.append((name, shlex.split(command)))

    postgres = None
    if any(s.get("nodes", 1) > 1 for s in scenarios):
        from throwaway_postgres import Postgres
        postgres = Postgres()
    logs = pathlib.Path(args.logs or tempfile.mkdtemp(prefix="viewline-conformance-"))
    failures: List[str] = []
    try:
        for scenario in scenarios:
            for name, command in drivers:
                for attempt in range(args.repeat):
                    where = logs / name / scenario["name"] / str(attempt)
                    ok, message, seconds = run_scenario(scenario, command, args.server, postgres, where)
                    mark = "pass" if ok else "FAIL"
                    print(f"{mark}  {name:<7} {scenario['name']:<26} {seconds:5.1f} s  {message}", flush=True)
                    if not ok:
                        failures.append(f"{name}: {scenario['name']}: {message} (logs: {where})")
    finally:
        if postgres is not None:
            postgres.stop()
    if failures:
        print(f"\n{len(failures)} failed:", *failures, sep="\n  ")
        return 1
    print(f"\nevery scenario passed for {', '.join(name for name, _ in drivers)} (logs: {logs})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Viewline's nodes on a PostgreSQL that fails over (Patroni, etcd, HAProxy following
the primary; synchronous replication): the primary is killed, the standby promoted,
and nothing a node acknowledged before is lost — every session, every draft — one
node still owns each session, and the nodes serve again without a restart.
`VIEWLINE_FAILOVER=0` skips it (it takes about a minute: Patroni waits out its TTL)."""
from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Dict, Iterator, List, Tuple

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SERVER = os.environ.get("VIEWLINE_SERVER", str(ROOT / ".build" / "debug" / "viewline-server"))
sys.path.insert(0, str(ROOT / "Tests" / "support"))
from line_client import LineClient  # noqa: E402
from patroni_cluster import PatroniCluster, missing  # noqa: E402

pytestmark = pytest.mark.skipif(os.environ.get("VIEWLINE_FAILOVER") == "0", reason="VIEWLINE_FAILOVER=0")


class Node:
    def __init__(self, url: str, log: pathlib.Path) -> None:
        self.log = open(log, "ab")
        self.proc = subprocess.Popen(
            [SERVER, "--port", "0", "--postgres", url, "--node-timeout", "2", "--demo", "--admin",
             "--log-level", "info"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self.log)
        line = self.proc.stdout.readline().decode()
        assert line.startswith("listening on "), f"the node did not start (log: {log})"
        self.port = int(line.rsplit(":", 1)[1])

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


@pytest.fixture
def patroni(tmp_path: pathlib.Path) -> Iterator[PatroniCluster]:
    lacking = missing()
    if lacking:
        pytest.skip(lacking)
    # Not under tmp_path: PostgreSQL runs as `postgres`, which cannot enter pytest's
    # 0700 directories.
    directory = tempfile.mkdtemp(prefix="viewline-patroni-")
    cluster = PatroniCluster(directory)
    yield cluster
    cluster.stop()
    shutil.rmtree(directory, ignore_errors=True)


def attach(port: int, token: str) -> Tuple[dict, LineClient]:
    """`attach TOKEN` on the node at `port`, following `moved`; the reply and the connection."""
    for _ in range(3):
        client = LineClient(port)
        reply = client.command(f"attach {token}")
        if reply.get("ok") or reply["error"]["code"] != "moved":
            return reply, client
        port = int(reply["error"]["address"].rsplit(":", 1)[1])
    return reply, client


def until(check, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {seconds:.0f} s")
        time.sleep(0.3)


def test_a_failover_loses_nothing_a_node_acknowledged(patroni: PatroniCluster, tmp_path: pathlib.Path) -> None:
    nodes = [Node(patroni.url, tmp_path / f"node{i}.log") for i in range(2)]
    try:
        # Four sessions, two on each node, each with an acknowledged draft.
        sessions: List[Dict] = []
        for i in range(4):
            node = nodes[i % 2]
            client = LineClient(node.port)
            token = client.welcome["token"]
            assert client.command("login bob builder")["ok"]
            text = f"written before the failover {i}"
            reply = client.command(f"draft {text}")
            assert reply["ok"], reply
            sessions.append({"token": token, "node": node, "text": text, })
        time.sleep(1.0)  # the records' next batch

        old = patroni.primary()
        started = time.monotonic()
        patroni.kill(old)
        patroni.wait_for_primary(other_than=old)
        promoted = time.monotonic() - started

        # The nodes serve again on their own: a command that writes is acknowledged.
        for node in nodes:

            def acknowledged() -> bool:
                try:
                    client = LineClient(node.port)
                    reply = client.command("login bob builder")
                    client.sock.close()
                    return bool(reply.get("ok"))
                except OSError:
                    return False

            until(acknowledged, 60, f"a command acknowledged again on {node.port}")
        served = time.monotonic() - started
        assert all(node.proc.poll() is None for node in nodes), "a node exited"

        # Every session and draft acknowledged before the failover is there, on its
        # node; the other node sends the client there (one owner).
        for session in sessions:
            owner, other = session["node"], next(n for n in nodes if n is not session["node"])
            reply, client = attach(owner.port, session["token"])
            assert reply["ok"], reply
            draft = client.until(lambda m: m.get("type") == "display" and m.get("view") == "draft")
            assert draft["state"]["text"] == session["text"]
            client.sock.close()
            elsewhere = LineClient(other.port)
            moved = elsewhere.command(f"attach {session['token']}")
            assert not moved["ok"] and moved["error"]["code"] == "moved", moved
            assert moved["error"]["address"].endswith(f":{owner.port}")
            elsewhere.sock.close()

        # And a draft written after the failover is kept too.
        first = sessions[0]
        reply, client = attach(first["node"].port, first["token"])
        assert client.command("draft written after the failover")["ok"]
        client.sock.close()
        reply, client = attach(first["node"].port, first["token"])
        draft = client.until(lambda m: m.get("type") == "display" and m.get("view") == "draft")
        assert draft["state"]["text"] == "written after the failover"
        print(json.dumps({"promoted_seconds": round(promoted, 1), "serving_again_seconds": round(served, 1)}))
    finally:
        for node in nodes:
            node.stop()

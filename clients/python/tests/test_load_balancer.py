"""Through Debian's HAProxy, run with the shipped deploy/haproxy.cfg: a client connects
to the proxy only (its connection reaches the node with a PROXY v2 header), and when
the node restarts (a deploy) the client resumes through the proxy in the same
session."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from viewline import Client

from test_restart import RETRY, free_port

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.skipif(shutil.which("haproxy") is None, reason="haproxy is not installed (./dev setup installs it)")


class Balanced:
    """HAProxy on free ports and one node behind it (the configuration's node0; the
    other two are down), on a database file so a restart keeps its sessions."""

    def __init__(self, make_server) -> None:
        self.make_server = make_server
        ports = {name: free_port() for name in ("lines", "web", "n0", "n1", "n2", "lines0", "web0", "ops0")}
        self.lines = ports["lines"]
        self.ops = ports["ops0"]
        env = dict(os.environ, VIEWLINE_LB_LINES=f"127.0.0.1:{ports['lines']}", VIEWLINE_LB_WEB=f"127.0.0.1:{ports['web']}")
        for i in range(3):
            env[f"VIEWLINE_LB_NODE{i}"] = f"127.0.0.1:{ports[f'n{i}']}"
            env[f"VIEWLINE_NODE{i}_LINES"] = f"127.0.0.1:{ports['lines0'] if i == 0 else free_port()}"
            env[f"VIEWLINE_NODE{i}_WEB"] = f"127.0.0.1:{ports['web0'] if i == 0 else free_port()}"
            env[f"VIEWLINE_NODE{i}_OPS_HOST"] = "127.0.0.1"
            env[f"VIEWLINE_NODE{i}_OPS_PORT"] = str(ports["ops0"] if i == 0 else free_port())
        self.haproxy = subprocess.Popen(["haproxy", "-db", "-f", str(ROOT / "deploy" / "haproxy.cfg")], env=env,
                                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.args = ["--db", os.path.join(tempfile.mkdtemp(prefix="viewline-lb-"), "viewline.sqlite"), "--drain-seconds", "1",
                     "--port", str(ports["lines0"]), "--web-port", str(ports["web0"]), "--metrics-port", str(ports["ops0"]),
                     "--trusted-proxy", "127.0.0.1", "--advertise", f"127.0.0.1:{ports['n0']}"]
        self.node = make_server(*self.args)

    def restart(self) -> None:
        self.node.proc.send_signal(signal.SIGTERM)
        self.node.proc.wait(timeout=20)
        self.node = self.make_server(*self.args)

    def stop(self) -> None:
        self.haproxy.terminate()
        self.haproxy.wait(timeout=10)


def connected(port: int, **options) -> Client:
    """A client of the proxy, once the proxy serves (its health check passes twice first)."""
    deadline = time.monotonic() + 15
    while True:
        try:
            return Client.connect(port=port, **options)
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_a_client_resumes_through_the_proxy_after_its_node_restarts(make_server):
    lb = Balanced(make_server)
    try:
        with connected(lb.lines, **RETRY) as vl:
            vl.command("login alice wonderland")
            vl.command("search golden")
            vl.wait_for_display("search", lambda s: not s["loading"])
            session, token = vl.session, vl.token
            # (That the node sees each client's own address through the proxy, clients
            # from several loopback addresses show: LoadBalancerTests in Swift.)
            lb.restart()
            assert vl.wait_for(lambda m: m.get("type") == "bye", timeout=20)["code"] == "shutdown"
            assert vl.command("state search")["state"]["query"] == "golden"
            assert vl.command("state session")["state"] == {"user": "alice", "loggedIn": True}
            assert vl.resumed == 1 and vl.session == session and vl.token == token
    finally:
        lb.stop()

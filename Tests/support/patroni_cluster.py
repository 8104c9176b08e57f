"""A PostgreSQL that fails over, as operators run it: etcd, two PostgreSQL members
managed by Patroni (synchronous replication by default), and HAProxy in front
routing to whichever member Patroni says is the primary (`GET /primary` on its REST
API), so Viewline's nodes use one address that follows the primary.

    cluster = PatroniCluster(directory)      # starts everything, waits for a primary
    cluster.url                              # postgres:// through HAProxy
    old = cluster.primary()                  # "pg0" or "pg1"
    cluster.kill(old)                        # SIGKILL the member: Patroni and PostgreSQL
    cluster.wait_for_primary(other_than=old) # the standby promoted, HAProxy following
    cluster.stop()

Debian 12's `patroni`, `etcd-server` and `haproxy` (`./dev setup` installs them).
PostgreSQL refuses to run as root: as root, Patroni runs as `postgres`."""
from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from typing import Dict, List, Optional

from tcp_proxy import TCPProxy

PG_BIN = "/usr/lib/postgresql/15/bin"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def missing() -> Optional[str]:
    """What this machine lacks to run the cluster, or None."""
    for tool in ("patroni", "etcd", "haproxy"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (./dev setup installs it)"
    if not os.path.exists(f"{PG_BIN}/postgres"):
        return "PostgreSQL 15 is not installed"
    return None


class PatroniCluster:
    def __init__(self, directory: str, synchronous: bool = True, ttl: int = 20, replication_links: bool = False) -> None:
        self.dir = pathlib.Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.dir, 0o755)
        self.root = os.geteuid() == 0
        self.processes: Dict[str, subprocess.Popen] = {}
        self.etcd_port, self.etcd_peer = free_port(), free_port()
        self.members = {f"pg{i}": {"pg": free_port(), "rest": free_port()} for i in range(2)}
        self.haproxy_port = free_port()
        self.synchronous, self.ttl = synchronous, ttl
        # With `replication_links`, each member advertises a proxy the test can cut: the
        # standby replicates through it (`cut_replication()`).
        self.links: Dict[str, TCPProxy] = {}
        if replication_links:
            self.links = {name: TCPProxy(("127.0.0.1", ports["pg"])) for name, ports in self.members.items()}
        try:
            self._start_etcd()
            for name in self.members:
                self._start_member(name, synchronous, ttl)
            self._start_haproxy()
            self.wait_for_primary()
            self._wait_for_replica()
            if synchronous:
                # Patroni names the synchronous standby a moment after it streams: until
                # then commits are asynchronous (and a node starting would say so).
                self._until(self._has_synchronous_standby, 60, "the synchronous standby")
        except BaseException:
            self.stop()
            raise

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.haproxy_port}/postgres?sslmode=disable"

    @property
    def members_url(self) -> str:
        """The members themselves, listed as libpq lists servers: a node finds and
        follows the primary among them (no proxy in between)."""
        servers = ",".join(f"127.0.0.1:{p['pg']}" for p in self.members.values())
        return f"postgres://postgres@{servers}/postgres?sslmode=disable&target_session_attrs=read-write"

    # -- parts ----------------------------------------------------------------
    def _as_postgres(self, command: List[str]) -> List[str]:
        return ["runuser", "-u", "postgres", "--", *command] if self.root else command

    def _own(self, path: pathlib.Path) -> None:
        if self.root:
            shutil.chown(path, "postgres", "postgres")

    def _spawn(self, name: str, command: List[str]) -> None:
        log = open(self.dir / f"{name}.log", "ab")
        self.processes[name] = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                                start_new_session=True)

    def _start_etcd(self) -> None:
        data = self.dir / "etcd"
        self._spawn("etcd", [
            "etcd", "--name", "etcd0", "--data-dir", str(data),
            "--listen-client-urls", f"http://127.0.0.1:{self.etcd_port}",
            "--advertise-client-urls", f"http://127.0.0.1:{self.etcd_port}",
            "--listen-peer-urls", f"http://127.0.0.1:{self.etcd_peer}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{self.etcd_peer}",
            "--initial-cluster", f"etcd0=http://127.0.0.1:{self.etcd_peer}",
            "--enable-v2=true",
        ])
        self._until(lambda: self._get(f"http://127.0.0.1:{self.etcd_port}/health") is not None, 30, "etcd")

    def _start_member(self, name: str, synchronous: bool, ttl: int) -> None:
        ports = self.members[name]
        home = self.dir / name
        home.mkdir(exist_ok=True)
        os.chmod(home, 0o700)
        self._own(home)
        config = {
            "scope": "viewline", "name": name,
            "restapi": {"listen": f"127.0.0.1:{ports['rest']}", "connect_address": f"127.0.0.1:{ports['rest']}"},
            "etcd3": {"hosts": f"127.0.0.1:{self.etcd_port}"},
            "bootstrap": {
                "dcs": {
                    "ttl": ttl, "loop_wait": 1, "retry_timeout": 5,
                    "maximum_lag_on_failover": 1048576,
                    # Synchronous: a commit is acknowledged once the standby has it, so a
                    # failover loses nothing acknowledged (docs/deploying.md).
                    "synchronous_mode": synchronous, "synchronous_mode_strict": False,
                    "postgresql": {"use_pg_rewind": True, "parameters": {
                        "max_connections": 200, "fsync": "off", "wal_level": "replica", "hot_standby": "on",
                        "max_wal_senders": 10, "max_replication_slots": 10, "wal_log_hints": "on"}},
                },
                "initdb": [{"encoding": "UTF8"}, "no-sync"],
                "pg_hba": ["host replication replicator 127.0.0.1/32 trust", "host all all 127.0.0.1/32 trust",
                           "local all all trust"],
            },
            "postgresql": {
                "listen": f"127.0.0.1:{ports['pg']}",
                "connect_address": f"127.0.0.1:{self.links[name].port if name in self.links else ports['pg']}",
                "data_dir": str(home / "data"), "bin_dir": PG_BIN, "pgpass": str(home / "pgpass"),
                "authentication": {"replication": {"username": "replicator", "password": "replicator"},
                                   "superuser": {"username": "postgres", "password": "postgres"}},
                "parameters": {"unix_socket_directories": str(home)},
            },
            "tags": {"nofailover": False, "noloadbalance": False, "clonefrom": False, "nosync": False},
        }
        path = home / "patroni.json"  # YAML is a superset of JSON
        path.write_text(json.dumps(config))
        self._own(path)
        self._spawn(name, self._as_postgres(["patroni", str(path)]))

    def _start_haproxy(self) -> None:
        backends = "\n".join(
            f"    server {name} 127.0.0.1:{p['pg']} maxconn 200 check port {p['rest']}"
            for name, p in self.members.items())
        config = f"""global
    maxconn 1000
defaults
    mode tcp
    timeout connect 2s
    timeout client 30m
    timeout server 30m
    timeout check 2s
listen primary
    bind 127.0.0.1:{self.haproxy_port}
    option httpchk GET /primary
    http-check expect status 200
    default-server inter 500ms fall 2 rise 1 on-marked-down shutdown-sessions
{backends}
"""
        path = self.dir / "haproxy.cfg"
        path.write_text(config)
        self._spawn("haproxy", ["haproxy", "-f", str(path), "-db"])

    # -- state ----------------------------------------------------------------
    def _get(self, url: str) -> Optional[int]:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                return int(response.status)
        except urllib.error.HTTPError as error:
            return int(error.code)
        except OSError:
            return None

    def _until(self, check, seconds: float, what: str) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if check():
                return
            time.sleep(0.2)
        raise RuntimeError(f"{what} not ready within {seconds:.0f} s (logs in {self.dir})")

    def role(self, name: str) -> Optional[str]:
        """`primary`, `replica`, or None when its REST API does not answer."""
        rest = self.members[name]["rest"]
        if self._get(f"http://127.0.0.1:{rest}/primary") == 200:
            return "primary"
        if self._get(f"http://127.0.0.1:{rest}/replica") == 200:
            return "replica"
        return None

    def primary(self) -> Optional[str]:
        for name in self.members:
            if self.role(name) == "primary":
                return name
        return None

    def wait_for_primary(self, other_than: Optional[str] = None, seconds: float = 90) -> str:
        """Waits until a member other than `other_than` is primary and HAProxy reaches it."""
        found: List[str] = []

        def ready() -> bool:
            name = self.primary()
            if name is None or name == other_than:
                return False
            if subprocess.run([f"{PG_BIN}/psql", self.url, "-tAc", "select not pg_is_in_recovery()"],
                              capture_output=True, text=True, timeout=10).stdout.strip() != "t":
                return False
            found.append(name)
            return True

        self._until(ready, seconds, "a primary through HAProxy")
        return found[-1]

    def _has_synchronous_standby(self) -> bool:
        answer = subprocess.run(
            [f"{PG_BIN}/psql", self.url, "-tAc", "SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'"],
            capture_output=True, text=True, timeout=10).stdout.strip()
        return answer not in ("", "0")

    def _wait_for_replica(self, seconds: float = 90) -> None:
        self._until(lambda: all(self.role(n) is not None for n in self.members), seconds, "the standby")

    def cut_replication(self) -> None:
        """The members can no longer reach each other (their replication links cut);
        clients still reach the primary through HAProxy."""
        for link in self.links.values():
            link.cut(hold=True)

    def kill(self, name: str) -> None:
        """The member's machine is gone: Patroni and its PostgreSQL get SIGKILL."""
        process = self.processes.pop(name)
        data = self.dir / name / "data" / "postmaster.pid"
        postmaster = None
        if data.exists():
            try:
                postmaster = int(data.read_text().split()[0])
            except (ValueError, IndexError):
                pass
        os.killpg(process.pid, signal.SIGKILL)
        if postmaster:
            try:
                os.killpg(os.getpgid(postmaster), signal.SIGKILL)
            except ProcessLookupError:
                pass
        process.wait()

    def kill_manager(self, name: str) -> None:
        """The member's Patroni dies (SIGKILL, as the OOM killer would), its PostgreSQL
        goes on taking writes: the other member is promoted once the leader key
        expires, and two primaries answer. (`stop()` still ends the orphan.)"""
        done = subprocess.run(["pgrep", "-f", f"patroni {self.dir / name / 'patroni'}"], capture_output=True, text=True)
        pids = [int(pid) for pid in done.stdout.split()]
        assert pids, f"no Patroni process for {name}"
        for pid in pids:
            os.kill(pid, signal.SIGKILL)

    def restart(self, name: str) -> None:
        """A killed member's machine is back: its Patroni starts on the data it had and
        rejoins as a standby (pg_rewind when its timeline went past the new primary's)."""
        self._start_member(name, self.synchronous, self.ttl)

    def synchronous_standby(self) -> Optional[str]:
        """The member Patroni names synchronous standby now, if any: while there is
        one, a commit the primary acknowledged is on both."""
        primary = self.primary()
        if primary is None or not self._has_synchronous_standby():
            return None
        return next((name for name in self.members if name != primary and name in self.processes), None)

    def stop(self) -> None:
        for link in self.links.values():
            link.close()
        for name, process in list(self.processes.items())[::-1]:
            try:
                os.killpg(process.pid, signal.SIGTERM if name != "haproxy" else signal.SIGKILL)
            except ProcessLookupError:
                pass
        for process in self.processes.values():
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
        self.processes = {}
        # PostgreSQL left behind by a killed Patroni: stop it by its data directory.
        for name in self.members:
            data = self.dir / name / "data"
            if (data / "postmaster.pid").exists():
                subprocess.run(self._as_postgres([f"{PG_BIN}/pg_ctl", "-D", str(data), "-m", "immediate", "stop"]),
                               capture_output=True)


def main() -> None:
    """`python3 patroni_cluster.py DIR`: starts the cluster, prints the URL through
    HAProxy and each member's role, and runs until SIGTERM or SIGINT (`./dev cluster
    --ha-postgres)."""
    import sys
    import threading

    cluster = PatroniCluster(sys.argv[1])
    stopped = threading.Event()
    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, lambda *_: stopped.set())
    print(cluster.url, flush=True)
    print(" ".join(f"{name}={cluster.role(name)}" for name in cluster.members), file=sys.stderr, flush=True)
    stopped.wait()
    cluster.stop()


if __name__ == "__main__":
    main()

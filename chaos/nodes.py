"""The node processes: each viewline-server the run starts (on a port of its own, to
PostgreSQL through its link, its wall clock under libfaketime read from a file of its
own that the clock faults step, one of them minutes ahead), every incarnation it has
had, its RSS, and how it is killed, paused, restarted or stopped. A node that fails
to start is started again, as a supervisor would."""
from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, List, Optional, Tuple

from .clocks import ClockFile
from .constants import NODE_TIMEOUT, now
from .link import Link

if TYPE_CHECKING:
    from .servelog import ServeLog


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
        self.clock = ClockFile(os.path.join(log_dir, f"node{index}.clock"), base=args.skew_minutes * 60.0 if skewed else 0.0)
        self.log_dir = log_dir
        self.events = events
        self.process: Optional[subprocess.Popen] = None
        self.incarnations: List[Incarnation] = []
        self.stopped = False
        self.failed_starts = 0
        self.release = 1   # of the seed apps (`--seed-release`): the upgrade fault raises it

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
            "--seed-release", str(self.release),
        ]
        # libfaketime preloaded into the node itself (the `faketime` wrapper forks:
        # signals sent to it would miss the node). Through `env`, which execs in
        # place: a Swift program exec'd straight from here with libfaketime
        # preloaded sees no arguments at all (it ran as a default server on port
        # 7878, with SQLite, for every run before this was found). Its offset is read
        # from its clock file at every call: a clock fault steps it at run time.
        env = dict(os.environ, **self.clock.environment())
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
            self.forget_faketime()
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
        self.forget_faketime()

    def forget_faketime(self) -> None:
        """libfaketime's shared memory and semaphore, named after the process it
        started in (here the node's: `env` execs in place), are left behind by a
        process that did not exit cleanly; a later process given the same pid would
        fail to start on them."""
        for name in (f"faketime_shm_{self.process.pid}", f"sem.faketime_sem_{self.process.pid}"):
            try:
                os.unlink(os.path.join("/dev/shm", name))
            except OSError:
                pass

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            if self.stopped:
                self.process.send_signal(signal.SIGCONT)
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.forget_faketime()

"""The server under attack: its process read from /proc (resident memory, CPU time,
whether it lives), a Server of a phase's own (started from --bin on free ports), its
operations listener's /metrics, a Watch that samples them while a phase runs, and
the report of a phase's failed bounds."""
from __future__ import annotations

import json
import os
import re
import resource
import socket
import subprocess
import tempfile
import time


def rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except FileNotFoundError:
        return -1
    return 0


def cpu_seconds(pid: int) -> float:
    """The process's user and system time so far."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(") ", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (FileNotFoundError, IndexError, ValueError):
        return 0.0


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[1][0] not in "ZX"
    except FileNotFoundError:
        return False


class Server:
    """A viewline-server of a phase's own, on free ports, with an in-memory store."""

    def __init__(self, binary: str, *flags: str, log_level: str = "error",
                 nofile: tuple[int, int] | None = None) -> None:
        self.out = tempfile.TemporaryFile("w+")
        self.err = tempfile.TemporaryFile("w+")
        command = [binary, "--port", "0", "--db", ":memory:", "--demo", "--line-timeout", "5",
                   "--log-level", log_level, "--log-format", "json", "--drain-seconds", "0", *flags]
        # prlimit --nofile=SOFT:HARD, without needing prlimit.
        limit = (lambda: resource.setrlimit(resource.RLIMIT_NOFILE, nofile)) if nofile else None
        self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=self.out, stderr=self.err,
                                        preexec_fn=limit)
        self.pid = self.process.pid
        self.port = self.web_port = self.metrics_port = 0
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and self.process.poll() is None:
            text = self.stdout()
            self.port = int(m.group(1)) if (m := re.search(r"^listening on .*:(\d+)$", text, re.M)) else 0
            self.web_port = int(m.group(1)) if (m := re.search(r"^web on http://.*:(\d+)/$", text, re.M)) else 0
            self.metrics_port = int(m.group(1)) if (m := re.search(r"^metrics on http://.*:(\d+)/", text, re.M)) else 0
            if self.port and (self.web_port or "--web-port" not in flags) \
                    and (self.metrics_port or "--metrics-port" not in flags):
                return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"the server did not start: {self.stderr()[-2000:]}")

    def stdout(self) -> str:
        self.out.seek(0)
        return self.out.read()

    def stderr(self) -> str:
        self.err.seek(0)
        return self.err.read()

    def log(self) -> list[dict]:
        """The server's JSON log lines."""
        entries = []
        for line in self.stderr().splitlines():
            try:
                entries.append(json.loads(line))
            except ValueError:
                pass
        return entries

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def metrics(port: int) -> dict[str, float]:
    """The operations listener's /metrics, name (with labels) to value; {} when it does not answer."""
    values: dict[str, float] = {}
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
            sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = sock.recv(65536)
                if not chunk:
                    return values
                data += chunk
            head, _, body = data.partition(b"\r\n\r\n")
            length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))  # type: ignore[union-attr]
            while len(body) < length:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                body += chunk
    except (OSError, AttributeError, ValueError):
        return values
    for line in body.decode(errors="replace").splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            try:
                values[name] = float(value)
            except ValueError:
                pass
    return values


class Watch:
    """The server's resident memory (and, with its metrics port, output backlog) sampled while a phase runs."""

    def __init__(self, pid: int, metrics_port: int = 0) -> None:
        self.pid = pid
        self.metrics_port = metrics_port
        self.baseline = rss_bytes(pid)
        self.peak = self.baseline
        self.backlog_peak = 0.0
        self.last_metrics = 0.0
        self.last_sample = 0.0

    def sample(self) -> bool:
        """False once the server is gone (read at most every 10 ms)."""
        if time.monotonic() - self.last_sample < 0.01:
            return True
        self.last_sample = time.monotonic()
        if not alive(self.pid):
            return False
        self.peak = max(self.peak, rss_bytes(self.pid))
        if self.metrics_port and time.monotonic() - self.last_metrics >= 0.2:
            self.last_metrics = time.monotonic()
            self.backlog_peak = max(self.backlog_peak,
                                    metrics(self.metrics_port).get("viewline_output_backlog_bytes", 0.0))
        return True

    @property
    def growth(self) -> int:
        return self.peak - self.baseline

    def line(self, connections: int, budget: int, what: str) -> str:
        return (f"server RSS {self.baseline / 2**20:.1f} MiB -> peak {self.peak / 2**20:.1f} MiB "
                f"(+{self.growth / 2**20:.1f} MiB, {self.growth / max(connections, 1) / 1024:.0f} KiB per attacking "
                f"connection; budget {budget / 2**20:.1f} MiB: {what})")


def report(phase: str, failures: list[str], seed: int) -> int:
    for failure in failures:
        print(f"FAIL: {phase}: {failure} (seed {seed})")
    return len(failures)

#!/usr/bin/env python3
"""The hostile-stream fuzzer (`./dev attack`): many connections from one address send
random framings over TCP and WebSocket -- lines split at odd offsets, blank-line
bursts, fragment and continuation storms, partial frames, frames that are not UTF-8,
pipelined and slow HTTP heads, churn -- while a probe session, in a process of its
own, pings every few milliseconds. It fails when the server dies, when its resident
memory grows more than the stated budget per attacking connection, or when the
probe's p99 passes the bound.

    attack.py --port P --web-port W --pid PID [--seconds 20] [--connections 40]
              [--budget-kib 2048] [--p99-ms 5] [--seed N]
              [--bin viewline-server] [--phases all] [--phase-seconds 2]

The budget per attacking connection is what PROTOCOL §8 lets one hold: its input
budget (256 KiB of queued lines, a line or a frame, one wakeup's reads: under 1 MiB)
and its output backlog (`--max-output-bytes`, 1 MiB by default), 2 MiB in all.

With --bin, the other phases follow (issue 69), each against a server of its own
started from that binary with the flags its bound needs, each for --phase-seconds
(a smoke's sizes by default; the flags below give more), each asserting a bound of §8:

- fanout: readers that never read, attached to a few sessions (32 connections each,
  the session cap), while each session's own connection runs searches. RSS grows by at
  most the per-address output budget (64 MiB) plus --allowance-kib per connection; the
  server's counted backlog stays under the same; one attach past the cap: server_busy.
- pipelining: tiny GETs pipelined in one write, never read, on the web and operations
  listeners. RSS grows by under --pipeline-budget-kib (1 MiB) per connection; every
  connection past the queue (16 waiting) is closed; 17 pipelined are all answered.
- attach-storm: one connection attaches again and again to a session of 32. At most
  --attach-rate attaches a second succeed after a burst of twice that (the rest get
  attach_throttled); a probe's ping p99 stays within --p99-ms.
- registry: a victim from 127.0.0.2 leaves a detached session while the attacker from
  127.0.0.1 fills --max-sessions 50 and brings newcomers: the victim attaches again.
- nofile: the server under a soft descriptor limit of 1,024 raises it to the hard one
  (and logs it), and one address is refused before it holds every place.
"""
from __future__ import annotations

import argparse
import base64
import json
import multiprocessing
import os
import random
import re
import resource
import selectors
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any


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


def ws_frame(opcode: int, payload: bytes, fin: bool = True, rng: random.Random | None = None) -> bytes:
    """A client frame: masked, the shortest length form."""
    rng = rng or random
    head = bytes([(0x80 if fin else 0) | opcode])
    n = len(payload)
    if n < 126:
        head += bytes([0x80 | n])
    elif n < 65536:
        head += bytes([0x80 | 126]) + n.to_bytes(2, "big")
    else:
        head += bytes([0x80 | 127]) + n.to_bytes(8, "big")
    mask = bytes(rng.getrandbits(8) for _ in range(4))
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def ws_upgrade(port: int) -> bytes:
    key = base64.b64encode(os.urandom(16)).decode()
    return (f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode()


COMMANDS = [b"ping", b"state search", b"search pizza", b"search " + b"x" * 300, b"help", b"state",
            b'{"id":1,"cmd":"ping"}', b'{"cmd":"search","args":{"query":"thai"}}', b"wait 5",
            b"\xff\xfe junk", b"attach 0123", b"", b"\r", b"   ", b"{" * 40, b"[" * 100]


class Attacker:
    """One hostile connection: a stream of bytes it sends in random pieces."""

    def __init__(self, kind: str, rng: random.Random, port: int, web_port: int | None) -> None:
        self.kind = kind
        self.rng = rng
        self.reads = rng.random() < 0.5  # half never read what the server sends
        self.target = web_port if kind.startswith(("ws_", "http_")) and web_port else port
        self.pending = bytearray()
        self.sock = socket.socket()
        self.sock.setblocking(False)
        self.sock.connect_ex(("127.0.0.1", self.target))
        if kind.startswith("ws_"):
            self.pending += ws_upgrade(self.target)
        self.slow = kind in ("tcp_partial", "http_slow")

    def refill(self) -> None:
        rng = self.rng
        if self.kind == "tcp_blank":
            self.pending += (b"\n" if rng.random() < 0.7 else b"\r\n") * rng.randint(1_000, 200_000)
        elif self.kind == "tcp_lines":
            for _ in range(rng.randint(1, 200)):
                self.pending += rng.choice(COMMANDS) + b"\n"
            if rng.random() < 0.05:
                self.pending += b"y" * rng.randint(60_000, 200_000) + b"\n"  # over the line limit
        elif self.kind == "tcp_partial":
            self.pending += b"z" * rng.randint(1, 64)  # a line that never ends, a little at a time
        elif self.kind == "ws_fragments":
            if rng.random() < 0.5:
                self.pending += ws_frame(0x1, b"a" * rng.randint(1, 60_000), fin=False, rng=rng)
            for _ in range(rng.randint(1, 20)):
                self.pending += ws_frame(0x0, b"b" * rng.randint(1, 60_000), fin=rng.random() < 0.05, rng=rng)
        elif self.kind == "ws_blank":
            self.pending += ws_frame(0x1, b"\n" * rng.randint(1, 65_000), rng=rng)
        elif self.kind == "ws_lines":
            for _ in range(rng.randint(1, 100)):
                self.pending += ws_frame(0x1, rng.choice(COMMANDS), rng=rng)
            if rng.random() < 0.1:
                self.pending += ws_frame(0x9, os.urandom(rng.randint(0, 125)), rng=rng)  # pings
        elif self.kind == "ws_invalid":
            choice = rng.random()
            if choice < 0.3:
                self.pending += ws_frame(0x1, b"\xc3\x28 not utf-8", rng=rng)
            elif choice < 0.6:
                self.pending += os.urandom(rng.randint(1, 4096))
            else:
                self.pending += ws_frame(0x1, b"x" * 1000, rng=rng)[: rng.randint(2, 900)]  # a partial frame
        elif self.kind == "http_pipelined":
            for _ in range(rng.randint(1, 50)):
                self.pending += f"GET /{rng.choice(['', 'app.js', 'nope', 'ws'])} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
        elif self.kind == "http_slow":
            self.pending += b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " if not self.pending else b"a"

    def piece(self) -> bytes:
        """The next piece to send: cut at an odd offset."""
        if not self.pending:
            self.refill()
        size = 1 if self.slow else self.rng.choice([1, 3, 7, 13, 101, 4097, 65_537, 262_147])
        piece = bytes(self.pending[:size])
        return piece

    def sent(self, count: int) -> None:
        del self.pending[:count]


KINDS = ["tcp_blank", "tcp_lines", "tcp_partial", "ws_fragments", "ws_blank", "ws_lines", "ws_invalid",
         "http_pipelined", "http_slow"]


def probe(port: int, seconds: float, interval: float, results: "multiprocessing.Queue[list[float]]") -> None:
    """Pings on a session of its own; puts each round trip (ms), or [-1] if the server went away."""
    latencies: list[float] = []
    try:
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        reader = sock.makefile("rb")
        reader.readline()  # welcome
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            start = time.perf_counter()
            sock.sendall(b"ping\n")
            line = reader.readline()
            if not line:
                raise ConnectionError("closed")
            latencies.append((time.perf_counter() - start) * 1000)
            time.sleep(interval)
    except (OSError, ConnectionError):
        latencies.append(-1)
    results.put(latencies)


def streams(args: argparse.Namespace) -> int:
    """The stream fuzzer, against the server at --port/--web-port/--pid: the original phase."""
    rng = random.Random(args.seed)
    kinds = [k for k in args.kinds.split(",") if k in KINDS and (args.web_port or not k.startswith(("ws_", "http_")))]

    baseline = rss_bytes(args.pid)
    results: multiprocessing.Queue[list[float]] = multiprocessing.Queue()
    prober = multiprocessing.Process(target=probe, args=(args.port, args.seconds, 0.005, results))
    prober.start()
    # The generator shares this machine's cores with the server it attacks, as no
    # remote attacker does: niced, it takes what the server leaves rather than the
    # server's own share (the probe keeps the default priority).
    if args.nice:
        os.nice(args.nice)

    selector = selectors.DefaultSelector()
    attackers: list[Attacker] = []

    def open_one() -> None:
        attacker = Attacker(rng.choice(kinds), random.Random(rng.getrandbits(64)), args.port, args.web_port)
        attackers.append(attacker)
        selector.register(attacker.sock, selectors.EVENT_READ | selectors.EVENT_WRITE, attacker)

    def close_one(attacker: Attacker) -> None:
        selector.unregister(attacker.sock)
        attacker.sock.close()
        attackers.remove(attacker)

    for _ in range(args.connections):
        open_one()
    end = time.monotonic() + args.seconds
    sent_total = 0
    peak = baseline
    reopened = 0
    kinds_seen: dict[str, int] = {}
    started = time.monotonic()
    while time.monotonic() < end:
        if not alive(args.pid):
            print(f"FAIL: the server died (seed {args.seed})")
            return 1
        peak = max(peak, rss_bytes(args.pid))
        allowed = args.rate_mb * 1e6 * (time.monotonic() - started)
        for key, events in selector.select(timeout=0.01):
            attacker: Attacker = key.data
            try:
                if events & selectors.EVENT_READ:
                    if attacker.reads or rng.random() < 0.01:
                        if not attacker.sock.recv(65536):
                            raise ConnectionError
                if events & selectors.EVENT_WRITE and sent_total < allowed:
                    if attacker.slow and rng.random() < 0.9:
                        continue
                    count = attacker.sock.send(attacker.piece())
                    attacker.sent(count)
                    sent_total += count
                    kinds_seen[attacker.kind] = kinds_seen.get(attacker.kind, 0) + count
            except (BlockingIOError, InterruptedError):
                pass
            except (OSError, ConnectionError):
                # Cut off (budget, timeout, a protocol violation): another takes its place.
                close_one(attacker)
                open_one()
                reopened += 1
        if sent_total >= allowed:
            time.sleep(0.002)
    for attacker in list(attackers):
        close_one(attacker)
    latencies = results.get(timeout=30)
    prober.join(timeout=10)
    time.sleep(0.5)
    if not alive(args.pid):
        print(f"FAIL: the server died (seed {args.seed})")
        return 1
    growth = peak - baseline
    budget = args.connections * args.budget_kib * 1024
    failures = []
    if latencies and latencies[-1] == -1:
        failures.append("the probe's session lost its connection")
        latencies = latencies[:-1]
    p99 = statistics.quantiles(latencies, n=100)[98] if len(latencies) >= 100 else max(latencies, default=0.0)
    p50 = statistics.median(latencies) if latencies else 0.0
    print(f"attack: {args.seconds:.0f} s, seed {args.seed}, {args.connections} connections from one address "
          f"({reopened} cut off and replaced), {sent_total / 1e6:.1f} MB sent "
          f"({', '.join(f'{k} {v / 1e6:.1f}' for k, v in sorted(kinds_seen.items()))})")
    print(f"server RSS {baseline / 2**20:.1f} MiB -> peak {peak / 2**20:.1f} MiB "
          f"(+{growth / 2**20:.1f} MiB, {growth / args.connections / 1024:.0f} KiB per attacking connection; "
          f"budget {args.budget_kib} KiB)")
    print(f"probe: {len(latencies)} pings, p50 {p50:.2f} ms, p99 {p99:.2f} ms (bound {args.p99_ms} ms)")
    if growth > budget:
        failures.append(f"RSS grew {growth / 2**20:.1f} MiB, over {budget / 2**20:.1f} MiB")
    if p99 > args.p99_ms:
        failures.append(f"the probe's p99 {p99:.2f} ms is over {args.p99_ms} ms")
    if len(latencies) < 10:
        failures.append(f"the probe got only {len(latencies)} pings through")
    for failure in failures:
        print(f"FAIL: {failure} (seed {args.seed})")
    return len(failures)



# --- The phases besides the stream fuzzer: each starts a server of its own (from --bin,
# with the flags its bound needs), attacks it in one way for --phase-seconds, prints
# what it measured in the style of the streams report and returns how many bounds
# failed. Sizes are a smoke's by default; the flags give more.

PHASES = ["streams", "fanout", "pipelining", "attach-storm", "registry", "nofile", "dead-tokens", "amplification"]
QUERIES = ["pizza", "thai food", "mission", "restaurant", "sushi", "burger", "noodles", "st"]


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


class LineConn:
    """A blocking line-protocol connection, from a chosen source address if need be."""

    def __init__(self, port: int, source: str | None = None, rcvbuf: int = 0, timeout: float = 10.0) -> None:
        self.sock = socket.socket()
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        if source:
            self.sock.bind((source, 0))
        self.sock.settimeout(timeout)
        self.sock.connect(("127.0.0.1", port))
        self.buffer = bytearray()

    def send(self, line: str) -> None:
        self.sock.sendall(line.encode() + b"\n")

    def message(self) -> dict | None:
        """The next message; None once the connection is closed or silent past the timeout."""
        while (end := self.buffer.find(b"\n")) < 0:
            try:
                data = self.sock.recv(65536)
            except OSError:
                return None
            if not data:
                return None
            self.buffer += data
        line = bytes(self.buffer[:end])
        del self.buffer[: end + 1]
        return json.loads(line)

    def reply(self) -> dict | None:
        """The next reply (or bye), skipping events."""
        while (message := self.message()) is not None:
            if message.get("type") in ("reply", "bye"):
                return message
        return None

    def close(self) -> None:
        self.sock.close()


def code(reply: dict | None) -> str:
    """ok, an error's code, bye: its reason, or closed."""
    if reply is None:
        return "closed"
    if reply.get("type") == "bye":
        return f"bye: {reply.get('reason')}"
    return "ok" if reply.get("ok") else reply.get("error", {}).get("code", "?")


def attach(conn: LineConn, token: str, patience: float = 10.0) -> dict | None:
    """attach, waiting out attach_throttled (the phase's own attaches are no attack)."""
    deadline = time.monotonic() + patience
    while True:
        conn.send(f"attach {token}")
        reply = conn.reply()
        if code(reply) == "attach_throttled" and time.monotonic() < deadline:
            time.sleep(min(float(reply["error"].get("retryAfter", 1)), 1.0))  # type: ignore[index]
            continue
        return reply


def report(phase: str, failures: list[str], seed: int) -> int:
    for failure in failures:
        print(f"FAIL: {phase}: {failure} (seed {seed})")
    return len(failures)


def fanout(args: argparse.Namespace) -> int:
    """Output fan-out to slow readers: readers attach to a few sessions (as many to each as the
    session cap allows) with a 4 KiB receive buffer and never read, while each session's
    own connection runs searches (each sends two `display`s to every connection of the
    session). Bound (PROTOCOL §8): the server lives, its RSS grows by at most the
    per-address output budget plus an allowance per connection (a line and the
    connection's own state), its counted backlog stays under the same, and one attach
    past the session cap gets server_busy."""
    budget = args.output_per_address_mib * 2**20
    server = Server(args.bin, "--metrics-port", "0", "--max-clients-per-address", "0",
                    "--max-sessions-per-address", "0", "--max-output-bytes-per-address", str(budget),
                    "--max-connections-per-session", str(args.session_cap))
    failures: list[str] = []
    try:
        watch = Watch(server.pid, server.metrics_port)
        drivers: list[LineConn] = []
        readers: list[LineConn] = []
        cap_answer = "not tried"
        while len(readers) < args.fanout_connections:
            driver = LineConn(server.port)
            token = driver.message()["token"]  # type: ignore[index]
            drivers.append(driver)
            room = min(args.session_cap - 1, args.fanout_connections - len(readers))
            for _ in range(room):
                reader = LineConn(server.port, rcvbuf=4096)
                reader.message()
                if (answer := code(attach(reader, token))) != "ok":
                    failures.append(f"reader {len(readers) + 1}'s attach got {answer}")
                    reader.close()
                    break
                readers.append(reader)
            if cap_answer == "not tried" and room == args.session_cap - 1 and not failures:
                extra = LineConn(server.port)
                extra.message()
                cap_answer = code(attach(extra, token))
                extra.close()
            if failures:
                break
        watch.sample()
        selector = selectors.DefaultSelector()
        partial: dict[LineConn, bytearray] = {}
        waiting: dict[LineConn, int] = {}
        for driver in drivers:
            driver.sock.setblocking(False)
            selector.register(driver.sock, selectors.EVENT_READ, driver)
            partial[driver] = bytearray()
            waiting[driver] = 0
        searches = 0
        received = 0
        turn = 0
        end = time.monotonic() + args.phase_seconds
        while time.monotonic() < end and not failures:
            if not watch.sample():
                failures.append("the server died")
                break
            for driver in drivers:
                if waiting[driver] <= args.fanout_batch // 2:
                    batch = "".join(f"search {QUERIES[(turn + i) % len(QUERIES)]}\n" for i in range(args.fanout_batch))
                    turn += 1
                    driver.sock.sendall(batch.encode())
                    waiting[driver] += args.fanout_batch
                    searches += args.fanout_batch
            for key, _ in selector.select(timeout=0.02):
                driver = key.data
                try:
                    data = driver.sock.recv(1 << 20)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if not data:
                    failures.append("a driving connection was closed")
                    break
                received += len(data)
                # Replies counted across reads: a 14-byte tail cannot hold a whole one.
                seen = partial[driver] + data
                waiting[driver] -= seen.count(b'{"type":"reply"')
                partial[driver] = seen[-14:]
        for _ in range(5):
            watch.sample()
            time.sleep(0.05)
        counters = metrics(server.metrics_port)
        for conn in drivers + readers:
            conn.close()
        time.sleep(0.3)
        if not alive(server.pid):
            failures.append("the server died")
        connections = len(drivers) + len(readers)
        allowed = budget + connections * args.allowance_kib * 1024
        print(f"fanout: {args.phase_seconds:.0f} s, {len(readers)} readers that never read on {len(drivers)} sessions "
              f"from one address, {searches} searches run ({received / 1e6:.1f} MB of events to each session's "
              f"connections), {counters.get('viewline_output_cutoffs_total', float('nan')):.0f} connections cut off; "
              f"one attach past {args.session_cap} connections: {cap_answer}")
        print(watch.line(connections, allowed, f"{budget / 2**20:.0f} MiB per address + {args.allowance_kib} KiB "
                                               f"per connection") +
              f"; counted output backlog peak {watch.backlog_peak / 2**20:.1f} MiB")
        if watch.growth > allowed:
            failures.append(f"RSS grew {watch.growth / 2**20:.1f} MiB, over {allowed / 2**20:.1f} MiB")
        if watch.backlog_peak > allowed:
            failures.append(f"the counted output backlog reached {watch.backlog_peak / 2**20:.1f} MiB, "
                            f"over {allowed / 2**20:.1f} MiB")
        if cap_answer not in ("server_busy", "not tried"):
            failures.append(f"an attach past the session cap got {cap_answer}, not server_busy")
    finally:
        server.stop()
    return report("fanout", failures, args.seed)


def server_closed(server_port: int, sockets: list[socket.socket]) -> set[socket.socket]:
    """Which of these connections the server has closed, read from the kernel's table of TCP
    sockets (/proc/net/tcp): the server's end of each is no longer ESTABLISHED, or gone. A
    client that never reads would learn of a close (a FIN queued behind unread answers) only
    by reading them all, which would let the server answer more."""
    established: set[int] = set()
    with open("/proc/net/tcp") as table:
        for row in table.readlines()[1:]:
            fields = row.split()
            local, remote, state = fields[1], fields[2], fields[3]
            if int(local.split(":")[1], 16) == server_port and state == "01":
                established.add(int(remote.split(":")[1], 16))
    return {sock for sock in sockets if sock.getsockname()[1] not in established}


def pipelining(args: argparse.Namespace) -> int:
    """HTTP pipelining on the web and operations listeners: connections that write many
    tiny GETs in one write and never read (2,000 on the web listener, 1,000 on the
    operations one), and a few that write 17 (one answered, 16 waiting: the most §8
    lets wait). Bound: RSS grows by less than --pipeline-budget-kib per connection;
    every connection that pipelines past the queue is closed -- on the operations
    listener at once; on the web listener, which answers as it decodes, once its
    unread answers pass --max-output-bytes and requests start to wait (it is given
    the phase and 5 s more); and the 17 are all answered on a connection left open."""
    server = Server(args.bin, "--web-port", "0", "--metrics-port", "0", "--max-clients-per-address", "0",
                    log_level="info")
    failures: list[str] = []
    try:
        watch = Watch(server.pid)
        # A web burst costs the server its answers until the unread ones pass the output budget (~1,000
        # of them, some 0.1 ms each in a debug build): a tenth as many connections there.
        listeners = [("web", server.web_port, "/", 2000, max(1, args.pipeline_connections // 10)),
                     ("operations", server.metrics_port, "/healthz", 1000, args.pipeline_connections)]
        bursts: dict[socket.socket, str] = {}
        unsent: dict[socket.socket, bytes] = {}
        within: list[tuple[str, socket.socket]] = []
        closed_at: dict[socket.socket, float] = {}
        sent = 0

        def push() -> None:
            """What the bursts have left to send, as far as their sockets take it (one write each)."""
            nonlocal sent
            for sock, rest in list(unsent.items()):
                try:
                    count = sock.send(rest)
                except BlockingIOError:
                    continue
                except OSError:
                    closed_at[sock] = time.monotonic() - started
                    count = len(rest)
                sent += count
                if count < len(rest):
                    unsent[sock] = rest[count:]
                else:
                    del unsent[sock]

        started = time.monotonic()
        for name, port, path, count, connections in listeners:
            request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
            for _ in range(connections):
                sock = socket.socket()
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                sock.connect(("127.0.0.1", port))
                sock.setblocking(False)
                bursts[sock] = name
                unsent[sock] = request * count
            push()
            watch.sample()
        for name, port, path, count, connections in listeners:
            request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
            for _ in range(max(1, connections // 10)):
                sock = socket.create_connection(("127.0.0.1", port), timeout=10)
                sock.sendall(request * 17)
                within.append((name, sock))
        setup = time.monotonic() - started
        # The bursts are never read: whether the server closed them is read from the kernel's
        # table, for the phase and 10 s more. The 17s are read, as a client would.
        answered: dict[socket.socket, int] = {sock: 0 for _, sock in within}
        answered_at: dict[socket.socket, float] = {}
        selector = selectors.DefaultSelector()
        for _, sock in within:
            sock.setblocking(False)
            selector.register(sock, selectors.EVENT_READ)
        ports = {name: port for name, port, _, _, _ in listeners}
        phase_end = time.monotonic() + args.phase_seconds
        deadline = phase_end + 10
        last_check = 0.0
        while time.monotonic() < deadline:
            if not watch.sample():
                failures.append("the server died")
                break
            push()
            if time.monotonic() - last_check >= 0.1:
                last_check = time.monotonic()
                for name, port in ports.items():
                    open_ones = [sock for sock, listener in bursts.items() if listener == name and sock not in closed_at]
                    for sock in server_closed(port, open_ones):
                        closed_at[sock] = time.monotonic() - started - setup
            if time.monotonic() >= phase_end and len(closed_at) == len(bursts) and not selector.get_map():
                break
            for key, _ in selector.select(timeout=0.01):
                sock = key.fileobj  # type: ignore[assignment]
                try:
                    data = sock.recv(1 << 20)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                answered[sock] += data.count(b"HTTP/1.1 ")  # whole here: 17 small answers
                if not data or answered[sock] >= 17:
                    answered_at[sock] = time.monotonic() - started - setup
                    if not data:
                        answered[sock] = -1 - answered[sock]
                    selector.unregister(sock)
        within_waits = sorted(answered_at.values())
        # Afterwards, on an idle server: 17 pipelined (16 waiting, the most allowed) are all answered.
        after: dict[str, int] = {}
        for name, port, path, _, _ in listeners:
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode() * 17)
            data = b""
            try:
                while data.count(b"HTTP/1.1 ") < 17 and (chunk := sock.recv(65536)):
                    data += chunk
            except OSError:
                pass
            after[name] = data.count(b"HTTP/1.1 ")
            sock.close()
        time.sleep(0.3)
        if not alive(server.pid):
            failures.append("the server died")
        # A close the kernel's table did not show in time (the server's loops busy) but the log names.
        refused_ports = {int(m.group(1)) for entry in server.log()
                         if "pipelined past its queue" in str(entry.get("message", ""))
                         and (m := re.search(r":(\d+)$", str(entry.get("peer", ""))))}
        logged = len(refused_ports)
        for sock in bursts:
            if sock not in closed_at and sock.getsockname()[1] in refused_ports:
                closed_at[sock] = float("inf")
        for sock in list(bursts) + [sock for _, sock in within]:
            sock.close()
        connections = len(bursts) + len(within)
        allowed = connections * args.pipeline_budget_kib * 1024
        parts = []
        for name, _, path, count, _ in listeners:
            mine = [sock for sock, listener in bursts.items() if listener == name]
            times = sorted(closed_at[sock] for sock in mine if sock in closed_at and closed_at[sock] != float("inf"))
            logged_only = sum(1 for sock in mine if closed_at.get(sock) == float("inf"))
            held = [answered[sock] for listener, sock in within if listener == name]
            full = sum(1 for n in held if n >= 17)
            parts.append(f"{name} ({path}): {len(times) + logged_only} of {len(mine)} that wrote {count} requests closed"
                         + (f" ({len(times)} seen {times[0]:.1f}-{times[-1]:.1f} s in" if times else " (none seen")
                         + (f", {logged_only} later by the log)" if logged_only else ")")
                         + f"; during the bursts {full} of {len(held)} that wrote 17 got all 17 answers; "
                         f"after them, 17 pipelined got {after[name]} answers")
            if len(times) + logged_only < len(mine):
                failures.append(f"{len(mine) - len(times) - logged_only} of {len(mine)} connections that pipelined {count} "
                                f"requests on the {name} listener were still open {args.phase_seconds + 10:.0f} s on")
            if after[name] < 17:
                failures.append(f"on the {name} listener, 17 pipelined requests (16 waiting) got {after[name]} "
                                f"answers")
        print(f"pipelining: {args.phase_seconds:.0f} s (after {setup:.1f} s opening), {connections} HTTP connections "
              f"from one address, {sent / 1e6:.1f} MB of requests ({len(unsent)} bursts not taken whole); " + "; ".join(parts)
              + f" (the server logged {logged} closed as pipelined past the queue; during the bursts the 17s "
              f"were done {within_waits[0] if within_waits else 0:.1f}-{within_waits[-1] if within_waits else 0:.1f} s in)")
        print(watch.line(connections, allowed, f"{args.pipeline_budget_kib} KiB per connection"))
        if watch.growth > allowed:
            failures.append(f"RSS grew {watch.growth / 2**20:.1f} MiB, over {allowed / 2**20:.1f} MiB")
    finally:
        server.stop()
    return report("pipelining", failures, args.seed)


class Prober:
    """A process, started before the generator is niced (--nice), that runs probes on request:
    the probe keeps the default priority in every phase."""

    def __init__(self) -> None:
        self.requests: multiprocessing.Queue[tuple[int, float] | None] = multiprocessing.Queue()
        self.results: multiprocessing.Queue[list[float]] = multiprocessing.Queue()
        self.process = multiprocessing.Process(target=self.serve, args=(self.requests, self.results), daemon=True)
        self.process.start()

    @staticmethod
    def serve(requests: "multiprocessing.Queue[tuple[int, float] | None]",
              results: "multiprocessing.Queue[list[float]]") -> None:
        for port, seconds in iter(requests.get, None):
            probe(port, seconds, 0.005, results)

    def start(self, port: int, seconds: float) -> None:
        self.requests.put((port, seconds))

    def latencies(self, seconds: float) -> list[float]:
        return self.results.get(timeout=seconds + 30)

    def stop(self) -> None:
        self.requests.put(None)
        self.process.join(timeout=5)


PROBER: Prober | None = None


def p99(latencies: list[float]) -> float:
    return statistics.quantiles(latencies, n=100)[98] if len(latencies) >= 100 else max(latencies, default=0.0)


def attach_storm(args: argparse.Namespace) -> int:
    """An attach storm: one connection attaches again and again (pipelined, without
    last-rev) to a session that has the session cap's worth of connections, all
    reading, while a probe on a session of its own pings. Bound: attaches from the
    address succeed at most at --attach-rate a second after a burst of twice that
    (the rest get attach_throttled), and the probe's p99 stays within --p99-ms (the
    reference p99, measured first without the storm, is reported beside it)."""
    server = Server(args.bin, "--max-clients-per-address", "0", "--max-sessions-per-address", "0",
                    "--max-attaches-per-second", str(args.attach_rate),
                    "--max-connections-per-session", str(args.session_cap))
    failures: list[str] = []
    try:
        watch = Watch(server.pid)
        assert PROBER is not None
        PROBER.start(server.port, min(1.0, args.phase_seconds))
        reference = PROBER.latencies(1.0)
        owner = LineConn(server.port)
        token = owner.message()["token"]  # type: ignore[index]
        members = [owner]
        first_attach = time.monotonic()
        for _ in range(args.session_cap - 2):  # a place left for the storm's connection
            member = LineConn(server.port)
            member.message()
            if (answer := code(attach(member, token))) != "ok":
                failures.append(f"a member's attach got {answer}")
                break
            members.append(member)
        storm = LineConn(server.port)
        storm.message()
        PROBER.start(server.port, args.phase_seconds)
        cpu_before = cpu_seconds(server.pid)
        selector = selectors.DefaultSelector()
        for conn in members + [storm]:
            conn.sock.setblocking(False)
            selector.register(conn.sock, selectors.EVENT_READ, conn)
        answers: dict[str, int] = {}
        in_flight = 0
        tail = b""
        member_bytes = 0
        end = time.monotonic() + args.phase_seconds
        while time.monotonic() < end:
            if not watch.sample():
                failures.append("the server died")
                break
            if in_flight < 32:
                try:
                    storm.sock.send(f"attach {token}\n".encode() * (32 - in_flight))
                    in_flight = 32
                except BlockingIOError:
                    pass
            for key, _ in selector.select(timeout=0.01):
                conn = key.data
                try:
                    data = conn.sock.recv(1 << 20)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if not data:
                    failures.append("the storm's connection was closed" if conn is storm
                                    else "a member of the session was closed")
                    selector.unregister(conn.sock)
                    continue
                if conn is not storm:
                    member_bytes += len(data)
                    continue
                lines = (tail + data).split(b"\n")
                tail = lines.pop()
                for line in lines:
                    if line.startswith(b'{"type":"reply"'):
                        answer = code(json.loads(line))
                        answers[answer] = answers.get(answer, 0) + 1
                        in_flight -= 1
        elapsed = time.monotonic() - first_attach
        cpu = cpu_seconds(server.pid) - cpu_before
        latencies = PROBER.latencies(args.phase_seconds)
        for conn in members + [storm]:
            conn.close()
        time.sleep(0.3)
        if not alive(server.pid):
            failures.append("the server died")
        if latencies and latencies[-1] == -1:
            failures.append("the probe's session lost its connection")
            latencies = latencies[:-1]
        succeeded = answers.get("ok", 0) + len(members) - 1
        allowed = 2 * args.attach_rate + args.attach_rate * elapsed
        print(f"attach storm: {args.phase_seconds:.0f} s, {sum(answers.values())} attaches answered on one connection "
              f"to a session of {len(members) + 1} connections ("
              + ", ".join(f"{k} {v}" for k, v in sorted(answers.items()))
              + f"); {succeeded} attaches from the address succeeded in {elapsed:.1f} s (allowed "
              f"{allowed:.0f}: a burst of {2 * args.attach_rate}, {args.attach_rate} a second); "
              f"{member_bytes / 1e6:.1f} MB to the other connections; server CPU {cpu:.2f} s, "
              f"{cpu * 1000 / max(sum(answers.values()), 1):.1f} ms per attach answered")
        storm_bound = args.storm_p99_ms if args.storm_p99_ms is not None else args.p99_ms
        print(f"probe: {len(latencies)} pings, p50 {statistics.median(latencies) if latencies else 0:.2f} ms, "
              f"p99 {p99(latencies):.2f} ms (bound {storm_bound} ms; without the storm p99 "
              f"{p99([r for r in reference if r >= 0]):.2f} ms); server RSS +{watch.growth / 2**20:.1f} MiB")
        if succeeded > allowed + 2:
            failures.append(f"{succeeded} attaches succeeded, over the {allowed:.0f} the rate allows")
        attempted = sum(answers.values()) + len(members) - 1
        if attempted > allowed + 2 and not answers.get("attach_throttled"):
            failures.append(f"{attempted} attaches, past the {allowed:.0f} allowed, and none was throttled")
        if p99(latencies) > storm_bound:
            failures.append(f"the probe's p99 {p99(latencies):.2f} ms is over {storm_bound} ms")
        if len(latencies) < 10:
            failures.append(f"the probe got only {len(latencies)} pings through")
    finally:
        server.stop()
    return report("attach storm", failures, args.seed)


def dead_tokens(args: argparse.Namespace) -> int:
    """Dead tokens in a cluster: one address replays, pipelined and each once (so no
    cache of its own misses answers them), the tokens of sessions that quit — first
    those of an earlier node on the same database (the cluster made them; each is a
    lookup in PostgreSQL), then those of sessions that quit on the node itself —
    while a victim from another address resumes its live session and a probe pings.
    Bounds: the earlier node's tokens cost at most the failed attaches an address gets
    free (100) and the 8 lookups in flight before `attach_throttled`; the node's own
    ended sessions cost no lookup at all; the victim's attach succeeds; the probe's
    p99 stays within --p99-ms."""
    url = args.postgres or os.environ.get("VIEWLINE_TEST_POSTGRES", "")
    if not url:
        print("dead tokens: skipped (no PostgreSQL: --postgres URL or VIEWLINE_TEST_POSTGRES)")
        return 0
    support = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Tests", "support", "postgres")
    database = subprocess.run([support, "createdb", url, f"attack{os.getpid()}"], capture_output=True, text=True,
                              timeout=60).stdout.strip()
    flags = ("--postgres", database, "--max-clients-per-address", "0", "--max-sessions-per-address", "0",
             "--max-attaches-per-second", str(args.attach_rate), "--metrics-port", "0")

    def quit_sessions(port: int, count: int) -> list[str]:
        tokens = []
        for _ in range(count):
            conn = LineConn(port)
            tokens.append(conn.message()["token"])  # type: ignore[index]
            conn.send("quit")
            conn.reply()
            conn.close()
        return tokens

    earlier = Server(args.bin, *flags)
    try:
        theirs = quit_sessions(earlier.port, args.dead_tokens)
    finally:
        earlier.stop()
    server = Server(args.bin, *flags)
    failures: list[str] = []
    try:
        watch = Watch(server.pid)
        ours = quit_sessions(server.port, args.dead_tokens)
        victim = LineConn(server.port, source="127.0.0.2")
        victim_token = victim.message()["token"]  # type: ignore[index]
        victim.send("search pizza")
        victim.reply()
        victim.close()
        time.sleep(0.5)  # records written
        assert PROBER is not None
        PROBER.start(server.port, args.phase_seconds)
        cpu_before = cpu_seconds(server.pid)
        victim_answer = ""
        figures: list[tuple[str, int, dict[str, int], int]] = []
        for name, source, tokens in (("an earlier node's", "127.0.0.3", theirs), ("its own", "127.0.0.4", ours)):
            before = int(metrics(server.metrics_port).get("viewline_cluster_lookups_total", 0))
            attacker = LineConn(server.port, source=source)
            attacker.message()
            answers: dict[str, int] = {}
            for start in range(0, len(tokens), 32):
                if not watch.sample():
                    failures.append("the server died")
                    break
                batch = tokens[start:start + 32]
                attacker.sock.sendall(b"".join(f"attach {token}\n".encode() for token in batch))
                for _ in batch:
                    answer = code(attacker.reply())
                    answers[answer] = answers.get(answer, 0) + 1
                if not victim_answer and start >= len(tokens) // 2:
                    # Midway, the victim resumes its session from its own address.
                    back = LineConn(server.port, source="127.0.0.2")
                    back.message()
                    victim_answer = code(attach(back, victim_token, patience=5))
                    back.close()
            attacker.close()
            lookups = int(metrics(server.metrics_port).get("viewline_cluster_lookups_total", 0)) - before
            figures.append((name, len(tokens), answers, lookups))
        cpu = cpu_seconds(server.pid) - cpu_before
        latencies = PROBER.latencies(args.phase_seconds)
        if latencies and latencies[-1] == -1:
            failures.append("the probe's session lost its connection")
            latencies = latencies[:-1]
        free = 100  # the failed attaches of this cluster's tokens an address gets free (AttachPolicy)
        print("dead tokens: " + "; ".join(
            f"{count} of {name} quit sessions' tokens from one address ("
            + ", ".join(f"{k} {v}" for k, v in sorted(answers.items())) + f"): {lookups} lookups reached PostgreSQL"
            for name, count, answers, lookups in figures)
            + f" (bounds: {free} free failures and 8 in flight; none for its own); victim's attach from another address:"
            f" {victim_answer or 'not tried'}; server CPU {cpu:.2f} s; probe p99 {p99(latencies):.2f} ms (bound"
            f" {args.p99_ms} ms); server RSS +{watch.growth / 2**20:.1f} MiB")
        (_, _, their_answers, their_lookups), (_, _, _, own_lookups) = figures
        if their_lookups > free + 8 + 1:  # and the victim's
            failures.append(f"{their_lookups} lookups reached the database for an earlier node's dead tokens")
        if len(theirs) > free + 8 and not their_answers.get("attach_throttled"):
            failures.append("no dead-token attach was throttled")
        if own_lookups > 1:  # the victim's, at most
            failures.append(f"{own_lookups} lookups reached the database for sessions that ended on the node itself")
        if victim_answer != "ok":
            failures.append(f"the victim's attach got {victim_answer}")
        if p99(latencies) > args.p99_ms:
            failures.append(f"the probe's p99 {p99(latencies):.2f} ms is over {args.p99_ms} ms")
    finally:
        server.stop()
    return report("dead tokens", failures, args.seed)


class Readers:
    """Connections of one session that read everything they are sent, on a thread of
    their own, counting the bytes."""

    def __init__(self, conns: list[LineConn]) -> None:
        self.conns = conns
        self.bytes = 0
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.selector = selectors.DefaultSelector()
        for conn in conns:
            conn.sock.setblocking(False)
            self.selector.register(conn.sock, selectors.EVENT_READ, conn)
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        while not self.stopped.is_set():
            for key, _ in self.selector.select(timeout=0.05):
                try:
                    data = key.fileobj.recv(1 << 20)  # type: ignore[union-attr]
                except (BlockingIOError, OSError):
                    continue
                with self.lock:
                    self.bytes += len(data)

    def settled(self) -> int:
        """The bytes read so far, once nothing has arrived for 0.3 s."""
        last = -1
        while True:
            time.sleep(0.3)
            with self.lock:
                now = self.bytes
            if now == last:
                return now
            last = now

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(timeout=5)
        for conn in self.conns:
            conn.close()


def amplification(args: argparse.Namespace) -> int:
    """What one input line can make the server send and spend, measured: a session
    with five views on screen and --session-cap connections, every one reading. For
    each of PROTOCOL §8's amplification rows, the line is sent --amplification-lines
    times; the bytes every connection received and the server's CPU are divided by
    that. Bounds: each row's output within PROTOCOL §8's table (a snapshot and a
    `connections` display per connection for `attach`; the event log for a replay;
    each event once per connection for a command), and its CPU within --line-cpu-ms
    (but a log-in's, which is its password hash's)."""
    server = Server(args.bin, "--max-clients-per-address", "0", "--max-sessions-per-address", "0",
                    "--max-attaches-per-second", "0", "--max-connections-per-session", str(args.session_cap))
    failures: list[str] = []
    lines = args.amplification_lines
    try:
        owner = LineConn(server.port)
        token = owner.message()["token"]  # type: ignore[index]
        for command in ("login alice wonderland", "search pizza", "contacts", "playlist", "draft a draft to keep"):
            owner.send(command)
            owner.reply()
        owner.send("wait")
        owner.reply()
        members = [owner]
        for _ in range(args.session_cap - 2):  # a place left for the measuring connection
            member = LineConn(server.port)
            member.message()
            if code(attach(member, token)) != "ok":
                failures.append("a member's attach was refused")
                break
            members.append(member)
        readers = Readers(members)
        readers.settled()
        rows: list[tuple[str, float, float, float]] = []

        def measure(name: str, line: str, bound_bytes: float, cpu_bound: bool = True) -> None:
            conn = LineConn(server.port)
            conn.message()
            attach(conn, token) if not line.startswith("attach") else None
            own_before = 0
            others_before = readers.settled()
            cpu_before = cpu_seconds(server.pid)
            received = 0
            for _ in range(lines):
                conn.send(line)
                while (message := conn.message()) is not None:
                    received += len(json.dumps(message, separators=(",", ":"))) + 1
                    if message.get("type") in ("reply", "bye"):
                        break
                # What follows the reply (a snapshot, a replay, the command's events).
                conn.sock.settimeout(0.15)
                while (message := conn.message()) is not None:
                    received += len(json.dumps(message, separators=(",", ":"))) + 1
                conn.sock.settimeout(10)
                if line.startswith("attach"):
                    # Each attach from a fresh connection: the first one's session is
                    # left (it ends, nobody knowing it) and the measuring one rejoins.
                    conn.close()
                    conn = LineConn(server.port)
                    conn.message()
            others = readers.settled() - others_before
            cpu = cpu_seconds(server.pid) - cpu_before
            conn.close()
            own = (received - own_before) / lines
            rows.append((name, own, others / lines, cpu * 1000 / lines))
            if own + others / lines > bound_bytes:
                failures.append(f"{name}: {own + others / lines:.0f} bytes a line, over {bound_bytes:.0f}")
            if cpu_bound and cpu * 1000 / lines > args.line_cpu_ms:
                failures.append(f"{name}: {cpu * 1000 / lines:.2f} ms of server CPU a line, over {args.line_cpu_ms} ms")

        cap = args.session_cap
        measure("attach <token> (snapshot)", f"attach {token}", 64 * 1024 + cap * 256)
        measure("attach <token> <last-rev> (replay)", f"attach {token} 1", 256 * 1024 + 48 * 256 + cap * 256)
        # A log-in's CPU is its password hash's (yescrypt, on a pool of its own: §8's log-in
        # limits bound it): its output is what is measured here.
        measure("login (every view's event)", "login alice wonderland", 2 * cap * 16 * 1024, cpu_bound=False)
        measure("search … (results to every connection)", "search thai food", 2 * cap * 16 * 1024)
        readers.stop()
        print(f"amplification: a session of {len(members) + 1} connections, 5 views; {lines} lines each (per line:"
              " bytes to the sender, bytes to the session's other connections, server CPU)")
        for name, own, others, cpu in rows:
            print(f"  {name}: {own / 1024:.1f} KiB to the sender, {others / 1024:.1f} KiB to the others"
                  f" ({others / max(len(members), 1):.0f} B each), {cpu:.3f} ms")
    finally:
        server.stop()
    return report("amplification", failures, args.seed)


def registry(args: argparse.Namespace) -> int:
    """Registry pressure from two addresses: a victim from 127.0.0.2 leaves one detached
    session; the attacker from 127.0.0.1 holds every other place attached and brings
    newcomers, from its own address and from fresh ones (127.0.0.3 on), now and then
    dropping one of its own connections. Bound (§8): the victim, who holds at most 16
    sessions, never loses its detached session to someone else's flood: it attaches
    at the end."""
    cap = args.registry_sessions
    server = Server(args.bin, "--max-sessions", str(cap), "--max-sessions-per-address", "0",
                    "--max-clients-per-address", "0", "--admin")
    failures: list[str] = []
    try:
        watch = Watch(server.pid)
        victim = LineConn(server.port, source="127.0.0.2")
        welcomed = victim.message() or {}
        token, name = welcomed["token"], welcomed["session"]
        victim.close()
        time.sleep(0.1)
        holders: list[LineConn] = []
        def hold() -> None:
            holder = LineConn(server.port)
            if (holder.message() or {}).get("type") == "welcome":
                holders.append(holder)
            else:
                holder.close()

        for _ in range(cap - 1):
            hold()
        outcomes: dict[str, int] = {}
        newcomers = 0
        end = time.monotonic() + args.phase_seconds
        while time.monotonic() < end:
            if not watch.sample():
                failures.append("the server died")
                break
            source = "127.0.0.1" if newcomers % 2 == 0 else f"127.0.{1 + newcomers // 500 % 200}.{3 + newcomers // 2 % 250}"
            newcomer = LineConn(server.port, source=source, timeout=5)
            first = newcomer.message()
            kind = "welcome" if first and first.get("type") == "welcome" else code(first)
            outcomes[kind] = outcomes.get(kind, 0) + 1
            if kind == "welcome" and source == "127.0.0.1" and len(holders) < cap - 1:
                holders.append(newcomer)  # the attacker takes back every place it can
            else:
                newcomer.close()
            newcomers += 1
            if newcomers % 10 == 0 and holders:
                # One of its own drops and comes back: the attacker's own detached sessions.
                holders.pop(0).close()
                hold()
        # Then the attacker takes every place it can, attached (each newcomer first ends one of its
        # own detached sessions), until it is refused: the registry holds only attached sessions
        # and the victim's.
        for _ in range(2 * cap):
            before = len(holders)
            hold()
            if len(holders) == before:
                break
        time.sleep(0.1)
        # Whether the flood left it (admin `inspect`, from one of the attacker's own), before the
        # victim's return, whose own new session needs a place too.
        survived = "unknown"
        if holders:
            holders[-1].send("inspect")
            listing = holders[-1].reply() or {}
            if listing.get("ok"):
                names = {entry.get("session") for entry in listing.get("result", {}).get("sessions", [])}
                survived = "yes" if name in names else "no"
        back = LineConn(server.port, source="127.0.0.2")
        first = back.message()
        welcome = "welcome" if first and first.get("type") == "welcome" else code(first)
        answer = code(attach(back, token)) if welcome == "welcome" else "not tried"
        back.close()
        for holder in holders:
            holder.close()
        time.sleep(0.3)
        if not alive(server.pid):
            failures.append("the server died")
        print(f"registry: {args.phase_seconds:.0f} s, --max-sessions {cap}: {len(holders)} sessions held attached from "
              f"127.0.0.1, {newcomers} newcomers from it and from fresh addresses ("
              + ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items()))
              + f"); the victim's detached session was there after the flood: {survived}; the victim came back "
              f"from 127.0.0.2 ({welcome}) and attached it: {answer}")
        if survived == "no":
            failures.append("the flood ended the victim's detached session")
        if answer != "ok":
            failures.append(f"the victim's detached session did not attach: {welcome}, then {answer}"
                            + (" (it was there before the victim's own new connection took a place)"
                               if survived == "yes" else ""))
    finally:
        server.stop()
    return report("registry", failures, args.seed)


def fill(port: int, most: int, source: str = "127.0.0.1") -> tuple[list[LineConn], str]:
    """Connections from one address until one is refused (or `most`): those welcomed, and the refusal."""
    conns: list[LineConn] = []
    refusal = "none"
    for _ in range(most):
        try:
            conn = LineConn(port, source=source, timeout=5)
        except OSError as error:
            refusal = f"connect: {error}"
            break
        first = conn.message()
        if not first or first.get("type") != "welcome":
            refusal = code(first)
            conn.close()
            break
        conns.append(conn)
    return conns, refusal


def nofile(args: argparse.Namespace) -> int:
    """A soft descriptor limit of 1,024 (systemd's default for services): under a higher
    hard limit the server must raise its soft limit (it logs "file limit raised to its
    hard limit"); under a hard limit of 1,024 as well, it lowers --max-clients and
    scales the per-address cap with it. Bound: in both, one address is refused before
    it holds every place, and another address still gets in."""
    failures: list[str] = []
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    hard = min(hard, 65536) if hard != resource.RLIM_INFINITY else 65536
    parts = []
    for soft_hard in ((1024, hard), (1024, 1024)):
        server = Server(args.bin, log_level="info", nofile=soft_hard)
        try:
            log = server.log()

            def logged(text: str) -> dict | None:
                return next((e for e in log if text in str(e.get("message", ""))), None)

            raised = logged("file limit raised to its hard limit")
            lowered = logged("max clients lowered")
            scaled = logged("max clients per address scaled")
            total = int(find(lowered, "max-clients", 10_000))
            per_address = int(find(scaled, "max-clients-per-address", 1_000))
            most = min(per_address + 1, args.nofile_fill) if args.nofile_fill else per_address + 1
            conns, refusal = fill(server.port, most)
            other, other_refusal = fill(server.port, 1, source="127.0.0.2")
            got_in = "welcome" if other else other_refusal
            for conn in conns + other:
                conn.close()
            time.sleep(0.2)
            if not alive(server.pid):
                failures.append(f"with --nofile {soft_hard[0]}:{soft_hard[1]} the server died")
            parts.append(f"{soft_hard[0]}:{soft_hard[1]}: "
                         + (f"raised to {find(raised, 'to', '?')}" if raised else "not raised")
                         + f", max clients {total}, per address {per_address}; one address got {len(conns)} "
                         + (f"then {refusal}" if refusal != "none" else "(stopped there)")
                         + f", another address: {got_in}")
            if soft_hard[1] > 1024 and not raised:
                failures.append(f"under a hard limit of {soft_hard[1]} the server did not log raising its soft limit")
            if per_address >= total:
                failures.append(f"with --nofile {soft_hard[0]}:{soft_hard[1]} one address may take every place "
                                f"({per_address} of {total})")
            if most > per_address and len(conns) > per_address:
                failures.append(f"with --nofile {soft_hard[0]}:{soft_hard[1]} one address got {len(conns)} "
                                f"connections, past its cap of {per_address}")
            if got_in != "welcome":
                failures.append(f"with --nofile {soft_hard[0]}:{soft_hard[1]} another address got {got_in}")
        finally:
            server.stop()
    print("descriptor limit: " + "; ".join(parts))
    return report("descriptor limit", failures, args.seed)


def find(entry: dict | None, key: str, default: object) -> Any:
    """A field of a JSON log line (at its top or under metadata)."""
    if not entry:
        return default
    if key in entry:
        return entry[key]
    for nested in entry.values():
        if isinstance(nested, dict) and key in nested:
            return nested[key]
    return default


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, help="the server the streams phase attacks")
    parser.add_argument("--web-port", type=int)
    parser.add_argument("--pid", type=int)
    parser.add_argument("--seconds", type=float, default=20, help="the streams phase's length")
    parser.add_argument("--connections", type=int, default=40)
    parser.add_argument("--budget-kib", type=int, default=2048, help="RSS growth allowed per attacking connection")
    parser.add_argument("--p99-ms", type=float, default=5.0)
    parser.add_argument("--storm-p99-ms", type=float, default=None,
                        help="the probe's p99 bound during the attach storm (default: --p99-ms)")
    parser.add_argument("--rate-mb", type=float, default=50.0, help="the attack's total send rate, MB/s")
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--nice", type=int, default=0, help="the generator's niceness (the probe's stays 0)")
    parser.add_argument("--kinds", default=",".join(KINDS), help="which attacks, comma-separated")
    more = parser.add_argument_group("the other phases (each on a server of its own, started from --bin)")
    more.add_argument("--phases", default="all", help=f"comma-separated, of {','.join(PHASES)}; all by default")
    more.add_argument("--bin", help="the viewline-server binary; without it only the streams phase runs")
    more.add_argument("--phase-seconds", type=float, default=2.0, help="each other phase's attack, in seconds")
    more.add_argument("--fanout-connections", type=int, default=96, help="readers that never read")
    more.add_argument("--fanout-batch", type=int, default=8, help="searches a driver keeps in flight")
    more.add_argument("--output-per-address-mib", type=int, default=64,
                      help="the server's --max-output-bytes-per-address, MiB (its default)")
    more.add_argument("--allowance-kib", type=int, default=64,
                      help="fanout: RSS allowed per connection besides the per-address output budget")
    more.add_argument("--session-cap", type=int, default=32, help="the server's --max-connections-per-session")
    more.add_argument("--pipeline-connections", type=int, default=40,
                      help="connections that pipeline 1,000 requests on the operations listener (2,000: a tenth as many on the web one)")
    more.add_argument("--pipeline-budget-kib", type=int, default=1024, help="RSS allowed per HTTP connection")
    more.add_argument("--attach-rate", type=int, default=100, help="the server's --max-attaches-per-second")
    more.add_argument("--registry-sessions", type=int, default=50, help="the registry phase's --max-sessions")
    more.add_argument("--amplification-lines", type=int, default=50, help="lines sent per amplification row")
    more.add_argument("--line-cpu-ms", type=float, default=20.0, help="the most server CPU one amplifying line may cost, ms")
    more.add_argument("--postgres", help="PostgreSQL for the dead-tokens phase (default: $VIEWLINE_TEST_POSTGRES)")
    more.add_argument("--dead-tokens", type=int, default=200, help="quit sessions whose tokens the dead-tokens phase replays")
    more.add_argument("--nofile-fill", type=int, default=0,
                      help="connections at most one address opens in the descriptor phase (0: its cap and one more)")
    args = parser.parse_args()
    phases = PHASES if args.phases == "all" else [p.strip() for p in args.phases.split(",") if p.strip()]
    unknown = [p for p in phases if p not in PHASES]
    if unknown:
        parser.error(f"unknown phases {', '.join(unknown)} (of {', '.join(PHASES)})")
    if "streams" in phases and (args.port is None or args.pid is None):
        parser.error("the streams phase needs --port and --pid")
    # The phases open many connections (fanout, descriptor limit): as many as the hard limit allows.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    global PROBER
    if ("attach-storm" in phases or "dead-tokens" in phases) and args.bin:
        PROBER = Prober()
    failures = 0
    if "streams" in phases:
        failures += streams(args)
    others = {"fanout": fanout, "pipelining": pipelining, "attach-storm": attach_storm, "registry": registry,
              "nofile": nofile, "dead-tokens": dead_tokens, "amplification": amplification}
    for name in [p for p in phases if p != "streams"]:
        if not args.bin:
            print(f"{name}: skipped (no --bin to start its server from)")
            continue
        try:
            failures += others[name](args)
        except (OSError, RuntimeError, ValueError, KeyError, TypeError) as error:
            print(f"FAIL: {name}: {type(error).__name__}: {error} (seed {args.seed})")
            failures += 1
    if PROBER:
        PROBER.stop()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

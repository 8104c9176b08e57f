"""The streams phase, the original one: many connections from one address (Attacker,
one per connection, of the KINDS below) send random framings over TCP and WebSocket,
cut at odd offsets, against the server at --port/--web-port/--pid, while a probe pings.
Bounds: the server lives, its RSS grows by at most --budget-kib per attacking
connection, and the probe's p99 stays within --p99-ms."""
from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import selectors
import socket
import statistics
import time

from .prober import probe
from .server import alive, rss_bytes
from .wire import ws_frame, ws_upgrade


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

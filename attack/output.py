"""The phases about what the server sends: fanout (output fan-out to readers that never
read, held to the per-address output budget) and amplification (what one input line
can make the server send and spend, held to PROTOCOL §8's table). Each starts a
server of its own from --bin."""
from __future__ import annotations

import argparse
import json
import selectors
import time

from .server import Server, Watch, alive, cpu_seconds, metrics, report
from .wire import LineConn, Readers, attach, code


QUERIES = ["pizza", "thai food", "mission", "restaurant", "sushi", "burger", "noodles", "st"]


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

"""The phases about attaches, each with a probe pinging: attach-storm (one connection
attaches again and again to a full session: held to --attach-rate) and dead-tokens
(the tokens of quit sessions replayed at a cluster node on PostgreSQL: held to the
free failures and the lookups in flight). Each starts a server of its own from --bin."""
from __future__ import annotations

import argparse
import json
import os
import selectors
import statistics
import subprocess
import time

from . import prober
from .prober import p99
from .server import Server, Watch, alive, cpu_seconds, metrics, report
from .wire import LineConn, attach, code


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
        probes = prober.PROBER
        assert probes is not None
        probes.start(server.port, min(1.0, args.phase_seconds))
        reference = probes.latencies(1.0)
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
        probes.start(server.port, args.phase_seconds)
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
        latencies = probes.latencies(args.phase_seconds)
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
        probes = prober.PROBER
        assert probes is not None
        probes.start(server.port, args.phase_seconds)
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
        latencies = probes.latencies(args.phase_seconds)
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

"""The pipelining phase: tiny GETs pipelined in one write and never read, on the web and
operations listeners of a server of its own; whether the server closed them is read
from the kernel's table of TCP sockets (server_closed)."""
from __future__ import annotations

import argparse
import re
import selectors
import socket
import time

from .server import Server, Watch, alive, report


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

"""The phases about places: registry (a victim's detached session outlives a flood of
newcomers that fills --max-sessions) and nofile (under a soft descriptor limit of
1,024 the server raises it, or lowers its caps, and one address is refused before it
holds every place). Each starts a server of its own from --bin."""
from __future__ import annotations

import argparse
import resource
import time
from typing import Any

from .server import Server, Watch, alive, report
from .wire import LineConn, attach, code


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

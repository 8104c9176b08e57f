"""The checks at the end of a run, against the database and the run's record: every
acknowledged draft saved or pending, every acknowledged quit staying quit, no node
serving a session another node claimed, step-downs no fault explains, each fault's
recovery time, and the liveness streaks (a session refused with no fault near it).
Violations are recorded in the run as they are found; the figures go to the report."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from .client import Client
from .clocks import is_clock_step
from .connection import Connection, Dropped
from .constants import LIVENESS_BOUND, RECOVERY_WINDOW, STEP_DOWN_WINDOW
from .database import psql
from .nodes import Node
from .run import Run
from .servelog import ServeLog


@dataclass
class Findings:
    """What the checks found, for the report."""
    acknowledged: int
    checked: int
    lost: int
    revived: int
    history_checks: int
    served: List[str]
    near: int
    alone: List[Tuple[float, str]]
    recovery: Dict[str, List[float]]
    unrelated: List[float]
    over: List[float]
    streaks: List[Tuple[float, float, int, str]]


def check(args, run: Run, nodes: List[Node], clients: List[Client], serve_log: ServeLog) -> Findings:

    # Acknowledged drafts: saved, or the user's pending draft.
    saved: Dict[str, set] = {}
    for row in psql(args, "SELECT user_name || '|' || text FROM viewline_saved_drafts"):
        user, text = row.split("|", 1)
        saved.setdefault(user, set()).add(text)
    pending: Dict[str, str] = {}
    for row in psql(args, "SELECT user_name || '|' || text FROM viewline_drafts"):
        user, text = row.split("|", 1)
        pending[user] = text
    acknowledged = checked = lost = 0
    for client in clients:
        for user, texts in client.acknowledged.items():
            acknowledged += len(texts)
            for text in texts[-80:]:
                checked += 1
                if text not in saved.get(user, set()) and pending.get(user) != text:
                    lost += 1
                    run.violation(f"acknowledged draft {text!r} of {user} is neither saved nor pending")

    # Every acknowledged quit stays quit: no record is left for any node to restore it
    # from, and its token attaches nowhere (a sample is tried on every node; all the
    # probes come from one address, which the server throttles after a few misses).
    revived = 0
    lookups = sorted({token[:16] for token, _ in run.quit_tokens})
    if lookups:
        listed = ",".join("'" + lookup + "'" for lookup in lookups if lookup.isalnum())
        for lookup in psql(args, f"SELECT lookup FROM viewline_sessions WHERE lookup IN ({listed}) AND NOT ended"):
            revived += 1
            run.violation(f"the record of a session whose quit was acknowledged is back ({lookup})")
    probe = Client(-1, nodes, run)   # records nothing of its own: it only attaches
    for token, _ in run.quit_tokens[:3]:
        for node in nodes:
            try:
                connection = Connection(node.address, probe)
                reply = connection.command(f"attach {token}")
                connection.close()
            except (Dropped, OSError):
                continue
            if reply["ok"] or reply["error"]["code"] == "moved":
                revived += 1
                run.violation(f"a session whose quit was acknowledged came back on {node.incarnations[-1].label}")
    history_checks = sum(client.history_checks for client in clients)

    if run.stalls:
        run.violation(f"the client load made no progress for 20 s or more, {run.stalls} time(s)")
    pauses = [(start, end, match.group(1)) for start, end, what in run.faults
              for match in [re.match(r"SIGSTOP (\S+) for", what)] if match]
    served, near = serve_log.violations(pauses)
    # Step-downs no fault explains (a batch that hung on a loaded machine, or a bug).
    # A clock step explains none: no clock but a node's monotonic one times its records.
    alone = [(t, label) for t, label in serve_log.step_downs
             if not any(start <= t and end >= t - STEP_DOWN_WINDOW and not is_clock_step(what)
                        for start, end, what in run.faults)]
    for text in served:
        run.violation(text)

    # Recovery after each fault: from the fault's start to each affected client's
    # first success after it failed (a failure from the fault's start to 10 s after
    # its end counts as the fault's).
    recovery: Dict[str, List[float]] = {}
    for client, since, at in run.recoveries:
        fault = max((f for f in run.faults if f[0] <= since + 0.5), default=None, key=lambda f: f[0])
        if fault and since <= fault[1] + 10:
            kind = fault[2].split()[0]
            recovery.setdefault(kind, []).append(at - fault[0])
    for values in recovery.values():
        values.sort()


    # Liveness: how long a session was refused (`unavailable`) by a node with no fault
    # near it — none on that node or on the node that last served it, none
    # cluster-wide, no lock on that session's own
    # record — between RECOVERY_WINDOW before the first refusal and the next success
    # (a node whose lease lapsed pauses its renewals one node timeout, then renews
    # and checks its sessions: up to two node timeouts after its fault ended).
    # A fault on the node that last served the session counts too: the session's
    # owner is that node, and another node may claim it only once its lease expired.
    # A streak that went on at other nodes (the client tried elsewhere) counts a fault
    # on any node that refused it as near: it is that node's refusal the client saw.
    def fault_near(start: float, end: float, ports: frozenset, lookup: str, home: Optional[int]) -> bool:
        return any(f_start <= end and f_end >= start - RECOVERY_WINDOW
                   and (f_port is None and f_lookup is None or f_port in ports or f_port == home or f_lookup == lookup)
                   for f_start, f_end, f_port, f_lookup in run.fault_scope)
    streaks = [(start, end, port, lookup) for start, end, port, lookup, home, ports in run.refusals
               if not fault_near(start, end, ports, lookup, home)]
    unrelated = sorted(end - start for start, end, _, _ in streaks)
    over = [v for v in unrelated if v > LIVENESS_BOUND]
    for start, end, port, lookup in streaks:
        if end - start > LIVENESS_BOUND and args.strict_liveness:
            run.violation(f"session {lookup} was refused by :{port} from {start - run.started:.1f} s for {end - start:.1f} s"
                          f" with no fault near it (bound {LIVENESS_BOUND:.1f} s)")
    return Findings(acknowledged, checked, lost, revived, history_checks, served, near, alone, recovery, unrelated,
                    over, streaks)

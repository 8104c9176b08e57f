"""The markdown report: what was injected and acknowledged, what each check found,
recovery per fault kind, liveness, RSS at the start and the end, the faults in order
and every violation (with each client's last commands written beside the node logs
when there is one). Printed and written to --report; the exit status is 1 on any
violation."""
from __future__ import annotations

import json
import os
from typing import Dict, List, Optional

from .checks import Findings
from .client import Client
from .constants import FAULT_KINDS, JOURNAL_LENGTH, LIVENESS_BOUND, LONG_RECOVERY, NODE_TIMEOUT, STEP_DOWN_WINDOW, TOLERANCE
from .nodes import Node
from .run import Run
from .servelog import ServeLog


def write(args, run: Run, nodes: List[Node], clients: List[Client], serve_log: ServeLog,
          rss_end: Dict[str, Optional[int]], findings: Findings) -> int:
    """Writes and prints the report; returns the exit status."""
    started = run.started
    acknowledged, checked, lost, revived = findings.acknowledged, findings.checked, findings.lost, findings.revived
    history_checks, served, near, alone = findings.history_checks, findings.served, findings.near, findings.alone
    recovery, unrelated, over, streaks = findings.recovery, findings.unrelated, findings.over, findings.streaks

    def pct(values, p):
        return values[min(len(values) - 1, int(len(values) * p))] if values else 0.0

    def mib(value):
        return f"{value / 1048576:.1f} MiB" if value else "?"

    names = {"silenced": "connections to PostgreSQL silenced", "row": "one session's record row locked elsewhere",
             "renewals": "renewals slowed within the node timeout", "4,000": "records over 256 KiB, then the node killed",
             "SIGKILL": "node killed", "SIGSTOP": "node paused", "cut": "node cut off", "slowed": "link slowed past the lease",
             "held": "draft writes held, a link slowed past the lease",
             "records": "record writes held, then the node killed",
             "restarted": "PostgreSQL restarted", "db": "the database's clock stepped",
             "node": "a node's wall clock stepped", "rolling": "a rolling upgrade",
             "failover:": "PostgreSQL failed over (the primary killed, the standby promoted)"}
    recovery_lines = [
        f"  - {names.get(kind, kind)}: p50 {pct(v, 0.5):.2f}, p99 {pct(v, 0.99):.2f}, max {v[-1]:.2f} ({len(v)} clients)"
        for kind, v in sorted(recovery.items())
    ]

    lines = [
        f"# Chaos run: {args.seconds:.0f} s, seed {args.seed}" + ("" if args.faults == FAULT_KINDS else f", faults: {', '.join(args.faults)}"),
        "",
        f"3 nodes (node timeout {NODE_TIMEOUT:.0f} s; node2 runs {args.skew_minutes} min ahead under faketime), "
        f"{args.clients} clients, one throwaway PostgreSQL; every node's wall clock and the database's"
        f" under libfaketime, stepped at run time by the clock faults.",
        "",
        f"- faults injected: {len(run.faults)} ({', '.join(f'{k} {sum(1 for f in run.faults if f[2].startswith(p))}' for k, p in (('kill', 'SIGKILL'), ('pause', 'SIGSTOP'), ('partition', 'cut'), ('slow link', 'slowed'), ('held writes', 'held draft'), ('held records', 'records'), ('postgres restart', 'restarted'), ('clean restart', 'SIGTERM'), ('silenced', 'silenced'), ('row lock', 'row of'), ('slowed renewals', 'renewals'), ('big records', '4,000'), ('db clock step', 'db clock'), ('node clock step', 'node clock'), ('rolling upgrade', 'rolling upgrade'), ('failover', 'failover:')))})",
        f"- commands acknowledged: {run.successes}; `unavailable` replies: {run.unavailable}; other errors: {json.dumps(run.errors, sort_keys=True)}",
        f"- attach answers other than ok (reattaching during faults): {json.dumps(run.attach_errors, sort_keys=True)}",
        f"- commands acknowledged per minute: {', '.join(str(run.per_minute.get(m, 0)) for m in range(int(args.seconds // 60) + 1))}",
        f"- acknowledged drafts: {acknowledged} (each user's newest 80 checked against the database: {checked}), lost: {lost}",
        f"- commands served after another node claimed the session: {len(served)} (within {TOLERANCE} s of a claim, read order only: {near})",
        f"- sessions lost: {run.lost_sessions}",
        f"- rolling upgrades to the next release (a migrated search record): {run.upgrades}, nodes replaced: {run.upgraded_nodes};"
        f" sessions lost: {run.lost_sessions} (refused as unreadable: {run.unreadable_sessions}), views reset: {run.views_reset},"
        f" drafts lost: {lost}",
        f"- second devices attached with the old owner's last-rev after a failover (snapshot expected): {run.second_devices}",
        f"- readers (a second device per client that stays on its node): {run.reader_reads} state reads served;"
        f" refused: {json.dumps(run.reader_refusals, sort_keys=True)}; connections ended: {json.dumps(run.reader_ends, sort_keys=True)}",
        f"- state reads checked against each session's history of acknowledged searches: {history_checks}",
        f"- searches sent back to back just before and during SIGTERMs' drains: {run.burst_searches}",
        f"- nodes that stepped down (records two node timeouts behind; what they acknowledged in the lease margin"
        f" before may be lost, as after a kill): {len(serve_log.step_downs)}, with no fault in the"
        f" {STEP_DOWN_WINDOW:.1f} s before: {len(alone)}"
        + (f" ({', '.join(f'{t - run.started:.1f} s {label}' for t, label in alone)})" if alone else ""),
        f"- acknowledged quits: {len(run.quit_tokens)}, come back on any node: {revived}",
        f"- idle sessions handed over by SIGTERM, then the database's clock +2 d and back: {run.idle_opened} opened,"
        f" {run.idle_checked} attached again, lost (or not shown as left): {run.idle_lost}",
        f"- liveness: refusals of a session on a node with no fault near it: {len(unrelated)}, longest"
        f" {max(unrelated, default=0.0):.2f} s, over the bound of one node timeout ({LIVENESS_BOUND:.1f} s): {len(over)}"
        + ("" if args.strict_liveness else " (violations only with VIEWLINE_CHAOS_STRICT_LIVENESS=1)")
        + (": " + ", ".join(f"{lookup} on :{port} from {start - run.started:.1f} s for {end - start:.1f} s"
                            for start, end, port, lookup in streaks if end - start > LIVENESS_BOUND)[:2000] if over else "")
        + f"; all refusal streaks: {len(run.refusals)}",
        f"- end-others: {json.dumps(run.end_others, sort_keys=True)} (answered `unavailable`: the old token must go on working)",
        f"- largest session record during a big-records fault: {run.big_records} bytes",
        f"- node starts that failed (and were retried, as a supervisor would): {sum(n.failed_starts for n in nodes)}",
        "- seconds from a fault's start until its clients work again (the fault's own length included):",
    ] + recovery_lines + [
        "- RSS: " + "; ".join(f"node{n.index}: {mib(n.incarnations[0].rss_start)} at start, {mib(rss_end[n.incarnations[-1].label])} at end ({len(n.incarnations)} start(s))" for n in nodes),
        f"- violations: {len(run.violations)}",
        "",
        "## Faults",
        "",
    ] + [f"- {t0 - started:.1f} s: {what}" for t0, _, what in run.faults]
    if run.long_recoveries:
        lines += ["", f"## Clients that failed for {LONG_RECOVERY:.0f} s or more (their last failures)", ""]
        for client, since, at, trail in sorted(run.long_recoveries, key=lambda r: r[1] - r[2])[:10]:
            lines.append(f"- client {client}: {since - run.started:.1f} s → {at - run.started:.1f} s ({at - since:.1f} s)")
            lines += [f"  - {entry}" for entry in trail]
    if run.violations:
        lines += ["", "## Violations", ""] + [f"- {v}" for v in run.violations[:200]]
        # Each client's last commands, to read against the node logs (same clock: the
        # first column of every node log line).
        for client in clients:
            with open(os.path.join(args.dir, f"client{client.index}.journal"), "w") as f:
                for t, port, line, answer in list(client.journal):
                    f.write(f"{t:.3f} {t - run.started:.1f} s :{port} {line!r} → {answer}\n")
        lines += ["", f"Each client's last {JOURNAL_LENGTH} commands and their answers: {args.dir}/client*.journal"]
    report = "\n".join(lines) + "\n"
    with open(args.report, "w") as f:
        f.write(report)
    print(report)
    return 1 if run.violations else 0

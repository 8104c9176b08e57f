"""The run's shared record, written by the clients, the readers and the driver under
one lock: violations as they are found, acknowledged commands, refusals, faults with
where each is near, quits, recoveries; and the question every check asks of it:
did a fault that may lose a node's last moments begin in a given window (a SIGTERM
or a clock step never may)."""
from __future__ import annotations

import random
import sys
import threading
from typing import TYPE_CHECKING, Dict, FrozenSet, List, Optional, Tuple

from .clocks import StepPlan, is_clock_step
from .constants import LONG_RECOVERY, now

if TYPE_CHECKING:
    from .servelog import ServeLog


class Run:
    def __init__(self, seed: int):
        self.seed = seed
        self.done = threading.Event()
        self.lock = threading.Lock()
        self.violations: List[str] = []
        self.successes = 0
        self.started = now()
        self.serve_log: Optional["ServeLog"] = None   # set once the nodes' logs are read
        self.per_minute: Dict[int, int] = {}
        self.unavailable = 0
        self.lost_sessions = 0
        self.second_devices = 0
        self.reader_reads = 0
        self.reader_refusals: Dict[str, int] = {}   # error code → state reads a reader was refused
        self.reader_ends: Dict[str, int] = {}       # why a reader's connection ended → how often
        self.stalls = 0
        self.attach_errors: Dict[str, int] = {}
        self.errors: Dict[str, int] = {}
        self.users: set = set()
        self.faults: List[Tuple[float, float, str]] = []   # (start, end, description)
        # Where each fault is near, for the liveness check: (start, end, node port or
        # None for every node, a session's lookup or None).
        self.fault_scope: List[Tuple[float, float, Optional[int], Optional[str]]] = []
        # Each time a client's session was refused (`unavailable`) until it worked
        # again: (first refusal, next success, the refusing node's port, the lookup).
        self.refusals: List[Tuple[float, float, int, str, Optional[int], FrozenSet[int]]] = []
        self.end_others = {"ok": 0, "unavailable": 0, "in doubt": 0}
        self.big_records = 0   # largest session record seen during a big-records fault (bytes)
        self.current: Optional[Tuple[float, float, str]] = None   # the fault under way
        self.quit_tokens: List[Tuple[str, float]] = []
        # "quit, then SIGKILL": the next acknowledged quit names its node, which is killed.
        self.quit_kill_wanted = False
        self.quit_kill_port = 0
        self.quit_kill_ready = threading.Event()
        # "SIGTERM under a high command rate": until `burst_until`, every client on the
        # node at `burst_port` sends searches back to back (each a query of its own).
        self.burst_port = 0
        self.burst_until = 0.0
        self.burst_searches = 0
        # The clock faults' steps, in a shuffled cycle of each kind's variants.
        self.clock_plan = StepPlan(random.Random(seed * 7 + 1))
        # Idle sessions handed over by a SIGTERM before a +2-day step of the database's
        # clock: opened, attached again after the step, lost (or not attached, or
        # showing another search).
        self.idle_opened = 0
        self.idle_checked = 0
        self.idle_lost = 0
        # Rolling upgrades: how many, the nodes they replaced, and what a deploy must
        # never do (a session refused as unreadable; a view shown at its initial state
        # after a change was acknowledged).
        self.upgrades = 0
        self.upgraded_nodes = 0
        self.unreadable_sessions = 0
        self.views_reset = 0
        self.recoveries: List[Tuple[int, float, float]] = []
        self.long_recoveries: List[Tuple[int, float, float, List[str]]] = []

    def violation(self, text: str) -> None:
        with self.lock:
            self.violations.append(f"{now() - self.started:.1f} s: {text}")
        print(f"VIOLATION {text}", file=sys.stderr, flush=True)

    def lossy_fault_began(self, after: float, before: Optional[float] = None) -> bool:
        """Whether a fault that may lose a node's last moments (a kill, a pause, a cut, a
        slow link, a database restart; never a SIGTERM, never a step of the database's
        clock or of a node's wall clock: PROTOCOL §2.2 claims one owner and no loss
        under any such step) began after `after` (and before `before`), or is one of
        held records that was still going on at `after`.

        Held records lose more than the moments before their kill: a node with nothing
        waiting to be written goes on acknowledging while a batch hangs, and refuses
        only once its oldest unwritten change is older than the node timeout less the
        margin (PROTOCOL §2.2). A session that began (or a change made) anywhere in the
        hold, on the node that is then killed before its records go on, may be lost."""
        with self.lock:
            faults = self.faults + ([(self.current[0], now(), self.current[2])] if self.current else [])
        return any(not is_clean_shutdown(what) and not is_clock_step(what)
                   and ((start >= after and (before is None or start <= before))
                        or (held_records(what) and start <= after and end >= after))
                   for start, end, what in faults)

    def recovered(self, client: int, since: float, at: float, trail: List[str]) -> None:
        with self.lock:
            self.recoveries.append((client, since, at))
            if at - since >= LONG_RECOVERY:
                self.long_recoveries.append((client, since, at, list(trail)))


def is_clean_shutdown(what: str) -> bool:
    """Whether a fault (its kind while it goes on, its description once over) loses
    nothing acknowledged by design — a SIGTERM, a rolling upgrade's SIGTERMs (which
    hand every acknowledged change over), or a failover of a synchronously replicated
    PostgreSQL (every acknowledged commit is on the standby promoted): it excuses no
    loss."""
    return what.startswith(("SIGTERM", "upgrade", "rolling upgrade", "failover"))


def held_records(what: str) -> bool:
    """Whether a fault (its kind while it goes on, its description once over) is the
    one of held records."""
    return what == "heldrecords" or what.startswith("records held")

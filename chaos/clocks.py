"""The clocks the run steps at run time: PostgreSQL's and each node's wall clock run
under libfaketime, each reading its offset from a file of its own (FAKETIME_TIMESTAMP_FILE;
monotonic clocks stay true), which this module rewrites: a node at every call
(FAKETIME_NO_CACHE), PostgreSQL's backends once a second (Tests/support/postgres says
why), so a step of the database's clock reaches its backends within a second. The two clock faults — the database's clock stepped by ±10–25 s,
−1 h or +2 days, a node's wall clock by seconds or days, forward or back, each held
for two to three node timeouts and then stepped back — and the order their steps
come in. PROTOCOL §2.2: no wall clock decides who owns a session, so a step may lose
nothing (the checks excuse no loss by it)."""
from __future__ import annotations

import functools
import os
import random
import subprocess
import time
from typing import TYPE_CHECKING, Dict, List

from .constants import NODE_TIMEOUT, now

if TYPE_CHECKING:
    from .nodes import Node

DAY = 86400.0


@functools.lru_cache(maxsize=None)
def libfaketime() -> str:
    """libfaketime's multithreaded library, from Debian's faketime package."""
    listing = subprocess.run(["dpkg", "-L", "libfaketime"], capture_output=True, text=True).stdout.split()
    for path in listing:
        if path.endswith("libfaketimeMT.so.1"):
            return path
    raise SystemExit("libfaketime is missing: apt-get install faketime")


class ClockFile:
    """One process's clock: `base` seconds off the real one (a node started ahead),
    plus the step under way."""

    def __init__(self, path: str, base: float = 0.0):
        self.path = path
        self.base = base
        self.step = 0.0
        self.set(0.0)

    def set(self, step: float) -> None:
        """Steps the clock to `base + step` at once: written beside and renamed over,
        so a reader sees one whole offset (an empty file would be no offset at all)."""
        self.step = step
        scratch = self.path + ".new"
        with open(scratch, "w") as f:
            f.write(f"{self.base + step:+.0f}s\n")
        os.chmod(scratch, 0o644)   # PostgreSQL's server reads it as the postgres user
        os.replace(scratch, self.path)

    def environment(self) -> Dict[str, str]:
        """What a process started under this clock needs in its environment."""
        return {"LD_PRELOAD": libfaketime(), "FAKETIME_TIMESTAMP_FILE": self.path, "FAKETIME_NO_CACHE": "1",
                "FAKETIME_DONT_FAKE_MONOTONIC": "1"}


def spoken(seconds: float) -> str:
    """A step as the report says it: +25 s, −1 h, +2 d."""
    sign = "+" if seconds >= 0 else "−"
    size = abs(seconds)
    if size >= DAY:
        return f"{sign}{size / DAY:g} d"
    if size >= 3600:
        return f"{sign}{size / 3600:g} h"
    return f"{sign}{size:.0f} s"


class StepPlan:
    """Which step each clock fault makes: the variants of each kind in a shuffled
    cycle, so a run with a few of them sees each variant. The database's first step is
    +2 days (the step housekeeping must not take for two days of idleness)."""

    DATABASE = ["+seconds", "-seconds", "-hour", "+days"]
    NODE = ["+seconds", "-seconds", "+days", "-days"]

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.queues: Dict[str, List[str]] = {"database": ["+days"], "node": []}

    def next(self, which: str) -> float:
        queue = self.queues[which]
        if not queue:
            queue.extend(self.DATABASE if which == "database" else self.NODE)
            self.rng.shuffle(queue)
        variant = queue.pop(0)
        sign = -1.0 if variant.startswith("-") else 1.0
        if variant.endswith("seconds"):
            return sign * round(self.rng.uniform(10.0, 25.0))
        if variant.endswith("hour"):
            return sign * 3600.0
        return sign * (2 * DAY if which == "database" else self.rng.choice([1, 2, 3]) * DAY)


def hold(rng: random.Random) -> float:
    """How long a step is held: two to three node timeouts (leases renewed, records
    written, housekeeping run many times over under the stepped clock)."""
    return NODE_TIMEOUT * rng.uniform(2.0, 3.0)


def step_database(clock: ClockFile, step: float, rng: random.Random) -> float:
    """Steps the database's clock by `step`, holds it, steps it back; returns how long
    it was held."""
    began = now()
    clock.set(step)
    time.sleep(hold(rng))
    clock.set(0.0)
    return now() - began


def step_node(node: "Node", step: float, rng: random.Random) -> str:
    """Steps one node's wall clock by `step` (on top of any skew it runs with), holds
    it, steps it back; returns the fault's description."""
    label = node.incarnations[-1].label
    began = now()
    node.clock.set(step)
    time.sleep(hold(rng))
    node.clock.set(0.0)
    return f"node clock of {label} stepped {spoken(step)} for {now() - began:.1f} s, then back"


def is_clock_step(what: str) -> bool:
    """Whether a fault (its kind while it goes on, its description once over) is a
    clock step: one that may lose nothing, and explains no step-down."""
    return what in ("db-clock-step", "node-clock-step") or what.startswith(("db clock", "node clock"))

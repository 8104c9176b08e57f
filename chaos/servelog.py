"""The nodes' debug logs, read as they are written: each line time-stamped here and
kept beside the node logs, which node served (`command record=…`) or claimed
(`claimed record=…`) which session record, and the nodes that stepped down on their
own. From these, the one-owner check: no node served a session after another node
claimed it."""
from __future__ import annotations

import re
import threading
from typing import Dict, List, Optional, Tuple

from .constants import PAUSED_LINES, STEP_DOWN_WINDOW, TOLERANCE, now


class ServeLog:
    """Which node served or claimed which session record, time-stamped as read."""
    PATTERN = re.compile(r"record=(\w+)")
    REV = re.compile(r"\brev=(\d+)")

    # A node stepping down on its own: its records fell two node timeouts behind with
    # no fault injected (a batch that hung on a loaded machine).
    STEP_DOWN = "session records cannot be written; letting this node's lease run out"

    def __init__(self):
        self.lock = threading.Lock()
        self.entries: List[Tuple[float, str, str, str, int]] = []   # (time, record, label, kind, claim's epoch)
        self.step_downs: List[Tuple[float, str]] = []           # (time, label)

    def read(self, stream, label: str, log) -> None:
        for raw in iter(stream.readline, b""):
            t = now()
            line = raw.decode(errors="replace")
            log.write(f"{t:.3f} {line}")
            if self.STEP_DOWN in line:
                with self.lock:
                    self.step_downs.append((t, label))
            if "record=" not in line:
                continue
            match = self.PATTERN.search(line)
            if not match:
                continue
            kind = "claim" if line.rstrip().endswith(" claimed") else ("serve" if line.rstrip().endswith(" command") else None)
            if kind:
                # A claim raises the record's rev by 2^32 (SessionRecord.maximumLag): its
                # epoch is the database's order of claims, whenever each was logged.
                rev = self.REV.search(line) if kind == "claim" else None
                epoch = int(rev.group(1)) >> 32 if rev else -1
                with self.lock:
                    self.entries.append((t, match.group(1), label, kind, epoch))
        log.close()

    def records_stopped(self, after: float) -> bool:
        """Whether a node that stepped down on its own stopped writing records after
        `after`: two node timeouts (and a lease check) before its step-down. It
        acknowledged for at most a node timeout less the margin after that, and what
        it acknowledged then may be lost with it (PROTOCOL §2.2); what it acknowledged
        later is not excused."""
        with self.lock:
            return any(t - STEP_DOWN_WINDOW >= after for t, _ in self.step_downs)

    def violations(self, pauses: List[Tuple[float, float, str]] = ()) -> Tuple[List[str], int]:
        """Commands served by a node after another node claimed the session.

        `pauses` are the SIGSTOPs (start, end, label): a claim a node logged just
        before it was stopped can reach this log only once it runs again, after
        another node may have claimed the session from it — so a claim read within
        PAUSED_LINES of a pause's end is dated to the pause's start. Commands are not
        moved: a node that serves after waking up is still seen doing so."""
        by_record: Dict[str, List[Tuple[float, str, str, int]]] = {}
        with self.lock:
            for t, record, label, kind, epoch in self.entries:
                if kind == "claim":
                    t = next((start for start, end, paused in pauses
                              if paused == label and end <= t <= end + PAUSED_LINES), t)
                by_record.setdefault(record, []).append((t, label, kind, epoch))
        found: List[str] = []
        near = 0
        for record, entries in by_record.items():
            entries.sort()
            owner: Optional[str] = None
            claimed_at = 0.0
            owner_epoch = -1
            for t, label, kind, epoch in entries:
                if kind == "claim":
                    # A claim logged after one the database made later (a higher epoch)
                    # was already superseded when it was read: a node stalled between
                    # its claim and its log line (held records, load). It moves nothing;
                    # that node serving the session afterwards is still caught.
                    if epoch >= 0 and epoch < owner_epoch:
                        continue
                    owner, claimed_at, owner_epoch = label, t, epoch
                elif owner is None:
                    owner = label
                elif label != owner:
                    if t - claimed_at > TOLERANCE:
                        found.append(f"{label} served record {record[:6]}… {t - claimed_at:.3f} s after {owner} claimed it")
                    else:
                        near += 1
        return found, near

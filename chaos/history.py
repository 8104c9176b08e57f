"""What a client checks as it goes, against a model of its session: each state read
shows the last acknowledged search (or one whose reply was lost), unless a fault
that may lose a node's last moments excuses it; each attach delivers a replay or a
snapshot, never both, above the last rev seen; and after a failover a second device
attaching with the old owner's last-rev gets a snapshot and the same history. Mixed
into `Client`, whose state (searches, revs, the run) these read."""
from __future__ import annotations

from typing import Tuple

from .connection import Connection, Dropped
from .constants import NODE_TIMEOUT, now


class HistoryChecks:
    """The checks a `Client` makes on every state read and attach."""

    def check_attach(self, connection: Connection, result: dict) -> None:
        """Replay or snapshot, never both; replayed events come after the last rev."""
        replayed, snapshot, rev = result.get("replayed", 0), result.get("snapshot", False), result.get("rev", 0)
        if replayed and snapshot:
            self.violation("an attach both replayed and sent a snapshot")
        # Replayed or snapshot events alike come after the last rev this client saw
        # (a restored session whose record trails it continues after it).
        if rev < self.rev:
            self.violation(f"attach answered rev {rev} below last-rev {self.rev}")
        connection.last_rev = self.rev
        if not snapshot and self.previous is not None:
            connection.views = dict(self.previous.views)
            connection.alert = self.previous.alert
        self.previous = None

    def check_history(self, reply: dict, via: Connection) -> None:
        """A state read against the model: the search query shown is one this session
        acknowledged (or sent and lost the reply of); and unless a fault that loses
        the last moments (a kill, a pause, a cut, a database restart) began after the
        last acknowledgement, it is the last one acknowledged: a clean shutdown
        (SIGTERM) hands every acknowledged change over."""
        if not reply["ok"] or not self.searches:
            return
        shown = reply["result"]["views"]["search"]["query"]
        last, sent_at, acknowledged_by = self.searches[-1]
        self.history_checks += 1
        if shown == last or shown in self.in_doubt:
            return
        # A fault that began up to a node timeout before the search was sent, or after:
        # a node whose records are further behind than that acknowledges nothing, and
        # the node may have acknowledged it any time until the reply came.
        lossy = (self.run_state.lossy_fault_began(sent_at - NODE_TIMEOUT - 0.5)
                 or (self.run_state.serve_log is not None
                     and self.run_state.serve_log.records_stopped(sent_at - NODE_TIMEOUT - 0.5)))
        if lossy and (shown in {q for q, _, _ in self.searches} or shown == ""):
            return
        if shown == "":
            with self.run_state.lock:
                self.run_state.views_reset += 1
        self.violation(f"state shows search {shown!r} after {last!r} was acknowledged"
                       f" (sent {now() - sent_at:.1f} s ago) with no fault since that may lose it"
                       f" (session {(self.token or '?')[:16]}, acknowledged on port {acknowledged_by}, read on port {via.address[1]})")

    def second_device(self, address: Tuple[str, int], prior: int) -> None:
        """After a resume answered with a snapshot (a failover: the session restored
        on another node, its revs in a new space), a second device that saw the same
        revs on the old node attaches with the same last-rev: it must get a snapshot
        numbered above it (a replay would be of this owner's events, read as if they
        followed the old owner's), and the session's history as the first device
        sees it."""
        self.run_state.second_devices += 1
        try:
            device = Connection(address, self)
            try:
                reply = device.command(f"attach {self.token} {prior}")
                if not reply["ok"]:
                    return      # moved on again meanwhile: nothing to compare
                result = reply["result"]
                if not result.get("snapshot") or result.get("replayed", 0):
                    self.violation(f"a second device attaching with the old owner's last-rev {prior}"
                                   f" after a failover got a replay ({result.get('replayed', 0)} events), not a snapshot")
                if result.get("rev", 0) < prior:
                    self.violation(f"a second device after a failover got rev {result.get('rev')} below its last-rev {prior}")
                device.last_rev = prior
                self.check_history(device.command("state"), device)
            finally:
                device.close()
        except (Dropped, OSError):
            pass

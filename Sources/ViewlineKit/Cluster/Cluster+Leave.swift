import CoreMetrics
import CSHA256
import Foundation
import Logging
import Synchronization

/// Leaving the cluster: the last records written within one node timeout, then the
/// node's row removed.
extension Cluster {
    /// Writes every pending record and leaves the cluster, so the other nodes can
    /// restore this node's sessions at once (a clean shutdown). From then on this
    /// node serves nothing.
    ///
    /// Within one node timeout whatever the database does (PROTOCOL §2.2: a SIGTERM
    /// finishes within the drain plus one node timeout): past it the node stops
    /// serving and returns, and what was left unwritten is left to the node timeout
    /// (other nodes restore from the records written so far, as after a kill).
    func leave() async {
        let was = loops.withLock { loops -> Loops in
            defer { loops = .closed }  // a `run()` that comes later starts nothing
            return loops
        }
        lease.withLock { $0.leaveRequestedAt = $0.leaveRequestedAt ?? .now }
        stopping.open()
        if was == .notStarted {
            await leaveWithinNodeTimeout()
        } else {
            await left.wait()  // `run()` leaves, within one node timeout
        }
    }

    /// Writes every record left, whatever the rate limit (a clean shutdown loses
    /// nothing), and leaves the directory; given up on after one node timeout, when
    /// the node stops serving and what was left unwritten is left to the node
    /// timeout (its row stays: the lease ages as after a kill).
    ///
    /// The node speaks for no session from the moment it begins (the cut-off): what
    /// background work changes afterwards is shown to nobody, so only the changes up
    /// to the cut-off must be written. Waiting for the writer ends at the node timeout
    /// whether or not its statement does (postgres-nio's queries do not end when
    /// cancelled; their own deadlines close the connection).
    func leaveWithinNodeTimeout() async {
        let (cutOff, requested) = lease.withLock { lease -> (ContinuousClock.Instant, ContinuousClock.Instant) in
            lease.left = true
            let now = ContinuousClock.now
            return (now, lease.leaveRequestedAt ?? now)
        }
        // Every held session is written, changed or not: an idle session's record
        // would otherwise keep its age, and once this node's row is gone the
        // housekeeping judges it by that age.
        if let sessions = registry.withLock({ $0.sessions }) {
            for session in sessions.all { changed(session, now: cutOff) }
        }
        let (outcomes, outcome) = AsyncStream<Bool>.makeStream()
        // The writer and the timer race; the first outcome is awaited, the other cancelled.
        let writer = Task { outcome.yield(await self.writeWhatWasShownAndLeave(shownBy: cutOff)) }
        // One node timeout from the moment leaving was asked for, whatever was in
        // flight then (a renewal, a batch on a silent link).
        let remaining = max(.zero, nodeTimeout - (ContinuousClock.now - requested))
        let timer = Task {
            try? await Task.sleep(for: remaining)
            outcome.yield(false)
        }
        var first = outcomes.makeAsyncIterator()
        let inTime = await first.next() ?? false
        writer.cancel()
        timer.cancel()
        outcome.finish()
        if !inTime {
            logger.warning(
                "leaving the cluster took longer than the node timeout; stopping without waiting for the database",
                metadata: [
                    "node-timeout": "\(nodeTimeout)"
                ])
        } else {
            logger.debug("left the cluster", metadata: ["since-leave": "\(sinceLeaveRequested)"])
        }
    }

    /// How long ago leaving was asked for (zero before): the shutdown's log.
    var sinceLeaveRequested: Duration {
        lease.withLock { $0.leaveRequestedAt }.map { ContinuousClock.now - $0 } ?? .zero
    }

    /// The last batches and the directory's leave: records the last batch could not
    /// write (a row a store write's fence held, `SKIP LOCKED`; a part that failed) and
    /// deletes it could not make are tried again until none is left. Leaving with one
    /// unwritten would let another node restore that session at once from a record
    /// older than what this node showed (a chaos run lost acknowledged searches so, at
    /// a SIGTERM while a draft save held the session's row). Returns whether it left.
    private func writeWhatWasShownAndLeave(shownBy cutOff: ContinuousClock.Instant) async -> Bool {
        await flush(final: true)
        while hasUnwrittenRecords(shownBy: cutOff) {
            do { try await Task.sleep(for: Self.finalRetryPause) } catch { return false }
            await flush(final: true)
        }
        guard !Task.isCancelled else { return false }
        try? await directory.leave(node)
        return true
    }

    /// Whether a change made by `cutOff` is in no record yet, or a session that ended
    /// by then still has its record.
    private func hasUnwrittenRecords(shownBy cutOff: ContinuousClock.Instant) -> Bool {
        dirty.withLock { $0.sessions.values.contains { $0.since <= cutOff } } || !endedLookups.withLock { $0.isEmpty }
    }

    /// Whether some session's changes are in no record yet (waiting for a batch, or
    /// put back by one that could not write them).
    var hasUnwrittenRecords: Bool {
        dirty.withLock { !$0.sessions.isEmpty }
    }

    /// How long leaving waits before writing again the records its last batch could not.
    static let finalRetryPause = Duration.milliseconds(50)
}

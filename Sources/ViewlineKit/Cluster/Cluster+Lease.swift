import CoreMetrics
import CSHA256
import Foundation
import Logging
import Synchronization

/// The lease: whether this node may speak and acknowledge now, its renewal, and what a
/// lapse asks of it (closing what another node claimed, giving back withheld output).
extension Cluster {
    /// Whether this node may serve its sessions' commands now: its lease is valid by
    /// its own monotonic clock and no lapse is being reconciled.
    public func isServing(now: ContinuousClock.Instant = .now) -> Bool {
        servingUntil(now: now) != nil
    }

    /// Until when this node's lease lets it speak, when it may now (`nil`: it may
    /// not): what a connection's output queued now must be written by
    /// (the server's outbound lines check it at each flush), so output made under a lease never reaches a client after
    /// the lease ran out — a node paused between making a reply and writing it
    /// (SIGSTOP, a stalled VM) drops it when it wakes, and the connection with it.
    public func servingUntil(now: ContinuousClock.Instant = .now) -> ContinuousClock.Instant? {
        lease.withLock { lease in
            guard !lease.left, !lease.reconciling, let renewed = lease.renewedAt else { return nil }
            let until = renewed + (nodeTimeout - leaseMargin)
            return until > now ? until : nil
        }
    }

    /// Whether this node may run and acknowledge commands now: it is serving (see
    /// ``isServing(now:)``) and its session records are being written. A node whose
    /// lease is renewed but whose record batches have failed for longer than the
    /// lease margin allows (`nodeTimeout − leaseMargin`) acknowledges nothing more
    /// until a batch is written: what it acknowledged meanwhile would be lost with it
    /// if it died then, however long the outage.
    public func acceptsCommands(now: ContinuousClock.Instant = .now) -> Bool {
        accepts(waiting: dirty.withLock { $0.since }, now: now)
    }

    /// Whether this node may run and acknowledge `session`'s commands now: it accepts
    /// commands (``acceptsCommands(now:)``), and the session's own record is not held
    /// back longer than that allows by a row another transaction holds. (One look at
    /// the records for both: this runs for every command.)
    func acceptsCommands(for session: Session, now: ContinuousClock.Instant = .now) -> Bool {
        let id = ObjectIdentifier(session)
        let (waiting, locked) = dirty.withLock { ($0.since, $0.locked.isEmpty ? nil : $0.locked[id]) }
        guard accepts(waiting: waiting, now: now) else { return false }
        guard let locked else { return true }
        return now - locked < nodeTimeout - leaseMargin
    }

    /// The node-wide rule, given the oldest unwritten change.
    private func accepts(waiting: ContinuousClock.Instant?, now: ContinuousClock.Instant) -> Bool {
        lease.withLock { lease in
            guard !lease.left, !lease.reconciling, let renewed = lease.renewedAt else { return false }
            let limit = nodeTimeout - leaseMargin
            return now - renewed < limit && Self.recordsBehind(lease, waiting: waiting, now: now) < limit
        }
    }

    /// How old the oldest change no record holds yet is, at `now` (zero when every
    /// change is written): whether the batches fail, hang in the database, or are
    /// slow to take their snapshots, what a node that died now would lose is at most
    /// this old.
    func recordsStale(now: ContinuousClock.Instant = .now) -> Duration {
        let waiting = dirty.withLock { $0.since }
        return lease.withLock { Self.recordsBehind($0, waiting: waiting, now: now) }
    }

    private static func recordsBehind(_ lease: LeaseState, waiting: ContinuousClock.Instant?, now: ContinuousClock.Instant) -> Duration {
        // (No array: this runs for every command.)
        let oldest: ContinuousClock.Instant
        switch (waiting, lease.inFlightSince) {
        case (let waiting?, let inFlight?): oldest = min(waiting, inFlight)
        case (let waiting?, nil): oldest = waiting
        case (nil, let inFlight?): oldest = inFlight
        case (nil, nil): return .zero
        }
        return max(now - oldest, .zero)
    }

    /// Why ``acceptsCommands(now:)`` is false, or `nil` when it is true.
    func refusalReason(now: ContinuousClock.Instant = .now) -> String? {
        if !isServing(now: now) { return "no valid lease (the cluster's database does not answer)" }
        if !acceptsCommands(now: now) { return "session records cannot be written (the cluster's database does not take them)" }
        return nil
    }

    /// Renews the lease; after a lapse, closes the sessions other nodes claimed
    /// meanwhile before serving again.
    func renew(now: @Sendable () -> ContinuousClock.Instant = { .now }) async throws {
        let sent = now()
        let lapsed = lease.withLock { lease in
            guard let renewed = lease.renewedAt else { return false }
            return sent - renewed >= nodeTimeout - leaseMargin
        }
        if lapsed { lease.withLock { $0.reconciling = true } }
        // Records of dead nodes' sessions nobody attached to in a day go.
        let renewal = try await directory.renewLease(node, nodeTimeout: nodeTimeout, recordsExpireAfter: .seconds(86_400))
        let claimedMeanwhile = lease.withLock { lease -> Bool in
            // Overlapping renewals may return out of order: the count only grows.
            defer { if let claims = renewal.claims { lease.claimsSeen = max(lease.claimsSeen ?? claims, claims) } }
            guard let claims = renewal.claims, let seen = lease.claimsSeen else { return false }
            return claims > seen
        }
        if claimedMeanwhile {
            // Another node timed this one's silence and claimed a session: a lapse,
            // whatever either clock says.
            lease.withLock { lease in
                lease.reconciling = true
                lease.lapsesNoticed &+= 1
            }
            logger.warning("another node claimed a session of this node since its last renewal; checking its sessions")
        }
        if renewal.previousExpired {
            // Sent in time by this node's clock but run late by the database's: the
            // lease lapsed all the same, and another node may hold some sessions now.
            lease.withLock { lease in
                lease.reconciling = true
                lease.lapsesNoticed &+= 1  // a check of ``ownedElsewhere(session:)`` running now leaves it to this renewal
            }
            if !lapsed { logger.warning("this node's lease lapsed by the database's clock; checking its sessions") }
        }
        let (reconciled, noticed) = lease.withLock { (lapsed || $0.reconciling, $0.lapsesNoticed) }
        if reconciled {
            try await closeLostSessions()
            // Every record held is written again: whatever happened to the rows while
            // the lease was away (a claim given back, a row deleted), they hold this
            // node's sessions once more.
            if let sessions = registry.withLock({ $0.sessions }) {
                let at = now()
                for session in sessions.all { changed(session, now: at) }
            }
        }
        let withheld = lease.withLock { lease -> Bool in
            // Overlapping renewals may return out of order: the latest send counts.
            lease.renewedAt = max(lease.renewedAt ?? sent, sent)
            // A write fenced off while this renewal ran: the next one reconciles again.
            if lease.lapsesNoticed == noticed { lease.reconciling = false }
            defer { lease.withheld = false }
            return lease.withheld
        }
        if reconciled || withheld { await restoreOutput() }
    }

    /// A session withheld output because the lease was not valid (``Session/leased``):
    /// the sessions hear when it is back (``restoreOutput()``).
    func outputWithheld() {
        lease.withLock { $0.withheld = true }
    }

    /// The lease is valid again: sessions that withheld output meanwhile (kept: the
    /// lost ones are closed) show their state again. (A session that withholds
    /// again while this runs marks it anew for the next renewal.)
    private func restoreOutput() async {
        guard let sessions = registry.withLock({ $0.sessions }) else { return }
        await Session.onTheirLoops(sessions.all) { session in
            session.leaseRestored()
            return false
        }
    }

    /// A store refused a write made for `session` (``SessionFence``): by the database's
    /// clock this node's lease had lapsed, or another node owns the session. Like any
    /// lapse, the node speaks for no session until its next renewal has closed those
    /// another node claimed.
    func writeFenced(session: String) {
        let leaving = lease.withLock { lease -> Bool in
            guard !lease.left else { return true }  // leaving: every write is refused, nothing to check
            lease.reconciling = true
            lease.lapsesNoticed &+= 1
            return false
        }
        guard !leaving else { return }
        logger.warning(
            "the database refused a write for a session this node may no longer hold; checking its sessions",
            metadata: [
                "record": "\(session)"
            ])
    }

    /// A store refused a write made for `session` because another node owns its record
    /// (or it ended) while this node's lease is valid by the database's clock now. A
    /// claim needs the owner's lease expired, so this node's lease did lapse a while
    /// (a renewal that ran late and whose answer was lost, say), and any of its
    /// sessions may have been claimed then. Like any lapse, the node speaks for no
    /// session from this moment; but it need not wait for a renewal to check them:
    /// its lease is valid again, so no claim can come any more, and every claim of the
    /// lapse committed before the refusing write saw the fresh lease. One query for
    /// all the held sessions closes the lost ones, and the node serves the rest again.
    func ownedElsewhere(session lookup: String) {
        let check = lease.withLock { lease -> Bool? in
            guard !lease.left else { return nil }
            lease.reconciling = true
            lease.lapsesNoticed &+= 1
            lease.elsewhereNoticed &+= 1
            defer { lease.checkingNow = true }
            return !lease.checkingNow
        }
        guard let check else { return }
        logger.info(
            "the database refused a write for a session another node holds now; checking this node's sessions",
            metadata: ["record": "\(lookup)"])
        if check { checkRequests.continuation.yield() }
    }

    private enum CheckOutcome { case serve, again, stop }

    /// Closes the held sessions other nodes own now and serves the rest again without
    /// waiting for the next renewal, unless meanwhile a lapse other than such a
    /// refusal was noticed (the database said the lease lapsed: the renewal's to
    /// settle) or the lease lapsed by this node's clock. Goes again while refusals
    /// come; a check that fails leaves it to the renewal.
    /// Checks this node's sessions whenever asked (``checkRequests``), until
    /// cancelled: a child of ``run()``.
    package func checkLoop() async {
        for await _ in checkRequests.stream {
            await checkSessionsNow()
        }
    }

    private func checkSessionsNow() async {
        while true {
            let (lapses, elsewhere) = lease.withLock { ($0.lapsesNoticed, $0.elsewhereNoticed) }
            var checked = true
            do { try await closeLostSessions() } catch { checked = false }
            let outcome = lease.withLock { lease -> CheckOutcome in
                let (moreLapses, moreElsewhere) = (lease.lapsesNoticed &- lapses, lease.elsewhereNoticed &- elsewhere)
                var outcome = CheckOutcome.stop
                if checked, !lease.left, moreLapses == moreElsewhere {
                    if moreElsewhere > 0 {
                        outcome = .again
                    } else if let renewed = lease.renewedAt, ContinuousClock.now - renewed < nodeTimeout - leaseMargin {
                        lease.reconciling = false
                        lease.withheld = false
                        outcome = .serve
                    }
                }
                if outcome != .again { lease.checkingNow = false }
                return outcome
            }
            switch outcome {
            case .again: continue
            case .stop: return
            case .serve:
                await restoreOutput()
                return
            }
        }
    }

    /// Closes every held session whose record another node claimed while this node
    /// had no valid lease: its clients are told `bye "session moved"` and attach again
    /// (another node sends them on with `moved`).
    private func closeLostSessions() async throws {
        guard let sessions = registry.withLock({ $0.sessions }) else { return }
        let held = sessions.all
        let lookups = held.map { SessionRegistry.split($0.token).lookup }
        await close(lost: Set(try await directory.lost(lookups, by: node)))
    }

    /// Closes the held sessions whose records (by lookup) another node owns now.
    func close(lost: Set<String>) async {
        guard !lost.isEmpty, let sessions = registry.withLock({ $0.sessions }) else { return }
        for session in sessions.all where lost.contains(SessionRegistry.split(session.token).lookup) {
            sessions.drop(session)
            dirty.withLock { $0.sessions[ObjectIdentifier(session)] = nil }
            logger.info("a session moved to another node while this one had no lease", metadata: ["session": "\(session.id)"])
            await session.close(.moved)
        }
    }
}

import CoreMetrics
import CSHA256
import Foundation
import Logging
import Synchronization

/// Session records: which sessions changed, the batches that write them, a session's
/// end and its token's change recorded before their replies.
extension Cluster {
    /// A session's snapshot changed (at `now`): its record is written with the next batch.
    func changed(_ session: Session, now: ContinuousClock.Instant = .now) {
        dirty.withLock { $0.changed(session, at: now) }
    }

    /// A session ended for good (`quit`, expiry): its record goes with the next
    /// batch, after any batch in flight (which may still hold it), and is deleted
    /// again until the delete succeeds: an ended session never comes back on
    /// another node.
    func ended(_ session: Session) {
        let (lookup, _) = SessionRegistry.split(session.token)
        dirty.withLock {
            $0.sessions[ObjectIdentifier(session)] = nil
            $0.locked[ObjectIdentifier(session)] = nil
        }
        endedLookups.withLock { _ = $0.insert(lookup) }
    }

    /// `quit`: deletes the session's record now, before the reply (and again with the
    /// next batch, after any batch in flight that may still hold it). Throws
    /// `unavailable` when the database does not take the delete: the quit is not
    /// acknowledged. A record another node claimed meanwhile is not ended: the
    /// session closes here as moved, and the quit is refused like any command
    /// without the lease.
    func forget(_ session: Session) async throws {
        let (lookup, _) = SessionRegistry.split(session.token)
        let removed: SavedRecords
        do {
            removed = try await directory.remove(lookups: [lookup], by: node)
        } catch {
            logger.warning(
                "could not delete a quitting session's record", metadata: ["session": "\(session.id)", "error": "\(String(reflecting: error))"])
            throw ProtocolError(.unavailable, "the session could not be ended right now; try again")
        }
        guard removed.refused.isEmpty else {
            await close(lost: Set(removed.refused))
            throw Self.noLease
        }
        guard removed.skipped.isEmpty else {
            throw ProtocolError(.unavailable, "the session's record is busy right now; try again", retryAfter: 1)
        }
        ended(session)
        endedForGood([lookup])
    }

    /// `lookups` ended in the directory for good: remembered (``recentlyEnded``).
    private func endedForGood(_ lookups: some Sequence<String>) {
        recentlyEnded.withLock { ring in
            for lookup in lookups where !ring.lookups.contains(lookup) {
                if ring.order.count < Self.recentlyEndedKept {
                    ring.order.append(lookup)
                } else {
                    ring.lookups.remove(ring.order[ring.next])
                    ring.order[ring.next] = lookup
                    ring.next = (ring.next + 1) % Self.recentlyEndedKept
                }
                ring.lookups.insert(lookup)
            }
        }
    }

    /// Records `session` with `token` (`end-others`' new one, not yet the session's):
    /// now, whatever the rate limit or the record's size, so the change is durable
    /// before anything of it happens and a failover never brings the old token back.
    /// Throws `unavailable` when the database does not take it (nothing changed); a
    /// write the database fences off closes the session here.
    func recordToken(_ token: String, of session: Session) async throws(ProtocolError) {
        guard let (snapshot, rev) = await session.recordForTokenChange() else { return }
        let (lookup, secret) = SessionRegistry.split(token)
        // The token it replaces stays good in the record until the change is known to
        // have happened: a write that commits while its node is paused past its
        // deadline and its lease is answered `unavailable`, and the session's owner
        // keeps the old token; another node restoring the record takes that token too
        // (and its next record drops the new one). The next record after an
        // acknowledged change leaves it out.
        let before = Self.tokenBeforePrefix(SessionRegistry.split(session.token).secret)
        let digest = Self.digest(secret)
        try await writeTokenRecord(
            SessionRecord(lookup: lookup, secretDigest: digest, owner: nodeID, snapshot: before + snapshot.dropFirst(), rev: rev), of: session)
        // Known to have happened: the same record again without the old token, and only
        // then the `ok` — so a failover after the reply lets the new token in alone, and
        // a node that restored the session for the old token meanwhile (this one paused
        // past its lease) has this write refused: the client is told `unavailable` and
        // keeps the old token, the one that session has.
        try await writeTokenRecord(SessionRecord(lookup: lookup, secretDigest: digest, owner: nodeID, snapshot: snapshot, rev: rev), of: session)
        // Later records are written at this rev at least: one at a lower rev would be
        // taken for late and leave this record as it is.
        await session.tokenRecorded(at: rev)
    }

    /// Writes one of `end-others`' records, or says why not: the database failed
    /// (`unavailable`), another node owns the session now (its sessions close as lost;
    /// no lease), or another transaction holds its row (`unavailable`, try again).
    private func writeTokenRecord(_ record: SessionRecord, of session: Session) async throws(ProtocolError) {
        let saved: SavedRecords
        do {
            saved = try await directory.save([record])
        } catch {
            logger.warning("could not write a session record", metadata: ["session": "\(session.id)", "error": "\(String(reflecting: error))"])
            throw ProtocolError(.unavailable, "the change could not be recorded right now; try again")
        }
        guard saved.refused.isEmpty else {
            await close(lost: Set(saved.refused))
            throw Self.noLease
        }
        guard saved.skipped.isEmpty else {
            throw ProtocolError(.unavailable, "the session's record is busy right now; try again", retryAfter: 1)
        }
    }

    /// Writes the records of every session that changed since the last batch, then
    /// deletes those of sessions that ended.
    /// `now` decides which records are due (tests pass their own); a `final` flush
    /// (leaving the cluster) writes every changed record whatever the rate limit.
    func flush(now: ContinuousClock.Instant = .now, final: Bool = false) async {
        await writeChanged(now: now, final: final)
        // Kept in `endedLookups` until deleted: a lookup meanwhile finds them ended.
        let ended = endedLookups.withLock { $0 }
        guard !ended.isEmpty else { return }
        // The next batch waits for these deletes: while one hangs (the records locked,
        // a dead connection), the changes made meanwhile wait in `dirty`, and the node
        // stops acknowledging once the oldest has waited too long (`acceptsCommands`).
        // One statement for them all: a burst of expiries is one round trip, not one each.
        do {
            // Those another node restored meanwhile (this node's lease lapsed) stay
            // theirs: ended here, alive there.
            let removed = try await directory.remove(lookups: Array(ended), by: node)
            // Rows another transaction held stay to be ended with the next batch.
            endedLookups.withLock { $0.subtract(ended.subtracting(removed.skipped)) }
            endedForGood(ended.subtracting(removed.skipped).subtracting(removed.refused))
            if !removed.refused.isEmpty {
                logger.info("left the records of sessions another node holds now", metadata: ["records": "\(removed.refused.count)"])
            }
        } catch {
            logger.debug(
                "could not remove session records; trying again with the next batch",
                metadata: ["error": "\(String(reflecting: error))", "records": "\(ended.count)"])
        }
    }

    private func writeChanged(now: ContinuousClock.Instant, final: Bool) async {
        // Taken with the time of their oldest change, which counts as in flight from
        // here: taking each session's snapshot is part of the batch (a loaded node may
        // take seconds over it), and so is the write.
        // (Taken under the lease's lock, so `acceptsCommands` never sees them in
        // neither place.)
        let (taken, since) = lease.withLock { lease in
            let (taken, since) = dirty.withLock { dirty in
                // Sessions held back by a row lock stay counted against themselves
                // until their record is written.
                defer { dirty = Dirty(locked: dirty.locked) }
                return (Array(dirty.sessions.values), dirty.since)
            }
            if !taken.isEmpty { lease.inFlightSince = since ?? now }
            return (taken, since)
        }
        guard !taken.isEmpty else { return }
        defer { lease.withLock { $0.inFlightSince = nil } }
        let began = ContinuousClock.now
        var records: [SessionRecord] = []
        var entries: [String: Unwritten] = [:]  // by lookup: what a skipped record goes back as
        var later: [Unwritten] = []
        let decisions = await Self.recordDecisions(taken, now: now, burst: final ? .max : Self.recordsPerWindow)
        let snapshotsTaken = ContinuousClock.now
        for (entry, decision) in decisions {
            let session = entry.session
            switch decision {
            case .closed:
                dirty.withLock { _ = $0.locked.removeValue(forKey: ObjectIdentifier(session)) }
                continue
            case .notYet:
                later.append(entry)  // written with a later batch: at most 5 a second each
            case .due(let snapshot, let rev, let token):
                let (lookup, secret) = SessionRegistry.split(token)
                records.append(SessionRecord(lookup: lookup, secretDigest: Self.digest(secret), owner: nodeID, snapshot: snapshot, rev: rev))
                entries[lookup] = entry
            }
        }
        // Rate-limited: they wait for a later batch, their changes as old as they are.
        dirty.withLock { $0.keep(later) }
        guard !records.isEmpty else { return }
        // Records of any size are written: in statements of at most `batchBytes` of
        // snapshots each (a larger record alone), so one large session neither makes a
        // statement of everyone's records slow nor is left behind.
        var written = 0
        var setAside = false
        for part in Self.parts(of: records) {
            do {
                let saved = try await directory.save(Array(part))
                written += part.count
                // Rows another transaction held go with the next batch, their changes as
                // old as they are, counted against their own sessions only; the rest
                // are written (or refused below).
                let skipped = Set(saved.skipped)
                dirty.withLock { dirty in
                    guard !dirty.locked.isEmpty || !skipped.isEmpty else { return }
                    for record in part where !skipped.contains(record.lookup) {
                        if let entry = entries[record.lookup] { dirty.locked[ObjectIdentifier(entry.session)] = nil }
                    }
                    dirty.keepLocked(saved.skipped.compactMap { entries[$0] })
                }
                // A write the database fenced off: another node owns that session now.
                await close(lost: Set(saved.refused))
            } catch {
                if part.count == 1, records.count > 1, part[part.startIndex].snapshot.utf8.count > Self.batchBytes, !setAside,
                    let entry = entries[part[part.startIndex].lookup]
                {
                    setAside = true  // once a batch: a database that is down fails every part
                    // A record too large to share a statement, alone, that failed (too slow
                    // to write within the deadline?): it goes with the next batch counted against its own
                    // session, like a locked row, and the other parts are written now —
                    // one session's record never holds the node's back.
                    dirty.withLock { $0.keepLocked([entry]) }
                    written += 1
                    logger.warning(
                        "could not write a session record",
                        metadata: [
                            "error": "\(String(reflecting: error))", "session": "\(entry.session.id)",
                            "bytes": "\(part[part.startIndex].snapshot.utf8.count)",
                        ])
                    continue
                }
                // This part and the rest go with the next batch; the changes keep their
                // age, so commands are refused once the oldest has waited too long
                // (`acceptsCommands`).
                let unwritten = records[(written)...].compactMap { entries[$0.lookup] }
                dirty.withLock { $0.keep(unwritten) }
                if let skipped = Self.warningDue(failedBatches, every: nodeTimeout) {
                    logger.warning(
                        "could not write session records",
                        metadata: [
                            "error": "\(String(reflecting: error))", "sessions": "\(unwritten.count)",
                            "failed-batches-not-logged": "\(skipped)",
                        ])
                }
                break
            }
        }
        if written > 0 {
            Self.recordsPerBatch.record(written)
            slowBatch(waited: began - (since ?? began), snapshots: snapshotsTaken - began, write: .now - snapshotsTaken, records: written)
        }
    }

    /// `records` in runs of at most ``batchBytes`` of snapshots, in order; a record
    /// larger than that is a run by itself.
    static func parts(of records: [SessionRecord]) -> [ArraySlice<SessionRecord>] {
        var parts: [ArraySlice<SessionRecord>] = []
        var start = 0
        var bytes = 0
        for (index, record) in records.enumerated() {
            let size = record.snapshot.utf8.count
            if index > start, bytes + size > batchBytes {
                parts.append(records[start..<index])
                start = index
                bytes = 0
            }
            bytes += size
        }
        if start < records.count { parts.append(records[start...]) }
        return parts
    }

    /// Says so when a written batch ended more than halfway from its oldest change to
    /// refusing commands (at `nodeTimeout − leaseMargin`; stepping down comes at twice
    /// the node timeout), at most once a node timeout, and says where the time went:
    /// waiting for the batch to begin (the records loop starved of CPU, or a change
    /// held back by the rate limit), taking the sessions' snapshots (busy event loops)
    /// or the write (the database).
    private func slowBatch(waited: Duration, snapshots: Duration, write: Duration, records: Int) {
        guard waited + snapshots + write > (nodeTimeout - leaseMargin) / 2 else { return }
        guard let skipped = Self.warningDue(slowBatches, every: nodeTimeout) else { return }
        logger.warning(
            "a record batch was slow",
            metadata: [
                "waited-ms": "\(waited.nanoseconds / 1_000_000)", "snapshots-ms": "\(snapshots.nanoseconds / 1_000_000)",
                "write-ms": "\(write.nanoseconds / 1_000_000)", "records": "\(records)", "slow-batches-not-logged": "\(skipped)",
            ])
    }

    /// Whether a warning throttled by `state` is due now (none in the last `interval`):
    /// the occurrences left unsaid since the last one, or `nil` (this one is counted).
    private static func warningDue(
        _ state: borrowing Mutex<(lastWarning: ContinuousClock.Instant?, skipped: Int)>, every interval: Duration
    ) -> Int? {
        let now = ContinuousClock.now
        return state.withLock { state in
            if let last = state.lastWarning, now - last < interval {
                state.skipped += 1
                return nil
            }
            defer { state = (now, 0) }
            return state.skipped
        }
    }

    /// Sessions a batch asks for their records in one turn of their event loop.
    private static let decisionsPerTurn = 256

    /// What each session's record should be now (``Session/recordIfDue(now:window:burst:maximumBytes:)``),
    /// asked on the sessions' own event loops a few hundred at a time. A batch that
    /// awaited each session in turn waited for a turn of its loop per session: on
    /// loops busy with a burst of new sessions, milliseconds each, so a batch of a
    /// few hundred took seconds and the node refused commands meanwhile (its records
    /// trailed past `nodeTimeout − leaseMargin`).
    /// The answers come grouped by event loop, each with its entry.
    private static func recordDecisions(
        _ entries: [Unwritten], now: ContinuousClock.Instant, burst: Int
    ) async -> [(Unwritten, Session.RecordDecision)] {
        var byLoop: [ObjectIdentifier: [Unwritten]] = [:]
        for entry in entries { byLoop[ObjectIdentifier(entry.session.eventLoop), default: []].append(entry) }
        // Every turn is asked for at once: the loops answer side by side.
        let turns = byLoop.values.flatMap { onLoop in
            stride(from: 0, to: onLoop.count, by: decisionsPerTurn).map { start in
                let part = Array(onLoop[start..<min(start + decisionsPerTurn, onLoop.count)])
                return (
                    part,
                    part[0].session.eventLoop.submit {
                        part.map { entry in
                            entry.session.assumeIsolated {
                                $0.recordIfDue(now: now, window: recordWindow, burst: burst)
                            }
                        }
                    }
                )
            }
        }
        var decisions: [(Unwritten, Session.RecordDecision)] = []
        decisions.reserveCapacity(entries.count)
        for (part, turn) in turns {
            if let answers = try? await turn.get() {
                decisions += zip(part, answers).map { ($0, $1) }
            } else {
                // The loop is shutting down: each session is asked on its own.
                for entry in part {
                    decisions.append((entry, await entry.session.recordIfDue(now: now, window: recordWindow, burst: burst)))
                }
            }
        }
        return decisions
    }

    /// Where a token's session is, when this node does not hold it.
    enum Lookup {
        case unknown
        case moved(address: String, web: String)
        /// Restored here (or a moment ago by another connection), and registered.
        case restored(Session)
    }
}

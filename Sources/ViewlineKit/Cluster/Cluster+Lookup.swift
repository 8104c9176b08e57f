import CoreMetrics
import CSHA256
import Foundation
import Logging
import Synchronization

/// Finding a session by its token across the cluster: `moved` to a live owner, a restore
/// from the record of a dead one, a hand-over to a node of the release that reads it.
extension Cluster {
    /// Looks a token up in the directory: `moved` to a live owner, or the session
    /// restored here (owned by this node, and in its registry) when its owner is gone.
    /// A node that would refuse the session's commands (no valid lease, or records so
    /// far behind that it acknowledges nothing, as before it steps down) claims
    /// nothing: the client tries another node, which can serve what it restores.
    func locate(_ token: String, application: Application) async throws -> Lookup {
        guard acceptsCommands() else { throw Self.noLease }
        let (lookup, _) = SessionRegistry.split(token)
        let first = inFlight.withLock { running -> Bool in
            guard running[lookup] == nil else { return false }
            running[lookup] = []
            return true
        }
        if first {
            defer {
                let waiting = inFlight.withLock { $0.removeValue(forKey: lookup) } ?? []
                for waiter in waiting { waiter.resume() }
            }
            return try await locateOnce(token, application: application)
        }
        // Another connection's lookup of the same session: wait for it, then look
        // again for this token (its secret is checked on its own).
        await withCheckedContinuation { continuation in
            let ended = inFlight.withLock { running -> Bool in
                guard running[lookup] != nil else { return true }
                running[lookup]!.append(continuation)
                return false
            }
            if ended { continuation.resume() }
        }
        if let session = application.sessions.session(for: token) { return .restored(session) }
        // One at a time again: concurrent attaches of one session on one node never
        // race each other's claims (a loser would take the record it finds handed back
        // for one nobody can restore).
        return try await locate(token, application: application)
    }

    /// How a record written by `end-others` begins: `{"tokenBefore":"<digest>",` with
    /// the digest of the secret it replaces (``recordToken(_:of:)``).
    static func tokenBeforePrefix(_ secret: [UInt8]) -> String {
        #"{"tokenBefore":""# + Hex.string(digest(secret)) + #"","#
    }

    /// Whether `secret` opens `record`: its digest, or the one an `end-others` whose
    /// outcome its node never learned replaced.
    static func opens(_ secret: [UInt8], _ record: SessionRecord) -> Bool {
        SessionRegistry.constantTimeEqual(digest(secret), record.secretDigest)
            || (record.snapshot.hasPrefix(#"{"tokenBefore":""#)
                && SessionRegistry.constantTimeEqual(
                    Array(tokenBeforePrefix(secret).utf8), Array(record.snapshot.utf8.prefix(tokenBeforePrefix(secret).utf8.count))))
    }

    private func locateOnce(_ token: String, application: Application, depth: Int = 0) async throws -> Lookup {
        // The record keeps changing hands under this lookup (claims racing elsewhere):
        // not settled, so not gone either — the client tries again.
        guard depth < 3 else { throw Self.unsettled }
        let (lookup, secret) = SessionRegistry.split(token)
        // Ended here for good a moment ago: the directory would say so too.
        if recentlyEnded.withLock({ $0.lookups.contains(lookup) }) { return .unknown }
        if let until = newerRecords.withLock({ $0[lookup] }), ContinuousClock.now < until { throw Self.newerRecord }
        guard let found = try await find(lookup), Self.opens(secret, found.record)
        else { return .unknown }
        var location = found
        if location.record.owner == nodeID {
            // Restored here a moment ago by another connection's attach.
            if let session = application.sessions.session(for: token) { return .restored(session) }
            // A session this node holds under another token (a token `end-others`
            // revoked, matched by a record not yet rewritten): nothing to end.
            if application.sessions.holds(lookup: lookup) { return .unknown }
            // Ended here, its record's delete on its way: gone.
            if endedLookups.withLock({ $0.contains(lookup) }) { return .unknown }
            // Ours by the database, held by nobody, not ended: a claim of this node's
            // that committed after its caller had given up on it, or a record another
            // node handed back after this one let the session go. A live session
            // nobody serves: restored here, never ended (its token holder would be
            // locked out for good).
            return try await restore(location.record, lookup: lookup, token: token, previousOwner: nodeID, application: application)
        }
        if let renewals = location.ownerRenewals {
            // The directory counts renewals: the owner's silence is timed here, on this
            // node's monotonic clock, and the database's clock decides nothing. A count
            // that changed within the node timeout is a live owner; one not seen long
            // enough yet is waited for (at most one node timeout), then looked up again.
            // An owner the database still calls alive but this node has not seen renew
            // for two renewal periods has most likely died: the attach waits out the
            // rest of the node timeout here instead of sending the client to a dead
            // address (where a reconnecting client spends its attempts, and may run out
            // of them before the session can be restored).
            var silent = silence(of: location.record.owner, renewals: renewals)
            if silent < nodeTimeout {
                if location.ownerAlive && silent < nodeTimeout * 2 / 5 {
                    return .moved(address: location.ownerAddress, web: location.ownerWeb)
                }
                try await Task.sleep(for: nodeTimeout - silent)
                guard let again = try await find(lookup), Self.opens(secret, again.record),
                    again.record.owner == location.record.owner
                else { return try await locateOnce(token, application: application, depth: depth + 1) }
                location = again
                silent = location.ownerRenewals.map { silence(of: location.record.owner, renewals: $0) } ?? nodeTimeout
                if silent < nodeTimeout { return .moved(address: location.ownerAddress, web: location.ownerWeb) }
            }
        } else if location.ownerAlive {
            return .moved(address: location.ownerAddress, web: location.ownerWeb)
        }
        // A full node does not take the record it could not hold: the session stays
        // claimable by a node with room.
        guard application.sessions.hasRoomToRestore else { throw Self.full }
        guard
            let claimed = try await directory.claim(
                lookup: lookup, from: location.record.owner, renewals: location.ownerRenewals, for: node, nodeTimeout: nodeTimeout)
        else {
            // Another node restored it first (or its owner came back, renewing: alive
            // whatever the database's clock says): send the client there. Otherwise
            // (the record went back to its previous owner meanwhile: another node's
            // claim of it did not restore it) look again.
            guard let winner = try await find(lookup) else { return .unknown }
            let renewed =
                winner.record.owner == location.record.owner && winner.ownerRenewals != nil && winner.ownerRenewals != location.ownerRenewals
            guard winner.record.owner != nodeID, winner.ownerAlive || renewed || winner.record.owner != location.record.owner else {
                return try await locateOnce(token, application: application, depth: depth + 1)
            }
            return .moved(address: winner.ownerAddress, web: winner.ownerWeb)
        }
        logger.debug("claimed", metadata: ["record": "\(lookup)", "previous-owner": "\(location.record.owner)", "rev": "\(claimed.rev)"])
        guard Self.opens(secret, claimed) else {
            // The token got a new secret (`end-others`) between the find and the claim:
            // this one joins nothing, and the record goes back to be claimed with it.
            try? await directory.release(lookup: lookup, by: node, to: location.record.owner)
            return .unknown
        }
        // The record as claimed, not as found: the previous owner may have written a
        // newer one in between (from the claim on, its writes are refused).
        return try await restore(claimed, lookup: lookup, token: token, previousOwner: location.record.owner, application: application)
    }

    /// Restores a session this node owns by the database from `record`, and registers it.
    func restore(
        _ record: SessionRecord, lookup: String, token: String, previousOwner: String, application: Application
    ) async throws -> Lookup {
        // Every view is read by its declaration first: a record this release cannot
        // read — not even as JSON — never turns into a fresh state silently.
        let (snapshot, states, unreadable) = Session.readRecord(record.snapshot, application: application)
        for view in unreadable { application.unreadableRecord(view, logger: logger) }
        if unreadable.contains(where: \.refused) {
            // Not restored, and the record left as it was, never rewritten from here.
            let views = unreadable.filter(\.refused).map(\.view)
            if unreadable.allSatisfy({ !$0.refused || $0.reason == .newer }) {
                // Written by a newer release (a rolling deploy under way, or rolled
                // back): handed to a live node that reads it, where the client is
                // sent; without one, back to its previous owner, and the client tries
                // again (a node of that release may be on its way).
                let versions = Dictionary(unreadable.map { ($0.view, $0.recordedVersion) }, uniquingKeysWith: max)
                if let reader = await liveNode(reading: versions) {
                    do {
                        try await directory.handOver(lookup: lookup, by: node, to: reader.id)
                        logger.info(
                            "a session recorded by a newer release handed to a node that runs it",
                            metadata: ["record": "\(lookup)", "node": "\(reader.id)", "release": "\(reader.release)"])
                        return .moved(address: reader.address, web: reader.web)
                    } catch {
                        logger.debug("handing a record over failed", metadata: ["record": "\(lookup)", "error": "\(error)"])
                    }
                }
                if previousOwner != nodeID { try? await directory.release(lookup: lookup, by: node, to: previousOwner) }
                newerRecords.withLock { newer in
                    let now = ContinuousClock.now
                    if newer.count >= Self.newerRecordsKept { newer = newer.filter { $0.value > now } }
                    if newer.count < Self.newerRecordsKept { newer[lookup] = now + Self.newerRecordPause }
                }
                throw Self.newerRecord
            }
            if previousOwner != nodeID { try? await directory.release(lookup: lookup, by: node, to: previousOwner) }
            throw ProtocolError(
                .recordUnreadable,
                "this server cannot read the session's record of \(views.joined(separator: ", ")) (written by another release); the session is kept for one that can: start a new session, or try again after the deploy"
            )
        }
        let session = await Session.restore(snapshot, states: states, claimedAt: record.rev, token: token, application: application)
        let registered = application.sessions.register(session, restoring: true)
        if case .success(let evicted?) = registered { await evicted.close(.evicted) }
        guard case .success = registered else {
            // Filled up since the check: stop what the restore started and hand the
            // record back to its previous owner, so another node can still claim it.
            await session.close()
            if previousOwner != nodeID { try? await directory.release(lookup: lookup, by: node, to: previousOwner) }
            throw Self.full
        }
        application.metrics?.sessionsRestored.increment()
        logger.info("restored a session from its record", metadata: ["session": "\(session.id)", "previous-owner": "\(previousOwner)"])
        changed(session)
        return .restored(session)
    }

    /// A session's record is written at most `recordsPerWindow` times a window,
    /// however many events it sends.
    static let recordWindow = Duration.seconds(1)
    static let recordsPerWindow = 5
    /// The most snapshot bytes one statement of a record batch carries; a larger
    /// record is written by a statement of its own.
    static let batchBytes = 1 << 20

    /// What an attach of a session recorded by a newer release answers while no live
    /// node runs that release.
    static let newerRecord = ProtocolError(
        .unavailable,
        "the session was recorded by a newer release than this node runs; attach to a node that runs it, or try again in a moment",
        retryAfter: 1)

    /// How long a lookup found recorded by a newer release (no live node reading it)
    /// is answered ``newerRecord`` without asking the directory again: a rollback's
    /// retrying clients cost no claim each.
    static let newerRecordPause = Duration.seconds(1)
    /// The most such lookups remembered (past it, none more until they are due).
    static let newerRecordsKept = 10_000

    /// What an attach answers when the record changed hands under it more often than
    /// it looks again.
    static let unsettled = ProtocolError(
        .unavailable, "the session is being restored by another node right now; try again in a moment", retryAfter: 1)

    /// What a node without a valid lease answers.
    static let noLease = ProtocolError(
        .unavailable, "this node cannot reach the cluster's database right now; try again, or attach to another node")

    /// What a full node answers for a session it would have to restore.
    static let full = ProtocolError(
        .serverBusy, "this node holds all the sessions it may; try again in a moment or attach to another node", retryAfter: 1)

    /// SHA-256: what a record keeps of a token's secret part.
    static func digest(_ secret: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 32)
        let ok = secret.withUnsafeBufferPointer { viewline_sha256($0.baseAddress, $0.count, &digest) }
        precondition(ok == 1, "SHA-256 from libcrypto failed")
        return digest
    }
}

import Foundation
import GRDB
import Synchronization
import ViewlineKit
import ViewlineProtocol

/// A single node's session records, in its own SQLite file: what lets a server that
/// restarts (a deploy, a crash) give every session back to the client that resumes
/// it. The node runs as a cluster of one over it — the same records, rate limit,
/// drain and restore as a node of a PostgreSQL cluster — so a session comes back by
/// the one path a failover takes: `attach TOKEN LAST-REV` finds the record, the node
/// claims it from its previous life and restores it.
///
/// One process owns the file (an exclusive `flock` on it, held for the directory's
/// life): a second server on the same file refuses to start. So the only live node
/// is this process's, and every other owner a record names is a life of the server
/// that ended, whose sessions may be restored at once, without waiting out a node
/// timeout. Leases are this process's monotonic clock.
///
/// The wall clock is the only clock that spans a restart: a record left by an
/// earlier life is as old as the wall clock says it was when this one started,
/// and ages by the monotonic clock from then on (a step of the wall clock while the
/// server runs changes no record's age). Records of sessions nobody resumed within
/// `expireAfter` of their node's end are deleted, at most 1,000 a renewal, so a
/// start never waits on a large file; one that is due is never restored.
///
/// ```swift
/// let store = try SQLiteStore.open(path: "viewline.sqlite")
/// let directory = try SQLiteSessionDirectory(store, path: "viewline.sqlite", expireAfter: .seconds(300))
/// let cluster = Cluster(directory: directory, nodeTimeout: .seconds(5), tokenKey: try await directory.agreedTokenKey())
/// let server = try ViewlineServer(apps: apps, services: services, cluster: cluster)
/// ```
public final class SQLiteSessionDirectory: SessionDirectory {
    private let writer: any DatabaseWriter
    /// How long a record of an ended life waits for its client.
    public let expireAfter: Duration
    /// The file's exclusive lock (`flock`), held while the directory lives.
    private let lock: Int32
    /// The wall clock and the monotonic clock read together at start.
    private let startedWall: Double
    private let startedAt = ContinuousClock.now
    /// The nodes of this process that hold a lease (one, while the server runs), with
    /// their last renewal.
    private let live = Mutex<[String: (node: ClusterNode, renewedAt: ContinuousClock.Instant)]>([:])

    /// The directory over `store`'s database, the file at `path` (the one the store
    /// opened). Throws ``FileInUse`` when another process holds it.
    public init(_ store: SQLiteStore, path: String, expireAfter: Duration) throws {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw FileInUse(path: path, reason: String(cString: strerror(errno))) }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            let reason = errno == EWOULDBLOCK ? "another viewline-server uses it" : String(cString: strerror(errno))
            close(descriptor)
            throw FileInUse(path: path, reason: reason)
        }
        lock = descriptor
        writer = store.writer
        self.expireAfter = expireAfter
        startedWall = Date().timeIntervalSince1970
    }

    deinit { close(lock) }

    /// The database file is locked by another process (or cannot be opened).
    public struct FileInUse: Error, CustomStringConvertible {
        /// The file.
        public var path: String
        /// Why it cannot be used.
        public var reason: String
        public var description: String { "cannot keep session records in \(path): \(reason)" }
    }

    /// Seconds since 1970 by the wall clock as it was at start, advanced by the
    /// monotonic clock since.
    private var now: Double { startedWall + (ContinuousClock.now - startedAt).inSeconds }

    /// Records of ended lives written before this are due: deleted, never restored.
    private var dueBefore: Double { now - expireAfter.inSeconds }

    private func isAlive(_ owner: String, nodeTimeout: Duration) -> ClusterNode? {
        live.withLock { live in
            guard let entry = live[owner], ContinuousClock.now - entry.renewedAt < nodeTimeout else { return nil }
            return entry.node
        }
    }

    private var liveIDs: [String] { live.withLock { Array($0.keys) } }

    /// The key session tokens are tagged with, kept in the file: a token made before a
    /// restart is recognised after it.
    public func agreedTokenKey() async throws -> [UInt8] {
        let proposed = Hex.random(bytes: 32)
        let stored = try await writer.write { db in
            try db.execute(sql: "INSERT INTO setting (name, value) VALUES ('tokenKey', ?) ON CONFLICT(name) DO NOTHING", arguments: [proposed])
            return try String.fetchOne(db, sql: "SELECT value FROM setting WHERE name = 'tokenKey'")
        }
        guard let key = Hex.bytes(stored ?? proposed), key.count == 32 else { throw TokenKeyUnreadable() }
        return key
    }

    /// The stored token key is not 64 hex digits (written by hand?).
    struct TokenKeyUnreadable: Error, CustomStringConvertible {
        var description: String { "the setting table's tokenKey is not 64 hex digits" }
    }

    public func renewLease(_ node: ClusterNode, nodeTimeout: Duration, recordsExpireAfter: Duration) async throws -> LeaseRenewal {
        let renewedAt = ContinuousClock.now
        let expired = live.withLock { live -> Bool in
            defer { live[node.id] = (node, max(live[node.id]?.renewedAt ?? renewedAt, renewedAt)) }
            guard let previous = live[node.id] else { return false }
            return renewedAt - previous.renewedAt >= nodeTimeout
        }
        // The node's time of life, by which an ended life's records age; and the
        // housekeeping: records of ended lives due, their nodes once they have none,
        // tombstones (`remove`) as old. Bounded: 1,000 records a renewal.
        let (now, due, alive) = (self.now, dueBefore, liveIDs)
        try await writer.write { db in
            try db.execute(
                sql: "INSERT INTO sessionNode (id, seenAt) VALUES (?, ?) ON CONFLICT(id) DO UPDATE SET seenAt = excluded.seenAt",
                arguments: [node.id, now])
            try db.execute(
                sql: """
                    DELETE FROM sessionRecord WHERE lookup IN (
                        SELECT r.lookup FROM sessionRecord r LEFT JOIN sessionNode n ON n.id = r.owner
                        WHERE r.updatedAt < ? AND (r.ended OR (r.owner NOT IN (SELECT value FROM json_each(?)) AND coalesce(n.seenAt, 0) < ?))
                        LIMIT 1000)
                    """, arguments: [due, Self.json(alive), due])
            try db.execute(
                sql: """
                    DELETE FROM sessionNode WHERE id NOT IN (SELECT value FROM json_each(?))
                    AND NOT EXISTS (SELECT 1 FROM sessionRecord r WHERE r.owner = sessionNode.id)
                    """, arguments: [Self.json(alive)])
        }
        return LeaseRenewal(previousExpired: expired)
    }

    public func leave(_ node: ClusterNode) async throws {
        live.withLock { _ = $0.removeValue(forKey: node.id) }
        let now = self.now
        // Its records age from its end, not from their last change.
        try await writer.write { db in
            try db.execute(sql: "UPDATE sessionNode SET seenAt = ? WHERE id = ?", arguments: [now, node.id])
        }
    }

    public func save(_ records: [SessionRecord]) async throws -> SavedRecords {
        guard !records.isEmpty else { return SavedRecords() }
        let now = self.now
        let refused = try await writer.write { db -> [String] in
            var refused: [String] = []
            for record in records {
                // A record another life owns now, or that ended, is not written; one of a
                // lower rev than the stored one is late and changes nothing.
                if let row = try Row.fetchOne(db, sql: "SELECT owner, rev, ended FROM sessionRecord WHERE lookup = ?", arguments: [record.lookup]) {
                    let (owner, rev, ended): (String, Int64, Bool) = (row[0], row[1], row[2])
                    guard owner == record.owner, !ended else {
                        refused.append(record.lookup)
                        continue
                    }
                    guard rev <= Int64(record.rev) else { continue }
                    try db.execute(
                        sql: "UPDATE sessionRecord SET secretDigest = ?, snapshot = ?, rev = ?, updatedAt = ? WHERE lookup = ?",
                        arguments: [Data(record.secretDigest), record.snapshot, Int64(record.rev), now, record.lookup])
                } else {
                    try db.execute(
                        sql: "INSERT INTO sessionRecord (lookup, secretDigest, owner, snapshot, rev, updatedAt) VALUES (?, ?, ?, ?, ?, ?)",
                        arguments: [record.lookup, Data(record.secretDigest), record.owner, record.snapshot, Int64(record.rev), now])
                }
            }
            return refused
        }
        return SavedRecords(refused: refused)
    }

    public func remove(lookups: [String], by node: ClusterNode) async throws -> SavedRecords {
        guard !lookups.isEmpty else { return SavedRecords() }
        let now = self.now
        // Tombstones, not deletes: a batch that took a snapshot before `quit` and
        // writes it after is refused. Housekeeping deletes them once due.
        let refused = try await writer.write { db -> [String] in
            var refused: [String] = []
            for lookup in lookups {
                let owner = try Row.fetchOne(db, sql: "SELECT owner, ended FROM sessionRecord WHERE lookup = ?", arguments: [lookup])
                if let owner, owner[0] as String != node.id, !(owner[1] as Bool) {
                    refused.append(lookup)
                    continue
                }
                try db.execute(
                    sql: """
                        INSERT INTO sessionRecord (lookup, secretDigest, owner, snapshot, rev, updatedAt, ended) VALUES (?, x'', ?, '{}', 0, ?, 1)
                        ON CONFLICT(lookup) DO UPDATE SET ended = 1, snapshot = '{}', secretDigest = x'', updatedAt = excluded.updatedAt
                        """, arguments: [lookup, node.id, now])
            }
            return refused
        }
        return SavedRecords(refused: refused)
    }

    public func find(lookup: String, nodeTimeout: Duration) async throws -> SessionLocation? {
        let due = dueBefore
        guard
            let row = try await writer.read({ db in
                try Row.fetchOne(
                    db,
                    sql: """
                        SELECT r.secretDigest, r.owner, r.snapshot, r.rev, r.updatedAt, n.seenAt FROM sessionRecord r
                        LEFT JOIN sessionNode n ON n.id = r.owner WHERE r.lookup = ? AND NOT r.ended
                        """, arguments: [lookup])
            })
        else { return nil }
        let owner: String = row[1]
        let record = SessionRecord(
            lookup: lookup, secretDigest: [UInt8]((row[0] as Data?) ?? Data()), owner: owner, snapshot: row[2], rev: Int(row[3] as Int64))
        if let alive = isAlive(owner, nodeTimeout: nodeTimeout) {
            return SessionLocation(record: record, ownerAddress: alive.address, ownerWeb: alive.web, ownerAlive: true)
        }
        // An ended life's session nobody resumed in time: due, never restored.
        let updatedAt: Double = row[4]
        let seenAt: Double? = row[5]
        guard max(updatedAt, seenAt ?? 0) >= due else { return nil }
        return SessionLocation(record: record, ownerAddress: "", ownerAlive: false)
    }

    public func claim(lookup: String, from previousOwner: String, for node: ClusterNode, nodeTimeout: Duration) async throws -> SessionRecord? {
        guard isAlive(previousOwner, nodeTimeout: nodeTimeout) == nil else { return nil }
        let now = self.now
        return try await writer.write { db in
            try db.execute(
                sql: "UPDATE sessionRecord SET owner = ?, updatedAt = ?, rev = rev + ? WHERE lookup = ? AND owner = ? AND NOT ended",
                arguments: [node.id, now, Int64(SessionRecord.maximumLag), lookup, previousOwner])
            guard db.changesCount > 0,
                let row = try Row.fetchOne(db, sql: "SELECT secretDigest, snapshot, rev FROM sessionRecord WHERE lookup = ?", arguments: [lookup])
            else { return nil }
            return SessionRecord(
                lookup: lookup, secretDigest: [UInt8]((row[0] as Data?) ?? Data()), owner: node.id, snapshot: row[1], rev: Int(row[2] as Int64))
        }
    }

    public func release(lookup: String, by node: ClusterNode, to previousOwner: String) async throws {
        try await writer.write { db in
            try db.execute(
                sql: "UPDATE sessionRecord SET owner = ?, rev = max(0, rev - ?) WHERE lookup = ? AND owner = ?",
                arguments: [previousOwner, Int64(SessionRecord.maximumLag), lookup, node.id])
        }
    }

    public func lost(_ lookups: [String], by node: ClusterNode) async throws -> [String] {
        guard !lookups.isEmpty else { return [] }
        return try await writer.read { db in
            try String.fetchAll(
                db, sql: "SELECT lookup FROM sessionRecord WHERE lookup IN (SELECT value FROM json_each(?)) AND owner <> ?",
                arguments: [Self.json(lookups), node.id])
        }
    }

    public func liveNodes(nodeTimeout: Duration) async throws -> [ClusterNode]? {
        let now = ContinuousClock.now
        return live.withLock { live in live.values.filter { now - $0.renewedAt < nodeTimeout }.map(\.node) }
    }

    /// A JSON array of strings, for `json_each`: one bound argument, however many.
    private static func json(_ strings: [String]) -> String {
        var out: [UInt8] = [UInt8(ascii: "[")]
        for (index, string) in strings.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            JSON.string(string).write(into: &out)
        }
        out.append(UInt8(ascii: "]"))
        return String(decoding: out, as: UTF8.self)
    }
}

extension Duration {
    fileprivate var inSeconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

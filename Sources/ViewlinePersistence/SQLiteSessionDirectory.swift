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
/// One process owns the file (an exclusive `flock`, taken before the store opens it
/// and held for the process's life: ``lock(path:)``): a second server on the same
/// file refuses to start. So the only live node is this process's, and every other
/// owner a record names is a life of the server that ended, whose sessions may be
/// restored at once, without waiting out a node timeout. Leases are this process's
/// monotonic clock, held in memory: a renewal never waits on the file (a long write
/// of the store's cannot stop the node serving).
///
/// The wall clock is the only clock that spans a restart, and records are stamped
/// with it as it reads when they are written (a clock corrected after boot stamps
/// the corrected time). Records of sessions nobody resumed within `expireAfter` of
/// their node's end are deleted, at most 1,000 a renewal, so a start never waits on
/// a large file; one that is due is never restored. A step of the wall clock between
/// two lives misjudges the age of what the earlier one left by the step.
///
/// ```swift
/// let lock = try SQLiteSessionDirectory.lock(path: "viewline.sqlite")
/// let store = try SQLiteStore.open(path: "viewline.sqlite")
/// let directory = SQLiteSessionDirectory(store, lock: lock, expireAfter: .seconds(300))
/// let cluster = Cluster(directory: directory, nodeTimeout: .seconds(5), tokenKey: try await directory.agreedTokenKey())
/// let server = try ViewlineServer(apps: apps, services: services, cluster: cluster)
/// ```
public final class SQLiteSessionDirectory: SessionDirectory {
    private let writer: any DatabaseWriter
    /// How long a record of an ended life waits for its client.
    public let expireAfter: Duration
    /// The file's exclusive lock, held while the directory lives.
    private let lock: FileLock
    /// Housekeeping (the node's row, deletes) runs off the renewal, one at a time.
    private let housekeeping = Mutex(false)
    /// The nodes of this process that hold a lease (one, while the server runs), with
    /// their last renewal.
    private let live = Mutex<[String: (node: ClusterNode, renewedAt: ContinuousClock.Instant)]>([:])

    /// The directory over `store`'s database, the file `lock` holds.
    public init(_ store: SQLiteStore, lock: FileLock, expireAfter: Duration) {
        self.lock = lock
        writer = store.writer
        self.expireAfter = expireAfter
    }

    /// Takes the exclusive lock on the database file at `path` (created if missing),
    /// before anything opens it: a second server on the file fails here, having
    /// written nothing. Throws ``FileInUse`` when another process holds it.
    public static func lock(path: String) throws -> FileLock {
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw FileInUse(path: path, reason: String(cString: strerror(errno))) }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            let reason = errno == EWOULDBLOCK ? "another viewline-server uses it" : String(cString: strerror(errno))
            close(descriptor)
            throw FileInUse(path: path, reason: reason)
        }
        return FileLock(descriptor: descriptor)
    }

    /// An exclusive `flock` on a database file, released when it is freed (or the
    /// process ends, however it ends).
    public final class FileLock: Sendable {
        let descriptor: Int32
        init(descriptor: Int32) { self.descriptor = descriptor }
        deinit { close(descriptor) }
    }

    /// The database file is locked by another process (or cannot be opened).
    public struct FileInUse: Error, CustomStringConvertible {
        /// The file.
        public var path: String
        /// Why it cannot be used.
        public var reason: String
        public var description: String { "cannot keep session records in \(path): \(reason)" }
    }

    /// Seconds since 1970 by the wall clock, now.
    private var now: Double { Date().timeIntervalSince1970 }

    /// Records of ended lives written before this are due: deleted, never restored.
    private var dueBefore: Double { now - expireAfter.seconds }

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
        // tombstones (`remove`) as old. Bounded: 1,000 records a round, one round at a
        // time, off the renewal: the lease is this process's, and a long write of the
        // store's (a large sync, a full disk) must not make the node stop serving.
        let begin = housekeeping.withLock { running -> Bool in
            defer { running = true }
            return !running
        }
        if begin {
            let (now, due, alive, writer) = (self.now, dueBefore, Self.json(liveIDs), writer)
            // One housekeeping pass at a time, bounded by the writer; the lease renewal
            // that started it does not wait for it.
            Task {
                defer { self.housekeeping.withLock { $0 = false } }
                try? await writer.write { db in
                    try db.execute(
                        sql: "INSERT INTO sessionNode (id, seenAt) VALUES (?, ?) ON CONFLICT(id) DO UPDATE SET seenAt = excluded.seenAt",
                        arguments: [node.id, now])
                    try db.execute(
                        sql: """
                            DELETE FROM sessionRecord WHERE lookup IN (
                                SELECT r.lookup FROM sessionRecord r LEFT JOIN sessionNode n ON n.id = r.owner
                                WHERE r.updatedAt < ? AND (r.ended OR (r.owner NOT IN (SELECT value FROM json_each(?)) AND coalesce(n.seenAt, 0) < ?))
                                LIMIT 1000)
                            """, arguments: [due, alive, due])
                    try db.execute(
                        sql: """
                            DELETE FROM sessionNode WHERE id NOT IN (SELECT value FROM json_each(?))
                            AND NOT EXISTS (SELECT 1 FROM sessionRecord r WHERE r.owner = sessionNode.id)
                            """, arguments: [alive])
                }
            }
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

    /// A row as the directory reads it: `nil` when a column is not what it writes (a
    /// file edited by hand, damaged): such a row is no record, never a crash.
    struct Stored {
        var digest: [UInt8]
        var owner: String
        var snapshot: String
        var rev: Int64
        var ended: Bool
        var updatedAt: Double
        var seenAt: Double?

        static let columns = "r.secretDigest, r.owner, r.snapshot, r.rev, r.ended, r.updatedAt, n.seenAt"
        static let from = "FROM sessionRecord r LEFT JOIN sessionNode n ON n.id = r.owner WHERE r.lookup = ?"

        init?(_ row: Row) {
            guard let digest = Data.fromDatabaseValue(row[0] as DatabaseValue), let owner = String.fromDatabaseValue(row[1] as DatabaseValue),
                let snapshot = String.fromDatabaseValue(row[2] as DatabaseValue), let rev = Int64.fromDatabaseValue(row[3] as DatabaseValue),
                let ended = Bool.fromDatabaseValue(row[4] as DatabaseValue), let updatedAt = Double.fromDatabaseValue(row[5] as DatabaseValue)
            else { return nil }
            (self.digest, self.owner, self.snapshot, self.rev, self.ended, self.updatedAt) = ([UInt8](digest), owner, snapshot, rev, ended, updatedAt)
            seenAt = Double.fromDatabaseValue(row[6] as DatabaseValue)
        }

        /// The row of `lookup`, if there is one the directory can read.
        static func fetch(_ db: Database, _ lookup: String) throws -> Stored? {
            try Row.fetchOne(db, sql: "SELECT \(columns) \(from)", arguments: [lookup]).flatMap(Stored.init)
        }
    }

    public func save(_ records: [SessionRecord]) async throws -> SavedRecords {
        guard !records.isEmpty else { return SavedRecords() }
        let now = self.now
        let refused = try await writer.write { db -> [String] in
            var refused: [String] = []
            for record in records {
                // A record another life owns now, or that ended, is not written; one of a
                // lower rev than the stored one is late and changes nothing. A row this
                // directory cannot read is replaced.
                if let stored = try Stored.fetch(db, record.lookup) {
                    guard stored.owner == record.owner, !stored.ended else {
                        refused.append(record.lookup)
                        continue
                    }
                    guard stored.rev <= Int64(record.rev) else { continue }
                }
                try db.execute(
                    sql: """
                        INSERT OR REPLACE INTO sessionRecord (lookup, secretDigest, owner, snapshot, rev, updatedAt, ended)
                        VALUES (?, ?, ?, ?, ?, ?, 0)
                        """,
                    arguments: [record.lookup, Data(record.secretDigest), record.owner, record.snapshot, Int64(record.rev), now])
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
                if let stored = try Stored.fetch(db, lookup), stored.owner != node.id, !stored.ended {
                    refused.append(lookup)
                    continue
                }
                try db.execute(
                    sql: """
                        INSERT OR REPLACE INTO sessionRecord (lookup, secretDigest, owner, snapshot, rev, updatedAt, ended)
                        VALUES (?, x'', ?, '{}', 0, ?, 1)
                        """, arguments: [lookup, node.id, now])
            }
            return refused
        }
        return SavedRecords(refused: refused)
    }

    public func find(lookup: String, nodeTimeout: Duration) async throws -> SessionLocation? {
        let due = dueBefore
        guard let stored = try await writer.read({ db in try Stored.fetch(db, lookup) }), !stored.ended else { return nil }
        let record = SessionRecord(
            lookup: lookup, secretDigest: stored.digest, owner: stored.owner, snapshot: stored.snapshot, rev: Int(clamping: stored.rev))
        if let alive = isAlive(stored.owner, nodeTimeout: nodeTimeout) {
            return SessionLocation(record: record, ownerAddress: alive.address, ownerWeb: alive.web, ownerAlive: true)
        }
        // An ended life's session nobody resumed in time: due, never restored.
        guard max(stored.updatedAt, stored.seenAt ?? 0) >= due else { return nil }
        return SessionLocation(record: record, ownerAddress: "", ownerAlive: false)
    }

    public func claim(lookup: String, from previousOwner: String, for node: ClusterNode, nodeTimeout: Duration) async throws -> SessionRecord? {
        guard isAlive(previousOwner, nodeTimeout: nodeTimeout) == nil else { return nil }
        let now = self.now
        return try await writer.write { db in
            guard let stored = try Stored.fetch(db, lookup), stored.owner == previousOwner, !stored.ended else { return nil }
            // Raised by the lag, from a rev kept sane (a row edited by hand cannot overflow it).
            let rev = min(max(0, stored.rev), Int64.max / 4) + Int64(SessionRecord.maximumLag)
            try db.execute(
                sql: "UPDATE sessionRecord SET owner = ?, updatedAt = ?, rev = ? WHERE lookup = ?", arguments: [node.id, now, rev, lookup])
            return SessionRecord(lookup: lookup, secretDigest: stored.digest, owner: node.id, snapshot: stored.snapshot, rev: Int(rev))
        }
    }

    public func release(lookup: String, by node: ClusterNode, to previousOwner: String) async throws {
        try await writer.write { db in
            try db.execute(
                sql: "UPDATE sessionRecord SET owner = ?, rev = max(0, rev - ?) WHERE lookup = ? AND owner = ? AND typeof(rev) = 'integer'",
                arguments: [previousOwner, Int64(SessionRecord.maximumLag), lookup, node.id])
        }
    }

    public func handOver(lookup: String, by node: ClusterNode, to successor: String) async throws {
        try await writer.write { db in
            try db.execute(
                sql: "UPDATE sessionRecord SET owner = ? WHERE lookup = ? AND owner = ? AND NOT ended", arguments: [successor, lookup, node.id])
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

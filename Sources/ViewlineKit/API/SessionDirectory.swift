import Foundation

/// Where the nodes of a cluster keep their session records, so a session outlives
/// its node: a node that gets an `attach` for a session it does not hold looks the
/// token up here, redirects the client to the owner while the owner is alive
/// (`moved`), and restores the session from its record when it is not.
///
/// Implement it over the database the nodes share (`PostgresSessionDirectory`). The
/// runtime calls it off the command path: records are written in batches, and a
/// heartbeat keeps the node alive.
public protocol SessionDirectory: Sendable {
    /// Records that `node` is alive now and reachable at its address; clears records
    /// older than `expiredBefore` whose owner is not alive.
    func heartbeat(_ node: ClusterNode, expiredBefore: Date) async throws
    /// Says `node` is gone (a clean shutdown): its sessions can be restored at once.
    func leave(_ node: ClusterNode) async throws
    /// Inserts or replaces records (one transaction).
    func save(_ records: [SessionRecord]) async throws
    /// Deletes the record of a session that ended.
    func remove(lookup: String) async throws
    /// The record for a token's lookup part, with where its owner is and whether its
    /// heartbeat is newer than `aliveSince`.
    func find(lookup: String, aliveSince: Date) async throws -> SessionLocation?
    /// Makes `node` the owner if `previousOwner` still is. Returns whether it did
    /// (another node may have claimed it first).
    func claim(lookup: String, from previousOwner: String, for node: ClusterNode) async throws -> Bool
}

/// A node of a cluster: a name unique to this process's life, and the address
/// clients reach it at.
public struct ClusterNode: Sendable, Equatable {
    public var id: String
    public var address: String

    public init(id: String, address: String) {
        self.id = id
        self.address = address
    }
}

/// A session as the cluster keeps it: who owns it, how to check its token, and the
/// last snapshot of its views, user and presented alert (JSON).
public struct SessionRecord: Sendable, Equatable {
    /// The token's public part (the first 16 characters).
    public var lookup: String
    /// SHA-256 of the token's secret part: the record never holds the token.
    public var secretDigest: [UInt8]
    /// The id of the node that runs the session.
    public var owner: String
    /// The session's snapshot (``Session/record``), as JSON text.
    public var snapshot: String

    public init(lookup: String, secretDigest: [UInt8], owner: String, snapshot: String) {
        self.lookup = lookup
        self.secretDigest = secretDigest
        self.owner = owner
        self.snapshot = snapshot
    }
}

/// A record found by ``SessionDirectory/find(lookup:aliveSince:)``.
public struct SessionLocation: Sendable, Equatable {
    public var record: SessionRecord
    /// The owner's address, as it last announced it.
    public var ownerAddress: String
    /// Whether the owner's heartbeat is recent.
    public var ownerAlive: Bool

    public init(record: SessionRecord, ownerAddress: String, ownerAlive: Bool) {
        self.record = record
        self.ownerAddress = ownerAddress
        self.ownerAlive = ownerAlive
    }
}

import Foundation

/// Where the nodes of a cluster keep their session records, so a session outlives
/// its node: a node that gets an `attach` for a session it does not hold looks the
/// token up here, redirects the client to the owner while the owner is alive
/// (`moved`), and restores the session from its record when it is not.
///
/// Implement it over the database the nodes share (`PostgresSessionDirectory`). The
/// runtime calls it off the command path: records are written in batches, and a
/// lease renewed every fifth of the node timeout keeps the node alive.
///
/// Every time is the directory's own clock (the database's `now()`), never a
/// node's: a node whose clock is wrong behaves like any other. A node is alive
/// while its last renewal is younger than the node timeout by that clock.
///
/// Every call ends when its task is cancelled (throwing, or returning what it
/// had done): a node leaving the cluster gives up on its last writes after one node
/// timeout by cancelling them, and its loops end the same way.
public protocol SessionDirectory: Sendable {
    /// Renews `node`'s lease now (by the directory's clock) and records its address;
    /// clears records older than `recordsExpireAfter` whose owner is not alive. Says
    /// whether the lease it renewed had already expired (older than `nodeTimeout` by
    /// the directory's clock when the renewal ran): a renewal sent in time but run
    /// late is a lapse, whatever the node's own clock says.
    func renewLease(_ node: ClusterNode, nodeTimeout: Duration, recordsExpireAfter: Duration) async throws -> LeaseRenewal
    /// Says `node` is gone (a clean shutdown): its sessions can be restored at once.
    func leave(_ node: ClusterNode) async throws
    /// Inserts or replaces records (one transaction); a record another node owns now
    /// is left as it is, and a stored record of a higher ``SessionRecord/rev`` is kept
    /// (the write arrived late; it counts as written). A record whose row another
    /// transaction holds locked (a store write of that session waiting on another row)
    /// is skipped, not waited for: one session cannot hold back the others' records.
    /// Says which were refused (sessions the writer no longer owns) and which were
    /// skipped (to be written again).
    func save(_ records: [SessionRecord]) async throws -> SavedRecords
    /// Ends the records of sessions that ended on `node`, for good, in one step (a
    /// batch's, or one `quit`'s): from then on a ``save(_:)`` of one is refused (a
    /// batch that took its snapshot before `quit` and writes it after never brings it
    /// back) and ``find(lookup:nodeTimeout:)`` finds nothing. A lookup never written
    /// is ended too.
    ///
    /// Fenced like ``save(_:)``: a live record another node owns is left as it is (a
    /// paused node's sweeper never ends a session its successor restored); those are
    /// `refused` (sessions `node` no longer owns). Like ``save(_:)``, a row another
    /// transaction holds is `skipped`, not waited for (end it again later).
    func remove(lookups: [String], by node: ClusterNode) async throws -> SavedRecords
    /// The record for a token's lookup part, with where its owner is and whether its
    /// lease is younger than `nodeTimeout`.
    func find(lookup: String, nodeTimeout: Duration) async throws -> SessionLocation?
    /// Makes `node` the owner if `previousOwner` still is and its lease expired
    /// (older than `nodeTimeout`, or it left), in one step. Returns the record as it
    /// stands once claimed, which is what `node` restores: the previous owner may
    /// have written a newer one since ``find(lookup:nodeTimeout:)`` (its writes are
    /// refused only from the claim on). `nil` when it did not claim (another node
    /// claimed it first, or the owner came back).
    ///
    /// The same step raises the record's ``SessionRecord/rev`` by
    /// ``SessionRecord/maximumLag`` and returns it raised: the new owner's revs start
    /// there, above anything the previous owner sent (it sends fewer events than that
    /// between two records), so no two owners' revs overlap — not even those of two
    /// nodes that restored the same record, the first dying before it wrote one.
    func claim(lookup: String, from previousOwner: String, for node: ClusterNode, nodeTimeout: Duration) async throws -> SessionRecord?
    /// Gives a record back to `previousOwner` (a node that claimed it but cannot hold
    /// it, having written nothing for it), lowering its rev by what the claim raised.
    func release(lookup: String, by node: ClusterNode, to previousOwner: String) async throws
    /// Makes `successor` the owner of a record `node` owns and cannot restore (one a
    /// newer release wrote, which `successor` runs), the record as it stands: its rev
    /// stays where `node`'s claim raised it, above anything an earlier owner sent.
    /// `successor` restores it when the client it was sent to attaches (a record its
    /// node owns and holds no session for). By default it throws
    /// ``HandOverUnsupported``: the session then waits for a node that can claim it.
    func handOver(lookup: String, by node: ClusterNode, to successor: String) async throws
    /// Of `lookups`, those whose record another node owns now (claimed while `node`
    /// could not renew its lease). A lookup with no record is not lost: no other
    /// node could have restored it.
    func lost(_ lookups: [String], by node: ClusterNode) async throws -> [String]
    /// The nodes that hold a lease younger than `nodeTimeout` now (this one
    /// included), by id: the cluster's `live nodes` figure and the inspector's links
    /// to the other nodes. `nil` when the directory cannot tell (the default).
    func liveNodes(nodeTimeout: Duration) async throws -> [ClusterNode]?
    /// Every node's renewal count (``SessionLocation/ownerRenewals``), by id, or `nil`
    /// when the directory does not count renewals (the default): what a node watches
    /// to time each other node's silence on its own monotonic clock.
    func nodeRenewals() async throws -> [String: Int64]?
    /// Makes `node` the owner if `previousOwner` still is and has not renewed since
    /// its renewal count was `renewals` (`nil`: it left, its lease row gone), in one
    /// step, counting the claim against `previousOwner` (its next renewal reports it:
    /// ``LeaseRenewal/claims``). No clock decides: the caller has timed the owner's
    /// silence itself. Otherwise as ``claim(lookup:from:for:nodeTimeout:)``, which it
    /// calls by default (a directory that does not count renewals).
    func claim(lookup: String, from previousOwner: String, renewals: Int64?, for node: ClusterNode, nodeTimeout: Duration) async throws
        -> SessionRecord?
}

extension SessionDirectory {
    /// Not supported: throws ``HandOverUnsupported``.
    public func handOver(lookup: String, by node: ClusterNode, to successor: String) async throws {
        throw HandOverUnsupported()
    }
    /// Cannot tell: `nil`.
    public func liveNodes(nodeTimeout: Duration) async throws -> [ClusterNode]? { nil }
    /// Renewals not counted: `nil` (claims are judged by the directory's clock).
    public func nodeRenewals() async throws -> [String: Int64]? { nil }
    /// The clock-based ``claim(lookup:from:for:nodeTimeout:)``, for a directory that
    /// does not count renewals.
    public func claim(lookup: String, from previousOwner: String, renewals: Int64?, for node: ClusterNode, nodeTimeout: Duration) async throws
        -> SessionRecord?
    {
        try await claim(lookup: lookup, from: previousOwner, for: node, nodeTimeout: nodeTimeout)
    }
}

/// A directory that cannot hand a record to another node
/// (``SessionDirectory/handOver(lookup:by:to:)``'s default).
public struct HandOverUnsupported: Error, CustomStringConvertible {
    /// The error.
    public init() {}
    public var description: String { "this session directory cannot hand a record to another node" }
}

/// What ``SessionDirectory/save(_:)`` did not write, by lookup.
public struct SavedRecords: Sendable, Equatable {
    /// Records of sessions another node owns now (or that ended): never written.
    public var refused: [String]
    /// Records whose rows were locked by another transaction: written with a later batch.
    public var skipped: [String]

    /// An outcome: `refused` and `skipped` lookups (none: every record was written).
    public init(refused: [String] = [], skipped: [String] = []) {
        self.refused = refused
        self.skipped = skipped
    }
}

/// What a lease renewal found, by the directory's clock.
public struct LeaseRenewal: Sendable, Equatable {
    /// The renewed lease had already expired when the renewal ran (another node may
    /// have claimed the node's sessions meanwhile); `false` for a node's first lease.
    public var previousExpired: Bool
    /// How many of this node's sessions other nodes have claimed in all, when the
    /// directory counts claims (``SessionDirectory/claim(lookup:from:renewals:for:nodeTimeout:)``):
    /// more than at the previous renewal is a lapse, whatever either clock says.
    public var claims: Int64?

    /// A renewal whose previous lease had (`true`) or had not expired, and the claims
    /// counted against the node so far (`nil`: not counted).
    public init(previousExpired: Bool, claims: Int64? = nil) {
        self.previousExpired = previousExpired
        self.claims = claims
    }
}

/// A node of a cluster: a name unique to this process's life, and the address
/// clients reach it at.
public struct ClusterNode: Sendable, Equatable {
    /// The node's name for this process's life (`n…`), the owner in session records.
    public var id: String
    /// Where clients reach its line listener (`host:port`).
    public var address: String
    /// Where the node's web page is (`http://host:port/`), or `""` without one: what
    /// `moved` tells a browser page, which speaks WebSocket rather than TCP.
    public var web: String
    /// The release the node runs, as it says in `welcome` (`viewline/1.3`, or the
    /// app's own name): what the operator reads in `info` and `inspect` during a
    /// rolling deploy. `""` when the directory does not keep it.
    public var release: String
    /// The version of each view's record the node writes, by view (views it does not
    /// record are absent): a record holding a view of a higher version than a node
    /// knows is restored only by a node that knows it (`moved` there).
    public var records: [String: Int]

    /// A node named `id`, reached at `address` (and its page at `web`), running
    /// `release` with `records`' versions of the views' records.
    public init(id: String, address: String, web: String = "", release: String = "", records: [String: Int] = [:]) {
        self.id = id
        self.address = address
        self.web = web
        self.release = release
        self.records = records
    }

    /// Whether this node reads every view of a record at the given versions (each
    /// view's recorded version at most the one this node writes).
    public func reads(_ versions: [String: Int]) -> Bool {
        versions.allSatisfy { view, version in (records[view] ?? 0) >= version }
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
    /// The session's snapshot (what the session keeps of its states, user and alerts), as JSON text.
    public var snapshot: String
    /// The session's `rev` when the snapshot was taken: a directory never replaces a
    /// record with one of a lower rev (a write that arrives late, after a newer one).
    public var rev: Int

    /// How many events a session's record may trail what its owner sent: far more than
    /// a node sends between two record batches, far less than a rev can hold. A claim
    /// raises the record's rev this far (``SessionDirectory/claim(lookup:from:for:nodeTimeout:)``).
    public static let maximumLag = 1 << 32

    /// A record of the session whose token starts with `lookup`, held by `owner`.
    public init(lookup: String, secretDigest: [UInt8], owner: String, snapshot: String, rev: Int = 0) {
        self.lookup = lookup
        self.secretDigest = secretDigest
        self.owner = owner
        self.snapshot = snapshot
        self.rev = rev
    }
}

/// A record found by ``SessionDirectory/find(lookup:nodeTimeout:)``.
public struct SessionLocation: Sendable, Equatable {
    /// The session's record.
    public var record: SessionRecord
    /// The owner's address, as it last announced it.
    public var ownerAddress: String
    /// The owner's web page (`http://host:port/`), `""` if it serves none.
    public var ownerWeb: String
    /// Whether the owner's lease is valid (by the directory's clock).
    public var ownerAlive: Bool
    /// How many times the owner has renewed its lease, when the directory counts
    /// renewals (``SessionDirectory/nodeRenewals()``); `nil` when it does not, or when
    /// the owner left (its lease row gone). A node that counts them claims only once
    /// it has seen this number unchanged for a node timeout by its own monotonic
    /// clock, so no step of the database's clock makes two owners.
    public var ownerRenewals: Int64?

    /// A found record and what is known of its owner.
    public init(record: SessionRecord, ownerAddress: String, ownerWeb: String = "", ownerAlive: Bool, ownerRenewals: Int64? = nil) {
        self.record = record
        self.ownerAddress = ownerAddress
        self.ownerWeb = ownerWeb
        self.ownerAlive = ownerAlive
        self.ownerRenewals = ownerRenewals
    }
}

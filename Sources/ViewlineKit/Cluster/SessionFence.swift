/// What a store checks before it writes on behalf of a session, in a cluster: the
/// node must hold the session's lease at that moment by the database's clock, or
/// the write takes no effect.
///
/// The runtime sets ``current`` while a session's command or background work runs
/// (never on a single node), so view-model code writes as it always does and a store
/// that shares the cluster's database fences every such write in the statement's own
/// transaction: a node that was paused mid-`save`, or that lost its lease while a
/// write was on its way, writes nothing once another node may have claimed the session.
///
/// ```swift
/// // In a store over the cluster's database:
/// if let fence = SessionFence.current {
///     guard fence.isHeld else { throw SessionFenced() }
///     switch try await databaseSays(fence.session, fence.node, fence.nodeTimeout) {
///     case .held: break
///     case .leaseLapsed: fence.refused(); throw SessionFenced()
///     case .ownedElsewhere: fence.refusedOwnedElsewhere(); throw SessionFenced()
///     }
/// }
/// ```
public struct SessionFence: Sendable {
    /// The session's record key in the cluster's directory (its token's public part).
    public let session: String
    /// The node acting for the session: it must own the record.
    public let node: String
    /// The cluster's node timeout: the node's lease is valid while its last renewal is
    /// younger than this by the database's clock.
    public let nodeTimeout: Duration
    /// The order the session's writes were asked for (one per run of the session, shared
    /// by all its fences): a store refuses a write older than one already committed.
    public let writes: SessionWriteOrder
    private let held: @Sendable () -> Bool
    private let onRefusal: @Sendable () -> Void
    private let onElsewhere: @Sendable () -> Void

    /// A fence for `session` acting as `node`. The runtime makes one for each session of
    /// a ``Cluster``; a store's tests make their own.
    /// - Parameters:
    ///   - session: the session's record key (its token's public part).
    ///   - node: the node that acts for it.
    ///   - nodeTimeout: the cluster's lease length.
    ///   - isHeld: whether the node's lease is valid by its own clock.
    ///   - refused: called when a store refuses a write because the node's lease has
    ///     lapsed by the database's clock.
    ///   - ownedElsewhere: called when a store refuses a write because another node owns
    ///     the session (or it ended) while this node's lease is valid.
    ///   - writes: the order of the session's writes; pass the same one to every fence
    ///     of one run of the session. A new one by default (its writes are not ordered
    ///     against any other fence's).
    public init(
        session: String, node: String, nodeTimeout: Duration,
        isHeld: @escaping @Sendable () -> Bool = { true }, refused: @escaping @Sendable () -> Void = {},
        ownedElsewhere: @escaping @Sendable () -> Void = {}, writes: SessionWriteOrder = SessionWriteOrder()
    ) {
        self.session = session
        self.node = node
        self.nodeTimeout = nodeTimeout
        self.writes = writes
        self.held = isHeld
        self.onRefusal = refused
        self.onElsewhere = ownedElsewhere
    }

    init(session: String, cluster: Cluster, writes: SessionWriteOrder) {
        self.init(
            session: session, node: cluster.nodeID, nodeTimeout: cluster.nodeTimeout,
            isHeld: { cluster.isServing() }, refused: { cluster.writeFenced(session: session) },
            ownedElsewhere: { cluster.ownedElsewhere(session: session) }, writes: writes)
    }

    /// Whether the node's lease is valid by its own clock: a store refuses at once,
    /// without asking the database (and without ``refused()``: the node knows), when
    /// it is not.
    public var isHeld: Bool { held() }

    /// The database refused a write because this node's lease had lapsed by its clock:
    /// another node may have claimed any of its sessions. The node stops speaking for
    /// every session until its next renewal has closed those another node owns.
    public func refused() {
        onRefusal()
    }

    /// The database refused a write because another node owns this session's record
    /// (or the session ended) while this node's lease is valid now: its lease lapsed a
    /// while before (a claim needs that), so the node speaks for no session until it
    /// has checked them all, which it does at once (one query) instead of waiting for
    /// its next renewal; the lost ones are closed, the others served again.
    public func refusedOwnedElsewhere() {
        onElsewhere()
    }

    /// The session the current task acts for, in a cluster; `nil` on a single node and
    /// outside a session's work.
    @TaskLocal public static var current: SessionFence?
}

/// A store refused a write made for a session this node no longer holds (or may no
/// longer hold): the command fails with `unavailable`, and the client attaches again
/// (another node sends it on with `moved`).
public struct SessionFenced: ProtocolErrorConvertible, CustomStringConvertible {
    /// A store's refusal.
    public init() {}

    public var description: String { "the write was refused: this node does not hold the session's lease" }

    /// `unavailable`: attach again.
    public var protocolError: ProtocolError {
        ProtocolError(.unavailable, "this node no longer holds this session, so nothing was written; attach again to reach the node that does")
    }
}

/// A store refused a write of a session because a write of the same session asked
/// for later had already committed (``SessionWriteOrder``): nothing was written, so
/// the older text never replaces the newer one. Its command fails with `busy`; in
/// practice the client that asked for it has stopped waiting for the answer.
public struct SessionWriteSuperseded: ProtocolErrorConvertible, CustomStringConvertible {
    /// A store's refusal.
    public init() {}

    public var description: String { "the write was refused: a later write of this session committed first" }

    /// `busy`: a later write of the session won.
    public var protocolError: ProtocolError {
        ProtocolError(
            .busy, "a later change of this session was saved before this one, so this one was not saved; send it again if it should still win")
    }
}

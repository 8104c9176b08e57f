import CoreMetrics
import CSHA256
import Foundation
import Logging
import Synchronization

/// This node's part in a cluster: it keeps a record of every session it runs in the
/// shared ``SessionDirectory`` (written in batches, a few times a second, off the
/// command path), holds a lease it renews every fifth of the node timeout, and
/// answers an `attach` for a session it does not hold: `moved` to the owner while
/// the owner's lease is valid, or the session restored here once it expired.
///
/// One owner per session: lease times are the directory's clock (the database's),
/// never a node's. A node serves commands only while its own lease is valid by its
/// own monotonic clock — renewed less than `nodeTimeout − margin` ago, counted from
/// before the renewal was sent — so by the time another node may claim one of its
/// sessions (the lease expired by the database's clock) it has stopped serving.
/// When it renews again after a lapse (the database was unreachable, or the process
/// was paused), it serves nothing until it has closed the sessions another node
/// claimed meanwhile (`bye "session moved"`).
public final class Cluster: Sendable {
    /// The shared records.
    public let directory: any SessionDirectory
    /// This node's name, new at every start.
    public let nodeID: String
    /// A node whose heartbeat is older than this is gone; its sessions may be restored.
    public let nodeTimeout: Duration
    /// How often dirty session records are written.
    public let recordInterval: Duration
    /// The key session tokens are tagged with, shared by the cluster's nodes (`nil`:
    /// this node's own).
    let tokenKey: [UInt8]?
    private let advertised: Mutex<String?>
    private let advertisedWeb = Mutex("")
    /// What this node runs: its release and its views' record versions (set by the
    /// application it serves).
    private let runs = Mutex<(release: String, records: [String: Int])>(("", [:]))
    /// Sessions whose records changed since a batch last took them.
    private let dirty = Mutex(Dirty())
    /// The last "a record batch was slow" warning, and the slow batches since.
    private let slowBatches = Mutex<(lastWarning: ContinuousClock.Instant?, skipped: Int)>((nil, 0))
    /// Lookup parts of sessions that ended, whose records are still to be deleted.
    private let endedLookups = Mutex<Set<String>>([])
    /// Lookups of sessions that ended here for good (their records ended in the
    /// directory), the newest ``recentlyEndedKept``: an `attach` of one is answered
    /// "no session" without a query (a dead token replayed costs the database nothing).
    private let recentlyEnded = Mutex<(lookups: Set<String>, order: [String], next: Int)>(([], [], 0))
    static let recentlyEndedKept = 4096
    /// Opened by ``leave()`` (or when ``run()`` is cancelled): its loops stop.
    private let stopping = Latch()
    /// Opened once ``run()`` is over: the node left (its last records written, or
    /// given up on after one node timeout), or its run was cancelled.
    private let left = Latch()
    /// Whether ``run()``'s loops run (``leave()`` waits for it then), or never will
    /// (`closed`: ``leave()`` was called).
    private enum Loops { case notStarted, running, closed }
    private let loops = Mutex(Loops.notStarted)
    /// The lease as this node knows it, by its monotonic clock.
    private let lease = Mutex(LeaseState())
    /// The sessions this node holds (set at start): what a lapse is reconciled against.
    private let registry = Mutex(WeakRegistry())

    private struct LeaseState {
        /// When the last successful renewal was sent (monotonic).
        var renewedAt: ContinuousClock.Instant?
        /// Set after a lapse until the sessions lost meanwhile are closed.
        var reconciling = false
        /// Lapses noticed other than by a renewal (a fenced write): a renewal that
        /// began before one does not end the reconciling it calls for.
        var lapsesNoticed = 0
        /// Of those, the refusals for a session another node holds while this node's
        /// lease was fresh (``ownedElsewhere(session:)``): the node checks its sessions
        /// itself, at once, while nothing else was noticed.
        var elsewhereNoticed = 0
        /// That check is running (one at a time; it goes again while refusals come).
        var checkingNow = false
        /// Left the cluster: never serves again.
        var left = false
        /// When the oldest change the batch being written holds was made (monotonic):
        /// from the moment the batch takes its sessions, through their snapshots, to
        /// the write's end. A batch that hangs keeps it; one that fails hands it back
        /// with its sessions (``Dirty/since``).
        var inFlightSince: ContinuousClock.Instant?
        /// Not renewing: the records have been stale so long that this node lets its
        /// lease run out, so other nodes restore its sessions from what was written.
        var steppedDown = false
        /// Not renewing until then: the lease lapsed, and the heartbeat is left to age
        /// (``afterRenewal(now:)``).
        var agingUntil: ContinuousClock.Instant?
        /// When ``leave()`` was first called: its node timeout counts from here, not
        /// from when the loops in flight have ended (PROTOCOL §2.2).
        var leaveRequestedAt: ContinuousClock.Instant?
        /// How many of this node's sessions other nodes had claimed, as of its last
        /// renewal (`nil`: not yet known, or the directory does not count them): a
        /// renewal that finds more is a lapse, whatever any clock says.
        var claimsSeen: Int64?
        /// A session withheld output since the sessions were last told the lease is
        /// back (``outputWithheld()``): the next renewal that finds it valid tells
        /// them, lapse or not (a renewal sent before the lease ran out and answered
        /// after is no lapse, yet output was withheld in between).
        var withheld = false
    }

    /// Sessions whose records changed since a batch last took them, and when the
    /// oldest of those changes was made: what a node that died now would lose.
    private struct Dirty {
        /// Each session with the time of its oldest change no record holds.
        var sessions: [ObjectIdentifier: Unwritten] = [:]
        /// The oldest of those times (kept, not computed: every command reads it). A
        /// session dropped from `sessions` leaves it as it was until the next batch
        /// takes them all: the node counts as a little further behind, never less.
        var since: ContinuousClock.Instant?

        mutating func changed(_ session: Session, at now: ContinuousClock.Instant) {
            guard sessions[ObjectIdentifier(session)] == nil else { return }  // an older change is waiting
            sessions[ObjectIdentifier(session)] = Unwritten(session: session, since: now)
            if since == nil { since = now }
        }

        /// Puts sessions back (a batch that failed or did not write them), each with
        /// its own oldest change. Not the batch's oldest: a busy session the rate
        /// limit holds back for a later batch would otherwise carry the age of another
        /// session's change from batch to batch, and with busy sessions taking turns
        /// the node would count as ever further behind while every record is written.
        mutating func keep(_ kept: [Unwritten]) {
            for entry in kept {
                let id = ObjectIdentifier(entry.session)
                let oldest = min(entry.since, sessions[id]?.since ?? entry.since)
                sessions[id] = Unwritten(session: entry.session, since: oldest)
                if let locked = locked[id] {
                    // Still waiting on its row: counted against itself alone.
                    self.locked[id] = min(locked, oldest)
                } else {
                    since = min(since ?? oldest, oldest)
                }
            }
        }

        /// Sessions whose row another transaction held when a batch came (`SKIP
        /// LOCKED`), with their oldest change no record holds: they go with the next
        /// batch, and their age counts against their own commands only
        /// (``Cluster/acceptsCommands(for:now:)``), never the node's, so one session's
        /// lock cannot stall the others or make the node step down.
        var locked: [ObjectIdentifier: ContinuousClock.Instant] = [:]

        init(locked: [ObjectIdentifier: ContinuousClock.Instant] = [:]) { self.locked = locked }

        mutating func keepLocked(_ kept: [Unwritten]) {
            for entry in kept {
                let id = ObjectIdentifier(entry.session)
                let oldest = min(entry.since, sessions[id]?.since ?? entry.since, locked[id] ?? entry.since)
                sessions[id] = Unwritten(session: entry.session, since: oldest)
                locked[id] = oldest
            }
        }
    }

    /// A session whose record is behind, and since when.
    private struct Unwritten {
        let session: Session
        let since: ContinuousClock.Instant
    }

    private struct WeakRegistry {
        weak var sessions: SessionRegistry?
    }
    /// Lookups in progress, by the token's lookup part, with the connections waiting
    /// on each: two connections attaching to the same orphaned session at once share
    /// one restore (the first runs it; the others wait for it to end).
    private let inFlight = Mutex<[String: [CheckedContinuation<Void, Never>]]>([:])
    /// Lookups of sessions recorded by a newer release that no live node reads, until
    /// when they are answered `unavailable` without a claim (``newerRecordPause``).
    private let newerRecords = Mutex<[String: ContinuousClock.Instant]>([:])
    /// Nodes with a valid lease, as last listed (`nil`: not yet, or the directory cannot tell).
    private let liveNodeList = Mutex<[ClusterNode]?>(nil)
    /// Each other node's renewal count as last seen, and when this node first saw it
    /// (its monotonic clock): how long that node has been silent, timed here, never
    /// by the database's clock (``silence(of:renewals:now:)``).
    private let renewalsSeen = Mutex<[String: (renewals: Int64, since: ContinuousClock.Instant)]>([:])
    private let logger: Logger

    /// - Parameters:
    ///   - address: `host:port` clients should use to reach this node (`moved`); the
    ///     bound address when `nil`.
    ///   - nodeTimeout: how long a silent node counts as alive.
    ///   - directory: where session records and node leases are kept (PostgreSQL's
    ///     `PostgresSessionDirectory` in production).
    ///   - recordInterval: how often a changed session's record is written at most.
    ///   - tokenKey: the key every node of the cluster tags its session tokens with
    ///     (`PostgresSessionDirectory.agreedTokenKey()`), so any node tells a token one
    ///     of them made from a guess: `attach`es of sessions that are gone (lost with
    ///     their node, quit, expired) are then not counted against their clients'
    ///     address. A key of this node's own when `nil`.
    ///   - logger: where lease lapses, claims and restores are logged.
    public init(
        directory: any SessionDirectory, address: String? = nil, nodeTimeout: Duration = .seconds(5),
        recordInterval: Duration = .milliseconds(100), tokenKey: [UInt8]? = nil, logger: Logger = Logger(label: "viewline.cluster")
    ) {
        self.tokenKey = tokenKey
        self.directory = directory
        self.nodeID = "n" + String(UInt64.random(in: .min ... .max), radix: 36)
        self.advertised = Mutex(address)
        self.nodeTimeout = nodeTimeout
        self.recordInterval = recordInterval
        self.logger = logger
    }

    /// This node as the directory knows it.
    public var node: ClusterNode {
        let (release, records) = runs.withLock { $0 }
        return ClusterNode(
            id: nodeID, address: advertised.withLock { $0 } ?? "", web: advertisedWeb.withLock { $0 }, release: release, records: records)
    }

    /// What the application this node serves runs: its release (`welcome`'s server
    /// name) and its views' record versions, advertised with every lease renewal.
    func runs(release: String, records: [String: Int]) {
        runs.withLock { $0 = (release, records) }
    }

    /// The web listener's page, once bound: what `moved` tells a browser page.
    func boundWeb(_ url: String) {
        advertisedWeb.withLock { $0 = url }
    }

    /// The listening address, known once bound: what `moved` sends unless an address was given.
    func bound(host: String, port: Int) {
        advertised.withLock { address in
            if address == nil { address = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
        }
    }

    /// How long before its lease runs out (by the database's clock) a node stops
    /// serving: covers the renewal's round trip and clock rate differences.
    public var leaseMargin: Duration { nodeTimeout / 5 }

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

    /// Joins the cluster: holds `sessions` and takes the first lease. The loops that
    /// keep the node in it run in ``run()``.
    func join(sessions: SessionRegistry) async throws {
        hold(sessions)
        try await renew()
        await countLiveNodes()
    }

    /// The node's life in the cluster, structured: the record batches, the lease
    /// renewals and the count of live nodes run as child tasks until ``leave()`` (or
    /// the caller's cancellation) stops them; after a `leave()` it writes what is left
    /// and leaves the directory, within one node timeout. No task outlives it; the
    /// server runs it beside its listeners, so shutdown order follows the server's
    /// (leave, then the loops end, the last records, then `run` returns).
    func run() async {
        let start = loops.withLock { loops -> Bool in
            guard loops == .notStarted else { return false }
            loops = .running
            return true
        }
        guard start else { return }  // left before it began
        defer { left.open() }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.recordLoop() }
            group.addTask { await self.leaseLoop() }
            group.addTask { await self.countLoop() }
            await withTaskCancellationHandler {
                await stopping.wait()
            } onCancel: { [stopping] in
                stopping.open()
            }
            group.cancelAll()
        }
        // The loops ended (a batch or renewal in flight finished first: one that
        // landed after the node's row went would bring the node back, fresh, for a
        // node timeout). Asked to leave, not cancelled: the rest is written here.
        if loops.withLock({ $0 == .closed }) {
            logger.debug("the cluster's loops ended", metadata: ["since-leave": "\(sinceLeaveRequested)"])
            await leaveWithinNodeTimeout()
        }
    }

    /// Counts the nodes with a valid lease beside the renewals (never delaying one),
    /// until cancelled.
    private func countLoop() async {
        while !Task.isCancelled {
            try? await Task.sleep(for: nodeTimeout / 5)
            if Task.isCancelled { break }
            await countLiveNodes()
        }
    }

    /// Writes the changed sessions' records every `recordInterval`, until cancelled.
    private func recordLoop() async {
        while !Task.isCancelled {
            try? await Task.sleep(for: recordInterval)
            if Task.isCancelled { break }  // leaving: `leave()` writes what is left
            // Written with or without a valid lease: a record holds only what was
            // acknowledged while the lease was valid, and the database refuses it
            // once another node has claimed the session (the owner fences it, and
            // the refusal closes the session here). A node that stepped down for
            // want of written records comes back by writing them.
            await flush()
        }
    }

    /// Renews the lease every fifth of the node timeout, until cancelled.
    ///
    /// Every fifth of the node timeout counted from the last send, whether or not the
    /// last renewal has returned: on a slow link renewals overlap (at most
    /// ``renewalsOverlapping`` in flight, pipelined on the lease's own connection), so
    /// a node whose renewals each take half the node timeout still serves at every
    /// moment (one at a time, a 2.5 s round trip of a 5 s timeout left the node
    /// refusing commands 1 s in every 2.5 s while its heartbeat stayed fresh).
    private func leaseLoop() async {
        await withDiscardingTaskGroup { group in
            var lastSent = ContinuousClock.now
            while !Task.isCancelled {
                try? await Task.sleep(until: lastSent + nodeTimeout / 5)
                if Task.isCancelled { break }
                lastSent = .now
                if stepsDown() || lettingLeaseAge() { continue }
                guard renewalsInFlight.wrappingAdd(1, ordering: .relaxed).newValue <= Self.renewalsOverlapping else {
                    renewalsInFlight.wrappingSubtract(1, ordering: .relaxed)
                    continue
                }
                group.addTask {
                    defer { self.renewalsInFlight.wrappingSubtract(1, ordering: .relaxed) }
                    do {
                        try await self.renew()
                    } catch {
                        self.logger.warning("could not renew this node's lease", metadata: ["error": "\(String(reflecting: error))"])
                    }
                    self.afterRenewal()
                }
            }
            group.cancelAll()
        }
    }

    /// Renewals that may be in flight at once (``leaseLoop()``).
    static let renewalsOverlapping = 3
    private let renewalsInFlight = Atomic<Int>(0)

    /// After a renewal (or a failed one): a node whose lease has lapsed by its own
    /// clock stops renewing for one node timeout. A renewal it counted as failed may
    /// still have reached the database (a slow link), and renewing on would keep its
    /// heartbeat fresh while it serves nobody: no other node could claim its sessions.
    /// Pausing lets the heartbeat age, so another node may claim them within two node
    /// timeouts of the first failure; then it renews again (a lapse: the sessions
    /// claimed meanwhile are closed here).
    private func afterRenewal(now: ContinuousClock.Instant = .now) {
        let lapsed = lease.withLock { lease -> Bool in
            guard !lease.left, lease.agingUntil == nil, let renewed = lease.renewedAt, now - renewed >= nodeTimeout - leaseMargin else {
                return false
            }
            lease.agingUntil = now + nodeTimeout
            return true
        }
        if lapsed {
            logger.warning("this node's lease lapsed; pausing renewals for one node timeout so other nodes may serve its sessions")
        }
    }

    /// Whether the lease loop skips this renewal to let the heartbeat age (``afterRenewal``).
    private func lettingLeaseAge(now: ContinuousClock.Instant = .now) -> Bool {
        lease.withLock { lease in
            guard let until = lease.agingUntil else { return false }
            if now < until { return true }
            lease.agingUntil = nil
            return false
        }
    }

    /// Whether the lease loop skips this renewal: the records have been unwritten for
    /// two node timeouts (the database takes the lease but not the records, or a
    /// batch hangs). Commands have been refused for a while already; now the lease
    /// goes too, so another node restores these sessions from their last records and
    /// serves them. Once a batch is written again the node renews (a lapse: the
    /// sessions claimed meanwhile are closed here).
    func stepsDown(now: ContinuousClock.Instant = .now) -> Bool {
        let stepDown = recordsStale(now: now) >= nodeTimeout * 2
        let changed = lease.withLock { lease in
            defer { lease.steppedDown = stepDown }
            return lease.steppedDown != stepDown
        }
        if changed {
            if stepDown {
                logger.warning("session records cannot be written; letting this node's lease run out so other nodes serve its sessions")
            } else {
                logger.notice("session records are written again; renewing this node's lease")
            }
        }
        return stepDown
    }

    /// The nodes that held a valid lease at the last look (one a lease renewal,
    /// listed beside the renewal, never delaying it), this one included; `nil` before
    /// the first look or when the directory cannot tell.
    public var liveNodes: [ClusterNode]? {
        liveNodeList.withLock { $0 }
    }

    private func countLiveNodes() async {
        if let nodes = try? await directory.liveNodes(nodeTimeout: nodeTimeout) {
            liveNodeList.withLock { $0 = nodes }
        }
        if let renewals = try? await directory.nodeRenewals() {
            let now = ContinuousClock.now
            renewalsSeen.withLock { seen in
                seen = seen.filter { renewals[$0.key] != nil }  // nodes that left are forgotten
                for (node, count) in renewals where seen[node]?.renewals != count { seen[node] = (count, now) }
            }
        }
    }

    /// How long `node` has been seen with `renewals` renewals by this node's monotonic
    /// clock (zero when that count is new here): once it reaches the node timeout, the
    /// node's lease is over by its own rule (it stops serving `nodeTimeout − margin`
    /// after sending a renewal, and this count was seen after that renewal ran).
    func silence(of node: String, renewals: Int64, now: ContinuousClock.Instant = .now) -> Duration {
        renewalsSeen.withLock { seen in
            if let entry = seen[node], entry.renewals == renewals { return now - entry.since }
            seen[node] = (renewals, now)
            return .zero
        }
    }

    /// A node other than this one that reads records of `versions` and is alive now:
    /// listed live by the directory at this moment (not at the last renewal: a node
    /// that left since is not), and — where the directory counts renewals — seen
    /// renewing within two fifths of the node timeout by this node's clock, as an
    /// owner must be to be sent a client (a killed node stays listed a node timeout).
    private func liveNode(reading versions: [String: Int]) async -> ClusterNode? {
        guard let nodes = try? await directory.liveNodes(nodeTimeout: nodeTimeout) else { return nil }
        let now = ContinuousClock.now
        let seen = renewalsSeen.withLock { $0 }
        return nodes.first { node in
            node.id != nodeID && !node.address.isEmpty && node.reads(versions)
                && (seen[node.id].map { now - $0.since < nodeTimeout * 2 / 5 } ?? seen.isEmpty)
        }
    }

    /// How long the oldest change not yet in a written record has waited (zero when
    /// every record is written): the record lag the inspector charts.
    func recordLag(now: ContinuousClock.Instant = .now) -> Duration {
        dirty.withLock { $0.since }.map { now - $0 } ?? .zero
    }

    /// The sessions this node holds: what a lapse is reconciled against.
    func hold(_ sessions: SessionRegistry) {
        registry.withLock { $0.sessions = sessions }
    }

    /// Records written per batch (swift-metrics, as the process bootstrapped it).
    private static let recordsPerBatch = CoreMetrics.Recorder(label: "viewline_cluster_records_per_batch", aggregate: true)
    /// Session lookups sent to the directory for `attach`es of sessions this node does
    /// not hold: what attaches, a guesser's included, cost the database.
    private static let lookups = CoreMetrics.Counter(label: "viewline_cluster_lookups_total")

    /// The record of `lookup` in the directory, counted (``lookups``).
    private func find(_ lookup: String) async throws -> SessionLocation? {
        Self.lookups.increment()
        return try await directory.find(lookup: lookup, nodeTimeout: nodeTimeout)
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
        for session in sessions.all { await session.leaseRestored() }
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
        if check { Task { await self.checkSessionsNow() } }
    }

    private enum CheckOutcome { case serve, again, stop }

    /// Closes the held sessions other nodes own now and serves the rest again without
    /// waiting for the next renewal, unless meanwhile a lapse other than such a
    /// refusal was noticed (the database said the lease lapsed: the renewal's to
    /// settle) or the lease lapsed by this node's clock. Goes again while refusals
    /// come; a check that fails leaves it to the renewal.
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
    private func close(lost: Set<String>) async {
        guard !lost.isEmpty, let sessions = registry.withLock({ $0.sessions }) else { return }
        for session in sessions.all where lost.contains(SessionRegistry.split(session.token).lookup) {
            sessions.drop(session)
            dirty.withLock { $0.sessions[ObjectIdentifier(session)] = nil }
            logger.info("a session moved to another node while this one had no lease", metadata: ["session": "\(session.id)"])
            await session.close(.moved)
        }
    }

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
    private func leaveWithinNodeTimeout() async {
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
    private var sinceLeaveRequested: Duration {
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
                logger.warning(
                    "could not write session records", metadata: ["error": "\(String(reflecting: error))", "sessions": "\(unwritten.count)"])
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
        let now = ContinuousClock.now
        let skipped: Int? = slowBatches.withLock { slow in
            if let last = slow.lastWarning, now - last < nodeTimeout {
                slow.skipped += 1
                return nil
            }
            defer { slow = (now, 0) }
            return slow.skipped
        }
        guard let skipped else { return }
        logger.warning(
            "a record batch was slow",
            metadata: [
                "waited-ms": "\(waited.nanoseconds / 1_000_000)", "snapshots-ms": "\(snapshots.nanoseconds / 1_000_000)",
                "write-ms": "\(write.nanoseconds / 1_000_000)", "records": "\(records)", "slow-batches-not-logged": "\(skipped)",
            ])
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
    private func restore(
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

extension Duration {
    /// The duration in seconds: for logs, figures, SQL intervals and the wall clock.
    package var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

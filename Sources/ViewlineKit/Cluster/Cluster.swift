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
    let runs = Mutex<(release: String, records: [String: Int])>(("", [:]))
    /// Sessions whose records changed since a batch last took them.
    let dirty = Mutex(Dirty())
    /// The last "a record batch was slow" warning, and the slow batches since.
    let slowBatches = Mutex<(lastWarning: ContinuousClock.Instant?, skipped: Int)>((nil, 0))
    /// When the last failed record batch was logged, and how many failed since without
    /// a line (a database that is down fails a batch every few hundred milliseconds).
    let failedBatches = Mutex<(lastWarning: ContinuousClock.Instant?, skipped: Int)>((nil, 0))
    /// Lookup parts of sessions that ended, whose records are still to be deleted.
    let endedLookups = Mutex<Set<String>>([])
    /// Lookups of sessions that ended here for good (their records ended in the
    /// directory), the newest ``recentlyEndedKept``: an `attach` of one is answered
    /// "no session" without a query (a dead token replayed costs the database nothing).
    let recentlyEnded = Mutex<(lookups: Set<String>, order: [String], next: Int)>(([], [], 0))
    static let recentlyEndedKept = 4096
    /// Opened by ``leave()`` (or when ``run()`` is cancelled): its loops stop.
    let stopping = Latch()
    /// Asks ``run()``'s check loop to check this node's sessions against the
    /// directory now (a write refused for a session another node holds): at most one
    /// request waits, as one check covers every reason noticed before it begins.
    let checkRequests = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    /// Opened once ``run()`` is over: the node left (its last records written, or
    /// given up on after one node timeout), or its run was cancelled.
    let left = Latch()
    /// Whether ``run()``'s loops run (``leave()`` waits for it then), or never will
    /// (`closed`: ``leave()`` was called).
    enum Loops { case notStarted, running, closed }
    let loops = Mutex(Loops.notStarted)
    /// The lease as this node knows it, by its monotonic clock.
    let lease = Mutex(LeaseState())
    /// The sessions this node holds (set at start): what a lapse is reconciled against.
    let registry = Mutex(WeakRegistry())

    struct LeaseState {
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
    struct Dirty {
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
    struct Unwritten {
        let session: Session
        let since: ContinuousClock.Instant
    }

    /// The held sessions, not kept alive by the cluster.
    struct WeakRegistry {
        weak var sessions: SessionRegistry?
    }
    /// Lookups in progress, by the token's lookup part, with the connections waiting
    /// on each: two connections attaching to the same orphaned session at once share
    /// one restore (the first runs it; the others wait for it to end).
    let inFlight = Mutex<[String: [CheckedContinuation<Void, Never>]]>([:])
    /// Lookups of sessions recorded by a newer release that no live node reads, until
    /// when they are answered `unavailable` without a claim (``newerRecordPause``).
    let newerRecords = Mutex<[String: ContinuousClock.Instant]>([:])
    /// Nodes with a valid lease, as last listed (`nil`: not yet, or the directory cannot tell).
    private let liveNodeList = Mutex<[ClusterNode]?>(nil)
    /// Each other node's renewal count as last seen, and when this node first saw it
    /// (its monotonic clock): how long that node has been silent, timed here, never
    /// by the database's clock (``silence(of:renewals:now:)``).
    private let renewalsSeen = Mutex<[String: (renewals: Int64, since: ContinuousClock.Instant)]>([:])
    let logger: Logger

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
            group.addTask { await self.checkLoop() }
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
    func liveNode(reading versions: [String: Int]) async -> ClusterNode? {
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
    static let recordsPerBatch = CoreMetrics.Recorder(label: "viewline_cluster_records_per_batch", aggregate: true)
    /// Session lookups sent to the directory for `attach`es of sessions this node does
    /// not hold: what attaches, a guesser's included, cost the database.
    static let lookups = CoreMetrics.Counter(label: "viewline_cluster_lookups_total")

    /// The record of `lookup` in the directory, counted (``lookups``).
    func find(_ lookup: String) async throws -> SessionLocation? {
        Self.lookups.increment()
        return try await directory.find(lookup: lookup, nodeTimeout: nodeTimeout)
    }

}

extension Duration {
    /// The duration in seconds: for logs, figures, SQL intervals and the wall clock.
    package var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

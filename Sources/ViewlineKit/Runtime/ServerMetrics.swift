import CoreMetrics
import Foundation
import Prometheus
import Synchronization

/// What a server counts for whoever runs it, served as `/metrics` by the metrics
/// listener (``ServerConfiguration/metricsPort``): the figures counted on every
/// command in per-thread shards of its own, the rest through swift-metrics into a
/// Prometheus registry of the server's own (no process-wide bootstrap: two servers
/// in one process keep separate figures). Every name starts `viewline_`.
///
/// Labels stay bounded: command names come from the declarations (anything else is
/// `unknown`), outcomes are `ok` or a protocol error code. Log-ins by outcome,
/// `server_busy`, `unavailable` and `moved` replies, alerts answered: each is
/// `viewline_commands_total` of its command and outcome; alerts presented are
/// `viewline_events_sent_total{type="alert"}`.
public final class ServerMetrics: Sendable {
    /// The registry whose figures start `/metrics` (the per-command ones follow).
    public let registry: PrometheusCollectorRegistry

    /// The figures counted on every command and every write, kept apart from the
    /// registry in per-thread shards (``ShardedTally``): each command's latency
    /// histogram and `ok` count, bytes written, events sent by type. A command adds
    /// to three integers only its event loop writes; no lock, no shared cache line.
    /// They are written into `/metrics` after the registry's figures.
    private let tally: ShardedTally
    /// Command name → its first slot in ``tally``: its latency buckets (one per bound,
    /// then `+Inf`), the sum of its latencies in nanoseconds, its `ok` count.
    private let commandSlots: [String: Int]
    private let commandNames: [String]
    /// Latency bucket bounds, in nanoseconds.
    private static let latencyBounds: [Int64] = [
        100_000, 500_000, 1_000_000, 5_000_000, 10_000_000, 50_000_000, 100_000_000, 500_000_000, 1_000_000_000, 5_000_000_000,
    ]
    private static let slotsPerCommand = latencyBounds.count + 3
    private static let eventTypes = ["display", "alert", "dismiss"]
    private let bytesSlot: Int
    private let eventSlots: Int

    let outputCutOffs: CoreMetrics.Counter
    let connectionsOpened: [Transport: CoreMetrics.Counter]
    let sessionsCreated: CoreMetrics.Counter
    let sessionsAttached: CoreMetrics.Counter
    let sessionsRestored: CoreMetrics.Counter
    let sessionsEnded: CoreMetrics.Counter

    // Set when scraped.
    private let sessionGauges: (attached: CoreMetrics.Gauge, detached: CoreMetrics.Gauge)
    private let connectionGauges: [Transport: CoreMetrics.Gauge]
    /// The connections whose output is past their watermark, and the bytes they hold
    /// (`info.clients.outputBacklog`).
    private let outputBacklog: (connections: CoreMetrics.Gauge, bytes: CoreMetrics.Gauge)
    private let residentBytes: CoreMetrics.Gauge
    private let openFiles: CoreMetrics.Gauge
    private let eventLoops: CoreMetrics.Gauge
    private let clusterServing: CoreMetrics.Gauge?
    private let clusterLiveNodes: CoreMetrics.Gauge?
    /// The factory the figures are made with (for those made when they happen).
    private let factory: PrometheusMetricsFactory
    /// Failed commands by "name code" (rarer than `ok`: a lock is fine).
    private let failures = Mutex<[String: Int]>([:])

    /// How a connection reached the server.
    public enum Transport: String, Sendable, CaseIterable {
        /// The line listener, plain.
        case tcp
        /// The line listener over TLS.
        case tls
        /// The web listener's `/ws` (plain or TLS).
        case websocket
    }

    /// Metrics for a server whose commands are `commandNames` (and, when
    /// `clustered`, its lease).
    public init(commandNames: [String], clustered: Bool = false, registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry()) {
        let factory = Self.factory(for: registry)
        self.factory = factory
        self.registry = registry
        var names: [String] = []
        for name in commandNames + ["unknown"] where !names.contains(name) { names.append(name) }
        self.commandNames = names
        commandSlots = Dictionary(uniqueKeysWithValues: names.enumerated().map { ($1, $0 * Self.slotsPerCommand) })
        bytesSlot = names.count * Self.slotsPerCommand
        eventSlots = bytesSlot + 1
        tally = ShardedTally(slots: eventSlots + Self.eventTypes.count)
        outputCutOffs = CoreMetrics.Counter(label: "viewline_output_cutoffs_total", factory: factory)
        connectionsOpened = Dictionary(
            uniqueKeysWithValues: Transport.allCases.map {
                ($0, CoreMetrics.Counter(label: "viewline_connections_opened_total", dimensions: [("transport", $0.rawValue)], factory: factory))
            })
        connectionGauges = Dictionary(
            uniqueKeysWithValues: Transport.allCases.map {
                ($0, CoreMetrics.Gauge(label: "viewline_connections", dimensions: [("transport", $0.rawValue)], factory: factory))
            })
        outputBacklog = (
            CoreMetrics.Gauge(label: "viewline_output_backlog_connections", factory: factory),
            CoreMetrics.Gauge(label: "viewline_output_backlog_bytes", factory: factory)
        )
        sessionsCreated = CoreMetrics.Counter(label: "viewline_sessions_created_total", factory: factory)
        sessionsAttached = CoreMetrics.Counter(label: "viewline_sessions_attached_total", factory: factory)
        sessionsRestored = CoreMetrics.Counter(label: "viewline_sessions_restored_total", factory: factory)
        sessionsEnded = CoreMetrics.Counter(label: "viewline_sessions_ended_total", factory: factory)
        sessionGauges = (
            CoreMetrics.Gauge(label: "viewline_sessions", dimensions: [("state", "attached")], factory: factory),
            CoreMetrics.Gauge(label: "viewline_sessions", dimensions: [("state", "detached")], factory: factory)
        )
        residentBytes = CoreMetrics.Gauge(label: "viewline_process_resident_memory_bytes", factory: factory)
        openFiles = CoreMetrics.Gauge(label: "viewline_process_open_fds", factory: factory)
        eventLoops = CoreMetrics.Gauge(label: "viewline_event_loops", factory: factory)
        clusterServing = clustered ? CoreMetrics.Gauge(label: "viewline_cluster_lease_valid", factory: factory) : nil
        clusterLiveNodes = clustered ? CoreMetrics.Gauge(label: "viewline_cluster_nodes_live", factory: factory) : nil
    }

    /// A view's record a restore could not read (`reason`: `newer`, `no_migration`,
    /// `migration_failed`, `decode`).
    func recordUnreadable(view: String, reason: String) {
        CoreMetrics.Counter(label: "viewline_records_unreadable_total", dimensions: [("view", view), ("reason", reason)], factory: factory)
            .increment()
    }

    /// The factory this server's figures are made with: latency buckets from 100 µs
    /// to 5 s. A process that bootstraps swift-metrics with it (as viewline-server
    /// does) gets the stores' and flows' figures into the same `/metrics`.
    public static func factory(for registry: PrometheusCollectorRegistry) -> PrometheusMetricsFactory {
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.defaultDurationHistogramBuckets = [
            .microseconds(100), .microseconds(500), .milliseconds(1), .milliseconds(5), .milliseconds(10),
            .milliseconds(50), .milliseconds(100), .milliseconds(500), .seconds(1), .seconds(5),
        ]
        factory.defaultValueHistogramBuckets = [1, 10, 100, 1_000, 10_000]
        return factory
    }

    /// One command ran: its outcome (`nil` for ok, else the error code) and time
    /// (`nil` for a line refused before it ran: counted, not timed).
    ///
    /// `index`: the command's place in the server's command table, when the request
    /// carries it (its slots are found without hashing the name).
    func command(_ name: String, at index: Int? = nil, failed code: String?, duration: Duration?) {
        let known: String, base: Int
        if let index, index < commandNames.count, commandNames[index] == name {
            (known, base) = (name, index * Self.slotsPerCommand)
        } else if let slot = commandSlots[name] {
            (known, base) = (name, slot)
        } else {
            (known, base) = ("unknown", commandSlots["unknown"]!)
        }
        if let duration {
            let nanoseconds = duration.nanoseconds
            var bucket = 0
            while bucket < Self.latencyBounds.count && nanoseconds > Self.latencyBounds[bucket] { bucket += 1 }
            tally.add(1, to: base + bucket)
            tally.add(Int(nanoseconds), to: base + Self.latencyBounds.count + 1)
        }
        guard let code else {
            tally.add(1, to: base + Self.latencyBounds.count + 2)
            return
        }
        failures.withLock { $0[known + " " + code, default: 0] += 1 }
    }

    /// Bytes handed to a connection's socket.
    func wrote(bytes: Int) {
        tally.add(bytes, to: bytesSlot)
    }

    /// The events counted by kind.
    enum Event: Int {
        case display, alert, dismiss

        /// The kind of `message`; `nil` for one that is not counted.
        init?(_ message: ServerMessage) {
            switch message {
            case .display: self = .display
            case .alert: self = .alert
            case .dismiss: self = .dismiss
            default: return nil
            }
        }
    }

    /// An event went to a session's connections.
    func sent(_ event: Event) {
        tally.add(1, to: eventSlots + event.rawValue)
    }

    func connectionOpened(_ transport: Transport) {
        connectionsOpened[transport]?.increment()
    }

    /// Commands run, by name, then by outcome (`ok` or an error code).
    var commandCounts: [String: [String: Int]] {
        var counts: [String: [String: Int]] = [:]
        for (name, base) in commandSlots {
            let ok = tally.sum(base + Self.latencyBounds.count + 2)
            if ok > 0 { counts[name, default: [:]]["ok"] = ok }
        }
        for (key, count) in failures.withLock({ $0 }) {
            let parts = key.split(separator: " ", maxSplits: 1).map(String.init)
            counts[parts[0], default: [:]][parts[1]] = count
        }
        return counts
    }

    /// The Prometheus text exposition, with the gauges read now.
    func exposition(sessions: SessionRegistry, connections: ConnectionCounts, eventLoopCount: Int, cluster: Cluster?) -> [UInt8] {
        let counts = sessions.counts
        sessionGauges.attached.record(counts.attached)
        sessionGauges.detached.record(counts.sessions - counts.attached)
        for (transport, count) in connections.byTransport { connectionGauges[transport]?.record(count) }
        let backlog = connections.outputBacklog
        outputBacklog.connections.record(backlog.connections)
        outputBacklog.bytes.record(backlog.bytes)
        if let resident = ProcessFigures.residentBytes() { residentBytes.record(resident) }
        if let files = ProcessFigures.openFiles() { openFiles.record(files) }
        eventLoops.record(eventLoopCount)
        if let cluster {
            clusterServing?.record(cluster.isServing() ? 1 : 0)
            if let live = cluster.liveNodes { clusterLiveNodes?.record(live.count) }
        }
        var out = registry.emitToBuffer()
        writeTallies(into: &out)
        return out
    }

    /// Every command's latencies together, as a histogram: the bucket bounds in
    /// seconds, and how many commands took at most each bound, then how many ran in
    /// all (cumulative, like `/metrics`' `_bucket` series). What the inspector's
    /// latency charts read (two readings a second apart give that second's p50/p99).
    var latency: (boundsSeconds: [Double], cumulative: [Int]) {
        var buckets = [Int](repeating: 0, count: Self.latencyBounds.count + 1)
        for name in commandNames {
            let base = commandSlots[name]!
            for bucket in buckets.indices { buckets[bucket] += tally.sum(base + bucket) }
        }
        var total = 0
        let cumulative = buckets.map { count in
            total += count
            return total
        }
        return (Self.latencyBounds.map { Double($0) / 1e9 }, cumulative)
    }

    /// The sharded figures in the Prometheus text format, after the registry's (which
    /// has no family of the same name).
    private func writeTallies(into out: inout [UInt8]) {
        func line(_ text: String) { out.append(contentsOf: text.utf8); out.append(0x0A) }
        let failed = failures.withLock { $0 }
        line("# TYPE viewline_commands_total counter")
        for name in commandNames {
            let ok = tally.sum(commandSlots[name]! + Self.latencyBounds.count + 2)
            if ok > 0 { line(#"viewline_commands_total{command="\#(name)",outcome="ok"} \#(ok)"#) }
        }
        for (key, count) in failed.sorted(by: { $0.key < $1.key }) {
            let parts = key.split(separator: " ", maxSplits: 1)
            line(#"viewline_commands_total{command="\#(parts[0])",outcome="\#(parts[1])"} \#(count)"#)
        }
        line("# TYPE viewline_command_duration_seconds histogram")
        for name in commandNames {
            let base = commandSlots[name]!
            var cumulative = 0
            var buckets: [Int] = []
            for bucket in 0...Self.latencyBounds.count {
                cumulative += tally.sum(base + bucket)
                buckets.append(cumulative)
            }
            guard cumulative > 0 else { continue }  // a command never run has no series, as before
            for (bound, count) in zip(Self.latencyBounds, buckets) {
                line(#"viewline_command_duration_seconds_bucket{command="\#(name)",le="\#(Self.seconds(bound))"} \#(count)"#)
            }
            line(#"viewline_command_duration_seconds_bucket{command="\#(name)",le="+Inf"} \#(cumulative)"#)
            line(
                #"viewline_command_duration_seconds_sum{command="\#(name)"} \#(Self.seconds(Int64(tally.sum(base + Self.latencyBounds.count + 1))))"#)
            line(#"viewline_command_duration_seconds_count{command="\#(name)"} \#(cumulative)"#)
        }
        line("# TYPE viewline_bytes_written_total counter")
        line("viewline_bytes_written_total \(tally.sum(bytesSlot))")
        line("# TYPE viewline_events_sent_total counter")
        for (index, type) in Self.eventTypes.enumerated() {
            line(#"viewline_events_sent_total{type="\#(type)"} \#(tally.sum(eventSlots + index))"#)
        }
    }

    /// Nanoseconds as seconds in decimal, exactly (`0.0001`, `5.0`).
    static func seconds(_ nanoseconds: Int64) -> String {
        let whole = nanoseconds / 1_000_000_000, fraction = nanoseconds % 1_000_000_000
        guard fraction > 0 else { return "\(whole).0" }
        var digits = String(fraction)
        digits = String(repeating: "0", count: 9 - digits.count) + digits
        while digits.hasSuffix("0") { digits.removeLast() }
        return "\(whole).\(digits)"
    }
}

/// The process's own figures, from /proc.
enum ProcessFigures {
    static func residentBytes() -> Int? {
        guard let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return nil }
        let fields = statm.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return nil }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    static func openFiles() -> Int? {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")).map(\.count)
    }
}

/// Connections open now, by transport, and those whose output backs up: kept by the
/// server, read by `info` and `/metrics`; and the output budgets of an address and of
/// the whole server, which every connection's backlog counts against.
public final class ConnectionCounts: Sendable {
    private let counts = Mutex<[ServerMetrics.Transport: Int]>([:])
    /// Each connection whose client reads slower than it is written to (output held
    /// past what the socket took at once), with its address and the memory it holds,
    /// and those sums per address and in all. Touched only as a connection backs up,
    /// grows its backlog or drains, never for a connection that keeps up.
    private struct Backlogs {
        var byConnection: [Int: (address: String, bytes: Int)] = [:]
        var byAddress: [String: Int] = [:]
        var total = 0
    }
    private let backedUp = Mutex(Backlogs())
    private let nextBacklogID = Atomic<Int>(0)
    /// What all backlogs of one address may hold together (0: no cap).
    let addressBudget: Int
    /// What all backlogs together may hold (0: no cap).
    let totalBudget: Int

    /// No connections yet; backlogs capped per address and in all (0: no cap).
    public init(addressBudget: Int = 0, totalBudget: Int = 0) {
        self.addressBudget = addressBudget
        self.totalBudget = totalBudget
    }

    func opened(_ transport: ServerMetrics.Transport) { counts.withLock { $0[transport, default: 0] += 1 } }
    func closed(_ transport: ServerMetrics.Transport) { counts.withLock { $0[transport, default: 0] -= 1 } }

    /// A number for a connection's backlog, never given to another.
    func makeBacklogID() -> Int {
        nextBacklogID.wrappingAdd(1, ordering: .relaxed).newValue
    }

    /// Why a backlog was refused: the budget it would pass.
    enum OverBudget: Equatable, CustomStringConvertible {
        case address, server
        var description: String { self == .address ? "the address's output budget" : "the server's output budget" }
    }

    /// The connection `id` (from `address`) holds `bytes` of output the socket has not
    /// taken (`nil`: it drained, or closed). Returns the budget this passes, if any:
    /// the caller cuts the connection off (and tells its backlog `nil`).
    @discardableResult
    func backlog(of id: Int, address: String = "", bytes: Int?) -> OverBudget? {
        backedUp.withLock { state in
            let before = state.byConnection[id]
            if let before {
                state.total -= before.bytes
                let left = (state.byAddress[before.address] ?? 0) - before.bytes
                state.byAddress[before.address] = left > 0 ? left : nil
            }
            guard let bytes else {
                if before != nil { state.byConnection[id] = nil }
                return nil
            }
            let key = before?.address ?? address
            state.byConnection[id] = (key, bytes)
            state.total += bytes
            let fromAddress = (state.byAddress[key] ?? 0) + bytes
            state.byAddress[key] = fromAddress
            if addressBudget > 0, fromAddress > addressBudget { return .address }
            if totalBudget > 0, state.total > totalBudget { return .server }
            return nil
        }
    }

    /// The connections whose output backs up, and the bytes they hold.
    public var outputBacklog: (connections: Int, bytes: Int) {
        backedUp.withLock { ($0.byConnection.count, $0.total) }
    }

    /// Every transport with its count (zeros included).
    public var byTransport: [ServerMetrics.Transport: Int] {
        let counts = counts.withLock { $0 }
        return Dictionary(uniqueKeysWithValues: ServerMetrics.Transport.allCases.map { ($0, counts[$0] ?? 0) })
    }
}

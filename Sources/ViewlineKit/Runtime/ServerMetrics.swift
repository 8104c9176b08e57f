import CoreMetrics
import Foundation
import Prometheus
import Synchronization

/// What a server counts for whoever runs it, recorded through swift-metrics into a
/// Prometheus registry of the server's own (no process-wide bootstrap: two servers
/// in one process keep separate figures), served as `/metrics` by the metrics
/// listener (``ServerConfiguration/metricsPort``). Every name starts `viewline_`.
///
/// Labels stay bounded: command names come from the declarations (anything else is
/// `unknown`), outcomes are `ok` or a protocol error code. Log-ins by outcome,
/// `server_busy`, `unavailable` and `moved` replies, alerts answered: each is
/// `viewline_commands_total` of its command and outcome; alerts presented are
/// `viewline_events_sent_total{type="alert"}`.
public final class ServerMetrics: Sendable {
    /// The registry `/metrics` is written from.
    public let registry: PrometheusCollectorRegistry
    private let factory: PrometheusMetricsFactory

    /// Each command's latency and `ok` count, made up front: the common path takes
    /// no lock of ours (an atomic add each).
    private final class CommandFigures: Sendable {
        let latency: CoreMetrics.Timer
        let ok: CoreMetrics.Counter
        let okTally = Atomic<Int>(0)

        init(_ name: String, factory: PrometheusMetricsFactory) {
            latency = CoreMetrics.Timer(label: "viewline_command_duration_seconds", dimensions: [("command", name)], factory: factory)
            ok = CoreMetrics.Counter(
                label: "viewline_commands_total", dimensions: [("command", name), ("outcome", "ok")], factory: factory)
        }
    }

    private let commands: [String: CommandFigures]
    /// (command, error code) → its counter, made on first use.
    private let failures = Mutex<[String: CoreMetrics.Counter]>([:])

    private let events: [String: CoreMetrics.Counter]
    let bytesWritten: CoreMetrics.Counter
    let outputCutOffs: CoreMetrics.Counter
    let connectionsOpened: [Transport: CoreMetrics.Counter]
    let sessionsCreated: CoreMetrics.Counter
    let sessionsAttached: CoreMetrics.Counter
    let sessionsRestored: CoreMetrics.Counter
    let sessionsEnded: CoreMetrics.Counter

    // Set when scraped.
    private let sessionGauges: (attached: CoreMetrics.Gauge, detached: CoreMetrics.Gauge)
    private let connectionGauges: [Transport: CoreMetrics.Gauge]
    private let residentBytes: CoreMetrics.Gauge
    private let openFiles: CoreMetrics.Gauge
    private let eventLoops: CoreMetrics.Gauge
    private let clusterServing: CoreMetrics.Gauge?
    /// Failed commands by "name code", for `info` (swift-metrics counters cannot be read back).
    private let tallies = Mutex<[String: Int]>([:])

    /// How a connection reached the server.
    public enum Transport: String, Sendable, CaseIterable {
        case tcp, tls, websocket
    }

    /// Metrics for a server whose commands are `commandNames` (and, when
    /// `clustered`, its lease).
    public init(commandNames: [String], clustered: Bool = false, registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry()) {
        let factory = Self.factory(for: registry)
        self.registry = registry
        self.factory = factory
        commands = Dictionary(uniqueKeysWithValues: (commandNames + ["unknown"]).map { ($0, CommandFigures($0, factory: factory)) })
        events = Dictionary(uniqueKeysWithValues: ["display", "alert", "dismiss"].map {
            ($0, CoreMetrics.Counter(label: "viewline_events_sent_total", dimensions: [("type", $0)], factory: factory))
        })
        bytesWritten = CoreMetrics.Counter(label: "viewline_bytes_written_total", factory: factory)
        outputCutOffs = CoreMetrics.Counter(label: "viewline_output_cutoffs_total", factory: factory)
        connectionsOpened = Dictionary(uniqueKeysWithValues: Transport.allCases.map {
            ($0, CoreMetrics.Counter(label: "viewline_connections_opened_total", dimensions: [("transport", $0.rawValue)], factory: factory))
        })
        connectionGauges = Dictionary(uniqueKeysWithValues: Transport.allCases.map {
            ($0, CoreMetrics.Gauge(label: "viewline_connections", dimensions: [("transport", $0.rawValue)], factory: factory))
        })
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
    func command(_ name: String, failed code: String?, duration: Duration?) {
        let figures = commands[name] ?? commands["unknown"]!
        if let duration { figures.latency.recordNanoseconds(duration.nanoseconds) }
        guard let code else {
            figures.ok.increment()
            figures.okTally.add(1, ordering: .relaxed)
            return
        }
        let known = commands[name] == nil ? "unknown" : name
        let key = known + " " + code
        let counter = failures.withLock { counters in
            tallies.withLock { $0[key, default: 0] += 1 }
            if let counter = counters[key] { return counter }
            let counter = CoreMetrics.Counter(
                label: "viewline_commands_total", dimensions: [("command", known), ("outcome", code)], factory: factory)
            counters[key] = counter
            return counter
        }
        counter.increment()
    }

    /// An event went to a session's connections.
    func sent(_ message: ServerMessage) {
        let type: String
        switch message {
        case .display: type = "display"
        case .alert: type = "alert"
        case .dismiss: type = "dismiss"
        default: return
        }
        events[type]?.increment()
    }

    func connectionOpened(_ transport: Transport) {
        connectionsOpened[transport]?.increment()
    }

    /// Commands run, by name, then by outcome (`ok` or an error code).
    var commandCounts: [String: [String: Int]] {
        var counts: [String: [String: Int]] = [:]
        for (name, figures) in commands {
            let ok = figures.okTally.load(ordering: .relaxed)
            if ok > 0 { counts[name, default: [:]]["ok"] = ok }
        }
        for (key, count) in tallies.withLock({ $0 }) {
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
        if let resident = ProcessFigures.residentBytes() { residentBytes.record(resident) }
        if let files = ProcessFigures.openFiles() { openFiles.record(files) }
        eventLoops.record(eventLoopCount)
        if let cluster { clusterServing?.record(cluster.isServing() ? 1 : 0) }
        return registry.emitToBuffer()
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

/// Connections open now, by transport: kept by the server, read by `info` and `/metrics`.
public final class ConnectionCounts: Sendable {
    private let counts = Mutex<[ServerMetrics.Transport: Int]>([:])

    public init() {}

    func opened(_ transport: ServerMetrics.Transport) { counts.withLock { $0[transport, default: 0] += 1 } }
    func closed(_ transport: ServerMetrics.Transport) { counts.withLock { $0[transport, default: 0] -= 1 } }

    /// Every transport with its count (zeros included).
    public var byTransport: [ServerMetrics.Transport: Int] {
        let counts = counts.withLock { $0 }
        return Dictionary(uniqueKeysWithValues: ServerMetrics.Transport.allCases.map { ($0, counts[$0] ?? 0) })
    }
}

extension Duration {
    /// Whole nanoseconds.
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}

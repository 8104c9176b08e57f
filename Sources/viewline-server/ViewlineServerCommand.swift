import ArgumentParser
import CHeap
@preconcurrency import CoreMetrics
import Foundation
import Prometheus
import Synchronization
import Logging
import ServiceLifecycle
import UnixSignals
import ViewlineApps
import ViewlineKit
import ViewlineTLS
import ViewlinePersistence
import ViewlinePostgres
import ViewlineAppsPostgres

/// `viewline-server`: parse the flags, build the server, serve until a signal.
@main
struct ViewlineServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "viewline-server",
        abstract: "Run app view-models remotely over a line-based JSON protocol.",
        discussion: "Connect with `viewline`, `nc 127.0.0.1 7878`, or any TCP client; send `help` for the commands.")

    @Option(help: "Address to listen on.") var host = "127.0.0.1"
    @Option(help: "Port to listen on; 0 picks a free one (printed as `listening on HOST:PORT`).") var port = 7878
    @Flag(help: "Enable admin commands (`fault`).") var admin = false
    @Option(
        help: ArgumentHelp(
            "A file whose first line is the inspector token (16+ characters): /inspect and `inspect`/`info` for a connection that gives it, without --admin.",
            valueName: "file")) var inspectorTokenFile: String?
    @Option(
        help: ArgumentHelp(
            "Event loop threads serving connections and sessions; the core count by default. On a machine the load generator shares, 1 may serve more.",
            valueName: "n")) var eventLoops: Int?
    @Option(
        help: ArgumentHelp(
            "Also serve the browser page at http://HOST:PORT/ and the protocol over WebSocket at /ws (host: --host; 0 picks a free port, printed as `web on http://HOST:PORT/`).",
            valueName: "port")) var webPort: Int?
    @Option(
        help: ArgumentHelp(
            "Serve /metrics (Prometheus), /healthz and /readyz on this port (0 picks a free one, printed as `metrics on http://HOST:PORT/metrics`); off unless given.",
            valueName: "port")) var metricsPort: Int?
    @Option(help: ArgumentHelp("Address of the metrics listener.", valueName: "host")) var metricsHost = "127.0.0.1"
    @Option(
        help: ArgumentHelp(
            "On SIGTERM: how long running commands may take to finish (new connections are refused and /readyz says 503 at once) before clients are told bye; a second SIGTERM exits at once.",
            valueName: "seconds")) var drainSeconds = 10.0
    @Flag(
        help:
            "Shut down as on SIGTERM once standard input ends: a supervisor or test harness that holds it open stops the server by exiting, even by crashing."
    ) var stopAtEndOfInput = false
    @Option(help: ArgumentHelp("Commands at least this slow go to the slow log (`slowlog`, admin).", valueName: "ms")) var slowCommandMs = 100
    @Option(
        help: ArgumentHelp(
            "A host name the web listener answers to besides IP addresses and localhost (repeatable), e.g. app.example.com; other Host headers get 421 (DNS rebinding).",
            valueName: "name")) var webHostName: [String] = []
    @Option(
        help: ArgumentHelp(
            "An origin besides the page's own allowed to open the WebSocket (repeatable), e.g. https://app.example.com.", valueName: "origin"))
    var webOrigin: [String] = []
    @Flag(help: "Add the demo users alice/wonderland and bob/builder (demos, the tutorial, tests; never a real deployment).") var demo = false
    @Option(
        help: ArgumentHelp(
            "A load balancer whose PROXY protocol header (and on the web listener Forwarded/X-Forwarded-For) gives the client's address (repeatable): an address or network, e.g. 10.0.0.5 or 10.0.0.0/8. Its connections must begin with the header; a header from any other peer closes the connection.",
            valueName: "address"))
    var trustedProxy: [String] = []
    @Option(
        help: ArgumentHelp(
            "The header the trusted proxies name the web client in: x-forwarded-for (HAProxy's option forwardfor, nginx) or forwarded (RFC 7239). The other is never read.",
            valueName: "header"))
    var forwardedHeader = "x-forwarded-for"
    @Option(
        help: ArgumentHelp(
            "Run release 2 of the seed apps (their search view records its state in a new form, migrated from 1): a rolling deploy's rehearsal.",
            valueName: "n"))
    var seedRelease = 1
    @Flag(help: "Print the JSON Schema of the commands (derived from the view-models' declarations) and exit.") var printSchema = false
    @Option(help: ArgumentHelp("PEM certificate chain: serve over TLS (with --tls-key).", valueName: "file")) var tlsCert: String?
    @Option(help: ArgumentHelp("PEM private key of the certificate.", valueName: "file")) var tlsKey: String?
    @Option(help: ArgumentHelp("Artificial latency of every backend call.", valueName: "ms")) var backendLatency = 0
    @Option(help: ArgumentHelp("Longest accepted line in bytes.", valueName: "n")) var maxLineBytes = 65536
    @Option(help: ArgumentHelp("Most clients connected at once (lowered to what the file limit allows).", valueName: "n")) var maxClients = 10_000
    @Option(help: ArgumentHelp("Most clients connected at once from one address; 0 for no cap (a benchmark from one address).", valueName: "n"))
    var maxClientsPerAddress = 1_000
    @Option(
        help: ArgumentHelp("Most sessions one address may hold, attached or not (its oldest detached one makes room); 0 for no cap.", valueName: "n"))
    var maxSessionsPerAddress = 1_000
    @Option(
        help: ArgumentHelp("Bytes every session's replay log may hold together (each log holds at most 256 events, 256 KiB).", valueName: "bytes"))
    var eventLogBudget = 256 << 20
    @Option(
        help: ArgumentHelp(
            "Bytes of each session's recording (what `export` gives) on a server with the inspector on; 0 records nothing.",
            valueName: "bytes"))
    var recordingBytes = 128 << 10
    @Option(help: ArgumentHelp("Log-ins from one address being checked at once (more get server_busy); 0 for no cap.", valueName: "n"))
    var maxLoginsPerAddress = 4
    @Option(help: ArgumentHelp("How long a session with no connection lives on, for its client to attach again.", valueName: "seconds"))
    var sessionTtl = 300
    @Option(help: ArgumentHelp("Most sessions, attached or not; when full the oldest detached one expires first.", valueName: "n")) var maxSessions =
        10_000
    @Option(
        help: ArgumentHelp(
            "Connections the kernel may complete before they are accepted: room for a failover's reconnecting clients (the kernel caps it at net.core.somaxconn).",
            valueName: "n")) var backlog = 16_384
    @Option(
        help: ArgumentHelp("Output that may wait for a client that stops reading before it is cut off (its session lives on).", valueName: "bytes"))
    var maxOutputBytes = 1 << 20
    @Option(help: ArgumentHelp("Output all connections of one address may hold waiting for their clients; 0 for no cap.", valueName: "bytes"))
    var maxOutputBytesPerAddress = 64 << 20
    @Option(help: ArgumentHelp("Output all connections together may hold waiting for their clients; 0 for no cap.", valueName: "bytes"))
    var maxOutputBytesTotal = 512 << 20
    @Option(help: ArgumentHelp("Attaches one address may make a second, in bursts of twice as many; 0 for no cap.", valueName: "n"))
    var maxAttachesPerSecond = 100
    @Option(help: ArgumentHelp("Connections one session may have attached at once; 0 for no cap.", valueName: "n"))
    var maxConnectionsPerSession = 32
    @Option(help: ArgumentHelp("Failed log-ins allowed per user and per address before each attempt must wait (doubling).", valueName: "n"))
    var loginAttemptsBeforeThrottle = 5
    @Option(
        help: ArgumentHelp(
            "SQLite database file of a single node: its store and its session records, which a restart gives back (`:memory:`: none kept).",
            valueName: "path")) var db = "viewline.sqlite"
    @Option(
        help: ArgumentHelp(
            "PostgreSQL instead of SQLite, for several nodes over one database (also VIEWLINE_POSTGRES); several servers (host1:port,host2:port) name a cluster's members, and the node follows its primary.",
            valueName: "postgres://user@host/db"))
    var postgres: String?
    @Option(
        help: ArgumentHelp(
            "With --postgres: the address other nodes send clients to for this node's sessions (`moved`); the listening address by default.",
            valueName: "host:port")) var advertise: String?
    @Option(
        help: ArgumentHelp(
            "With --postgres: a node silent this long is gone, and its sessions are restored where clients attach (5 by default). The first node stores it for the cluster; a node started with another value adopts the stored one, with a warning.",
            valueName: "seconds")) var nodeTimeout: Int?
    @Option(help: ArgumentHelp("JSON array of {\"user\",\"password\"} objects: the users who can log in.", valueName: "file")) var users: String?
    @Option(help: ArgumentHelp("Lifetime of an access token issued at login.", valueName: "seconds")) var tokenTtl = 3600
    @Option(help: ArgumentHelp("JSON array of {\"name\",\"phone\",\"address\"} read at every contacts sync.", valueName: "file")) var remoteContacts:
        String?
    @Option(help: ArgumentHelp("Close a connection whose line stays incomplete this long (its session lives on); 0 for never.", valueName: "seconds"))
    var lineTimeout = 30
    @Option(help: ArgumentHelp("trace, debug, info, notice, warning, error or critical.", valueName: "level")) var logLevel = "info"
    @Option(
        help: ArgumentHelp(
            "text (for people) or json (one object per line: time, level, message and every field such as session, cmd, peer, code).",
            valueName: "format")) var logFormat = "text"

    /// Sends this process SIGTERM once standard input ends (or cannot be read), from a
    /// thread of its own that only waits there: whoever started the server with a pipe
    /// it keeps open stops it by closing the pipe, or by dying.
    static func signalAtEndOfInput() {
        Thread.detachNewThread {
            var bytes = [UInt8](repeating: 0, count: 512)
            while true {
                let count = bytes.withUnsafeMutableBytes { read(STDIN_FILENO, $0.baseAddress, $0.count) }
                if count == 0 || (count < 0 && errno != EINTR) { break }
            }
            kill(getpid(), SIGTERM)
        }
    }

    func validate() throws {
        guard (0...65535).contains(port) else { throw ValidationError("--port must be between 0 and 65535") }
        if let eventLoops, !(1...256).contains(eventLoops) { throw ValidationError("--event-loops must be between 1 and 256") }
        do { _ = try TrustedProxies(trustedProxy) } catch { throw ValidationError("--trusted-proxy: \(error)") }
        guard TrustedProxies.ForwardingHeader(rawValue: forwardedHeader.lowercased()) != nil else {
            throw ValidationError("--forwarded-header must be x-forwarded-for or forwarded")
        }
        guard SeedApps.releases.contains(seedRelease) else {
            throw ValidationError("--seed-release must be \(SeedApps.releases.map(String.init).joined(separator: " or "))")
        }
        guard backendLatency >= 0 else { throw ValidationError("--backend-latency must not be negative") }
        guard maxLineBytes >= 16 else { throw ValidationError("--max-line-bytes must be at least 16") }
        guard (tlsCert == nil) == (tlsKey == nil) else { throw ValidationError("--tls-cert and --tls-key go together") }
        guard sessionTtl > 0 else { throw ValidationError("--session-ttl must be positive") }
        guard maxSessions > 0 else { throw ValidationError("--max-sessions must be positive") }
        guard backlog >= 1 else { throw ValidationError("--backlog must be at least 1") }
        guard maxOutputBytes >= 4096 else { throw ValidationError("--max-output-bytes must be at least 4096") }
        guard maxOutputBytesPerAddress >= 0, maxOutputBytesTotal >= 0 else { throw ValidationError("output budgets must not be negative") }
        guard maxAttachesPerSecond >= 0, maxConnectionsPerSession >= 0 else {
            throw ValidationError("per-address and per-session caps must not be negative")
        }
        guard maxLoginsPerAddress >= 0 else { throw ValidationError("--max-logins-per-address must not be negative") }
        guard eventLogBudget >= 0 else { throw ValidationError("--event-log-budget must not be negative") }
        guard recordingBytes >= 0 else { throw ValidationError("--recording-bytes must not be negative") }
        guard maxClients > 0 else { throw ValidationError("--max-clients must be positive") }
        guard maxClientsPerAddress >= 0, maxSessionsPerAddress >= 0 else { throw ValidationError("per-address caps must not be negative") }
        if let nodeTimeout, nodeTimeout <= 0 { throw ValidationError("--node-timeout must be positive") }
        guard lineTimeout >= 0 else { throw ValidationError("--line-timeout must not be negative") }
        guard tokenTtl > 0 else { throw ValidationError("--token-ttl must be positive") }
        guard Logger.Level(rawValue: logLevel) != nil else { throw ValidationError("unknown --log-level \(logLevel)") }
        guard ["text", "json"].contains(logFormat) else { throw ValidationError("--log-format is text or json (got \(logFormat))") }
    }

    /// The host's cap on a listen backlog (Linux's `net.core.somaxconn`), if it can be read.
    static func hostBacklogCap() -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/sys/net/core/somaxconn", encoding: .utf8) else { return nil }
        return Int(text.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    func run() async throws {
        // Output buffers past 128 KiB (a slow reader's backlog grows to 1 MiB) are
        // mappings of their own, given back when freed: the process holds no more
        // than its output budgets count (see CHeap).
        _ = viewline_return_large_allocations(128 * 1024)
        var metricsRegistry: PrometheusCollectorRegistry?
        if printSchema {
            let application = Application(SeedApps.all)
            print(application.commands.jsonSchema(views: application.views.map(\.name)).encoded)
            return
        }
        let level = Logger.Level(rawValue: logLevel) ?? .info
        let json = logFormat == "json"
        LoggingSystem.bootstrap { label in
            if json {
                var handler = JSONLogHandler(label: label)
                handler.logLevel = level
                return handler
            }
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "viewline")
        if metricsPort != nil {
            // Before anything is made: the stores' and flows' figures (swift-metrics)
            // land in the registry /metrics serves, next to the server's own.
            let registry = PrometheusCollectorRegistry()
            MetricsSystem.bootstrap(ServerMetrics.factory(for: registry))
            metricsRegistry = registry
        }

        // Before any application is built: the views' record declarations are read then.
        SeedApps.release.store(seedRelease, ordering: .relaxed)
        var configuration = ServerConfiguration()
        if seedRelease != 1 { configuration.release = "\(ViewlineRelease.serverName) seed-apps/\(seedRelease)" }
        configuration.host = host
        configuration.trustedProxies = try TrustedProxies(
            trustedProxy, header: TrustedProxies.ForwardingHeader(rawValue: forwardedHeader.lowercased()) ?? .xForwardedFor)
        for network in configuration.trustedProxies.tooWide {
            logger.warning(
                "a trusted proxy network this wide lets any client in it claim any address: trust only the proxies' own addresses",
                metadata: ["trusted-proxy": "\(network)"])
        }
        configuration.port = port
        configuration.admin = admin
        if let inspectorTokenFile {
            do { configuration.inspectorToken = try InspectorTokenFile.token(at: inspectorTokenFile) } catch {
                throw ValidationError("--inspector-token-file: \(error)")
            }
        }
        configuration.maximumLineBytes = maxLineBytes
        configuration.maximumClients = maxClients
        if let tlsCert, let tlsKey { configuration.tls = try TLS(certificateChainFile: tlsCert, privateKeyFile: tlsKey) }
        configuration.webPort = webPort
        configuration.webOrigins = webOrigin
        configuration.webHostNames = webHostName
        configuration.eventLoops = eventLoops
        configuration.drainTimeout = .milliseconds(Int(drainSeconds * 1000))
        configuration.slowCommandThreshold = .milliseconds(slowCommandMs)
        configuration.metricsPort = metricsPort
        configuration.metricsRegistry = metricsRegistry
        configuration.metricsHost = metricsHost
        let beyondLoopback = !["127.0.0.1", "::1", "localhost"].contains(host)
        if tlsCert == nil && beyondLoopback {
            logger.warning(
                "listening beyond loopback without TLS: session tokens and passwords cross the network in clear text; use --tls-cert and --tls-key",
                metadata: ["host": "\(host)"])
        }
        configuration.maximumOutputBytes = maxOutputBytes
        configuration.maximumOutputBytesPerAddress = maxOutputBytesPerAddress
        configuration.maximumOutputBytesTotal = maxOutputBytesTotal
        configuration.listenBacklog = backlog
        if let cap = Self.hostBacklogCap(), backlog > cap {
            // As redis says of its tcp-backlog: past the cap, a reconnect storm's
            // clients are dropped and retried by their kernels a second later.
            logger.log(
                level: beyondLoopback ? .warning : .info,
                "the listen backlog is capped by net.core.somaxconn: clients reconnecting at once past it wait a second or more; raise it with sysctl net.core.somaxconn=\(backlog)",
                metadata: ["backlog": "\(backlog)", "somaxconn": "\(cap)"])
        }
        configuration.incompleteLineTimeout = lineTimeout > 0 ? .seconds(lineTimeout) : nil
        configuration.sessions.timeToLive = .seconds(sessionTtl)
        configuration.sessions.maximumSessions = maxSessions
        configuration.sessions.maximumSessionsPerAddress = maxSessionsPerAddress
        configuration.sessions.eventLogBudgetBytes = eventLogBudget
        configuration.sessions.recordingBytes = recordingBytes
        configuration.sessions.attachesPerSecondPerAddress = maxAttachesPerSecond
        configuration.sessions.maximumConnectionsPerSession = maxConnectionsPerSession
        configuration.maximumClientsPerAddress = maxClientsPerAddress

        var apps = SeedApps.Configuration()
        apps.backendLatency = .milliseconds(backendLatency)
        apps.usersFile = users
        apps.demoUsers = demo
        apps.loginQueueLimitPerAddress = maxLoginsPerAddress > 0 ? maxLoginsPerAddress : .max
        apps.tokenLifetime = TimeInterval(tokenTtl)
        apps.remoteContactsFile = remoteContacts
        apps.loginFailuresBeforeThrottling = loginAttemptsBeforeThrottle

        let faults = FaultInjector()
        // The connections' server-side limits follow the node timeout asked for; when
        // the cluster agreed on another, the node opens its pool again under that one.
        let proposed = Duration.seconds(nodeTimeout ?? 5)
        let postgresURL = try (postgres ?? ProcessInfo.processInfo.environment["VIEWLINE_POSTGRES"].flatMap { $0.isEmpty ? nil : $0 })
            .map { text in
                var url = try PostgresURL(text)
                url.nodeTimeout = proposed
                return url
            }
        // On PostgreSQL the database clients (one per server the URL lists) are
        // services of the group, beside the server.
        let clients = postgresURL.map { PostgresStore.makeClients($0, logger: logger) }
        let nodeDatabase = NodeDatabase()
        let (db, nodeTimeout, advertise) = (db, nodeTimeout, advertise)
        let watchdog = ShutdownWatchdog(drain: configuration.drainTimeout)
        let node = ServerNode(
            start: { [apps, configuration] in
                let store: any AppStore
                var cluster: Cluster?
                if let postgresURL, let clients {
                    // The store and the cluster's directory share one pool, its deadlines
                    // and one health watch. 10 s: twice what the server lets one statement
                    // run (4.5 s), so a call on a connection gone silent fails (and the
                    // connection is replaced) long before a person gives up on the reply;
                    // the directory's own statements use the node timeout.
                    var database = DatabaseAccess(clients: clients, url: postgresURL, operationTimeout: .seconds(10), logger: logger)
                    nodeDatabase.serve(database)
                    // The cluster's own tables. The first contact waits for a database
                    // that is not there yet (started after the node, failing over,
                    // refusing it), each attempt within the pool's deadline, and says why.
                    var directory = PostgresSessionDirectory(database)
                    for attempt in 1... {
                        do {
                            try await directory.migrate()
                            break
                        } catch let error as StoreUnavailable {
                            // A pooler that refuses the node's limits refuses them each time.
                            if let refusal = database.refusal { throw DatabaseRefusesNode(description: refusal) }
                            logger.warning("waiting for the database", metadata: ["attempt": "\(attempt)", "error": "\(error)"])
                            try await Task.sleep(for: .seconds(1))
                        }
                    }
                    // One node timeout for the whole cluster: nodes that measured leases
                    // differently would each take the other's live sessions.
                    let agreed = try await directory.agreedNodeTimeout(proposing: proposed)
                    if agreed != proposed {
                        if nodeTimeout != nil {
                            logger.warning(
                                "the cluster's node timeout is stored in its database; using it instead of --node-timeout",
                                metadata: [
                                    "node-timeout": "\(agreed)", "requested": "\(proposed)",
                                ])
                        }
                        // Server-side limits below the agreed timeout: a pool of the
                        // node's own, run by the group until the node has drained (the
                        // group's client only served the agreement).
                        var agreedURL = postgresURL
                        agreedURL.nodeTimeout = agreed
                        database = DatabaseAccess(
                            url: agreedURL, operationTimeout: .seconds(10), logger: logger, sharingHealthWith: database)
                        nodeDatabase.serve(database)
                        directory = PostgresSessionDirectory(database)
                        _ = try await directory.agreedNodeTimeout(proposing: agreed)
                    }
                    // What the node's safety rests on: the database enforces its limits.
                    try await directory.checkServerSideLimits()
                    // Said once at start: what the database's replication cannot promise.
                    if let warning = try? await directory.durabilityWarning() {
                        logger.warning("\(warning)", metadata: ["see": "docs/deploying.md"])
                    }
                    let postgresStore = PostgresStore(database)
                    try await postgresStore.migrate()
                    store = postgresStore
                    // One token key too: any node tells a token another made from a guess.
                    let tokenKey = try await directory.agreedTokenKey()
                    cluster = Cluster(directory: directory, address: advertise, nodeTimeout: agreed, tokenKey: tokenKey, logger: logger)
                    watchdog.clusterAgreed(nodeTimeout: agreed)
                    logger.info("using PostgreSQL", metadata: ["url": "\(postgresURL.redacted)"])
                } else {
                    // One server per file, locked before anything opens it.
                    let lock = db == ":memory:" ? nil : try SQLiteSessionDirectory.lock(path: db)
                    let sqlite = try SQLiteStore.open(path: db)
                    store = sqlite
                    if let lock {
                        // A cluster of one over its own file: sessions survive a restart.
                        let directory = SQLiteSessionDirectory(sqlite, lock: lock, expireAfter: configuration.sessions.timeToLive)
                        cluster = Cluster(
                            directory: directory, address: advertise, nodeTimeout: proposed, tokenKey: try await directory.agreedTokenKey(),
                            logger: logger)
                        watchdog.clusterAgreed(nodeTimeout: proposed)
                        logger.info("sessions are recorded: a restart gives them back", metadata: ["db": "\(db)"])
                    }
                }
                nodeDatabase.settled()
                let services = try await SeedApps.liveServices(apps, store: store, faults: faults)
                return try ViewlineServer(
                    apps: SeedApps.all, services: services, faults: faults, cluster: cluster, configuration: configuration, logger: logger)
            },
            listening: { [tlsCert] server in
                watchdog.servingBegan()
                let bound = server.localAddress
                print("listening on \(bound.host):\(bound.port)")
                if let metrics = server.metricsAddress {
                    print("metrics on http://\(metrics.host):\(metrics.port)/metrics")
                }
                if let web = server.webAddress {
                    print("web on \(tlsCert == nil ? "http" : "https")://\(web.host):\(web.port)/")
                }
                fflush(nil)
            }, logger: logger)

        // Trapped before anyone is told the port, so a signal never finds the default
        // action: SIGTERM or SIGINT shuts the server down gracefully (it drains, says
        // `bye`, writes its records and leaves the cluster); a second one while it
        // drains: no more waiting.
        for number in [SIGTERM, SIGINT] { signal(number, SIG_IGN) }  // the sources below deliver them
        let signals = await UnixSignalsSequence(trapping: .sigterm, .sigint)
        if stopAtEndOfInput { Self.signalAtEndOfInput() }
        // The group shuts its services down in reverse order: the signal watcher hears
        // a second signal until the end, and the database's services outlive the
        // server's drain and last record writes.
        let watcher = SignalWatcher(signals: signals, watchdog: watchdog, drainSeconds: drainSeconds, logger: logger)
        let services: [ServiceGroupConfiguration.ServiceConfiguration] =
            [.init(service: watcher)] + (clients.map { $0.map { .init(service: $0) } + [.init(service: nodeDatabase)] } ?? []) + [
                .init(service: node, successTerminationBehavior: .gracefullyShutdownGroup)
            ]
        let group = ServiceGroup(configuration: .init(services: services, logger: logger))
        watcher.watch(group)
        try await group.run()
    }
}

/// The database refuses the node's connections for a reason waiting does not mend.
struct DatabaseRefusesNode: Error, CustomStringConvertible {
    var description: String
}

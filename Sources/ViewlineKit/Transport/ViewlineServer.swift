import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOWebSocket
import ServiceLifecycle
import Synchronization

/// Serves view-models over TCP: accepts connections, frames lines, hands each line
/// to its connection's session and writes what the session sends. A new
/// connection's session runs on the connection's event loop (see
/// `ClientConnection`). One client's error never reaches another.
///
/// ```swift
/// let server = try ViewlineServer(apps: [Todos.self, Search.self], services: services, configuration: configuration)
/// try await server.run()
/// ```
///
/// `init` only assembles: ``run()`` binds the listeners (and, in a cluster, joins it)
/// and serves. ``listeningAddress`` waits until it has bound, for the port a port-0
/// server picked.
///
/// It is a swift-service-lifecycle `Service`: run it in a `ServiceGroup` beside the
/// services it needs (a `PostgresClient`, a Hummingbird app), and the group's graceful
/// shutdown (SIGTERM) drains it and tells every client `bye`:
///
/// ```swift
/// let group = ServiceGroup(configuration: .init(
///     services: [.init(service: postgres), .init(service: server)],
///     gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
/// try await group.run()
/// ```
public final class ViewlineServer: Service, Sendable {
    /// How the server listens.
    public let configuration: ServerConfiguration
    /// The assembled view-models every session runs.
    public let application: Application
    let logger: Logger
    let group: MultiThreadedEventLoopGroup
    /// What the connections of each event loop share (the command table, its flush
    /// list, the limits, the logger), by loop.
    private let loopContexts: [ObjectIdentifier: ConnectionContext]
    let registry = ConnectionRegistry()
    private let serverChannel: Mutex<(any Channel)?> = Mutex(nil)
    /// The web listener (page and WebSocket), with ``ServerConfiguration/webPort``.
    private let webChannel: Mutex<(any Channel)?> = Mutex(nil)
    /// The operations listener (`/metrics`, `/healthz`, `/readyz`), with ``ServerConfiguration/metricsPort``.
    private let operationsChannel: Mutex<(any Channel)?> = Mutex(nil)
    /// The event loops may only stop once a shutdown in progress has said its `bye`s.
    private let lifecycle = Mutex<Lifecycle>(.serving)
    private let shutdownFinished = Latch()
    /// Opened once ``run()`` has bound every listener, or failed to.
    private let bound = Latch()
    private let bindFailure = Mutex<(any Error)?>(nil)
    /// ``ServerConfiguration/maximumClients``, lowered to what the file limit allows.
    public let maximumClients: Int
    /// Most connections from one address (0: no cap): `--max-clients-per-address`,
    /// scaled down with ``maximumClients`` when the file limit lowered it, so one
    /// address never takes every place.
    public let maximumClientsPerAddress: Int
    private let rejections = Mutex<(count: Int, lastWarning: ContinuousClock.Instant?)>((0, nil))

    private enum Lifecycle { case serving, shuttingDown, stopped }

    /// The address actually bound (port 0 picks a free port), once ``run()`` has
    /// bound it (``listeningAddress`` waits for that); the configured one before.
    public var localAddress: (host: String, port: Int) {
        let address = serverChannel.withLock({ $0 })?.localAddress
        return (address?.ipAddress ?? configuration.host, address?.port ?? configuration.port)
    }

    /// Waits until ``run()`` has bound every listener (and, in a cluster, joined it),
    /// then returns the address it listens on: how a caller that ran the server in
    /// another task learns the port a port-0 server picked. ``webAddress`` and
    /// ``metricsAddress`` are set from then on too.
    ///
    /// - Throws: the error that kept ``run()`` from listening (a port in use, a
    ///   cluster it could not join), or ``ConfigurationError`` when the server was
    ///   shut down before it listened.
    public var listeningAddress: (host: String, port: Int) {
        get async throws {
            await bound.wait()
            if let failure = bindFailure.withLock({ $0 }) { throw failure }
            return localAddress
        }
    }

    /// The web listener's address (the page at `/`, WebSocket at `/ws`), when
    /// ``ServerConfiguration/webPort`` is set.
    public var webAddress: (host: String, port: Int)? {
        guard let address = webChannel.withLock({ $0 })?.localAddress else { return nil }
        return (address.ipAddress ?? configuration.host, address.port ?? 0)
    }

    /// The operations listener's address, when ``ServerConfiguration/metricsPort`` is set.
    public var metricsAddress: (host: String, port: Int)? {
        guard let address = operationsChannel.withLock({ $0 })?.localAddress else { return nil }
        return (address.ipAddress ?? configuration.metricsHost, address.port ?? 0)
    }

    /// Assembles `apps`; ``run()`` binds the port.
    ///
    /// - Parameters:
    ///   - apps: the view-models, in the order `state` and `help` list them.
    ///   - services: what the view-models reach (backends, database, clock).
    ///   - faults: the `fault` table, when a service checks it itself.
    ///   - cluster: this node's part in a cluster (session records, `moved`, restore), if any.
    ///   - configuration: the listeners, limits and TLS.
    ///   - logger: where the server and every session log.
    /// - Throws: ``ConfigurationError`` as ``init(application:configuration:logger:)``
    ///   does, and for a file named by `VIEWLINE_INSPECTOR_TOKEN_FILE` that gives no
    ///   token (``ServerConfiguration/inspectorTokenFromEnvironment``).
    public convenience init(
        apps: [any ViewModel.Type], services: Services = Services(), faults: FaultInjector = FaultInjector(),
        cluster: Cluster? = nil,
        configuration: ServerConfiguration = ServerConfiguration(), logger: Logger = Logger(label: "viewline")
    ) throws {
        var configuration = configuration
        if configuration.inspectorToken == nil, configuration.inspectorTokenFromEnvironment, let path = InspectorTokenFile.pathFromEnvironment {
            configuration.inspectorToken = try InspectorTokenFile.token(at: path)
        }
        let application = Application(apps, services: services, faults: faults, cluster: cluster, configuration: configuration, logger: logger)
        try self.init(application: application, configuration: configuration, logger: logger)
    }

    /// A server for an assembled application; ``run()`` binds the port.
    ///
    /// - Throws: ``ConfigurationError`` naming every backend the view-models declare
    ///   and the application's ``Services`` lack, or for an inspector token shorter
    ///   than ``Application/shortestInspectorToken``. (An application assembled
    ///   beforehand took its inspector token from the configuration it was given:
    ///   the environment's file is not read here; ``InspectorTokenFile/token(at:)``
    ///   reads one.)
    public init(application: Application, configuration: ServerConfiguration, logger: Logger) throws {
        if let token = configuration.inspectorToken, token.utf8.count < Application.shortestInspectorToken {
            throw ConfigurationError(description: "the inspector token has fewer than \(Application.shortestInspectorToken) characters")
        }
        if !application.missingBackends.isEmpty {
            let names = application.missingBackends.map { "\"\($0.name)\" (\($0.summary))" }
            throw ConfigurationError(description: "the view-models call backends the server's Services lack: \(names.joined(separator: ", "))")
        }
        self.configuration = configuration
        self.application = application
        self.logger = logger
        maximumClients = Self.clientLimit(configuration.maximumClients, logger: logger)
        maximumClientsPerAddress = Self.perAddressLimit(
            configuration.maximumClientsPerAddress, of: maximumClients, requested: configuration.maximumClients, logger: logger)
        let loops = configuration.eventLoops ?? System.coreCount
        self.group = MultiThreadedEventLoopGroup(numberOfThreads: loops)
        loopContexts = Dictionary(
            uniqueKeysWithValues: group.makeIterator().map { loop in
                (ObjectIdentifier(loop), Self.connectionContext(application, configuration, logger, flushes: LoopFlushes(loop: loop)))
            })
        application.eventLoopCount.store(loops, ordering: .relaxed)
    }

    /// Binds every listener and, in a cluster, joins it; on failure, closes what it
    /// bound.
    private func listen() async throws {
        let configuration = configuration
        let maximumLineBytes = configuration.maximumLineBytes
        let lineTimeout = configuration.incompleteLineTimeout.map { TimeAmount.nanoseconds(Int64($0.seconds * 1e9)) }
        let tls = configuration.tls
        let trusted = configuration.trustedProxies
        let proxyWarnings = ProxyHeaderWarnings(logger: logger)
        do {
            let channel = try await ServerBootstrap(group: group)
                .serverChannelOption(.backlog, value: Int32(clamping: configuration.listenBacklog))
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
                .keepingClientsAlive()
                // Commands are short lines: start each connection's receive buffer small
                // (an idle connection keeps it) and let bursts grow it.
                .childChannelOption(.recvAllocator, value: AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 64, maximum: 65536))
                .childChannelOption(
                    .writeBufferWaterMark,
                    value: .init(
                        low: configuration.maximumOutputBytes / 2, high: configuration.maximumOutputBytes)
                )
                // `printf … | nc -N` closes its sending side first: keep answering.
                .childChannelOption(.allowRemoteHalfClosure, value: true)
                .childChannelInitializer { [unowned self] channel in
                    channel.eventLoop.makeCompletedFuture {
                        // Before TLS: a proxy's header precedes the handshake.
                        let peer = try Self.addProxyHeader(
                            trusted, to: channel.pipeline.syncOperations, timeout: lineTimeout, warnings: proxyWarnings)
                        if let tls {
                            try tls.addServerHandlers(to: channel.pipeline.syncOperations)
                        }
                        let budget = InputBudget()
                        let acceptor = ConnectionHandler(server: self, transport: tls == nil ? .tcp : .tls, budget: budget, peer: peer)
                        // The framer ends the pipeline: once the acceptor made the connection,
                        // the framer tells it everything directly (and lets the acceptor go).
                        try channel.pipeline.syncOperations.addHandler(
                            LineFrameHandler(
                                maximumLength: maximumLineBytes, incompleteLineTimeout: lineTimeout, budget: budget, acceptor: acceptor))
                    }
                }
                .bind(host: configuration.host, port: configuration.port).get()
            serverChannel.withLock { $0 = channel }
            if let webPort = configuration.webPort {
                let web = try await bindWeb(port: webPort, tls: tls)
                webChannel.withLock { $0 = web }
            }
            if let metricsPort = configuration.metricsPort {
                let operations = try await bindOperations(host: configuration.metricsHost, port: metricsPort)
                operationsChannel.withLock { $0 = operations }
            }
        } catch {
            await closeListeners()
            throw error
        }
        if let cluster = application.cluster {
            let address = localAddress
            cluster.bound(host: address.host, port: address.port)
            if let web = webAddress {
                let host = web.host.contains(":") ? "[\(web.host)]" : web.host
                cluster.boundWeb("\(tls == nil ? "http" : "https")://\(host):\(web.port)/")
            }
            do {
                try await cluster.join(sessions: application.sessions)
            } catch {
                await closeListeners()
                throw error
            }
        }
    }

    private func closeListeners() async {
        try? await serverChannel.withLock({ $0 })?.close()
        try? await webChannel.withLock({ $0 })?.close()
        try? await operationsChannel.withLock({ $0 })?.close()
    }

    /// Serves until ``shutdown(reason:)`` closes the listening socket, then waits
    /// for every connection to finish.
    ///
    /// A graceful shutdown of the `ServiceGroup` it runs in, or cancelling the task
    /// that runs it, starts ``shutdown(reason:)``: commands running finish within the
    /// drain timeout, every client is told `bye` (`shutdown`), and `run` returns.
    ///
    /// It first binds the listeners (and joins the cluster); a failure there is thrown
    /// (and given to whoever waits on ``listeningAddress``), with the event loops
    /// stopped. Run it once.
    public func run() async throws {
        do {
            guard lifecycle.withLock({ $0 == .serving }) else {
                throw ConfigurationError(description: "the server was shut down before it listened")
            }
            try await listen()
            // A shutdown that came while binding found no listener to close, and may
            // have left the cluster before this node had joined it.
            if !lifecycle.withLock({ $0 == .serving }) {
                await closeListeners()
                await application.cluster?.leave()
            }
        } catch {
            bindFailure.withLock { $0 = error }
            bound.open()
            lifecycle.withLock { $0 = .stopped }
            try? await group.shutdownGracefully()
            throw error
        }
        bound.open()
        try await withTaskCancellationOrGracefulShutdownHandler {
            // The cluster's loops and the sessions' expiry are children of this run:
            // the cluster's end when the shutdown leaves the cluster, before `serve`
            // returns; the expiry when `serve` has returned.
            try await withThrowingTaskGroup(of: Void.self) { group in
                if let cluster = application.cluster { group.addTask { await cluster.run() } }
                group.addTask { await self.application.sessions.expire() }
                try await self.serve()
                group.cancelAll()  // stopped without a shutdown's leave: the loops end too
                try await group.waitForAll()
            }
        } onCancelOrGracefulShutdown: {
            // Fire-and-forget from a synchronous handler: the shutdown closes the
            // listener, and this run's `serve` awaits that.
            Task { await self.shutdown() }
        }
    }

    private func serve() async throws {
        try await listener.closeFuture.get()
        try? await webChannel.withLock({ $0 })?.closeFuture.get()
        if lifecycle.withLock({ $0 == .shuttingDown }) {
            // Every connection was told `bye` and closed; one whose last command still
            // awaits a call into another system (which may not end when cancelled, only
            // at its own deadline) is not waited for past the `bye` timeout: a shutdown
            // ends within the drain plus the node timeout plus that, whatever is in flight.
            await shutdownFinished.wait()
            if !(await registry.waitUntilEmpty(within: .nanoseconds(Self.byeTimeout.nanoseconds))) {
                logger.warning(
                    "stopping with connections whose last work has not returned",
                    metadata: ["connections": "\(registry.count)"])
            }
        } else {
            await registry.waitUntilEmpty()
        }
        lifecycle.withLock { $0 = .stopped }
        try? await self.group.shutdownGracefully()
    }

    /// Says `bye` to every client, closes every connection and stops accepting.
    /// Safe to call more than once and from any task; returns when it is done.
    public func shutdown(reason: String = "server shutting down") async {
        let previous = lifecycle.withLock { state in
            defer { if state == .serving { state = .shuttingDown } }
            return state
        }
        switch previous {
        case .stopped: return
        case .shuttingDown: return await shutdownFinished.wait()
        case .serving: break
        }
        defer { shutdownFinished.open() }
        try? await serverChannel.withLock({ $0 })?.close()
        try? await webChannel.withLock({ $0 })?.close()
        // Draining (`/readyz` already says 503): commands already running finish,
        // within the drain timeout, before anyone is told `bye`.
        let began = ContinuousClock.now
        await drain(within: configuration.drainTimeout)
        logger.debug("drained", metadata: ["since-shutdown": "\(ContinuousClock.now - began)"])
        // From here no line read runs, and a command still running (the drain ran out,
        // or it began just after the drain) gets its reply before its connection's `bye`:
        // a client sends again, on its resumed connection, whatever had no reply (PROTOCOL §4).
        for (_, outbound) in registry.connections { outbound.stopRunningInput() }
        await Session.onTheirLoops(application.sessions.all) { session in
            session.answerUnfinishedCommands(Self.shutDownMidCommand)
            return false
        }
        // Records written and the node gone from the cluster before the `bye`s: a
        // client that attaches to another node right away finds its session there.
        if let cluster = application.cluster {
            await cluster.leave()
            logger.debug("left the cluster; saying bye", metadata: ["since-shutdown": "\(ContinuousClock.now - began)"])
        }
        let bye = ServerMessage.bye(Bye(.shutdown, reason)).line
        // Every connection at once, each given a moment to take its `bye`: a client
        // that stopped reading cannot hold the shutdown up.
        await withTaskGroup(of: Void.self) { group in
            for (channel, outbound) in registry.connections where channel.isActive {
                group.addTask {
                    let deadline = channel.eventLoop.scheduleTask(in: Self.byeTimeout) { channel.close(promise: nil) }
                    outbound.send(bye)
                    try? await outbound.drain()
                    deadline.cancel()
                    try? await channel.close()
                }
            }
        }
        await Session.onTheirLoops(application.sessions.removeAll()) { session in
            session.close(Bye(.shutdown, reason))
            return false
        }
        try? await operationsChannel.withLock({ $0 })?.close()
        logger.debug("every client told bye", metadata: ["since-shutdown": "\(ContinuousClock.now - began)"])
    }

    /// Waits until every connection has run what it received (nothing queued or
    /// running) and no session runs a command, or `limit` passes.
    /// Returns whether it drained in time.
    @discardableResult
    private func drain(within limit: Duration) async -> Bool {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            if registry.allIdle, await Session.onTheirLoops(application.sessions.all, { $0.commandsRunning > 0 }) == 0 {
                return true
            }
            try? await Task.sleep(for: .milliseconds(20))
        }
        logger.warning("drain timed out with commands still running", metadata: ["drain-seconds": "\(limit)"])
        return false
    }

    /// What a command still running when the drain timed out answers.
    static let shutDownMidCommand = ProtocolError(
        .unavailable, "the server shut down before this command finished; it may or may not have run")

    /// How long a connection has to take its `bye` at shutdown before it is closed anyway.
    static let byeTimeout = TimeAmount.seconds(2)

    /// Connections open now.
    public var connectionCount: Int { registry.count }

    /// `/metrics`: the Prometheus text exposition (empty without metrics).
    func metricsExposition() -> [UInt8] {
        application.metrics?.exposition(
            sessions: application.sessions, connections: application.connections,
            eventLoopCount: configuration.eventLoops ?? System.coreCount,
            cluster: application.cluster) ?? []
    }

    /// Whether every event loop runs a task within `limit` (`/healthz`).
    func eventLoopsAnswer(within limit: TimeAmount) -> EventLoopFuture<Bool> {
        let any = group.next()
        let runs = group.makeIterator().map { loop in loop.submit { true } }
        let all = EventLoopFuture.whenAllSucceed(runs, on: any)
        let promise = any.makePromise(of: Bool.self)
        // Both callbacks run on `any`: the first to come answers.
        final class Answered: @unchecked Sendable { var yes = false }
        let answered = Answered()
        let timeout = any.scheduleTask(in: limit) {
            guard !answered.yes else { return }
            answered.yes = true
            promise.succeed(false)
        }
        all.whenComplete { result in
            timeout.cancel()
            guard !answered.yes else { return }
            answered.yes = true
            promise.succeed((try? result.get()) != nil)
        }
        return promise.futureResult
    }

    /// Why the node should get no new traffic now (`/readyz`), or `nil` when ready.
    func notReadyReason() -> String? {
        if lifecycle.withLock({ $0 }) != .serving { return "draining: the server is shutting down" }
        if let reason = application.cluster?.refusalReason() { return "unavailable: \(reason)" }
        return nil
    }

    /// The listening socket.
    private var listener: any Channel { serverChannel.withLock { $0! } }

    /// A new connection, on its event loop: its session (on the same loop) and
    /// `welcome`, or `bye` when the server is full.
    /// `peer` is the client's address (a trusted proxy's word, or the TCP peer's).
    func accept(_ channel: any Channel, peer: SocketAddress?, transport: ServerMetrics.Transport, budget: InputBudget) -> ClientConnection? {
        let address = peer?.clientKey
        let number = registry.nextNumber()
        // Its backlog leaves the counts when the connection is told the channel closed
        // (``ClientConnection/channelInactive()``): every way out of here before that
        // connection exists goes through `refuse`, which has the channel tell it.
        let outbound = OutboundLines(channel: channel, context: connectionContext(on: channel.eventLoop), address: address ?? "")
        if let refusal = registry.add(number, outbound: outbound, limit: maximumClients, perAddress: maximumClientsPerAddress) {
            refuse(outbound, reason: refusal == .full ? "max clients reached" : "max clients per address reached")
            return nil
        }
        // Recorded sessions outlive this node's life: their ids carry a part of its name,
        // so no session made here is named like one restored from an earlier life.
        let id = application.cluster.map { "s\(number)-\($0.nodeID.suffix(6))" } ?? "s\(number)"
        let session = Session(id: id, application: application, peer: address, eventLoop: channel.eventLoop)
        switch application.sessions.register(session) {
        case .success(let evicted):
            // Fire-and-forget: the evicted session closes on its own executor, owing
            // this connection nothing.
            if let evicted { Task { await evicted.close(.evicted) } }
        case .failure(let refusal):
            registry.remove(number)
            refuse(outbound, reason: refusal == .full ? "max sessions reached" : "max sessions per address reached")
            return nil
        }
        application.cluster?.changed(session)  // its record, so another node can take it over
        let connection = ClientConnection(
            number: number, outbound: outbound, budget: budget, session: session, server: self, transport: transport)
        registry.bind(number, to: connection)
        application.connections.opened(transport)
        if let metrics = application.metrics {
            metrics.connectionOpened(transport)
            metrics.sessionsCreated.increment()
        }
        session.assumeIsolated { $0.connect(connection.link, as: number) }
        application.sessions.attached(session)
        var metadata: Logger.Metadata = ["session": "\(session.id)", "peer": "\(peer?.description ?? "?")"]
        if let proxy = channel.remoteAddress, proxy != peer { metadata["proxy"] = "\(proxy)" }
        logger.info("connected", metadata: metadata)
        outbound.send(session.welcome.line)
        return connection
    }

    /// What the connections of `loop` share: one of the server's loops has its own;
    /// another (never the case when serving) gets one by itself.
    private func connectionContext(on loop: any EventLoop) -> ConnectionContext {
        loopContexts[ObjectIdentifier(loop)] ?? Self.connectionContext(application, configuration, logger, flushes: nil)
    }

    private static func connectionContext(
        _ application: Application, _ configuration: ServerConfiguration, _ logger: Logger, flushes: LoopFlushes?
    ) -> ConnectionContext {
        var lease: (@Sendable () -> ContinuousClock.Instant?)?
        if let cluster = application.cluster { lease = { cluster.servingUntil() } }
        return ConnectionContext(
            commands: application.commands, logger: logger, metrics: application.metrics, counts: application.connections,
            flushes: flushes, limit: configuration.maximumOutputBytes, lease: lease)
    }

    /// A connection ended and left its session.
    func connectionEnded(_ number: Int, transport: ServerMetrics.Transport) {
        registry.remove(number)
        application.connections.closed(transport)
    }

    /// One connection too many: `bye` and close, with a warning at most once a
    /// second for the whole burst.
    private func refuse(_ outbound: OutboundLines, reason: String) {
        outbound.closesWithChannel()  // no connection's handler will tell it
        outbound.send(ServerMessage.bye(Bye(.refused, reason)).line)
        outbound.flushThenClose()
        let now = ContinuousClock.now
        let refused = rejections.withLock { state -> Int? in
            state.count += 1
            if let last = state.lastWarning, now - last < .seconds(1) { return nil }
            defer { state = (0, now) }
            return state.count
        }
        if let refused {
            logger.warning(
                "\(reason): refusing connections",
                metadata: [
                    "refused": "\(refused)", "max-clients": "\(maximumClients)",
                ])
        }
    }
}

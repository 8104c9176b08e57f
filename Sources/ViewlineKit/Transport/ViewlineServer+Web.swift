import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOWebSocket
import ServiceLifecycle
import Synchronization

/// The server's HTTP listeners: the web page with its WebSocket at `/ws`, and the
/// operations port (`/metrics`, `/healthz`, `/readyz`).
extension ViewlineServer {
    /// Binds the web listener: HTTP for the page, upgraded to WebSocket at `/ws`,
    /// where each text message is a line and the connection runs like a TCP one
    /// (same ``ConnectionHandler``, limits and client count).
    func bindWeb(port: Int, tls: (any TransportSecurity)?) async throws -> any Channel {
        let maximumLineBytes = configuration.maximumLineBytes
        let origins = WebOrigins(
            scheme: tls == nil ? "http" : "https", allowed: Set(configuration.webOrigins),
            hostNames: configuration.webHostNames
                + configuration.webOrigins.compactMap { origin in
                    origin.split(separator: "/").dropFirst().first.flatMap { WebOrigins.hostName(String($0)) }
                })
        let admission = httpAdmission
        let timeout = Self.httpTimeout(configuration)
        let trusted = configuration.trustedProxies
        let proxyWarnings = ProxyHeaderWarnings(logger: logger)
        return try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: Int32(clamping: configuration.listenBacklog))
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .keepingClientsAlive()
            .childChannelOption(
                .writeBufferWaterMark,
                value: .init(
                    low: configuration.maximumOutputBytes / 2, high: configuration.maximumOutputBytes)
            )
            .childChannelInitializer { [unowned self] channel in
                channel.eventLoop.makeCompletedFuture {
                    let peer =
                        try Self.addProxyHeader(
                            trusted, to: channel.pipeline.syncOperations, timeout: timeout, required: false, warnings: proxyWarnings)
                    if let tls {
                        try tls.addServerHandlers(to: channel.pipeline.syncOperations)
                    }
                    let guarded = HTTPConnectionGuard(admission: admission, timeout: timeout, peer: peer, trusted: trusted)
                    let page = WebPageHandler(origins: origins, inspector: application.inspects)
                    let upgrader = WebSocketUpgrader(
                        shouldUpgrade: { channel, head in
                            guard
                                head.uri.split(separator: "?").first == "/ws" && origins.acceptsHost(head)
                                    && origins.allows(head, local: channel.localAddress)
                            else { return false }
                            // Through a trusted proxy in HTTP mode: the session is the
                            // client's its forwarding header names.
                            if let peer, let relay = peer.proxied ?? channel.remoteAddress, trusted.contains(relay) {
                                peer.forwarded(for: trusted.client(of: relay, headers: head.headers))
                            }
                            return true
                        },
                        upgradePipeline: { [unowned self] pipeline in
                            // A frame somewhat over the line limit still arrives, to be
                            // answered `line_too_long`; far over it, the socket closes (1009).
                            let budget = InputBudget()
                            let lines = WebSocketLines(
                                maximumLength: maximumLineBytes, maximumFrameLength: min(Int(UInt32.max), maximumLineBytes * 2 + 1024),
                                incompleteMessageTimeout: timeout, budget: budget)
                            try pipeline.addHandlers(lines, ConnectionHandler(server: self, transport: .websocket, budget: budget, peer: peer))
                        })
                    let queue = HTTPRequestQueue(logger: logger)
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(
                        withServerUpgrade: (
                            upgraders: [upgrader],
                            completionHandler: { context in
                                // The guard's place goes back: the protocol connection takes its own.
                                context.pipeline.syncOperations.removeHandler(page, promise: nil)
                                context.pipeline.syncOperations.removeHandler(guarded, promise: nil)
                            }
                        ))
                    try Self.addRequestQueue(queue, to: channel.pipeline.syncOperations)
                    try channel.pipeline.syncOperations.addHandlers(guarded, page)
                }
            }
            .bind(host: configuration.host, port: port).get()
    }

    /// With trusted proxies, a connection's first handler reads their PROXY protocol
    /// header (``ProxyHeaderHandler``); returns where it puts the client's address
    /// (`nil`: no proxy is trusted, the peer is the client).
    /// On the web listener (`required` false) a trusted proxy may send none: its
    /// requests' forwarding headers name the clients.
    static func addProxyHeader(
        _ trusted: TrustedProxies, to pipeline: ChannelPipeline.SynchronousOperations, timeout: TimeAmount?, required: Bool = true,
        warnings: ProxyHeaderWarnings
    ) throws -> PeerAddress? {
        guard !trusted.isEmpty else { return nil }
        let peer = PeerAddress()
        try pipeline.addHandler(
            ProxyHeaderHandler(trusted: trusted, peer: peer, timeout: timeout ?? .seconds(10), required: required, warnings: warnings))
        return peer
    }

    /// Puts `queue` between NIO's request decoder and its pipelining handler, where it
    /// sees every request decoded before the pipelining handler keeps it.
    static func addRequestQueue(_ queue: HTTPRequestQueue, to pipeline: ChannelPipeline.SynchronousOperations) throws {
        let pipelining = try pipeline.handler(type: HTTPServerPipelineHandler.self)
        try pipeline.addHandler(queue, position: .before(pipelining))
    }

    /// Where HTTP connections hold their places: the same registry and limits as
    /// protocol connections.
    private var httpAdmission: HTTPConnectionGuard.Admission {
        .init(registry: registry, limit: maximumClients, perAddress: maximumClientsPerAddress, counts: application.connections)
    }

    /// How long an HTTP request's head may take to arrive whole, a keep-alive
    /// connection may stay idle, or a response backlog over the budget may take to
    /// drain: the line timeout (`--line-timeout`), which bounds an incomplete line the
    /// same way.
    static func httpTimeout(_ configuration: ServerConfiguration) -> TimeAmount? {
        configuration.incompleteLineTimeout.map { TimeAmount.nanoseconds(Int64($0.seconds * 1e9)) }
    }

    /// Binds the operations listener: the same HTTP plumbing and limits as the web listener.
    func bindOperations(host: String, port: Int) async throws -> any Channel {
        let admission = httpAdmission
        let timeout = Self.httpTimeout(configuration)
        let budget = configuration.maximumOutputBytes
        return try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 64)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.writeBufferWaterMark, value: .init(low: budget / 2, high: budget))
            .childChannelInitializer { [unowned self] channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try Self.addRequestQueue(HTTPRequestQueue(logger: logger), to: channel.pipeline.syncOperations)
                    try channel.pipeline.syncOperations.addHandlers(
                        HTTPConnectionGuard(admission: admission, timeout: timeout), OperationsHandler(server: self))
                }
            }
            .bind(host: host, port: port).get()
    }
}

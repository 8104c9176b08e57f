import Logging
import NIOCore
import Synchronization

/// Who a connection's client is when a trusted proxy said so: by a PROXY protocol
/// header (for the whole connection), or on the web listener by the forwarding
/// header of the request that became a WebSocket. Shared by a connection's handlers:
/// set before the connection is admitted, read when it is; `nil` until said (the
/// TCP peer is the client).
final class PeerAddress: Sendable {
    private let said = Mutex<(proxied: SocketAddress?, forwarded: SocketAddress?)>((nil, nil))

    init() {}

    /// The client's address as the trusted proxies said it, `nil` if they did not.
    var current: SocketAddress? { said.withLock { $0.forwarded ?? $0.proxied } }

    /// The address the connection's PROXY protocol header gave, if any.
    var proxied: SocketAddress? { said.withLock { $0.proxied } }

    /// The connection is `client`'s (its PROXY protocol header said so).
    func relayed(from client: SocketAddress) { said.withLock { $0.proxied = client } }

    /// The WebSocket is `client`'s (the forwarding header of its upgrade said so).
    func forwarded(for client: SocketAddress) { said.withLock { $0.forwarded = client } }
}

/// The first handler of a connection on a server with trusted proxies
/// (``TrustedProxies``, `--trusted-proxy`). From a trusted proxy it holds the
/// connection back — its `channelActive`, so no `welcome`, no place taken, no TLS
/// handshake — until the PROXY protocol header arrives whole; the header's source
/// becomes the connection's ``PeerAddress``, and the connection goes on with the
/// bytes after it. From any other peer it lets the connection go on at once, and
/// closes it if it begins with a header (a client claiming another's address).
/// A trusted proxy's connection with a malformed header is closed too, and one
/// without a header where it is `required` (the line listener, where nothing else
/// can name the client; the web listener reads forwarding headers instead). Either way the reason is logged (at most once a second), and the handler
/// leaves the pipeline once it has decided.
///
/// Bounded like a line: it holds at most ``ProxyHeader/maximumLength`` bytes, for at
/// most `timeout` (the line timeout).
final class ProxyHeaderHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let trusted: TrustedProxies
    private let peer: PeerAddress
    private let timeout: TimeAmount?
    private let required: Bool
    private let warnings: ProxyHeaderWarnings
    private var buffered: ByteBuffer?
    /// A trusted proxy's connection, whose header is awaited (its activation held).
    private var awaitingHeader = false
    private var deadline: Scheduled<Void>?
    private var decided = false
    /// Whether the connection's activation went on to the handlers after this one.
    private var passedOn = false

    init(trusted: TrustedProxies, peer: PeerAddress, timeout: TimeAmount?, required: Bool = true, warnings: ProxyHeaderWarnings) {
        self.trusted = trusted
        self.peer = peer
        self.timeout = timeout
        self.required = required
        self.warnings = warnings
    }

    func channelActive(context: ChannelHandlerContext) {
        awaitingHeader = trusted.contains(context.channel.remoteAddress)
        if awaitingHeader {
            armDeadline(context: context)
        } else {
            // Another peer's connection goes on at once (its first bytes are still
            // checked; an idle one is never timed here).
            passedOn = true
            context.fireChannelActive()
        }
    }

    private func armDeadline(context: ChannelHandlerContext) {
        guard deadline == nil, let timeout else { return }
        deadline = context.eventLoop.assumeIsolated().scheduleTask(in: timeout) { [weak self] in
            self?.deadline = nil
            self?.refuse(context: context, "the PROXY protocol header did not arrive in time")
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !decided else {
            context.fireChannelRead(data)
            return
        }
        var bytes = unwrapInboundIn(data)
        if var held = buffered {
            held.writeBuffer(&bytes)
            bytes = held
        }
        if awaitingHeader {
            if !required, ProxyHeader.startsLikeHeader(bytes) == false {
                decide(context: context, activating: true, rest: bytes)  // its requests name their clients
                return
            }
            switch ProxyHeader.parse(bytes) {
            case .incomplete where bytes.readableBytes < ProxyHeader.maximumLength:
                buffered = bytes
            case .incomplete:
                refuse(context: context, "a PROXY protocol header longer than \(ProxyHeader.maximumLength) bytes")
            case .invalid(let reason):
                refuse(context: context, reason)
            case .header(let header, let length):
                if case .proxied(let source) = header { peer.relayed(from: source) }
                bytes.moveReaderIndex(forwardBy: length)
                decide(context: context, activating: true, rest: bytes)
            }
            return
        }
        switch ProxyHeader.startsLikeHeader(bytes) {
        case nil:
            // Fewer bytes than a signature, all of them one's start: held, for the line
            // timeout at most.
            buffered = bytes
            armDeadline(context: context)
        case true:
            refuse(context: context, "a PROXY protocol header from a peer that is not a trusted proxy")
        case false:
            decide(context: context, activating: false, rest: bytes)
        }
    }

    /// Decided for the connection: it goes on (activated now if it was held back),
    /// with `rest`, and this handler leaves.
    private func decide(context: ChannelHandlerContext, activating: Bool, rest: ByteBuffer) {
        decided = true
        buffered = nil
        deadline?.cancel()
        deadline = nil
        if activating {
            passedOn = true
            context.fireChannelActive()
        }
        if rest.readableBytes > 0 {
            context.fireChannelRead(wrapInboundOut(rest))
            context.fireChannelReadComplete()
        }
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }

    private func refuse(context: ChannelHandlerContext, _ reason: String) {
        guard !decided else { return }
        decided = true
        buffered = nil
        deadline?.cancel()
        deadline = nil
        warnings.warn(reason, peer: context.channel.remoteAddress)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        deadline?.cancel()
        deadline = nil
        buffered = nil
        // A connection held back was never active downstream: nothing to tell.
        if passedOn { context.fireChannelInactive() }
    }
}

/// The log lines of connections refused over their PROXY protocol header: the first
/// at once, then at most one a second with the count since (a flood of forged
/// headers is one line a second).
final class ProxyHeaderWarnings: Sendable {
    private let logger: Logger
    private let state = Mutex<(last: ContinuousClock.Instant?, since: Int)>((nil, 0))

    init(logger: Logger) { self.logger = logger }

    func warn(_ reason: String, peer: SocketAddress?) {
        let now = ContinuousClock.now
        let refused = state.withLock { state -> Int? in
            state.since += 1
            if let last = state.last, now - last < .seconds(1) { return nil }
            defer { state = (now, 0) }
            return state.since
        }
        guard let refused else { return }
        logger.warning(
            "connection closed: \(reason)",
            metadata: ["peer": "\(peer?.description ?? "?")", "refused": "\(refused)"])
    }
}

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import NIOWebSocket
import Synchronization

/// One connection to a server — TCP (or TLS), or a WebSocket over it — as lines: the
/// lines it reads, in order, and a way to write lines. The client's only transport code.
final class LineConnection: Sendable {
    let channel: any Channel
    /// Every line the server sends (without its `\n`), finished when the connection closes.
    let lines: AsyncStream<[UInt8]>
    /// Lines go out as masked text messages (a WebSocket client's frames must be masked).
    private let overWebSocket: Bool

    /// Why the connection failed, when it did with an error (a TLS handshake refused).
    private let failure: FailureNote
    /// Lines read and not yet taken: reading stops while too many wait.
    private let backlog: LineBacklog

    private init(channel: any Channel, lines: AsyncStream<[UInt8]>, overWebSocket: Bool, failure: FailureNote, backlog: LineBacklog) {
        self.channel = channel
        self.lines = lines
        self.overWebSocket = overWebSocket
        self.failure = failure
        self.backlog = backlog
    }

    /// The reader took a line from ``lines``: reading goes on when enough were taken.
    func took() {
        backlog.took()
    }

    /// Why the connection closed, in words, when an error closed it: an untrusted
    /// server certificate is named as such.
    var failureDescription: String? {
        guard let error = failure.note.withLock({ $0 }) else { return nil }
        if error.contains("CERTIFICATE_VERIFY_FAILED") || error.contains("certificate verify failed") {
            return "the TLS handshake failed: the server's certificate is not trusted"
        }
        return error
    }

    /// The first error a connection's reader caught.
    final class FailureNote: Sendable {
        let note = Mutex<String?>(nil)
        func record(_ error: any Error) {
            note.withLock { if $0 == nil { $0 = String(describing: error) } }
        }
    }

    /// Connects to `endpoint` (TLS when `tls` is given); a line from the server longer
    /// than `maximumLineBytes` closes the connection.
    static func open(
        _ endpoint: Endpoint, tls: ViewlineClient.TLS?, timeout: Duration, maximumLineBytes: Int
    ) async throws -> LineConnection {
        let (lines, continuation) = AsyncStream<[UInt8]>.makeStream()
        let failure = FailureNote()
        let backlog = LineBacklog()
        let context = try tls.map { try NIOSSLContext(configuration: $0.configuration) }
        let milliseconds = Int64(timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
        let bootstrap = ClientBootstrap(group: NIOSingletons.posixEventLoopGroup)
            .connectTimeout(.milliseconds(max(1, milliseconds)))
            .channelOption(ChannelOptions.socketOption(.so_keepalive), value: 1)
            .channelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                backlog.channel = channel
                return channel.eventLoop.makeCompletedFuture {
                    if let context {
                        let name = endpoint.host.isIPAddress ? nil : endpoint.host
                        try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: context, serverHostname: name))
                    }
                    guard let path = endpoint.webSocketPath else {
                        try channel.pipeline.syncOperations.addHandler(
                            LineReader(continuation, failure: failure, backlog: backlog, maximumLineBytes: maximumLineBytes))
                        return
                    }
                    // The upgrade: GET `path`, then the WebSocket's frames, each text message a line.
                    let authority = endpoint.host.contains(":") ? "[\(endpoint.host)]:\(endpoint.port)" : "\(endpoint.host):\(endpoint.port)"
                    let request = UpgradeRequest(host: authority, path: path)
                    let upgrader = NIOWebSocketClientUpgrader(maxFrameSize: maximumLineBytes) { channel, _ in
                        channel.eventLoop.makeCompletedFuture {
                            try channel.pipeline.syncOperations.addHandler(
                                WebSocketLineReader(continuation, failure: failure, backlog: backlog, maximumLineBytes: maximumLineBytes))
                        }
                    }
                    // The welcome may come in the same read as the upgrade's answer: keep it.
                    try channel.pipeline.syncOperations.addHTTPClientHandlers(
                        leftOverBytesStrategy: .forwardBytes,
                        withClientUpgrade: (
                            upgraders: [upgrader],
                            completionHandler: { context in
                                context.pipeline.removeHandler(request, promise: nil)
                            }
                        ))
                    try channel.pipeline.syncOperations.addHandler(request)
                }
            }
        do {
            let channel = try await bootstrap.connect(host: endpoint.host, port: endpoint.port).get()
            return LineConnection(
                channel: channel, lines: lines, overWebSocket: endpoint.webSocketPath != nil, failure: failure, backlog: backlog)
        } catch {
            continuation.finish()
            throw ConnectError(endpoint: endpoint, underlying: error)
        }
    }

    /// Writes one line (ending in `\n`); safe from any task.
    func write(_ line: [UInt8]) {
        guard overWebSocket else {
            channel.writeAndFlush(channel.allocator.buffer(bytes: line), promise: nil)
            return
        }
        let text = channel.allocator.buffer(bytes: line.last == 0x0A ? line.dropLast() : line[...])
        channel.writeAndFlush(WebSocketFrame(fin: true, opcode: .text, maskKey: .random(), data: text), promise: nil)
    }

    func close() {
        channel.close(promise: nil)
    }
}

/// Lines a connection read and its reader has not taken yet. Past ``maximumWaiting``
/// the socket is no longer read (the server's writes back up, as its own limits
/// expect of a slow client); once the reader took half of them, reading goes on. A
/// server that floods cannot make the client hold more than this many lines.
final class LineBacklog: @unchecked Sendable {
    /// Lines waiting before reading stops.
    static let maximumWaiting = 256
    private struct State {
        var waiting = 0
        var paused = false
    }
    private let state = Mutex(State())
    /// Set once, in the channel's initializer, before any line is read.
    nonisolated(unsafe) var channel: (any Channel)?

    /// A line was read and handed to the reader; `true` when reading should stop now.
    func read() -> Bool {
        state.withLock { state in
            state.waiting += 1
            guard !state.paused, state.waiting >= Self.maximumWaiting else { return false }
            state.paused = true
            return true
        }
    }

    /// The reader took a line.
    func took() {
        let resume = state.withLock { state -> Bool in
            state.waiting -= 1
            guard state.paused, state.waiting <= Self.maximumWaiting / 2 else { return false }
            state.paused = false
            return true
        }
        if resume { channel?.setOption(ChannelOptions.autoRead, value: true).whenFailure { _ in } }
    }

    /// Hands `line` to the reader, and stops reading when too many wait.
    func yield(_ line: [UInt8], to continuation: AsyncStream<[UInt8]>.Continuation, context: ChannelHandlerContext) {
        if read() { context.channel.setOption(ChannelOptions.autoRead, value: false).whenFailure { _ in } }
        continuation.yield(line)
    }
}

/// A line from the server longer than the client takes.
struct ServerLineTooLong: Error, CustomStringConvertible {
    var limit: Int
    var description: String { "the server sent a line longer than \(limit) bytes (the client's maximumLineBytes)" }
}

/// Splits what the server sends into lines, bounded: a line longer than
/// `maximumLineBytes` closes the connection rather than growing without limit, and
/// reading stops while the reader is behind (``LineBacklog``).
final class LineReader: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    private var partial: [UInt8] = []
    private let continuation: AsyncStream<[UInt8]>.Continuation
    private let failure: LineConnection.FailureNote?
    private let backlog: LineBacklog
    private let maximumLineBytes: Int

    init(
        _ continuation: AsyncStream<[UInt8]>.Continuation, failure: LineConnection.FailureNote? = nil,
        backlog: LineBacklog = LineBacklog(), maximumLineBytes: Int
    ) {
        self.continuation = continuation
        self.failure = failure
        self.backlog = backlog
        self.maximumLineBytes = maximumLineBytes
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        while let newline = buffer.readableBytesView.firstIndex(of: 0x0A) {
            guard partial.count + (newline - buffer.readerIndex) <= maximumLineBytes else { return tooLong(context: context) }
            var line = partial
            partial = []
            line.append(contentsOf: buffer.readableBytesView[buffer.readerIndex..<newline])
            buffer.moveReaderIndex(to: newline + 1)
            backlog.yield(line, to: continuation, context: context)
        }
        guard partial.count + buffer.readableBytes <= maximumLineBytes else { return tooLong(context: context) }
        partial.append(contentsOf: buffer.readableBytesView)
    }

    private func tooLong(context: ChannelHandlerContext) {
        partial = []
        failure?.record(ServerLineTooLong(limit: maximumLineBytes))
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        continuation.finish()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        failure?.record(error)
        context.close(promise: nil)
    }
}

/// Sends the WebSocket upgrade request once connected; a refusal (any response that
/// is not the upgrade: `403` for a foreign origin, `404`) closes the connection.
private final class UpgradeRequest: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart
    private let host: String
    private let path: String

    init(host: String, path: String) {
        self.host = host
        self.path = path
    }

    func channelActive(context: ChannelHandlerContext) {
        var head = HTTPRequestHead(version: .http1_1, method: .GET, uri: path)
        head.headers.add(name: "Host", value: host)
        head.headers.add(name: "Content-Length", value: "0")
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.close(promise: nil)  // an answer that is not the upgrade
    }
}

/// A WebSocket's text messages (fragments joined) as lines; pings answered (one pong
/// at a time: none while the socket is not writable), a close frame closes. Bounded
/// like ``LineReader``.
private final class WebSocketLineReader: ChannelInboundHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame
    private var message: [UInt8]?
    private let continuation: AsyncStream<[UInt8]>.Continuation
    private let failure: LineConnection.FailureNote
    private let backlog: LineBacklog
    private let maximumLineBytes: Int

    init(
        _ continuation: AsyncStream<[UInt8]>.Continuation, failure: LineConnection.FailureNote, backlog: LineBacklog,
        maximumLineBytes: Int
    ) {
        self.continuation = continuation
        self.failure = failure
        self.backlog = backlog
        self.maximumLineBytes = maximumLineBytes
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.opcode {
        case .text:
            message = Array(frame.unmaskedData.readableBytesView)
        case .continuation:
            message?.append(contentsOf: frame.unmaskedData.readableBytesView)
        case .ping:
            // A server that pings faster than the socket drains gets no more pongs
            // meanwhile (RFC 6455 §5.5.3 asks only for the latest).
            guard context.channel.isWritable else { return }
            let pong = WebSocketFrame(fin: true, opcode: .pong, maskKey: .random(), data: frame.unmaskedData)
            context.writeAndFlush(wrapOutboundOut(pong), promise: nil)
            return
        case .connectionClose:
            context.close(promise: nil)
            return
        default:
            return
        }
        if (message?.count ?? 0) > maximumLineBytes + 1 {
            message = nil
            failure.record(ServerLineTooLong(limit: maximumLineBytes))
            return context.close(promise: nil)
        }
        guard frame.fin, var line = message else { return }
        message = nil
        if line.last == 0x0A { line.removeLast() }
        backlog.yield(line, to: continuation, context: context)
    }

    func channelInactive(context: ChannelHandlerContext) {
        continuation.finish()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}

extension String {
    /// An IPv4 or IPv6 literal (never a TLS server name).
    var isIPAddress: Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, self, &v4) == 1 || inet_pton(AF_INET6, self, &v6) == 1
    }
}

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

    private init(channel: any Channel, lines: AsyncStream<[UInt8]>, overWebSocket: Bool, failure: FailureNote) {
        self.channel = channel
        self.lines = lines
        self.overWebSocket = overWebSocket
        self.failure = failure
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

    /// Connects to `endpoint` (TLS when `tls` is given).
    static func open(_ endpoint: Endpoint, tls: ViewlineClient.TLS?, timeout: Duration) async throws -> LineConnection {
        let (lines, continuation) = AsyncStream<[UInt8]>.makeStream()
        let failure = FailureNote()
        let context = try tls.map { try NIOSSLContext(configuration: $0.configuration) }
        let milliseconds = Int64(timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
        let bootstrap = ClientBootstrap(group: NIOSingletons.posixEventLoopGroup)
            .connectTimeout(.milliseconds(max(1, milliseconds)))
            .channelOption(ChannelOptions.socketOption(.so_keepalive), value: 1)
            .channelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    if let context {
                        let name = endpoint.host.isIPAddress ? nil : endpoint.host
                        try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: context, serverHostname: name))
                    }
                    guard let path = endpoint.webSocketPath else {
                        try channel.pipeline.syncOperations.addHandler(LineReader(continuation, failure: failure))
                        return
                    }
                    // The upgrade: GET `path`, then the WebSocket's frames, each text message a line.
                    let authority = endpoint.host.contains(":") ? "[\(endpoint.host)]:\(endpoint.port)" : "\(endpoint.host):\(endpoint.port)"
                    let request = UpgradeRequest(host: authority, path: path)
                    let upgrader = NIOWebSocketClientUpgrader(maxFrameSize: LineReader.maximumLineBytes) { channel, _ in
                        channel.eventLoop.makeCompletedFuture {
                            try channel.pipeline.syncOperations.addHandler(WebSocketLineReader(continuation))
                        }
                    }
                    // The welcome may come in the same read as the upgrade's answer: keep it.
                    try channel.pipeline.syncOperations.addHTTPClientHandlers(
                        leftOverBytesStrategy: .forwardBytes,
                        withClientUpgrade: (upgraders: [upgrader], completionHandler: { context in
                            context.pipeline.removeHandler(request, promise: nil)
                        }))
                    try channel.pipeline.syncOperations.addHandler(request)
                }
            }
        do {
            let channel = try await bootstrap.connect(host: endpoint.host, port: endpoint.port).get()
            return LineConnection(channel: channel, lines: lines, overWebSocket: endpoint.webSocketPath != nil, failure: failure)
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

/// Splits what the server sends into lines, bounded: a line longer than any the
/// server writes closes the connection rather than growing without limit.
final class LineReader: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    private var partial: [UInt8] = []
    private let continuation: AsyncStream<[UInt8]>.Continuation
    private let failure: LineConnection.FailureNote?
    static let maximumLineBytes = 64 << 20

    init(_ continuation: AsyncStream<[UInt8]>.Continuation, failure: LineConnection.FailureNote? = nil) {
        self.continuation = continuation
        self.failure = failure
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        while let newline = buffer.readableBytesView.firstIndex(of: 0x0A) {
            var line = partial
            partial = []
            line.append(contentsOf: buffer.readableBytesView[buffer.readerIndex..<newline])
            buffer.moveReaderIndex(to: newline + 1)
            continuation.yield(line)
        }
        partial.append(contentsOf: buffer.readableBytesView)
        if partial.count > Self.maximumLineBytes { context.close(promise: nil) }
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

/// A WebSocket's text messages (fragments joined) as lines; pings answered, a close
/// frame closes. Bounded like ``LineReader``.
private final class WebSocketLineReader: ChannelInboundHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame
    private var message: [UInt8]?
    private let continuation: AsyncStream<[UInt8]>.Continuation

    init(_ continuation: AsyncStream<[UInt8]>.Continuation) {
        self.continuation = continuation
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.opcode {
        case .text:
            message = Array(frame.unmaskedData.readableBytesView)
        case .continuation:
            message?.append(contentsOf: frame.unmaskedData.readableBytesView)
        case .ping:
            let pong = WebSocketFrame(fin: true, opcode: .pong, maskKey: .random(), data: frame.unmaskedData)
            context.writeAndFlush(wrapOutboundOut(pong), promise: nil)
            return
        case .connectionClose:
            context.close(promise: nil)
            return
        default:
            return
        }
        if (message?.count ?? 0) > LineReader.maximumLineBytes { return context.close(promise: nil) }
        guard frame.fin, var line = message else { return }
        message = nil
        if line.last == 0x0A { line.removeLast() }
        continuation.yield(line)
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

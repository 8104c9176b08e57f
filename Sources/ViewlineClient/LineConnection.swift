#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import NIOCore
import NIOPosix
import NIOSSL

/// One TCP (or TLS) connection to a server: the lines it reads, in order, and a way
/// to write lines. The client's only transport code.
final class LineConnection: Sendable {
    let channel: any Channel
    /// Every line the server sends (without its `\n`), finished when the connection closes.
    let lines: AsyncStream<[UInt8]>

    private init(channel: any Channel, lines: AsyncStream<[UInt8]>) {
        self.channel = channel
        self.lines = lines
    }

    /// Connects to `endpoint` (TLS when `tls` is given).
    static func open(_ endpoint: Endpoint, tls: ViewlineClient.TLS?, timeout: Duration) async throws -> LineConnection {
        let (lines, continuation) = AsyncStream<[UInt8]>.makeStream()
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
                    try channel.pipeline.syncOperations.addHandler(LineReader(continuation))
                }
            }
        do {
            let channel = try await bootstrap.connect(host: endpoint.host, port: endpoint.port).get()
            return LineConnection(channel: channel, lines: lines)
        } catch {
            continuation.finish()
            throw ConnectError(endpoint: endpoint, underlying: error)
        }
    }

    /// Writes one line (ending in `\n`); safe from any task.
    func write(_ line: [UInt8]) {
        channel.writeAndFlush(channel.allocator.buffer(bytes: line), promise: nil)
    }

    func close() {
        channel.close(promise: nil)
    }
}

/// Splits what the server sends into lines, bounded: a line longer than any the
/// server writes closes the connection rather than growing without limit.
private final class LineReader: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    private var partial: [UInt8] = []
    private let continuation: AsyncStream<[UInt8]>.Continuation
    static let maximumLineBytes = 64 << 20

    init(_ continuation: AsyncStream<[UInt8]>.Continuation) {
        self.continuation = continuation
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

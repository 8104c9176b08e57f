import NIOCore
import NIOPosix
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The least a line server on SwiftNIO can do, as the yardstick for Viewline's own
/// cost (`viewline-bench --floor-server N`): a welcome line on connect, then for each
/// line read the reply `ping` gets, all of a read's replies written in one flush when
/// the read completes (as Viewline does). Nothing is decoded, no session, no
/// metrics: what is left is the event loop, the channel pipeline and the kernel.
/// Measured with the same generator as Viewline and redis, it tells how much of
/// Viewline's gap to redis is the runtime's and how much Viewline's own.
///
/// Its fan-out (`viewline-bench --fanout N --floor`): a line `fanout <marker>` makes
/// it write one line the size of Viewline's contacts display, holding the marker, to
/// every connection it has, each written and flushed on its own loop by one task per
/// loop (as Viewline's `LoopFlushes` does): the least a change reaching N clients
/// costs, with nothing of Viewline's.
enum FloorServer {
    /// Serves on 127.0.0.1 (port 0: any), printing `listening on 127.0.0.1:PORT`;
    /// runs until the process is stopped. `receiveBuffer`: each connection's first
    /// receive buffer, adapting to its reads between 64 bytes and 64 KiB as
    /// Viewline's (0: SwiftNIO's default, a fixed 2 KiB) — what an idle
    /// connection's memory is compared with.
    static func run(eventLoops: Int, port: Int = 0, receiveBuffer: Int = 0) throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: eventLoops)
        var bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 1024)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
        if receiveBuffer > 0 {
            bootstrap = bootstrap.childChannelOption(
                .recvAllocator,
                value: AdaptiveRecvByteBufferAllocator(minimum: min(64, receiveBuffer), initial: receiveBuffer, maximum: 65536))
        }
        let channel =
            try bootstrap
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(ReplyPerLine()) }
            }
            .bind(host: "127.0.0.1", port: port).wait()
        print("listening on 127.0.0.1:\(channel.localAddress?.port ?? 0)")
        fflush(nil)  // the line reaches a script reading a pipe now
        try channel.closeFuture.wait()
    }

    /// Every open connection, by its loop (a loop's list is touched only on that loop).
    private final class Connections: Sendable {
        private let byLoop = Mutex<[ObjectIdentifier: (loop: any EventLoop, channels: [ObjectIdentifier: any Channel])]>([:])

        func add(_ channel: any Channel) {
            byLoop.withLock { byLoop in
                byLoop[ObjectIdentifier(channel.eventLoop), default: (channel.eventLoop, [:])].channels[ObjectIdentifier(channel)] = channel
            }
        }

        func remove(_ channel: any Channel) {
            byLoop.withLock { _ = $0[ObjectIdentifier(channel.eventLoop)]?.channels.removeValue(forKey: ObjectIdentifier(channel)) }
        }

        /// Writes `line` to every connection: one task per loop, a write and flush each.
        func broadcast(_ line: [UInt8]) {
            let loops = byLoop.withLock { $0.values.map { ($0.loop, Array($0.channels.values)) } }
            for (loop, channels) in loops {
                loop.execute {
                    for channel in channels {
                        channel.writeAndFlush(channel.allocator.buffer(bytes: line), promise: nil)
                    }
                }
            }
        }
    }

    private static let connections = Connections()

    /// The display line a change sends: `{"type":"display",…}` the size of Viewline's
    /// contacts display with two contacts, `marker` the second's name.
    static func display(marker: some Collection<UInt8>) -> [UInt8] {
        Array(#"{"type":"display","rev":2,"view":"contacts","state":{"items":[{"name":"Ada","phone":"1","address":"London"},{"name":""#.utf8)
            + marker + Array(#"","phone":"2","address":"Arlington"}],"syncing":false}}"#.utf8) + [UInt8(ascii: "\n")]
    }

    /// Counts a read's line ends and answers each with `ping`'s reply, byte for byte;
    /// a read that begins `fanout ` writes the display to every connection instead.
    private final class ReplyPerLine: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer

        static let welcome = Array(#"{"type":"welcome","server":"floor"}"#.utf8) + [UInt8(ascii: "\n")]
        static let reply = Array(#"{"type":"reply","re":null,"ok":true,"result":{"pong":true}}"#.utf8) + [UInt8(ascii: "\n")]
        private var replies: ByteBuffer?

        static let fanout = Array("fanout ".utf8)

        func channelActive(context: ChannelHandlerContext) {
            connections.add(context.channel)
            context.writeAndFlush(wrapOutboundOut(ByteBuffer(bytes: Self.welcome)), promise: nil)
        }

        func channelInactive(context: ChannelHandlerContext) {
            connections.remove(context.channel)
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let bytes = unwrapInboundIn(data).readableBytesView
            if bytes.starts(with: Self.fanout) {
                let marker = bytes.dropFirst(Self.fanout.count).prefix { $0 != UInt8(ascii: "\n") }
                return connections.broadcast(FloorServer.display(marker: marker))
            }
            let lines = bytes.reduce(0) { $1 == UInt8(ascii: "\n") ? $0 + 1 : $0 }
            guard lines > 0 else { return }
            if replies == nil { replies = context.channel.allocator.buffer(capacity: lines * Self.reply.count) }
            for _ in 0..<lines { replies!.writeBytes(Self.reply) }
        }

        func channelReadComplete(context: ChannelHandlerContext) {
            guard let replies else { return }
            self.replies = nil
            context.writeAndFlush(wrapOutboundOut(replies), promise: nil)
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            context.close(promise: nil)
        }
    }
}

import NIOCore
import NIOPosix

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
enum FloorServer {
    /// Serves on 127.0.0.1 (port 0: any), printing `listening on 127.0.0.1:PORT`;
    /// runs until the process is stopped.
    static func run(eventLoops: Int, port: Int = 0) throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: eventLoops)
        let channel = try ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 1024)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(ReplyPerLine()) }
            }
            .bind(host: "127.0.0.1", port: port).wait()
        print("listening on 127.0.0.1:\(channel.localAddress?.port ?? 0)")
        fflush(nil)  // the line reaches a script reading a pipe now
        try channel.closeFuture.wait()
    }

    /// Counts a read's line ends and answers each with `ping`'s reply, byte for byte.
    private final class ReplyPerLine: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer

        static let welcome = Array(#"{"type":"welcome","server":"floor"}"#.utf8) + [UInt8(ascii: "\n")]
        static let reply = Array(#"{"type":"reply","re":null,"ok":true,"result":{"pong":true}}"#.utf8) + [UInt8(ascii: "\n")]
        private var replies: ByteBuffer?

        func channelActive(context: ChannelHandlerContext) {
            context.writeAndFlush(wrapOutboundOut(ByteBuffer(bytes: Self.welcome)), promise: nil)
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let lines = unwrapInboundIn(data).readableBytesView.reduce(0) { $1 == UInt8(ascii: "\n") ? $0 + 1 : $0 }
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

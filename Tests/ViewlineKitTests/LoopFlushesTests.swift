import Logging
import NIOCore
import NIOEmbedded
import Testing

@testable import ViewlineKit

/// Output queued on a connection's own loop is flushed by that loop's list: every
/// connection's lines go out in one run of the loop, each connection's in order, and
/// output queued after a run waits for the next.
@Suite struct LoopFlushesTests {
    static func connected(on loop: EmbeddedEventLoop) throws -> EmbeddedChannel {
        let channel = EmbeddedChannel(loop: loop)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        return channel
    }

    static func written(_ channel: EmbeddedChannel) throws -> String {
        var text = ""
        while let buffer = try channel.readOutbound(as: ByteBuffer.self) { text += String(buffer: buffer) }
        return text
    }

    @Test func everyConnectionsOutputGoesOutInOneRunOfItsLoop() throws {
        let loop = EmbeddedEventLoop()
        let flushes = LoopFlushes(loop: loop)
        let channels = [try Self.connected(on: loop), try Self.connected(on: loop)]
        let outputs = channels.map { OutboundLines(channel: $0, logger: Logger(label: "test"), flushes: flushes) }

        outputs[0].send(Array("a\n".utf8))
        outputs[1].send(Array("b\n".utf8))
        outputs[0].send(Array("c\n".utf8))
        #expect(try Self.written(channels[0]) == "")  // queued until the loop runs
        #expect(flushes.count == 2)  // once per connection, however many lines
        loop.run()
        #expect(flushes.count == 0)
        #expect(try Self.written(channels[0]) == "a\nc\n")
        #expect(try Self.written(channels[1]) == "b\n")

        outputs[1].send(Array("d\n".utf8))
        #expect(try Self.written(channels[1]) == "")
        loop.run()
        #expect(try Self.written(channels[1]) == "d\n")
        #expect(try Self.written(channels[0]) == "")
    }

    @Test func aConnectionThatClosedBeforeTheRunIsSkipped() throws {
        let loop = EmbeddedEventLoop()
        let flushes = LoopFlushes(loop: loop)
        let (open, closing) = (try Self.connected(on: loop), try Self.connected(on: loop))
        let outputs = [open, closing].map { OutboundLines(channel: $0, logger: Logger(label: "test"), flushes: flushes) }
        outputs[1].send(Array("lost\n".utf8))
        outputs[0].send(Array("kept\n".utf8))
        _ = try closing.finish()
        loop.run()
        #expect(try Self.written(open) == "kept\n")
    }
}

import NIOCore
import NIOEmbedded
import Testing
@testable import ViewlineKit

/// Framing only: the same input in every chunk size gives the same frames.
@Suite struct LineFrameHandlerTests {
    func frames(_ input: [UInt8], chunk: Int, limit: Int = 8) throws -> [String] {
        let channel = EmbeddedChannel(handler: LineFrameHandler(maximumLength: limit))
        var index = 0
        while index < input.count {
            let end = min(index + chunk, input.count)
            try channel.writeInbound(ByteBuffer(bytes: input[index..<end]))
            index = end
        }
        // The client ends its input (`nc -N`); its last line counts then.
        channel.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        _ = try channel.finish()
        var out: [String] = []
        while let frame = try channel.readInbound(as: LineFrame.self) {
            switch frame {
            case .line(let buffer): out.append(String(buffer: buffer))
            case .tooLong: out.append("<too long>")
            }
        }
        return out
    }

    @Test(arguments: [1, 2, 3, 5, 7, 64])
    func sameFramesInAnyChunkSize(_ chunk: Int) throws {
        let input = Array("ping\r\nabcdefghijklmnop\nok\n\n\r\nlast".utf8)
        // Blank lines (empty, or a lone `\r`) are no commands: skipped as they are framed.
        #expect(try frames(input, chunk: chunk) == ["ping\r", "<too long>", "ok", "last"])
    }

    @Test func aLineOfExactlyTheLimitPassesEvenWithCRLF() throws {
        #expect(try frames(Array("12345678\r\n123456789\n".utf8), chunk: 4) == ["12345678\r", "<too long>"])
    }

    @Test(arguments: [1, 3, 1000])
    func longLinesSentInPiecesAroundShortOnes(_ chunk: Int) throws {
        let long = String(repeating: "y", count: 5000)
        let input = Array("a\n\(long)\nb\n\(long)y\nc\r\nlast".utf8)
        #expect(try frames(input, chunk: chunk, limit: 5000) == ["a", long, "b", "<too long>", "c\r", "last"])
    }

    @Test func aHugeLineIsReportedOnceAndTheBufferStaysSmall() throws {
        let input = Array(repeating: UInt8(ascii: "x"), count: 100_000) + Array("\nafter\n".utf8)
        #expect(try frames(input, chunk: 1000) == ["<too long>", "after"])
    }
}

@Suite struct LastLineTests {
    /// A last line with no newline, one byte over the limit, at the end of input: too
    /// long, as it would be with its newline.
    @Test func anOverlongLastLineAtHalfCloseIsTooLong() throws {
        #expect(try LineFrameHandlerTests().frames(Array("ok\n123456789".utf8), chunk: 3) == ["ok", "<too long>"])
        #expect(try LineFrameHandlerTests().frames(Array("ok\n12345678".utf8), chunk: 3) == ["ok", "12345678"])
    }
}

/// A framer that ends the pipeline hands each line to its receiver, which may close
/// the connection while it takes one.
@Suite struct LineReceiverTests {
    final class Receiver: LineAcceptor, LineReceiver {
        var lines: [String] = []
        var tooLong = 0
        var inactive = 0
        let closesAfter: String
        /// Counts each line into this budget as queued, as a connection does.
        var queuesInto: InputBudget?
        private var channel: (any Channel)?

        init(closingAfter line: String) { closesAfter = line }

        func accept(_ channel: any Channel) -> (any LineReceiver)? {
            self.channel = channel
            return self
        }
        func received(_ frame: LineFrame) {
            guard case .line(let buffer) = frame else { return tooLong += 1 }
            queuesInto?.queued(byteCount: buffer.readableBytes)
            lines.append(String(buffer: buffer))
            if lines.last == closesAfter { channel?.close(promise: nil) }
        }
        func readComplete() {}
        func inputEnded() {}
        func channelInactive() { inactive += 1 }
    }

    /// Holds the connection's close back, as TLS does while it waits for the peer's
    /// `close_notify`: reads still come meanwhile.
    final class CloseHolder: ChannelOutboundHandler {
        typealias OutboundIn = ByteBuffer
        var closes = 0
        func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) { closes += 1 }
    }

    /// A connected channel whose pipeline ends with a framer handing lines to `receiver`,
    /// behind `holder` when there is one.
    func connected(to receiver: Receiver, budget: InputBudget, behind holder: CloseHolder? = nil, limit: Int = 64) throws -> EmbeddedChannel {
        let channel = EmbeddedChannel()
        if let holder { try channel.pipeline.syncOperations.addHandler(holder) }
        try channel.pipeline.syncOperations.addHandler(
            LineFrameHandler(maximumLength: limit, incompleteLineTimeout: .seconds(30), budget: budget, acceptor: receiver))
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        return channel
    }

    @Test func aCloseAsALineIsTakenEndsTheReadAndTheFramerKeepsNothing() throws {
        let receiver = Receiver(closingAfter: "quit")
        let budget = InputBudget()
        let channel = try connected(to: receiver, budget: budget)
        // The close comes synchronously, in the middle of the read that brought `quit`.
        try channel.writeInbound(ByteBuffer(string: "ping\nquit\nstate\nhalf a li"))
        #expect(receiver.lines == ["ping", "quit"])
        #expect(receiver.inactive == 1)
        #expect(budget.heldBytes == 0)
        #expect(!channel.isActive)
    }

    @Test func whileTheCloseWaitsNothingMoreIsFramedOrKept() throws {
        let receiver = Receiver(closingAfter: "quit")
        let budget = InputBudget()
        let holder = CloseHolder()
        let channel = try connected(to: receiver, budget: budget, behind: holder)
        try channel.writeInbound(ByteBuffer(string: "ping\nquit\nstate\nhalf a li"))
        #expect(holder.closes == 1 && channel.isActive)
        try channel.writeInbound(ByteBuffer(string: "ne\nhelp\n"))
        #expect(receiver.lines == ["ping", "quit"])
        #expect(budget.heldBytes == 0)
    }

    @Test func aLastLineWhoseReceiverClosesTheConnectionIsHandedOverOnce() throws {
        let receiver = Receiver(closingAfter: "last")
        let channel = try connected(to: receiver, budget: InputBudget())
        try channel.writeInbound(ByteBuffer(string: "ping\nlast"))
        channel.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        #expect(receiver.lines == ["ping", "last"])
        #expect(receiver.inactive == 1)
    }

    @Test func anIncompleteLineWhoseTimeRanOutIsNotRunWhenTheClientClosesItsSide() throws {
        // PROTOCOL §8: the connection is closed without `bye`; over TLS the close waits
        // for the client, whose half-close must not make the fragment a last line.
        let receiver = Receiver(closingAfter: "quit")
        let budget = InputBudget()
        let holder = CloseHolder()
        let channel = try connected(to: receiver, budget: budget, behind: holder)
        try channel.writeInbound(ByteBuffer(string: "ping\ndraft Transfer approved ONLY IF the board sign"))
        channel.embeddedEventLoop.advanceTime(by: .seconds(31))
        #expect(holder.closes == 1 && budget.heldBytes == 0)
        channel.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        try channel.writeInbound(ByteBuffer(string: "ed\n"))
        #expect(receiver.lines == ["ping"])
    }

    @Test func framingStoppedForWantOfRoomDoesNotGoOnAfterTheClose() throws {
        let receiver = Receiver(closingAfter: "never")
        let budget = InputBudget()
        receiver.queuesInto = budget
        let holder = CloseHolder()
        let channel = try connected(to: receiver, budget: budget, behind: holder)
        // More lines than the queue takes: framing stops with the rest kept.
        try channel.writeInbound(ByteBuffer(string: String(repeating: "a\n", count: InputBudget.maximumQueuedLines + 40)))
        #expect(receiver.lines.count == InputBudget.maximumQueuedLines)
        channel.close(promise: nil)
        #expect(holder.closes == 1 && budget.heldBytes == budget.queuedLines * (1 + InputBudget.lineOverhead))
        // The session runs its queue: the restart finds the connection closing.
        for _ in 0..<InputBudget.maximumQueuedLines { budget.dequeued(byteCount: 1) }
        channel.embeddedEventLoop.run()
        #expect(receiver.lines.count == InputBudget.maximumQueuedLines)
        #expect(budget.heldBytes == 0)
    }

    @Test func aLastLineAtTheLimitKeepsItsReturnOutOfTheCount() throws {
        let receiver = Receiver(closingAfter: "never")
        let channel = try connected(to: receiver, budget: InputBudget(), limit: 16)
        try channel.writeInbound(ByteBuffer(string: "search abcdefghi\r"))
        channel.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        #expect(receiver.lines == ["search abcdefghi\r"] && receiver.tooLong == 0)
    }
}

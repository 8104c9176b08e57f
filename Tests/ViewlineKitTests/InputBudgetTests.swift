import NIOCore
import NIOEmbedded
import Testing
@testable import ViewlineKit

/// What a connection holds on the way in is bounded by its ``InputBudget``, whatever
/// the framing: a read of one-byte lines, a WebSocket message of them, fragments
/// that never finish, split at any offset.
@Suite struct InputBudgetTests {
    /// Stands in for the connection: counts each line it is handed into the budget as
    /// queued, and runs none until told to.
    final class Queue: ChannelInboundHandler {
        typealias InboundIn = LineFrame
        let budget: InputBudget
        var lines: [LineFrame] = []
        init(budget: InputBudget) { self.budget = budget }
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let frame = unwrapInboundIn(data)
            lines.append(frame)
            if case .line(let line) = frame { budget.queued(byteCount: line.readableBytes) } else { budget.queued(byteCount: 0) }
        }
        /// Runs `count` queued lines (the session's side).
        func run(_ count: Int) {
            for frame in lines.prefix(count) {
                if case .line(let line) = frame { budget.dequeued(byteCount: line.readableBytes) } else { budget.dequeued(byteCount: 0) }
            }
            lines.removeFirst(min(count, lines.count))
        }
    }

    /// Counts the socket reads a handler in front of it lets through.
    final class ReadCounter: ChannelOutboundHandler {
        typealias OutboundIn = ByteBuffer
        var reads = 0
        func read(context: ChannelHandlerContext) {
            reads += 1
            context.read()
        }
    }

    /// A channel whose reads go through the framer `make` builds on a fresh budget, into a
    /// queue that counts against it, with a counter of the socket reads asked for in front.
    func framed(
        _ make: (InputBudget) -> any ChannelHandler
    ) throws -> (budget: InputBudget, queue: Queue, counter: ReadCounter, channel: EmbeddedChannel) {
        let budget = InputBudget()
        let queue = Queue(budget: budget)
        let counter = ReadCounter()
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandlers(counter, make(budget), queue)
        return (budget, queue, counter, channel)
    }

    /// The most a framer may keep on top of its queue: one wakeup's reads (4 × 64 KiB)
    /// and a frame of the given limit.
    static func framerBound(frameLimit: Int) -> Int { 4 * 65_536 + 2 * frameLimit + 4096 }

    @Test func blankLinesAreSkippedAsTheyAreFramedAndNeverQueued() throws {
        let (budget, queue, counter, channel) = try framed { budget in
            LineFrameHandler(maximumLength: 64, incompleteLineTimeout: nil, budget: budget, acceptor: nil)
        }
        // 256 KiB of `\n` and `\r\n`, in reads split mid-`\r\n`: no command among them.
        let blank = Array(String(repeating: "\n\r\n", count: 21_846).utf8)
        for _ in 0..<4 {
            try channel.writeInbound(ByteBuffer(bytes: blank[..<30_001]))
            try channel.writeInbound(ByteBuffer(bytes: blank[30_001...]))
        }
        try channel.writeInbound(ByteBuffer(string: "ping\n"))
        #expect(queue.lines.count == 1)
        #expect(budget.heldBytes == 4 + InputBudget.lineOverhead)
        // Never stopped: the socket is read on.
        let reads = counter.reads
        channel.read()
        #expect(counter.reads == reads + 1)
        _ = try? channel.finish()
    }

    @Test func aReadOfOneByteLinesQueuesNoMoreThanTheBudgetAndTheRestWaitsAsBytes() throws {
        let (budget, queue, counter, channel) = try framed { budget in
            LineFrameHandler(maximumLength: 64, incompleteLineTimeout: nil, budget: budget, acceptor: nil)
        }
        // 256 KiB of `a\n` in four reads: 131,072 lines before this budget.
        let lines = Array(String(repeating: "a\n", count: 32_768).utf8)
        for _ in 0..<4 { try channel.writeInbound(ByteBuffer(bytes: lines)) }
        #expect(queue.lines.count == InputBudget.maximumQueuedLines)
        #expect(budget.heldBytes <= InputBudget.maximumQueuedBytes + Self.framerBound(frameLimit: 64))
        // Stopped: the socket is not read again.
        let reads = counter.reads
        channel.read()
        #expect(counter.reads == reads)
        // The session runs half the queue: framing goes on, a batch at a time, and
        // every line comes through in the end.
        var total = queue.lines.count
        var rounds = 0
        while total < 4 * 32_768, rounds < 10_000 {
            let before = queue.lines.count
            queue.run(InputBudget.maximumQueuedLines / 2)
            channel.embeddedEventLoop.run()
            total += queue.lines.count - (before - InputBudget.maximumQueuedLines / 2)
            #expect(queue.lines.count <= InputBudget.maximumQueuedLines)
            rounds += 1
        }
        #expect(total == 4 * 32_768)
        #expect(counter.reads == reads + 1)  // all framed: the read it held back goes through
        _ = try? channel.finish()
    }

    @Test func lineEndsAtEveryOffsetGiveTheSameLinesWhenFramingStops() throws {
        let (_, queue, _, channel) = try framed { budget in
            LineFrameHandler(maximumLength: 8, incompleteLineTimeout: nil, budget: budget, acceptor: nil)
        }
        let expected = (0..<1000).map { "l\($0 % 10_000)" }
        let input = Array(expected.joined(separator: "\n").utf8) + [UInt8(ascii: "\n")]
        var index = 0
        var seen: [String] = []
        while index < input.count {
            let end = min(index + 7, input.count)
            try channel.writeInbound(ByteBuffer(bytes: input[index..<end]))
            index = end
            if queue.lines.count == InputBudget.maximumQueuedLines {
                seen += queue.lines.map { if case .line(let b) = $0 { String(buffer: b) } else { "<too long>" } }
                queue.run(queue.lines.count)
                channel.embeddedEventLoop.run()
            }
        }
        seen += queue.lines.map { if case .line(let b) = $0 { String(buffer: b) } else { "<too long>" } }
        #expect(seen == expected)
        _ = try? channel.finish()
    }

    @Test func aWebSocketMessageOfNewlinesQueuesOnlyItsOneCommand() throws {
        let (_, queue, _, channel) = try framed { budget in
            WebSocketLines(maximumLength: 65_536, maximumFrameLength: 140_000, incompleteMessageTimeout: nil, budget: budget)
        }
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        let message = WebSocketLinesTests.frame(0x1, Array(String(repeating: "\n\r\n", count: 20_000).utf8) + Array("x".utf8))
        try channel.writeInbound(ByteBuffer(bytes: message))
        #expect(queue.lines.count == 1)
        if case .line(let only)? = queue.lines.first { #expect(String(buffer: only) == "x") } else { Issue.record("no line") }
        _ = try? channel.finish()
    }

    @Test func aWebSocketMessageOfOneByteLinesQueuesNoMoreThanTheBudget() throws {
        let (_, queue, counter, channel) = try framed { budget in
            WebSocketLines(maximumLength: 65_536, maximumFrameLength: 140_000, incompleteMessageTimeout: nil, budget: budget)
        }
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        let message = WebSocketLinesTests.frame(0x1, Array(String(repeating: "a\n", count: 32_500).utf8) + Array("x".utf8))
        try channel.writeInbound(ByteBuffer(bytes: message))
        #expect(queue.lines.count == InputBudget.maximumQueuedLines)
        let reads = counter.reads
        channel.read()
        #expect(counter.reads == reads)
        var rounds = 0
        while rounds < 1000 {
            queue.run(queue.lines.count)
            channel.embeddedEventLoop.run()
            rounds += 1
            if queue.lines.count < InputBudget.maximumQueuedLines { break }
        }
        // Every line of the message was handed over in the end, the last one "x".
        if case .line(let last)? = queue.lines.last { #expect(String(buffer: last) == "x") } else { Issue.record("no last line") }
        #expect(counter.reads == reads + 1)  // the read it held back goes through
        _ = try? channel.finish()
    }

    /// A text frame without FIN, then continuation frames without FIN, each under the
    /// frame limit, read in pieces that end mid-frame: the message is discarded as too
    /// long, and what the reader holds stays within one frame and one read, however
    /// much is sent (it used to keep every byte it had already taken).
    @Test(arguments: [1_000, 4_097, 65_536])
    func anEndlessFragmentedMessageHoldsOneFrameAtMost(readSize: Int) throws {
        let budget = InputBudget()
        let frameLimit = 2 * 1024 + 1024
        let channel = EmbeddedChannel(
            handler: WebSocketLines(
                maximumLength: 1024, maximumFrameLength: frameLimit, incompleteMessageTimeout: nil, budget: budget))
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        var stream = WebSocketLinesTests.frame(0x1, Array(repeating: UInt8(ascii: "a"), count: 3000), fin: false)
        let continuation = WebSocketLinesTests.frame(0x0, Array(repeating: UInt8(ascii: "b"), count: 3000), fin: false)
        var most = 0
        for _ in 0..<120 {  // 360 KB in all, many times the bound
            stream += continuation
            while stream.count >= readSize {
                try channel.writeInbound(ByteBuffer(bytes: stream.prefix(readSize)))
                stream.removeFirst(readSize)
                most = max(most, budget.heldBytes)
            }
        }
        #expect(channel.isActive)
        // A frame and a read not taken yet, in a buffer compacted once half of it is
        // taken (and grown by doubling): at most four times that, however much is sent.
        #expect(most <= 4 * (frameLimit + readSize) + 4096, "held \(most) bytes")
        _ = try? channel.finish()
    }

    @Test func aTextMessageThatIsNotUTF8FailsTheConnectionWith1007() throws {
        let channel = EmbeddedChannel(handler: WebSocketLines(maximumLength: 64, maximumFrameLength: 200, incompleteMessageTimeout: nil))
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        try channel.writeInbound(ByteBuffer(bytes: WebSocketLinesTests.frame(0x1, [0x70, 0x69, 0xC3, 0x28])))
        #expect(try channel.readInbound(as: LineFrame.self) == nil)
        var written = try #require(try channel.readOutbound(as: ByteBuffer.self))
        #expect(written.readInteger(as: UInt8.self) == 0x88)
        #expect(written.readInteger(as: UInt8.self) == 2)
        #expect(written.readInteger(as: UInt16.self) == 1007)
        _ = try? channel.finish()
    }

    @Test func fragmentsThatJoinIntoInvalidUTF8FailToo() throws {
        let channel = EmbeddedChannel(handler: WebSocketLines(maximumLength: 64, maximumFrameLength: 200, incompleteMessageTimeout: nil))
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        // "é" split across fragments is fine; a lone continuation byte is not.
        try channel.writeInbound(
            ByteBuffer(bytes: WebSocketLinesTests.frame(0x1, [0x61, 0xC3], fin: false) + WebSocketLinesTests.frame(0x0, [0xA9])))
        #expect(try channel.readInbound(as: LineFrame.self) == .line(ByteBuffer(bytes: [0x61, 0xC3, 0xA9])))
        try channel.writeInbound(ByteBuffer(bytes: WebSocketLinesTests.frame(0x1, [0x61], fin: false) + WebSocketLinesTests.frame(0x0, [0xA9])))
        #expect(try channel.readInbound(as: LineFrame.self) == nil)
        var written = try #require(try channel.readOutbound(as: ByteBuffer.self))
        _ = written.readInteger(as: UInt16.self)
        #expect(written.readInteger(as: UInt16.self) == 1007)
        _ = try? channel.finish()
    }
}

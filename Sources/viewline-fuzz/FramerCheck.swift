import NIOCore
import NIOEmbedded
import ViewlineFraming

/// Both framers driven by arbitrary bytes, for `viewline-fuzz`: the input (its first
/// bytes choose the read sizes and how fast the "session" runs its queue) goes through
/// ``LineFrameHandler`` and `WebSocketLines`, each with its ``InputBudget``, and after
/// every read the budget's invariant is checked: what the connection holds is within
/// its bound (PROTOCOL §8). A breach traps, which the fuzzer reports as a crash.
enum FramerCheck {
    static let lineLimit = 512
    static let frameLimit = 2 * lineLimit + 1024

    /// What one connection may hold at most, whatever it sent.
    static let bound = InputBudget.maximumQueuedBytes + InputBudget.lineOverhead * 2 + 2 * (4 * 65_536 + 2 * frameLimit + 4096)

    /// Runs `bytes` through both framers; traps if a budget is breached.
    static func run(_ bytes: [UInt8]) {
        guard bytes.count >= 2 else { return }
        let readSize = Int(bytes[0]) % 64 + 1
        let runEvery = Int(bytes[1]) % 8  // 0: the session never runs its queue
        let input = bytes.dropFirst(2)
        check(input, readSize: readSize, runEvery: runEvery) { budget in
            Framers.lines(maximumLength: lineLimit, budget: budget)
        }
        check(input, readSize: readSize, runEvery: runEvery) { budget in
            Framers.webSocket(maximumLength: lineLimit, maximumFrameLength: frameLimit, budget: budget)
        }
        // Blank lines and newline-only messages in bulk, whatever the input: the burst
        // shape the budget exists for.
        let burst = [UInt8](repeating: UInt8(ascii: "\n"), count: 8192)
        check(burst[...], readSize: readSize * 64, runEvery: runEvery) { budget in
            Framers.lines(maximumLength: lineLimit, budget: budget)
        }
    }

    /// A connection's queue as the session sees it: it counts each line handed over and
    /// runs some of them every `runEvery` reads.
    private final class Queue: ChannelInboundHandler {
        typealias InboundIn = LineFrame
        let budget: InputBudget
        var waiting: [Int] = []
        init(budget: InputBudget) { self.budget = budget }
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let bytes: Int
            switch unwrapInboundIn(data) {
            case .line(let line): bytes = line.readableBytes
            case .tooLong: bytes = 0
            }
            waiting.append(bytes)
            budget.queued(byteCount: bytes)
        }
        func runSome() {
            let count = (waiting.count + 1) / 2
            for bytes in waiting.prefix(count) { budget.dequeued(byteCount: bytes) }
            waiting.removeFirst(count)
        }
    }

    private static func check(
        _ input: ArraySlice<UInt8>, readSize: Int, runEvery: Int, framer: (InputBudget) -> any ChannelHandler
    ) {
        let budget = InputBudget()
        let queue = Queue(budget: budget)
        let channel = EmbeddedChannel()
        _ = try? channel.pipeline.syncOperations.addHandlers(framer(budget), queue)
        _ = try? channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        var index = input.startIndex
        var reads = 0
        while index < input.endIndex, channel.isActive {
            let end = min(index + readSize, input.endIndex)
            _ = try? channel.writeInbound(ByteBuffer(bytes: input[index..<end]))
            index = end
            reads += 1
            precondition(budget.heldBytes <= bound, "a connection holds \(budget.heldBytes) bytes, over its bound of \(bound)")
            precondition(budget.queuedLines <= InputBudget.maximumQueuedLines, "\(budget.queuedLines) lines queued")
            if runEvery > 0, reads % runEvery == 0 {
                queue.runSome()
                channel.embeddedEventLoop.run()
                precondition(budget.heldBytes <= bound, "a connection holds \(budget.heldBytes) bytes, over its bound of \(bound)")
            }
        }
        // A framer that failed the connection closed the channel itself: the writes and
        // tasks its close left are run, then the channel is finished either way.
        channel.embeddedEventLoop.run()
        _ = try? channel.finish(acceptAlreadyClosed: true)
    }
}

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import NIOCore
import Synchronization

/// Everything one connection holds on its way in, counted in one place: the bytes its
/// framer keeps (a line or frame that continues in the next read, a message being
/// assembled, the raw rest of a read left unframed) and the lines queued for its
/// session at what they really cost (blank lines are skipped as they are framed).
///
/// Both framers (``LineFrameHandler`` for TCP, `WebSocketLines`) hand a line over only
/// while the queue has room. When it has none, framing stops: the rest of the read stays
/// raw bytes, counted here, and the framer stops asking the socket for more (TCP pushes
/// back on the client; no queue grows). When the session has run enough of the queue,
/// the framer is started again on its event loop, frames what it kept, and reads on.
/// So what a connection holds on the way in is at most
///
/// - ``maximumQueuedLines`` lines or ``maximumQueuedBytes`` bytes of them queued, plus
/// - what its framer keeps: for TCP a line up to the line limit and the rest of one
///   wakeup's reads (at most 4 × 64 KiB); for WebSocket a frame up to its limit, a
///   message up to the line limit and the same reads,
///
/// and a connection kept at that bound for longer than `--line-timeout` is closed, as one
/// whose line stays incomplete is.
package final class InputBudget: Sendable {
    /// Lines queued before framing stops.
    package static let maximumQueuedLines = 256
    /// Bytes of queued lines before framing stops, whatever their number.
    package static let maximumQueuedBytes = 256 * 1024
    /// What a queued line costs beyond its bytes: its slot in the queue and the header
    /// and allocation of the buffer it is copied into.
    package static let lineOverhead = 64

    private let lines = Atomic<Int>(0)
    private let bytes = Atomic<Int>(0)
    /// Bytes the framer keeps (updated on the connection's event loop).
    private let held = Atomic<Int>(0)
    /// The framer stopped for want of room and waits to be started again.
    private let framingStopped = Atomic<Bool>(false)
    /// Restarts the framer on its event loop: set the first time the framer stops
    /// (an idle connection never needs it, and it costs four allocations). Boxed: a closure kept in a `Mutex` is reabstracted on every `inout` access, and
    /// each access wrapped it in two more thunks for good (a stack of them grew with
    /// every restart, one call walking them all: a quarter of the server's CPU under
    /// attack).
    private let restart = Mutex<Restart?>(nil)

    private final class Restart: Sendable {
        let run: @Sendable () -> Void
        init(_ run: @escaping @Sendable () -> Void) { self.run = run }
    }

    package init() {}

    /// Whether a framer may hand over another line now.
    package var hasRoom: Bool {
        lines.load(ordering: .relaxed) < Self.maximumQueuedLines && bytes.load(ordering: .relaxed) < Self.maximumQueuedBytes
    }

    /// Room enough to start a stopped framer again (half the queue: a client that keeps
    /// its pipeline full is framed in batches, not a line per wakeup).
    private var hasRoomToRestart: Bool {
        lines.load(ordering: .relaxed) <= Self.maximumQueuedLines / 2 && bytes.load(ordering: .relaxed) <= Self.maximumQueuedBytes / 2
    }

    /// Bytes held in all: queued lines at their cost and what the framer keeps.
    package var heldBytes: Int {
        bytes.load(ordering: .relaxed) + held.load(ordering: .relaxed)
    }

    /// Queued lines now.
    package var queuedLines: Int { lines.load(ordering: .relaxed) }

    /// The framer keeps `count` bytes now (its carried bytes, whole).
    func framerHolds(_ count: Int) {
        held.store(count, ordering: .relaxed)
    }

    /// A line of `byteCount` bytes joined the queue.
    package func queued(byteCount: Int) {
        lines.add(1, ordering: .relaxed)
        bytes.add(byteCount + Self.lineOverhead, ordering: .relaxed)
    }

    /// A queued line of `byteCount` bytes left it (it runs now, or the connection ended);
    /// a framer stopped for want of room is started again once there is enough.
    package func dequeued(byteCount: Int) {
        lines.subtract(1, ordering: .relaxed)
        bytes.subtract(byteCount + Self.lineOverhead, ordering: .relaxed)
        if hasRoomToRestart, framingStopped.exchange(false, ordering: .acquiringAndReleasing) {
            restart.withLock { $0 }?.run()
        }
    }

    /// The framer left the pipeline: the budget's way back to it would keep it alive.
    func stopRestarting() {
        restart.withLock { $0 = nil }
    }

    /// `framer` found no room and stops (on its event loop, from its handler in
    /// `context`); it is started again there once room is made (from the session's
    /// thread). Returns `false` when room was made meanwhile (the queue ran down
    /// between its check and this call): then it frames on.
    ///
    /// The way back is set before the flag, so whoever clears the flag finds it. It
    /// reaches the framer and its context weakly (``FramerReference``), and is made
    /// once: `restartMade` is the framer's own record that it was.
    func stopFraming(_ framer: any RestartableFramer, in context: ChannelHandlerContext, restartMade: inout Bool) -> Bool {
        if !restartMade {
            restartMade = true
            let reference = NIOLoopBound(FramerReference(framer, context), eventLoop: context.eventLoop)
            let boxed = Restart {
                reference.eventLoop.execute {
                    guard let framer = reference.value.framer, let context = reference.value.context else { return }
                    framer.restartFraming(context: context)
                }
            }
            restart.withLock { $0 = boxed }
        }
        framingStopped.store(true, ordering: .sequentiallyConsistent)
        // Whoever clears the flag restarts framing: the session's side after this, or
        // the framer itself when the room came before the flag was seen.
        if hasRoomToRestart, framingStopped.exchange(false, ordering: .acquiringAndReleasing) { return false }
        return true
    }
}

extension ByteBuffer {
    /// Whether the line from the reader index to `end` (its newline, or the end of a
    /// WebSocket message) is blank: empty, or a lone `\r`. Both framers skip such a
    /// line as they frame it: it is no command, so it is never queued, and a burst
    /// of them costs a scan, not a queue entry each.
    func isBlankLine(endingAt end: Int) -> Bool {
        let length = end - readerIndex
        return length == 0 || (length == 1 && getInteger(at: readerIndex, as: UInt8.self) == UInt8(ascii: "\r"))
    }

    /// How long the line from the reader index to `end` is without a `\r` that ends it:
    /// what the line limit counts, with its newline or as the last line.
    func lineLength(endingAt end: Int) -> Int {
        let length = end - readerIndex
        return length > 0 && getInteger(at: end - 1, as: UInt8.self) == UInt8(ascii: "\r") ? length - 1 : length
    }

    /// Moves the reader index past the blank lines (`\n`, `\r\n`) that start at it,
    /// up to `end`: a burst of them is skipped at memory speed, not a line at a time.
    mutating func skipBlankLines(before end: Int) {
        let skipped = withUnsafeReadableBytes { bytes -> Int in
            let limit = min(bytes.count, end - readerIndex)
            var index = 0
            while index < limit {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\n") {
                    index += 1
                } else if byte == UInt8(ascii: "\r"), index + 1 < limit, bytes[index + 1] == UInt8(ascii: "\n") {
                    index += 2
                } else {
                    break
                }
            }
            return index
        }
        moveReaderIndex(forwardBy: skipped)
    }

    /// The index of the first `\n` at or after `from` (a buffer index), by `memchr`.
    func indexOfNewline(from: Int) -> Int? {
        withUnsafeReadableBytes { bytes -> Int? in
            let offset = from - readerIndex
            guard offset < bytes.count, let base = bytes.baseAddress else { return nil }
            return memchr(base + offset, Int32(UInt8(ascii: "\n")), bytes.count - offset)
                .map { readerIndex + base.distance(to: UnsafeRawPointer($0)) }
        }
    }

    /// What a framer keeps of a read it did not finish: `nil` when nothing is left; a
    /// buffer already the framer's (`owned`) as it is, moved to the front only once
    /// its taken bytes are half of it (a framer that stops and goes on many times over
    /// one read costs linear time, not a move of the rest each time); the rest of the
    /// read's own buffer copied out, so that buffer is let go.
    mutating func keptRest(owned: Bool, allocator: ByteBufferAllocator) -> ByteBuffer? {
        guard readableBytes > 0 else { return nil }
        guard !owned else {
            if readerIndex > capacity / 2 { discardReadBytes() }
            return self
        }
        var kept = allocator.buffer(capacity: readableBytes)
        kept.writeBuffer(&self)
        return kept
    }
}

/// A framer that stops when the budget has no room, and that the budget starts again
/// (``InputBudget/stopFraming(_:in:restartMade:)``): both framers.
protocol RestartableFramer: AnyObject {
    /// Frames what was kept and reads on (on the channel's event loop).
    func restartFraming(context: ChannelHandlerContext)
}

/// A framer and its context as the budget's restart reaches them: weakly, so the
/// budget (which the connection's other handlers hold too) never keeps a pipeline alive.
final class FramerReference {
    weak var framer: (any RestartableFramer)?
    weak var context: ChannelHandlerContext?

    init(_ framer: any RestartableFramer, _ context: ChannelHandlerContext) {
        self.framer = framer
        self.context = context
    }
}

/// The two framers with a budget of the caller's, for checks from outside the module
/// (`viewline-fuzz`).
package enum Framers {
    /// A TCP line framer whose lines count against `budget`.
    package static func lines(maximumLength: Int, budget: InputBudget) -> any ChannelHandler {
        LineFrameHandler(maximumLength: maximumLength, incompleteLineTimeout: nil, budget: budget, acceptor: nil)
    }

    /// A WebSocket framer whose lines count against `budget`.
    package static func webSocket(maximumLength: Int, maximumFrameLength: Int, budget: InputBudget) -> any ChannelHandler {
        WebSocketLines(maximumLength: maximumLength, maximumFrameLength: maximumFrameLength, incompleteMessageTimeout: nil, budget: budget)
    }
}

import Logging
import NIOCore
import Synchronization

/// A connection's outgoing lines. Lines sent from the session's thread are
/// gathered and handed to the event loop in one write and one flush per loop
/// tick, so a burst of replies and events (pipelined commands, a results display)
/// costs one syscall instead of one each.
///
/// Bounded: when the client stops reading and NIO's buffer passes its high
/// watermark (`--max-output-bytes`), the connection is closed rather than letting
/// memory grow without limit. One flush may go over the watermark by itself — a
/// line larger than the whole budget (an `attach` snapshot of a large session) goes
/// out whole to a client that reads it — so a connection holds at most the budget
/// plus that flush and the next.
final class OutboundLines: Sendable {
    private let channel: any Channel
    /// What waits for the next flush; `nil` between flushes, so an idle connection
    /// holds no buffer.
    private let state = Mutex<(pending: ByteBuffer?, scheduled: Bool)>((nil, false))
    private let logger: Logger
    private let metrics: ServerMetrics?
    /// Set at shutdown, before the `bye`: no line read from now on runs.
    private let inputStopped = Atomic<Bool>(false)
    /// What the flush that took the backlog over the watermark brought (touched on the
    /// channel's loop only): the backlog may stay over by that much while it drains.
    private let allowance = Atomic<Int>(0)

    /// Where a backlog is told (``ConnectionCounts/backlog(of:bytes:)``), and whether
    /// this connection's is there now (touched on the channel's loop only).
    private let counts: ConnectionCounts?
    private let backlogID: Int
    private let backedUp = Atomic<Bool>(false)
    /// The list of the channel's loop that flushes output queued on that loop (`nil`:
    /// each flush is a task of its own).
    private let flushes: LoopFlushes?

    init(
        channel: any Channel, logger: Logger, metrics: ServerMetrics? = nil, counts: ConnectionCounts? = nil, flushes: LoopFlushes? = nil
    ) {
        precondition(flushes.map { $0.loop === channel.eventLoop } ?? true, "the flushes of another loop")
        self.channel = channel
        self.flushes = flushes
        self.logger = logger
        self.metrics = metrics
        self.counts = counts
        backlogID = counts?.makeBacklogID() ?? 0
        if let counts {
            // However the connection ends, its backlog goes with it (by its number: this
            // object may be gone by the time the close completes).
            channel.closeFuture.whenComplete { [backlogID] _ in counts.backlog(of: backlogID, bytes: nil) }
        }
    }

    /// The channel's writability changed (on its loop): a connection that drained
    /// below its watermark leaves the backlog. (One that closes leaves it as its close
    /// completes, whatever its state then.)
    func writabilityChanged() {
        guard backedUp.load(ordering: .relaxed), channel.isWritable else { return }
        backedUp.store(false, ordering: .relaxed)
        counts?.backlog(of: backlogID, bytes: nil)
    }

    /// Tells the backlog what this connection holds now, past its watermark.
    private func noteBacklog(_ buffered: Int) {
        guard let counts else { return }
        backedUp.store(true, ordering: .relaxed)
        counts.backlog(of: backlogID, bytes: buffered)
    }

    /// Bytes gathered before they are handed to NIO at once, even mid-burst: what
    /// waits here is counted against the backlog limit as it is queued, not after
    /// a whole pipelined read ran.
    static let flushThreshold = 64 * 1024

    /// Queues one line (already ending in `\n`); safe from any thread, order kept.
    func send(_ line: [UInt8]) {
        queue(bytes: line.count) { $0.writeBytes(line) }
    }

    /// Queues a successful reply whose result is already encoded, written from its
    /// parts straight into the outbound buffer (no line is made first).
    func send(reply re: JSON, result: EncodedResult) {
        queue(bytes: result.count + 64) { buffer in
            result.writeReply(re: re, into: &buffer)
        }
    }

    /// Queues a `display` written from its parts straight into the outbound buffer:
    /// its own head and the state's shared encoding (no line is made first).
    func send(display: DisplayEvent) {
        queue(bytes: display.count) { buffer in
            display.write { buffer.writeBytes($0) }
        }
    }

    private func queue(bytes: Int, _ write: (inout ByteBuffer) -> Void) {
        let (schedule, flushNow) = state.withLock { state -> (Bool, Bool) in
            if state.pending == nil { state.pending = channel.allocator.buffer(capacity: max(bytes, 256)) }
            write(&state.pending!)
            let full = state.pending!.readableBytes >= Self.flushThreshold
            if state.scheduled { return (false, full) }
            state.scheduled = true
            return (true, full)
        }
        guard flushNow || schedule else { return }
        let onLoop = channel.eventLoop.inEventLoop
        if flushNow && onLoop {
            // A burst on the connection's own loop: hand it over now, so NIO's
            // watermark sees it and a client that does not read is cut off in time.
            flushOnLoop()
        } else if schedule {
            if onLoop, let flushes {
                flushes.add(self)
            } else {
                channel.eventLoop.execute { self.flushOnLoop() }
            }
        }
    }

    /// Whether the connection can still take output and run what it reads: open, its
    /// backlog under the limit, and not shutting down. A pump stops running a
    /// connection's lines once this is false.
    var isOpen: Bool { channel.isActive && !inputStopped.load(ordering: .relaxed) }

    /// A shutdown is about to say `bye`: nothing the connection reads from now on runs
    /// (output still goes out), so no reply can follow the `bye`.
    func stopRunningInput() {
        inputStopped.store(true, ordering: .relaxed)
    }

    /// Writes everything queued so far and waits until it is handed to the socket.
    func drain() async throws {
        try await channel.eventLoop.flatSubmit { () -> EventLoopFuture<Void> in
            self.flushOnLoop()
            return self.channel.writeAndFlush(ByteBuffer())
        }.get()
    }

    /// Writes everything queued so far, then closes the connection.
    func flushThenClose() {
        channel.eventLoop.execute {
            self.flushOnLoop()
            let channel = self.channel
            // A client that does not read would keep the close (and its descriptor and
            // buffers) waiting forever: it gets the time a `bye` is given, then goes.
            let deadline = channel.eventLoop.scheduleTask(in: .closingDeadline) { channel.close(promise: nil) }
            channel.writeAndFlush(ByteBuffer()).whenComplete { _ in
                deadline.cancel()
                channel.close(promise: nil)
            }
        }
    }

    /// Hands what is queued to the channel (on its loop), and cuts off a client whose
    /// backlog passed the limit.
    func flushOnLoop() {
        let pending = state.withLock { state -> ByteBuffer? in
            state.scheduled = false
            defer { state.pending = nil }
            return state.pending
        }
        guard let pending, channel.isActive else { return }
        let size = pending.readableBytes
        let wasWritable = channel.isWritable
        metrics?.wrote(bytes: size)
        channel.writeAndFlush(pending, promise: nil)
        if channel.isWritable { return }
        let buffered = try? channel.syncOptions?.getOption(.bufferedWritableBytes)
        noteBacklog(buffered ?? 0)
        if wasWritable {
            // This flush alone took the backlog over the limit (a line larger than the
            // budget, or the last of a burst): it goes out whole while the client reads.
            allowance.store(size, ordering: .relaxed)
            return
        }
        let limit = (try? channel.syncOptions?.getOption(.writeBufferWaterMark))?.high ?? 0
        if (buffered ?? .max) > limit + allowance.load(ordering: .relaxed) {
            // The client is not reading and its backlog passed the limit: a `bye` would
            // sit behind that backlog, so just let go of the connection (its session
            // lives on for the client to attach again).
            logger.warning("closing a connection whose client stopped reading")
            metrics?.outputCutOffs.increment()
            channel.close(promise: nil)
        }
    }
}

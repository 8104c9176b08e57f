import Logging
import NIOCore
import Synchronization

/// A connection's outgoing lines. Lines sent from the session's thread are
/// gathered and handed to the event loop in one write and one flush per loop
/// tick, so a burst of replies and events (pipelined commands, a results display)
/// costs one syscall instead of one each.
///
/// Bounded by the memory really held, not the bytes written: once the socket does
/// not take a flush whole (the client reads slower than it is written to), nothing
/// more is handed to NIO until it has written everything it holds; what comes
/// meanwhile is merged into one buffer here. The backlog is then NIO's unwritten
/// buffers plus that one, counted at their capacity, and is cut off past
/// `--max-output-bytes` — or past the address's or the server's output budget
/// (``ConnectionCounts``), whichever comes first. One flush may go over the limit by
/// itself — a line larger than the whole budget (an `attach` snapshot of a large
/// session) goes out whole to a client that reads it — so a connection holds at most
/// the budget plus that flush.
final class OutboundLines: Sendable {
    let channel: any Channel
    /// What waits for the next flush; `nil` between flushes, so an idle connection
    /// holds no buffer.
    private let state = Mutex(Pending())
    /// What the connections of its loop share (the command table, the limits).
    let context: ConnectionContext
    /// What the flush that began the backlog brought, when it was over the limit by
    /// itself (touched on the channel's loop only): the backlog may stay over by that
    /// much while it drains.
    private let allowance = Atomic<Int>(0)
    /// Which marker ends the current drain (a forced flush writes another).
    private let drainGeneration = Atomic<Int>(0)
    /// The capacity of the buffers handed to NIO since the drain began.
    private let handedCapacity = Atomic<Int>(0)
    /// This connection's backlog in ``ConnectionContext/counts``.
    private let backlogID: Int
    let address: String
    /// Set at shutdown, before the `bye`: no line read from now on runs.
    private let inputStopped = Atomic<Bool>(false)
    /// Set once the connection is cut off: nothing more is queued for it.
    private let cutOff = Atomic<Bool>(false)
    /// NIO holds output it could not write at once (touched on the loop only): new
    /// output waits in `pending`, merged, until a marker written behind it completes.
    private let draining = Atomic<Bool>(false)
    /// Whether this connection's backlog is in the counts now (touched on the loop only).
    private let backedUp = Atomic<Bool>(false)

    private var lease: (@Sendable () -> ContinuousClock.Instant?)? { context.lease }
    private var logger: Logger { context.logger }
    private var metrics: ServerMetrics? { context.metrics }
    private var limit: Int { context.limit }
    private var counts: ConnectionCounts? { context.counts }
    private var flushes: LoopFlushes? { context.flushes }

    /// The write side of `channel`, sharing `context` with the other connections of its
    /// loop. Whoever sees the channel close calls ``closed()`` (its backlog goes).
    init(channel: any Channel, context: ConnectionContext, address: String? = nil) {
        precondition(context.flushes.map { $0.loop === channel.eventLoop } ?? true, "the flushes of another loop")
        self.channel = channel
        self.context = context
        self.address = address ?? channel.remoteAddress?.clientKey ?? ""
        backlogID = context.counts?.makeBacklogID() ?? 0
    }

    /// A connection with a ``ConnectionContext`` of its own, told of its channel's close
    /// by the channel itself.
    convenience init(
        channel: any Channel, logger: Logger, metrics: ServerMetrics? = nil, counts: ConnectionCounts? = nil, flushes: LoopFlushes? = nil,
        limit: Int = 1 << 20, address: String? = nil, lease: (@Sendable () -> ContinuousClock.Instant?)? = nil
    ) {
        self.init(
            channel: channel,
            context: ConnectionContext(logger: logger, metrics: metrics, counts: counts, flushes: flushes, limit: limit, lease: lease),
            address: address)
        closesWithChannel()
    }

    /// The channel closed: its backlog leaves the counts (by its number, so the
    /// counts never keep a connection that is gone).
    func closed() {
        counts?.backlog(of: backlogID, bytes: nil)
    }

    /// ``closed()`` once the channel's close completes, for a connection no handler
    /// tells (a refused one).
    func closesWithChannel() {
        guard let counts = context.counts else { return }
        channel.closeFuture.whenComplete { [backlogID] _ in counts.backlog(of: backlogID, bytes: nil) }
    }

    /// What waits for the next flush, with whether one is scheduled and, under a lease,
    /// by when it must be written. The deadline is kept as nanoseconds after
    /// ``Pending/epoch`` (`Int64.max`: none): 8 bytes instead of an optional instant's 17.
    private struct Pending {
        var pending: ByteBuffer?
        var scheduled = false
        private var deadlineNanos = Int64.max

        static let epoch = ContinuousClock.now

        var deadline: ContinuousClock.Instant? {
            get { deadlineNanos == .max ? nil : Self.epoch + .nanoseconds(deadlineNanos) }
            set {
                guard let newValue else { deadlineNanos = .max; return }
                // To the nanosecond (a lease is renewed in seconds); one past 292 years
                // saturates rather than traps.
                deadlineNanos = min((newValue - Self.epoch).nanoseconds, .max - 1)
            }
        }
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
        guard !cutOff.load(ordering: .relaxed) else { return }
        let until = lease?()
        let (schedule, flushNow) = state.withLock { state -> (Bool, Bool) in
            if state.pending == nil { state.pending = channel.allocator.buffer(capacity: max(bytes, 256)) }
            if let until { state.deadline = min(state.deadline ?? until, until) }
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
    var isOpen: Bool { channel.isActive && !inputStopped.load(ordering: .relaxed) && !cutOff.load(ordering: .relaxed) }

    /// A shutdown is about to say `bye`: nothing the connection reads from now on runs
    /// (output still goes out), so no reply can follow the `bye`.
    func stopRunningInput() {
        inputStopped.store(true, ordering: .relaxed)
    }

    /// Writes everything queued so far and waits until it is handed to the socket.
    func drain() async throws {
        try await channel.eventLoop.flatSubmit { () -> EventLoopFuture<Void> in
            self.flushOnLoop(force: true)
            return self.channel.writeAndFlush(ByteBuffer())
        }.get()
    }

    /// Writes everything queued so far, then closes the connection.
    func flushThenClose() {
        channel.eventLoop.execute {
            self.flushOnLoop(force: true)
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

    /// Hands what is queued to the channel (on its loop) — unless NIO still holds
    /// output the socket did not take, when it stays merged here (`force`: handed over
    /// anyway, for a `bye` or a drain) — and cuts off a client whose backlog passed a
    /// budget.
    func flushOnLoop(force: Bool = false) {
        let waiting = draining.load(ordering: .relaxed) && !force
        let (pending, pendingCapacity, deadline) = state.withLock { state -> (ByteBuffer?, Int, ContinuousClock.Instant?) in
            state.scheduled = false
            if waiting { return (nil, state.pending?.capacity ?? 0, nil) }
            defer { (state.pending, state.deadline) = (nil, nil) }
            return (state.pending, 0, state.deadline)
        }
        guard channel.isActive else { return }
        if let deadline, ContinuousClock.now >= deadline {
            // Made while the lease was valid, written only after it ran out (the node
            // was paused, or its loop stalled): another node may own the session by now,
            // and a reply from here would acknowledge what its record never held. Dropped,
            // and the connection with it: the client attaches again and retries what was
            // not answered (PROTOCOL §4).
            cutOff.store(true, ordering: .relaxed)
            logger.warning("closing a connection whose output outlived this node's lease")
            channel.close(promise: nil)
            return
        }
        if waiting {
            checkBacklog(holding: handedCapacity.load(ordering: .relaxed) + pendingCapacity)
            return
        }
        guard let pending else { return }
        let capacity = pending.capacity
        metrics?.wrote(bytes: pending.readableBytes)
        channel.writeAndFlush(pending, promise: nil)
        // The common case: the socket took it all, and nothing is held.
        guard let left = try? channel.syncOptions?.getOption(.bufferedWritableBytes), left > 0, channel.isActive else { return }
        beginDrain(holding: capacity)
    }

    /// The socket did not take a flush whole: NIO holds `capacity` more until the
    /// client reads. A marker written behind it says when everything is written; until
    /// then new output is merged here.
    private func beginDrain(holding capacity: Int) {
        if !draining.load(ordering: .relaxed) {
            draining.store(true, ordering: .relaxed)
            handedCapacity.store(0, ordering: .relaxed)
            // A flush over the limit by itself (a large snapshot) goes out whole.
            allowance.store(capacity > limit ? capacity : 0, ordering: .relaxed)
        }
        let held = handedCapacity.wrappingAdd(capacity, ordering: .relaxed).newValue
        let generation = drainGeneration.wrappingAdd(1, ordering: .relaxed).newValue
        let written = channel.eventLoop.makePromise(of: Void.self)
        channel.writeAndFlush(ByteBuffer(), promise: written)
        written.futureResult.whenComplete { _ in self.drained(generation) }
        checkBacklog(holding: held)
    }

    /// Everything handed to NIO up to marker `generation` is written (or the
    /// connection closed): what was merged meanwhile goes now.
    private func drained(_ generation: Int) {
        guard drainGeneration.load(ordering: .relaxed) == generation, draining.load(ordering: .relaxed) else { return }
        draining.store(false, ordering: .relaxed)
        handedCapacity.store(0, ordering: .relaxed)
        if backedUp.load(ordering: .relaxed) {
            backedUp.store(false, ordering: .relaxed)
            counts?.backlog(of: backlogID, bytes: nil)
        }
        flushOnLoop()
    }

    /// Counts what the backlog holds now, and cuts the connection off past its limit
    /// (plus the allowance of a flush over it by itself), its address's budget or the
    /// server's.
    private func checkBacklog(holding held: Int) {
        backedUp.store(true, ordering: .relaxed)
        var over: String?
        if let passed = counts?.backlog(of: backlogID, address: address, bytes: held) {
            over = passed.description
        } else if held > limit + allowance.load(ordering: .relaxed) {
            over = "its output limit"
        }
        guard let over else { return }
        // The client is not reading and its backlog passed a budget: a `bye` would sit
        // behind that backlog, so just let go of the connection (its session lives on
        // for the client to attach again).
        cutOff.store(true, ordering: .relaxed)
        state.withLock { $0.pending = nil }
        counts?.backlog(of: backlogID, bytes: nil)
        logger.warning("closing a connection whose client stopped reading", metadata: ["over": "\(over)", "held": "\(held)"])
        metrics?.outputCutOffs.increment()
        channel.close(promise: nil)
    }
}

import NIOCore

/// One framed input line, or the marker for a line that went over the limit.
public enum LineFrame: Sendable, Equatable {
    /// A line without its `\n` (a trailing `\r` is left for the request decoder).
    case line(ByteBuffer)
    /// A line exceeded the limit: it is reported once and its rest discarded.
    case tooLong
}

/// Splits the byte stream into lines and caps their length, like redis's
/// `processInlineBuffer`: framing only, no meaning. A line over `maximumLength`
/// bytes yields one `.tooLong` and everything up to its newline is dropped, so the
/// buffer stays bounded and the connection stays usable. At the end of input (or when
/// the peer drops the connection) a last line without `\n` still counts, as with
/// `nc -N`; once this side closes the connection, nothing more is framed or handed over.
///
/// A handler of its own rather than a `ByteToMessageDecoder`: the lines of a read
/// are sliced out of the read's buffer as they are found, and only the start of a
/// line that continues in the next read is kept (copied, so the read's buffer can be
/// reused). An idle connection holds no buffer here.
///
/// Lines are handed over only while the connection's `InputBudget` has room: when it
/// has none, framing stops, the rest of the read is kept as it came (counted), and the
/// socket is not read again until the session has run enough of the queue — one read
/// of blank lines cannot become a quarter of a million queued commands.
public final class LineFrameHandler: ChannelDuplexHandler, RestartableFramer {
    public typealias InboundIn = ByteBuffer
    /// Lines, or a marker for one that was too long.
    public typealias InboundOut = LineFrame
    public typealias OutboundIn = ByteBuffer
    public typealias OutboundOut = ByteBuffer

    /// The longest accepted line, in bytes, without its line ending.
    public let maximumLength: Int
    /// How long a line may stay incomplete before the connection is closed (a
    /// client that opens a line and never ends it holds buffers for nothing); its
    /// session lives on. The same time bounds a connection whose framing stopped for
    /// want of room. `nil`: no limit.
    public let incompleteLineTimeout: TimeAmount?
    /// What the connection holds on the way in.
    let budget: InputBudget
    /// Bytes kept for the next read: the start of a line that continues in it, or, while
    /// framing is stopped, everything not framed yet.
    private var partial: ByteBuffer?
    /// How many of `partial`'s bytes hold no newline (searched already).
    private var searched = 0
    /// The current line went over the limit: drop bytes until its newline.
    private var discarding = false
    /// Framing stopped for want of room in the budget (see `InputBudget`).
    private var stopped = false
    /// The budget has its way to start this framer again (made the first time it stops).
    private var restartMade = false
    /// The socket was to be read while framing was stopped: read once it goes on.
    private var readWanted = false
    /// The client closed its sending side while framing was stopped: said once the
    /// lines before it are framed.
    private var inputClosedWaits = false
    /// Closes the connection when an incomplete line outlives its time.
    private var timer = IncompleteLineTimer()
    /// The connection is being closed (its whole close went out through this framer or
    /// from it, or the channel went inactive): nothing more is framed, kept or handed
    /// over, not even a last line. Over TLS the close waits for the peer's
    /// `close_notify` while reads, a half-closure and a budget's restart still come.
    private var closing = false
    /// Where the connection's pipeline ends, when the server made this framer its
    /// last handler (`nil`: the handlers behind it do): lines and the channel's changes
    /// go there directly.
    private var end: End?

    /// The end of the pipeline, as far as the connection got.
    private enum End {
        /// Not active yet: asked who receives once it is.
        case accepting(any LineAcceptor)
        case receiving(any LineReceiver)
        /// Refused, or closed: nothing more is handed over.
        case done
    }

    /// A handler that caps lines at `maximumLength` bytes and closes a connection
    /// whose line stays incomplete for `incompleteLineTimeout`.
    public init(maximumLength: Int, incompleteLineTimeout: TimeAmount? = nil) {
        self.maximumLength = maximumLength
        self.incompleteLineTimeout = incompleteLineTimeout
        budget = InputBudget()
        end = nil
    }

    /// Frames lines as the pipeline's last handler: once the channel is active,
    /// `acceptor` says who receives them, and that receiver is handed each line and told
    /// of read ends, half-closure and the close, in the order the pipeline would deliver
    /// them; an error closes the connection. Without an acceptor, lines go down the
    /// pipeline.
    package init(maximumLength: Int, incompleteLineTimeout: TimeAmount?, budget: InputBudget, acceptor: (any LineAcceptor)?) {
        self.maximumLength = maximumLength
        self.incompleteLineTimeout = incompleteLineTimeout
        self.budget = budget
        end = acceptor.map { .accepting($0) }
    }

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !closing else { return }  // nobody takes lines any more
        var buffer = unwrapInboundIn(data)
        let merged = partial != nil
        if var partial {
            self.partial = nil  // uniquely referenced: the read is appended in place
            partial.writeBuffer(&buffer)
            buffer = partial
        }
        if stopped {
            keep(&buffer, merged: merged, context: context)
            return
        }
        frame(&buffer, merged: merged, context: context)
    }

    public func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { accept(context.channel) }
    }

    public func channelActive(context: ChannelHandlerContext) {
        accept(context.channel)
        context.fireChannelActive()
    }

    private func accept(_ channel: any Channel) {
        guard case .accepting(let acceptor) = end else { return }
        end = acceptor.accept(channel).map { .receiving($0) } ?? .done
    }

    /// Who receives lines and changes now, when this framer ends the pipeline.
    private var receiver: (any LineReceiver)? {
        if case .receiving(let receiver) = end { receiver } else { nil }
    }

    public func channelReadComplete(context: ChannelHandlerContext) {
        receiver?.readComplete()
        context.fireChannelReadComplete()
    }

    public func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A reset, a TLS failure: the connection is over (when this framer ends the
        // pipeline; otherwise the handlers behind it decide).
        guard end != nil else { return context.fireErrorCaught(error) }
        stopFramingForGood()
        context.close(promise: nil)
    }

    public func read(context: ChannelHandlerContext) {
        // Closing, reads go on (and are dropped): TLS reads the peer's `close_notify`.
        if stopped && !closing {
            readWanted = true
        } else {
            context.read()
        }
    }

    public func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed, !closing {
            if stopped {
                inputClosedWaits = true
                return
            }
            emitLastLine(context: context)
            receiver?.inputEnded()
        }
        context.fireUserInboundEventTriggered(event)
    }

    public func channelInactive(context: ChannelHandlerContext) {
        // The peer ended the connection: its last line counts. Not when framing was
        // stopped (nobody is left to answer what was not framed), nor after a close
        // of ours (nothing was kept).
        if !stopped && !closing { emitLastLine(context: context) }
        stopFramingForGood()
        if let receiver {
            end = .done
            receiver.channelInactive()
        }
        context.fireChannelInactive()
    }

    /// The whole close marks the end of framing at once, before whatever sits in front
    /// of this framer (TLS) lets the channel go inactive.
    public func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        if mode == .all { stopFramingForGood() }
        context.close(mode: mode, promise: promise)
    }

    /// The connection closes: what is kept goes unframed, an incomplete line included
    /// (PROTOCOL §8: a line that outlived its time never runs), and nothing more is.
    private func stopFramingForGood() {
        closing = true
        inputClosedWaits = false
        dropKept()
    }

    /// Nothing is kept any more: no incomplete line, its clock stopped, nothing counted.
    private func dropKept() {
        timer.cancel()
        partial = nil
        searched = 0
        discarding = false
        budget.framerHolds(0)
    }

    public func handlerRemoved(context: ChannelHandlerContext) {
        timer.cancel()
        budget.stopRestarting()
    }

    /// The lines of `buffer` (whose first `searched` bytes hold no newline), handed over
    /// while the budget has room; what is left is kept.
    private func frame(_ buffer: inout ByteBuffer, merged: Bool, context: ChannelHandlerContext) {
        var ended = false
        while true {
            if searched == 0, !discarding { buffer.skipBlankLines(before: buffer.writerIndex) }
            guard let newline = buffer.indexOfNewline(from: buffer.readerIndex + searched) else { break }
            if !discarding, buffer.isBlankLine(endingAt: newline) {
                // No command: skipped as it is framed, never queued or run.
                buffer.moveReaderIndex(to: newline + 1)
                searched = 0
                ended = true
                continue
            }
            if !budget.hasRoom, budget.stopFraming(self, in: context, restartMade: &restartMade) {
                stopped = true
                searched = 0
                keep(&buffer, merged: merged, context: context)
                return
            }
            searched = 0
            ended = true
            emitLine(through: newline, of: &buffer, context: context)
            // The line's receiver closed the connection as it took it (its backlog
            // over the budget, a lease run out): the rest of this read is neither
            // framed nor kept (nothing would take it, and a budget that counts a
            // closed connection's bytes counts them wrongly).
            if closing { return }
        }
        if ended { timer.cancel() }  // a line ended: the next one gets its own time
        keepIncompleteLine(&buffer, merged: merged, context: context)
    }

    /// Framing goes on after the session made room (on the event loop).
    func restartFraming(context: ChannelHandlerContext) {
        guard stopped else { return }
        stopped = false
        timer.cancel()
        if closing {
            // Nothing was kept to frame; a read asked for meanwhile still goes (TLS
            // reads the peer's `close_notify` through it).
            if readWanted {
                readWanted = false
                context.read()
            }
            return
        }
        if var buffer = partial {
            partial = nil
            frame(&buffer, merged: true, context: context)
        }
        guard !stopped else { return }
        if inputClosedWaits {
            inputClosedWaits = false
            emitLastLine(context: context)
            receiver?.inputEnded()
            context.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        }
        if readWanted {
            readWanted = false
            context.read()
        }
    }

    /// Keeps `buffer`'s rest as it is, unframed, while framing is stopped; the clock runs.
    private func keep(_ buffer: inout ByteBuffer, merged: Bool, context: ChannelHandlerContext) {
        store(&buffer, merged: merged, context: context)
        if let incompleteLineTimeout { timer.start(after: incompleteLineTimeout, context: context) }
    }

    /// The line ending at `newline` (an index of `buffer`'s readable bytes).
    private func emitLine(through newline: Int, of buffer: inout ByteBuffer, context: ChannelHandlerContext) {
        let length = newline - buffer.readerIndex
        if discarding {
            discarding = false
            buffer.moveReaderIndex(forwardBy: length + 1)
            return
        }
        if buffer.lineLength(endingAt: newline) > maximumLength {
            buffer.moveReaderIndex(forwardBy: length + 1)
            emit(.tooLong, context: context)
            return
        }
        let line = buffer.readSlice(length: length)!
        buffer.moveReaderIndex(forwardBy: 1)
        emit(.line(line), context: context)
    }

    private func emit(_ frame: LineFrame, context: ChannelHandlerContext) {
        switch end {
        case .receiving(let receiver): receiver.received(frame)
        case nil: context.fireChannelRead(wrapInboundOut(frame))
        case .accepting, .done: break
        }
    }

    /// What is left of a read after its last newline: kept for the next read, or
    /// dropped once it is over the limit.
    private func keepIncompleteLine(_ buffer: inout ByteBuffer, merged: Bool, context: ChannelHandlerContext) {
        if buffer.readableBytes > maximumLength + 1 {  // + 1 leaves room for a `\r`
            if !discarding {
                discarding = true
                emit(.tooLong, context: context)
            }
            buffer.moveReaderIndex(forwardBy: buffer.readableBytes)
        }
        store(&buffer, merged: merged, context: context)
        searched = partial?.readableBytes ?? 0
        guard let incompleteLineTimeout else { return }
        if partial != nil || discarding { timer.start(after: incompleteLineTimeout, context: context) }
    }

    /// Keeps `buffer`'s readable bytes as `partial`, counted: a buffer already ours
    /// keeps growing in place, so a long line sent a byte at a time costs linear time,
    /// not a copy per read (``ByteBuffer/keptRest(owned:allocator:)``).
    private func store(_ buffer: inout ByteBuffer, merged: Bool, context: ChannelHandlerContext) {
        partial = buffer.keptRest(owned: merged, allocator: context.channel.allocator)
        budget.framerHolds(partial?.capacity ?? 0)
    }

    private func emitLastLine(context: ChannelHandlerContext) {
        // Taken before it is handed over: a receiver that closes the connection as it
        // takes it brings `channelInactive` here again, with nothing left to hand over.
        let last = partial
        let wasDiscarding = discarding
        dropKept()
        if let last, !wasDiscarding, !last.isBlankLine(endingAt: last.writerIndex) {
            // The last line is kept up to the limit and one byte more (room for a `\r`
            // that never came): past the limit, it is too long like any other, its `\r`
            // discounted as with a newline.
            emit(last.lineLength(endingAt: last.writerIndex) > maximumLength ? .tooLong : .line(last), context: context)
        }
    }
}

/// The clock of one connection's incomplete line: started when a line begins,
/// cancelled when it ends; when it fires, the connection is closed. Used on the
/// connection's event loop only.
///
/// A value in its handler, not an object of its own (an idle connection's allocation
/// fewer): the handler cancels it as it leaves the pipeline, and a close it fires
/// after that finds the channel closed.
struct IncompleteLineTimer {
    private var task: Scheduled<Void>?

    /// Starts the clock unless it already runs for this line.
    mutating func start(after timeout: TimeAmount, context: ChannelHandlerContext) {
        guard task == nil else { return }
        let channel = context.channel
        task = context.eventLoop.scheduleTask(in: timeout) {
            channel.close(promise: nil)
        }
    }

    mutating func cancel() {
        task?.cancel()
        task = nil
    }
}

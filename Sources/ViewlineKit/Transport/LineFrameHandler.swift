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
/// buffer stays bounded and the connection stays usable. At the end of input (or of
/// the connection) a last line without `\n` still counts, as with `nc -N`.
///
/// A handler of its own rather than a `ByteToMessageDecoder`: the lines of a read
/// are sliced out of the read's buffer as they are found, and only the start of a
/// line that continues in the next read is kept (copied, so the read's buffer can be
/// reused). An idle connection holds no buffer here.
public final class LineFrameHandler: ChannelInboundHandler {
    public typealias InboundIn = ByteBuffer
    /// Lines, or a marker for one that was too long.
    public typealias InboundOut = LineFrame

    /// The longest accepted line, in bytes, without its line ending.
    public let maximumLength: Int
    /// How long a line may stay incomplete before the connection is closed (a
    /// client that opens a line and never ends it holds buffers for nothing); its
    /// session lives on. `nil`: no limit.
    public let incompleteLineTimeout: TimeAmount?
    /// The start of a line that continues in the next read; it holds no newline.
    private var partial: ByteBuffer?
    /// The current line went over the limit: drop bytes until its newline.
    private var discarding = false
    /// Closes the connection when an incomplete line outlives its time.
    private let timer = IncompleteLineTimer()
    /// The connection's handler, when the server put it right behind this one: lines
    /// go to it directly, with no pipeline hop, `NIOAny` box and dynamic cast per line.
    private let next: ConnectionHandler?

    /// A handler that caps lines at `maximumLength` bytes and closes a connection
    /// whose line stays incomplete for `incompleteLineTimeout`.
    public init(maximumLength: Int, incompleteLineTimeout: TimeAmount? = nil) {
        self.maximumLength = maximumLength
        self.incompleteLineTimeout = incompleteLineTimeout
        next = nil
    }

    /// Frames lines for `next`, the handler right behind this one, handing each to it
    /// directly; everything else (activity, read ends, half-closure) still flows
    /// through the pipeline, in the same order relative to the lines.
    init(maximumLength: Int, incompleteLineTimeout: TimeAmount?, next: ConnectionHandler) {
        self.maximumLength = maximumLength
        self.incompleteLineTimeout = incompleteLineTimeout
        self.next = next
    }

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        // The kept start was searched already: only the new bytes can hold its end.
        var searched = 0
        let merged = partial != nil
        if var partial {
            self.partial = nil  // uniquely referenced: the read is appended in place
            searched = partial.readableBytes
            partial.writeBuffer(&buffer)
            buffer = partial
        }
        var ended = false
        while true {
            let view = buffer.readableBytesView
            guard let newline = view[(view.startIndex + searched)...].firstIndex(of: UInt8(ascii: "\n")) else { break }
            searched = 0
            ended = true
            emitLine(through: newline, of: &buffer, context: context)
        }
        if ended { timer.cancel() }  // a line ended: the next one gets its own time
        keepIncompleteLine(&buffer, merged: merged, context: context)
    }

    public func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed { emitLastLine(context: context) }
        context.fireUserInboundEventTriggered(event)
    }

    public func channelInactive(context: ChannelHandlerContext) {
        emitLastLine(context: context)
        context.fireChannelInactive()
    }

    public func handlerRemoved(context: ChannelHandlerContext) {
        timer.cancel()
    }

    /// The line ending at `newline` (an index of `buffer`'s readable bytes).
    private func emitLine(through newline: Int, of buffer: inout ByteBuffer, context: ChannelHandlerContext) {
        let length = newline - buffer.readerIndex
        if discarding {
            discarding = false
            buffer.moveReaderIndex(forwardBy: length + 1)
            return
        }
        var contentLength = length
        if length > 0 && buffer.getInteger(at: newline - 1, as: UInt8.self) == UInt8(ascii: "\r") { contentLength -= 1 }
        if contentLength > maximumLength {
            buffer.moveReaderIndex(forwardBy: length + 1)
            emit(.tooLong, context: context)
            return
        }
        let line = buffer.readSlice(length: length)!
        buffer.moveReaderIndex(forwardBy: 1)
        emit(.line(line), context: context)
    }

    /// What is left of a read after its last newline: kept for the next read, or
    /// dropped once it is over the limit. A rest of the read's own buffer is copied
    /// (the read's buffer is let go); a buffer already ours keeps growing in place,
    /// so a long line sent a byte at a time costs linear time, not a copy per read.
    private func emit(_ frame: LineFrame, context: ChannelHandlerContext) {
        if let next { next.received(frame) } else { context.fireChannelRead(wrapInboundOut(frame)) }
    }

    private func keepIncompleteLine(_ buffer: inout ByteBuffer, merged: Bool, context: ChannelHandlerContext) {
        if buffer.readableBytes > maximumLength + 1 {  // + 1 leaves room for a `\r`
            if !discarding {
                discarding = true
                emit(.tooLong, context: context)
            }
            buffer.moveReaderIndex(forwardBy: buffer.readableBytes)
        }
        if buffer.readableBytes > 0 {
            if merged {
                // The lines before the rest (if any) ended in this read: the rest is at
                // most this read's bytes, moved to the front once.
                buffer.discardReadBytes()
                partial = buffer
            } else {
                var kept = context.channel.allocator.buffer(capacity: buffer.readableBytes)
                kept.writeBuffer(&buffer)
                partial = kept
            }
        }
        guard let incompleteLineTimeout else { return }
        if partial != nil || discarding { timer.start(after: incompleteLineTimeout, context: context) }
    }

    private func emitLastLine(context: ChannelHandlerContext) {
        timer.cancel()
        if let partial, !discarding { emit(.line(partial), context: context) }
        partial = nil
        discarding = false
    }
}

/// The clock of one connection's incomplete line: started when a line begins,
/// cancelled when it ends; when it fires, the connection is closed. Used on the
/// connection's event loop only.
final class IncompleteLineTimer {
    private var task: Scheduled<Void>?

    /// Starts the clock unless it already runs for this line.
    func start(after timeout: TimeAmount, context: ChannelHandlerContext) {
        guard task == nil else { return }
        let channel = context.channel
        task = context.eventLoop.scheduleTask(in: timeout) {
            channel.close(promise: nil)
        }
    }

    func cancel() {
        task?.cancel()
        task = nil
    }

    deinit { task?.cancel() }
}

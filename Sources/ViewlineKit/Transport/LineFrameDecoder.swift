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
/// buffer stays bounded and the connection stays usable.
public struct LineFrameDecoder: ByteToMessageDecoder {
    /// Lines, or a marker for one that was too long.
    public typealias InboundOut = LineFrame

    /// The longest accepted line, in bytes, without its line ending.
    public let maximumLength: Int
    /// How long a line may stay incomplete before the connection is closed (a
    /// client that opens a line and never ends it holds buffers for nothing); its
    /// session lives on. `nil`: no limit.
    public let incompleteLineTimeout: TimeAmount?
    private var discarding = false
    /// How far the current buffer was already searched for a newline.
    private var searched = 0
    /// Closes the connection when an incomplete line outlives its time.
    private let timer = IncompleteLineTimer()

    /// A decoder that caps lines at `maximumLength` bytes and closes a connection
    /// whose line stays incomplete for `incompleteLineTimeout`.
    public init(maximumLength: Int, incompleteLineTimeout: TimeAmount? = nil) {
        self.maximumLength = maximumLength
        self.incompleteLineTimeout = incompleteLineTimeout
    }

    /// Emits every complete line in `buffer`.
    public mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        let state = try decodeOne(context: context, buffer: &buffer)
        if state == .needMoreData, let incompleteLineTimeout {
            if buffer.readableBytes > 0 || discarding {
                timer.start(after: incompleteLineTimeout, context: context)
            } else {
                timer.cancel()
            }
        }
        return state
    }

    private mutating func decodeOne(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        let view = buffer.readableBytesView
        let start = view.startIndex + searched
        guard let newline = view[start...].firstIndex(of: UInt8(ascii: "\n")) else {
            searched = view.count
            if view.count > maximumLength + 1 {  // + 1 leaves room for a `\r`
                if !discarding {
                    discarding = true
                    context.fireChannelRead(wrapInboundOut(.tooLong))
                }
                buffer.moveReaderIndex(forwardBy: view.count)
                searched = 0
            }
            return .needMoreData
        }
        let length = newline - view.startIndex
        searched = 0
        timer.cancel()  // a line ended: the next one gets its own time
        if discarding {
            discarding = false
            buffer.moveReaderIndex(forwardBy: length + 1)
            return .continue
        }
        var contentLength = length
        if length > 0 && view[newline - 1] == UInt8(ascii: "\r") { contentLength -= 1 }
        if contentLength > maximumLength {
            buffer.moveReaderIndex(forwardBy: length + 1)
            context.fireChannelRead(wrapInboundOut(.tooLong))
            return .continue
        }
        let line = buffer.readSlice(length: length)!
        buffer.moveReaderIndex(forwardBy: 1)
        context.fireChannelRead(wrapInboundOut(.line(line)))
        return .continue
    }

    /// At the end of input, a last line without `\n` still counts.
    public mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        timer.cancel()
        while try decodeOne(context: context, buffer: &buffer) == .continue {}
        // A last line without a newline still counts, as with `nc -N`.
        if buffer.readableBytes > 0 {
            if !discarding {
                let line = buffer.readSlice(length: buffer.readableBytes)!
                context.fireChannelRead(wrapInboundOut(.line(line)))
            }
            buffer.moveReaderIndex(forwardBy: buffer.readableBytes)
        }
        return .needMoreData
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

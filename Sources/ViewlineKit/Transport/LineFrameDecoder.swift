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
    private var discarding = false
    /// How far the current buffer was already searched for a newline.
    private var searched = 0

    /// A decoder that caps lines at `maximumLength` bytes.
    public init(maximumLength: Int) {
        self.maximumLength = maximumLength
    }

    /// Emits every complete line in `buffer`.
    public mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
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
        while try decode(context: context, buffer: &buffer) == .continue {}
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

import NIOCore
import NIOWebSocket

/// Turns a WebSocket into the protocol's lines, so a WebSocket connection runs
/// exactly like a TCP one behind it (``ConnectionHandler``, its session, limits).
///
/// Inbound, each text message (its fragments joined) is one line; a message longer
/// than the line limit becomes ``LineFrame/tooLong`` (`line_too_long`, the
/// connection goes on), like an overlong TCP line. Pings are answered, a close is
/// echoed. Outbound, the lines the session writes (`\n`-terminated, possibly several
/// per buffer) go out one text message each; closing the connection sends a close
/// frame first.
final class WebSocketLines: ChannelDuplexHandler {
    typealias InboundIn = WebSocketFrame
    typealias InboundOut = LineFrame
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = WebSocketFrame

    private let maximumLength: Int
    /// The message being assembled from its fragments; `nil` between messages.
    private var message: ByteBuffer?
    private var discarding = false
    private var closeSent = false

    init(maximumLength: Int) {
        self.maximumLength = maximumLength
    }

    // MARK: inbound

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.opcode {
        case .text, .continuation:
            if frame.opcode == .text { message = nil; discarding = false }
            receive(frame, context: context)
        case .binary:
            // The protocol is text: a binary message is refused like a bad frame.
            close(context: context, code: .unacceptableData)
        case .ping:
            var payload = frame.unmaskedData
            let pong = WebSocketFrame(fin: true, opcode: .pong, data: payload.readSlice(length: payload.readableBytes) ?? ByteBuffer())
            context.writeAndFlush(wrapOutboundOut(pong), promise: nil)
        case .connectionClose:
            // Echo the close (RFC 6455 §5.5.1), then hang up: the session lives on.
            close(context: context, code: .normalClosure)
        default:
            break
        }
    }

    private func receive(_ frame: WebSocketFrame, context: ChannelHandlerContext) {
        var data = frame.unmaskedData
        if !discarding {
            let length = (message?.readableBytes ?? 0) + data.readableBytes
            if length > maximumLength {
                discarding = true
                message = nil
            } else if message == nil {
                message = data
            } else {
                message!.writeBuffer(&data)
            }
        }
        guard frame.fin else { return }
        if discarding {
            discarding = false
            context.fireChannelRead(wrapInboundOut(.tooLong))
            return
        }
        guard var line = message else { return }
        message = nil
        // One message, one line; a newline inside it ends a line, as on TCP.
        while let end = line.readableBytesView.firstIndex(of: UInt8(ascii: "\n")) {
            let slice = line.readSlice(length: end - line.readerIndex)!
            line.moveReaderIndex(forwardBy: 1)
            context.fireChannelRead(wrapInboundOut(.line(slice)))
        }
        if line.readableBytes > 0 { context.fireChannelRead(wrapInboundOut(.line(line))) }
    }

    // MARK: outbound

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        var buffer = unwrapOutboundIn(data)
        // Each line is written when the next is found, without a promise; the last one
        // carries the caller's (a pipelined burst is many lines, one promise).
        var line: ByteBuffer?
        while let end = buffer.readableBytesView.firstIndex(of: UInt8(ascii: "\n")) {
            if let line { context.write(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .text, data: line)), promise: nil) }
            line = buffer.readSlice(length: end - buffer.readerIndex)!
            buffer.moveReaderIndex(forwardBy: 1)
        }
        if buffer.readableBytes > 0 {
            if let line { context.write(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .text, data: line)), promise: nil) }
            line = buffer
        }
        if let line {
            context.write(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .text, data: line)), promise: promise)
        } else {
            promise?.succeed()
        }
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        guard mode == .all, !closeSent, context.channel.isActive else {
            context.close(mode: mode, promise: promise)
            return
        }
        // `bye` has been written: a close frame says the same to the WebSocket layer.
        closeSent = true
        var payload = context.channel.allocator.buffer(capacity: 2)
        payload.write(webSocketErrorCode: .normalClosure)
        context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: payload)))
            .whenComplete { _ in context.close(mode: mode, promise: promise) }
    }

    private func close(context: ChannelHandlerContext, code: WebSocketErrorCode) {
        guard !closeSent else { return context.close(promise: nil) }
        closeSent = true
        var payload = context.channel.allocator.buffer(capacity: 2)
        payload.write(webSocketErrorCode: code)
        context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: payload)))
            .whenComplete { _ in context.close(promise: nil) }
    }
}

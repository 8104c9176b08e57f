#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import NIOCore
import NIOWebSocket

/// Turns a WebSocket into the protocol's lines, so a WebSocket connection runs
/// exactly like a TCP one behind it (``ConnectionHandler``, its session, limits).
///
/// Inbound, each text message (its fragments joined) is one line; a message longer
/// than the line limit becomes ``LineFrame/tooLong`` (`line_too_long`, the
/// connection goes on), like an overlong TCP line. Outbound, the lines the session
/// writes (`\n`-terminated, possibly several per buffer) go out one text message
/// each, framed here, all of a write in one buffer; closing the connection sends a
/// close frame first.
///
/// Held to RFC 6455 as a server must: an unmasked client frame, a reserved bit (no
/// extension is negotiated), a reserved opcode, a continuation with no message begun,
/// a new message inside an unfinished one and an invalid close code fail the
/// connection with 1002 (a close reason that is not UTF-8, 1007). Pings are answered
/// within the output budget: one pong at a time (only the latest ping's, as §5.5.3
/// allows), and a client that pings while its backlog is over the budget is cut off.
/// A message or frame left unfinished longer than `--line-timeout` closes the
/// connection (1008), as an incomplete TCP line does.
final class WebSocketLines: ChannelDuplexHandler {
    typealias InboundIn = WebSocketFrame
    typealias InboundOut = LineFrame
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let maximumLength: Int
    /// The message being assembled from its fragments; `nil` between messages.
    private var message: ByteBuffer?
    /// Whether a message is begun and not finished (`message` may be dropped while too long).
    private var inMessage = false
    private var discarding = false
    private var closeSent = false
    /// A pong being written, and the payload of the latest ping that came meanwhile.
    private var pongInFlight = false
    private var nextPong: ByteBuffer?
    /// Pings that came while a pong waited to reach the socket.
    private var pingsWhilePongWaits = 0
    static let pingsWhilePongWaitsLimit = 1024
    /// Goes in front of the frame decoder: sees bytes arrive, closes the connection when
    /// a frame or message stays unfinished past the timeout.
    let inputDeadline: WebSocketInputDeadline

    init(maximumLength: Int, incompleteMessageTimeout: TimeAmount?) {
        self.maximumLength = maximumLength
        self.inputDeadline = WebSocketInputDeadline(timeout: incompleteMessageTimeout)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        framesOut = (try? context.pipeline.syncOperations.context(handlerType: WebSocketFrameEncoder.self)) ?? context
        inputDeadline.expired = { [weak self] in self?.close(context: context, code: .policyViolation) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        inputDeadline.expired = nil
        framesOut = nil
    }

    /// A frame's size on the wire: its header (length and mask key) and payload.
    static func wireSize(_ frame: WebSocketFrame) -> Int {
        let length = Int(frame.length)
        let extended = length < 126 ? 0 : length <= 0xFFFF ? 2 : 8
        return 2 + extended + (frame.maskKey == nil ? 0 : 4) + length
    }

    // MARK: inbound

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        // Every frame counted once its bytes are whole, with whether a message is left unfinished.
        defer { inputDeadline.frameCompleted(bytes: Self.wireSize(frame), message: inMessage) }
        guard !closeSent else { return }
        guard frame.maskKey != nil else { return fail(context: context, code: .protocolError) }  // §5.1
        guard !frame.rsv1, !frame.rsv2, !frame.rsv3 else { return fail(context: context, code: .protocolError) }  // §5.2
        switch frame.opcode {
        case .text:
            guard !inMessage else { return fail(context: context, code: .protocolError) }  // §5.4
            message = nil
            discarding = false
            receive(frame, context: context)
        case .continuation:
            guard inMessage else { return fail(context: context, code: .protocolError) }  // §5.4
            receive(frame, context: context)
        case .binary:
            // The protocol is text: a binary message is refused like a bad frame.
            fail(context: context, code: .unacceptableData)
        case .ping:
            var payload = frame.unmaskedData
            pong(payload.readSlice(length: payload.readableBytes) ?? ByteBuffer(), context: context)
        case .pong:
            break  // unsolicited pongs are allowed (§5.5.3)
        case .connectionClose:
            closeReceived(frame, context: context)
        default:
            fail(context: context, code: .protocolError)  // a reserved opcode (§5.2)
        }
    }

    private func receive(_ frame: WebSocketFrame, context: ChannelHandlerContext) {
        inMessage = !frame.fin
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

    /// A ping's answer, within the output budget.
    private func pong(_ payload: ByteBuffer, context: ChannelHandlerContext) {
        guard context.channel.isWritable else {
            // Pinging a connection that does not read its backlog: cut it off, as a
            // line client that stops reading is.
            return context.close(promise: nil)
        }
        guard !pongInFlight else {
            // Only the latest ping is answered (§5.5.3). A client that pings on while its
            // pong cannot even reach the socket is not reading: cut off, as a line client
            // that stops reading is.
            pingsWhilePongWaits += 1
            if pingsWhilePongWaits > Self.pingsWhilePongWaitsLimit { return context.close(promise: nil) }
            nextPong = payload
            return
        }
        pongInFlight = true
        writeFrame(opcode: .pong, payload: payload, context: context).whenComplete { [weak self] _ in
            guard let self else { return }
            self.pongInFlight = false
            self.pingsWhilePongWaits = 0
            if let next = self.nextPong {
                self.nextPong = nil
                self.pong(next, context: context)
            }
        }
    }

    /// The client's close: echoed with its code (RFC 6455 §5.5.1), then the connection
    /// ends; the session lives on. A malformed close fails the connection.
    private func closeReceived(_ frame: WebSocketFrame, context: ChannelHandlerContext) {
        var payload = frame.unmaskedData
        guard payload.readableBytes != 1 else { return fail(context: context, code: .protocolError) }
        guard let code = payload.readInteger(as: UInt16.self) else { return close(context: context, code: .normalClosure) }
        guard Self.isValidCloseCode(code) else { return fail(context: context, code: .protocolError) }
        guard String(validating: Array(payload.readableBytesView), as: UTF8.self) != nil else {
            return fail(context: context, code: .dataInconsistentWithMessage)
        }
        close(context: context, code: WebSocketErrorCode(codeNumber: Int(code)))
    }

    /// Codes a peer may send in a close frame (RFC 6455 §7.4; IANA's registry).
    static func isValidCloseCode(_ code: UInt16) -> Bool {
        switch code {
        case 1000...1003, 1007...1011, 1012...1014: true
        case 3000...4999: true
        default: false
        }
    }

    // MARK: outbound

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let lines = unwrapOutboundIn(data)
        guard lines.readableBytes > 0 else {
            promise?.succeed()
            return
        }
        // Every line of the write becomes a text frame in one buffer (a frame's header is
        // 2 bytes for a line under 126): one write however many lines a burst holds.
        var frames = context.channel.allocator.buffer(capacity: lines.readableBytes + lines.readableBytes / 8 + 16)
        lines.withUnsafeReadableBytes { bytes in
            var start = 0
            while start < bytes.count {
                let rest = UnsafeRawBufferPointer(rebasing: bytes[start...])
                let newline = memchr(rest.baseAddress!, Int32(UInt8(ascii: "\n")), rest.count)
                let length = newline.map { rest.baseAddress!.distance(to: UnsafeRawPointer($0)) } ?? rest.count
                Self.writeHeader(opcode: .text, length: length, into: &frames)
                frames.writeBytes(UnsafeRawBufferPointer(rebasing: rest[..<length]))
                start += length + 1
            }
        }
        framesOut.write(NIOAny(frames), promise: promise)
    }

    /// Where frames are written: past NIO's `WebSocketFrameEncoder`, which the upgrader
    /// puts in the pipeline and which cannot be removed. This handler frames its own
    /// output (a server's frames are unmasked: a header and the payload), so a burst of
    /// lines is one buffer and one write instead of a frame value, a header buffer and
    /// two writes per line. Without an encoder in the pipeline, this handler's own context.
    private var framesOut: ChannelHandlerContext!

    /// One frame of `payload`, written now (a pong or a close).
    private func writeFrame(opcode: WebSocketOpcode, payload: ByteBuffer, context: ChannelHandlerContext) -> EventLoopFuture<Void> {
        var frame = context.channel.allocator.buffer(capacity: payload.readableBytes + 10)
        Self.writeHeader(opcode: opcode, length: payload.readableBytes, into: &frame)
        frame.writeImmutableBuffer(payload)
        return framesOut.writeAndFlush(NIOAny(frame))
    }

    /// A final frame's header as a server sends it (RFC 6455 §5.2: FIN, the opcode, no
    /// mask, the shortest length encoding).
    static func writeHeader(opcode: WebSocketOpcode, length: Int, into buffer: inout ByteBuffer) {
        buffer.writeInteger(0x80 | UInt8(webSocketOpcode: opcode))
        switch length {
        case ..<126:
            buffer.writeInteger(UInt8(length))
        case ...0xFFFF:
            buffer.writeInteger(UInt8(126))
            buffer.writeInteger(UInt16(length))
        default:
            buffer.writeInteger(UInt8(127))
            buffer.writeInteger(UInt64(length))
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
        writeFrame(opcode: .connectionClose, payload: payload, context: context)
            .whenComplete { _ in context.close(mode: mode, promise: promise) }
    }

    /// A violation of the protocol: a close frame with `code`, then the connection ends.
    private func fail(context: ChannelHandlerContext, code: WebSocketErrorCode) {
        close(context: context, code: code)
    }

    private func close(context: ChannelHandlerContext, code: WebSocketErrorCode) {
        inputDeadline.stop()
        guard !closeSent else { return context.close(promise: nil) }
        closeSent = true
        var payload = context.channel.allocator.buffer(capacity: 2)
        payload.write(webSocketErrorCode: code)
        // At most one close frame, however full the backlog: the connection ends after it,
        // or at once when the client does not take it.
        if !context.channel.isWritable { return context.close(promise: nil) }
        writeFrame(opcode: .connectionClose, payload: payload, context: context)
            .whenComplete { _ in context.close(promise: nil) }
    }
}

/// The bytes side of ``WebSocketLines``' deadline: sits in front of the frame decoder
/// and counts the bytes that arrive against those of the frames decoded. From the
/// first byte after an idle moment, the connection has the timeout to be idle again
/// (every byte part of a finished frame, no message unfinished); otherwise it is closed
/// (1008). Bytes trickling in do not reset it.
final class WebSocketInputDeadline: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let timeout: TimeAmount?
    private var deadline: Scheduled<Void>?
    /// Bytes received and not yet part of a decoded frame.
    private var pending = 0
    /// Whether a message is unfinished.
    private var inMessage = false
    /// What ``WebSocketLines`` does when time is up (a 1008 close).
    var expired: (() -> Void)?

    init(timeout: TimeAmount?) {
        self.timeout = timeout
    }

    func handlerRemoved(context: ChannelHandlerContext) { stop() }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        pending += unwrapInboundIn(data).readableBytes
        if deadline == nil, let timeout {
            deadline = context.eventLoop.scheduleTask(in: timeout) { [weak self] in
                guard let self else { return }
                self.deadline = nil
                self.expired?()
            }
        }
        context.fireChannelRead(data)  // the decoder reports each whole frame meanwhile
        if pending <= 0, !inMessage { stop() }
    }

    /// A frame of `bytes` (header included) was decoded; `message`: whether a message
    /// is unfinished after it.
    func frameCompleted(bytes: Int, message: Bool) {
        pending -= bytes
        inMessage = message
    }

    func stop() {
        deadline?.cancel()
        deadline = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        stop()
        context.fireChannelInactive()
    }
}

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
/// It reads the socket's bytes itself (RFC 6455 §5): each text message (its
/// fragments joined) is one line, unmasked straight into the buffer its line is
/// sliced from — every whole message of a read into one buffer, as a TCP read's lines
/// are slices of it. A message longer than the line limit becomes
/// ``LineFrame/tooLong`` (`line_too_long`, the connection goes on), like an overlong
/// TCP line; a frame far longer (over `maximumFrameLength`) closes the connection
/// (1009). Lines are handed over only while the connection's ``InputBudget`` has room;
/// without it, framing stops, what was read stays as it came (counted), and the socket
/// is not read until the session made room. Outbound, the lines the session writes (`\n`-terminated, possibly several
/// per buffer) go out one text message each, framed here, all of a write in one
/// buffer; closing the connection sends a close frame first.
///
/// Held to RFC 6455 as a server must: an unmasked client frame, a reserved bit (no
/// extension is negotiated), a reserved opcode, a fragmented or long control frame, a
/// continuation with no message begun, a new message inside an unfinished one and an
/// invalid close code fail the connection with 1002 (a text message or a close reason
/// that is not UTF-8, 1007; a binary message, 1003; a message too long to keep is
/// discarded unread, so it is answered `line_too_long` whatever its bytes). Pings are answered within the output budget:
/// one pong at a time (only the latest ping's, as §5.5.3 allows), and a client that
/// pings while its backlog is over the budget is cut off. From the first byte after an
/// idle moment, the connection has `--line-timeout` to be idle again (every frame
/// whole, no message unfinished), or it is closed (1008), as an incomplete TCP line is;
/// bytes trickling in do not reset it.
package final class WebSocketLines: ChannelDuplexHandler, RestartableFramer {
    package typealias InboundIn = ByteBuffer
    package typealias InboundOut = LineFrame
    package typealias OutboundIn = ByteBuffer
    package typealias OutboundOut = ByteBuffer

    private let maximumLength: Int
    private let maximumFrameLength: Int
    private let incompleteMessageTimeout: TimeAmount?
    /// What the connection holds on the way in.
    private let budget: InputBudget
    /// Bytes read and not yet taken as frames: the start of a frame that continues in
    /// the next read, or, while framing is stopped, everything read meanwhile. Never
    /// the bytes of frames already taken.
    private var carried: ByteBuffer?
    /// The message being assembled from its fragments (`nil` while it is discarded).
    private var message: ByteBuffer?
    /// Its length so far, kept while it is discarded too.
    private var messageLength = 0
    /// Whether a message is begun and not finished.
    private var inMessage = false
    private var closeSent = false
    /// Whole messages not yet handed over as lines, unmasked one after another, and
    /// what each is (`pieces` from `nextPiece` on).
    private var pending: ByteBuffer?
    private var pieces: [Piece] = []
    private var nextPiece = 0
    /// Lines are handed over only while the budget has room: without it, framing stops
    /// (see ``InputBudget``) and the socket is not read until the session made room.
    private var stopped = false
    /// The budget has its way to start this framer again (made the first time it stops).
    private var restartMade = false
    private var readWanted = false
    /// A pong being written, and the payload of the latest ping that came meanwhile.
    private var pongInFlight = false
    private var nextPong: ByteBuffer?
    /// Pings that came while a pong waited to reach the socket.
    private var pingsWhilePongWaits = 0
    static let pingsWhilePongWaitsLimit = 1024
    /// Closes the connection when a frame or message stays unfinished too long.
    private var deadline: Scheduled<Void>?

    /// One whole message waiting to be handed over.
    private enum Piece {
        /// A text message: its bytes in `pending` end here (a newline in it ends a line too).
        case text(end: Int)
        /// A message longer than the line limit (it was discarded).
        case tooLong
    }

    /// - Parameters:
    ///   - maximumLength: the longest message taken as a line (the line limit).
    ///   - maximumFrameLength: the longest frame read at all; a longer one closes the connection (1009).
    ///   - incompleteMessageTimeout: how long the connection may hold an unfinished frame or message.
    ///   - budget: what the connection may hold on the way in.
    package init(maximumLength: Int, maximumFrameLength: Int, incompleteMessageTimeout: TimeAmount?, budget: InputBudget = InputBudget()) {
        self.maximumLength = maximumLength
        self.maximumFrameLength = maximumFrameLength
        self.incompleteMessageTimeout = incompleteMessageTimeout
        self.budget = budget
    }

    package func handlerRemoved(context: ChannelHandlerContext) {
        stopDeadline()
        budget.stopRestarting()
    }

    package func channelInactive(context: ChannelHandlerContext) {
        // Nothing more is framed, whatever called this (a close from inside a read
        // included: the rest of that read must not be taken as frames).
        finish()
        context.fireChannelInactive()
    }

    /// The connection is over: no more frames, lines or restarts.
    private func finish() {
        stopDeadline()
        closeSent = true
        stopped = false
        carried = nil
        pending = nil
        message = nil
        pieces.removeAll()
        nextPiece = 0
        budget.framerHolds(0)
    }

    // MARK: inbound

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !closeSent else { return }
        var input = unwrapInboundIn(data)
        let merged = carried != nil
        if var carried {
            self.carried = nil  // uniquely referenced: the read is appended in place
            carried.writeBuffer(&input)
            input = carried
        }
        if deadline == nil, let timeout = incompleteMessageTimeout {
            deadline = context.eventLoop.scheduleTask(in: timeout) { [weak self] in
                guard let self else { return }
                self.deadline = nil
                self.close(context: context, code: .policyViolation)
            }
        }
        if stopped {
            carry(&input, merged: merged, context: context)
            return countHeld()
        }
        takeFrames(of: &input, merged: merged, context: context)
    }

    package func read(context: ChannelHandlerContext) {
        if stopped {
            readWanted = true
        } else {
            context.read()
        }
    }

    /// The frames of `input`, in order, then their messages as lines.
    private func takeFrames(of input: inout ByteBuffer, merged: Bool, context: ChannelHandlerContext) {
        while !closeSent, context.channel.isActive, input.readableBytes > 0 {
            switch Self.frameHeader(in: input, maximumLength: maximumFrameLength) {
            case .incomplete:
                carry(&input, merged: merged, context: context)
                return finishRead(context: context)
            case .invalid(let code):
                return fail(context: context, code: code)
            case .frame(let header):
                if pieces.count - nextPiece >= Self.maximumPendingPieces {
                    // A read of many tiny messages: its lines go on before more frames
                    // are taken, so the list of them stays short; with no room for
                    // them, the rest of the read waits raw, counted.
                    emitPending(context: context)
                    if stopped || closeSent {
                        if !closeSent { carry(&input, merged: merged, context: context) }
                        return countHeld()
                    }
                }
                guard input.readableBytes >= header.size + header.length else {
                    carry(&input, merged: merged, context: context)
                    return finishRead(context: context)
                }
                input.moveReaderIndex(forwardBy: header.size)
                let payload = input.readSlice(length: header.length)!
                receive(header, payload: payload, readAhead: input.readableBytes, context: context)
            }
        }
        finishRead(context: context)
    }

    /// Keeps what is left of `input` for later: only its unread bytes, moved to the front
    /// of a buffer already ours, or copied out of the read's own.
    private func carry(_ input: inout ByteBuffer, merged: Bool, context: ChannelHandlerContext) {
        carried = input.keptRest(owned: merged, allocator: context.channel.allocator)
    }

    /// After a read: its whole messages go on as lines; with nothing left unfinished,
    /// the deadline stops.
    private func finishRead(context: ChannelHandlerContext) {
        emitPending(context: context)
        if carried == nil, !inMessage, pending == nil, !stopped { stopDeadline() }
        countHeld()
    }

    private func countHeld() {
        budget.framerHolds(
            (carried?.capacity ?? 0) + (message?.capacity ?? 0) + (pending?.capacity ?? 0)
                + pieces.capacity * MemoryLayout<Piece>.stride)
    }

    /// Framing goes on after the session made room (on the event loop).
    func restartFraming(context: ChannelHandlerContext) {
        guard stopped, !closeSent, context.channel.isActive else { return }
        stopped = false
        emitPending(context: context)
        if !stopped, var input = carried {
            carried = nil
            takeFrames(of: &input, merged: true, context: context)
        } else {
            finishRead(context: context)
        }
        if !stopped, readWanted {
            readWanted = false
            context.read()
        }
    }

    /// One frame; `readAhead`: the bytes of this read after it (more messages, likely).
    private func receive(_ header: FrameHeader, payload: ByteBuffer, readAhead: Int, context: ChannelHandlerContext) {
        switch header.opcode {
        case .text:
            guard !inMessage else { return fail(context: context, code: .protocolError) }  // §5.4
            if header.fin, header.length <= maximumLength {
                // The common case: a whole message in one frame joins this read's lines.
                if pending == nil {
                    pending = context.channel.allocator.buffer(capacity: payload.readableBytes + readAhead)
                }
                let start = pending!.writerIndex
                Self.unmask(payload, key: header.maskKey, into: &pending!)
                return addText(from: start, context: context)
            }
            inMessage = true
            messageLength = 0
            message = context.channel.allocator.buffer(capacity: min(header.length, maximumLength))
            append(header, payload, context: context)
        case .continuation:
            guard inMessage else { return fail(context: context, code: .protocolError) }  // §5.4
            append(header, payload, context: context)
        case .binary:
            // The protocol is text: a binary message is refused like a bad frame.
            fail(context: context, code: .unacceptableData)
        case .ping:
            var unmaskedPayload = context.channel.allocator.buffer(capacity: payload.readableBytes)
            Self.unmask(payload, key: header.maskKey, into: &unmaskedPayload)
            pong(unmaskedPayload, context: context)
        case .pong:
            break  // unsolicited pongs are allowed (§5.5.3)
        case .connectionClose:
            emitPending(context: context)  // what came before the close is answered first
            var unmaskedPayload = context.channel.allocator.buffer(capacity: payload.readableBytes)
            Self.unmask(payload, key: header.maskKey, into: &unmaskedPayload)
            closeReceived(unmaskedPayload, context: context)
        default:
            fail(context: context, code: .protocolError)  // a reserved opcode (§5.2)
        }
    }

    /// A fragment of a message begun earlier (or a message too long for this read's lines).
    private func append(_ header: FrameHeader, _ payload: ByteBuffer, context: ChannelHandlerContext) {
        messageLength += header.length
        if messageLength > maximumLength {
            message = nil  // discarded from here to its last fragment
        } else if message != nil {
            Self.unmask(payload, key: header.maskKey, into: &message!)
        }
        guard header.fin else { return }
        inMessage = false
        guard let whole = message else {
            pieces.append(.tooLong)
            return
        }
        message = nil
        if pending == nil { pending = context.channel.allocator.buffer(capacity: whole.readableBytes) }
        let start = pending!.writerIndex
        pending!.writeImmutableBuffer(whole)
        addText(from: start, context: context)
    }

    /// The text message just written to `pending` from `start` on: one piece, or, when it
    /// is not UTF-8, the connection fails (1007, RFC 6455 §8.1).
    private func addText(from start: Int, context: ChannelHandlerContext) {
        guard let text = pending else { return }
        let end = text.writerIndex
        guard Self.isUTF8(text, from: start, to: end) else {
            return fail(context: context, code: .dataInconsistentWithMessage)
        }
        guard end > start else { return }  // an empty message is no line
        pieces.append(.text(end: end))
    }

    /// Messages taken from a read before their lines go on: a read of tiny messages is
    /// handed over in batches, so their list costs at most this many entries.
    static let maximumPendingPieces = 1024

    /// Whole messages, as lines, in order, while the budget has room; framing stops
    /// when it has none.
    private func emitPending(context: ChannelHandlerContext) {
        while !closeSent, nextPiece < pieces.count {
            guard budget.hasRoom || !budget.stopFraming(self, in: context, restartMade: &restartMade) else {
                stopped = true
                return
            }
            switch pieces[nextPiece] {
            case .tooLong:
                nextPiece += 1
                context.fireChannelRead(wrapInboundOut(.tooLong))
            case .text(let end):
                // A newline inside a message ends a line, as on TCP; an empty rest is no line.
                guard var text = pending, text.writerIndex >= end else {
                    // The buffer its pieces point into is gone (the connection ended).
                    return finish()
                }
                pending = nil  // uniquely referenced while it is read
                text.skipBlankLines(before: end)  // no commands: never queued
                let start = text.readerIndex
                guard start < end else {
                    pending = text
                    nextPiece += 1
                    continue
                }
                let newline = text.withUnsafeReadableBytes { bytes in
                    memchr(bytes.baseAddress!, Int32(UInt8(ascii: "\n")), end - start)
                        .map { bytes.baseAddress!.distance(to: UnsafeRawPointer($0)) }
                }
                let line: ByteBuffer
                if let newline, let slice = text.readSlice(length: newline) {
                    line = slice
                    text.moveReaderIndex(forwardBy: 1)
                    if text.readerIndex == end { nextPiece += 1 }
                } else if let slice = text.readSlice(length: end - start) {
                    line = slice
                    nextPiece += 1
                } else {
                    return finish()
                }
                pending = text
                // A blank line is no command: skipped here, never queued or run.
                if line.isBlankLine(endingAt: line.writerIndex) { continue }
                context.fireChannelRead(wrapInboundOut(.line(line)))
            }
        }
        guard !closeSent else { return }
        pending = nil
        pieces.removeAll(keepingCapacity: true)
        nextPiece = 0
    }

    private func stopDeadline() {
        deadline?.cancel()
        deadline = nil
    }

    // MARK: control frames

    /// A ping's answer, within the output budget.
    private func pong(_ payload: ByteBuffer, context: ChannelHandlerContext) {
        guard context.channel.isWritable else {
            // Pinging a connection that does not read its backlog: cut it off, as a
            // line client that stops reading is.
            finish()
            return context.close(promise: nil)
        }
        guard !pongInFlight else {
            // Only the latest ping is answered (§5.5.3). A client that pings on while its
            // pong cannot even reach the socket is not reading: cut off, as a line client
            // that stops reading is.
            pingsWhilePongWaits += 1
            if pingsWhilePongWaits > Self.pingsWhilePongWaitsLimit {
                finish()
                return context.close(promise: nil)
            }
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
    private func closeReceived(_ payload: ByteBuffer, context: ChannelHandlerContext) {
        var payload = payload
        guard payload.readableBytes != 1 else { return fail(context: context, code: .protocolError) }
        guard let code = payload.readInteger(as: UInt16.self) else { return close(context: context, code: .normalClosure) }
        guard Self.isValidCloseCode(code) else { return fail(context: context, code: .protocolError) }
        guard String(validating: Array(payload.readableBytesView), as: UTF8.self) != nil else {
            return fail(context: context, code: .dataInconsistentWithMessage)
        }
        close(context: context, code: WebSocketErrorCode(codeNumber: Int(code)))
    }

    // MARK: outbound

    package func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let lines = unwrapOutboundIn(data)
        guard lines.readableBytes > 0 else {
            // A marker (``OutboundLines``' "everything before me is written"): it keeps
            // its place behind the frames already queued.
            context.write(data, promise: promise)
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
        context.write(wrapOutboundOut(frames), promise: promise)
    }

    /// One frame of `payload`, written now (a pong or a close).
    private func writeFrame(opcode: WebSocketOpcode, payload: ByteBuffer, context: ChannelHandlerContext) -> EventLoopFuture<Void> {
        var frame = context.channel.allocator.buffer(capacity: payload.readableBytes + 10)
        Self.writeHeader(opcode: opcode, length: payload.readableBytes, into: &frame)
        frame.writeImmutableBuffer(payload)
        return context.writeAndFlush(wrapOutboundOut(frame))
    }

    package func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        guard mode == .all, !closeSent, context.channel.isActive else {
            context.close(mode: mode, promise: promise)
            return
        }
        // `bye` has been written: a close frame says the same to the WebSocket layer.
        closeSent = true
        stopDeadline()
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
        stopDeadline()
        carried = nil
        message = nil
        pending = nil
        budget.framerHolds(0)
        guard !closeSent else { return context.close(promise: nil) }
        closeSent = true
        var payload = context.channel.allocator.buffer(capacity: 2)
        payload.write(webSocketErrorCode: code)
        // At most one close frame, however full the backlog: the connection ends after it,
        // or at once when the client does not take it.
        if !context.channel.isWritable { return context.close(promise: nil) }
        // A client that stops reading does not keep it open: the close frame has the
        // same deadline as any other closing connection's last bytes.
        let deadline = context.eventLoop.scheduleTask(in: .closingDeadline) { context.close(promise: nil) }
        writeFrame(opcode: .connectionClose, payload: payload, context: context)
            .whenComplete { _ in
                deadline.cancel()
                context.close(promise: nil)
            }
    }
}

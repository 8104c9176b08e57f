import NIOCore
import NIOHTTP1

/// The limits of an HTTP connection (the web listener before a WebSocket upgrade, the
/// operations listener), the way nginx bounds one:
///
/// - **A place from `accept`.** The connection holds one of `--max-clients` and of its
///   address's `--max-clients-per-address` from the moment it opens (refused places
///   close at once), so idle or half-sent requests cannot take every descriptor.
/// - **Deadlines that bytes do not reset.** A request's head (and its body, read and
///   dropped) must arrive whole within the timeout from the moment the connection is
///   ready for it (opened, or its previous response written), however slowly it
///   trickles in; a keep-alive connection that sends nothing for as long is closed too.
/// - **One response at a time.** No request is handed on while the previous response
///   has not reached the socket, or while the connection's backlog is over the
///   high-water mark (`--max-output-bytes`: the client is not reading): pipelined
///   requests cost at most one response held (NIO's pipelining handler reads no more
///   meanwhile, and keeps at most a few request heads), and a response that does not
///   reach the socket within the timeout closes the connection. A backlog counts against its address's and the
///   server's output budgets (`--max-output-bytes-per-address`, `-total`) like a line
///   connection's: one that passes either is closed at once.
///
/// Removed at a WebSocket upgrade, giving its place back: the protocol connection
/// that follows takes a place of its own and lives by the line protocol's limits.
///
/// Behind a trusted proxy the place is the client's its PROXY protocol header names;
/// a trusted proxy's connection without one (HTTP mode, many clients' requests over
/// it) counts against `--max-clients` only, since its clients are known request by
/// request: each WebSocket it upgrades is capped per client (its forwarding header's).
final class HTTPConnectionGuard: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    /// Where places are held (the server's connection registry) and its limits.
    struct Admission: Sendable {
        var registry: ConnectionRegistry
        var limit: Int
        var perAddress: Int
        /// The output budgets every backlog counts against (`nil`: none).
        var counts: ConnectionCounts? = nil
    }

    private let admission: Admission
    private let timeout: TimeAmount?
    /// The client's address as a trusted proxy said it (`nil`: none is trusted).
    private let peer: PeerAddress?
    private let trusted: TrustedProxies
    /// The address whose place this connection holds; `nil` before or after.
    private var place: String?
    /// This connection's backlog in the output budgets, while it has one.
    private var backlogID: Int?
    /// Request parts held back while the backlog is over the budget, in order.
    private var held: [HTTPServerRequestPart] = []
    private var deadline: Scheduled<Void>?
    /// Between a request's head and its end: the deadline is the request's.
    private var readingRequest = false
    /// Responses handed to the pipeline whose last part has not reached the socket yet.
    private var unwritten = 0

    init(admission: Admission, timeout: TimeAmount?, peer: PeerAddress? = nil, trusted: TrustedProxies = TrustedProxies()) {
        self.admission = admission
        self.timeout = timeout
        self.peer = peer
        self.trusted = trusted
    }

    // MARK: place

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { opened(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        opened(context: context)
        context.fireChannelActive()
    }

    private func opened(context: ChannelHandlerContext) {
        guard place == nil else { return }
        let client = peer?.current ?? context.channel.remoteAddress
        let address = client?.clientKey ?? ""
        let perAddress = trusted.contains(client) ? 0 : admission.perAddress
        if admission.registry.reserve(address: address, limit: admission.limit, perAddress: perAddress) != nil {
            // No place: nothing is read or written; the descriptor goes at once.
            context.close(promise: nil)
            return
        }
        place = address
        armDeadline(context: context)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        letGo()
    }

    func channelInactive(context: ChannelHandlerContext) {
        letGo()
        context.fireChannelInactive()
    }

    private func letGo() {
        deadline?.cancel()
        deadline = nil
        held = []
        if let backlogID {
            admission.counts?.backlog(of: backlogID, bytes: nil)
            self.backlogID = nil
        }
        if let place {
            admission.registry.release(address: place)
            self.place = nil
        }
    }

    // MARK: requests in

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = unwrapInboundIn(data)
        // Neither listener takes a request body: it is dropped as it comes, never held
        // (a body streamed behind a full backlog grew without limit).
        if case .body = part { return }
        guard held.isEmpty, unwritten == 0, context.channel.isWritable else {
            // A response still on its way, or over the budget: held, and the output
            // must drain within the timeout.
            if held.isEmpty { armDeadline(context: context) }
            held.append(part)
            return
        }
        pass(part, context: context)
    }

    /// Hands on the requests held while output was on its way, as far as it may go.
    private func passHeld(context: ChannelHandlerContext) {
        while !held.isEmpty, unwritten == 0, context.channel.isWritable, context.channel.isActive {
            pass(held.removeFirst(), context: context)
        }
    }

    private func pass(_ part: HTTPServerRequestPart, context: ChannelHandlerContext) {
        switch part {
        case .head:
            readingRequest = true
        case .body:
            break
        case .end:
            // Answering now: no deadline until the response is written.
            readingRequest = false
            deadline?.cancel()
            deadline = nil
        }
        context.fireChannelRead(wrapInboundOut(part))
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        countBacklog(context: context)
        if context.channel.isWritable {
            passHeld(context: context)
        } else if deadline == nil {
            // Over the budget mid-response: the backlog must drain within the timeout.
            armDeadline(context: context)
        }
        context.fireChannelWritabilityChanged()
    }

    // MARK: responses out

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        defer { if !context.channel.isWritable { countBacklog(context: context) } }
        guard case .end = unwrapOutboundIn(data) else { return context.write(data, promise: promise) }
        // Once the response is handed to the socket, the connection is ready for the next
        // request: its head has the whole timeout to arrive, and one held meanwhile goes on.
        // Until then, the response must reach the socket within the timeout.
        unwritten += 1
        armDeadline(context: context)
        let written = promise ?? context.eventLoop.makePromise()
        written.futureResult.whenComplete { [weak self] result in
            guard let self else { return }
            self.unwritten -= 1
            guard case .success = result, self.place != nil else { return }
            if !self.readingRequest { self.armDeadline(context: context) }
            self.passHeld(context: context)
        }
        context.write(data, promise: written)
    }

    /// Tells the output budgets what the connection holds now: nothing while the socket
    /// keeps up, its buffered bytes while it does not; past its address's or the
    /// server's budget, the connection is closed.
    private func countBacklog(context: ChannelHandlerContext) {
        guard let counts = admission.counts, let place else { return }
        guard !context.channel.isWritable,
            let bytes = try? context.channel.syncOptions?.getOption(ChannelOptions.bufferedWritableBytes)
        else {
            if let backlogID {
                counts.backlog(of: backlogID, bytes: nil)
                self.backlogID = nil
            }
            return
        }
        let id = backlogID ?? counts.makeBacklogID()
        backlogID = id
        if counts.backlog(of: id, address: place, bytes: bytes) != nil {
            counts.backlog(of: id, bytes: nil)
            backlogID = nil
            context.close(promise: nil)
        }
    }

    private func armDeadline(context: ChannelHandlerContext) {
        deadline?.cancel()
        guard let timeout else { return }
        deadline = context.eventLoop.scheduleTask(in: timeout) { [weak self] in
            self?.deadline = nil
            context.close(promise: nil)
        }
    }
}

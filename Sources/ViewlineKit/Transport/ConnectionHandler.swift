import NIOCore

/// Admits a connection when its channel becomes active: gives it a session on this
/// loop and says `welcome` (or refuses it when the server is full), making the
/// ``ClientConnection`` that receives its lines, the end of input and the disconnect,
/// in order. No task and no stream per connection: an idle client costs its channel,
/// its buffers and its session.
///
/// Over TCP it is the framer's ``LineAcceptor`` and is let go once it answered: the
/// ``LineFrameHandler`` ends the pipeline and hands the connection everything
/// directly. Behind a WebSocket's framing it is the pipeline's last handler, passing
/// what comes on to the connection.
final class ConnectionHandler: ChannelInboundHandler, LineAcceptor {
    typealias InboundIn = LineFrame

    private unowned let server: ViewlineServer
    private let transport: ServerMetrics.Transport
    /// What the connection holds on the way in, shared with its framer.
    private let budget: InputBudget
    /// Who the client is (a trusted proxy may have said), read when it is admitted.
    private let peer: PeerAddress?
    /// Behind a WebSocket: the connection it passes everything to. Read for every line,
    /// only on the channel's loop (not checked for exclusive access at run time, as the
    /// session's per-command fields are not).
    @exclusivity(unchecked) private var connection: ClientConnection?
    private var accepted = false

    init(server: ViewlineServer, transport: ServerMetrics.Transport, budget: InputBudget, peer: PeerAddress? = nil) {
        self.server = server
        self.transport = transport
        self.budget = budget
        self.peer = peer
    }

    func accept(_ channel: any Channel) -> (any LineReceiver)? {
        admit(channel)
    }

    private func admit(_ channel: any Channel) -> ClientConnection? {
        guard !accepted else { return connection }
        accepted = true
        let address = peer?.current ?? channel.remoteAddress
        return server.accept(channel, peer: address, transport: transport, budget: budget)
    }

    // MARK: As the pipeline's last handler (WebSocket)

    func channelActive(context: ChannelHandlerContext) {
        if !accepted { connection = admit(context.channel) }
        context.fireChannelActive()
    }

    /// Added to a channel already open: a WebSocket once its upgrade is done.
    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive, !accepted { connection = admit(context.channel) }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        connection?.received(unwrapInboundIn(data))
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        connection?.readComplete()
        context.fireChannelReadComplete()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed { connection?.inputEnded() }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        connection?.channelInactive()
        connection = nil
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A reset, a TLS failure, a framing error: the connection is over.
        context.close(promise: nil)
    }
}

import NIOCore

/// The last handler of a connection's pipeline, on its event loop: on activation it
/// gives the connection a session on this loop and says `welcome` (or refuses it
/// when the server is full); then it hands every framed line, the end of input and
/// the disconnect to the connection's ``ClientConnection`` in order. No task and no
/// stream per connection: an idle client costs its channel, its buffers and its
/// session.
final class ConnectionHandler: ChannelInboundHandler, LineReceiver {
    typealias InboundIn = LineFrame

    private unowned let server: ViewlineServer
    private let transport: ServerMetrics.Transport
    /// What the connection holds on the way in, shared with its framer.
    private let budget: InputBudget
    /// Who the client is (a trusted proxy may have said), read when it is admitted.
    private let peer: PeerAddress?
    /// Read for every line, only on the channel's loop (not checked for exclusive
    /// access at run time, as the session's per-command fields are not).
    @exclusivity(unchecked) private var connection: ClientConnection?

    init(server: ViewlineServer, transport: ServerMetrics.Transport, budget: InputBudget, peer: PeerAddress? = nil) {
        self.server = server
        self.transport = transport
        self.budget = budget
        self.peer = peer
    }

    func channelActive(context: ChannelHandlerContext) {
        if connection == nil { accept(context) }
        context.fireChannelActive()
    }

    /// Added to a channel already open: a WebSocket once its upgrade is done.
    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive, connection == nil { accept(context) }
    }

    private func accept(_ context: ChannelHandlerContext) {
        let address = peer?.current ?? context.channel.remoteAddress
        connection = server.accept(context.channel, peer: address, transport: transport, budget: budget)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        received(unwrapInboundIn(data))
    }

    /// A line (or an overlong one) from the framing in front of this handler.
    func received(_ frame: LineFrame) {
        connection?.receive(.frame(frame))
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        connection?.readComplete()
        context.fireChannelReadComplete()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed {
            connection?.receive(.inputEnded)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        connection?.receive(.disconnected)
        connection = nil
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A reset, a TLS failure, a framing error: the connection is over.
        context.close(promise: nil)
    }
}

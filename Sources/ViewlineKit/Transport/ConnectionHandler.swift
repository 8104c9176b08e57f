import NIOCore

/// The end of a connection's pipeline, on its event loop: on activation it gives the
/// connection a session on this loop and says `welcome` (or refuses it when the
/// server is full); then it hands every framed line, the end of input and the
/// disconnect to the connection's ``ClientConnection`` in order. No task and no
/// stream per connection: an idle client costs its channel, its buffers and its
/// session.
///
/// Over TCP it is not a handler in the pipeline: the ``LineFrameHandler`` ends the
/// pipeline and tells it everything directly (``LineReceiver``), so a connection
/// holds no handler context for it. Behind a WebSocket's framing it is the last
/// handler.
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

    // MARK: As the framer's receiver

    func channelActive(_ channel: any Channel) {
        if connection == nil { accept(channel) }
    }

    /// A line (or an overlong one) from the framing in front of this handler.
    func received(_ frame: LineFrame) {
        connection?.receive(.frame(frame))
    }

    func readComplete() {
        connection?.readComplete()
    }

    func inputEnded() {
        connection?.receive(.inputEnded)
    }

    func channelInactive() {
        connection?.outbound.closed()
        connection?.receive(.disconnected)
        connection = nil
    }

    private func accept(_ channel: any Channel) {
        let address = peer?.current ?? channel.remoteAddress
        connection = server.accept(channel, peer: address, transport: transport, budget: budget)
    }

    // MARK: As the pipeline's last handler

    func channelActive(context: ChannelHandlerContext) {
        channelActive(context.channel)
        context.fireChannelActive()
    }

    /// Added to a channel already open: a WebSocket once its upgrade is done.
    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { channelActive(context.channel) }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        received(unwrapInboundIn(data))
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        readComplete()
        context.fireChannelReadComplete()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed { inputEnded() }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        channelInactive()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A reset, a TLS failure, a framing error: the connection is over.
        context.close(promise: nil)
    }
}

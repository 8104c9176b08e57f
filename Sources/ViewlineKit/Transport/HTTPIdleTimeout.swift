import NIOCore

/// Closes an HTTP connection (web page or operations listener, before any WebSocket
/// upgrade) that has sent nothing for a while: an idle or half-sent request holds a
/// file descriptor and gives nothing back, so a client cannot pile them up. Upgraded
/// connections drop it and live by the line protocol's own limits.
final class HTTPIdleTimeout: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    /// The pair to add in front of an HTTP pipeline: NIO's idle detector and this.
    static func handlers(after timeout: TimeAmount) -> [any RemovableChannelHandler] {
        [IdleStateHandler(readTimeout: timeout), HTTPIdleTimeout()]
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let idle = event as? IdleStateHandler.IdleStateEvent, idle == .read {
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }
}

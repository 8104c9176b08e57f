import NIOCore
import NIOHTTP1

/// The operations listener (``ServerConfiguration/metricsPort``): `GET /metrics`
/// (Prometheus text format), `GET /healthz` (200 while every event loop runs a
/// task within a second) and `GET /readyz` (200 while the node takes sessions and
/// its database answers; 503 with a one-line reason otherwise).
final class OperationsHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private unowned let server: ViewlineServer
    private var request = HTTPRequestAssembly()

    init(server: ViewlineServer) {
        self.server = server
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if let head = request.complete(with: unwrapInboundIn(data)) { respond(to: head, context: context) }
    }

    private func respond(to head: HTTPRequestHead, context: ChannelHandlerContext) {
        let path = head.uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? "/"
        let text = "text/plain; charset=utf-8"
        guard head.method == .GET || head.method == .HEAD else {
            return HTTPReply.send(.methodNotAllowed, ByteBuffer(string: "only GET\n"), type: text, to: head, context: context)
        }
        switch path {
        case "/metrics":
            let body = server.metricsExposition()
            HTTPReply.send(.ok, ByteBuffer(bytes: body), type: "text/plain; version=0.0.4; charset=utf-8", to: head, context: context)
        case "/healthz":
            let loop = context.eventLoop
            server.eventLoopsAnswer(within: .seconds(1)).hop(to: loop).whenComplete { result in
                let answered = (try? result.get()) ?? false
                HTTPReply.send(
                    answered ? .ok : .serviceUnavailable,
                    ByteBuffer(string: answered ? "ok\n" : "an event loop did not run a task within 1 s\n"),
                    type: text, to: head, context: context)
            }
        case "/readyz":
            let reason = server.notReadyReason()
            HTTPReply.send(
                reason == nil ? .ok : .serviceUnavailable, ByteBuffer(string: (reason ?? "ready") + "\n"), type: text, to: head, context: context)
        default:
            HTTPReply.send(.notFound, ByteBuffer(string: "not found: /metrics, /healthz, /readyz\n"), type: text, to: head, context: context)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}

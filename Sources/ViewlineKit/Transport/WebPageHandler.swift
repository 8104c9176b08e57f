import NIOCore
import NIOHTTP1
import NIOWebSocket

/// The web listener's HTTP side: serves the page (`/`, its script and style, all
/// from the binary) and refuses what it does not serve. `GET /ws` reaches it only
/// when the WebSocket upgrade was refused: a foreign `Origin` gets 403.
final class WebPageHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let origins: WebOrigins
    private var request = HTTPRequestAssembly()

    init(origins: WebOrigins) {
        self.origins = origins
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if let head = request.complete(with: unwrapInboundIn(data)) { respond(to: head, context: context) }
    }

    private func respond(to head: HTTPRequestHead, context: ChannelHandlerContext) {
        let path = head.uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? "/"
        guard head.method == .GET || head.method == .HEAD else {
            return send(.methodNotAllowed, "only GET\n", type: "text/plain; charset=utf-8", head: head, context: context,
                        extra: [("Allow", "GET, HEAD")])
        }
        if path == "/ws" {
            if !origins.allows(head) {
                return send(.forbidden, "cross-origin WebSocket refused\n", type: "text/plain; charset=utf-8", head: head, context: context)
            }
            return send(.badRequest, "a WebSocket upgrade is expected here\n", type: "text/plain; charset=utf-8", head: head, context: context)
        }
        if path == "/favicon.ico" {
            return send(.noContent, "", type: "image/x-icon", head: head, context: context, extra: [("Cache-Control", "max-age=86400")])
        }
        guard let asset = WebAssets.asset(at: path) else {
            return send(.notFound, "not found\n", type: "text/plain; charset=utf-8", head: head, context: context)
        }
        send(.ok, asset.body, type: asset.contentType, head: head, context: context, extra: [("Cache-Control", asset.cacheControl)])
    }

    private func send(
        _ status: HTTPResponseStatus, _ body: String, type: String, head: HTTPRequestHead, context: ChannelHandlerContext,
        extra: [(String, String)] = []
    ) {
        HTTPReply.send(status, ByteBuffer(string: body), type: type, to: head, context: context, headers: securityHeaders + extra)
    }

    /// On every response: scripts and styles only from this origin (no inline code),
    /// sockets only to it and to the WebSocket endpoints of the origins `--web-origin`
    /// lists (a cluster's other nodes, which `moved` may send the page to), nothing
    /// framed, nothing sniffed, no referrer.
    var securityHeaders: [(String, String)] { Self.securityHeaders(connectingTo: origins.allowed) }

    static func securityHeaders(connectingTo allowed: Set<String>) -> [(String, String)] {
        let sockets = allowed.sorted().compactMap { origin -> String? in
            if origin.hasPrefix("https://") { return "wss://" + origin.dropFirst("https://".count) }
            if origin.hasPrefix("http://") { return "ws://" + origin.dropFirst("http://".count) }
            return nil
        }
        return [
            ("Content-Security-Policy",
             "default-src 'none'; script-src 'self'; style-src 'self'; connect-src \((["'self'"] + sockets).joined(separator: " ")); img-src 'self'; "
                + "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"),
            ("X-Content-Type-Options", "nosniff"),
            ("Referrer-Policy", "no-referrer"),
            ("X-Frame-Options", "DENY"),
            ("Cross-Origin-Opener-Policy", "same-origin"),
        ]
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A refused upgrade (a foreign Origin, another path) is reported as an error,
        // then the request comes here to be answered (403): not a reason to hang up.
        if error is NIOWebSocketUpgradeError { return }
        context.close(promise: nil)
    }
}

/// Which pages may open a WebSocket: the page's own origin (the request's `Host`,
/// over the listener's scheme) and those listed with `--web-origin`. A request with
/// no `Origin` (not a browser) is allowed: only browsers send cookies and ambient
/// credentials across sites, and the protocol uses none.
struct WebOrigins: Sendable {
    var scheme: String
    var allowed: Set<String>

    func allows(_ head: HTTPRequestHead) -> Bool {
        guard let origin = head.headers.first(name: "Origin") else { return true }
        if allowed.contains(origin) { return true }
        guard let host = head.headers.first(name: "Host") else { return false }
        return origin == "\(scheme)://\(host)"
    }
}

import NIOCore
import NIOHTTP1
import NIOWebSocket

/// The web listener's HTTP side: serves the page (`/`, its script and style, all
/// from the binary; on a server with admin commands the inspector at `/inspect`) and refuses what it does not serve. `GET /ws` reaches it only
/// when the WebSocket upgrade was refused: a foreign `Origin` gets 403.
final class WebPageHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let origins: WebOrigins
    /// Whether `/inspect` is served (a server with admin commands).
    private let inspector: Bool
    private var request = HTTPRequestAssembly()

    init(origins: WebOrigins, inspector: Bool) {
        self.origins = origins
        self.inspector = inspector
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if let head = request.complete(with: unwrapInboundIn(data)) { respond(to: head, context: context) }
    }

    private func respond(to head: HTTPRequestHead, context: ChannelHandlerContext) {
        let path = head.uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? "/"
        guard origins.acceptsHost(head) else {
            // A name this listener does not answer to (DNS rebinding): nothing is served.
            return send(
                .misdirectedRequest, "unknown host: use this server's address or a --web-host-name\n",
                type: "text/plain; charset=utf-8", head: head, context: context)
        }
        guard head.method == .GET || head.method == .HEAD else {
            return send(
                .methodNotAllowed, "only GET\n", type: "text/plain; charset=utf-8", head: head, context: context,
                extra: [("Allow", "GET, HEAD")])
        }
        if path == "/ws" {
            if !origins.allows(head, local: context.channel.localAddress) {
                return send(.forbidden, "cross-origin WebSocket refused\n", type: "text/plain; charset=utf-8", head: head, context: context)
            }
            return send(.badRequest, "a WebSocket upgrade is expected here\n", type: "text/plain; charset=utf-8", head: head, context: context)
        }
        if path == "/favicon.ico" {
            return send(.noContent, "", type: "image/x-icon", head: head, context: context, extra: [("Cache-Control", "max-age=86400")])
        }
        guard let asset = WebAssets.asset(at: path, inspector: inspector) else {
            return send(.notFound, "not found\n", type: "text/plain; charset=utf-8", head: head, context: context)
        }
        HTTPReply.send(
            .ok, asset.body, type: asset.contentType, to: head, context: context,
            headers: securityHeaders + [("Cache-Control", asset.cacheControl)])
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
            (
                "Content-Security-Policy",
                "default-src 'none'; script-src 'self'; style-src 'self'; connect-src \((["'self'"] + sockets).joined(separator: " ")); img-src 'self'; "
                    + "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
            ),
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

/// Which requests the web listener answers, and which pages may open its WebSocket.
///
/// **Host** (DNS rebinding): a request is answered only when its `Host` names this
/// listener: an IP address, `localhost`, or a name given with `--web-host-name`.
/// A page on `evil.test` whose name was rebound to this address sends
/// `Host: evil.test` and gets 421, so it can neither read the page nor open a socket.
///
/// **Origin**: a WebSocket may be opened by a page whose origin is listed with
/// `--web-origin`, or whose origin is this listener itself: its scheme and port, and
/// `localhost` (over loopback only), a `--web-host-name`, or the very IP address the connection came in on
/// (a page on `http://127.0.0.2:P` or `http://203.0.113.7:P` is another site, even on
/// the same port); never because the `Origin` matches the request's own `Host`, which
/// the client chose. A request with no `Origin` (not a browser) is allowed: only
/// browsers send ambient credentials across sites, and the protocol uses none.
struct WebOrigins: Sendable {
    var scheme: String
    var allowed: Set<String>
    /// Names besides IP addresses and `localhost` this listener answers to, lowercased.
    var hostNames: Set<String> = []

    init(scheme: String, allowed: Set<String>, hostNames: [String] = []) {
        self.scheme = scheme
        self.allowed = allowed
        self.hostNames = Set(hostNames.map { $0.lowercased() })
    }

    /// Whether `Host` (HTTP/1.0 may have none) names this listener.
    func acceptsHost(_ head: HTTPRequestHead) -> Bool {
        guard let host = head.headers.first(name: "Host") else { return head.version.major == 1 && head.version.minor == 0 }
        guard head.headers[canonicalForm: "Host"].count == 1, let name = Self.hostName(host) else { return false }
        return isOwnName(name)
    }

    /// Whether the request, which came in on `local` (the listener's address as the
    /// client reached it), may open the WebSocket.
    func allows(_ head: HTTPRequestHead, local: SocketAddress?) -> Bool {
        guard let origin = head.headers.first(name: "Origin") else { return true }
        if allowed.contains(origin) { return true }
        let prefix = scheme + "://"
        guard origin.lowercased().hasPrefix(prefix), let local, let port = local.port else { return false }
        let authority = String(origin.dropFirst(prefix.count))
        guard let name = Self.hostName(authority) else { return false }
        if Self.isIPAddress(name) {
            guard Self.sameAddress(name, local) else { return false }
        } else if name == "localhost" {
            // A page on `localhost` is on the visitor's own machine: this listener's
            // only when the connection came in over loopback too.
            guard Self.isLoopback(local) else { return false }
        } else if !isOwnName(name) {
            return false
        }
        let defaultPort = scheme == "https" ? 443 : 80
        return Self.port(of: authority) ?? defaultPort == port
    }

    /// Whether the IP literal `name` (`127.0.0.1`, `[::1]`) is `address`'s IP address
    /// (an IPv4 address reached over IPv6 included).
    static func sameAddress(_ name: String, _ address: SocketAddress) -> Bool {
        let literal = name.hasPrefix("[") ? String(name.dropFirst().dropLast()) : name
        guard let parsed = try? SocketAddress(ipAddress: literal, port: 0), let own = address.ipAddress,
            let theirs = parsed.ipAddress
        else { return false }
        let unmapped = own.lowercased().hasPrefix("::ffff:") && own.contains(".") ? String(own.dropFirst(7)) : own
        return theirs.lowercased() == unmapped.lowercased()
    }

    /// Whether `address` is a loopback address (`127.0.0.0/8`, `::1`, or IPv4 loopback over IPv6).
    static func isLoopback(_ address: SocketAddress) -> Bool {
        guard let ip = address.ipAddress?.lowercased() else { return false }
        return ip.hasPrefix("127.") || ip == "::1" || ip.hasPrefix("::ffff:127.")
    }

    private func isOwnName(_ name: String) -> Bool {
        name == "localhost" || hostNames.contains(name) || Self.isIPAddress(name)
    }

    /// The host of an authority (`name:port`, `[::1]:port`), lowercased; `nil` when malformed.
    static func hostName(_ authority: String) -> String? {
        let authority = authority.lowercased()
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { return nil }
            let rest = authority[authority.index(after: close)...]
            guard rest.isEmpty || (rest.hasPrefix(":") && port(of: authority) != nil) else { return nil }
            return String(authority[...close])
        }
        let parts = authority.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count <= 2, let name = parts.first, !name.isEmpty,
            name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == ".") })
        else { return nil }
        if parts.count == 2, port(of: authority) == nil { return nil }
        return String(name.hasSuffix(".") ? name.dropLast() : name)
    }

    /// The port of an authority, if it names one.
    static func port(of authority: String) -> Int? {
        guard let colon = authority.lastIndex(of: ":"), !authority[colon...].contains("]") else { return nil }
        let digits = authority[authority.index(after: colon)...]
        guard !digits.isEmpty, digits.count <= 5, digits.allSatisfy(\.isASCII), let port = Int(digits), port <= 65535 else { return nil }
        return port
    }

    /// An IPv4 literal (`127.0.0.1`) or a bracketed IPv6 one (`[::1]`).
    static func isIPAddress(_ name: String) -> Bool {
        if name.hasPrefix("[") && name.hasSuffix("]") {
            let inner = name.dropFirst().dropLast()
            return !inner.isEmpty && inner.contains(":") && inner.allSatisfy { $0.isHexDigit || $0 == ":" || $0 == "." }
        }
        let octets = name.split(separator: ".", omittingEmptySubsequences: false)
        return octets.count == 4
            && octets.allSatisfy { octet in
                !octet.isEmpty && octet.count <= 3 && octet.allSatisfy(\.isASCII) && Int(octet).map { $0 <= 255 } == true
            }
    }
}

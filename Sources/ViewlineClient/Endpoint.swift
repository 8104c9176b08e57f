import Foundation

/// Where a server listens: its line-protocol port over TCP, or its web listener's
/// WebSocket (one line per text message, PROTOCOL §1.1).
public struct Endpoint: Sendable, Hashable, CustomStringConvertible {
    /// The server's host name or address.
    public var host: String
    /// Its line port (TCP) or its web port (WebSocket).
    public var port: Int
    /// The WebSocket's path (`/ws`); `nil` for the line protocol over TCP.
    public var webSocketPath: String?

    /// A TCP endpoint (add ``ViewlineClient/Options/tls`` for TLS).
    public static func tcp(host: String = "127.0.0.1", port: Int = 7878) -> Endpoint {
        Endpoint(host: host, port: port)
    }

    /// The web listener's WebSocket (`--web-port`), at `path`.
    public static func webSocket(host: String = "127.0.0.1", port: Int, path: String = "/ws") -> Endpoint {
        Endpoint(host: host, port: port, webSocketPath: path)
    }

    /// A WebSocket from its URL (`ws://host:port/ws`, or a page's `http://host:port/`,
    /// whose `/ws` is used); `nil` for another scheme. `wss`/`https` need ``ViewlineClient/Options/tls``.
    public static func webSocket(_ url: URL) -> Endpoint? {
        guard let scheme = url.scheme, ["ws", "wss", "http", "https"].contains(scheme), let host = url.host else { return nil }
        let secure = scheme == "wss" || scheme == "https"
        let path = scheme.hasPrefix("http") || url.path.isEmpty ? "/ws" : url.path
        return Endpoint(host: host, port: url.port ?? (secure ? 443 : 80), webSocketPath: path)
    }

    /// An endpoint at `host:port`: TCP without a path, the WebSocket at `webSocketPath` with one.
    public init(host: String, port: Int, webSocketPath: String? = nil) {
        self.host = host
        self.port = port
        self.webSocketPath = webSocketPath
    }

    /// `host:port` or `[v6]:port`, as `moved` and `--nodes` write it; `nil` if malformed.
    public init?(_ text: String) {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]), (1...65535).contains(port) else {
            return nil
        }
        var host = String(text[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty else { return nil }
        self.init(host: host, port: port)
    }

    public var description: String {
        let address = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        return webSocketPath.map { "ws://\(address)\($0)" } ?? address
    }
}

/// Where a server listens: a host and its line-protocol port.
public struct Endpoint: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: Int

    /// A TCP endpoint (add ``ViewlineClient/Options/tls`` for TLS).
    public static func tcp(host: String = "127.0.0.1", port: Int = 7878) -> Endpoint {
        Endpoint(host: host, port: port)
    }

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
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

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

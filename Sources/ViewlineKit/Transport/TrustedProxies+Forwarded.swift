import NIOCore
import NIOHTTP1

extension TrustedProxies {
    /// The client of an HTTP request `peer` sent: walking the hops that the proxies'
    /// ``ForwardingHeader`` lists from the nearest back, the first address that is not
    /// a trusted proxy. Only that header is read — the other is the client's to write,
    /// and a proxy passes it on untouched. `peer` itself when it is not trusted (its
    /// headers are then anyone's words), and the last address read when a hop is
    /// hidden (`unknown`, an obfuscated name) or unreadable. At most
    /// ``maximumHopsRead`` hops are read.
    func client(of peer: SocketAddress, headers: HTTPHeaders) -> SocketAddress {
        guard contains(peer) else { return peer }
        let hops: [SocketAddress?] =
            switch header {
            case .xForwardedFor: headers["X-Forwarded-For"].flatMap { $0.split(separator: ",") }.map { Self.address(String($0)) }
            case .forwarded: headers["Forwarded"].flatMap { $0.split(separator: ",") }.map { Self.forValue($0).map(Self.address) ?? nil }
            }
        var client = peer
        for hop in hops.reversed().prefix(Self.maximumHopsRead) {
            guard contains(client), let hop else { break }
            client = hop
        }
        return client
    }

    /// The most hops of a forwarding header read for one request: a chain longer than
    /// any real deployment's, far below what a head of `--max-line-bytes` could list.
    static let maximumHopsRead = 16

    /// The `for=` parameter of one `Forwarded` element (`for=192.0.2.60;proto=http`).
    private static func forValue(_ element: Substring) -> String? {
        for pair in element.split(separator: ";") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            guard parts.count == 2, parts[0].trimmingWhitespace().lowercased() == "for" else { continue }
            return String(parts[1].trimmingWhitespace())
        }
        return nil
    }

    /// An address as forwarding headers write one: `192.0.2.60`, `192.0.2.60:4711`,
    /// `2001:db8::17`, `"[2001:db8::17]:4711"`; `nil` for `unknown`, an obfuscated
    /// name (`_hidden`) or anything else.
    static func address(_ written: String) -> SocketAddress? {
        var text = Substring(written).trimmingWhitespace()
        if text.hasPrefix("\""), text.hasSuffix("\""), text.count >= 2 { text = text.dropFirst().dropLast() }
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            text = text[text.index(after: text.startIndex)..<close]
        } else if text.filter({ $0 == ":" }).count == 1, let colon = text.firstIndex(of: ":") {
            text = text[..<colon]  // IPv4 with a port
        }
        return try? SocketAddress(ipAddress: String(text), port: 0)
    }
}

extension Substring {
    fileprivate func trimmingWhitespace() -> Substring {
        var text = self
        while let first = text.first, first == " " || first == "\t" { text = text.dropFirst() }
        while let last = text.last, last == " " || last == "\t" { text = text.dropLast() }
        return text
    }
}

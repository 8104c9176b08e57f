import NIOCore

/// The load balancers whose word on a client's address the server takes
/// (`--trusted-proxy`): addresses and networks (`10.0.0.5`, `10.0.0.0/8`, `::1`,
/// `fd00::/8`). A connection from one of them begins with HAProxy's PROXY protocol
/// header (v1 or v2), whose source address is then the client's everywhere the peer
/// is used (limits, throttles, pools, logs, `info`, `inspect`); on the line listener
/// it must, while on the web listener a request's `Forwarded` or `X-Forwarded-For`
/// may name the client instead. A PROXY header from any other peer closes its
/// connection. Empty (the default): no header is read, the peer is the client.
public struct TrustedProxies: Sendable, Equatable {
    /// One address or network, as the bytes of its address (4 or 16) and a prefix length.
    struct Network: Sendable, Equatable {
        var bytes: [UInt8]
        var prefix: Int

        func contains(_ address: [UInt8]) -> Bool {
            guard address.count == bytes.count else { return false }
            var left = prefix
            for index in bytes.indices where left > 0 {
                let bits = min(8, left)
                let mask = UInt8(truncatingIfNeeded: 0xFF << (8 - bits))
                if address[index] & mask != bytes[index] & mask { return false }
                left -= bits
            }
            return true
        }
    }

    /// The header of the web listener's requests that the proxies write the client's
    /// address in (the other one is the client's to write, and is never read).
    public enum ForwardingHeader: String, Sendable, CaseIterable {
        /// `X-Forwarded-For` (HAProxy's `option forwardfor`, nginx's
        /// `$proxy_add_x_forwarded_for`, most cloud load balancers): the default.
        case xForwardedFor = "x-forwarded-for"
        /// `Forwarded`'s `for=` (RFC 7239).
        case forwarded
    }

    let networks: [Network]
    /// The header the proxies name the client in (``ForwardingHeader``).
    public let header: ForwardingHeader

    /// None: every peer is its own client.
    public init() {
        networks = []
        header = .xForwardedFor
    }

    /// The proxies `specifications` name (`ADDRESS` or `ADDRESS/PREFIX`, IPv4 or IPv6;
    /// an IPv4 address written as IPv6, `::ffff:10.0.0.0/104`, is that IPv4 network),
    /// which write the client's address in `header`.
    /// - Throws: ``Unreadable`` naming the first that is neither.
    public init(_ specifications: [String], header: ForwardingHeader = .xForwardedFor) throws {
        self.header = header
        networks = try specifications.map { specification in
            let parts = specification.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
            guard let first = parts.first, let address = try? SocketAddress(ipAddress: first, port: 0), let bytes = Self.bytes(of: address)
            else { throw Unreadable(specification: specification) }
            // An IPv4 address written as IPv6 is read as IPv4: its prefix counts 96 bits fewer.
            let written = first.contains(":") ? 128 : bytes.count * 8
            var prefix = bytes.count * 8
            if parts.count == 2 {
                let digits = parts[1]
                guard !digits.isEmpty, digits.count <= 3, digits.utf8.allSatisfy({ (0x30...0x39).contains($0) }),
                    digits == "0" || !digits.hasPrefix("0"), let value = Int(digits), (0...written).contains(value),
                    value >= written - bytes.count * 8
                else { throw Unreadable(specification: specification) }
                prefix = value - (written - bytes.count * 8)
            }
            return Network(bytes: bytes, prefix: prefix)
        }
    }

    /// Networks so wide they trust (nearly) everyone: any wider than a /8 (`0.0.0.0/0`,
    /// `2000::/3`). Any client in them can claim any address; the server warns at start.
    public var tooWide: [String] {
        networks.filter { $0.prefix < 8 }.map { network in
            let text =
                (try? SocketAddress(packedIPAddress: ByteBuffer(bytes: network.bytes), port: 0).ipAddress).flatMap { $0 }
                ?? network.bytes.map(String.init).joined(separator: ".")
            return "\(text)/\(network.prefix)"
        }
    }

    /// Whether none is trusted.
    public var isEmpty: Bool { networks.isEmpty }

    /// Whether `address` is one of the trusted proxies.
    public func contains(_ address: SocketAddress?) -> Bool {
        guard let address, let bytes = Self.bytes(of: address) else { return false }
        return networks.contains { $0.contains(bytes) }
    }

    /// An address's bytes: 4 for IPv4 (an IPv4 address reached over IPv6 included),
    /// 16 for IPv6; `nil` for a Unix socket.
    static func bytes(of address: SocketAddress) -> [UInt8]? {
        switch address {
        case .v4(let v4): return withUnsafeBytes(of: v4.address.sin_addr) { Array($0) }
        case .v6(let v6):
            let bytes = withUnsafeBytes(of: v6.address.sin6_addr) { Array($0) }
            if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xFF && bytes[11] == 0xFF { return Array(bytes[12...]) }
            return bytes
        case .unixDomainSocket: return nil
        }
    }

    /// A `--trusted-proxy` that is neither an address nor a network.
    public struct Unreadable: Error, CustomStringConvertible {
        /// What was given.
        public var specification: String
        public var description: String {
            "\(specification) is not an IP address or a network (ADDRESS/PREFIX), e.g. 10.0.0.5, 10.0.0.0/8, fd00::/8"
        }
    }
}

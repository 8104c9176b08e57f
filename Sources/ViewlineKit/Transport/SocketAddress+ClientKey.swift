import NIOCore

extension SocketAddress {
    /// Who a client is for every per-client limit (connections and sessions per
    /// address, attach and log-in throttles, fair blocking pools): its IPv4 address,
    /// or for IPv6 its /64 network, written `2001:db8:0:7::/64`. One host on IPv6
    /// commonly holds a whole /64, so keying on its full address would hand one
    /// attacker 2⁶⁴ keys. An IPv4 address reached over IPv6 (`::ffff:192.0.2.1`) is
    /// that IPv4 address. `nil` for a Unix socket.
    package var clientKey: String? {
        switch self {
        case .v4: return ipAddress
        case .v6(let address):
            let bytes = withUnsafeBytes(of: address.address.sin6_addr) { Array($0) }
            if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xFF && bytes[11] == 0xFF {
                return bytes[12...].map(String.init).joined(separator: ".")
            }
            let groups = (0..<4).map { String(UInt16(bytes[2 * $0]) << 8 | UInt16(bytes[2 * $0 + 1]), radix: 16) }
            return groups.joined(separator: ":") + "::/64"
        case .unixDomainSocket: return nil
        }
    }
}

import NIOCore
import Testing
@testable import ViewlineKit

/// Per-client limits key on the client's network: an IPv4 address, or an IPv6 /64,
/// so one host holding a /64 is one client.
@Suite struct ClientKeyTests {
    @Test func anIPv4AddressIsItself() throws {
        #expect(try SocketAddress(ipAddress: "203.0.113.7", port: 1).clientKey == "203.0.113.7")
        #expect(try SocketAddress(ipAddress: "::ffff:203.0.113.7", port: 1).clientKey == "203.0.113.7")
    }

    @Test func everyAddressOfAnIPv6SlashSixtyFourIsOneClient() throws {
        let first = try SocketAddress(ipAddress: "2001:db8:0:7::1", port: 1).clientKey
        let second = try SocketAddress(ipAddress: "2001:db8:0:7:ffff:1234:5678:9abc", port: 2).clientKey
        let neighbour = try SocketAddress(ipAddress: "2001:db8:0:8::1", port: 1).clientKey
        #expect(first == "2001:db8:0:7::/64")
        #expect(second == first)
        #expect(neighbour == "2001:db8:0:8::/64")
        #expect(try SocketAddress(ipAddress: "::1", port: 1).clientKey == "0:0:0:0::/64")
    }
}

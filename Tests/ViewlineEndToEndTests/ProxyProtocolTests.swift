import Foundation
import Testing
import ViewlineProtocol
import ViewlineTestSupport

/// Behind a load balancer (`--trusted-proxy`): a trusted proxy's PROXY protocol
/// header — or, on the web listener, its forwarding header — makes the client's own
/// address the one every per-address limit, the log and the inspector use; a header
/// from anyone else, or none from a trusted proxy, closes the connection.
@Suite(.blocksItsThread) struct ProxyProtocolTests {
    /// A v1 header for a client at `source`.
    func v1(_ source: String, port: Int = 40000) -> [UInt8] {
        let family = source.contains(":") ? "TCP6" : "TCP4"
        let destination = source.contains(":") ? "::1" : "127.0.0.1"
        return Array("PROXY \(family) \(source) \(destination) \(port) 7878\r\n".utf8)
    }

    /// A v2 header for a client at an IPv4 `source`.
    func v2(_ source: [UInt8], port: UInt16 = 40000) -> [UInt8] {
        [0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A, 0x21, 0x11, 0x00, 0x0C] + source + [127, 0, 0, 1]
            + [UInt8(port >> 8), UInt8(port & 0xFF), 0x1E, 0xC6]
    }

    /// A connection through the "proxy" (this test, from 127.0.0.1) for `header`'s client.
    func relayed(_ server: ServerProcess, _ header: [UInt8]) throws -> LineClient {
        let client = try LineClient(port: server.port)
        try client.sendRaw(header)
        return client
    }

    @Test func aTrustedProxysHeaderMakesItsClientsAddressTheOneLimitsAndTheInspectorSee() throws {
        let server = try ServerProcess(["--db", ":memory:", "--trusted-proxy", "127.0.0.1", "--max-clients-per-address", "1", "--admin"])
        let first = try relayed(server, v1("203.0.113.7"))
        #expect(try first.next().type == "welcome")
        let second = try relayed(server, v2([203, 0, 113, 8]))
        #expect(try second.next().type == "welcome")
        let ipv6 = try relayed(server, v1("2001:db8::9"))
        #expect(try ipv6.next().type == "welcome")
        // One connection per address: the cap is each client's, not the proxy's.
        let again = try relayed(server, v1("203.0.113.7", port: 40001))
        let refused = try again.next()
        #expect(refused.type == "bye" && refused["reason"]?.stringValue?.contains("per address") == true, "\(refused)")
        // The inspector sees each client's own address.
        let listed = try first.command("inspect")["result"]?["sessions"]?.arrayValue ?? []
        let addresses = Set(listed.compactMap { $0["address"]?.stringValue })
        #expect(addresses == ["203.0.113.7", "203.0.113.8", "2001:db8:0:0::/64"], "\(listed)")
        #expect(try first.command("ping").isOK && second.command("ping").isOK)
    }

    @Test func aHeaderFromAnyoneElseOrNoneFromATrustedProxyClosesTheConnection() throws {
        // Only 127.0.0.2 is the proxy; this test's other connections come from 127.0.0.1.
        let server = try ServerProcess(["--db", ":memory:", "--trusted-proxy", "127.0.0.2/32"])
        // A client claiming another's address: its connection is closed.
        let forger = try LineClient(port: server.port)
        #expect(try forger.next().type == "welcome")  // not a proxy: served at once
        try forger.sendRaw(v1("203.0.113.7"))
        #expect(try forger.isClosedByPeer())
        // An ordinary client from elsewhere is served as ever.
        let ordinary = try connect(server)
        #expect(try ordinary.command("ping").isOK)
        // The proxy itself without a header: closed, nothing said first.
        let bare = try LineClient(port: server.port, from: "127.0.0.2")
        try bare.send("ping")
        #expect(try bare.isClosedByPeer())
        // The proxy with a malformed header: closed.
        let malformed = try LineClient(port: server.port, from: "127.0.0.2")
        try malformed.sendRaw(Array("PROXY TCP4 203.0.113.7 nowhere 1 2\r\n".utf8))
        #expect(try malformed.isClosedByPeer())
        // And with a good one, served as its client.
        let relayed = try LineClient(port: server.port, from: "127.0.0.2")
        try relayed.sendRaw(v1("203.0.113.7"))
        #expect(try relayed.next().type == "welcome")
        #expect(try relayed.command("ping").isOK)
    }

    @Test func aHeaderThatTricklesPastTheLineTimeoutClosesTheConnection() throws {
        let server = try ServerProcess(["--db", ":memory:", "--trusted-proxy", "127.0.0.1", "--line-timeout", "1"])
        let slow = try LineClient(port: server.port)
        try slow.sendRaw(Array("PROXY TCP4 203.0.113.7".utf8))
        let start = ContinuousClock.now
        #expect(try slow.isClosedByPeer(timeout: .seconds(5)))
        #expect(ContinuousClock.now - start < .seconds(3))
        // A flood of TLV bytes is refused from its preamble, before it is read.
        let flood = try LineClient(port: server.port)
        try flood.sendRaw([0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A, 0x21, 0x11, 0xFF, 0xFF])
        #expect(try flood.isClosedByPeer())
    }

    @Test func aWebSocketThroughATrustedProxyIsItsForwardedClients() throws {
        let server = try ServerProcess([
            "--db", ":memory:", "--trusted-proxy", "127.0.0.1", "--web-port", "0", "--max-clients-per-address", "1", "--admin",
        ])
        let web = try #require(server.webPort)
        // TCP mode (a PROXY protocol header) or HTTP mode (none: the request's
        // forwarding header names the client); never the proxy's own address.
        func socket(_ forwarded: [(String, String)], header: [UInt8] = []) throws -> WebSocketClient {
            let connection = try LineClient(port: web)
            if !header.isEmpty { try connection.sendRaw(header) }
            return try WebSocketClient(connection: connection, port: web, headers: forwarded)
        }
        let first = try socket([], header: v1("203.0.113.7"))
        #expect(try first.next().type == "welcome")
        let second = try socket([("X-Forwarded-For", "198.51.100.20")])
        #expect(try second.next().type == "welcome")
        try first.send("inspect")
        let listed = try first.next()["result"]?["sessions"]?.arrayValue ?? []
        #expect(Set(listed.compactMap { $0["address"]?.stringValue }) == ["203.0.113.7", "198.51.100.20"], "\(listed)")
        // Per client: a second socket of the forwarded client is refused, another is not.
        let third = try socket([("X-Forwarded-For", "198.51.100.20")])
        #expect(try third.next().type == "bye")
        // A `Forwarded` header is the client's own words here (the proxies write
        // X-Forwarded-For): it names nobody, and the socket is the proxy's own.
        let forger = try socket([("Forwarded", "for=198.51.100.30")])
        #expect(try forger.next().type == "welcome")
        let fourth = try socket([("X-Forwarded-For", "198.51.100.21")])
        #expect(try fourth.next().type == "welcome")
        // A client's own forwarding header is one more hop, never the client.
        let spoofer = try socket([("X-Forwarded-For", "198.51.100.20, 198.51.100.22")])
        #expect(try spoofer.next().type == "welcome")
    }
}

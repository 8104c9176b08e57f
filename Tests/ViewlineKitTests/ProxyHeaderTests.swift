import NIOCore
import NIOEmbedded
import NIOHTTP1
import Testing
@testable import ViewlineKit

/// HAProxy's PROXY protocol (v1 text, v2 binary) as the listeners read it from
/// trusted proxies, the networks `--trusted-proxy` takes, and the forwarding headers
/// of the web listener.
@Suite struct ProxyHeaderTests {
    func parse(_ bytes: [UInt8]) -> ProxyHeader.Parsed { ProxyHeader.parse(ByteBuffer(bytes: bytes)) }
    func parse(_ text: String) -> ProxyHeader.Parsed { parse(Array(text.utf8)) }

    static let signature: [UInt8] = [0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A]

    /// A v2 header: `command` (0x20 LOCAL, 0x21 PROXY), `family`, then `body`.
    func v2(_ command: UInt8 = 0x21, family: UInt8, _ body: [UInt8]) -> [UInt8] {
        Self.signature + [command, family, UInt8(body.count >> 8), UInt8(body.count & 0xFF)] + body
    }

    @Test func aV1HeaderGivesTheSourceAndItsLength() throws {
        let header = "PROXY TCP4 203.0.113.7 10.0.0.1 56324 7878\r\n"
        #expect(
            parse(header + "ping\n") == .header(.proxied(source: try SocketAddress(ipAddress: "203.0.113.7", port: 56324)), length: header.utf8.count)
        )
        #expect(
            parse("PROXY TCP6 2001:db8::7 2001:db8::1 4711 443\r\n")
                == .header(.proxied(source: try SocketAddress(ipAddress: "2001:db8::7", port: 4711)), length: 45))
        #expect(parse("PROXY UNKNOWN\r\n") == .header(.local, length: 15))
        let unknown = "PROXY UNKNOWN ffff:f...f:ffff ffff:f...f:ffff 65535 65535\r\n"
        #expect(parse(unknown) == .header(.local, length: unknown.utf8.count))
    }

    @Test func aPartHeaderWaitsAndAnythingElseIsRefused() {
        #expect(parse("PRO") == .incomplete)
        #expect(parse("PROXY TCP4 203.0.113.7") == .incomplete)
        #expect(parse(Array(Self.signature.prefix(7))) == .incomplete)
        for refused in [
            "ping\n", "GET / HTTP/1.1\r\n", "PROXY TCP4 203.0.113.7 10.0.0.1 56324 7878\n",  // no CR
            "PROXY TCP4 203.0.113.7 10.0.0.1 56324\r\n", "PROXY TCP4 2001:db8::7 10.0.0.1 1 2\r\n", "PROXY TCP6 203.0.113.7 ::1 1 2\r\n",
            "PROXY TCP4 203.0.113.7 10.0.0.1 65536 1\r\n", "PROXY TCP4 203.0.113.7 10.0.0.1 -1 1\r\n", "PROXY TCP4 203.0.113.7 10.0.0.1 0080 1\r\n",
            "PROXY TCP4 999.0.113.7 10.0.0.1 1 2\r\n", "PROXY UDP4 203.0.113.7 10.0.0.1 1 2\r\n",
            "PROXY TCP4  203.0.113.7 10.0.0.1 1 2\r\n",
        ] {
            guard case .invalid = parse(refused) else {
                Issue.record("\(refused.debugDescription) must be refused, got \(parse(refused))")
                continue
            }
        }
        // Past the longest v1 header without its end: refused, not waited for.
        guard case .invalid = parse("PROXY TCP4 " + String(repeating: "1", count: 200)) else {
            Issue.record("an endless v1 header must be refused")
            return
        }
    }

    @Test func aV2HeaderGivesTheSourceAndSkipsItsTLVs() throws {
        let ipv4 = v2(family: 0x11, [203, 0, 113, 7, 10, 0, 0, 1, 0xDC, 0x04, 0x1E, 0xC6])
        #expect(parse(ipv4 + Array("ping\n".utf8)) == .header(.proxied(source: try SocketAddress(ipAddress: "203.0.113.7", port: 56324)), length: 28))
        let tlvs: [UInt8] = [0x01, 0x00, 0x02, 0x68, 0x32, 0x04, 0x00, 0x00]  // ALPN "h2", a NOOP
        #expect(
            parse(v2(family: 0x11, [203, 0, 113, 7, 10, 0, 0, 1, 0, 80, 0, 81] + tlvs))
                == .header(.proxied(source: try SocketAddress(ipAddress: "203.0.113.7", port: 80)), length: 36))
        let source: [UInt8] = [0x20, 0x01, 0x0D, 0xB8] + Array(repeating: 0, count: 11) + [7]
        let ipv6 = v2(family: 0x21, source + Array(repeating: 0, count: 15) + [1] + [0x12, 0x67, 0x01, 0xBB])
        #expect(parse(ipv6) == .header(.proxied(source: try SocketAddress(ipAddress: "2001:db8::7", port: 4711)), length: 52))
        // A health check (LOCAL), an unspecified or Unix family: the proxy is the peer.
        #expect(parse(v2(0x20, family: 0x00, [])) == .header(.local, length: 16))
        #expect(parse(v2(0x20, family: 0x11, [1, 2, 3, 4, 5, 6, 7, 8, 0, 1, 0, 2])) == .header(.local, length: 28))
        #expect(parse(v2(family: 0x31, Array(repeating: 0, count: 216))) == .header(.local, length: 232))
        // Waits for its whole length.
        #expect(parse(Array(ipv4.prefix(20))) == .incomplete)
    }

    @Test func aMalformedOrOversizedV2HeaderIsRefused() {
        let cases: [[UInt8]] = [
            v2(0x11, family: 0x11, Array(repeating: 0, count: 12)),  // version 1 in a v2 preamble
            v2(0x22, family: 0x11, Array(repeating: 0, count: 12)),  // neither LOCAL nor PROXY
            v2(family: 0x11, Array(repeating: 0, count: 11)),  // shorter than its addresses
            v2(family: 0x21, Array(repeating: 0, count: 35)),
            v2(family: 0x41, Array(repeating: 0, count: 12)),  // no such family
            // A TLV flood: refused from its preamble, before its bytes are awaited.
            Self.signature + [0x21, 0x11, 0xFF, 0xFF],
        ]
        for bytes in cases {
            guard case .invalid = parse(bytes) else {
                Issue.record("\(bytes.prefix(16)) must be refused, got \(parse(bytes))")
                continue
            }
        }
    }

    @Test func trustedProxiesAreAddressesAndNetworks() throws {
        let trusted = try TrustedProxies(["10.0.0.0/8", "192.0.2.7", "fd00::/8", "::1"])
        #expect(trusted.contains(try SocketAddress(ipAddress: "10.200.1.2", port: 1)))
        #expect(trusted.contains(try SocketAddress(ipAddress: "192.0.2.7", port: 1)))
        #expect(!trusted.contains(try SocketAddress(ipAddress: "192.0.2.8", port: 1)))
        #expect(!trusted.contains(try SocketAddress(ipAddress: "11.0.0.1", port: 1)))
        #expect(trusted.contains(try SocketAddress(ipAddress: "fd12:3456::1", port: 1)))
        #expect(trusted.contains(try SocketAddress(ipAddress: "::1", port: 1)))
        #expect(!trusted.contains(try SocketAddress(ipAddress: "::2", port: 1)))
        #expect(trusted.contains(try SocketAddress(ipAddress: "::ffff:10.1.2.3", port: 1)))  // IPv4 over IPv6
        #expect(!trusted.contains(nil))
        #expect(try TrustedProxies(["0.0.0.0/0"]).contains(try SocketAddress(ipAddress: "198.51.100.1", port: 1)))
        // An IPv4 network written as IPv6 is that IPv4 network (its prefix 96 bits longer).
        let mapped = try TrustedProxies(["::ffff:10.0.0.0/104"])
        #expect(mapped.contains(try SocketAddress(ipAddress: "10.9.8.7", port: 1)))
        #expect(!mapped.contains(try SocketAddress(ipAddress: "11.0.0.1", port: 1)))
        let wide = try TrustedProxies(["0.0.0.0/0", "10.0.0.0/8", "::/0", "fd00::/8", "2000::/3"]).tooWide
        #expect(wide == ["0.0.0.0/0", "::/0", "2000::/3"], "\(wide)")
        for unreadable in [
            "10.0.0.0/33", "10.0.0.0/", "proxy.example", "10.0.0.0/8/8", "fd00::/129", "10.0.0.0/+8", "", "10.0.0.0/08", "::ffff:10.0.0.0/24",
            "10.0.0.0/ 8",
        ] {
            #expect(throws: TrustedProxies.Unreadable.self, "\(unreadable)") { try TrustedProxies([unreadable]) }
        }
    }

    @Test func aForwardingHeaderIsReadFromTrustedProxiesOnlyTheLastUntrustedHopBeingTheClient() throws {
        let trusted = try TrustedProxies(["10.0.0.0/8"])
        let rfc7239 = try TrustedProxies(["10.0.0.0/8"], header: .forwarded)
        let proxy = try SocketAddress(ipAddress: "10.0.0.2", port: 40000)
        let stranger = try SocketAddress(ipAddress: "198.51.100.9", port: 40000)
        func client(_ peer: SocketAddress, _ headers: [(String, String)], _ proxies: TrustedProxies? = nil) -> String? {
            (proxies ?? trusted).client(of: peer, headers: HTTPHeaders(headers)).ipAddress
        }
        #expect(client(proxy, [("X-Forwarded-For", "203.0.113.7")]) == "203.0.113.7")
        // Hops the client wrote itself come before the trusted ones: never believed.
        #expect(client(proxy, [("X-Forwarded-For", "1.2.3.4, 203.0.113.7, 10.0.0.9")]) == "203.0.113.7")
        #expect(client(proxy, [("X-Forwarded-For", "1.2.3.4"), ("X-Forwarded-For", "203.0.113.7")]) == "203.0.113.7")
        // From a peer that is not trusted, the header is anyone's word.
        #expect(client(stranger, [("X-Forwarded-For", "203.0.113.7")]) == "198.51.100.9")
        // Only the header the proxies write is read: a client's own `Forwarded`, which a
        // proxy that appends X-Forwarded-For passes on untouched, names nobody.
        #expect(client(proxy, [("Forwarded", "for=198.51.100.66"), ("X-Forwarded-For", "203.0.113.7")]) == "203.0.113.7")
        #expect(client(proxy, [("Forwarded", "for=198.51.100.66")]) == "10.0.0.2")
        // RFC 7239 where the proxies write it: quoted, bracketed IPv6 with a port, other parameters.
        #expect(
            client(proxy, [("Forwarded", #"for="[2001:db8:cafe::17]:4711";proto=https"#), ("X-Forwarded-For", "1.2.3.4")], rfc7239)
                == "2001:db8:cafe::17")
        #expect(client(proxy, [("Forwarded", "for=192.0.2.60:8080;by=10.0.0.2, for=10.0.0.3")], rfc7239) == "192.0.2.60")
        // A hidden hop stops the walk at the last address read (a trusted one).
        #expect(client(proxy, [("Forwarded", "for=unknown")], rfc7239) == "10.0.0.2")
        #expect(client(proxy, [("X-Forwarded-For", "_hidden, 203.0.113.7")]) == "203.0.113.7")
        #expect(client(proxy, [("X-Forwarded-For", "not an address")]) == "10.0.0.2")
        // No header: the proxy itself.
        #expect(client(proxy, []) == "10.0.0.2")
        // Only so many hops are read: a long chain of trusted ones ends at the last read.
        let chain = (0..<100).map { "10.1.0.\($0)" }.joined(separator: ", ")
        #expect(client(proxy, [("X-Forwarded-For", "203.0.113.7, " + chain)])?.hasPrefix("10.1.0.") == true)
    }

    /// The handler from a trusted proxy: the connection is held back until the header,
    /// then goes on with the bytes after it and the header's source as its client.
    @Test func theHandlerHoldsATrustedProxysConnectionUntilItsHeader() throws {
        let peer = PeerAddress()
        let handler = ProxyHeaderHandler(
            trusted: try TrustedProxies(["127.0.0.1"]), peer: peer, timeout: .seconds(10), warnings: ProxyHeaderWarnings(logger: .init(label: "test"))
        )
        let activations = ActivationCounter()
        let channel = EmbeddedChannel(handlers: [handler, activations])
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        #expect(activations.count == 0)
        try channel.writeInbound(ByteBuffer(string: "PROXY TCP4 203.0.113.7 10.0.0.1 5"))
        let early = try channel.readInbound(as: ByteBuffer.self)
        #expect(activations.count == 0 && early == nil)
        try channel.writeInbound(ByteBuffer(string: "6324 7878\r\nping\n"))
        #expect(activations.count == 1)
        #expect(peer.current?.ipAddress == "203.0.113.7")
        #expect(try channel.readInbound(as: ByteBuffer.self) == ByteBuffer(string: "ping\n"))
        #expect(channel.isActive)
    }

    @Test func theHandlerClosesAHeaderFromAnyoneElseAndATrustedConnectionWithoutOne() throws {
        let warnings = ProxyHeaderWarnings(logger: .init(label: "test"))
        // A stranger's connection goes on at once, and is closed when it claims another's address.
        let stranger = EmbeddedChannel(handlers: [
            ProxyHeaderHandler(trusted: try TrustedProxies(["10.0.0.0/8"]), peer: PeerAddress(), timeout: .seconds(10), warnings: warnings)
        ])
        try stranger.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        try stranger.writeInbound(ByteBuffer(string: "PROXY TCP4 203.0.113.7 10.0.0.1 1 2\r\n"))
        #expect(!stranger.isActive)
        // A stranger's ordinary line passes untouched.
        let ordinary = EmbeddedChannel(handlers: [
            ProxyHeaderHandler(trusted: try TrustedProxies(["10.0.0.0/8"]), peer: PeerAddress(), timeout: .seconds(10), warnings: warnings)
        ])
        try ordinary.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        try ordinary.writeInbound(ByteBuffer(string: "ping\n"))
        let passed = try ordinary.readInbound(as: ByteBuffer.self)
        #expect(ordinary.isActive && passed == ByteBuffer(string: "ping\n"))
        // A trusted proxy's connection that does not begin with a header.
        let bare = EmbeddedChannel(handlers: [
            ProxyHeaderHandler(trusted: try TrustedProxies(["127.0.0.1"]), peer: PeerAddress(), timeout: .seconds(10), warnings: warnings)
        ])
        try bare.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        try bare.writeInbound(ByteBuffer(string: "ping\n"))
        #expect(!bare.isActive)
    }

    @Test func aHeaderThatDoesNotArriveInTimeClosesTheConnection() throws {
        let channel = EmbeddedChannel(handlers: [
            ProxyHeaderHandler(
                trusted: try TrustedProxies(["127.0.0.1"]), peer: PeerAddress(), timeout: .seconds(5),
                warnings: ProxyHeaderWarnings(logger: .init(label: "test")))
        ])
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        try channel.writeInbound(ByteBuffer(string: "PROXY TCP4 203.0.113.7"))
        channel.embeddedEventLoop.advanceTime(by: .seconds(4))
        #expect(channel.isActive)
        channel.embeddedEventLoop.advanceTime(by: .seconds(2))
        #expect(!channel.isActive)
    }
}

/// Counts the activations that reach the end of a pipeline.
final class ActivationCounter: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    var count = 0
    func channelActive(context: ChannelHandlerContext) {
        count += 1
        context.fireChannelActive()
    }
}

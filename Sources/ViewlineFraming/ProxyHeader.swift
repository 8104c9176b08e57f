import NIOCore

/// The header a load balancer puts before a connection's first byte to say whose it
/// is: HAProxy's PROXY protocol, version 1 (a text line, at most 107 bytes) or
/// version 2 (binary: a 16-byte preamble and up to ``maximumV2Length`` bytes of
/// addresses and TLVs). Only the source address is read; TLVs are skipped.
///
/// See <https://www.haproxy.org/download/2.6/doc/proxy-protocol.txt>.
public enum ProxyHeader: Sendable, Equatable {
    /// The connection is `source`'s, relayed by the proxy.
    case proxied(source: SocketAddress)
    /// The proxy's own connection (a health check: v2's `LOCAL`), or one whose source
    /// the proxy does not know (v1's `UNKNOWN`, v2's unspecified or Unix family): the
    /// peer is the proxy itself.
    case local

    /// What ``parse(_:)`` found at the start of a connection's bytes.
    public enum Parsed: Sendable, Equatable {
        /// A whole header, `length` bytes long (the connection's own bytes follow it).
        case header(ProxyHeader, length: Int)
        /// A header may still come: more bytes are needed.
        case incomplete
        /// Not a header, or a malformed one: why, in words.
        case invalid(String)
    }

    /// The most bytes a v2 header's addresses and TLVs may take: far more than HAProxy
    /// sends (an address block, an ALPN, an authority, a unique id, TLS details), far
    /// less than the 65,535 the format allows. A longer header is refused unread.
    public static let maximumV2Length = 2048

    /// The longest header this parser holds bytes for: what a connection may hold
    /// before its header is read.
    public static let maximumLength = 16 + maximumV2Length

    static let v1Prefix = Array("PROXY ".utf8)
    static let v1MaximumLength = 107
    static let v2Signature: [UInt8] = [0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A]

    /// Whether `bytes` begin like a header (a whole signature, or a prefix of one that
    /// more bytes could complete): `nil` while they are too short to say.
    public static func startsLikeHeader(_ bytes: ByteBuffer) -> Bool? {
        let view = bytes.readableBytesView
        for signature in [v1Prefix, v2Signature] {
            let shared = min(view.count, signature.count)
            if view.prefix(shared).elementsEqual(signature.prefix(shared)) { return shared == signature.count ? true : nil }
        }
        return false
    }

    /// Reads a header at the start of `bytes` (which it does not consume).
    public static func parse(_ bytes: ByteBuffer) -> Parsed {
        let view = bytes.readableBytesView
        switch startsLikeHeader(bytes) {
        case false: return .invalid("the connection did not begin with a PROXY protocol header")
        case nil: return .incomplete
        case true: break
        }
        return view.first == UInt8(ascii: "P") ? parseV1(Array(view.prefix(v1MaximumLength))) : parseV2(bytes)
    }

    private static func parseV1(_ bytes: [UInt8]) -> Parsed {
        guard let end = bytes.firstIndex(of: UInt8(ascii: "\n")) else {
            return bytes.count >= v1MaximumLength ? .invalid("a v1 header longer than \(v1MaximumLength) bytes") : .incomplete
        }
        guard end > 0, bytes[end - 1] == UInt8(ascii: "\r") else { return .invalid("a v1 header not ended by CRLF") }
        let fields = bytes[..<(end - 1)].split(separator: UInt8(ascii: " "), omittingEmptySubsequences: false).map {
            String(decoding: $0, as: UTF8.self)
        }
        guard fields.count >= 2 else { return .invalid("a v1 header without a protocol") }
        if fields[1] == "UNKNOWN" { return .header(.local, length: end + 1) }
        guard fields[1] == "TCP4" || fields[1] == "TCP6", fields.count == 6 else {
            return .invalid("a v1 header must be PROXY TCP4|TCP6 SOURCE DESTINATION SOURCE-PORT DESTINATION-PORT, or PROXY UNKNOWN")
        }
        guard let sourcePort = port(fields[4]), port(fields[5]) != nil else { return .invalid("a v1 header with a port that is not 0–65535") }
        let isV6 = fields[1] == "TCP6"
        guard fields[2].contains(":") == isV6, fields[3].contains(":") == isV6,
            let source = try? SocketAddress(ipAddress: fields[2], port: sourcePort),
            (try? SocketAddress(ipAddress: fields[3], port: 0)) != nil
        else { return .invalid("a v1 header with an address that is not \(isV6 ? "IPv6" : "IPv4")") }
        return .header(.proxied(source: source), length: end + 1)
    }

    /// A decimal port as v1 writes it: digits only, no sign, no leading zero.
    private static func port(_ text: String) -> Int? {
        guard !text.isEmpty, text.count <= 5, text.utf8.allSatisfy({ (0x30...0x39).contains($0) }),
            text == "0" || !text.hasPrefix("0"), let value = Int(text), value <= 65535
        else { return nil }
        return value
    }

    private static func parseV2(_ bytes: ByteBuffer) -> Parsed {
        guard bytes.readableBytes >= 16, let preamble = bytes.getBytes(at: bytes.readerIndex, length: 16) else { return .incomplete }
        let versionCommand = preamble[12], family = preamble[13]
        let length = Int(preamble[14]) << 8 | Int(preamble[15])
        guard versionCommand >> 4 == 2 else { return .invalid("a v2 header of version \(versionCommand >> 4)") }
        guard length <= maximumV2Length else { return .invalid("a v2 header of \(length) bytes (at most \(maximumV2Length))") }
        guard bytes.readableBytes >= 16 + length else { return .incomplete }
        switch versionCommand & 0x0F {
        case 0: return .header(.local, length: 16 + length)
        case 1: break
        default: return .invalid("a v2 header whose command is neither LOCAL nor PROXY")
        }
        let start = bytes.readerIndex + 16
        switch family >> 4 {
        case 1:
            guard length >= 12, let address = bytes.getBytes(at: start, length: 4), let port = bytes.getInteger(at: start + 8, as: UInt16.self)
            else { return .invalid("a v2 IPv4 header shorter than its addresses") }
            let text = address.map(String.init).joined(separator: ".")
            guard let source = try? SocketAddress(ipAddress: text, port: Int(port)) else { return .invalid("a v2 header's IPv4 address") }
            return .header(.proxied(source: source), length: 16 + length)
        case 2:
            guard length >= 36, let address = bytes.getBytes(at: start, length: 16),
                let port = bytes.getInteger(at: start + 32, as: UInt16.self)
            else { return .invalid("a v2 IPv6 header shorter than its addresses") }
            let text = (0..<8).map { String(UInt16(address[2 * $0]) << 8 | UInt16(address[2 * $0 + 1]), radix: 16) }.joined(separator: ":")
            guard let source = try? SocketAddress(ipAddress: text, port: Int(port)) else { return .invalid("a v2 header's IPv6 address") }
            return .header(.proxied(source: source), length: 16 + length)
        case 0, 3:
            // Unspecified or a Unix socket: the proxy's own address stands.
            return .header(.local, length: 16 + length)
        default:
            return .invalid("a v2 header of an unknown address family")
        }
    }
}

import Foundation
import ViewlineProtocol

/// A WebSocket client for end-to-end tests, written from RFC 6455 on a raw socket:
/// the upgrade request, masked text frames out, frames in. One protocol line per
/// text message, like the browser page.
public final class WebSocketClient: ProtocolClient {
    public let connection: LineClient
    /// Every message received, in order.
    public private(set) var received: [JSON] = []
    /// The close frame's status code, once one arrived.
    public private(set) var closeCode: UInt16?

    /// The upgrade's response status line and headers.
    public struct Response {
        public var status: Int
        public var headers: [String: String]
    }

    /// Connects and upgrades `/ws` (with `origin` as the `Origin` header, if any);
    /// throws unless the server switches protocols.
    public convenience init(port: Int, origin: String? = nil, path: String = "/ws") throws {
        try self.init(connection: LineClient(port: port), port: port, origin: origin, path: path)
    }

    /// Upgrades `/ws` over `connection` (opened by the caller: from a source address
    /// of its choosing, or after a PROXY protocol header), with `headers` besides.
    public init(connection: LineClient, port: Int, origin: String? = nil, path: String = "/ws", headers: [(String, String)] = []) throws {
        self.connection = connection
        let response = try Self.upgrade(connection, port: port, origin: origin, path: path, headers: headers)
        guard response.status == 101 else { throw LineClient.Failure(description: "upgrade refused: \(response.status)") }
    }

    /// Sends an upgrade request (with `headers` besides) and reads the response head, whatever it is.
    public static func upgrade(
        _ connection: LineClient, port: Int, origin: String?, path: String = "/ws", headers: [(String, String)] = []
    ) throws -> Response {
        var request = "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        request += "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        if let origin { request += "Origin: \(origin)\r\n" }
        for (name, value) in headers { request += "\(name): \(value)\r\n" }
        try connection.sendRaw(Array((request + "\r\n").utf8))
        return try readHead(connection)
    }

    /// A plain `GET`: the response's head and body.
    public static func get(_ path: String, port: Int) throws -> (response: Response, body: String) {
        let connection = try LineClient(port: port)
        try connection.sendRaw(Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n\r\n".utf8))
        let response = try readHead(connection)
        let length = Int(response.headers["content-length"] ?? "0") ?? 0
        let body = try connection.readBytes(length, timeout: .seconds(5)) ?? []
        return (response, String(decoding: body, as: UTF8.self))
    }

    private static func readHead(_ connection: LineClient) throws -> Response {
        guard let statusLine = try connection.readLine(timeout: .seconds(5)) else {
            throw LineClient.Failure(description: "no upgrade response")
        }
        let status = Int(String(decoding: statusLine, as: UTF8.self).split(separator: " ")[1]) ?? 0
        var headers: [String: String] = [:]
        while let line = try connection.readLine(timeout: .seconds(5)), line != [0x0D], !line.isEmpty {
            let text = String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            if let colon = text.firstIndex(of: ":") {
                headers[text[..<colon].lowercased()] = text[text.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
        }
        return Response(status: status, headers: headers)
    }

    /// Sends one line as one text message.
    public func send(_ line: String) throws { try send(line, fragments: 1) }

    /// Sends one text message (masked, as a client must), possibly in fragments.
    public func send(_ text: String, fragments: Int) throws {
        let bytes = Array(text.utf8)
        let size = max(1, (bytes.count + fragments - 1) / fragments)
        var start = 0
        var first = true
        repeat {
            let end = min(bytes.count, start + size)
            try sendFrame(opcode: first ? 0x1 : 0x0, payload: Array(bytes[start..<end]), fin: end == bytes.count)
            first = false
            start = end
        } while start < bytes.count
    }

    /// Sends one frame.
    public func sendFrame(opcode: UInt8, payload: [UInt8], fin: Bool = true) throws {
        try connection.sendRaw(Self.frame(opcode: opcode, payload: payload, fin: fin))
    }

    /// One frame's bytes: masked as a client's must be unless `masked` is false (an
    /// attack), with reserved bits `rsv` (0–7) set and a payload `length` that may claim
    /// more than `payload` holds (a frame left unfinished).
    public static func frame(
        opcode: UInt8, payload: [UInt8], fin: Bool = true, masked: Bool = true, rsv: UInt8 = 0, length: Int? = nil
    ) -> [UInt8] {
        let length = length ?? payload.count
        let maskBit: UInt8 = masked ? 0x80 : 0
        var frame: [UInt8] = [(fin ? 0x80 : 0) | (rsv & 0x7) << 4 | opcode]
        switch length {
        case ..<126: frame.append(maskBit | UInt8(length))
        case ..<65536: frame += [maskBit | 126, UInt8(length >> 8), UInt8(length & 0xFF)]
        default: frame.append(maskBit | 127); frame += (0..<8).reversed().map { UInt8((length >> ($0 * 8)) & 0xFF) }
        }
        guard masked else { return frame + payload }
        let mask: [UInt8] = (0..<4).map { _ in UInt8.random(in: 0...255) }
        frame += mask
        frame += payload.enumerated().map { $0.element ^ mask[$0.offset % 4] }
        return frame
    }

    /// The next frame: its opcode, payload and whether it is a message's last (FIN);
    /// `nil` at end of stream. A masked frame throws: a server never masks (RFC 6455 §5.1).
    public func nextFrame(timeout: Duration = .seconds(5)) throws -> (opcode: UInt8, payload: [UInt8], final: Bool)? {
        guard let head = try connection.readBytes(2, timeout: timeout) else { return nil }
        guard head[1] & 0x80 == 0 else { throw LineClient.Failure(description: "the server sent a masked frame") }
        var length = Int(head[1] & 0x7F)
        if length == 126 {
            guard let more = try connection.readBytes(2, timeout: timeout) else { return nil }
            length = Int(more[0]) << 8 | Int(more[1])
        } else if length == 127 {
            guard let more = try connection.readBytes(8, timeout: timeout) else { return nil }
            length = more.reduce(0) { $0 << 8 | Int($1) }
        }
        guard let payload = try connection.readBytes(length, timeout: timeout) else { return nil }
        return (head[0] & 0x0F, payload, head[0] & 0x80 != 0)
    }

    /// The next protocol message (text frame); answers nothing else on the way.
    /// Throws at a close frame or the end of the stream.
    public func next(timeout: Duration = .seconds(5)) throws -> JSON {
        while true {
            guard let frame = try nextFrame(timeout: timeout) else {
                throw LineClient.Failure(description: "connection closed; got \(received.map(\.encoded))")
            }
            switch frame.opcode {
            case 0x1:
                let message = try JSON.parse(frame.payload)
                received.append(message)
                return message
            case 0x8:
                closeCode = frame.payload.count >= 2 ? UInt16(frame.payload[0]) << 8 | UInt16(frame.payload[1]) : nil
                throw LineClient.Failure(description: "close frame \(closeCode.map(String.init) ?? "")")
            default:
                continue
            }
        }
    }

    /// Reads messages until the server's close frame; returns its status code.
    public func readUntilClose(timeout: Duration = .seconds(5)) throws -> UInt16? {
        while true {
            do { _ = try next(timeout: timeout) } catch {
                if closeCode != nil { return closeCode }
                throw error
            }
        }
    }
}

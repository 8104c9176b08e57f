import NIOCore
import NIOEmbedded
import Testing
@testable import ViewlineKit

/// The WebSocket reader on its own: the same frames in every chunk size give the same
/// lines; what breaks RFC 6455 closes with its code.
@Suite struct WebSocketLinesTests {
    /// A client's frame: masked with `key`, the shortest length form (or `length`'s).
    static func frame(_ opcode: UInt8, _ payload: [UInt8], fin: Bool = true, key: [UInt8] = [0x37, 0xFA, 0x21, 0x3D]) -> [UInt8] {
        var bytes: [UInt8] = [(fin ? 0x80 : 0) | opcode]
        switch payload.count {
        case ..<126: bytes.append(0x80 | UInt8(payload.count))
        case ...0xFFFF: bytes += [0x80 | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        default: bytes += [0x80 | 127] + (0..<8).reversed().map { UInt8(truncatingIfNeeded: payload.count >> ($0 * 8)) }
        }
        bytes += key
        bytes += payload.enumerated().map { $0.element ^ key[$0.offset % 4] }
        return bytes
    }

    static func text(_ string: String, fin: Bool = true, key: [UInt8] = [0x37, 0xFA, 0x21, 0x3D]) -> [UInt8] {
        frame(0x1, Array(string.utf8), fin: fin, key: key)
    }

    /// The lines `input` gives, fed `chunk` bytes at a time, and the close code sent (if any).
    func read(_ input: [UInt8], chunk: Int, limit: Int = 16) throws -> (lines: [String], close: UInt16?) {
        let channel = EmbeddedChannel(handler: WebSocketLines(maximumLength: limit, maximumFrameLength: limit * 2 + 8, incompleteMessageTimeout: nil))
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        var index = 0
        while index < input.count, channel.isActive {
            let end = min(index + chunk, input.count)
            try channel.writeInbound(ByteBuffer(bytes: input[index..<end]))
            index = end
        }
        var lines: [String] = []
        while let frame = try channel.readInbound(as: LineFrame.self) {
            switch frame {
            case .line(let buffer): lines.append(String(buffer: buffer))
            case .tooLong: lines.append("<too long>")
            }
        }
        var close: UInt16?
        while var written = try channel.readOutbound(as: ByteBuffer.self) {
            if written.readInteger(as: UInt8.self) == 0x88, written.readInteger(as: UInt8.self) == 2 {
                close = written.readInteger(as: UInt16.self)
            }
        }
        _ = try? channel.finish()
        return (lines, close)
    }

    @Test(arguments: [1, 2, 3, 5, 7, 13, 64, 100_000])
    func sameLinesInAnyChunkSize(_ chunk: Int) throws {
        let input =
            Self.text("ping") + Self.text("state search", key: [0, 0, 0, 0])
            + Self.text("two\nlines") + Self.text("frag", fin: false) + Self.frame(0x9, [1, 2])  // a ping between fragments
            + Self.frame(0x0, Array("men".utf8), fin: false) + Self.frame(0x0, Array("ted".utf8))
            + Self.text(String(repeating: "x", count: 17)) + Self.text("") + Self.text("1234567890abcdef")
            + Self.text("long", fin: false) + Self.frame(0x0, Array(String(repeating: "y", count: 13).utf8)) + Self.text("last")
        let (lines, close) = try read(input, chunk: chunk)
        #expect(lines == ["ping", "state search", "two", "lines", "fragmented", "<too long>", "1234567890abcdef", "<too long>", "last"])
        #expect(close == nil)
    }

    @Test(arguments: [0, 1, 7, 8, 9, 125, 126, 127, 65_535, 65_536, 70_001])
    func everyLengthFormUnmasksWhole(_ length: Int) throws {
        let payload = (0..<length).map { UInt8(ascii: "a") + UInt8($0 % 26) }
        let (lines, _) = try read(Self.frame(0x1, payload, key: [0x9A, 0x01, 0xFF, 0x42]) + Self.text("end"), chunk: 4096, limit: 80_000)
        #expect(lines == (length == 0 ? [] : [String(decoding: payload, as: UTF8.self)]) + ["end"])
    }

    @Test(
        arguments: [
            ("an unmasked frame", [0x81, 0x04] + Array("ping".utf8), UInt16(1002)),
            ("RSV1 without an extension", [0xC1, 0x80, 0, 0, 0, 0], 1002),
            ("a reserved opcode", frame(0x3, []), 1002),
            ("a fragmented ping", frame(0x9, [1], fin: false), 1002),
            ("a ping of 126 bytes", frame(0x9, Array(repeating: 1, count: 126)), 1002),
            ("a binary message", frame(0x2, [1, 2, 3]), 1003),
            ("a continuation with no message begun", frame(0x0, Array("ping".utf8)), 1002),
            ("a text frame inside an unfinished message", text("pi", fin: false) + text("ng"), 1002),
            ("a frame over the frame limit, refused at its header", [0x81, 0x80 | 127, 0, 0, 0, 1, 0, 0, 0, 0], 1009),
            ("a length with its top bit set", [0x81, 0x80 | 127, 0x80, 0, 0, 0, 0, 0, 0, 1], 1002),
            ("a close whose reason is not UTF-8", frame(0x8, [0x03, 0xE8, 0xFF, 0xFE]), 1007),
            ("a close with code 4000", frame(0x8, [0x0F, 0xA0]), 4000),
            ("a close with no code", frame(0x8, []), 1000),
        ] as [(String, [UInt8], UInt16)])
    func violationsCloseWithTheirCode(violation: String, bytes: [UInt8], code: UInt16) throws {
        for chunk in [1, 1000] {
            let (lines, close) = try read(Self.text("before") + bytes + Self.text("after"), chunk: chunk)
            #expect(close == code, "\(violation), \(chunk) bytes at a time")
            #expect(!lines.contains("after"), "\(violation): nothing is read after it")
        }
    }

    /// Random messages, split into random fragments with random masks and pings
    /// between them, fed in random chunks: the lines are the messages' lines.
    @Test(arguments: 0..<20)
    func randomFramingsGiveTheMessagesLines(seed: UInt64) throws {
        var random = SplitMix64(seed: seed)
        var input: [UInt8] = []
        var expected: [String] = []
        for _ in 0..<(1 + random.next(30)) {
            let length = random.next(4) == 0 ? random.next(300) : random.next(20)
            let text = String((0..<length).map { _ in random.next(12) == 0 ? "\n" : Character(UnicodeScalar(UInt8(97 + random.next(26)))) })
            let bytes = Array(text.utf8)
            if bytes.count > 200 {
                expected.append("<too long>")
            } else {
                // Blank lines are no commands: the framer skips them.
                expected += text.split(separator: "\n").map(String.init)
            }
            var cut = 0
            var opcode: UInt8 = 0x1
            repeat {
                let end = min(bytes.count, cut + 1 + random.next(max(1, bytes.count)))
                let key = (0..<4).map { _ in UInt8(random.next(256)) }
                input += Self.frame(opcode, Array(bytes[cut..<end]), fin: end == bytes.count, key: key)
                if random.next(5) == 0 { input += Self.frame(0x9, [UInt8(random.next(256))], key: key) }
                opcode = 0x0
                cut = end
            } while cut < bytes.count
        }
        let (lines, close) = try read(input, chunk: 1 + random.next(400), limit: 200)
        #expect(close == nil)
        #expect(lines == expected)
    }

    /// Bytes at random: the reader never traps, and ends with lines, a close, or a frame left unfinished.
    @Test(arguments: 0..<50)
    func randomBytesNeverTrap(seed: UInt64) throws {
        var random = SplitMix64(seed: seed)
        var input = (0..<random.next(2000)).map { _ in UInt8(random.next(256)) }
        if random.next(2) == 0, !input.isEmpty { input[0] = 0x81 }  // now and then a plausible start
        _ = try read(input, chunk: 1 + random.next(64))
    }

    @Test func theHandshakeAnswersTheKeyAsRFC6455Shows() {
        // RFC 6455 §1.3's example.
        #expect(WebSocketUpgrader.accept(key: "dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    }
}

/// A small deterministic generator for the randomized cases (a seed names a case).
struct SplitMix64 {
    private var state: UInt64
    init(seed: UInt64) { state = seed &+ 0x9E37_79B9_7F4A_7C15 }
    /// A value in `0..<bound` (`bound` > 0).
    mutating func next(_ bound: Int) -> Int {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return Int((z ^ (z >> 31)) % UInt64(bound))
    }
}

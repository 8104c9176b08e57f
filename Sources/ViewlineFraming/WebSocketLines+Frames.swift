import NIOCore
import NIOWebSocket

/// RFC 6455's frames as ``WebSocketLines`` reads and writes them: the header a
/// client sent, its payload unmasked, a server frame's header, and the checks on
/// what a frame carries (text that is UTF-8, a close code one may send).
extension WebSocketLines {
    /// A frame's header as the client sent it (RFC 6455 §5.2).
    struct FrameHeader: Equatable {
        var fin: Bool
        var opcode: WebSocketOpcode
        /// The payload's length, at most `Int.max`.
        var length: Int
        var maskKey: UInt32
        /// The header's own length: 2 to 14 bytes.
        var size: Int
    }

    enum HeaderParse: Equatable {
        case frame(FrameHeader)
        case incomplete
        case invalid(WebSocketErrorCode)
    }

    /// The header at the start of `bytes`; what breaks the RFC, or announces a payload
    /// over `maximumLength` (1009), is refused as soon as the bytes that show it are in,
    /// before any payload is waited for.
    static func frameHeader(in bytes: ByteBuffer, maximumLength: Int) -> HeaderParse {
        let start = bytes.readerIndex
        guard let first = bytes.getInteger(at: start, as: UInt8.self), let second = bytes.getInteger(at: start + 1, as: UInt8.self) else {
            return .incomplete
        }
        let fin = first & 0x80 != 0
        let opcode = first & 0x0F
        guard second & 0x80 != 0 else { return .invalid(.protocolError) }  // a client's frames are masked (§5.1)
        guard first & 0x70 == 0 else { return .invalid(.protocolError) }  // no extension: no reserved bit (§5.2)
        var size = 2
        var length = Int(second & 0x7F)
        if length == 126 {
            guard let extended = bytes.getInteger(at: start + 2, as: UInt16.self) else { return .incomplete }
            length = Int(extended)
            size += 2
        } else if length == 127 {
            guard let extended = bytes.getInteger(at: start + 2, as: UInt64.self) else { return .incomplete }
            guard extended <= UInt64(Int.max) else { return .invalid(.protocolError) }  // the top bit is 0 (§5.2)
            length = Int(extended)
            size += 8
        }
        if opcode & 0x08 != 0 {
            // Control frames: whole, and at most 125 bytes (§5.5).
            guard fin, length <= 125 else { return .invalid(.protocolError) }
        }
        guard length <= maximumLength else { return .invalid(.messageTooLarge) }
        guard let maskKey = bytes.getInteger(at: start + size, endianness: .little, as: UInt32.self) else { return .incomplete }
        size += 4
        return .frame(FrameHeader(fin: fin, opcode: WebSocketOpcode(encodedWebSocketOpcode: opcode)!, length: length, maskKey: maskKey, size: size))
    }

    /// `payload` XOR its mask (`key`, its four bytes as they came, read little-endian),
    /// appended to `buffer`: eight bytes at a time.
    static func unmask(_ payload: ByteBuffer, key: UInt32, into buffer: inout ByteBuffer) {
        let count = payload.readableBytes
        guard count > 0 else { return }
        let key64 = UInt64(key) | UInt64(key) << 32
        payload.withUnsafeReadableBytes { source in
            buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: count) { target in
                var index = 0
                while index + 8 <= count {
                    let word = UInt64(littleEndian: source.loadUnaligned(fromByteOffset: index, as: UInt64.self)) ^ key64
                    target.storeBytes(of: word.littleEndian, toByteOffset: index, as: UInt64.self)
                    index += 8
                }
                while index < count {
                    target[index] = source[index] ^ UInt8(truncatingIfNeeded: key >> (UInt32(index & 3) * 8))
                    index += 1
                }
                return count
            }
        }
    }

    /// Whether `buffer`'s bytes from `start` to `end` are UTF-8 (ASCII checked eight
    /// bytes at a time; the rest by the standard library).
    static func isUTF8(_ buffer: ByteBuffer, from start: Int, to end: Int) -> Bool {
        buffer.withUnsafeReadableBytes { all in
            let bytes = UnsafeRawBufferPointer(rebasing: all[(start - buffer.readerIndex)..<(end - buffer.readerIndex)])
            var index = 0
            while index + 8 <= bytes.count {
                if bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self) & 0x8080_8080_8080_8080 != 0 { break }
                index += 8
            }
            while index < bytes.count, bytes[index] < 0x80 { index += 1 }
            if index == bytes.count { return true }
            return String(validating: bytes, as: UTF8.self) != nil
        }
    }

    /// Codes a peer may send in a close frame (RFC 6455 §7.4; IANA's registry).
    static func isValidCloseCode(_ code: UInt16) -> Bool {
        switch code {
        case 1000...1003, 1007...1011, 1012...1014: true
        case 3000...4999: true
        default: false
        }
    }

    /// A final frame's header as a server sends it (RFC 6455 §5.2: FIN, the opcode, no
    /// mask, the shortest length encoding).
    static func writeHeader(opcode: WebSocketOpcode, length: Int, into buffer: inout ByteBuffer) {
        buffer.writeInteger(0x80 | UInt8(webSocketOpcode: opcode))
        switch length {
        case ..<126:
            buffer.writeInteger(UInt8(length))
        case ...0xFFFF:
            buffer.writeInteger(UInt8(126))
            buffer.writeInteger(UInt16(length))
        default:
            buffer.writeInteger(UInt8(127))
            buffer.writeInteger(UInt64(length))
        }
    }
}

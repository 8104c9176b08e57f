/// Lowercase hexadecimal, the one way bytes are written as text here: session
/// tokens and their tags, the cluster's token key, record digests, throttle names.
package enum Hex {
    private static let digits = Array("0123456789abcdef".utf8)

    /// `bytes` as two lowercase hex digits each.
    package static func string(_ bytes: some Sequence<UInt8>) -> String {
        String(decoding: utf8(bytes), as: UTF8.self)
    }

    /// ``string(_:)``'s UTF-8, for text built from bytes (a token and its tag).
    package static func utf8(_ bytes: some Sequence<UInt8>) -> [UInt8] {
        var text: [UInt8] = []
        text.reserveCapacity(bytes.underestimatedCount * 2)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0xF)])
        }
        return text
    }

    /// The bytes `text` spells, or `nil` when it is not pairs of hex digits (either case).
    package static func bytes(_ text: some StringProtocol) -> [UInt8]? {
        let utf8 = Array(text.utf8)
        guard utf8.count.isMultiple(of: 2) else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(utf8.count / 2)
        var index = 0
        while index < utf8.count {
            guard let high = value(utf8[index]), let low = value(utf8[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes
    }

    /// `count` bytes from the system's generator, as hex (twice as many digits).
    package static func random(bytes count: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        return string((0..<count).map { _ in generator.next() as UInt8 })
    }

    private static func value(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

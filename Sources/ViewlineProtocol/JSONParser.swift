import Foundation

/// Reads one JSON document (RFC 8259) in a single pass over its bytes, within
/// ``Limits``: time and memory grow with the input's length and nothing else, and
/// a document past a limit is refused before it costs more. Objects keep their
/// keys in order; a key given twice is refused.
///
/// What a hostile client sends goes through ``Limits/request`` (PROTOCOL §8);
/// documents the server wrote itself (session records) through ``Limits/trusted``.
public struct JSONParser {
    /// How deep and how wide a document may be.
    public struct Limits: Sendable {
        /// Most nested arrays and objects.
        public var depth: Int
        /// Most keys in one object.
        public var keysPerObject: Int
        /// Most values in the whole document (keys not counted).
        public var values: Int

        /// Limits of `depth` nesting levels, `keysPerObject` keys and `values` values in all.
        public init(depth: Int, keysPerObject: Int, values: Int) {
            self.depth = depth
            self.keysPerObject = keysPerObject
            self.values = values
        }

        /// A command line from a client: depth 32, 256 keys an object, 4,096 values.
        public static let request = Limits(depth: 32, keysPerObject: 256, values: 4096)
        /// A message from a server, as a client takes it: depth 64, 16,384 keys an
        /// object, 131,072 values (a 4,000-row list of five fields is 20,000).
        public static let serverMessage = Limits(depth: 64, keysPerObject: 16_384, values: 1 << 17)
        /// What the server wrote itself: deep and wide enough for any state.
        public static let trusted = Limits(depth: 512, keysPerObject: 1 << 20, values: 1 << 26)
    }

    /// Why a document was refused.
    public enum Failure: Error, Equatable, CustomStringConvertible {
        /// Not JSON: what was wrong and at which byte.
        case malformed(String, offset: Int)
        /// JSON, but past one of the limits.
        case tooComplex(String)

        public var description: String {
            switch self {
            case .malformed(let what, let offset): "malformed JSON at byte \(offset): \(what)"
            case .tooComplex(let what): what
            }
        }
    }

    private let bytes: UnsafeBufferPointer<UInt8>
    private let limits: Limits
    private var index: Int
    private var values = 0

    private init(_ bytes: UnsafeBufferPointer<UInt8>, limits: Limits) {
        self.bytes = bytes
        self.limits = limits
        index = bytes.startIndex
    }

    /// Parses `bytes` as one document (surrounding whitespace allowed).
    public static func parse(_ bytes: UnsafeBufferPointer<UInt8>, limits: Limits = .trusted) throws(Failure) -> JSON {
        var parser = JSONParser(bytes, limits: limits)
        parser.skipWhitespace()
        let value = try parser.value(depth: 0)
        parser.skipWhitespace()
        guard parser.index == bytes.endIndex else { throw parser.malformed("text after the value") }
        return value
    }

    private func malformed(_ what: String) -> Failure { .malformed(what, offset: index - bytes.startIndex) }

    private mutating func skipWhitespace() {
        while index < bytes.endIndex {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    private mutating func value(depth: Int) throws(Failure) -> JSON {
        values += 1
        guard values <= limits.values else { throw .tooComplex("more than \(limits.values) values") }
        guard index < bytes.endIndex else { throw malformed("a value was expected") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try object(depth: depth + 1)
        case UInt8(ascii: "["): return try array(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try number()
        default: throw malformed("a value was expected")
        }
    }

    private mutating func literal(_ word: StaticString) throws(Failure) {
        let count = word.utf8CodeUnitCount
        guard bytes.endIndex - index >= count else { throw malformed("a value was expected") }
        for offset in 0..<count where bytes[index + offset] != word.utf8Start[offset] {
            throw malformed("a value was expected")
        }
        index += count
    }

    private mutating func object(depth: Int) throws(Failure) -> JSON {
        guard depth <= limits.depth else { throw .tooComplex("nested deeper than \(limits.depth)") }
        index += 1  // {
        var pairs: [(String, JSON)] = []
        skipWhitespace()
        if index < bytes.endIndex && bytes[index] == UInt8(ascii: "}") {
            index += 1
            return .object(JSONObject())
        }
        var seen: Set<String>? = nil
        while true {
            skipWhitespace()
            guard index < bytes.endIndex, bytes[index] == UInt8(ascii: "\"") else { throw malformed("a key was expected") }
            let key = try string()
            guard pairs.count < limits.keysPerObject else { throw .tooComplex("an object with more than \(limits.keysPerObject) keys") }
            // Duplicates: a scan while the object is small, a set once it is not.
            if pairs.count < 16 {
                if pairs.contains(where: { $0.0 == key }) { throw malformed("key \"\(key)\" given twice") }
            } else {
                if seen == nil { seen = Set(pairs.map(\.0)) }
                guard seen!.insert(key).inserted else { throw malformed("key \"\(key)\" given twice") }
            }
            skipWhitespace()
            guard index < bytes.endIndex, bytes[index] == UInt8(ascii: ":") else { throw malformed("':' was expected") }
            index += 1
            skipWhitespace()
            let start = index
            var value = try value(depth: depth)
            if depth == 1, key == "id" { value = keepingNumberText(value, from: start) }
            pairs.append((key, value))
            skipWhitespace()
            guard index < bytes.endIndex else { throw malformed("'}' was expected") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            guard bytes[index] == UInt8(ascii: "}") else { throw malformed("',' or '}' was expected") }
            index += 1
            return .object(JSONObject(pairs))
        }
    }

    private mutating func array(depth: Int) throws(Failure) -> JSON {
        guard depth <= limits.depth else { throw .tooComplex("nested deeper than \(limits.depth)") }
        index += 1  // [
        var items: [JSON] = []
        skipWhitespace()
        if index < bytes.endIndex && bytes[index] == UInt8(ascii: "]") {
            index += 1
            return .array([])
        }
        while true {
            skipWhitespace()
            items.append(try value(depth: depth))
            skipWhitespace()
            guard index < bytes.endIndex else { throw malformed("']' was expected") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            guard bytes[index] == UInt8(ascii: "]") else { throw malformed("',' or ']' was expected") }
            index += 1
            return .array(items)
        }
    }

    private mutating func string() throws(Failure) -> String {
        index += 1  // opening quote
        let start = index
        // The common case: no escapes, copied whole.
        while index < bytes.endIndex {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let run = UnsafeBufferPointer(rebasing: bytes[start..<index])
                index += 1
                guard let text = String(validating: run, as: UTF8.self) else { throw malformed("a string is not valid UTF-8") }
                return text
            }
            if byte == UInt8(ascii: "\\") { break }
            guard byte >= 0x20 else { throw malformed("a control character in a string") }
            index += 1
        }
        var out = Array(UnsafeBufferPointer(rebasing: bytes[start..<index]))
        while index < bytes.endIndex {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                guard let text = String(validating: out, as: UTF8.self) else { throw malformed("a string is not valid UTF-8") }
                return text
            case UInt8(ascii: "\\"):
                index += 1
                guard index < bytes.endIndex else { throw malformed("an unfinished escape") }
                let escaped = bytes[index]
                index += 1
                switch escaped {
                case UInt8(ascii: "\""): out.append(0x22)
                case UInt8(ascii: "\\"): out.append(0x5C)
                case UInt8(ascii: "/"): out.append(0x2F)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try hex4()
                    if (0xD800..<0xDC00).contains(scalar) {
                        // A high surrogate must be followed by its low one.
                        guard bytes.endIndex - index >= 6, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                            throw malformed("a lone surrogate")
                        }
                        index += 2
                        let low = try hex4()
                        guard (0xDC00..<0xE000).contains(low) else { throw malformed("a lone surrogate") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00..<0xE000).contains(scalar) {
                        throw malformed("a lone surrogate")
                    }
                    out.append(contentsOf: String(Character(Unicode.Scalar(scalar)!)).utf8)
                default:
                    throw malformed("an unknown escape")
                }
            default:
                guard byte >= 0x20 else { throw malformed("a control character in a string") }
                out.append(byte)
                index += 1
            }
        }
        throw malformed("an unterminated string")
    }

    private mutating func hex4() throws(Failure) -> UInt32 {
        guard bytes.endIndex - index >= 4 else { throw malformed("a \\u escape needs four hex digits") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt32
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(byte - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(byte - UInt8(ascii: "A") + 10)
            default: throw malformed("a \\u escape needs four hex digits")
            }
            value = value << 4 | digit
            index += 1
        }
        return value
    }

    /// A top-level `id` that is a number keeps the text it came as when its value
    /// would be written otherwise (`12345678901234567890`, `1.50`, `1e3`, `-0`): a
    /// reply echoes a request's id byte for byte.
    private func keepingNumberText(_ value: JSON, from start: Int) -> JSON {
        switch value {
        case .int, .double:
            let text = bytes[start..<index]
            var written: [UInt8] = []
            value.write(into: &written)
            return text.elementsEqual(written) ? value : .number(String(decoding: UnsafeBufferPointer(rebasing: text), as: UTF8.self))
        default:
            return value
        }
    }

    private mutating func number() throws(Failure) -> JSON {
        let start = index
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.endIndex, isDigit(bytes[index]) else { throw malformed("a digit was expected") }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else {
            while index < bytes.endIndex && isDigit(bytes[index]) { index += 1 }
        }
        var integral = true
        if index < bytes.endIndex && bytes[index] == UInt8(ascii: ".") {
            integral = false
            index += 1
            guard index < bytes.endIndex, isDigit(bytes[index]) else { throw malformed("a digit was expected after '.'") }
            while index < bytes.endIndex && isDigit(bytes[index]) { index += 1 }
        }
        if index < bytes.endIndex && (bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E")) {
            integral = false
            index += 1
            if index < bytes.endIndex && (bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-")) { index += 1 }
            guard index < bytes.endIndex, isDigit(bytes[index]) else { throw malformed("a digit was expected in the exponent") }
            while index < bytes.endIndex && isDigit(bytes[index]) { index += 1 }
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        if integral, let int = Int(text) { return .int(int) }
        guard let double = Double(text), double.isFinite else { throw malformed("a number out of range") }
        // An integer past `Int` (a `UInt64` id, a state's counter) keeps its digits,
        // as the encoders write it, instead of rounding to a double's 53 bits.
        return integral ? .number(text) : .double(double)
    }

    private func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }
}

/// A session's token as the session keeps it: a well-formed one (48 lowercase hex
/// digits, as every token made here is) as its 24 bytes inline, anything else as
/// given. Kept as text, the token was an allocation of 96 bytes per session; it is
/// read back as text only for a `welcome`, a record or a comparison.
enum KeptToken: Sendable {
    case packed(UInt64, UInt64, UInt64)
    case text(String)

    init(_ token: String) {
        guard Session.isWellFormedToken(token), let bytes = Hex.bytes(token), bytes.count == 24 else {
            self = .text(token)
            return
        }
        func word(_ at: Int) -> UInt64 {
            bytes[at..<at + 8].reduce(0) { $0 << 8 | UInt64($1) }
        }
        self = .packed(word(0), word(8), word(16))
    }

    /// The token as it was given.
    var string: String {
        switch self {
        case .packed(let first, let second, let third):
            var bytes: [UInt8] = []
            bytes.reserveCapacity(24)
            for word in [first, second, third] {
                for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: word >> shift)) }
            }
            return Hex.string(bytes)
        case .text(let text):
            return text
        }
    }
}

import ViewlineProtocol

/// A `display` event as the parts of its line: a head of its own
/// (`{"type":"display","rev":7`), its view's part (`,"view":"search","state":`, made
/// once per view) and the state's encoding (shared by every session showing an equal
/// state, ``EncodedStateCache``).
///
/// A network connection writes the parts straight into its outbound buffer: a change
/// that 10,000 sessions show builds no line per session, each one writes its head
/// and copies the one encoding. The event log keeps the parts too, and a line is
/// put together only for a connection that holds events back or takes parsed
/// messages, and for a replay.
struct DisplayEvent: Sendable {
    let rev: Int
    /// `,"view":<name>,"state":`, from ``viewPart(_:)``.
    let viewPart: [UInt8]
    /// The state's encoding.
    let state: [UInt8]

    private static let head = Array(#"{"type":"display","rev":"#.utf8)
    private static let tail: [UInt8] = [UInt8(ascii: "}"), 0x0A]

    /// What follows the `rev` in a display of `view`: `,"view":"<view>","state":`.
    static func viewPart(_ view: String) -> [UInt8] {
        var part = Array(#","view":"#.utf8)
        JSON.string(view).write(into: &part)
        part.append(contentsOf: #","state":"#.utf8)
        return part
    }

    /// The line's length, `\n` included.
    var count: Int {
        var digits = 1
        var rest = rev.magnitude
        while rest >= 10 {
            rest /= 10
            digits += 1
        }
        return Self.head.count + (rev < 0 ? 1 : 0) + digits + viewPart.count + state.count + Self.tail.count
    }

    /// Writes the line, `\n` included, part by part through `write`.
    func write(_ write: (UnsafeRawBufferPointer) -> Void) {
        Self.head.withUnsafeBytes(write)
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var start = digits.count
            var rest = rev.magnitude
            repeat {
                start -= 1
                digits[start] = UInt8(ascii: "0") + UInt8(rest % 10)
                rest /= 10
            } while rest > 0
            if rev < 0 {
                start -= 1
                digits[start] = UInt8(ascii: "-")
            }
            write(UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: digits[start...])))
        }
        viewPart.withUnsafeBytes(write)
        state.withUnsafeBytes(write)
        Self.tail.withUnsafeBytes(write)
    }

    /// The whole line, `\n` included.
    var line: [UInt8] {
        var line: [UInt8] = []
        line.reserveCapacity(count)
        write { line.append(contentsOf: $0) }
        return line
    }
}

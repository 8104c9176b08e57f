import NIOCore

/// A command's result already encoded, as parts written one after another into the
/// reply, straight into the connection's outbound buffer (a view's state is one
/// part, kept encoded for displays; no copy of the whole is made first).
struct EncodedResult: Sendable {
    /// The parts, in order (none for a ``init(constant:)`` result).
    let parts: [[UInt8]]
    /// A result that is one constant of the binary (`ping`'s): returned and written
    /// without touching a reference count. A shared array's count is an atomic that
    /// both event loops would write for every such command.
    private let constant: StaticString?

    init(_ parts: [[UInt8]]) {
        self.parts = parts
        constant = nil
    }

    /// A result that is always `json`'s bytes.
    init(constant json: StaticString) {
        parts = []
        constant = json
    }

    var count: Int { constant?.utf8CodeUnitCount ?? parts.reduce(0) { $0 + $1.count } }

    /// Writes the successful reply carrying this result, echoing `re`, part by part
    /// through `write` (no line is made first): the bytes of one line, `\n` included.
    func writeReply(re: JSON, _ write: (UnsafeRawBufferPointer) -> Void) {
        writeReply(id: Self.encoded(re), write)
    }

    /// Writes the successful reply carrying this result, echoing `re`, into `buffer`:
    /// room is made once and every part copied into it through one cursor (a
    /// `writeBytes` per part checked the buffer's capacity and uniqueness each time;
    /// the reply's fixed parts are ``ReplyParts``, constants of the binary).
    func writeReply(re: JSON, into buffer: inout ByteBuffer) {
        let id = Self.encoded(re)
        let head =
            id.map { ReplyParts.head.utf8CodeUnitCount + $0.count + ReplyParts.successfulMiddle.utf8CodeUnitCount }
            ?? ReplyParts.nullHead.utf8CodeUnitCount
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: head + count + ReplyParts.tail.utf8CodeUnitCount) { room in
            var cursor = room.baseAddress!
            writeReply(id: id) { bytes in
                guard let start = bytes.baseAddress else { return }
                cursor.copyMemory(from: start, byteCount: bytes.count)
                cursor += bytes.count
            }
            return cursor - room.baseAddress!
        }
    }

    /// The reply's parts in order; `id` is `re` encoded, `nil` for an inline command
    /// (no id of its own: its head up to the result is one constant).
    private func writeReply(id: [UInt8]?, _ write: (UnsafeRawBufferPointer) -> Void) {
        if let id {
            write(ReplyParts.bytes(ReplyParts.head))
            id.withUnsafeBytes(write)
            write(ReplyParts.bytes(ReplyParts.successfulMiddle))
        } else {
            write(ReplyParts.bytes(ReplyParts.nullHead))
        }
        if let constant {
            write(ReplyParts.bytes(constant))
        } else {
            for part in parts { part.withUnsafeBytes(write) }
        }
        write(ReplyParts.bytes(ReplyParts.tail))
    }

    private static func encoded(_ re: JSON) -> [UInt8]? {
        guard !re.isNull else { return nil }
        var id: [UInt8] = []
        re.write(into: &id)
        return id
    }

    /// The result as a tree (a reply to a connection that takes messages, a test).
    var json: JSON {
        let bytes = constant.map { Array(UnsafeRawBufferPointer(start: $0.utf8Start, count: $0.utf8CodeUnitCount)) } ?? parts.flatMap { $0 }
        return bytes.withUnsafeBufferPointer { (try? JSONParser.parse($0)) ?? .null }
    }

    /// The reply's whole line, as ``writeReply(re:_:)`` writes it (for a recording).
    func replyLine(re: JSON) -> [UInt8] {
        var line: [UInt8] = []
        writeReply(re: re) { line.append(contentsOf: $0) }
        return line
    }
}

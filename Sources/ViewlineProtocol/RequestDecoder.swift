import Foundation

/// Turns one framed line (without its line ending) into a ``Request``.
///
/// A line whose first non-blank byte is `{` is the JSON form (`cmd` and `args`, or an
/// inline `line`, with an `id`); anything else is an inline command. Blank lines give
/// `nil` and are ignored.
public enum RequestDecoder {
    /// A line that is not a valid command: the error reply to send.
    public struct Failure: Error, Sendable, Equatable {
        /// The id to echo: the JSON form's id when it could be read, else `null`.
        public var re: JSON
        /// What is wrong with the line.
        public var error: ProtocolError
    }

    /// Most words in an inline command (its name included).
    public static let maximumWords = 1024

    /// The request a line of bytes holds, checked against `commands`; the failure to
    /// answer when it holds none; `nil` for a blank line.
    public static func decode(line bytes: some Collection<UInt8>, commands: CommandTable) -> Result<Request, Failure>? {
        if let decoded = bytes.withContiguousStorageIfAvailable({ decode(buffer: $0, commands: commands) }) {
            return decoded
        }
        return Array(bytes).withUnsafeBufferPointer { decode(buffer: $0, commands: commands) }
    }

    /// Decodes a line given as its bytes in place (a framed line read straight from
    /// the connection's buffer).
    public static func decode(buffer: UnsafeBufferPointer<UInt8>, commands: CommandTable) -> Result<Request, Failure>? {
        var start = buffer.startIndex
        var end = buffer.endIndex
        if end > start && buffer[end - 1] == UInt8(ascii: "\r") { end -= 1 }
        while start < end && (buffer[start] == 0x20 || buffer[start] == 0x09) { start += 1 }
        while end > start && (buffer[end - 1] == 0x20 || buffer[end - 1] == 0x09) { end -= 1 }
        if start == end { return nil }
        let line = UnsafeBufferPointer(rebasing: buffer[start..<end])
        var ascii = true
        var quoted = false
        for byte in line {
            if byte >= 0x80 { ascii = false }
            if byte == UInt8(ascii: "\"") { quoted = true }
        }
        if !ascii && String(validating: line, as: UTF8.self) == nil {
            return .failure(Failure(re: .null, error: ProtocolError(.badEncoding, "the line is not valid UTF-8")))
        }
        if line.first == UInt8(ascii: "{") {
            return decodeJSON(line, commands: commands)
        }
        do {
            // Without quotes a word is a run of bytes between blanks (the common case,
            // split without building characters), and the command is found from its
            // name's bytes; with them, the full tokenizer.
            if !quoted, let request = try bareRequest(line, commands: commands) { return .success(request) }
            let words = quoted ? try InlineTokenizer.split(String(decoding: line, as: UTF8.self)) : splitBare(line)
            if words.isEmpty { return nil }
            return .success(try request(words: words, commands: commands))
        } catch {
            return .failure(Failure(re: .null, error: error))
        }
    }

    /// A line without quotes whose first word names a command: the name is looked up
    /// by its bytes, and only the words after it become strings. `nil` when the first
    /// word names none (the general path reports it).
    private static func bareRequest(_ line: UnsafeBufferPointer<UInt8>, commands: CommandTable) throws(ProtocolError) -> Request? {
        var end = line.startIndex  // the line starts with a non-blank byte
        while end < line.endIndex && !isBlank(line[end]) { end += 1 }
        guard let index = commands.index(ofName: UnsafeBufferPointer(rebasing: line[..<end])) else { return nil }
        let words = splitBare(UnsafeBufferPointer(rebasing: line[end...]))
        guard words.count < maximumWords else {
            throw ProtocolError(.badRequest, "the command is too complex: more than \(maximumWords) words (PROTOCOL §8)")
        }
        return try commands.request(command: index, words: words)
    }

    private static func isBlank(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0D || byte == 0x0A
    }

    /// The request inline words stand for (the first is the command's name), within
    /// the word limit: for an inline line and for the JSON line form alike.
    private static func request(words: [String], commands: CommandTable) throws(ProtocolError) -> Request {
        guard words.count <= maximumWords else {
            throw ProtocolError(.badRequest, "the command is too complex: more than \(maximumWords) words (PROTOCOL §8)")
        }
        return try commands.request(words: words)  // no words: `unknown_command`, "empty command"
    }

    /// Words separated by spaces, tabs, `\r` or `\n`, for a line without quotes:
    /// what ``InlineTokenizer/split(_:)`` gives for it.
    private static func splitBare(_ line: UnsafeBufferPointer<UInt8>) -> [String] {
        var words: [String] = []
        var wordStart: Int? = nil
        for index in line.indices {
            if isBlank(line[index]) {
                if let begin = wordStart {
                    words.append(String(decoding: UnsafeBufferPointer(rebasing: line[begin..<index]), as: UTF8.self))
                    wordStart = nil
                }
            } else if wordStart == nil {
                wordStart = index
            }
        }
        if let begin = wordStart {
            words.append(String(decoding: UnsafeBufferPointer(rebasing: line[begin...]), as: UTF8.self))
        }
        return words
    }

    /// The request `line` holds, checked against `commands`; the failure to answer
    /// when it holds none; `nil` for a blank line.
    public static func decode(line: String, commands: CommandTable) -> Result<Request, Failure>? {
        decode(line: Array(line.utf8), commands: commands)
    }

    /// `{"id":7,"line":"add buy milk"}`: an inline line with an id, so a client can send
    /// any command as a person types it (parsed here, by the command's declaration)
    /// and still match the reply by `re`.
    private static func decodeLine(_ inline: JSON, id: JSON, keys: some Sequence<String>, commands: CommandTable) -> Result<Request, Failure> {
        for key in keys where key != "id" && key != "line" {
            return .failure(Failure(re: id, error: ProtocolError(.badJSON, "unexpected key \"\(key)\"; a line command has id and line")))
        }
        guard let text = inline.stringValue else {
            return .failure(Failure(re: id, error: ProtocolError(.badJSON, "line must be a string")))
        }
        do throws(ProtocolError) {
            var request = try request(words: try InlineTokenizer.split(text), commands: commands)
            request.id = id
            return .success(request)
        } catch {
            return .failure(Failure(re: id, error: error))
        }
    }

    private static func decodeJSON(_ bytes: UnsafeBufferPointer<UInt8>, commands: CommandTable) -> Result<Request, Failure> {
        let value: JSON
        do {
            value = try JSONParser.parse(bytes, limits: .request)
        } catch .tooComplex(let what) {
            return .failure(Failure(re: .null, error: ProtocolError(.badRequest, "the command is too complex: \(what) (PROTOCOL §8)")))
        } catch {
            return .failure(Failure(re: .null, error: ProtocolError(.badJSON, "malformed JSON")))
        }
        guard let object = value.objectValue else {
            return .failure(Failure(re: .null, error: ProtocolError(.badJSON, "a JSON command must be an object")))
        }
        var id: JSON = .null
        if let raw = object["id"] {
            switch raw {
            case .string, .int, .double, .number, .null: id = raw
            default:
                return .failure(Failure(re: .null, error: ProtocolError(.badJSON, "id must be a string or a number")))
            }
        }
        if let inline = object["line"], object["cmd"] == nil {
            return decodeLine(inline, id: id, keys: object.keys, commands: commands)
        }
        guard let name = object["cmd"]?.stringValue else {
            return .failure(Failure(re: id, error: ProtocolError(.badJSON, "a JSON command needs a string \"cmd\" (or an inline \"line\")")))
        }
        for key in object.keys where !["id", "cmd", "args"].contains(key) {
            return .failure(
                Failure(re: id, error: ProtocolError(.badJSON, "unexpected key \"\(key)\"; a JSON command has id, cmd and args, or id and line")))
        }
        var args = JSONObject()
        if let raw = object["args"], !raw.isNull {
            guard let object = raw.objectValue else {
                return .failure(Failure(re: id, error: ProtocolError(.badArguments, "args must be an object")))
            }
            args = object
        }
        do {
            return .success(try commands.request(id: id, name: name, args: args))
        } catch {
            return .failure(Failure(re: id, error: error))
        }
    }
}

import Foundation

/// Turns one framed line (without its line ending) into a ``Request``.
///
/// A line whose first non-blank byte is `{` is the JSON form; anything else is an
/// inline command. Blank lines give `nil` and are ignored.
public enum RequestDecoder {
    public struct Failure: Error, Sendable, Equatable {
        /// The id to echo: the JSON form's id when it could be read, else `null`.
        public var re: JSON
        public var error: ProtocolError
    }

    public static func decode(line bytes: some Collection<UInt8>, commands: CommandTable) -> Result<Request, Failure>? {
        var slice = Array(bytes)[...]
        if slice.last == UInt8(ascii: "\r") { slice.removeLast() }
        while let first = slice.first, first == 0x20 || first == 0x09 { slice.removeFirst() }
        while let last = slice.last, last == 0x20 || last == 0x09 { slice.removeLast() }
        if slice.isEmpty { return nil }
        guard let text = String(validating: slice, as: UTF8.self) else {
            return .failure(Failure(re: .null, error: ProtocolError(.badEncoding, "the line is not valid UTF-8")))
        }
        if slice.first == UInt8(ascii: "{") {
            return decodeJSON(slice, commands: commands)
        }
        do {
            let words = try InlineTokenizer.split(text)
            if words.isEmpty { return nil }
            return .success(try commands.request(words: words))
        } catch {
            return .failure(Failure(re: .null, error: error))
        }
    }

    public static func decode(line: String, commands: CommandTable) -> Result<Request, Failure>? {
        decode(line: Array(line.utf8), commands: commands)
    }

    private static func decodeJSON(_ bytes: ArraySlice<UInt8>, commands: CommandTable) -> Result<Request, Failure> {
        let value: JSON
        do {
            value = try JSON.parse(bytes)
        } catch {
            return .failure(Failure(re: .null, error: ProtocolError(.badJSON, "malformed JSON")))
        }
        guard let object = value.objectValue else {
            return .failure(Failure(re: .null, error: ProtocolError(.badJSON, "a JSON command must be an object")))
        }
        var id: JSON = .null
        if let raw = object["id"] {
            switch raw {
            case .string, .int, .double, .null: id = raw
            default:
                return .failure(Failure(re: .null, error: ProtocolError(.badJSON, "id must be a string or a number")))
            }
        }
        guard let name = object["cmd"]?.stringValue else {
            return .failure(Failure(re: id, error: ProtocolError(.badJSON, "a JSON command needs a string \"cmd\"")))
        }
        for key in object.keys where !["id", "cmd", "args"].contains(key) {
            return .failure(Failure(re: id, error: ProtocolError(.badJSON, "unexpected key \"\(key)\"; a JSON command has id, cmd and args")))
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

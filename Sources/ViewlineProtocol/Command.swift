/// One command as received, after framing and parsing: its client-chosen id, its
/// canonical name and its arguments in JSON form, checked against the command's
/// declaration (``CommandSpec``) — the one shape both the inline and the JSON form become.
public struct Request: Sendable, Equatable {
    /// Echoed as `re` in the reply: the JSON form's `id`, or `null` for inline lines.
    public var id: JSON
    /// The command's name as declared (lowercase), whatever case the client used.
    public var name: String
    public var arguments: Arguments

    public init(id: JSON = .null, name: String, arguments: Arguments = Arguments()) {
        self.id = id
        self.name = name
        self.arguments = arguments
    }
}

/// A command's arguments, already checked against its declaration: a required
/// argument is present and every value has its declared type.
public struct Arguments: Sendable, Equatable {
    public let json: JSONObject

    public init(_ json: JSONObject = JSONObject()) { self.json = json }

    /// A word or text argument; `""` when an optional one was not given.
    public func string(_ name: String) -> String { json[name]?.stringValue ?? "" }

    /// A word or text argument, or `nil` when it was not given.
    public func optionalString(_ name: String) -> String? { json[name]?.stringValue }

    /// An integer argument, or `nil` when it was not given.
    public func int(_ name: String) -> Int? { json[name]?.intValue }

    /// A `name=value` fields argument (empty when none were given).
    public func fields(_ name: String) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in json[name]?.objectValue?.pairs ?? [] { fields[pair.key] = pair.value.stringValue }
        return fields
    }
}

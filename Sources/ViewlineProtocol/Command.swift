/// One command as received, after framing and parsing: its client-chosen id, its
/// canonical name and its arguments in JSON form, checked against the command's
/// declaration (``CommandSpec``) — the one shape both the inline and the JSON form become.
public struct Request: Sendable, Equatable {
    /// Echoed as `re` in the reply: the JSON form's `id`, or `null` for inline lines.
    public var id: JSON
    /// The command's name as declared (lowercase), whatever case the client used.
    public var name: String
    /// Its arguments, checked against the command's declaration.
    public var arguments: Arguments
    /// Where the command is in the ``CommandTable`` that decoded it (``CommandTable/all``),
    /// so a server finds its handler without looking the name up again; `nil` for a
    /// request made by hand.
    public var command: Int?

    /// A request for `name` with `arguments`, answered with `id` as `re`.
    public init(id: JSON = .null, name: String, arguments: Arguments = Arguments()) {
        self.id = id
        self.name = name
        self.arguments = arguments
    }

    /// The same command: id, name and arguments (however it was made).
    public static func == (lhs: Request, rhs: Request) -> Bool {
        lhs.id == rhs.id && lhs.name == rhs.name && lhs.arguments == rhs.arguments
    }

    /// A request decoded by a ``CommandTable``: its command at `command` in ``CommandTable/all``.
    public init(id: JSON = .null, command: Int, name: String, arguments: Arguments) {
        self.init(id: id, name: name, arguments: arguments)
        self.command = command
    }
}

/// A command's arguments, already checked against its declaration: a required
/// argument is present and every value has its declared type.
public struct Arguments: Sendable, Equatable {
    /// The arguments as JSON `args`, by declared name.
    public let json: JSONObject

    /// Arguments already checked (or none): `RequestDecoder` makes them from a line.
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

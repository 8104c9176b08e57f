/// The commands a server understands, in the order `help` lists them, looked up
/// by name case-insensitively. Built once per server from its declarations.
public struct CommandTable: Sendable {
    public let all: [CommandSpec]
    private let byName: [String: CommandSpec]

    /// - Precondition: no two commands share a name.
    public init(_ specs: [CommandSpec]) {
        all = specs
        byName = Dictionary(specs.map { ($0.name, $0) }) { first, _ in
            preconditionFailure("two commands are named \"\(first.name)\"")
        }
    }

    public func spec(named name: String) -> CommandSpec? {
        // Names are lowercase ASCII: a name already in that form skips Unicode lowercasing.
        if name.utf8.allSatisfy({ $0 < 0x80 && !(UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) }) { return byName[name] }
        return byName[name.lowercased()]
    }

    func lookup(_ name: String) throws(ProtocolError) -> CommandSpec {
        guard let spec = spec(named: name) else {
            throw ProtocolError(.unknownCommand, "unknown command \"\(name)\"; try help")
        }
        return spec
    }

    /// Builds a request from a command name and JSON arguments (the JSON form).
    public func request(id: JSON = .null, name: String, args: JSONObject) throws(ProtocolError) -> Request {
        let spec = try lookup(name)
        return Request(id: id, name: spec.name, arguments: try spec.check(args))
    }

    /// Maps inline words to the command's name and JSON `args`, without checking
    /// the values: what the shared test vectors record for each line.
    public func inlineArguments(words: [String]) throws(ProtocolError) -> (name: String, args: JSONObject) {
        let (spec, args) = try inlineParts(words)
        return (spec.name, args)
    }

    /// Builds a request from inline words (the first is the command name).
    public func request(words: [String]) throws(ProtocolError) -> Request {
        let (spec, args) = try inlineParts(words)  // one lookup: the same spec maps and checks
        return Request(id: .null, name: spec.name, arguments: try spec.check(args))
    }

    private func inlineParts(_ words: [String]) throws(ProtocolError) -> (spec: CommandSpec, args: JSONObject) {
        guard let name = words.first else { throw ProtocolError(.unknownCommand, "empty command") }
        let spec = try lookup(name)
        return (spec, try spec.inlineArguments(Array(words.dropFirst())))
    }
}

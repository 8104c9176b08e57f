/// Everything the protocol knows about one command: its name, usage, summary,
/// example and declared arguments. Inline words and JSON `args` are both mapped and
/// checked here, so a handler only ever sees well-formed ``Arguments``.
public struct CommandSpec: Sendable, Equatable {
    /// The command's name, lowercase (commands match case-insensitively).
    public var name: String
    /// The usage line: `search <query>`, `saved [page]`.
    public var usage: String
    /// What the command does, in one sentence, for `help`.
    public var summary: String
    /// One inline line that uses the command, as a person would type it.
    public var example: String
    /// Its arguments, in inline order.
    public var arguments: [Argument]
    /// Whether only a server started with admin commands runs it (`fault`).
    public var adminOnly: Bool
    /// Whether an admin command also runs for a connection that gave the server's
    /// inspector token (`inspector <token>`): the inspector's, which only read
    /// (`inspect`, `info`).
    public var opensToInspector: Bool
    /// Whether a page may send the command as the person types (debounced): its
    /// view-model lets the latest one win (`help`'s `live: true`, protocol 1.2).
    public var isLive: Bool
    /// Whether the command fetches the next page of its view's list (`help`'s
    /// `paging: true`, protocol 1.2): a page draws it as "Load more" under the list.
    public var isPaging: Bool
    /// Whether the command is its view's main action (`help`'s `primary: true`,
    /// protocol 1.3): a page draws it first in the view's card, as the prominent
    /// button (`add` of a to-do list, `save` of a draft). At most one per view.
    public var isPrimary: Bool
    /// The view whose view-model declares the command; `nil` for the built-ins.
    public var view: String?

    /// A command declaration: the usage line is made from `arguments` unless given,
    /// and the example is the bare name unless given. `inspector`: an admin command
    /// the inspector token opens too.
    public init(
        _ name: String, summary: String, arguments: [Argument] = [], example: String? = nil,
        usage: String? = nil, adminOnly: Bool = false, inspector: Bool = false, live: Bool = false, paging: Bool = false,
        primary: Bool = false
    ) {
        self.name = name.lowercased()
        self.summary = summary
        self.arguments = arguments
        self.example = example ?? name
        self.usage = usage ?? ([name] + arguments.map(\.usage)).joined(separator: " ")
        self.adminOnly = adminOnly
        opensToInspector = inspector
        isLive = live
        isPaging = paging
        isPrimary = primary
    }

    /// The JSON `args` keys this command accepts.
    public var argumentNames: [String] { arguments.map(\.name) }

    /// The command's entry in `help`: `args` (the names, as protocol 1.0 had them),
    /// `arguments` (each one's kind, bounds and whether it is required or secret) and
    /// `view` (the view-model that declares it; `builtin` for the server's own).
    public var json: JSON {
        var object: JSONObject = ["name": .string(name), "usage": .string(usage), "summary": .string(summary)]
        object["args"] = .array(argumentNames.map { .string($0) })
        object["arguments"] = .array(arguments.map(\.json))
        object["example"] = .string(example)
        if let view { object["view"] = .string(view) } else { object["builtin"] = true }
        if adminOnly { object["admin"] = true }
        if isLive { object["live"] = true }
        if isPaging { object["paging"] = true }
        if isPrimary { object["primary"] = true }
        return .object(object)
    }

    func usageError(_ detail: String? = nil) -> ProtocolError {
        ProtocolError(.badArguments, (detail.map { "\($0); " } ?? "") + "usage: \(usage)")
    }

    // MARK: - Inline words → JSON args

    /// Maps the words after the command name to JSON `args`, without checking
    /// values beyond what the words themselves decide.
    public func inlineArguments(_ words: [String]) throws(ProtocolError) -> JSONObject {
        var args = JSONObject()
        var rest = words[...]
        for (index, argument) in arguments.enumerated() {
            let next = arguments.dropFirst(index + 1).first
            switch argument.kind {
            case .word:
                guard let word = rest.first else { continue }
                // An optional word before `name=value` fields is only a word without `=`.
                if !argument.isRequired, next?.kind == .fields, word.contains("=") { continue }
                args[argument.name] = .string(word)
                rest = rest.dropFirst()
            case .text:
                if !rest.isEmpty { args[argument.name] = .string(rest.joined(separator: " ")) }
                rest = []
            case .integer(_, _, let unit):
                guard let word = rest.first else { continue }
                if let value = Int(word) {
                    args[argument.name] = .int(value)
                    rest = rest.dropFirst()
                } else if next?.kind != .text {
                    throw usageError("\(argument.name) must be a number\(unit.map { " of \($0)" } ?? "")")
                }
            case .fields:
                var fields = JSONObject()
                for word in rest {
                    guard let eq = word.firstIndex(of: "=") else { throw usageError("expected name=value, got \"\(word)\"") }
                    let name = String(word[..<eq])
                    guard !name.isEmpty else { throw usageError("a field needs a name") }
                    fields[name] = .string(String(word[word.index(after: eq)...]))
                }
                if !fields.isEmpty { args[argument.name] = .object(fields) }
                rest = []
            }
        }
        guard rest.isEmpty else {
            throw arguments.isEmpty ? usageError("\(name) takes no arguments") : usageError()
        }
        return args
    }

    // MARK: - JSON args → Arguments

    /// Checks JSON `args` against the declaration: no unknown keys, required
    /// arguments present, every value of its declared type.
    public func check(_ args: JSONObject) throws(ProtocolError) -> Arguments {
        for key in args.keys where !arguments.contains(where: { $0.name == key }) {
            throw usageError("unexpected argument \"\(key)\"")
        }
        var checked = JSONObject()
        for argument in arguments {
            guard let value = args[argument.name], !value.isNull else {
                if argument.isRequired { throw usageError("missing \(argument.name)") }
                continue
            }
            switch argument.kind {
            case .word, .text:
                guard let string = value.stringValue else { throw usageError("\(argument.name) must be a string") }
                if argument.isRequired, !argument.allowsEmpty, string.allSatisfy({ $0 == " " || $0 == "\t" }) {
                    throw usageError("\(argument.name) must not be empty")
                }
            case .integer(let minimum, let maximum, _):
                guard let number = value.intValue, number >= minimum, number <= maximum else {
                    throw usageError(
                        maximum == Argument.largestSafeInteger
                            ? (minimum == 0
                                ? "\(argument.name) must be a non-negative integer"
                                : "\(argument.name) must be an integer of at least \(minimum)")
                            : "\(argument.name) must be an integer from \(minimum) to \(maximum)")
                }
            case .fields:
                guard let object = value.objectValue else { throw usageError("\(argument.name) must be an object of strings") }
                for pair in object.pairs where pair.value.stringValue == nil {
                    throw usageError("field \(pair.key) must be a string")
                }
            }
            checked[argument.name] = value
        }
        return Arguments(checked)
    }
}

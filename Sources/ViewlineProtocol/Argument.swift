/// One declared argument of a command. From the declarations alone a command gets
/// its usage line, its inline parsing, its JSON `args` checking and its `help` entry.
public struct Argument: Sendable, Equatable {
    /// What an argument takes, which decides how it is parsed inline and checked in JSON.
    public enum Kind: Sendable, Equatable {
        /// One word (`login <user> …`).
        case word
        /// All remaining words joined by single spaces (`search <query>`).
        case text
        /// An integer from `minimum` to `maximum`, both included; `unit` names it in errors
        /// ("a number of milliseconds"). The bounds are checked before any handler runs, so a
        /// handler's arithmetic on the value never overflows.
        case integer(minimum: Int, maximum: Int, unit: String?)
        /// Any number of `name=value` words, an object of strings in JSON (`confirm … user=alice`).
        case fields
    }

    /// The key in JSON `args`.
    public var name: String
    /// What it takes.
    public var kind: Kind
    /// Whether a command without it is refused with `bad_arguments`.
    public var isRequired: Bool
    /// Whether a required word or text may be empty (`""`), as a password may.
    public var allowsEmpty: Bool
    /// How the usage line shows it: `<query>`, `[view]`.
    public var placeholder: String
    /// A secret (a password): clients hide it as it is typed and in their logs.
    public var isSecure: Bool
    /// What the argument is, in a few words, for `help` and a client's form
    /// (`"what to look for: a cuisine, a dish or a place"`); see ``described(_:)``.
    public var summary: String?

    /// An argument as declared; the static builders (`.word("user")`, `.text("query")`,
    /// `.optionalInteger("page", minimum: 1)`, …) are the usual way to make one.
    public init(name: String, kind: Kind, isRequired: Bool, allowsEmpty: Bool = false, placeholder: String? = nil, isSecure: Bool = false) {
        self.name = name
        self.kind = kind
        self.isRequired = isRequired
        self.allowsEmpty = allowsEmpty
        self.placeholder = placeholder ?? name
        self.isSecure = isSecure
    }

    /// This argument with a short description (`.text("query").described("a cuisine, a dish or a place")`).
    public func described(_ summary: String) -> Argument {
        var described = self
        described.summary = summary
        return described
    }

    /// A required word: `<name>`; `secure` for a secret such as a password.
    public static func word(_ name: String, allowsEmpty: Bool = false, placeholder: String? = nil, secure: Bool = false) -> Argument {
        Argument(name: name, kind: .word, isRequired: true, allowsEmpty: allowsEmpty, placeholder: placeholder, isSecure: secure)
    }

    /// An optional word: `[name]`.
    public static func optionalWord(_ name: String, placeholder: String? = nil) -> Argument {
        Argument(name: name, kind: .word, isRequired: false, placeholder: placeholder)
    }

    /// The rest of the line, required and not blank: `<name>`.
    public static func text(_ name: String, placeholder: String? = nil) -> Argument {
        Argument(name: name, kind: .text, isRequired: true, placeholder: placeholder)
    }

    /// The rest of the line, if any: `[name]`.
    public static func optionalText(_ name: String, placeholder: String? = nil) -> Argument {
        Argument(name: name, kind: .text, isRequired: false, placeholder: placeholder)
    }

    /// An optional integer (`[count]`) from `minimum` to `maximum`. Before a text argument it
    /// is taken only when the word is a number; otherwise the word must be one. The default
    /// maximum, 2^53 − 1, is the largest integer every client (JavaScript too) holds exactly.
    public static func optionalInteger(
        _ name: String, minimum: Int = 0, maximum: Int = Argument.largestSafeInteger, unit: String? = nil, placeholder: String? = nil
    ) -> Argument {
        precondition(minimum <= maximum, "\(name): minimum \(minimum) above maximum \(maximum)")
        return Argument(name: name, kind: .integer(minimum: minimum, maximum: maximum, unit: unit), isRequired: false, placeholder: placeholder)
    }

    /// 2^53 − 1: the largest integer a JSON number keeps exactly in every client.
    public static let largestSafeInteger = 9_007_199_254_740_991

    /// `name=value` words: `[name=value ...]`.
    public static func fields(_ name: String) -> Argument {
        Argument(name: name, kind: .fields, isRequired: false, placeholder: "name=value ...")
    }

    /// This argument in `help` (protocol 1.2): what a client needs to draw a typed input
    /// for it and check it before sending, without knowing the command.
    public var json: JSON {
        var object: JSONObject = ["name": .string(name)]
        switch kind {
        case .word: object["kind"] = "word"
        case .text: object["kind"] = "text"
        case .fields: object["kind"] = "fields"
        case .integer(let minimum, let maximum, let unit):
            object["kind"] = "integer"
            object["minimum"] = .int(minimum)
            object["maximum"] = .int(maximum)
            if let unit { object["unit"] = .string(unit) }
        }
        object["required"] = .bool(isRequired)
        if isRequired, allowsEmpty { object["allowsEmpty"] = true }
        if isSecure { object["secure"] = true }
        if placeholder != name { object["placeholder"] = .string(placeholder) }
        if let summary { object["summary"] = .string(summary) }
        return .object(object)
    }

    /// How the usage line shows this argument.
    public var usage: String {
        if kind == .fields { return "[\(placeholder)]" }
        return isRequired ? "<\(placeholder)>" : "[\(placeholder)]"
    }
}

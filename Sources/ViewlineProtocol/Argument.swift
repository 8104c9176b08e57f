/// One declared argument of a command. From the declarations alone a command gets
/// its usage line, its inline parsing, its JSON `args` checking and its `help` entry.
public struct Argument: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        /// One word (`login <user> …`).
        case word
        /// All remaining words joined by single spaces (`search <query>`).
        case text
        /// An integer no smaller than `minimum`; `unit` names it in errors ("a number of milliseconds").
        case integer(minimum: Int, unit: String?)
        /// Any number of `name=value` words, an object of strings in JSON (`confirm … user=alice`).
        case fields
    }

    /// The key in JSON `args`.
    public var name: String
    public var kind: Kind
    public var isRequired: Bool
    /// Whether a required word or text may be empty (`""`), as a password may.
    public var allowsEmpty: Bool
    /// How the usage line shows it: `<query>`, `[view]`.
    public var placeholder: String

    public init(name: String, kind: Kind, isRequired: Bool, allowsEmpty: Bool = false, placeholder: String? = nil) {
        self.name = name
        self.kind = kind
        self.isRequired = isRequired
        self.allowsEmpty = allowsEmpty
        self.placeholder = placeholder ?? name
    }

    /// A required word: `<name>`.
    public static func word(_ name: String, allowsEmpty: Bool = false, placeholder: String? = nil) -> Argument {
        Argument(name: name, kind: .word, isRequired: true, allowsEmpty: allowsEmpty, placeholder: placeholder)
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

    /// An optional integer (`[count]`). Before a text argument it is taken only when
    /// the word is a number; otherwise the word must be one.
    public static func optionalInteger(_ name: String, minimum: Int = 0, unit: String? = nil, placeholder: String? = nil) -> Argument {
        Argument(name: name, kind: .integer(minimum: minimum, unit: unit), isRequired: false, placeholder: placeholder)
    }

    /// `name=value` words: `[name=value ...]`.
    public static func fields(_ name: String) -> Argument {
        Argument(name: name, kind: .fields, isRequired: false, placeholder: "name=value ...")
    }

    /// How the usage line shows this argument.
    public var usage: String {
        if kind == .fields { return "[\(placeholder)]" }
        return isRequired ? "<\(placeholder)>" : "[\(placeholder)]"
    }
}

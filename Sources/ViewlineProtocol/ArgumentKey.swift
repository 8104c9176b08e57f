/// An argument declared once and read through: the token a command lists in its
/// declaration (`arguments: [query.argument]`) and reads its value with
/// (`args[query]`), typed by what the argument takes. A misspelt token does not
/// compile, where a misspelt name (`args.string("qeury")`) read `""`.
///
/// ```swift
/// static let query = ArgumentKey.text("query").described("what to look for")
/// static let commands: [Command<Search>] = [
///     Command("search", summary: "Search places.", arguments: [query.argument]) { session, args in
///         let text: String = args[query]
///         …
///     }
/// ]
/// ```
public struct ArgumentKey<Value: Sendable>: Sendable {
    /// The declaration: what `help`, the inline parsing and the JSON checking use.
    public let argument: Argument
    @usableFromInline let read: @Sendable (Arguments) -> Value

    private init(_ argument: Argument, read: @escaping @Sendable (Arguments) -> Value) {
        self.argument = argument
        self.read = read
    }

    /// The same token with a short description for `help` and a client's form.
    public func described(_ summary: String) -> ArgumentKey {
        ArgumentKey(argument.described(summary), read: read)
    }
}

extension ArgumentKey where Value == String {
    /// A required word: `<name>`; `secure` for a secret such as a password.
    public static func word(_ name: String, allowsEmpty: Bool = false, placeholder: String? = nil, secure: Bool = false) -> ArgumentKey {
        ArgumentKey(.word(name, allowsEmpty: allowsEmpty, placeholder: placeholder, secure: secure)) { $0.string(name) }
    }

    /// The rest of the line, required and not blank: `<name>`.
    public static func text(_ name: String, placeholder: String? = nil) -> ArgumentKey {
        ArgumentKey(.text(name, placeholder: placeholder)) { $0.string(name) }
    }
}

extension ArgumentKey where Value == String? {
    /// An optional word: `[name]`; `nil` when not given.
    public static func optionalWord(_ name: String, placeholder: String? = nil) -> ArgumentKey {
        ArgumentKey(.optionalWord(name, placeholder: placeholder)) { $0.optionalString(name) }
    }

    /// The rest of the line, if any: `[name]`; `nil` when not given.
    public static func optionalText(_ name: String, placeholder: String? = nil) -> ArgumentKey {
        ArgumentKey(.optionalText(name, placeholder: placeholder)) { $0.optionalString(name) }
    }
}

extension ArgumentKey where Value == Int? {
    /// An optional integer (`[count]`) from `minimum` to `maximum`, both checked before
    /// any handler runs; `nil` when not given.
    public static func optionalInteger(
        _ name: String, minimum: Int = 0, maximum: Int = Argument.largestSafeInteger, unit: String? = nil, placeholder: String? = nil
    ) -> ArgumentKey {
        ArgumentKey(.optionalInteger(name, minimum: minimum, maximum: maximum, unit: unit, placeholder: placeholder)) { $0.int(name) }
    }
}

extension ArgumentKey where Value == [String: String] {
    /// `name=value` words: `[name=value ...]`; empty when none were given.
    public static func fields(_ name: String) -> ArgumentKey {
        ArgumentKey(.fields(name)) { $0.fields(name) }
    }
}

extension Arguments {
    /// The value of a declared argument, typed by what it takes.
    @inlinable public subscript<Value>(_ key: ArgumentKey<Value>) -> Value { key.read(self) }
}

/// One command of a view-model: its declaration (name, summary, typed arguments,
/// example) and what it does.
///
/// `perform` runs on the session, in its isolation: it reads and updates states,
/// asks alerts, starts background work, and returns the reply's `result`. Throwing
/// a ``ProtocolError`` replies with its code and message; any other error replies
/// `internal_error` and the session goes on.
public struct Command<Model: ViewModel>: Sendable {
    /// The declaration: name, summary, arguments, example.
    public let spec: CommandSpec
    /// What the command does; its result is the reply's `result`.
    public let perform: @Sendable (isolated Session, Arguments) async throws -> JSON

    /// Declares a command: `arguments` become its inline and JSON forms, its usage and its `help` entry.
    public init(
        _ name: String, summary: String, arguments: [Argument] = [], example: String? = nil,
        adminOnly: Bool = false,
        perform: @escaping @Sendable (isolated Session, Arguments) async throws -> JSON
    ) {
        spec = CommandSpec(name, summary: summary, arguments: arguments, example: example, adminOnly: adminOnly)
        self.perform = perform
    }
}

/// A command with its view-model's type erased, as the runtime keeps it.
struct AnyCommand: Sendable {
    let spec: CommandSpec
    let perform: @Sendable (isolated Session, Arguments) async throws -> JSON
}

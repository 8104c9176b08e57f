/// One command of a view-model: its declaration (name, summary, typed arguments,
/// example) and what it does.
///
/// `perform` runs on the session, in its isolation: it reads and updates states,
/// asks alerts, starts background work, and returns the reply's `result`. Throwing
/// a `ProtocolError` replies with its code and message; any other error replies
/// `internal_error` and the session goes on.
///
/// A `perform` without `await` is synchronous (Swift picks that initializer for it):
/// the server then runs it in the read that brought the command, with no task and
/// no suspension, as most commands are (update a state, start work with
/// ``ViewSession/run(_:_:)``, reply). One that awaits (a database read, an alert's
/// answer) runs in a task on the session, the same order kept either way.
///
/// `live: true` says a page may send the command as the person types (a search
/// box): declare it only for a command whose work lets the latest one win
/// (``ViewSession/run(_:_:)`` in a ``TaskSlot``), so older results never follow newer ones.
/// `paging: true` says the command fetches the next page of the view's list: a page
/// draws it as "Load more" under the list (hidden while the state's `hasMore` is false).
/// `primary: true` marks the view's main action (at most one per view-model): a page
/// draws it first in the view's card, as the prominent button.
public struct Command<Model: ViewModel>: Sendable {
    /// The declaration: name, summary, arguments, example.
    public let spec: CommandSpec
    /// What the command does; its result is the reply's `result`.
    public let perform: @Sendable (isolated ViewSession<Model>, Arguments) async throws -> JSON
    /// `perform` when it never suspends.
    let performNow: (@Sendable (isolated ViewSession<Model>, Arguments) throws -> JSON)?

    /// Declares a command whose work awaits: `arguments` become its inline and JSON
    /// forms, its usage and its `help` entry.
    public init(
        _ name: String, summary: String, arguments: [Argument] = [], example: String? = nil,
        adminOnly: Bool = false, live: Bool = false, paging: Bool = false, primary: Bool = false,
        perform: @escaping @Sendable (isolated ViewSession<Model>, Arguments) async throws -> JSON
    ) {
        spec = CommandSpec(
            name, summary: summary, arguments: arguments, example: example, adminOnly: adminOnly, live: live, paging: paging, primary: primary)
        self.perform = perform
        performNow = nil
    }

    /// Declares a command whose work never suspends (no `await`): `arguments` become
    /// its inline and JSON forms, its usage and its `help` entry.
    public init(
        _ name: String, summary: String, arguments: [Argument] = [], example: String? = nil,
        adminOnly: Bool = false, live: Bool = false, paging: Bool = false, primary: Bool = false,
        perform: @escaping @Sendable (isolated ViewSession<Model>, Arguments) throws -> JSON
    ) {
        spec = CommandSpec(
            name, summary: summary, arguments: arguments, example: example, adminOnly: adminOnly, live: live, paging: paging, primary: primary)
        self.perform = perform
        performNow = perform
    }
}

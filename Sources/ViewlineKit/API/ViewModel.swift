/// A screen served remotely: a view name, a state the client is shown, and the
/// commands that change it.
///
/// A view-model is a declaration, like a `ParsableCommand`: the runtime derives the
/// inline parsing, JSON `args` checking, `help`, REPL completion and the docs from
/// ``commands``, keeps one ``State`` per session, and sends it as a `display` event
/// whenever a command or an effect calls ``ViewSession/update(display:_:)``.
///
/// ```swift
/// enum Counter: ViewModel {
///     struct State: Encodable, Sendable { var count = 0 }
///     static let view = "counter"
///     static let stateSummary = "{count}"
///     static func initialState(_ services: Services) -> State { State() }
///     static let commands: [Command<Counter>] = [
///         Command("increment", summary: "Add one.") { session, _ in
///             session.update { $0.count += 1 }
///             return ["count": .int(session.state.count)]
///         },
///     ]
/// }
/// ```
public protocol ViewModel: SendableMetatype {
    /// What the client is shown. Its `Encodable` form is the `display` event's `state`
    /// (keys in the order it encodes them); fields it does not encode stay on the server.
    /// An `Equatable` state must encode equal values alike: the runtime then encodes a
    /// state shown by many sessions (one database snapshot) once and shares the bytes.
    associatedtype State: Encodable & Sendable

    /// The view's name on the wire: `display`'s `view` and `state <view>`.
    static var view: String { get }
    /// The state's shape in one line, for `help` (`{query, loading, results}`).
    static var stateSummary: String { get }
    /// The state's booleans that are true while work is under way (`loading`,
    /// `saving`): `help` lists them, and clients show progress for those alone — a
    /// flag such as a draft's `pending` is a fact, not a spinner.
    static var busyFields: [String] { get }
    /// The state a new session starts with.
    static func initialState(_ services: Services) -> State
    /// The commands this view-model adds, in the order `help` lists them.
    static var commands: [Command<Self>] { get }
    /// Error codes this view-model's commands may reply with, for `help` and the docs.
    static var errors: [ErrorCode] { get }
    /// The backends it calls through ``ViewSession/call(_:_:)``: each must be in the
    /// server's ``Services``, is a target for `fault`, and is listed by `help`.
    static var backends: [any BackendKey.Type] { get }
    /// Called on every session after its user changed (``ViewSession/signIn(_:)``,
    /// ``ViewSession/signOut()``), in the order the server lists its view-models.
    static func userChanged(in session: isolated ViewSession<Self>, from previous: String?) async
    /// Called on a session restored from its record (its node restarted or died),
    /// after the user and every recorded state (``record``) came back; running work
    /// did not. Start again what must go on, from what the store holds.
    static func restored(in session: isolated ViewSession<Self>) async
    /// How the state is kept in the session's record, which a restart or a failover
    /// restores (``StateRecord``): by default its `Codable` form, version 1, when
    /// `State` is `Decodable`; `nil` — not recorded: after a restore the view starts at
    /// its initial state (`help` says which views are recorded).
    static var record: StateRecord<State>? { get }
}

extension ViewModel {
    /// No error codes of its own.
    public static var errors: [ErrorCode] { [] }
    /// No backends that `fault` can target.
    public static var backends: [any BackendKey.Type] { [] }
    /// No busy flags declared: clients guess from the field names.
    public static var busyFields: [String] { [] }
    /// Does nothing when the user changes.
    public static func userChanged(in session: isolated ViewSession<Self>, from previous: String?) async {}
    /// Does nothing after a restore.
    public static func restored(in session: isolated ViewSession<Self>) async {}
    /// Not recorded: a state that is not `Decodable` starts again after a restore.
    public static var record: StateRecord<State>? { nil }
}

extension ViewModel where State: Decodable {
    /// The state's `Codable` form, version 1; an unreadable record refuses the attach.
    public static var record: StateRecord<State>? { .codable() }
}

/// A backend as `help` and `fault` list it (a ``BackendKey``'s name and summary).
public struct Backend: Sendable, Equatable {
    /// The name `fault <name>` uses.
    public var name: String
    /// What the backend is, for `help`.
    public var summary: String

    /// A backend called `name`.
    public init(_ name: String, summary: String) {
        self.name = name
        self.summary = summary
    }
}

/// A command with its view-model's type erased, as the runtime keeps it: a class,
/// so finding a command's handler for each line costs one reference, not a copy of
/// its declaration and closures.
final class AnyCommand: Sendable {
    /// How a command runs, as its declaration says: the one thing the command path
    /// (``Session/begin(_:from:)``) reads to run it.
    enum Body: Sendable {
        /// Never suspends: runs in the read that brought it, reply and events included.
        case immediate(@Sendable (isolated Session, Arguments) throws -> JSON)
        /// Never suspends, and its result comes encoded (`state`: the states'
        /// encodings are kept for displays), so the reply copies bytes.
        case encoded(@Sendable (isolated Session, Arguments) throws -> EncodedResult)
        /// Awaits (a database, an alert's answer, the session's work), as `way` says.
        case awaiting(@Sendable (isolated Session, Arguments) async throws -> JSON, Awaiting)
        /// Moves the connection to another session (`attach`), which replies: the
        /// session the connection is on afterwards, or `nil` (it stays, answered).
        case moving(@Sendable (isolated Session, Request, CommandOrigin) async -> Session?)
    }

    /// How an awaiting command ends.
    enum Awaiting: Sendable {
        /// The events it causes wait for its reply.
        case holdingEvents
        /// Until the session's work settles (`wait`): the events of that work flow
        /// meanwhile, and its time is the one the client asked for (not slow-logged).
        case waiting
        /// Once it is acknowledged, the connection ends (`quit`).
        case ending
        /// Its events wait for its reply, as for ``holdingEvents``; a failure's time is
        /// the delay a wrong guess is made to wait (`inspector`), so it is neither
        /// slow-logged nor timed into the latency figures.
        case delayingFailures
    }

    let spec: CommandSpec
    let body: Body
    /// Whether the inspector's timeline must mask some of its arguments (a `secure`
    /// one, alert fields): decided once here, not on every command.
    let masksArguments: Bool
    /// How it ends when it awaits (`nil`: it does not), and whether it moves its
    /// connection: read from ``body`` once here, so the end of every command asks a
    /// flag instead of copying the body (whose closures every session shares, so
    /// each copy's retain is contended between the event loops).
    let awaiting: Awaiting?
    let moves: Bool
    /// Whether a session's recording keeps its runs: not what answers for the server
    /// rather than the session (`help`, the inspector's own commands) nor a move to
    /// another session (see SessionRecording.swift).
    let isRecorded: Bool
    /// Whether it was declared recorded (``isRecorded`` also asks the spec and body).
    private let recorded: Bool
    /// Keys of its result a recording masks (`end-others`' new `token`).
    let secretResults: Set<String>

    private init(spec: CommandSpec, body: Body, recorded: Bool = true, secretResults: Set<String> = []) {
        self.spec = spec
        self.body = body
        self.recorded = recorded
        self.secretResults = secretResults
        masksArguments = spec.arguments.contains { $0.isSecure || $0.kind == .fields }
        switch body {
        case .awaiting(_, let way): (awaiting, moves) = (way, false)
        case .moving: (awaiting, moves) = (nil, true)
        case .immediate, .encoded: (awaiting, moves) = (nil, false)
        }
        isRecorded = recorded && !spec.opensToInspector && !moves
    }

    /// This command, its runs left out of session recordings: what it answers is the
    /// server's, not the session's (`help`, `sessions`, `slowlog`: a replay on another
    /// node or build would differ there, about nothing the session did).
    func answeringForTheServer() -> AnyCommand {
        AnyCommand(spec: spec, body: body, recorded: false, secretResults: secretResults)
    }

    /// This command, the values of its result's `keys` masked in a recording (a
    /// token that opens the session: whoever may export it must not get in with it).
    func withSecretResults(_ keys: Set<String>) -> AnyCommand {
        AnyCommand(spec: spec, body: body, recorded: recorded, secretResults: keys)
    }

    /// A command that awaits, ending as `awaiting` says.
    convenience init(
        spec: CommandSpec, awaiting: Awaiting = .holdingEvents,
        perform: @escaping @Sendable (isolated Session, Arguments) async throws -> JSON
    ) {
        self.init(spec: spec, body: .awaiting(perform, awaiting))
    }

    /// A command that never suspends.
    convenience init(spec: CommandSpec, perform: @escaping @Sendable (isolated Session, Arguments) throws -> JSON) {
        self.init(spec: spec, body: .immediate(perform))
    }

    /// A command whose result comes encoded (not an initializer: a third
    /// trailing-closure candidate slowed type-checking the built-ins past its limit).
    static func encoding(spec: CommandSpec, _ perform: @escaping @Sendable (isolated Session, Arguments) throws -> EncodedResult) -> AnyCommand {
        AnyCommand(spec: spec, body: .encoded(perform))
    }

    /// A command that moves its connection to another session (`attach`).
    static func moving(spec: CommandSpec, _ move: @escaping @Sendable (isolated Session, Request, CommandOrigin) async -> Session?) -> AnyCommand {
        AnyCommand(spec: spec, body: .moving(move))
    }

    /// A view-model's command, run with the handle of its model.
    convenience init<Model>(_ command: Command<Model>) {
        if let performNow = command.performNow {
            self.init(spec: command.spec) { session, arguments in
                try ViewSession<Model>(session).entered { try performNow($0, arguments) }
            }
        } else {
            let perform = command.perform
            self.init(spec: command.spec) { session, arguments in try await perform(ViewSession<Model>(session), arguments) }
        }
    }

    /// Another object for the same command (see ``Application/handlers(on:)``).
    func copy() -> AnyCommand {
        AnyCommand(spec: spec, body: body, recorded: recorded, secretResults: secretResults)
    }

    /// The same command, declared as part of the view called `view`.
    func shown(in view: String) -> AnyCommand {
        var spec = spec
        spec.view = view
        return AnyCommand(spec: spec, body: body, recorded: recorded, secretResults: secretResults)
    }
}

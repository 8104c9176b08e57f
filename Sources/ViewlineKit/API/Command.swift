import NIOCore

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
/// ``Session/run(_:_:)``, reply). One that awaits (a database read, an alert's
/// answer) runs in a task on the session, the same order kept either way.
///
/// `live: true` says a page may send the command as the person types (a search
/// box): declare it only for a command whose work lets the latest one win
/// (``Session/run(_:_:)`` in a ``TaskSlot``), so older results never follow newer ones.
/// `paging: true` says the command fetches the next page of the view's list: a page
/// draws it as "Load more" under the list (hidden while the state's `hasMore` is false).
/// `primary: true` marks the view's main action (at most one per view-model): a page
/// draws it first in the view's card, as the prominent button.
public struct Command<Model: ViewModel>: Sendable {
    /// The declaration: name, summary, arguments, example.
    public let spec: CommandSpec
    /// What the command does; its result is the reply's `result`.
    public let perform: @Sendable (isolated Session, Arguments) async throws -> JSON
    /// `perform` when it never suspends.
    let performNow: (@Sendable (isolated Session, Arguments) throws -> JSON)?

    /// Declares a command whose work awaits: `arguments` become its inline and JSON
    /// forms, its usage and its `help` entry.
    public init(
        _ name: String, summary: String, arguments: [Argument] = [], example: String? = nil,
        adminOnly: Bool = false, live: Bool = false, paging: Bool = false, primary: Bool = false,
        perform: @escaping @Sendable (isolated Session, Arguments) async throws -> JSON
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
        perform: @escaping @Sendable (isolated Session, Arguments) throws -> JSON
    ) {
        spec = CommandSpec(
            name, summary: summary, arguments: arguments, example: example, adminOnly: adminOnly, live: live, paging: paging, primary: primary)
        self.perform = perform
        performNow = perform
    }
}

/// A command with its view-model's type erased, as the runtime keeps it: a class,
/// so finding a command's handler for each line costs one reference, not a copy of
/// its declaration and closures.
final class AnyCommand: Sendable {
    let spec: CommandSpec
    let perform: @Sendable (isolated Session, Arguments) async throws -> JSON
    /// `perform` when it never suspends: run without a task (see ``Session/handleNow(_:from:)``).
    let performNow: (@Sendable (isolated Session, Arguments) throws -> JSON)?
    /// `perform` giving its result already encoded (`state`: the states' encodings
    /// are kept for displays), so the reply copies bytes instead of writing a tree.
    let performEncoded: (@Sendable (isolated Session, Arguments) throws -> EncodedResult)?
    /// Whether the events the session sends while the command runs wait for its reply
    /// (every command's, so a reply comes before what it caused) — or flow on, as
    /// `wait`'s must: holding them would defeat its purpose.
    let holdsEvents: Bool
    /// Whether the connection closes after the reply (`quit`).
    let endsConnection: Bool

    private init(
        spec: CommandSpec, perform: @escaping @Sendable (isolated Session, Arguments) async throws -> JSON,
        performNow: (@Sendable (isolated Session, Arguments) throws -> JSON)?,
        performEncoded: (@Sendable (isolated Session, Arguments) throws -> EncodedResult)?, holdsEvents: Bool, endsConnection: Bool
    ) {
        self.spec = spec
        self.perform = perform
        self.performNow = performNow
        self.performEncoded = performEncoded
        self.holdsEvents = holdsEvents
        self.endsConnection = endsConnection
    }

    convenience init(
        spec: CommandSpec, holdsEvents: Bool = true, endsConnection: Bool = false,
        perform: @escaping @Sendable (isolated Session, Arguments) async throws -> JSON
    ) {
        self.init(spec: spec, perform: perform, performNow: nil, performEncoded: nil, holdsEvents: holdsEvents, endsConnection: endsConnection)
    }

    convenience init(spec: CommandSpec, perform: @escaping @Sendable (isolated Session, Arguments) throws -> JSON) {
        self.init(spec: spec, perform: perform, performNow: perform, performEncoded: nil, holdsEvents: true, endsConnection: false)
    }

    /// A command whose result comes encoded as well (not an initializer: a third
    /// trailing-closure candidate slowed type-checking the built-ins past its limit).
    static func encoding(spec: CommandSpec, _ performEncoded: @escaping @Sendable (isolated Session, Arguments) throws -> EncodedResult) -> AnyCommand
    {
        let perform: @Sendable (isolated Session, Arguments) throws -> JSON = { session, arguments in try performEncoded(session, arguments).json }
        return AnyCommand(spec: spec, perform: perform, performNow: perform, performEncoded: performEncoded, holdsEvents: true, endsConnection: false)
    }

    convenience init<Model>(_ command: Command<Model>) {
        self.init(
            spec: command.spec, perform: command.perform, performNow: command.performNow, performEncoded: nil, holdsEvents: true,
            endsConnection: false)
    }

    /// The same command, declared as part of the view called `view`.
    func shown(in view: String) -> AnyCommand {
        var spec = spec
        spec.view = view
        return AnyCommand(
            spec: spec, perform: perform, performNow: performNow, performEncoded: performEncoded, holdsEvents: holdsEvents,
            endsConnection: endsConnection)
    }
}

/// A command's result already encoded, as parts written one after another into the
/// reply, straight into the connection's outbound buffer (a view's state is one
/// part, kept encoded for displays; no copy of the whole is made first).
struct EncodedResult: Sendable {
    let parts: [[UInt8]]

    init(_ parts: [[UInt8]]) { self.parts = parts }

    var count: Int { parts.reduce(0) { $0 + $1.count } }

    /// Writes the successful reply carrying this result, echoing `re`, part by part
    /// through `write` (no line is made first): the bytes of one line, `\n` included.
    func writeReply(re: JSON, _ write: ([UInt8]) -> Void) {
        writeReply(id: Self.encoded(re), write)
    }

    /// Writes the successful reply carrying this result, echoing `re`, into `buffer`:
    /// room is made once and every part copied into it (a `writeBytes` per part
    /// checked the buffer's capacity and uniqueness each time).
    func writeReply(re: JSON, into buffer: inout ByteBuffer) {
        let id = Self.encoded(re)
        let head = id.map { ServerMessage.replyHead.count + $0.count + ServerMessage.successfulReplyMiddle.count } ?? Self.nullReplyHead.count
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: head + count + ServerMessage.replyTail.count) { room in
            var at = 0
            writeReply(id: id) { bytes in
                bytes.withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: room[at...]).copyMemory(from: $0) }
                at += bytes.count
            }
            return at
        }
    }

    /// The reply's parts in order; `id` is `re` encoded, `nil` for an inline command
    /// (no id of its own: its head up to the result is one kept array).
    private func writeReply(id: [UInt8]?, _ write: ([UInt8]) -> Void) {
        if let id {
            write(ServerMessage.replyHead)
            write(id)
            write(ServerMessage.successfulReplyMiddle)
        } else {
            write(Self.nullReplyHead)
        }
        for part in parts { write(part) }
        write(ServerMessage.replyTail)
    }

    private static func encoded(_ re: JSON) -> [UInt8]? {
        guard !re.isNull else { return nil }
        var id: [UInt8] = []
        re.write(into: &id)
        return id
    }

    /// A reply's start up to its result, for an inline command.
    private static let nullReplyHead = ServerMessage.replyHead + Array("null".utf8) + ServerMessage.successfulReplyMiddle

    /// The result as a tree (a reply to a connection that takes messages, a test).
    var json: JSON {
        let bytes = parts.flatMap { $0 }
        return bytes.withUnsafeBufferPointer { (try? JSONParser.parse($0)) ?? .null }
    }
}

import Foundation

/// What the inspector shows of one session beside its event log (which keeps the
/// events themselves, by `rev`): each command as it ran — its arguments with every
/// secret masked, its reply's outcome, how long it took — each backend call with
/// its duration and error, and each connection that attached, left or was told
/// `bye`. Kept only on a server with the inspector on (`--admin`).
///
/// Bounded like the event log it sits beside: at most ``maximumEntries`` entries and
/// `maximumBytes` bytes of them (strings counted by their UTF-8 size, each entry with
/// a fixed overhead); the oldest go first. A long argument is cut to
/// ``maximumTextBytes``. A reference, so a session without one holds a word.
final class SessionTimeline {
    /// One thing that happened, at the session's `rev` then.
    struct Entry: Sendable {
        enum Kind: Sendable {
            /// A command: its name, its arguments as the inspector shows them, the
            /// connection it came from, and its error code (`nil`: it succeeded).
            case command(name: String, arguments: JSON, connection: Int, failed: String?)
            /// A backend call and its error (`nil`: it returned).
            case call(backend: String, failed: String?)
            /// A connection attached, left, or was told `bye` (its code).
            case connection(Int, what: String)
        }
        let rev: Int
        let at: Date
        let duration: Duration?
        let kind: Kind

        /// The wire form `inspect` gives.
        var json: JSON {
            var object: JSONObject = ["rev": .int(rev), "at": .string(at.formatted(.iso8601))]
            if let duration {
                object["durationMs"] = .double(Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15)
            }
            switch kind {
            case .command(let name, let arguments, let connection, let failed):
                object["kind"] = "command"
                object["command"] = .string(name)
                object["arguments"] = arguments
                object["connection"] = .int(connection)
                object["error"] = failed.map(JSON.string) ?? .null
            case .call(let backend, let failed):
                object["kind"] = "call"
                object["backend"] = .string(backend)
                object["error"] = failed.map(JSON.string) ?? .null
            case .connection(let number, let what):
                object["kind"] = "connection"
                object["connection"] = .int(number)
                object["event"] = .string(what)
            }
            return .object(object)
        }

        /// What it is counted as against the timeline's bytes: its strings twice
        /// (their storage and slack) and a slot per entry and argument.
        var size: Int {
            switch kind {
            case .command(let name, let arguments, _, let failed):
                96 + name.utf8.count + 2 * arguments.encoded.utf8.count + 48 * Self.members(arguments) + (failed?.utf8.count ?? 0)
            case .call(let backend, let failed): 96 + backend.utf8.count + (failed?.utf8.count ?? 0)
            case .connection(_, let what): 96 + what.utf8.count
            }
        }

        private static func members(_ value: JSON) -> Int {
            guard case .object(let object) = value else { return 0 }
            return object.pairs.reduce(object.pairs.count) { $0 + members($1.value) }
        }
    }

    static let maximumEntries = 128
    /// The longest argument value kept, in UTF-8 bytes.
    static let maximumTextBytes = 256
    /// What a masked secret reads as.
    static let masked: JSON = "•••"

    let maximumBytes: Int
    /// What the server's event logs and timelines hold together, and this session's
    /// address's share of it: a timeline counts against both, as its event log does,
    /// and drops its own oldest entries first when either is spent.
    private let budget: EventLogBudget?
    private let share: EventLogBudget.Share?
    /// When the session began.
    let created = Date()
    private var entries: [Entry] = []
    private var start = 0
    private(set) var bytes = 0

    init(maximumBytes: Int, budget: EventLogBudget? = nil, share: EventLogBudget.Share? = nil) {
        self.maximumBytes = maximumBytes
        self.budget = budget
        self.share = share
    }

    deinit {
        budget?.add(-bytes)
        share?.add(-bytes)
    }

    var count: Int { entries.count - start }

    private var overBudget: Bool {
        guard let budget else { return false }
        return budget.isOver || (share.map { $0.bytes > budget.addressLimit } ?? false)
    }

    func record(_ entry: Entry) {
        let size = entry.size
        guard size <= maximumBytes else { return }
        while count > 0 && (count >= Self.maximumEntries || bytes + size > maximumBytes || overBudget) {
            let dropped = entries[start].size
            bytes -= dropped
            budget?.add(-dropped)
            share?.add(-dropped)
            start += 1
        }
        if start >= 64 && start * 2 >= entries.count {
            entries.removeFirst(start)
            start = 0
        }
        entries.append(entry)
        bytes += size
        budget?.add(size)
        share?.add(size)
    }

    /// What a failure is recorded as: a service's or protocol error's message (what
    /// the user is shown, cut to ``maximumTextBytes``), else only the error's type —
    /// any other error's description may hold what a backend said (a URL with its
    /// key, a password), which the client never sees either.
    static func failure(_ error: any Error) -> String {
        let text: String
        switch error {
        case let error as ServiceError: text = error.message
        case let error as ProtocolError: text = error.message
        default: text = String(describing: type(of: error))
        }
        return text.utf8.count > maximumTextBytes ? String(decoding: text.utf8.prefix(maximumTextBytes), as: UTF8.self) + "…" : text
    }

    /// The entries at or after `rev`, oldest first.
    func entries(from rev: Int) -> [Entry] {
        entries[start...].filter { $0.rev >= rev }
    }

    /// The last command recorded.
    var lastCommand: Entry? {
        entries[start...].last { if case .command = $0.kind { true } else { false } }
    }

    /// `arguments` as the inspector may show them: every argument `spec` declares
    /// `secure` masked, every alert field's value masked (an answer's fields may be
    /// a password: the alert that asked is gone by then), long text cut.
    static func shown(_ arguments: Arguments, of spec: CommandSpec?) -> JSON {
        var shown = JSONObject()
        for (name, value) in arguments.json.pairs {
            let argument = spec?.arguments.first { $0.name == name }
            if argument?.isSecure ?? true {
                shown[name] = masked
            } else if case .object(let fields) = value {
                // Names kept (at most 16), values masked.
                var hidden = JSONObject()
                for (field, _) in fields.pairs.prefix(16) { hidden[String(decoding: field.utf8.prefix(64), as: UTF8.self)] = masked }
                if fields.pairs.count > 16 { hidden["…"] = .string("\(fields.pairs.count - 16) more") }
                shown[name] = .object(hidden)
            } else if case .string(let text) = value, text.utf8.count > maximumTextBytes {
                shown[name] = .string(String(decoding: text.utf8.prefix(maximumTextBytes), as: UTF8.self) + "…")
            } else {
                shown[name] = value
            }
        }
        return .object(shown)
    }
}

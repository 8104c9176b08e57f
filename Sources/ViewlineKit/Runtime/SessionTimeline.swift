import Foundation

/// What the inspector shows of one session beside its event log (which keeps the
/// events themselves, by `rev`): each command as it ran — its arguments with every
/// secret masked, its reply's outcome, how long it took — each backend call with
/// its duration and error, and each connection that attached, left or was told
/// `bye`. Kept only on a server with the inspector on (`--admin`).
///
/// Bounded like the event log it sits beside: at most ``maximumEntries`` entries and
/// `maximumBytes` bytes of them (strings counted by their UTF-8 size, each entry and
/// argument with a fixed overhead), in a ring whose oldest entries go first; a long
/// argument is cut to ``maximumTextBytes``. Its bytes count against the server's
/// event log budget (and the address's share), charged a block at a time, so a
/// command does not touch the counters every session shares.
///
/// Cheap on the command path: an entry keeps the request's arguments as they are
/// (one reference) unless the command declares a secret or alert fields, or one is
/// too long, when the masked copy is made; the wall-clock time is read once per
/// entry. A reference, so a session without a timeline holds a word.
final class SessionTimeline {
    /// One thing that happened, at the session's `rev` then.
    struct Entry: Sendable {
        enum Kind: Sendable {
            /// A command: its name, its arguments as the inspector may show them (the
            /// secrets already masked), the connection it came from, and its error
            /// code (`nil`: it succeeded).
            case command(name: String, arguments: Arguments, connection: Int, failed: String?)
            /// A backend call and its error (`nil`: it returned).
            case call(backend: String, failed: String?)
            /// A connection attached, left, or was told `bye` (its code).
            case connection(Int, what: String)
        }
        let rev: Int
        /// When it happened, by the monotonic clock the command path reads anyway
        /// (the timeline turns it into wall-clock time when it is read).
        let at: ContinuousClock.Instant
        let duration: Duration?
        let kind: Kind

        /// The wire form `inspect` gives, `at` being its wall-clock time.
        func json(at date: Date) -> JSON {
            var object: JSONObject = ["rev": .int(rev), "at": .string(date.formatted(.iso8601))]
            if let duration {
                object["durationMs"] = .double(Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15)
            }
            switch kind {
            case .command(let name, let arguments, let connection, let failed):
                object["kind"] = "command"
                object["command"] = .string(name)
                object["arguments"] = .object(arguments.json)
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

        /// What it is counted as against the timeline's bytes: its strings and a slot
        /// per entry and argument (no encoding: this runs for every command).
        var size: Int {
            switch kind {
            case .command(let name, let arguments, _, let failed):
                arguments.json.pairs.reduce(112 + name.utf8.count + (failed?.utf8.count ?? 0)) {
                    $0 + 32 + $1.key.utf8.count + Self.size(of: $1.value)
                }
            case .call(let backend, let failed): 96 + backend.utf8.count + (failed?.utf8.count ?? 0)
            case .connection(_, let what): 96 + what.utf8.count
            }
        }

        private static func size(of value: JSON) -> Int {
            switch value {
            case .string(let text): 16 + text.utf8.count
            case .number(let text): 16 + text.utf8.count
            case .object(let object): object.pairs.reduce(16) { $0 + 32 + $1.key.utf8.count + size(of: $1.value) }
            case .array(let items): items.reduce(16) { $0 + size(of: $1) }
            default: 16
            }
        }
    }

    static let maximumEntries = 128
    /// The longest argument value kept, in UTF-8 bytes.
    static let maximumTextBytes = 256
    /// What a masked secret reads as.
    static let masked: JSON = "•••"
    /// The budget is charged in blocks of this many bytes.
    static let chargeBlock = 4096
    /// What a dropped entry's slot holds until it is used again.
    private static let vacant = Entry(rev: 0, at: ContinuousClock.Instant.now, duration: nil, kind: .connection(0, what: ""))

    let maximumBytes: Int
    /// What the server's event logs and timelines hold together, and this session's
    /// address's share of it: a timeline counts against both, as its event log does,
    /// and drops its own oldest entries first when either is spent.
    private let budget: EventLogBudget?
    private let share: EventLogBudget.Share?
    /// When the session began, by the wall clock and by the monotonic clock: an
    /// entry's wall-clock time is read from these, not taken for every entry.
    let created = Date()
    private let createdInstant = ContinuousClock.now

    /// The wall-clock time of `instant`.
    func date(of instant: ContinuousClock.Instant) -> Date {
        created.addingTimeInterval((instant - createdInstant).seconds)
    }
    /// The ring: `count` entries from `head` on (wrapping), and each slot's size in
    /// an array of its own (reading a size never copies an entry).
    private var ring: [Entry] = []
    private var sizes: [Int] = []
    private var head = 0
    private(set) var count = 0
    private(set) var bytes = 0
    /// What is charged to the budget now: `bytes` rounded up to a block.
    private var charged = 0

    init(maximumBytes: Int, budget: EventLogBudget? = nil, share: EventLogBudget.Share? = nil) {
        self.maximumBytes = maximumBytes
        self.budget = budget
        self.share = share
    }

    deinit {
        budget?.add(-charged)
        share?.add(-charged)
    }

    private var overBudget: Bool {
        guard let budget else { return false }
        return budget.isOver || (share.map { $0.bytes > budget.addressLimit } ?? false)
    }

    /// Keeps `entry` (moved in: its strings and arguments are not retained again).
    func record(_ entry: consuming Entry) {
        let size = entry.size
        guard size <= maximumBytes else { return }
        while count > 0 && (count >= Self.maximumEntries || bytes + size > maximumBytes || (bytes + size > charged && overBudget)) {
            bytes -= sizes[head]
            sizes[head] = 0
            // A full ring's oldest slot takes the new entry (written once, below);
            // any other dropped entry lets go of its strings now.
            if count < Self.maximumEntries { ring[head] = Self.vacant }
            head = (head + 1) % Self.maximumEntries
            count -= 1
        }
        let slot = (head + count) % Self.maximumEntries
        if slot < ring.count {
            ring[slot] = consume entry
            sizes[slot] = size
        } else {
            ring.append(consume entry)
            sizes.append(size)
        }
        count += 1
        bytes += size
        settleCharge()
    }

    /// Charges the budget for what the timeline holds, a block at a time.
    private func settleCharge() {
        let block = Self.chargeBlock
        let due = (bytes + block - 1) / block * block
        guard due > charged || due + block < charged else { return }
        budget?.add(due - charged)
        share?.add(due - charged)
        charged = due
    }

    /// The entries at or after `rev`, oldest first.
    func entries(from rev: Int) -> [Entry] {
        (0..<count).map { ring[(head + $0) % Self.maximumEntries] }.filter { $0.rev >= rev }
    }

    /// The last command recorded.
    var lastCommand: Entry? {
        for index in (0..<count).reversed() {
            let entry = ring[(head + index) % Self.maximumEntries]
            if case .command = entry.kind { return entry }
        }
        return nil
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
        return cut(text)
    }

    private static func isLong(_ value: JSON) -> Bool {
        if case .string(let text) = value { return text.utf8.count > maximumTextBytes }
        return false
    }

    private static func cut(_ text: String) -> String {
        text.utf8.count > maximumTextBytes ? String(decoding: text.utf8.prefix(maximumTextBytes), as: UTF8.self) + "…" : text
    }

    /// `arguments` as the inspector may show them: every argument `spec` declares
    /// `secure` masked, every alert field's value masked (an answer's fields may be
    /// a password: the alert that asked is gone by then; at most 16 names kept),
    /// long text cut; without a declaration, every value masked. The arguments
    /// themselves (no copy) when none of that applies, as for most commands.
    static func shown(_ arguments: Arguments, of command: AnyCommand?) -> Arguments {
        if let command, !command.masksArguments, !arguments.json.pairs.contains(where: { Self.isLong($0.value) }) {
            return arguments
        }
        let spec = command?.spec
        var shown = JSONObject()
        for (name, value) in arguments.json.pairs {
            let argument = spec?.arguments.first { $0.name == name }
            if argument?.isSecure ?? true {
                shown[name] = masked
            } else if case .object(let fields) = value {
                var hidden = JSONObject()
                for (field, _) in fields.pairs.prefix(16) { hidden[String(decoding: field.utf8.prefix(64), as: UTF8.self)] = masked }
                if fields.pairs.count > 16 { hidden["…"] = .string("\(fields.pairs.count - 16) more") }
                shown[name] = .object(hidden)
            } else if case .string(let text) = value {
                shown[name] = .string(cut(text))
            } else {
                shown[name] = value
            }
        }
        return Arguments(shown)
    }
}

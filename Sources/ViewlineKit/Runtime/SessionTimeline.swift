import CPrefetch
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
/// Cheap on the command path: an entry is a flat value written into its ring slot;
/// it keeps the request's arguments as they are (one reference, none for a command
/// without) unless the command declares a secret or alert fields, or one is too
/// long, when the masked copy is made; no wall-clock time is read. A reference, so
/// a session without a timeline holds a word.
final class SessionTimeline {
    /// What happened, as it is noted (``Session/note(_:at:duration:rev:)``).
    enum Kind: Sendable {
        /// A command: its name, its arguments as the inspector may show them (the
        /// secrets already masked), the connection it came from, and its error code
        /// (`nil`: it succeeded).
        case command(name: String, arguments: Arguments, connection: Int, failed: String?)
        /// A backend call and its error (`nil`: it returned).
        case call(backend: String, failed: String?)
        /// A connection attached, left, or was told `bye` (its code).
        case connection(Int, what: String)
    }

    /// One thing that happened, at the session's `rev` then: a flat value of plain
    /// fields (no enum payload, no wall-clock time) in one cache line (64 bytes, its
    /// slots aligned to 64), so the ring's slot is written and its old entry released
    /// by a few inlined stores on the command path, touching one line.
    struct Entry: Sendable {
        enum What: UInt32, Sendable { case command, call, connection }
        /// What it is (the top two bits), how many times it ran in a row less one
        /// (the next eight: ``repeats``) and what it is counted as against the
        /// timeline's bytes (the rest: at most ``maximumSize``).
        private var packed: UInt32
        /// How long it took, in nanoseconds (negative: not timed), the longest run's
        /// when it repeated: a `Float`'s 24 bits are a microsecond's precision up to
        /// 16 s and a millisecond's up to four hours, as a duration needs.
        private(set) var duration: Float32
        let rev: Int
        /// When it happened, in nanoseconds since the timeline began (by the monotonic clock
        /// the command path reads anyway); ``SessionTimeline/date(of:)`` gives its
        /// wall-clock time. A repeated command's is its last run's.
        private(set) var at: Int64
        let connection: Int
        /// The command's name, the backend's, or what the connection did.
        let name: String
        /// A command's arguments as shown (`nil`: none).
        let arguments: JSONObject?
        /// The error code or failure, in a box of its own (a failure is rare, and
        /// an optional string's 16 bytes would take the entry past one line).
        private let failure: Failure?

        /// The largest size an entry records (a line's limit keeps real ones far
        /// below it); a larger one is not kept.
        static let maximumSize = Int(UInt32.max >> 10)
        /// The most runs of one command an entry stands for.
        static let maximumRepeats = 256

        final class Failure: Sendable {
            let text: String
            init(_ text: String) { self.text = text }
        }

        init(
            what: What, size: Int, rev: Int, at: Int64, duration: Float32, connection: Int, name: String, failed: String?,
            arguments: JSONObject?
        ) {
            packed = what.rawValue << 30 | UInt32(truncatingIfNeeded: max(0, min(size, Self.maximumSize)))
            self.duration = duration
            self.rev = rev
            self.at = at
            self.connection = connection
            self.name = name
            self.arguments = arguments
            failure = failed.map(Failure.init)
        }

        var what: What { What(rawValue: packed >> 30)! }
        /// What it is counted as against the timeline's bytes.
        var size: Int { Int(packed & UInt32(Self.maximumSize)) }
        /// How many times the command ran in a row, on one connection, at one rev,
        /// each a success with the same arguments (1 to ``maximumRepeats``).
        var repeats: Int { Int(packed >> 22 & 0xFF) + 1 }

        /// Counts one more run, which began at `at` and took `duration`, when it is a
        /// success of `name` with `arguments` (as shown) from `connection` at `rev` —
        /// this entry run once more — and says whether it did: the entry's `at` is its
        /// last run's from then on (what "last active" reads). Mutating even when it
        /// only compares: called on a ring slot's `pointee`, a non-mutating method
        /// would be handed a copy of the entry (its strings retained and released,
        /// about 1 % of a pipelined `state search`'s CPU), a mutating one the slot.
        @inline(__always)
        mutating func countedAsRepeat(
            of name: String, arguments: JSONObject?, connection: Int, rev: Int, at: Int64, taking duration: Float32
        ) -> Bool {
            guard
                packed >> 30 == What.command.rawValue && packed >> 22 & 0xFF < Self.maximumRepeats - 1 && self.rev == rev
                    && self.connection == connection && failure == nil && self.name == name && self.arguments == arguments
            else { return false }
            packed += 1 << 22
            self.at = at
            self.duration = max(self.duration, duration)
            return true
        }
        /// The error code or failure (`nil`: none).
        var failed: String? { failure?.text }

        /// The wire form `inspect` gives, `at` being its wall-clock time.
        func json(at date: Date) -> JSON {
            var object: JSONObject = ["rev": .int(rev), "at": .string(date.formatted(.iso8601))]
            if duration >= 0 { object["durationMs"] = .double(SessionTimeline.seconds(nanoseconds: Double(duration)) * 1000) }
            switch what {
            case .command:
                object["kind"] = "command"
                object["command"] = .string(name)
                object["arguments"] = .object(arguments ?? JSONObject())
                object["connection"] = .int(connection)
                object["error"] = failed.map(JSON.string) ?? .null
                if repeats > 1 { object["repeats"] = .int(repeats) }
            case .call:
                object["kind"] = "call"
                object["backend"] = .string(name)
                object["error"] = failed.map(JSON.string) ?? .null
            case .connection:
                object["kind"] = "connection"
                object["connection"] = .int(connection)
                object["event"] = .string(name)
            }
            return .object(object)
        }

        /// What a command's entry is counted as.
        @inline(__always)
        static func commandSize(name: String, failed: String?, arguments: JSONObject?) -> Int {
            112 + name.utf8.count + (failed?.utf8.count ?? 0) + (arguments.map(size(of:)) ?? 0)
        }

        /// What `arguments` are counted as: their strings and a slot per argument (no
        /// encoding: this runs for every command).
        static func size(of arguments: JSONObject) -> Int {
            arguments.pairs.reduce(0) { $0 + 32 + $1.key.utf8.count + size(of: $1.value) }
        }

        private static func size(of value: JSON) -> Int {
            switch value {
            case .string(let text): 16 + text.utf8.count
            case .number(let text): 16 + text.utf8.count
            case .object(let object): 16 + size(of: object)
            case .array(let items): items.reduce(16) { $0 + size(of: $1) }
            default: 16
            }
        }
    }

    /// A power of two, as the ring's every size is (its slot is an index masked, not
    /// divided).
    static let maximumEntries = 128
    /// The longest argument value kept, in UTF-8 bytes.
    static let maximumTextBytes = 256
    /// What a masked secret reads as.
    static let masked: JSON = "•••"
    /// The budget is charged in blocks of this many bytes.
    static let chargeBlock = 4096
    /// What a dropped entry's slot holds until it is used again.
    private static let vacant = Entry(
        what: .connection, size: 0, rev: 0, at: 0, duration: -1, connection: 0, name: "", failed: nil, arguments: nil)

    let maximumBytes: Int
    /// What the server's event logs and timelines hold together, and this session's
    /// address's share of it: a timeline counts against both, as its event log does,
    /// and drops its own oldest entries first when either is spent.
    private let budget: EventLogBudget?
    private let share: EventLogBudget.Share?
    /// When the session began, by the wall clock and by the monotonic clock: an
    /// entry's wall-clock time is read from these, not taken for every entry.
    let created = Date()
    private let createdInstant = Moment.now

    /// The wall-clock time of an entry's `at`.
    func date(of at: Int64) -> Date {
        created.addingTimeInterval(Self.seconds(nanoseconds: Double(at)))
    }

    /// Seconds of `nanoseconds` (an entry's `at`, or its duration).
    static func seconds(nanoseconds: Double) -> Double {
        nanoseconds / 1e9
    }

    /// Nanoseconds from the timeline's start to `moment`.
    private func since(_ moment: Moment) -> Int64 {
        moment.nanoseconds &- createdInstant.nanoseconds
    }

    /// `duration` in nanoseconds, as an entry keeps it.
    private static func nanoseconds(_ duration: Duration) -> Float32 {
        let (seconds, attoseconds) = duration.components
        return Float32(seconds) * 1e9 + Float32(attoseconds / 1_000_000_000)
    }

    /// The entries and what they count for, in one value on a line of its own (every
    /// command writes it). Only its session's executor touches it, one access at a time.
    private let ringLine = OwnCacheLine(Ring())

    /// The ring, read or changed in place.
    private var ring: Ring {
        @inline(__always) _read { yield ringLine.value }
        @inline(__always) _modify { yield &ringLine.value }
    }

    var count: Int { ring.count }
    var bytes: Int { ring.bytes }

    init(maximumBytes: Int, budget: EventLogBudget? = nil, share: EventLogBudget.Share? = nil) {
        self.maximumBytes = maximumBytes
        self.budget = budget
        self.share = share
    }

    deinit {
        budget?.add(-ring.charged)
        share?.add(-ring.charged)
        ring.release()
    }

    /// Keeps what happened at `rev`, at `instant`, taking `duration`.
    func record(_ kind: Kind, rev: Int, at instant: Moment, duration: Duration?) {
        switch kind {
        case .command(let name, let arguments, let connection, let failed):
            recordDetailedCommand(
                name, arguments: arguments, connection: connection, failed: failed, rev: rev, at: instant,
                duration: duration.map(Self.nanoseconds) ?? -1)
        case .call(let backend, let failed):
            keep(
                Entry(
                    what: .call, size: 96 + backend.utf8.count + (failed?.utf8.count ?? 0), rev: rev,
                    at: since(instant), duration: duration.map(Self.nanoseconds) ?? -1, connection: 0, name: backend,
                    failed: failed, arguments: nil))
        case .connection(let number, let event):
            keep(
                Entry(
                    what: .connection, size: 96 + event.utf8.count, rev: rev, at: since(instant),
                    duration: duration.map(Self.nanoseconds) ?? -1, connection: number, name: event, failed: nil, arguments: nil))
        }
    }

    /// Keeps a command that ran at `rev`, from `start` to `end` (`causedEvents`: the
    /// session's rev moved on meanwhile): the path every command takes, with no
    /// ``Kind`` made and taken apart. A success that is the newest entry's command
    /// again with the same arguments — from the same connection, at the same rev,
    /// neither causing events, run at once (not awaiting: `end-others` changes the
    /// token without an event) and masking or cutting none of its arguments — is counted in that
    /// entry (``Entry/repeats``, up to ``Entry/maximumRepeats``; its `at` the last
    /// run's): a client polling `state search` or sending `ping` every few seconds
    /// leaves one entry, not a ring full of them.
    /// `given` are the request's arguments, shown as `command` declares them
    /// (``shown(_:of:)``).
    func recordCommand(
        _ name: String, arguments given: Arguments, of command: AnyCommand?, connection: Int, failed: String?, rev: Int,
        causedEvents: Bool, from start: Moment, to end: Moment
    ) {
        let duration = Float32(end.nanoseconds &- start.nanoseconds)
        let mayRepeat = !causedEvents && failed == nil && command.map { $0.awaiting == nil && !$0.moves && !$0.masksArguments } == true
        // Most commands succeed without arguments: their entry is built from plain
        // values, and the rest is out of line.
        guard failed == nil, given.json.pairs.isEmpty else {
            let (shown, whole) = Self.shownAndWhole(given, of: command)
            // Arguments cut short may differ past the cut: each run is an entry.
            if mayRepeat, whole,
                countedAsRepeat(name, arguments: shown.json, connection: connection, rev: rev, from: start, taking: duration)
            {
                return
            }
            return recordDetailedCommand(
                name, arguments: shown, connection: connection, failed: failed, rev: rev, at: start, duration: duration)
        }
        if mayRepeat, countedAsRepeat(name, arguments: nil, connection: connection, rev: rev, from: start, taking: duration) { return }
        // Built in the call, so it is moved into its slot, never copied.
        keep(
            Entry(
                what: .command, size: Entry.commandSize(name: name, failed: nil, arguments: nil), rev: rev, at: since(start),
                duration: duration, connection: connection, name: name, failed: nil, arguments: nil))
    }

    /// Counts a run of `name` with `arguments` in the newest entry, when it is that
    /// command run once more (``Entry/countedAsRepeat(of:arguments:connection:rev:at:taking:)``).
    @inline(__always)
    private func countedAsRepeat(
        _ name: String, arguments: JSONObject?, connection: Int, rev: Int, from start: Moment, taking duration: Float32
    ) -> Bool {
        guard let newest = ring.newest else { return false }
        return newest.pointee.countedAsRepeat(
            of: name, arguments: arguments, connection: connection, rev: rev, at: since(start), taking: duration)
    }

    /// ``recordCommand(_:arguments:of:connection:failed:rev:causedEvents:from:to:)`` for
    /// a command with arguments (`shown` already) or an error (`duration` in
    /// nanoseconds; negative: not timed).
    @inline(never)
    private func recordDetailedCommand(
        _ name: String, arguments given: Arguments, connection: Int, failed: String?, rev: Int, at instant: Moment,
        duration: Float32
    ) {
        let arguments = given.json.pairs.isEmpty ? nil : given.json
        keep(
            Entry(
                what: .command, size: Entry.commandSize(name: name, failed: failed, arguments: arguments), rev: rev, at: since(instant),
                duration: duration, connection: connection, name: name,
                failed: failed, arguments: arguments))
    }

    /// Keeps `entry` unless it alone is past ``maximumBytes``, charging the budget
    /// what that changes.
    @inline(__always)
    private func keep(_ entry: consuming Entry) {
        guard entry.size <= maximumBytes, entry.size < Entry.maximumSize else { return }
        let change = ring.keep(entry, maximumBytes: maximumBytes, budget: budget, share: share)
        if change != 0 {
            budget?.add(change)
            share?.add(change)
        }
    }

    /// The entries at or after `rev`, oldest first.
    func entries(from rev: Int) -> [Entry] {
        (0..<ring.count).map { ring[$0] }.filter { $0.rev >= rev }
    }

    /// The last command recorded.
    var lastCommand: Entry? {
        for index in (0..<ring.count).reversed() {
            let entry = ring[index]
            if entry.what == .command { return entry }
        }
        return nil
    }

    /// The ring: `count` entries from `head` on (wrapping) in `capacity` slots, the
    /// first `initialized` of them holding an entry (a live one or ``vacant``),
    /// `bytes` of them, and what is charged to the budget for them (`bytes` rounded
    /// up to a block). Its own memory, not an array: a command's entry is written
    /// into its slot with no uniqueness or bounds check, and its slot's address is
    /// known ahead (``nextSlot``). It grows by doubling up to ``maximumEntries``
    /// slots; ``release()`` frees it.
    private struct Ring {
        private var slots: UnsafeMutablePointer<Entry>?
        private var capacity = 0
        private var initialized = 0
        private(set) var head = 0
        private(set) var count = 0
        private(set) var bytes = 0
        private(set) var charged = 0

        /// The `index`th live entry, oldest first.
        subscript(index: Int) -> Entry {
            slots![(head + index) & (capacity - 1)]
        }

        /// The newest entry, in its slot.
        var newest: UnsafeMutablePointer<Entry>? {
            guard let slots, count > 0 else { return nil }
            return slots + ((head + count - 1) & (capacity - 1))
        }

        /// Where the next entry goes, when that slot holds one already.
        var nextSlot: UnsafeMutablePointer<Entry>? {
            guard let slots, count < capacity || capacity == maximumEntries else { return nil }
            let slot = (head + count) & (capacity - 1)
            return slot < initialized ? slots + slot : nil
        }

        /// Keeps `entry`, dropping the oldest entries first while the ring is full,
        /// `maximumBytes` would be passed, or (past what is charged already) the
        /// budget is spent; returns what the budget's charge changes by (a block at a
        /// time).
        @inline(__always)
        mutating func keep(
            _ entry: consuming Entry, maximumBytes: Int, budget: EventLogBudget?, share: EventLogBudget.Share?
        ) -> Int {
            let size = entry.size
            while count > 0
                && (count >= maximumEntries || bytes + size > maximumBytes
                    || (bytes + size > charged && Self.isOver(budget, share)))
            {
                bytes -= slots![head].size
                // A full ring's oldest slot takes the new entry (written once, below);
                // any other dropped entry lets go of its strings now.
                if count < maximumEntries { slots![head] = vacant }
                head = (head + 1) & (capacity - 1)
                count -= 1
            }
            if count == capacity { grow() }
            let slot = (head + count) & (capacity - 1)
            if slot < initialized {
                slots![slot] = consume entry
            } else {
                (slots! + slot).initialize(to: consume entry)
                initialized += 1
            }
            count += 1
            // The slot after it is fetched now, while its line is in reach: every
            // session's slots together are past the cache, and the next entry is
            // written commands (other sessions') later.
            if let next = nextSlot { viewline_prefetch_for_write(next, UInt(MemoryLayout<Entry>.stride)) }
            bytes += size
            let block = chargeBlock
            let due = (bytes + block - 1) / block * block
            guard due > charged || due + block < charged else { return 0 }
            defer { charged = due }
            return due - charged
        }

        /// Whether the server's budget or the address's share of it is spent.
        private static func isOver(_ budget: EventLogBudget?, _ share: EventLogBudget.Share?) -> Bool {
            guard let budget else { return false }
            return budget.isOver || (share.map { $0.bytes > budget.addressLimit } ?? false)
        }

        /// Twice the slots (16 at first, at most ``maximumEntries``), the live entries
        /// moved to the start in order. Out of line: a ring grows three times.
        @inline(never)
        private mutating func grow() {
            let larger = min(maximumEntries, max(16, capacity * 2))
            let fresh = UnsafeMutableRawPointer.allocate(byteCount: larger * MemoryLayout<Entry>.stride, alignment: 64)
                .bindMemory(to: Entry.self, capacity: larger)
            if let slots {
                for index in 0..<count { (fresh + index).moveInitialize(from: slots + ((head + index) & (capacity - 1)), count: 1) }
                // The slots left hold dropped entries' vacant values: let them go.
                for index in count..<initialized { (slots + ((head + index) & (capacity - 1))).deinitialize(count: 1) }
                slots.deallocate()
            }
            (slots, capacity, initialized, head) = (fresh, larger, count, 0)
        }

        /// Lets go of every entry and the slots.
        mutating func release() {
            guard let slots else { return }
            slots.deinitialize(count: initialized)
            slots.deallocate()
            self.slots = nil
        }
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
        shownAndWhole(arguments, of: command).shown
    }

    /// ``shown(_:of:)``, and whether they are the arguments themselves (`whole`:
    /// nothing masked or cut).
    private static func shownAndWhole(_ arguments: Arguments, of command: AnyCommand?) -> (shown: Arguments, whole: Bool) {
        if arguments.json.pairs.isEmpty { return (arguments, true) }
        if let command, !command.masksArguments, !arguments.json.pairs.contains(where: { Self.isLong($0.value) }) {
            return (arguments, true)
        }
        return (maskedAndCut(arguments, of: command), false)
    }

    /// The arguments with every secret masked and long text cut.
    private static func maskedAndCut(_ arguments: Arguments, of command: AnyCommand?) -> Arguments {
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

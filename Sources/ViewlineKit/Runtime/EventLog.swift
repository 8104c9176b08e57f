import Synchronization

/// The last events of a session, by `rev`, as the lines that were sent: what a
/// client that lost its connection gets again when it attaches with the last `rev`
/// it saw.
///
/// A `display` is kept as its view and its state's encoding, not as a line of its
/// own: sessions that show an equal state share one encoding (``EncodedStateCache``),
/// so 100,000 sessions that searched the same thing keep one copy of the results,
/// and the line is put together again only when it is replayed.
///
/// Bounded by what it really holds: at most `maximumEvents` lines and
/// `maximumBytes` bytes of them (each line counted with a fixed overhead, a display
/// as if it were kept whole), and all logs of a server together within their shared
/// ``EventLogBudget``, which counts a state encoding shared by many logs once; past
/// it, the log that grows drops its own oldest events first. A client asking for a
/// dropped event gets a snapshot instead.
struct EventLog {
    private enum Kept {
        case line([UInt8])
        /// A display: its parts (the state's encoding shared), put together on replay.
        case display(DisplayEvent)
    }
    private var events: [(rev: Int, size: Int, kept: Kept)] = []
    private var start = 0
    private(set) var bytes = 0
    let maximumEvents: Int
    let maximumBytes: Int
    let budget: EventLogBudget?
    /// What the logs of this session's address hold together (`nil`: not counted).
    let share: EventLogBudget.Share?

    /// What one kept line costs beyond its bytes (its array and slot).
    static let overhead = 48

    init(maximumEvents: Int = 256, maximumBytes: Int = 1 << 20, budget: EventLogBudget? = nil, address: String? = nil) {
        self.maximumEvents = maximumEvents
        self.maximumBytes = maximumBytes
        self.budget = budget
        share = budget?.share(for: address)
    }

    /// Whether the server-wide budget, or this address's share of it, is spent.
    private var overBudget: Bool {
        guard let budget else { return false }
        return budget.isOver || (share.map { $0.bytes > budget.addressLimit } ?? false)
    }

    var count: Int { events.count - start }

    /// Keeps one sent event's line.
    mutating func append(_ line: [UInt8], rev: Int) {
        keep(.line(line), size: line.count + Self.overhead, rev: rev)
    }

    /// Keeps one sent `display` as its parts, counted against the limits as if its
    /// line were kept whole.
    mutating func appendDisplay(_ display: DisplayEvent) {
        keep(.display(display), size: display.count + Self.overhead, rev: display.rev)
    }

    private mutating func keep(_ kept: Kept, size: Int, rev: Int) {
        events.append((rev, size, kept))
        bytes += size
        charge(kept, size: size, holding: true)
        share?.add(size)
        while count > maximumEvents || (bytes > maximumBytes && count > 1) || (count > 1 && overBudget) {
            dropOldest()
        }
        if start > 16 && start * 2 > events.count {
            events.removeFirst(start)
            start = 0
        }
    }

    private mutating func dropOldest() {
        let size = events[start].size
        charge(events[start].kept, size: size, holding: false)
        events[start].kept = .line([])  // let go of the bytes now, not at the next compaction
        bytes -= size
        share?.add(-size)
        start += 1
    }

    /// What holding (or letting go of) one event costs the server-wide budget: a line
    /// its size; a display its head, and its state's encoding only while no other log
    /// holds the same one (10,000 sessions showing one snapshot hold its bytes once).
    private func charge(_ kept: Kept, size: Int, holding: Bool) {
        guard let budget else { return }
        switch kept {
        case .line:
            budget.add(holding ? size : -size)
        case .display(let display):
            let head = size - display.state.count
            budget.add(holding ? head : -head)
            if holding { budget.hold(display.state) } else { budget.release(display.state) }
        }
    }

    /// Forgets everything (the session ended, or starts over from a record).
    mutating func removeAll() {
        for index in start..<events.count { charge(events[index].kept, size: events[index].size, holding: false) }
        share?.add(-bytes)
        events = []
        start = 0
        bytes = 0
    }

    /// Every event the log holds, oldest first, as the lines that were sent (the
    /// inspector's read; not on any hot path).
    func kept() -> [(rev: Int, line: [UInt8])] {
        events.dropFirst(start).map { event in
            switch event.kept {
            case .line(let line): (event.rev, line)
            case .display(let display): (event.rev, display.line)
            }
        }
    }

    /// The lines of every event after `rev`, in order, or `nil` when the log no
    /// longer reaches back that far (or `rev` is from the future).
    func lines(after rev: Int, current: Int) -> [[UInt8]]? {
        guard rev >= 0, rev <= current else { return nil }
        if rev == current { return [] }
        guard let first = events.dropFirst(start).first, first.rev <= rev + 1 else { return nil }
        return events.dropFirst(start).filter { $0.rev > rev }.map { event in
            switch event.kept {
            case .line(let line): line
            case .display(let display): display.line
            }
        }
    }
}

/// The bytes all event logs of a server may hold together, and each address's share:
/// the logs of one address's sessions may hold at most a quarter of the budget, so one
/// address cannot spend it for everyone (its own logs drop their oldest events first).
final class EventLogBudget: Sendable {
    let limit: Int
    private let used = Atomic<Int>(0)
    private let shares = Mutex<(byAddress: [String: WeakShare], sweepAt: Int)>(([:], 1024))

    /// What one address's logs hold; kept alive by its sessions' logs.
    final class Share: Sendable {
        private let used = Atomic<Int>(0)
        func add(_ bytes: Int) { used.add(bytes, ordering: .relaxed) }
        var bytes: Int { used.load(ordering: .relaxed) }
    }

    private struct WeakShare {
        weak var share: Share?
    }

    init(limit: Int) {
        self.limit = limit
    }

    /// The most one address's logs may hold together.
    var addressLimit: Int { limit / 4 }

    /// The share of `address` (made on first use); `nil` for none (tests, restores
    /// without one are counted server-wide only).
    func share(for address: String?) -> Share? {
        guard let address else { return nil }
        return shares.withLock { shares in
            if let share = shares.byAddress[address]?.share { return share }
            if shares.byAddress.count >= shares.sweepAt {
                shares.byAddress = shares.byAddress.filter { $0.value.share != nil }
                shares.sweepAt = max(1024, shares.byAddress.count * 2)
            }
            let share = Share()
            shares.byAddress[address] = WeakShare(share: share)
            return share
        }
    }

    func add(_ bytes: Int) {
        used.add(bytes, ordering: .relaxed)
    }

    /// How many logs hold each shared state encoding (by its storage), in shards so
    /// the event loops rarely meet on one lock: an encoding's bytes are charged when
    /// the first log takes it and given back when the last lets go.
    private final class Holders: Sendable {
        let counts = Mutex<[UInt: Int]>([:])
    }
    private let holders = (0..<16).map { _ in Holders() }

    /// One more log holds `state`: its bytes count if no other did.
    func hold(_ state: [UInt8]) {
        guard let key = Self.identity(of: state) else { return }
        let first = holders[Int(key >> 4 & 15)].counts.withLock { counts in
            counts[key, default: 0] += 1
            return counts[key] == 1
        }
        if first { add(state.count) }
    }

    /// A log let go of `state`: its bytes stop counting when no log holds it.
    func release(_ state: [UInt8]) {
        guard let key = Self.identity(of: state) else { return }
        let last = holders[Int(key >> 4 & 15)].counts.withLock { counts in
            guard let held = counts[key] else { return false }
            counts[key] = held > 1 ? held - 1 : nil
            return held == 1
        }
        if last { add(-state.count) }
    }

    /// An encoding's storage address: the same for every copy of one array (held
    /// alive by the logs that count it, so never reused while counted).
    private static func identity(of state: [UInt8]) -> UInt? {
        guard !state.isEmpty else { return nil }
        return state.withUnsafeBufferPointer { $0.baseAddress.map { UInt(bitPattern: $0) } }
    }

    var isOver: Bool { used.load(ordering: .relaxed) > limit }

    /// Bytes held by every log now.
    var bytes: Int { used.load(ordering: .relaxed) }
}

import Synchronization

/// Every live session of a server by its token, attached or not: what `attach`
/// looks up, what expires sessions left without a connection, and what bounds
/// their number.
///
/// A token is a lookup part and a secret part; the secret part is compared in
/// constant time, and an unknown lookup part costs the same comparison, so a
/// guess learns nothing from timing.
package final class SessionRegistry: Sendable {
    /// One session's entry, kept small (16 bytes: a million sessions hold a million
    /// of them). What only a detached session needs is in ``Links``, kept apart.
    private struct Entry {
        /// The session; its token holds the secret that `session(for:)` compares.
        var session: Session
        var attached: Int32 = 0

        init(session: Session) {
            self.session = session
        }
    }

    /// What a detached session's entry adds (40 bytes, only while it is detached: an
    /// attached session's bucket is 24 bytes instead of 64): when it was left, and its
    /// neighbours in the list of detached sessions, oldest first, and in the same list
    /// of its address (eviction and expiry take the head, in O(1)). Optional values are
    /// stored with sentinels; `UInt64.max` is no neighbour (a lookup part is 64 random
    /// bits: never that one).
    private struct Links {
        /// Nanoseconds after ``Links/epoch`` when the last connection left.
        private var detachedNanos: Int64
        private var links: (older: UInt64, newer: UInt64, olderOfAddress: UInt64, newerOfAddress: UInt64) = (.max, .max, .max, .max)

        init(detachedAt: ContinuousClock.Instant) {
            detachedNanos = (detachedAt - Self.epoch).nanoseconds
        }

        /// What detach times count from.
        static let epoch = ContinuousClock.now

        /// When the last connection left: expiry counts from here.
        var detachedAt: ContinuousClock.Instant { Self.epoch + .nanoseconds(detachedNanos) }
        var older: UInt64? {
            get { links.older == .max ? nil : links.older }
            set { links.older = newValue ?? .max }
        }
        var newer: UInt64? {
            get { links.newer == .max ? nil : links.newer }
            set { links.newer = newValue ?? .max }
        }
        var olderOfAddress: UInt64? {
            get { links.olderOfAddress == .max ? nil : links.olderOfAddress }
            set { links.olderOfAddress = newValue ?? .max }
        }
        var newerOfAddress: UInt64? {
            get { links.newerOfAddress == .max ? nil : links.newerOfAddress }
            set { links.newerOfAddress = newValue ?? .max }
        }
    }

    /// A list of detached sessions, oldest first, threaded through the entries.
    private struct DetachedList {
        var oldest: UInt64?
        var newest: UInt64?
        var count = 0
    }

    private struct Address {
        var sessions = 0
        var detached = DetachedList()
    }

    private struct State {
        /// By the token's lookup part, as a number (16 hex digits): no string per entry;
        /// in shards, so no registration rehashes a million entries at once.
        var entries = ShardedDictionary<Entry>()
        /// The detached sessions' ``Links``, by the same key: present exactly while the
        /// session is in the detached lists.
        var links = ShardedDictionary<Links>()
        var detached = DetachedList()
        var addresses: [String: Address] = [:]
        var attachedCount = 0
        /// The address holding the most sessions (kept up as sessions register; it
        /// may trail removals): whom a full registry takes from next.
        var largest: String?
    }

    private let state = Mutex(State())
    /// Time to live, session count and event log size.
    package let limits: SessionLimits
    private let decoy = SessionRegistry.secret(of: Session.makeSecret())

    static let lookupLength = 16

    /// Told when a session ends for good, so its cluster record goes.
    private let cluster: Cluster?

    init(limits: SessionLimits, cluster: Cluster? = nil) {
        self.limits = limits
        self.cluster = cluster
    }

    /// Sessions alive now, and how many of them have a connection.
    package var counts: (sessions: Int, attached: Int) {
        state.withLock { state in (state.entries.count, state.attachedCount) }
    }

    /// Why a session could not be registered.
    enum Refusal: Error, Equatable {
        /// Every session has a connection: none can make room.
        case full
        /// Its address holds all the sessions one address may, each with a connection.
        case addressFull
    }

    /// Adds a new session. When its address holds ``SessionLimits/maximumSessionsPerAddress``
    /// sessions, that address's oldest detached session makes room; when the
    /// registry is full, the address holding the most sessions gives up its oldest
    /// detached one first, then the new session's own address, then the oldest
    /// detached session of all. The one that made room is returned, to be closed.
    ///
    /// A session `restoring` from another node's record keeps the address that made it
    /// (in its record) for these counts, but is never refused or makes room for a
    /// per-address cap (a limit on a hostile address, not on a failover), and never
    /// ends another session: past the global cap it is refused, for a node with room.
    func register(_ session: Session, restoring: Bool = false) -> Result<Session?, Refusal> {
        guard let lookup = Self.key(of: session.token) else { preconditionFailure("a session token starts with 16 hex digits") }
        let address = session.peer ?? ""
        let result = state.withLock { state -> Result<Session?, Refusal> in
            var evicted: Session?
            let perAddress = limits.maximumSessionsPerAddress
            if restoring {
                guard state.entries.count < limits.maximumSessions else { return .failure(.full) }
            } else if perAddress > 0, let count = state.addresses[address]?.sessions, count >= perAddress {
                guard let victim = state.addresses[address]?.detached.oldest else { return .failure(.addressFull) }
                evicted = Self.take(victim, from: &state)
            } else if state.entries.count >= limits.maximumSessions {
                // The address that holds the most pays first (an address churning
                // connections evicts its own), then the newcomer's own, then the oldest of
                // any address — each only beyond the floor: an address holding a few
                // sessions (a person whose connection dropped, coming back to attach)
                // never loses one to make room. With nothing to end, a newcomer whose
                // address holds a detached session and is under the floor still gets its
                // session, past the cap by at most ``overflow(of:)``: it needs one to
                // attach with.
                if let victim = state.largest.flatMap({ Self.oldestBeyondFloor(of: $0, in: state) })
                    ?? Self.oldestBeyondFloor(of: address, in: state) ?? Self.oldestBeyondFloor(in: state)
                {
                    evicted = Self.take(victim, from: &state)
                } else {
                    // Only an address coming back to what it holds (a detached session of
                    // its own, under the floor) goes past the cap: a flood from fresh
                    // addresses cannot use up the room a returning person needs.
                    let own = state.addresses[address]
                    guard let own, own.detached.count > 0, own.sessions < Self.evictionFloor,
                        state.entries.count < limits.maximumSessions + Self.overflow(of: limits.maximumSessions)
                    else { return .failure(.full) }
                }
            }
            state.entries[lookup] = Entry(session: session)
            state.addresses[address, default: Address()].sessions += 1
            let count = state.addresses[address]!.sessions
            if state.largest.flatMap({ state.addresses[$0]?.sessions }).map({ count > $0 }) ?? true { state.largest = address }
            return .success(evicted)
        }
        if case .success(let evicted?) = result { cluster?.ended(evicted) }
        return result
    }

    /// Sessions an address keeps, detached or not, before a newcomer from another
    /// address may end one of them: a person who briefly lost a connection never
    /// loses the session to someone else's flood (PROTOCOL §8).
    static let evictionFloor = 16
    /// The oldest detached session of `address`, when it holds more than the floor.
    private static func oldestBeyondFloor(of address: String, in state: State) -> UInt64? {
        guard let held = state.addresses[address], held.sessions > evictionFloor else { return nil }
        return held.detached.oldest
    }

    /// How far past ``SessionLimits/maximumSessions`` newcomers of addresses coming back
    /// to a detached session (under the floor) may go when nothing can make room: a
    /// tenth of the cap (at least 16).
    static func overflow(of maximum: Int) -> Int { max(16, maximum / 10) }
    /// How far ``oldestBeyondFloor(in:)`` looks.
    static let evictionSearch = 256

    /// The oldest detached session whose address holds more than ``evictionFloor``
    /// sessions, among the ``evictionSearch`` oldest: what a full registry may end for
    /// a newcomer whose own address and the largest one have nothing detached.
    private static func oldestBeyondFloor(in state: State) -> UInt64? {
        var next = state.detached.oldest
        var looked = 0
        while let lookup = next, looked < evictionSearch {
            guard let entry = state.entries[lookup], let links = state.links[lookup] else { return nil }
            if (state.addresses[entry.session.peer ?? ""]?.sessions ?? 0) > evictionFloor { return lookup }
            next = links.newer
            looked += 1
        }
        return nil
    }

    /// Whether ``register(_:)`` would take one more session from nowhere in
    /// particular now (there is room, or a detached session to make room).
    var hasRoom: Bool {
        state.withLock { state in state.entries.count < limits.maximumSessions || state.detached.oldest != nil }
    }

    /// Whether ``register(_:restoring:)`` would take a restored session now (it ends none).
    var hasRoomToRestore: Bool {
        state.withLock { state in state.entries.count < limits.maximumSessions }
    }

    /// The session `token` belongs to, or `nil` — in the same time either way.
    func session(for token: String) -> Session? {
        let lookup = Self.key(of: token)
        let entry = state.withLock { state in lookup.flatMap { state.entries[$0] } }
        let stored = entry.map { Self.secret(of: $0.session.token) } ?? decoy
        return Self.constantTimeEqual(Self.secret(of: token), stored) ? entry?.session : nil
    }

    /// Whether a live session has the lookup part `lookup` (whatever its secret).
    func holds(lookup: String) -> Bool {
        guard let key = Self.key(of: lookup) else { return false }
        return state.withLock { $0.entries[key] != nil }
    }

    /// A connection attached to `session`: it no longer expires.
    func attached(_ session: Session) {
        guard let lookup = Self.key(of: session.token) else { return }
        state.withLock { state in
            guard var entry = state.entries[lookup], entry.session === session else { return }
            if entry.attached == 0 {
                Self.unlink(lookup, from: &state)
                state.attachedCount += 1
            }
            entry.attached += 1
            state.entries[lookup] = entry
        }
    }

    /// A connection left `session`; with none left it expires after the time to live.
    func detached(_ session: Session) {
        guard let lookup = Self.key(of: session.token) else { return }
        state.withLock { state in
            guard var entry = state.entries[lookup], entry.session === session, entry.attached > 0 else { return }
            entry.attached -= 1
            state.entries[lookup] = entry
            if entry.attached == 0 {
                state.attachedCount -= 1
                Self.link(lookup, at: .now, into: &state)
            }
        }
    }

    /// Removes a session for good (`quit`, expiry).
    func remove(_ session: Session) {
        guard let lookup = Self.key(of: session.token) else { return }
        let removed = state.withLock { state -> Bool in
            guard state.entries[lookup]?.session === session else { return false }
            _ = Self.take(lookup, from: &state)
            return true
        }
        if removed { cluster?.ended(session) }
    }

    /// Every session held now.
    package var all: [Session] {
        state.withLock { state in state.entries.values.map(\.session) }
    }

    /// Takes a session out without ending its record: another node owns it now.
    func drop(_ session: Session) {
        guard let lookup = Self.key(of: session.token) else { return }
        state.withLock { state in
            guard state.entries[lookup]?.session === session else { return }
            _ = Self.take(lookup, from: &state)
        }
    }

    /// Every session, removed (shutdown).
    func removeAll() -> [Session] {
        state.withLock { state in
            defer { state = State() }
            return state.entries.values.map(\.session)
        }
    }

    // MARK: - Expiry

    /// Expires every session whose time ran out, oldest first (the list is in detach
    /// order and every session has the same time to live), until cancelled: one loop
    /// for them all (the server runs it beside its listeners), no task or timer per
    /// session, and an expiry costs O(1).
    package func expire() async {
        let tick = min(limits.timeToLive / 4, .seconds(1))
        while !Task.isCancelled {
            try? await Task.sleep(for: tick)
            if Task.isCancelled { break }
            await expireDue(now: .now)
        }
    }

    /// Ends every detached session older than the time to live at `now`, in
    /// batches, so the lock is never held for long.
    func expireDue(now: ContinuousClock.Instant) async {
        while true {
            let due = state.withLock { state -> [Session] in
                var due: [Session] = []
                while due.count < 256, let oldest = state.detached.oldest,
                    let since = state.links[oldest]?.detachedAt, now - since >= limits.timeToLive
                {
                    if let session = Self.take(oldest, from: &state) { due.append(session) }
                }
                return due
            }
            for session in due {
                cluster?.ended(session)
                await session.close(.expired)
            }
            if due.count < 256 { return }
        }
    }

    // MARK: - The detached lists

    /// Removes an entry from the registry and from its lists; returns its session.
    private static func take(_ lookup: UInt64, from state: inout State) -> Session? {
        guard let entry = state.entries[lookup] else { return nil }
        if entry.attached == 0 { unlink(lookup, from: &state) } else { state.attachedCount -= 1 }
        state.entries[lookup] = nil
        let address = entry.session.peer ?? ""
        state.addresses[address]?.sessions -= 1
        if state.addresses[address]?.sessions == 0 { state.addresses[address] = nil }
        return entry.session
    }

    /// Appends a detached entry as the newest of both its lists.
    private static func link(_ lookup: UInt64, at time: ContinuousClock.Instant, into state: inout State) {
        guard let entry = state.entries[lookup] else { return }
        let address = entry.session.peer ?? ""
        var links = Links(detachedAt: time)
        links.older = state.detached.newest
        links.olderOfAddress = state.addresses[address]?.detached.newest
        state.links[lookup] = links
        if let newest = state.detached.newest { state.links[newest]?.newer = lookup } else { state.detached.oldest = lookup }
        state.detached.newest = lookup
        state.detached.count += 1
        if let newest = links.olderOfAddress {
            state.links[newest]?.newerOfAddress = lookup
        } else {
            state.addresses[address, default: Address()].detached.oldest = lookup
        }
        state.addresses[address, default: Address()].detached.newest = lookup
        state.addresses[address]?.detached.count += 1
    }

    /// Takes a detached entry out of both its lists.
    private static func unlink(_ lookup: UInt64, from state: inout State) {
        guard let entry = state.entries[lookup], let links = state.links[lookup] else { return }
        let address = entry.session.peer ?? ""
        if let older = links.older { state.links[older]?.newer = links.newer } else { state.detached.oldest = links.newer }
        if let newer = links.newer { state.links[newer]?.older = links.older } else { state.detached.newest = links.older }
        state.detached.count -= 1
        if let older = links.olderOfAddress {
            state.links[older]?.newerOfAddress = links.newerOfAddress
        } else {
            state.addresses[address]?.detached.oldest = links.newerOfAddress
        }
        if let newer = links.newerOfAddress {
            state.links[newer]?.olderOfAddress = links.olderOfAddress
        } else {
            state.addresses[address]?.detached.newest = links.olderOfAddress
        }
        state.addresses[address]?.detached.count -= 1
        state.links[lookup] = nil
    }

    static func split(_ token: String) -> (lookup: String, secret: [UInt8]) {
        (String(decoding: token.utf8.prefix(lookupLength), as: UTF8.self), secret(of: token))
    }

    /// A token's secret part: everything after the lookup part.
    static func secret(of token: String) -> [UInt8] {
        Array(token.utf8.dropFirst(lookupLength))
    }

    /// The registry key of a token: its lookup part read as a hexadecimal number,
    /// or `nil` when it is not one (no session has such a token).
    static func key(of token: String) -> UInt64? {
        var utf8 = token.utf8.prefix(lookupLength)
        guard utf8.count == lookupLength else { return nil }
        var value: UInt64 = 0
        while let byte = utf8.popFirst() {
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            default: return nil
            }
            value = value << 4 | UInt64(digit)
        }
        return value
    }

    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        var difference = UInt8(truncatingIfNeeded: a.count ^ b.count)
        for index in 0..<max(a.count, b.count) {
            difference |= (index < a.count ? a[index] : 0) ^ (index < b.count ? b[index] : 0)
        }
        return difference == 0
    }
}

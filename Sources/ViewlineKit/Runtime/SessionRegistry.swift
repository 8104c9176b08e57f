import Synchronization

/// Every live session of a server by its token, attached or not: what `attach`
/// looks up, what expires sessions left without a connection, and what bounds
/// their number.
///
/// A token is a lookup part and a secret part; the secret part is compared in
/// constant time, and an unknown lookup part costs the same comparison, so a
/// guess learns nothing from timing.
public final class SessionRegistry: Sendable {
    private struct Entry {
        /// The session; its token holds the secret that `session(for:)` compares.
        var session: Session
        var attached = 0
        var since: Int
        var expiry: Task<Void, Never>?
    }

    private struct State {
        /// By the token's lookup part, as a number (16 hex digits): no string per entry.
        var entries: [UInt64: Entry] = [:]
        var tick = 0
    }

    private let state = Mutex(State())
    /// Time to live, session count and event log size.
    public let limits: SessionLimits
    private let decoy = SessionRegistry.secret(of: Session.makeSecret())

    static let lookupLength = 16

    /// Told when a session ends for good, so its cluster record goes.
    private let cluster: Cluster?

    init(limits: SessionLimits, cluster: Cluster? = nil) {
        self.limits = limits
        self.cluster = cluster
    }

    /// Sessions alive now, and how many of them have a connection.
    public var counts: (sessions: Int, attached: Int) {
        state.withLock { state in (state.entries.count, state.entries.values.filter { $0.attached > 0 }.count) }
    }

    /// Adds a new session. When the registry is full, the oldest detached session
    /// makes room (it is returned, to be closed); `false` when none can.
    func register(_ session: Session) -> (accepted: Bool, evicted: Session?) {
        guard let lookup = Self.key(of: session.token) else { preconditionFailure("a session token starts with 16 hex digits") }
        return state.withLock { state in
            var evicted: Session?
            if state.entries.count >= limits.maximumSessions {
                guard let oldest = state.entries.filter({ $0.value.attached == 0 }).min(by: { $0.value.since < $1.value.since }) else {
                    return (false, nil)
                }
                oldest.value.expiry?.cancel()
                state.entries[oldest.key] = nil
                evicted = oldest.value.session
                cluster?.ended(oldest.value.session)
            }
            state.tick += 1
            state.entries[lookup] = Entry(session: session, since: state.tick)
            return (true, evicted)
        }
    }

    /// The session `token` belongs to, or `nil` — in the same time either way.
    func session(for token: String) -> Session? {
        let lookup = Self.key(of: token)
        let entry = state.withLock { state in lookup.flatMap { state.entries[$0] } }
        let stored = entry.map { Self.secret(of: $0.session.token) } ?? decoy
        return Self.constantTimeEqual(Self.secret(of: token), stored) ? entry?.session : nil
    }

    /// Whether ``register(_:)`` would take one more session now (there is room, or a
    /// detached session to make room).
    var hasRoom: Bool {
        state.withLock { state in
            state.entries.count < limits.maximumSessions || state.entries.values.contains { $0.attached == 0 }
        }
    }

    /// A connection attached to `session`: it no longer expires.
    func attached(_ session: Session) {
        guard let lookup = Self.key(of: session.token) else { return }
        state.withLock { state in
            guard var entry = state.entries[lookup] else { return }
            entry.attached += 1
            entry.expiry?.cancel()
            entry.expiry = nil
            state.entries[lookup] = entry
        }
    }

    /// A connection left `session`; with none left it expires after the time to live.
    func detached(_ session: Session) {
        guard let lookup = Self.key(of: session.token) else { return }
        state.withLock { state in
            guard var entry = state.entries[lookup] else { return }
            entry.attached = max(0, entry.attached - 1)
            if entry.attached == 0 {
                state.tick += 1
                entry.since = state.tick
                let ttl = limits.timeToLive
                entry.expiry = Task { [weak self] in
                    try? await Task.sleep(for: ttl)
                    guard !Task.isCancelled else { return }
                    await self?.expire(session)
                }
            }
            state.entries[lookup] = entry
        }
    }

    /// Removes a session for good (`quit`, expiry).
    func remove(_ session: Session) {
        guard let lookup = Self.key(of: session.token) else { return }
        let removed = state.withLock { state -> Bool in
            guard state.entries[lookup]?.session === session else { return false }
            state.entries[lookup]?.expiry?.cancel()
            state.entries[lookup] = nil
            return true
        }
        if removed { cluster?.ended(session) }
    }

    /// Every session, removed (shutdown).
    func removeAll() -> [Session] {
        state.withLock { state in
            defer { state.entries = [:] }
            state.entries.values.forEach { $0.expiry?.cancel() }
            return state.entries.values.map(\.session)
        }
    }

    private func expire(_ session: Session) async {
        let expired = state.withLock { state -> Bool in
            guard let lookup = Self.key(of: session.token), let entry = state.entries[lookup], entry.session === session, entry.attached == 0 else { return false }
            state.entries[lookup] = nil
            return true
        }
        if expired {
            cluster?.ended(session)
            await session.close(reason: "session expired")
        }
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

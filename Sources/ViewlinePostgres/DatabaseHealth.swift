import Logging
import PostgresNIO
import Synchronization

/// Whether the database answers, as one node sees it: a dedicated connection that
/// pings every second, and notices at once when the server closes it. Store calls
/// fail fast with ``StoreUnavailable`` while it is down (the pool itself would keep
/// them waiting for a connection), and calls already waiting give up when it goes
/// down; a busy pool is not "down".
final class DatabaseHealth: Sendable {
    private struct State {
        var down = false
        var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
        var nextWaiter = 0
    }

    private let state = Mutex(State())
    /// The index in the URL's servers of the primary the watch last reached (0
    /// until it reached one): the server calls go to.
    private let primaryIndex = Atomic<Int>(0)
    /// Whether the watch has found the primary yet (at once with one server: there
    /// is nothing to choose).
    private let locatedFlag: Atomic<Bool>

    /// - Parameter servers: how many servers the URL lists.
    init(servers: Int = 1) {
        locatedFlag = Atomic(servers <= 1)
    }

    var isDown: Bool { state.withLock { $0.down } }

    /// Whether calls know which server to go to (``primary``).
    var located: Bool { locatedFlag.load(ordering: .acquiring) }

    /// Returns once the watch has found the primary, or `timeout` passed (a node's
    /// first calls, at start, wait for its first answer rather than try the first
    /// server listed, which may be a standby or silent).
    func waitUntilLocated(within timeout: Duration) async {
        let deadline = ContinuousClock.now + timeout
        while !located && ContinuousClock.now < deadline && !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(20))
        }
    }

    /// The index in the URL's servers of the primary the watch last reached.
    var primary: Int { primaryIndex.load(ordering: .relaxed) }

    /// Why the database refuses a node's connections for good, as its last attempt
    /// was told (a pooler that refuses the node's server-side limits), or `nil`.
    var refusal: String? { refusalReason.withLock { $0 } }
    private let refusalReason = Mutex<String?>(nil)

    /// What a node cannot work with in `error`, a connection's failure (or each
    /// server's, of a URL that lists several), or `nil`.
    static func refusal(of error: any Error) -> String? {
        if let error = error as? PostgresURL.NoPrimary { return error.errors.lazy.compactMap(refusal(of:)).first }
        if let error = error as? LimitsNotCarried { return error.description }
        guard let error = error as? PSQLError, let message = error.serverInfo?[.message] else { return nil }
        // A role or database that is not there, or a password refused: no wait mends it.
        if let state = error.serverInfo?[.sqlState], ["28000", "28P01", "3D000"].contains(state) {
            return "the database refuses the node (\(message)): check the URL's role, password and database"
        }
        if message.hasPrefix("unsupported startup parameter") {
            return "the database refuses the node's server-side limits (\(message)): a connection pooler (PgBouncer) "
                + "sits between them; connect the nodes to PostgreSQL directly (docs/deploying.md)"
        }
        if message.hasPrefix("unrecognized configuration parameter") {
            return "the database does not know a server-side limit the node sets (\(message)): it needs PostgreSQL 14 or newer"
        }
        return nil
    }

    func set(down: Bool) {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.down = down
            guard down else { return [] }
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once the database is down (at once if it is); ends early when the
    /// calling task is cancelled.
    func waitUntilDown() async {
        let id = state.withLock { state -> Int in
            defer { state.nextWaiter += 1 }
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let resumeNow = state.withLock { state -> Bool in
                    if state.down || Task.isCancelled { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
            waiter?.resume()
        }
    }

    /// What the watch and its cross-check share, with a URL that lists several servers.
    private struct Following {
        /// The server calls go to now and its timeline; `nil` while there is none.
        var serving: (server: Int, timeline: Int)?
        /// The newest timeline a primary was seen on, by either: an older one's primary
        /// was deposed (its manager died, not its database) and is passed over.
        var newest = 0
        /// The cross-check found where the cluster writes instead of `from`.
        var moved: (from: Int, why: PrimaryMoved)?
    }

    private let following = Mutex(Following())

    /// Watches `url` until the calling task is cancelled: its owner's `run()`
    /// (``DatabaseAccess/run()``) awaits it. With a URL that requires a primary, the
    /// watch follows it: a server that stops being the primary (it became a standby,
    /// or went away) is "down" until the watch connects to the one that is, and calls
    /// go there from then on (``primary``). With several servers, a cross-check beside
    /// it asks the others every 3 s whether one of them is where the cluster writes now.
    func watch(url: PostgresURL, logger: Logger) async {
        guard url.servers.count > 1 && url.requiresPrimary else {
            await follow(url: url, logger: logger)
            return
        }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.follow(url: url, logger: logger) }
            group.addTask { await self.crossCheck(url: url, logger: logger) }
            await group.waitForAll()
        }
    }

    /// The primary, with one connection of its own that asks it every second, within
    /// 2 s, whether it still is (a silent server is "down" within 2 s, not when the
    /// kernel gives up on the socket); until the calling task is cancelled.
    private func follow(url: PostgresURL, logger: Logger) async {
        var wasDown = false
        var lastProblem = ""
        let several = url.servers.count > 1
        // Since when every server has answered with none on the newest timeline seen
        // (`NoPrimary.newestTimelineGone`), without a break.
        var newestGoneSince: ContinuousClock.Instant?
        while !Task.isCancelled {
            var open: PostgresConnection?
            do {
                let newest = following.withLock { $0.newest }
                let (connection, server, timeline) = try await url.connectToPrimary(
                    id: 1, within: .seconds(2 * url.servers.count), notOlderThan: several ? newest : 0, logger: logger)
                open = connection
                // Its limits are checked on every server the node moves to: a pooler
                // that drops them is no place to write (docs/deploying.md).
                _ = try await connection.withDeadline(.seconds(2)) {
                    try await connection.checkServerSideLimits(url.serverSideLimits, logger: logger)
                }
                newestGoneSince = nil
                following.withLock { following in
                    following.newest = max(following.newest, timeline)
                    following.serving = (server, timeline)
                    following.moved = nil
                }
                let previous = primaryIndex.exchange(server, ordering: .releasing)
                if located && server != previous {
                    logger.notice("the database's primary is another server now", metadata: ["server": "\(url.servers[server])"])
                }
                locatedFlag.store(true, ordering: .releasing)
                refusalReason.withLock { $0 = nil }
                connection.closeFuture.whenComplete { [self] _ in
                    if !Task.isCancelled { set(down: true) }
                }
                set(down: false)
                if wasDown { logger.notice("the database answers again", metadata: ["server": "\(url.servers[server])"]) }
                wasDown = false
                lastProblem = ""
                while !Task.isCancelled && !connection.isClosed {
                    if url.requiresPrimary {
                        if try await connection.isStandby(within: .seconds(2), logger: logger) { throw NoLongerPrimary() }
                    } else {
                        _ = try await connection.withDeadline(.seconds(2)) {
                            try await connection.query("SELECT 1", logger: logger).collect()
                        }
                    }
                    if let moved = following.withLock({ $0.moved }), moved.from == server { throw moved.why }
                    try await Task.sleep(for: .seconds(1))
                }
            } catch {
                following.withLock { $0.serving = nil }
                if !Task.isCancelled {
                    let reason = Self.refusal(of: error)
                    refusalReason.withLock { $0 = reason }
                    if let gone = (error as? PostgresURL.NoPrimary)?.newestTimelineGone {
                        // Every server answered and none is on the newest timeline seen,
                        // not even as a standby (by its restartpoint and its pg_wal).
                        // Only once that held for a minute without a break is that
                        // branch taken for gone (the promoted member rebuilt from the old
                        // one, or the cluster made anew), and the primary of the newest
                        // timeline left followed: a member restarting meanwhile has
                        // time to be seen on it again.
                        let now = ContinuousClock.now
                        if newestGoneSince == nil {
                            newestGoneSince = now
                            logger.warning(
                                "no listed server is on the newest timeline seen any more, not even as a standby: following the primary of the newest one left if this holds for \(Self.newestTimelineGrace)",
                                metadata: ["timeline": "\(gone)"])
                        }
                        if let since = newestGoneSince, now - since >= Self.newestTimelineGrace {
                            newestGoneSince = nil
                            let dropped = following.withLock { following in
                                defer { following.newest = gone }
                                return following.newest
                            }
                            logger.warning(
                                "following the primary of an older timeline: no listed server has been on the newest one seen",
                                metadata: ["timeline": "\(gone)", "instead of": "\(dropped)", "for": "\(Self.newestTimelineGrace)"])
                            continue
                        }
                    } else {
                        newestGoneSince = nil
                    }
                    // Said when it changes: "moved" first, then why no server will do.
                    let problem =
                        error is PrimaryMoved || error is NoLongerPrimary
                        ? "moved" : (error as? PostgresURL.NoPrimary)?.description ?? "\(type(of: error))"
                    if problem != lastProblem {
                        if problem == "moved" {
                            logger.warning("the database's primary moved", metadata: ["reason": "\(error)"])
                        } else if error is LimitsNotCarried {
                            logger.error("\(error)")
                        } else {
                            logger.warning("the database does not answer", metadata: ["error": "\(PostgresURL.reason(error))"])
                        }
                    }
                    lastProblem = problem
                    wasDown = true
                    set(down: true)
                }
            }
            // Closed before it is released (postgres-nio asserts it).
            try? await open?.close()
            if !Task.isCancelled { try? await Task.sleep(for: .milliseconds(500)) }
        }
    }

    /// Every 3 s while the watch has a primary, the other servers listed, each on a
    /// connection of its own within 5 s, all at once: one promoted while the watch's
    /// server still takes writes (its manager died, not its database) is where the
    /// cluster writes now; of two on the same timeline (two clusters, or a split
    /// brain), the one first in ``PostgresURL/Server/precedes(_:)``'s order is used,
    /// whatever order a node lists them in. Beside the watch, not in its loop: a
    /// member behind a slow link (a promotion seen only after its 5 s) delays the
    /// move, never the watch's own 2 s check of its primary.
    private func crossCheck(url: PostgresURL, logger: Logger) async {
        var warnedOfTwins = false
        while !Task.isCancelled {
            try? await Task.sleep(for: .seconds(3))
            guard !Task.isCancelled, let serving = following.withLock({ $0.serving }) else { continue }
            let found = await Self.otherPrimary(than: serving.server, timeline: serving.timeline, url: url, logger: logger)
            let moved: PrimaryMoved
            switch found {
            case .newer(let index, let timeline):
                following.withLock { $0.newest = max($0.newest, timeline) }
                moved = PrimaryMoved(server: url.servers[index])
            case .twin(let index) where url.servers[index].precedes(url.servers[serving.server]):
                moved = PrimaryMoved(server: url.servers[index], twin: true)
            case .twin(let index):
                if !warnedOfTwins {
                    warnedOfTwins = true
                    logger.error(
                        "two servers the URL lists take writes on the same timeline: two clusters, or a split brain; using the first in host:port order (nodes that spell the members alike choose alike)",
                        metadata: ["using": "\(url.servers[serving.server])", "also": "\(url.servers[index])"])
                }
                continue
            case nil:
                continue
            }
            following.withLock { following in
                if following.serving?.server == serving.server { following.moved = (serving.server, moved) }
            }
        }
    }

    /// How long every listed server must answer with none on the newest timeline seen
    /// before a node follows an older one (``PostgresURL/NoPrimary/newestTimelineGone``).
    static let newestTimelineGrace: Duration = .seconds(60)

    private enum OtherPrimary { case newer(Int, timeline: Int), twin(Int) }

    /// Another listed server that is a primary on a newer timeline than `server`'s
    /// `timeline` (a standby promoted since), or on the same one; `nil` when none
    /// (an older timeline's primary was deposed and is not used). All are asked at
    /// once, each within 5 s on a connection of its own.
    private static func otherPrimary(than server: Int, timeline: Int, url: PostgresURL, logger: Logger) async -> OtherPrimary? {
        let states = await withTaskGroup(of: (Int, ServerState?).self, returning: [Int: ServerState].self) { group in
            for index in url.servers.indices where index != server {
                group.addTask {
                    guard let connection = try? await url.connect(server: index, id: 4, within: .seconds(5), logger: logger) else {
                        return (index, nil)
                    }
                    let state = try? await connection.serverState(within: .seconds(5), closingOnCancel: true, logger: logger)
                    try? await connection.close()
                    return (index, state)
                }
            }
            var states: [Int: ServerState] = [:]
            for await (index, state) in group { states[index] = state }
            return states
        }
        var twin: Int?
        for index in url.servers.indices {
            guard let state = states[index], !state.standby else { continue }
            if state.timeline > timeline { return .newer(index, timeline: state.timeline) }
            if state.timeline == timeline && twin.map({ url.servers[index].precedes(url.servers[$0]) }) ?? true { twin = index }
        }
        return twin.map { .twin($0) }
    }

    /// Another server the URL lists is the primary now.
    struct PrimaryMoved: Error, CustomStringConvertible {
        var server: PostgresURL.Server
        var twin = false
        var description: String {
            twin ? "\(server), first in host:port order, takes writes on the same timeline" : "\(server) was promoted (a newer timeline)"
        }
    }

    /// The server the watch was connected to became a standby.
    struct NoLongerPrimary: Error, CustomStringConvertible {
        var description: String { "the server became a standby, or read-only" }
    }
}

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

    /// Watches `url` with one connection of its own until the calling task is
    /// cancelled: its owner's `run()` (``DatabaseAccess/run()``) awaits it. With a
    /// URL that requires a primary, the watch follows it: a server that stops being
    /// the primary (it became a standby, or went away) is "down" until the watch
    /// connects to the one that is, and calls go there from then on (``primary``).
    func watch(url: PostgresURL, logger: Logger) async {
        var wasDown = false
        var lastProblem = ""
        let several = url.servers.count > 1
        // The newest timeline a primary was seen on: an older one is deposed.
        var newest = 0
        var warnedOfTwins = false
        while !Task.isCancelled {
            var open: PostgresConnection?
            do {
                let (connection, server, timeline) = try await url.connectToPrimary(
                    id: 1, within: .seconds(2 * url.servers.count), notOlderThan: several ? newest : 0, logger: logger)
                open = connection
                // Its limits are checked on every server the node moves to: a pooler
                // that drops them is no place to write (docs/deploying.md).
                _ = try await connection.withDeadline(.seconds(2)) {
                    try await connection.checkServerSideLimits(url.serverSideLimits, logger: logger)
                }
                newest = max(newest, timeline)
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
                var tick = 0
                while !Task.isCancelled && !connection.isClosed {
                    // Within a deadline that closes the connection: a silent server
                    // is "down" within 2 s, not when the kernel gives up on the socket.
                    if url.requiresPrimary {
                        if try await connection.isStandby(within: .seconds(2), logger: logger) { throw NoLongerPrimary() }
                    } else {
                        _ = try await connection.withDeadline(.seconds(2)) {
                            try await connection.query("SELECT 1", logger: logger).collect()
                        }
                    }
                    // Every 3 s, the other servers listed: one promoted while this one
                    // still takes writes (its manager died, not its database) is where
                    // the cluster now writes; of two on the same timeline (two
                    // clusters, or a split brain), the first listed is used, so every
                    // node that lists them alike uses the same.
                    tick += 1
                    if several && url.requiresPrimary && tick % 3 == 0 {
                        switch await Self.otherPrimary(than: server, timeline: timeline, url: url, logger: logger) {
                        case .newer(let index):
                            throw PrimaryMoved(server: url.servers[index])
                        case .twin(let index) where index < server:
                            throw PrimaryMoved(server: url.servers[index], twin: true)
                        case .twin(let index):
                            if !warnedOfTwins {
                                warnedOfTwins = true
                                logger.error(
                                    "two servers the URL lists take writes on the same timeline: two clusters, or a split brain; using the first listed",
                                    metadata: ["using": "\(url.servers[server])", "also": "\(url.servers[index])"])
                            }
                        case nil:
                            break
                        }
                    }
                    try await Task.sleep(for: .seconds(1))
                }
            } catch {
                if !Task.isCancelled {
                    let reason = Self.refusal(of: error)
                    refusalReason.withLock { $0 = reason }
                    // Said when it changes: "moved" first, then why no server will do.
                    let problem = error is PrimaryMoved || error is NoLongerPrimary ? "moved" : "\(type(of: error))"
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

    private enum OtherPrimary { case newer(Int), twin(Int) }

    /// Another listed server that is a primary on a newer timeline than `server`'s
    /// `timeline` (a standby promoted since), or on the same one; `nil` when none
    /// (an older timeline's primary was deposed and is not used). Each is asked within
    /// a second on a connection of its own.
    private static func otherPrimary(than server: Int, timeline: Int, url: PostgresURL, logger: Logger) async -> OtherPrimary? {
        var twin: Int?
        for index in url.servers.indices where index != server {
            guard let connection = try? await url.connect(server: index, id: 4, within: .seconds(1), logger: logger) else { continue }
            let state = try? await connection.serverState(within: .seconds(1), logger: logger)
            try? await connection.close()
            guard let state, !state.standby else { continue }
            if state.timeline > timeline { return .newer(index) }
            if state.timeline == timeline && twin == nil { twin = index }
        }
        return twin.map { .twin($0) }
    }

    /// Another server the URL lists is the primary now.
    struct PrimaryMoved: Error, CustomStringConvertible {
        var server: PostgresURL.Server
        var twin = false
        var description: String {
            twin ? "\(server), listed first, takes writes on the same timeline" : "\(server) was promoted (a newer timeline)"
        }
    }

    /// The server the watch was connected to became a standby.
    struct NoLongerPrimary: Error, CustomStringConvertible {
        var description: String { "the server became a standby, or read-only" }
    }
}

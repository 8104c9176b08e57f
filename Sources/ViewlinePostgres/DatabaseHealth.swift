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
        guard let error = error as? PSQLError, let message = error.serverInfo?[.message] else { return nil }
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
        let several = url.servers.count > 1
        while !Task.isCancelled {
            var open: PostgresConnection?
            do {
                let (connection, server, timeline) = try await url.connectToPrimary(
                    id: 1, within: .seconds(2 * url.servers.count), logger: logger)
                open = connection
                if server != primaryIndex.exchange(server, ordering: .releasing) {
                    logger.notice("the database's primary is another server now", metadata: ["server": "\(url.servers[server])"])
                }
                locatedFlag.store(true, ordering: .releasing)
                connection.closeFuture.whenComplete { [self] _ in
                    if !Task.isCancelled { set(down: true) }
                }
                set(down: false)
                if wasDown { logger.notice("the database answers again") }
                wasDown = false
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
                    // the cluster now writes.
                    tick += 1
                    if several && url.requiresPrimary && tick % 3 == 0 {
                        if let newer = await Self.newerPrimary(than: server, timeline: timeline, url: url, logger: logger) {
                            throw PrimaryMoved(server: url.servers[newer])
                        }
                    }
                    try await Task.sleep(for: .seconds(1))
                }
            } catch {
                if !Task.isCancelled {
                    let reason = Self.refusal(of: error)
                    refusalReason.withLock { $0 = reason }
                    if error is PrimaryMoved || error is NoLongerPrimary {
                        logger.warning("the database's primary moved", metadata: ["reason": "\(error)"])
                    } else if !wasDown {
                        logger.warning("the database does not answer", metadata: ["error": "\(PostgresURL.reason(error))"])
                    }
                    wasDown = true
                    set(down: true)
                }
            }
            // Closed before it is released (postgres-nio asserts it).
            try? await open?.close()
            if !Task.isCancelled { try? await Task.sleep(for: .milliseconds(500)) }
        }
    }

    /// The index of another listed server that is a primary on a newer timeline
    /// than `server`'s `timeline` (a standby promoted since), or `nil`. Each is asked
    /// within a second on a connection of its own.
    private static func newerPrimary(than server: Int, timeline: Int, url: PostgresURL, logger: Logger) async -> Int? {
        for index in url.servers.indices where index != server {
            guard let connection = try? await url.connect(server: index, id: 4, within: .seconds(1), logger: logger) else { continue }
            let state = try? await connection.serverState(within: .seconds(1), logger: logger)
            try? await connection.close()
            guard let state, !state.standby else { continue }
            if state.timeline > timeline { return index }
            logger.warning(
                "two servers the URL lists take writes on the same timeline: two clusters, or a split brain; staying on the first",
                metadata: ["using": "\(url.servers[server])", "also": "\(url.servers[index])"])
        }
        return nil
    }

    /// Another server the URL lists is the primary now.
    struct PrimaryMoved: Error, CustomStringConvertible {
        var server: PostgresURL.Server
        var description: String { "\(server) was promoted (a newer timeline)" }
    }

    /// The server the watch was connected to became a standby.
    struct NoLongerPrimary: Error, CustomStringConvertible {
        var description: String { "the server became a standby, or read-only" }
    }
}

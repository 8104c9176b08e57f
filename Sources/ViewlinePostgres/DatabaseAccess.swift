import Logging
import PostgresNIO
import Synchronization

/// One database's access as every Viewline part on PostgreSQL does it: a
/// `PostgresClient` pool (run by its owner in a `ServiceGroup`, or by
/// ``connect(_:operationTimeout:logger:)``'s task), calls that end at their deadline
/// or as soon as the database is known to be down (``StoreUnavailable``), and a
/// health watch on a connection of its own. The cluster's directory and the seed
/// apps' store each hold one.
package final class DatabaseAccess: Sendable {
    /// A pool per server of the URL (one unless it lists several); calls use the
    /// primary's, as the health watch last found it.
    package let clients: [PostgresClient]
    /// The pool calls use now: the primary's.
    package var client: PostgresClient {
        let primary = health.primary
        return clients.indices.contains(primary) ? clients[primary] : clients[0]
    }
    /// Where the database is.
    package let url: PostgresURL
    package let logger: Logger
    /// How long one call may take before it fails with ``StoreUnavailable``.
    package let operationTimeout: Duration
    let health: DatabaseHealth
    /// Whether ``run()`` runs the health watch (not when it shares another's).
    private let watches: Bool
    /// Whether ``run()`` runs the client too (it was made for this database alone).
    private let ownsClient: Bool
    /// Whether ``run()`` runs now, and ``runInTask()``'s task.
    private let runs = Runs()

    /// ``run()`` runs once at a time (a second would run the same client twice,
    /// which postgres-nio refuses fatally), whether awaited or in a handle's task.
    /// A client runs once in its life: once it ran, the database's own client is
    /// never run again (the database is closed for good).
    private final class Runs: Sendable {
        private let state = Mutex<(running: Bool, clientRan: Bool, task: Task<Void, Never>?)>((false, false, nil))

        /// Whether the caller may run now (nothing runs, and the own client, when
        /// `withClient`, never ran), marking it running.
        func begin(withClient: Bool) -> Bool {
            state.withLock { state in
                guard !state.running, !(withClient && state.clientRan) else { return false }
                state.running = true
                state.clientRan = state.clientRan || withClient
                return true
            }
        }

        func end() {
            state.withLock { $0.running = false }
        }

        func hold(_ task: Task<Void, Never>) {
            state.withLock { $0.task = task }
        }

        func cancelTask() {
            state.withLock { $0.task }?.cancel()
        }
    }

    /// A `PostgresClient` per server of `url` (``makeClient(_:server:logger:)``).
    package static func makeClients(_ url: PostgresURL, logger: Logger) -> [PostgresClient] {
        url.servers.indices.map { makeClient(url, server: $0, logger: logger) }
    }

    /// A `PostgresClient` for the server at `server` in `url`'s servers, as Viewline
    /// wants it: a short connect timeout, up to 16 connections, and a pool that logs
    /// its errors only (calls report unavailability themselves).
    package static func makeClient(_ url: PostgresURL, server: Int = 0, logger: Logger) -> PostgresClient {
        var configuration = url.clientConfiguration(server: server)
        configuration.options.connectTimeout = .seconds(3)
        configuration.options.maximumConnections = 16
        // No statement runs on a pool connection without a deadline (``call(timeout:_:)``):
        // the pool's own keep-alive `SELECT 1` would have none, and would hang on a silent
        // link. An idle connection is closed after the pool's idle timeout instead, and a
        // dead one is found by the next call's deadline.
        configuration.options.keepAliveBehavior = nil
        // The pool's own log is noisy at start and while the database is down.
        var poolLogger = logger
        poolLogger.logLevel = max(logger.logLevel, .error)
        return PostgresClient(configuration: configuration, backgroundLogger: poolLogger)
    }

    /// Over `clients` (one per server of `url`, in its order; one for its first
    /// server alone), which their owner runs.
    package convenience init(clients: [PostgresClient], url: PostgresURL, operationTimeout: Duration, logger: Logger) {
        precondition(!clients.isEmpty, "a database needs a client")
        self.init(clients, url: url, operationTimeout: operationTimeout, logger: logger, health: nil, ownsClient: false)
    }

    /// Over a client of its own, which ``run()`` runs.
    package convenience init(url: PostgresURL, operationTimeout: Duration, logger: Logger) {
        self.init(
            Self.makeClients(url, logger: logger), url: url, operationTimeout: operationTimeout, logger: logger, health: nil,
            ownsClient: true)
    }

    /// Over clients of its own for `url` (the same servers as `other`'s, other
    /// server-side limits), following `other`'s health watch — the primary it found,
    /// and whether the database is down — rather than running one more.
    package convenience init(url: PostgresURL, operationTimeout: Duration, logger: Logger, sharingHealthWith other: DatabaseAccess) {
        self.init(
            Self.makeClients(url, logger: logger), url: url, operationTimeout: operationTimeout, logger: logger,
            health: other.health, ownsClient: true)
    }

    /// `health`: another database's watch to follow (`nil`: one of its own, which
    /// ``run()`` runs).
    private init(
        _ clients: [PostgresClient], url: PostgresURL, operationTimeout: Duration, logger: Logger, health: DatabaseHealth?,
        ownsClient: Bool
    ) {
        self.clients = clients
        self.url = url
        self.operationTimeout = operationTimeout
        self.logger = logger
        self.health = health ?? DatabaseHealth(servers: clients.count)
        watches = health == nil
        self.ownsClient = ownsClient
    }

    /// The index in the URL's servers of the primary calls go to now.
    package var primaryServer: Int { health.primary }

    /// Why the database refuses this node's connections for good (the health watch's
    /// last attempt was told so), or `nil`: a node stops waiting for it and says why.
    package var refusal: String? { health.refusal }

    /// Runs what this database needs while it is used, until the calling task is
    /// cancelled: the health watch (calls fail fast while the database is down), and
    /// the client when it is this database's own. A server runs it as a service of
    /// its group (placed before the node, so it outlives the node's drain).
    package func run() async {
        guard runs.begin(withClient: ownsClient) else {
            return logger.error("a database's run() was called while it runs, or after its own client ended; it returns at once")
        }
        defer { runs.end() }
        await Self.run(clients: ownsClient ? clients : [], health: watches ? health : nil, url: url, logger: logger)
    }

    /// ``run()``'s work, holding nothing of the database (a handle's task ends when
    /// the handle goes).
    private static func run(clients: [PostgresClient], health: DatabaseHealth?, url: PostgresURL, logger: Logger) async {
        await withDiscardingTaskGroup { group in
            for client in clients { group.addTask { await client.run() } }
            if let health { group.addTask { await health.watch(url: url, logger: logger) } }
        }
    }

    /// For a tool or a test that holds the database as a handle (``PostgresStore/connect(_:operationTimeout:logger:)``):
    /// ``run()`` in a task of its own until ``close()`` (the one task this module
    /// makes that no `run()` awaits: the handle is its owner).
    package func runInTask() {
        guard runs.begin(withClient: ownsClient) else { return }
        runs.hold(
            Task { [runs, clients, ownsClient, health, watches, url, logger] in
                defer { runs.end() }
                await Self.run(clients: ownsClient ? clients : [], health: watches ? health : nil, url: url, logger: logger)
            })
    }

    /// Ends ``runInTask()``'s task: the health watch, and the client when it is this
    /// database's own. (What a caller's own ``run()`` runs ends with that caller's task.)
    package func close() {
        runs.cancelTask()
    }

    deinit {
        runs.cancelTask()
    }

    /// The advisory-lock namespace every Viewline lock on the database uses.
    package static let lockNamespace: Int32 = 7878

    /// Runs a statement and drops its rows, within `timeout` (``operationTimeout`` by default).
    package func run(_ query: PostgresQuery, timeout: Duration? = nil) async throws {
        try await call(timeout: timeout) { [logger] connection in
            _ = try await connection.query(query, logger: logger).collect()
        }
    }

    /// Runs a query and maps every row.
    package func collect<T: Sendable>(
        _ query: PostgresQuery, timeout: Duration? = nil, _ transform: @escaping @Sendable (PostgresRow) throws -> T
    ) async throws -> [T] {
        try await call(timeout: timeout) { [logger] connection in try await connection.collect(query, logger: logger, transform) }
    }

    /// The one way a call reaches the database through the pool: `work` gets a leased
    /// connection and must be done within `timeout` (``operationTimeout`` by default),
    /// waiting for the lease included. When the deadline passes, the caller gets
    /// ``StoreUnavailable`` at once and the connection is closed under `work` (which
    /// then fails): postgres-nio does not observe cancellation, so only closing it
    /// frees a connection whose server went silent. The server's own limits
    /// (``PostgresURL/serverSideLimits``) end long statements and lock waits first.
    package func call<T: Sendable>(
        timeout: Duration? = nil, _ work: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        let requested = timeout ?? operationTimeout
        let leased = Leased()
        // Which server is the primary is known before the first call goes anywhere
        // (within the call's own limit).
        var waited = Duration.zero
        if !health.located {
            let started = ContinuousClock.now
            await health.waitUntilLocated(within: requested)
            waited = ContinuousClock.now - started
        }
        let limit = max(requested - waited, .milliseconds(1))
        do {
            return try await unavailableIfDown(timeout: limit) { [client] in
                try await client.withConnection { connection in
                    // Not once its caller was answered (the deadline, the database down):
                    // then `abandon()` below closes the connection under the work, so
                    // nothing commits behind the caller's back. Until then, the work runs
                    // within the limit from the lease (a starved timer is not a deadline).
                    guard leased.hold(connection) else { throw TimedOut(limit: limit) }
                    defer { leased.release() }
                    return try await connection.withDeadline(limit) { try await work(connection) }
                }
            }
        } catch {
            // The caller was answered (the deadline, or the database known to be down):
            // the work must not go on behind its back — a claim or a write committed
            // after "unavailable" — so its connection is closed under it now.
            leased.abandon()
            throw error
        }
    }

    /// The connection a call holds, closed if the caller gives up on the call first.
    final class Leased: Sendable {
        private let state = Mutex<(connection: PostgresConnection?, abandoned: Bool)>((nil, false))

        /// Takes `connection` for the call; `false` when the caller already gave up.
        func hold(_ connection: PostgresConnection) -> Bool {
            state.withLock { state in
                if state.abandoned { return false }
                state.connection = connection
                return true
            }
        }

        func release() { state.withLock { $0.connection = nil } }

        func abandon() {
            let connection = state.withLock { state -> PostgresConnection? in
                state.abandoned = true
                defer { state.connection = nil }
                return state.connection
            }
            if let connection { connection.close().whenComplete { _ in } }
        }
    }

    /// ``call(timeout:_:)`` in a transaction: committed when `work` returns, rolled back when it throws.
    package func transaction<T: Sendable>(
        timeout: Duration? = nil, _ work: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        try await call(timeout: timeout) { [logger] connection in try await connection.inTransaction(logger: logger) { try await work(connection) } }
    }

    /// Turns "cannot reach the database" into ``StoreUnavailable``: the database is
    /// known to be down (at once, without waiting for the pool), goes down while the
    /// call waits, a connection error, a server shutting down, a transaction it rolled
    /// back (a deadlock's victim), a server-side limit reached (a lock wait, a long
    /// statement), or no answer within ``operationTimeout``. Other
    /// errors (a constraint, a bug) pass through.
    func unavailableIfDown<T: Sendable>(timeout: Duration? = nil, _ work: @escaping @Sendable () async throws -> T) async throws -> T {
        let started = ContinuousClock.now
        do {
            let value = try await callOrUnavailable(timeout: timeout, work)
            StoreFigures.shared.record(.ok, since: started)
            return value
        } catch let error as StoreUnavailable {
            StoreFigures.shared.record(.unavailable, since: started)
            throw error
        } catch {
            StoreFigures.shared.record(.failed, since: started)
            throw error
        }
    }

    private func callOrUnavailable<T: Sendable>(timeout: Duration?, _ work: @escaping @Sendable () async throws -> T) async throws -> T {
        if health.isDown { throw StoreUnavailable(url: url, underlying: ConnectionLost()) }
        do {
            return try await Self.first(of: work, within: timeout ?? operationTimeout, health: health)
        } catch let error as TimedOut {
            throw StoreUnavailable(url: url, underlying: error)
        } catch let error as ConnectionLost {
            throw StoreUnavailable(url: url, underlying: error)
        } catch let error as PostgresConnection.DeadlinePassed {
            throw StoreUnavailable(url: url, underlying: error)
        } catch let error as PSQLError where error.code != .server {
            throw StoreUnavailable(url: url, underlying: error)
        } catch let error as PSQLError
            where error.serverInfo?[.sqlState].map({ Self.isShutdownState($0) || Self.isRolledBackState($0) || Self.isLimitState($0) }) == true
        {
            throw StoreUnavailable(url: url, underlying: error)
        }
    }

    /// `work`'s result, or `TimedOut` after `limit`, or `ConnectionLost` once the
    /// database is known to be down: whichever comes first. Never waits for `work`
    /// to notice it was cancelled (a task group would): a query stuck on a dead
    /// connection must not hold its caller, such as a node's record batches, past
    /// the limit.
    static func first<T: Sendable>(
        of work: @escaping @Sendable () async throws -> T, within limit: Duration, health: DatabaseHealth
    ) async throws -> T {
        let race = FirstOutcome<T>()
        let worker = Task {
            do { race.finish(.success(try await work())) } catch { race.finish(.failure(error)) }
        }
        let timer = Task {
            try? await Task.sleep(for: limit)
            if !Task.isCancelled { race.finish(.failure(TimedOut(limit: limit))) }
        }
        let watcher = Task {
            await health.waitUntilDown()
            if !Task.isCancelled { race.finish(.failure(ConnectionLost())) }
        }
        defer {
            worker.cancel()
            timer.cancel()
            watcher.cancel()
        }
        return try await withTaskCancellationHandler {
            try await race.value()
        } onCancel: {
            race.finish(.failure(CancellationError()))
        }
    }

    /// The first of several outcomes, kept until it is awaited.
    final class FirstOutcome<T: Sendable>: Sendable {
        private enum State {
            case open
            case finished(Result<T, any Error>)
            case waiting(CheckedContinuation<T, any Error>)
            case taken
        }
        private let state = Mutex(State.open)

        func finish(_ result: Result<T, any Error>) {
            let waiter = state.withLock { state -> CheckedContinuation<T, any Error>? in
                switch state {
                case .open:
                    state = .finished(result)
                    return nil
                case .waiting(let continuation):
                    state = .taken
                    return continuation
                case .finished, .taken:
                    return nil
                }
            }
            waiter?.resume(with: result)
        }

        func value() async throws -> T {
            try await withCheckedThrowingContinuation { continuation in
                let ready = state.withLock { state -> Result<T, any Error>? in
                    if case .finished(let result) = state {
                        state = .taken
                        return result
                    }
                    state = .waiting(continuation)
                    return nil
                }
                if let ready { continuation.resume(with: ready) }
            }
        }
    }

    struct ConnectionLost: Error, CustomStringConvertible {
        var description: String { "the connection to it was lost" }
    }

    struct TimedOut: Error, CustomStringConvertible {
        let limit: Duration
        var description: String { "no answer within \(limit)" }
    }

    /// SQLSTATEs of a transaction the server rolled back to let others go on (a
    /// deadlock's victim, a serialization failure): nothing was written, and the same
    /// call may succeed in a moment, so the caller is told "unavailable", not "failed".
    private static func isRolledBackState(_ state: String) -> Bool {
        state.hasPrefix("40")
    }

    /// SQLSTATEs of the server-side limits (``PostgresURL/serverSideLimits``): a lock
    /// waited for past `lock_timeout` (55P03), a statement past `statement_timeout`
    /// (57014), a transaction left idle past its limit (25P03). The database did not
    /// take the call in time, as at a deadline: `unavailable`, try again.
    private static func isLimitState(_ state: String) -> Bool {
        state == "55P03" || state == "57014" || state == "25P03"
    }

    /// SQLSTATEs a server sends while it shuts down or refuses connections, or
    /// refuses writes (25006: a standby, or an old primary fenced read-only — the
    /// node's watch moves to the primary; the write may go through there).
    private static func isShutdownState(_ state: String) -> Bool {
        state.hasPrefix("57P") || state.hasPrefix("08") || state == "25006"
    }
}

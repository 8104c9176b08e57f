import Foundation
import Logging
import PostgresNIO
import Synchronization
import ViewlineKit
import ViewlinePersistence

/// The store on PostgreSQL, for several server nodes over one database: the same
/// ``AppStore`` the seed apps use on SQLite, plus what a cluster needs — contacts
/// changes pushed to every node by `LISTEN`/`NOTIFY`, single flight across nodes
/// with an advisory lock, and session records (``PostgresSessionDirectory``).
///
/// A server runs the `PostgresClient` in its `ServiceGroup`, beside the
/// `ViewlineServer`, and migrates once the group runs:
///
/// ```swift
/// let url = try PostgresURL("postgres://viewline@db.internal/viewline")
/// let client = PostgresStore.makeClient(url, logger: logger)
/// let store = PostgresStore(client: client, url: url, logger: logger)
/// // in a service of the group that holds `client`:
/// try await store.migrate()
/// var services = try await SeedApps.liveServices(configuration, store: store, faults: faults)
/// ```
///
/// Queries go through a `PostgresClient` pool, which reconnects by itself: while the
/// database is down, calls fail (``StoreUnavailable``) and the next ones work again
/// once it is back. The contacts listener reconnects with backoff and re-reads the
/// table when it does, so no change is missed.
public final class PostgresStore: AppStore {
    /// The pool every query uses.
    let client: PostgresClient
    /// Where the database is.
    public let url: PostgresURL
    let logger: Logger
    /// The client's run, when ``connect(_:operationTimeout:logger:)`` started it
    /// (`nil`: its owner's `ServiceGroup` runs it).
    private let running: Task<Void, Never>?

    /// The notification channel the contacts trigger signals on.
    static let contactsChannel = "viewline_contacts"

    /// How long one store call may take before it fails with ``StoreUnavailable``
    /// (a safety net: a database that goes down is noticed at once by ``health``).
    public let operationTimeout: Duration
    let health = DatabaseHealth()

    /// A `PostgresClient` for `url` as this store wants it: a short connect timeout,
    /// up to 16 connections, and a pool that logs its errors only (the store reports
    /// unavailability itself). Run it in your `ServiceGroup`.
    public static func makeClient(_ url: PostgresURL, logger: Logger) -> PostgresClient {
        var configuration = url.clientConfiguration
        configuration.options.connectTimeout = .seconds(3)
        configuration.options.maximumConnections = 16
        // The pool's own log is noisy at start and while the database is down.
        var poolLogger = logger
        poolLogger.logLevel = max(logger.logLevel, .error)
        return PostgresClient(configuration: configuration, backgroundLogger: poolLogger)
    }

    /// A store over `client`, which its owner runs (in a `ServiceGroup`, as
    /// ``makeClient(_:logger:)`` says); `url` names the same database, for the
    /// connections of its own a cluster's lease, health checks and the contacts
    /// listener use. Call ``migrate()`` once the client runs, before anything else.
    public init(client: PostgresClient, url: PostgresURL, operationTimeout: Duration = .seconds(30), logger: Logger = Logger(label: "viewline.postgres")) {
        self.client = client
        self.url = url
        self.operationTimeout = operationTimeout
        self.logger = logger
        running = nil
    }

    private init(url: PostgresURL, operationTimeout: Duration, logger: Logger) {
        self.url = url
        self.operationTimeout = operationTimeout
        self.logger = logger
        let client = Self.makeClient(url, logger: logger)
        self.client = client
        running = Task { await client.run() }
    }

    /// Migrates the database (idempotent; safe when several nodes start at once) and
    /// starts watching its health. Fails with ``StoreUnavailable`` when the database
    /// cannot be reached.
    public func migrate() async throws {
        do {
            try await PostgresMigrations.run(on: client, logger: logger)
        } catch {
            throw StoreUnavailable(url: url, underlying: error)
        }
        health.start(url: url, logger: logger)
    }

    /// Connects and migrates, running a client of its own in a task until
    /// ``close()``: for tools and tests. A server runs the client in its
    /// `ServiceGroup` instead (``init(client:url:operationTimeout:logger:)``).
    /// Fails with a clear error when the database cannot be reached.
    public static func connect(
        _ url: PostgresURL, operationTimeout: Duration = .seconds(30), logger: Logger = Logger(label: "viewline.postgres")
    ) async throws -> PostgresStore {
        let store = PostgresStore(url: url, operationTimeout: operationTimeout, logger: logger)
        do {
            try await store.migrate()
        } catch {
            store.close()
            throw error
        }
        return store
    }

    /// Stops watching the database, and the client when the store runs its own;
    /// pending queries fail.
    public func close() {
        health.stop()
        running?.cancel()
    }

    deinit {
        health.stop()
        running?.cancel()
    }

    // MARK: - Users

    public func storeUser(_ name: String, passwordHash: String) async throws {
        try await write { [logger] connection in
            _ = try await connection.query("""
                INSERT INTO viewline_users (name, password_hash) VALUES (\(name), \(passwordHash))
                ON CONFLICT (name) DO UPDATE SET password_hash = excluded.password_hash
                """, logger: logger)
        }
    }

    public func passwordHashes() async throws -> [String: String] {
        var table: [String: String] = [:]
        for (name, hash) in try await collect("SELECT name, password_hash FROM viewline_users", { row -> (String, String) in
            let (name, hash) = try row.decode((String, String).self)
            return (name, hash)
        }) {
            table[name] = hash
        }
        return table
    }

    // MARK: - Drafts

    public func setDraft(user: String, text: String, at date: Date) async throws {
        try await write { [logger] connection in
            _ = try await connection.query("""
                INSERT INTO viewline_drafts (user_name, text, updated_at) VALUES (\(user), \(text), \(date))
                ON CONFLICT (user_name) DO UPDATE SET text = excluded.text, updated_at = excluded.updated_at
                """, logger: logger)
        }
    }

    public func pendingDraft(user: String) async throws -> Draft? {
        try await collect("SELECT user_name, text, updated_at FROM viewline_drafts WHERE user_name = \(user)") { row in
            let (user, text, date) = try row.decode((String, String, Date).self)
            return Draft(user: user, text: text, updatedAt: date)
        }.first
    }

    @discardableResult
    public func deleteDraft(user: String, ifText text: String?) async throws -> Bool {
        let query: PostgresQuery = if let text {
            "DELETE FROM viewline_drafts WHERE user_name = \(user) AND text = \(text) RETURNING user_name"
        } else {
            "DELETE FROM viewline_drafts WHERE user_name = \(user) RETURNING user_name"
        }
        return try await write { [logger] connection in
            !(try await connection.collect(query, logger: logger) { try $0.decode(String.self) }.isEmpty)
        }
    }

    public func insertSavedDraft(user: String, text: String, at date: Date) async throws -> SavedDraft {
        let id = try await write { [logger] connection in
            let id = try await connection.collect("""
                INSERT INTO viewline_saved_drafts (user_name, text, saved_at) VALUES (\(user), \(text), \(date)) RETURNING id
                """, logger: logger) { try $0.decode(Int64.self) }.first
            // Bounded per user: the oldest beyond the newest `maximumPerUser` go. "Newest" is
            // the database's insertion order, never `saved_at` (a node's clock: a node whose
            // clock runs ahead would otherwise keep its drafts over everyone's newer ones).
            _ = try await connection.query("""
                DELETE FROM viewline_saved_drafts WHERE user_name = \(user) AND id NOT IN (
                    SELECT id FROM viewline_saved_drafts WHERE user_name = \(user) ORDER BY id DESC LIMIT \(SavedDraft.maximumPerUser))
                """, logger: logger)
            return id
        }
        return SavedDraft(id: id, user: user, text: text, savedAt: date)
    }

    public func savedDrafts(user: String) async throws -> [SavedDraft] {
        try await collect("""
            SELECT id, user_name, text, saved_at FROM viewline_saved_drafts WHERE user_name = \(user)
            ORDER BY id DESC
            """) { row in
            let (id, user, text, date) = try row.decode((Int64, String, String, Date).self)
            return SavedDraft(id: id, user: user, text: text, savedAt: date)
        }
    }

    // MARK: - Contacts

    public func contactsSnapshot() async throws -> ContactsSnapshot {
        try await unavailableIfDown { [self] in
            // One statement, one snapshot: the version and the rows agree.
            let rows = try await client.query("""
                SELECT v.version, c.name, c.phone, c.address
                FROM viewline_contacts_version v LEFT JOIN viewline_contacts c ON true
                ORDER BY c.name, c.id
                """, logger: logger)
            var version = 0
            var items: [Contact] = []
            for try await (rowVersion, name, phone, address) in rows.decode((Int64, String?, String?, String?).self) {
                version = Int(rowVersion)
                if let name, let phone, let address { items.append(Contact(name: name, phone: phone, address: address)) }
            }
            return ContactsSnapshot(version: version, items: items)
        }
    }

    public func observeContacts() -> AsyncThrowingStream<ContactsSnapshot, any Error> {
        ContactsListener(store: self, url: url).stream()
    }

    @discardableResult
    public func applyContacts(_ contacts: [Contact], document: String, source: String, at date: Date) async throws -> Bool {
        try await unavailableIfDown { [self] in
            try await client.withTransaction(logger: logger) { connection in
                // Serialize appliers, so "already applied" is decided on the latest state.
                try await connection.query("SELECT pg_advisory_xact_lock(\(Self.lockNamespace), hashtext('contacts-apply'))", logger: logger)
                var applied: String?
                for try await value in try await connection.query(
                    "SELECT applied_document FROM viewline_sync_state WHERE source = \(source)", logger: logger
                ).decode(String.self) {
                    applied = value
                }
                if applied == document { return false }
                try await connection.query("DELETE FROM viewline_contacts", logger: logger)
                try await connection.query("""
                    INSERT INTO viewline_contacts (name, phone, address)
                    SELECT * FROM unnest(\(contacts.map(\.name))::text[], \(contacts.map(\.phone))::text[], \(contacts.map(\.address))::text[])
                    """, logger: logger)
                try await connection.query("""
                    INSERT INTO viewline_sync_state (source, applied_document, applied_at) VALUES (\(source), \(document), \(date))
                    ON CONFLICT (source) DO UPDATE SET applied_document = excluded.applied_document, applied_at = excluded.applied_at
                    """, logger: logger)
                return true
            }
        }
    }

    public func updatePhone(name: String, phone: String) async throws {
        try await write { [logger] connection in
            _ = try await connection.query("UPDATE viewline_contacts SET phone = \(phone) WHERE name = \(name)", logger: logger)
        }
    }

    // MARK: - Coordination

    /// Advisory locks of this store use this first key.
    static let lockNamespace: Int32 = 7878

    public func singleFlight(_ job: String, _ body: @escaping @Sendable () async throws -> Bool) async throws -> Bool? {
        // Fail fast while the database is down; the run itself may wait long for the
        // lock (another node's run) and for `body`.
        try await run("SELECT 1")
        return try await unavailableIfDown(timeout: .seconds(24 * 3600)) { [self] in
            try await client.withConnection { connection in
                let before = try await Self.generation(of: job, on: connection, logger: logger)
                // A session-level lock on this leased connection, held while `body` runs
                // (its queries use other connections). It goes with the connection if
                // this node dies.
                try await connection.query("SELECT pg_advisory_lock(\(Self.lockNamespace), hashtext(\(job)))", logger: logger)
                do {
                    let now = try await Self.generation(of: job, on: connection, logger: logger)
                    var result: Bool?
                    if now == before {
                        result = try await body()
                        try await connection.query("""
                            INSERT INTO viewline_job_runs (job, generation) VALUES (\(job), 1)
                            ON CONFLICT (job) DO UPDATE SET generation = viewline_job_runs.generation + 1
                            """, logger: logger)
                    }
                    try await connection.query("SELECT pg_advisory_unlock(\(Self.lockNamespace), hashtext(\(job)))", logger: logger)
                    return result
                } catch {
                    _ = try? await connection.query("SELECT pg_advisory_unlock(\(Self.lockNamespace), hashtext(\(job)))", logger: logger)
                    throw error
                }
            }
        }
    }

    private static func generation(of job: String, on connection: PostgresConnection, logger: Logger) async throws -> Int64 {
        var generation: Int64 = 0
        for try await value in try await connection.query(
            "SELECT generation FROM viewline_job_runs WHERE job = \(job)", logger: logger
        ).decode(Int64.self) {
            generation = value
        }
        return generation
    }

    // MARK: - Helpers

    /// Runs a statement and drops its rows.
    func run(_ query: PostgresQuery) async throws {
        try await unavailableIfDown { [self] in
            _ = try await client.query(query, logger: logger).collect()
        }
    }

    /// Runs a query and maps every row.
    func collect<T: Sendable>(
        _ query: PostgresQuery, timeout: Duration? = nil, _ transform: @escaping @Sendable (PostgresRow) throws -> T
    ) async throws -> [T] {
        try await unavailableIfDown(timeout: timeout) { [self] in
            var values: [T] = []
            for try await row in try await client.query(query, logger: logger) { values.append(try transform(row)) }
            return values
        }
    }

    /// Turns "cannot reach the database" into ``StoreUnavailable``: the database is
    /// known to be down (at once, without waiting for the pool), goes down while the
    /// call waits, a connection error, a server shutting down, or no answer within
    /// ``operationTimeout``. Other errors (a constraint, a bug) pass through.
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
        } catch let error as PSQLError where error.code != .server {
            throw StoreUnavailable(url: url, underlying: error)
        } catch let error as PSQLError where error.serverInfo?[.sqlState].map(Self.isShutdownState) == true {
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

    /// SQLSTATEs a server sends while it shuts down or refuses connections.
    private static func isShutdownState(_ state: String) -> Bool {
        state.hasPrefix("57P") || state.hasPrefix("08")
    }
}

/// The database cannot be reached right now (down, restarting, unreachable): the
/// command that needed it fails with this; the next ones work again once it is back.
public struct StoreUnavailable: ProtocolErrorConvertible, CustomStringConvertible {
    public let url: PostgresURL
    public let underlying: any Error

    public var description: String {
        "the database at \(url.redacted) is unavailable (\(Self.reason(underlying)))"
    }

    /// `unavailable`, with the reason but not the URL (which names the database host).
    public var protocolError: ProtocolError {
        ProtocolError(.unavailable, "the database is unavailable (\(Self.reason(underlying))); try again")
    }

    private static func reason(_ error: any Error) -> String {
        guard let error = error as? PSQLError else { return "\(error)" }
        if let message = error.serverInfo?[.message] { return message }
        if let underlying = error.underlying { return "\(underlying)" }
        return "\(error.code)"
    }
}

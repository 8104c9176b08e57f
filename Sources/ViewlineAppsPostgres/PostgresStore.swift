import Foundation
import Logging
import PostgresNIO
import Synchronization
import ViewlineKit
import ViewlinePersistence
import ViewlinePostgres

/// The seed apps' store on PostgreSQL, for several server nodes over one database:
/// the same ``AppStore`` the seed apps use on SQLite, plus what a cluster needs —
/// contacts changes pushed to every node by `LISTEN`/`NOTIFY`, single flight across
/// nodes with an advisory lock, and writes fenced by a session's lease. The
/// cluster's own records are ``PostgresSessionDirectory``'s (ViewlinePostgres),
/// over the same client or another.
///
/// A server runs the `PostgresClient` in its `ServiceGroup`, beside the
/// `ViewlineServer`, and migrates once the group runs:
///
/// ```swift
/// let url = try PostgresURL("postgres://viewline@db.internal/viewline")
/// let client = PostgresStore.makeClient(url, logger: logger)
/// let store = PostgresStore(client: client, url: url, logger: logger)
/// // in a service of the group that holds `client`, beside `await store.run()`:
/// try await store.migrate()
/// var services = try await SeedApps.liveServices(configuration, store: store, faults: faults)
/// ```
///
/// Queries go through a `PostgresClient` pool, which reconnects by itself: while the
/// database is down, calls fail (``StoreUnavailable``) and the next ones work again
/// once it is back. The contacts listener reconnects with backoff and re-reads the
/// table when it does, so no change is missed.
public final class PostgresStore: AppStore {
    /// The pool, its deadlines and its health.
    let database: DatabaseAccess

    /// The notification channel the contacts trigger signals on.
    static let contactsChannel = "viewline_contacts"

    /// A `PostgresClient` for `url`'s first server as this store wants it: a short
    /// connect timeout, up to 16 connections, and a pool that logs its errors only
    /// (the store reports unavailability itself). Run it in your `ServiceGroup`. For
    /// a URL that lists several servers, use ``makeClients(_:logger:)``.
    public static func makeClient(_ url: PostgresURL, logger: Logger) -> PostgresClient {
        DatabaseAccess.makeClient(url, logger: logger)
    }

    /// A `PostgresClient` per server of `url`, in its order, each as
    /// ``makeClient(_:logger:)`` makes it: run them all in your `ServiceGroup`, and
    /// give them to ``init(clients:url:operationTimeout:logger:)``. Calls go to the
    /// pool of the server that is the primary now.
    public static func makeClients(_ url: PostgresURL, logger: Logger) -> [PostgresClient] {
        DatabaseAccess.makeClients(url, logger: logger)
    }

    /// A store over `client`, which its owner runs (in a `ServiceGroup`, as
    /// ``makeClient(_:logger:)`` says); `url` names the same database, for the
    /// connections of its own the health watch and the contacts listener use. Call
    /// ``migrate()`` once the client runs, before anything else.
    public init(
        client: PostgresClient, url: PostgresURL, operationTimeout: Duration = .seconds(30), logger: Logger = Logger(label: "viewline.postgres")
    ) {
        database = DatabaseAccess(clients: [client], url: url, operationTimeout: operationTimeout, logger: logger)
    }

    /// A store over `clients`, one per server of `url` in its order
    /// (``makeClients(_:logger:)``), which their owner runs: its calls follow the
    /// primary as its health watch finds it. Call ``migrate()`` once they run.
    public init(
        clients: [PostgresClient], url: PostgresURL, operationTimeout: Duration = .seconds(30),
        logger: Logger = Logger(label: "viewline.postgres")
    ) {
        database = DatabaseAccess(clients: clients, url: url, operationTimeout: operationTimeout, logger: logger)
    }

    /// A store over `database`, which it may share with the cluster's directory (one
    /// pool, one health watch per node).
    package init(_ database: DatabaseAccess) {
        self.database = database
    }

    /// Migrates the seed apps' tables (idempotent; safe when several nodes start at
    /// once). Fails with
    /// ``StoreUnavailable`` when the database cannot be reached.
    public func migrate() async throws {
        do {
            try await StoreMigrations.schema.run(on: database)
        } catch let error as StoreUnavailable {
            throw error
        } catch {
            throw StoreUnavailable(url: url, underlying: error)
        }
    }

    /// Connects and migrates, running a client of its own in a task until
    /// ``close()``: for tools and tests. A server runs the client in its
    /// `ServiceGroup` instead (``init(client:url:operationTimeout:logger:)``).
    /// Fails with a clear error when the database cannot be reached.
    public static func connect(
        _ url: PostgresURL, operationTimeout: Duration = .seconds(30), logger: Logger = Logger(label: "viewline.postgres")
    ) async throws -> PostgresStore {
        let database = DatabaseAccess(url: url, operationTimeout: operationTimeout, logger: logger)
        database.runInTask()
        let store = PostgresStore(database)
        do {
            try await store.migrate()
        } catch {
            store.close()
            throw error
        }
        return store
    }

    /// Watches the database's health on a connection of its own until the calling
    /// task is cancelled (calls fail fast while it is down instead of waiting out
    /// their deadline): run it beside the client, in your `ServiceGroup`. A store
    /// from ``connect(_:operationTimeout:logger:)`` runs it already.
    public func run() async {
        await database.run()
    }

    /// Ends what ``connect(_:operationTimeout:logger:)`` started (the health watch
    /// and the store's own client; pending queries fail). A store over your client
    /// stops watching when the task running its ``run()`` is cancelled.
    public func close() {
        database.close()
    }

    /// Where the database is.
    public var url: PostgresURL { database.url }
    /// How long one store call may take before it fails with ``StoreUnavailable``
    /// (a safety net: a database that goes down is noticed at once).
    public var operationTimeout: Duration { database.operationTimeout }
    var client: PostgresClient { database.client }
    var logger: Logger { database.logger }
    static var lockNamespace: Int32 { DatabaseAccess.lockNamespace }

    // MARK: - Users

    public func storeUser(_ name: String, passwordHash: String) async throws {
        try await write { [logger] connection in
            _ = try await connection.query(
                """
                INSERT INTO viewline_users (name, password_hash) VALUES (\(name), \(passwordHash))
                ON CONFLICT (name) DO UPDATE SET password_hash = excluded.password_hash
                """, logger: logger)
        }
    }

    public func passwordHashes() async throws -> [String: String] {
        var table: [String: String] = [:]
        for (name, hash) in try await collect(
            "SELECT name, password_hash FROM viewline_users",
            { row -> (String, String) in
                let (name, hash) = try row.decode((String, String).self)
                return (name, hash)
            })
        {
            table[name] = hash
        }
        return table
    }

    // MARK: - Drafts

    public func setDraft(user: String, text: String, at date: Date) async throws {
        try await write { [logger] connection in
            _ = try await connection.query(
                """
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
        let query: PostgresQuery =
            if let text {
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
            let id = try await connection.collect(
                """
                INSERT INTO viewline_saved_drafts (user_name, text, saved_at) VALUES (\(user), \(text), \(date)) RETURNING id
                """, logger: logger
            ) { try $0.decode(Int64.self) }.first
            // Bounded per user: the oldest beyond the newest `maximumPerUser` go. "Newest" is
            // the database's insertion order, never `saved_at` (a node's clock: a node whose
            // clock runs ahead would otherwise keep its drafts over everyone's newer ones).
            _ = try await connection.query(
                """
                DELETE FROM viewline_saved_drafts WHERE user_name = \(user) AND id NOT IN (
                    SELECT id FROM viewline_saved_drafts WHERE user_name = \(user) ORDER BY id DESC LIMIT \(SavedDraft.maximumPerUser))
                """, logger: logger)
            return id
        }
        return SavedDraft(id: id, user: user, text: text, savedAt: date)
    }

    public func savedDrafts(user: String) async throws -> [SavedDraft] {
        try await collect(
            """
            SELECT id, user_name, text, saved_at FROM viewline_saved_drafts WHERE user_name = \(user)
            ORDER BY id DESC
            """
        ) { row in
            let (id, user, text, date) = try row.decode((Int64, String, String, Date).self)
            return SavedDraft(id: id, user: user, text: text, savedAt: date)
        }
    }

    // MARK: - Contacts

    public func contactsSnapshot() async throws -> ContactsSnapshot {
        try await database.call { [logger] connection in
            // One statement, one snapshot: the version and the rows agree.
            let rows = try await connection.query(
                """
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
        // Fenced like any write made for a session (a sync a command started): a node
        // paused mid-sync past its lease writes nothing once another node took over.
        try await database.write(transaction: true) { [logger] connection in
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
            try await connection.query(
                """
                INSERT INTO viewline_contacts (name, phone, address)
                SELECT * FROM unnest(\(contacts.map(\.name))::text[], \(contacts.map(\.phone))::text[], \(contacts.map(\.address))::text[])
                """, logger: logger)
            try await connection.query(
                """
                INSERT INTO viewline_sync_state (source, applied_document, applied_at) VALUES (\(source), \(document), \(date))
                ON CONFLICT (source) DO UPDATE SET applied_document = excluded.applied_document, applied_at = excluded.applied_at
                """, logger: logger)
            return true
        }
    }

    public func updatePhone(name: String, phone: String) async throws {
        try await write { [logger] connection in
            _ = try await connection.query("UPDATE viewline_contacts SET phone = \(phone) WHERE name = \(name)", logger: logger)
        }
    }

    // MARK: - Coordination

    public func singleFlight(_ job: String, _ body: @escaping @Sendable () async throws -> Bool) async throws -> Bool? {
        // Fail fast while the database is down; the run itself may wait long for the
        // lock (another node's run) and for `body`.
        try await run("SELECT 1")
        // The lock connection is held while `body` runs (which may wait long for the
        // lock, another node's run): its statements each carry the operation deadline.
        let limit = database.operationTimeout
        return try await database.call(timeout: .seconds(24 * 3600)) { [logger] connection in
            let before = try await connection.withDeadline(limit) { try await Self.generation(of: job, on: connection, logger: logger) }
            // A session-level lock on this leased connection, held while `body` runs
            // (its queries use other connections). It goes with the connection if
            // this node dies.
            try await connection.withDeadline(limit) {
                _ = try await connection.query("SELECT pg_advisory_lock(\(Self.lockNamespace), hashtext(\(job)))", logger: logger)
            }
            do {
                let now = try await connection.withDeadline(limit) { try await Self.generation(of: job, on: connection, logger: logger) }
                var result: Bool?
                if now == before {
                    result = try await body()
                    try await connection.withDeadline(limit) {
                        _ = try await connection.query(
                            """
                            INSERT INTO viewline_job_runs (job, generation) VALUES (\(job), 1)
                            ON CONFLICT (job) DO UPDATE SET generation = viewline_job_runs.generation + 1
                            """, logger: logger)
                    }
                }
                try await connection.withDeadline(limit) {
                    _ = try await connection.query("SELECT pg_advisory_unlock(\(Self.lockNamespace), hashtext(\(job)))", logger: logger)
                }
                return result
            } catch {
                _ = try? await connection.withDeadline(limit) {
                    _ = try await connection.query("SELECT pg_advisory_unlock(\(Self.lockNamespace), hashtext(\(job)))", logger: logger)
                }
                throw error
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

    func run(_ query: PostgresQuery) async throws { try await database.run(query) }

    /// A write, fenced by the session's lease when the task acts for one
    /// (``DatabaseAccess/write(transaction:_:)``).
    func write<T: Sendable>(_ work: @escaping @Sendable (PostgresConnection) async throws -> T) async throws -> T {
        try await database.write(work)
    }

    func collect<T: Sendable>(
        _ query: PostgresQuery, timeout: Duration? = nil, _ transform: @escaping @Sendable (PostgresRow) throws -> T
    ) async throws -> [T] {
        try await database.collect(query, timeout: timeout, transform)
    }
}

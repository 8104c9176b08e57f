import Foundation
import GRDB

/// The embedded store: one SQLite file through GRDB, owning the writer and the
/// migrator (the shape of GRDB's demo `AppDatabase`). For one server node; several
/// nodes share a `PostgresStore`.
public struct SQLiteStore: AppStore {
    public let writer: any DatabaseWriter
    /// Draft writes from every session, committed together (see ``GroupCommit``).
    private let draftWrites: GroupCommit

    /// Opens (creating and migrating) the database at `path`; `:memory:` gives a
    /// private in-memory database. Files use a `DatabasePool` in WAL mode.
    public static func open(path: String) throws -> SQLiteStore {
        if path == ":memory:" {
            return try SQLiteStore(DatabaseQueue(configuration: configuration))
        }
        return try SQLiteStore(DatabasePool(path: path, configuration: configuration))
    }

    /// A fresh in-memory database, one per test.
    public static func inMemory() throws -> SQLiteStore {
        try SQLiteStore(DatabaseQueue(configuration: configuration))
    }

    private static var configuration: Configuration {
        var config = Configuration()
        config.busyMode = .timeout(5)
        // Every commit reaches the disk before it returns (WAL: the log is synced).
        config.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = FULL") }
        return config
    }

    public init(_ writer: any DatabaseWriter) throws {
        self.writer = writer
        draftWrites = GroupCommit(writer)
        try migrator.migrate(writer)
    }

    private var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.create(table: "user") { t in
                t.primaryKey("name", .text)
                t.column("passwordHash", .text).notNull()
            }
            try db.create(table: "draft") { t in
                t.primaryKey("user", .text)
                t.column("text", .text).notNull()
                t.column("updatedAt", .datetime).notNull()
            }
            try db.create(table: "remoteSavedDraft") { t in
                t.autoIncrementedPrimaryKey("id")
                t.column("user", .text).notNull().indexed()
                t.column("text", .text).notNull()
                t.column("savedAt", .datetime).notNull()
            }
            try db.create(table: "contact") { t in
                t.autoIncrementedPrimaryKey("id")
                t.column("name", .text).notNull()
                t.column("phone", .text).notNull()
                t.column("address", .text).notNull()
            }
            try db.create(table: "syncState") { t in
                t.primaryKey("source", .text)
                t.column("appliedDocument", .text).notNull()
                t.column("appliedAt", .datetime).notNull()
            }
        }
        migrator.registerMigration("v2 contacts version") { db in
            try db.execute(
                sql: """
                    CREATE TABLE contactsVersion (id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL);
                    INSERT INTO contactsVersion (id, version) VALUES (1, 0);
                    CREATE TRIGGER contactInserted AFTER INSERT ON contact BEGIN UPDATE contactsVersion SET version = version + 1; END;
                    CREATE TRIGGER contactUpdated AFTER UPDATE ON contact BEGIN UPDATE contactsVersion SET version = version + 1; END;
                    CREATE TRIGGER contactDeleted AFTER DELETE ON contact BEGIN UPDATE contactsVersion SET version = version + 1; END;
                    """)
        }
        migrator.registerMigration("v3 session records") { db in
            // A single node's session records (``SQLiteSessionDirectory``): what lets a
            // restarted server give its sessions back.
            try db.execute(
                sql: """
                    CREATE TABLE sessionRecord (
                        lookup TEXT PRIMARY KEY, secretDigest BLOB NOT NULL, owner TEXT NOT NULL, snapshot TEXT NOT NULL,
                        rev INTEGER NOT NULL, updatedAt DOUBLE NOT NULL, ended BOOLEAN NOT NULL DEFAULT 0);
                    CREATE INDEX sessionRecordOwner ON sessionRecord (owner, updatedAt);
                    CREATE INDEX sessionRecordUpdatedAt ON sessionRecord (updatedAt);
                    CREATE TABLE sessionNode (id TEXT PRIMARY KEY, seenAt DOUBLE NOT NULL);
                    CREATE TABLE setting (name TEXT PRIMARY KEY, value TEXT NOT NULL);
                    """)
        }
        return migrator
    }
}

// MARK: - Users

extension SQLiteStore {
    /// Stores a user's salted hash (never the password).
    public func storeUser(_ name: String, passwordHash: String) async throws {
        try await writer.write { db in
            try db.execute(
                sql: "INSERT INTO user (name, passwordHash) VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET passwordHash = excluded.passwordHash",
                arguments: [name, passwordHash])
        }
    }

    public func passwordHashes() async throws -> [String: String] {
        try await writer.read { db in
            var table: [String: String] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT name, passwordHash FROM user") {
                table[row["name"]] = row["passwordHash"]
            }
            return table
        }
    }
}

// MARK: - Drafts

extension SQLiteStore {
    /// Writes the user's pending draft; it is durable when this returns. Concurrent
    /// calls share one transaction (group commit).
    public func setDraft(user: String, text: String, at date: Date) async throws {
        try await draftWrites.write { db in try Draft(user: user, text: text, updatedAt: date).upsert(db) }
    }

    public func pendingDraft(user: String) async throws -> Draft? {
        try await writer.read { db in try Draft.fetchOne(db, key: user) }
    }

    /// Deletes the user's draft; with `text`, only if it still holds that text, so a
    /// draft edited during a save is not lost when the older text's save succeeds.
    @discardableResult
    public func deleteDraft(user: String, ifText text: String?) async throws -> Bool {
        try await writer.write { db in
            var request = Draft.filter(Draft.Columns.user == user)
            if let text { request = request.filter(Draft.Columns.text == text) }
            return try request.deleteAll(db) > 0
        }
    }

    /// The built-in remote store's side: appends a saved draft.
    public func insertSavedDraft(user: String, text: String, at date: Date) async throws -> SavedDraft {
        try await writer.write { db in
            var saved = SavedDraft(user: user, text: text, savedAt: date)
            try saved.insert(db)
            // Bounded per user: the oldest beyond the newest `maximumPerUser` go.
            try db.execute(
                sql: """
                    DELETE FROM remoteSavedDraft WHERE user = ? AND id NOT IN (
                        SELECT id FROM remoteSavedDraft WHERE user = ? ORDER BY savedAt DESC, id DESC LIMIT ?)
                    """, arguments: [user, user, SavedDraft.maximumPerUser])
            return saved
        }
    }

    public func savedDrafts(user: String) async throws -> [SavedDraft] {
        try await writer.read { db in
            try SavedDraft.filter(SavedDraft.Columns.user == user)
                .order(SavedDraft.Columns.savedAt.desc, SavedDraft.Columns.id.desc)
                .fetchAll(db)
        }
    }
}

// MARK: - Contacts

extension SQLiteStore {
    /// The contacts and the table's version, read in one transaction.
    public func contactsSnapshot() async throws -> ContactsSnapshot {
        try await writer.read(Self.fetchContactsSnapshot)
    }

    /// Every distinct state of the contacts table, starting with the current one
    /// (a GRDB `ValueObservation`). With a `DatabasePool` the first value can be older
    /// than a direct read made after the observation started: compare versions.
    public func observeContacts() -> AsyncThrowingStream<ContactsSnapshot, any Error> {
        let observation = ValueObservation.tracking(Self.fetchContactsSnapshot).removeDuplicates()
        return AsyncThrowingStream { continuation in
            let cancellable = observation.start(
                in: writer, scheduling: .async(onQueue: DispatchQueue(label: "viewline.contacts-observation")),
                onError: { continuation.finish(throwing: $0) },
                onChange: { continuation.yield($0) })
            continuation.onTermination = { _ in cancellable.cancel() }
        }
    }

    private static func fetchContactsSnapshot(_ db: Database) throws -> ContactsSnapshot {
        let version = try Int.fetchOne(db, sql: "SELECT version FROM contactsVersion") ?? 0
        return ContactsSnapshot(version: version, items: try Contact.order(Contact.Columns.name).fetchAll(db))
    }

    /// Replaces all contacts with `contacts` in one transaction, unless `document`
    /// (the remote data in canonical form) is what was last applied from `source`.
    /// Returns whether anything was written.
    @discardableResult
    public func applyContacts(_ contacts: [Contact], document: String, source: String, at date: Date) async throws -> Bool {
        try await writer.write { db in
            let applied = try String.fetchOne(db, sql: "SELECT appliedDocument FROM syncState WHERE source = ?", arguments: [source])
            if applied == document { return false }
            try Contact.deleteAll(db)
            for contact in contacts { try contact.insert(db) }
            try db.execute(
                sql: """
                    INSERT INTO syncState (source, appliedDocument, appliedAt) VALUES (?, ?, ?)
                    ON CONFLICT(source) DO UPDATE SET appliedDocument = excluded.appliedDocument, appliedAt = excluded.appliedAt
                    """,
                arguments: [source, document, date])
            return true
        }
    }

    /// Changes one contact's phone directly: a local edit, e.g. from another process or a test.
    public func updatePhone(name: String, phone: String) async throws {
        try await writer.write { db in
            try db.execute(sql: "UPDATE contact SET phone = ? WHERE name = ?", arguments: [phone, name])
        }
    }
}

// MARK: - Coordination

extension SQLiteStore {
    /// One SQLite file serves one node, whose callers already share a run in
    /// process (`ContactsSyncCoordinator`); a run here is a run.
    public func singleFlight(_ job: String, _ body: @escaping @Sendable () async throws -> Bool) async throws -> Bool? {
        try await body()
    }
}

import Foundation
import ViewlinePersistence
import ViewlinePostgres
import ViewlineAppsPostgres
import ViewlineTestSupport

/// The two stores the seed apps run on. Tests that take an engine run once on each:
/// SQLite on a temporary file (pool, WAL, as the server opens it) and PostgreSQL on
/// a real server started for the test process, one fresh database per test.
enum StoreEngine: String, CaseIterable, Sendable {
    case sqlite, postgres

    /// A fresh, empty store; how to open the same data again (a restart); and
    /// another writer on the same data as the server sees it: on SQLite the same
    /// store (one node owns the file, and GRDB observes writes made through it), on
    /// PostgreSQL a second store, as another node has.
    func makeStore() async throws -> (
        store: any AppStore, reopen: @Sendable () async throws -> any AppStore, otherWriter: any AppStore
    ) {
        switch self {
        case .sqlite:
            let path = NSTemporaryDirectory() + "viewline-test-\(UUID().uuidString).sqlite"
            let store = try SQLiteStore.open(path: path)
            return (store, { try SQLiteStore.open(path: path) }, store)
        case .postgres:
            let server = PostgresServer.shared
            let url = try PostgresURL(server.url(database: try await server.createDatabase()))
            return (try await PostgresStore.connect(url), { try await PostgresStore.connect(url) }, try await PostgresStore.connect(url))
        }
    }
}

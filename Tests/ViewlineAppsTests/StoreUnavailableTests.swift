import Logging
import PostgresNIO
import Testing
import ViewlineTestSupport

@testable import ViewlinePostgres

/// What a store call's caller hears when PostgreSQL answers with an error: a
/// transaction the server rolled back to let others go on (SQLSTATE class 40: a
/// deadlock's victim, a serialization failure) wrote nothing and may succeed in a
/// moment, so it is `StoreUnavailable` (the client hears `unavailable` and may try
/// again); any other error from the server is the call's own failure.
///
/// The errors come from a real PostgreSQL, over the wire, raised with the SQLSTATE
/// PostgreSQL itself sends for each case (a real deadlock is shown by
/// `PostgresSessionDirectoryTests` and the chaos runs; its victim is chosen by
/// timing, which a test cannot pin down).
@Suite struct StoreUnavailableTests {
    static func access() async throws -> DatabaseAccess {
        let server = PostgresServer.shared
        let database = try await server.createDatabase()
        let access = DatabaseAccess(
            url: try PostgresURL(server.url(database: database)), operationTimeout: .seconds(20), logger: Logger(label: "test"))
        access.runInTask()
        return access
    }

    static func raising(_ state: String) -> PostgresQuery {
        PostgresQuery(unsafeSQL: "DO $$ BEGIN RAISE EXCEPTION 'raised by the test' USING ERRCODE = '\(state)'; END $$")
    }

    @Test(arguments: ["40P01", "40001", "40000"])
    func aTransactionTheServerRolledBackIsUnavailable(state: String) async throws {
        let access = try await Self.access()
        defer { access.close() }
        let error = await #expect(throws: StoreUnavailable.self) { try await access.run(Self.raising(state)) }
        #expect((error?.underlying as? PSQLError)?.serverInfo?[.sqlState] == state)
    }

    @Test(arguments: ["23505", "P0001", "42P01"])
    func anyOtherErrorIsTheCallsOwnFailure(state: String) async throws {
        let access = try await Self.access()
        defer { access.close() }
        await #expect {
            try await access.run(Self.raising(state))
        } throws: { error in
            !(error is StoreUnavailable) && (error as? PSQLError)?.serverInfo?[.sqlState] == state
        }
    }

    @Test func theConnectionIsUsableAfterwards() async throws {
        let access = try await Self.access()
        defer { access.close() }
        await #expect(throws: StoreUnavailable.self) { try await access.run(Self.raising("40P01")) }
        try await access.run("SELECT 1")
    }
}

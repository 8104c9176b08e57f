import Foundation
import Logging
import PostgresNIO
import Testing
import ViewlineTestSupport

@testable import ViewlinePostgres

/// A database connection that goes silent (the link drops packets; new connections
/// would work) fails its statement at the deadline: the deadline closes the
/// connection, because postgres-nio's query does not observe cancellation (a node's
/// renewals and record batches hung for the whole window, and SIGTERM did not finish).
@Suite(.timeLimit(.minutes(1))) struct SilentDatabaseTests {
    @Test func aStatementOnASilentConnectionFailsAtItsDeadlineAndTheNextOneReconnects() async throws {
        let server = PostgresServer.shared
        let database = try server.createDatabase()
        let proxy = try TCPProxy(to: server.port)
        let url = try PostgresURL("postgres://postgres@127.0.0.1:\(proxy.port)/\(database)?sslmode=disable")
        let connection = DedicatedConnection(url: url, id: 9, logger: Logger(label: "test"))
        #expect(try await connection.bool("SELECT true", timeout: .seconds(5)))
        proxy.silence()
        let start = ContinuousClock.now
        await #expect(throws: PostgresConnection.DeadlinePassed.self) {
            _ = try await connection.bool("SELECT true", timeout: .seconds(1))
        }
        let waited = ContinuousClock.now - start
        #expect(waited < .seconds(3), "waited \(waited)")
        // A fresh connection through the same (working) link answers.
        #expect(try await connection.bool("SELECT true", timeout: .seconds(5)))
    }

    @Test func everyConnectionCarriesServerSideLimitsBelowTheNodeTimeout() async throws {
        let server = PostgresServer.shared
        let database = try server.createDatabase()
        let url = try PostgresURL(server.url(database: database))
        let connection = DedicatedConnection(url: url, id: 9, logger: Logger(label: "test"))
        let limits = try await connection.rows(
            "SELECT current_setting('statement_timeout') || ' ' || current_setting('lock_timeout') || ' ' || current_setting('idle_in_transaction_session_timeout')",
            timeout: .seconds(5)
        ) { try $0.decode(String.self) }
        #expect(limits == ["4500ms 2s 4500ms"])
    }
}

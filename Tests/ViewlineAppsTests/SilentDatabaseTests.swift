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
        let database = try await server.createDatabase()
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

    /// The pool's connections too: a call past its deadline closes the connection it
    /// leased, so silenced connections do not stay leased until the kernel gives up on
    /// them. With all 16 of the pool's connections silenced, a call still gets a new one.
    @Test func aPoolCallOnASilentConnectionClosesItSoThePoolRecovers() async throws {
        let server = PostgresServer.shared
        let database = try await server.createDatabase()
        let proxy = try TCPProxy(to: server.port)
        let url = try PostgresURL("postgres://postgres@127.0.0.1:\(proxy.port)/\(database)?sslmode=disable")
        let access = DatabaseAccess(url: url, operationTimeout: .milliseconds(500), logger: Logger(label: "test"))
        access.runInTask()
        defer { access.close() }
        // Sixteen connections at once: the pool opens all it may.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<16 { group.addTask { try await access.run("SELECT pg_sleep(0.3)", timeout: .seconds(10)) } }
            try await group.waitForAll()
        }
        proxy.silence()
        // Each call fails by its deadline (or at once, while the health watch, whose
        // own connection went silent too, counts the database as down), and the one
        // that met a silenced connection closed it: calls are answered again (had they
        // stayed leased, the full pool would answer none, however long one waits).
        var failures = 0
        var answered = false
        let giveUp = ContinuousClock.now + .seconds(60)
        while !answered, ContinuousClock.now < giveUp {
            let start = ContinuousClock.now
            do {
                answered = try await access.collect("SELECT 42") { try $0.decode(Int.self) } == [42]
            } catch {
                failures += 1
                #expect(ContinuousClock.now - start < .seconds(3), "a call waited \(ContinuousClock.now - start)")
                try await Task.sleep(for: .milliseconds(50))
            }
        }
        #expect(answered, "\(failures) calls failed")
    }

    /// A write answered "unavailable" at its deadline does not commit afterwards. A
    /// one-statement write waiting on a row lock another transaction holds is the
    /// hard case: its statement is already sent, and closing the connection alone
    /// would not stop it (PostgreSQL notices a gone client only when it next talks to
    /// it): the server checks its client while it waits (`client_connection_check_interval`)
    /// and aborts the statement.
    @Test func aWriteThatMissedItsDeadlineNeverCommitsLater() async throws {
        let server = PostgresServer.shared
        let database = try await server.createDatabase()
        let url = try PostgresURL(server.url(database: database))
        let access = DatabaseAccess(url: url, operationTimeout: .milliseconds(500), logger: Logger(label: "test"))
        access.runInTask()
        defer { access.close() }
        // Setup and the final read get a wide deadline: a loaded machine is slow, and
        // only the write's own 0.5 s deadline is under test.
        try await access.run("CREATE TABLE late (v int)", timeout: .seconds(60))
        try await access.run("INSERT INTO late VALUES (0)", timeout: .seconds(60))
        let holder = Task {
            try await server.queryOnItsOwnThread("BEGIN; SELECT 1 FROM late FOR UPDATE; SELECT pg_sleep(1.5); COMMIT;", database: database)
        }
        try await Task.sleep(for: .milliseconds(300))
        await #expect(throws: StoreUnavailable.self) {
            try await access.write { connection in
                _ = try await connection.query("UPDATE late SET v = 1", logger: Logger(label: "test")).collect()
            }
        }
        _ = try await holder.value
        try await Task.sleep(for: .milliseconds(500))
        #expect(try await access.collect("SELECT v::int8 FROM late", timeout: .seconds(60)) { try $0.decode(Int64.self) } == [0])
    }

    @Test func everyConnectionCarriesServerSideLimitsBelowTheNodeTimeout() async throws {
        let server = PostgresServer.shared
        let database = try await server.createDatabase()
        let url = try PostgresURL(server.url(database: database))
        let connection = DedicatedConnection(url: url, id: 9, logger: Logger(label: "test"))
        let limits = try await connection.rows(
            "SELECT current_setting('statement_timeout') || ' ' || current_setting('lock_timeout') || ' ' || current_setting('idle_in_transaction_session_timeout') || ' ' || current_setting('client_connection_check_interval')",
            timeout: .seconds(5)
        ) { try $0.decode(String.self) }
        #expect(limits == ["4500ms 2s 4500ms 250ms"])
    }

    @Test func theServerSideLimitsFollowTheNodeTimeout() async throws {
        let server = PostgresServer.shared
        let database = try await server.createDatabase()
        var url = try PostgresURL(server.url(database: database))
        url.nodeTimeout = .seconds(2)
        let connection = DedicatedConnection(url: url, id: 9, logger: Logger(label: "test"))
        let limits = try await connection.rows(
            "SELECT current_setting('statement_timeout') || ' ' || current_setting('lock_timeout') || ' ' || current_setting('idle_in_transaction_session_timeout')",
            timeout: .seconds(5)
        ) { try $0.decode(String.self) }
        #expect(limits == ["1800ms 800ms 1800ms"])
    }
}

import Logging
import Synchronization
import Testing
import ViewlineTestSupport

@testable import ViewlinePostgres

/// A store call ends at its deadline, or when the database goes down, even when the
/// query under it never notices it was cancelled (a statement stuck on a dead
/// connection): nothing that waits on the store, such as a node's record batches,
/// is held past the limit.
@Suite(.timeLimit(.minutes(1))) struct StoreDeadlineTests {
    /// A query that never answers and ignores cancellation; `release()` ends it.
    final class StuckQuery: Sendable {
        private let waiter = Mutex<CheckedContinuation<Void, Never>?>(nil)
        private let released = Mutex(false)

        func run() async -> Int {
            await withCheckedContinuation { continuation in
                let now = released.withLock { released in
                    if released { return true }
                    waiter.withLock { $0 = continuation }
                    return false
                }
                if now { continuation.resume() }
            }
            ended.withLock { $0 = true }
            return 1
        }

        private let ended = Mutex(false)
        /// Not over: nothing answered it, nothing cancelled it.
        var isStuck: Bool { !ended.withLock { $0 } }

        func release() {
            released.withLock { $0 = true }
            waiter.withLock { waiter in
                waiter?.resume()
                waiter = nil
            }
        }
    }

    @Test func aQueryThatIgnoresCancellationStillEndsAtTheDeadline() async throws {
        let stuck = StuckQuery()
        defer { stuck.release() }
        await #expect(throws: DatabaseAccess.TimedOut.self) {
            _ = try await DatabaseAccess.first(of: { await stuck.run() }, within: .milliseconds(200), health: DatabaseHealth())
        }
        #expect(stuck.isStuck)  // the call ended while its query still hung (the suite's time limit catches a wait)
    }

    @Test func theDatabaseGoingDownEndsAWaitingCallAtOnce() async throws {
        let stuck = StuckQuery()
        defer { stuck.release() }
        let health = DatabaseHealth()
        let call = Task { try await DatabaseAccess.first(of: { await stuck.run() }, within: .seconds(600), health: health) }
        try await Task.sleep(for: .milliseconds(50))
        health.set(down: true)
        await #expect(throws: DatabaseAccess.ConnectionLost.self) { _ = try await call.value }
        #expect(stuck.isStuck)
    }

    /// A transaction the server rolled back to break a deadlock wrote nothing and may
    /// succeed in a moment: the caller hears "unavailable" (a client may try again),
    /// not an unexpected failure.
    @Test func aDeadlocksVictimIsUnavailableNotAFailure() async throws {
        let server = PostgresServer.shared
        let database = try server.createDatabase()
        _ = try server.query("CREATE TABLE locks (id text PRIMARY KEY); INSERT INTO locks VALUES ('a'), ('b')", database: database)
        let access = DatabaseAccess(
            url: try PostgresURL(server.url(database: database)), operationTimeout: .seconds(20), logger: Logger(label: "test"))
        defer { access.close() }
        // The other transaction takes `a` (and says so with an advisory lock), waits
        // until this one waits for `a`, then waits for `b`, which this one holds: a
        // cycle. This one began waiting first, so its check (after deadlock_timeout)
        // finds it and rolls it back; the other's check would come 30 s later.
        let other = Task {
            try await server.queryOnItsOwnThread("""
                BEGIN; SELECT set_config('deadlock_timeout', '30s', true);
                DO $$ BEGIN
                    PERFORM 1 FROM locks WHERE id = 'a' FOR UPDATE;
                    PERFORM pg_advisory_xact_lock(1);
                    FOR i IN 1..600 LOOP
                        EXIT WHEN EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock');
                        PERFORM pg_sleep(0.05);
                    END LOOP;
                    PERFORM 1 FROM locks WHERE id = 'b' FOR UPDATE;
                END $$;
                COMMIT;
                """, database: database)
        }
        await #expect(throws: StoreUnavailable.self) {
            try await access.run("""
                DO $$ BEGIN
                    FOR i IN 1..600 LOOP
                        EXIT WHEN EXISTS (SELECT 1 FROM pg_locks l JOIN pg_database d ON d.oid = l.database
                            WHERE d.datname = current_database() AND l.locktype = 'advisory' AND l.granted);
                        PERFORM pg_sleep(0.05);
                    END LOOP;
                    PERFORM 1 FROM locks WHERE id = 'b' FOR UPDATE;
                    PERFORM 1 FROM locks WHERE id = 'a' FOR UPDATE;
                END $$
                """)
        }
        _ = try await other.value
    }

    @Test func anAnswerBeforeTheDeadlineIsTheResult() async throws {
        #expect(try await DatabaseAccess.first(of: { 42 }, within: .seconds(600), health: DatabaseHealth()) == 42)
    }
}

import Synchronization
import Testing

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

    @Test func anAnswerBeforeTheDeadlineIsTheResult() async throws {
        #expect(try await DatabaseAccess.first(of: { 42 }, within: .seconds(600), health: DatabaseHealth()) == 42)
    }
}

import Foundation
import Testing
import ViewlineTestSupport

/// Tests that block their thread run on threads kept for them, so a process full of
/// end-to-end tests that sleep and read sockets cannot starve its async tests (a
/// recorded session's test once waited two minutes for a display that way).
@Suite struct BlocksItsThreadTests {
    @Test(.blocksItsThread) func aBlockingTestRunsOnAThreadKeptForThem() {
        #expect(BlockingTestExecutor.isCurrent)
    }

    @Test func aTestWithoutTheTraitRunsOnTheCooperativePool() {
        #expect(!BlockingTestExecutor.isCurrent)
    }

    @Test(.timeLimit(.minutes(5))) func whileEveryBlockingThreadIsTakenAsyncWorkStillRuns() async throws {
        let latch = Latch()
        // Every kept thread blocks until the async work below has run on the
        // cooperative pool, or for at most a minute (other blocking tests may hold
        // the threads first, and the pool may be busy).
        let blocked = (0..<BlockingTestExecutor.shared.threads).map { _ in
            Task(executorPreference: BlockingTestExecutor.shared) { latch.waitOpen(seconds: 60) }
        }
        for _ in 0..<10 { await Task.yield() }
        try await Task.sleep(for: .milliseconds(10))
        latch.open()
        for task in blocked { #expect(await task.value) }
    }
}

/// The trait on a suite reaches each of its tests, as the end-to-end suites use it.
@Suite(.blocksItsThread) struct BlocksItsThreadOnASuiteTests {
    @Test func eachTestOfTheSuiteRunsOnAThreadKeptForThem() {
        #expect(BlockingTestExecutor.isCurrent)
    }

    @Test(arguments: [1, 2]) func eachCaseOfAParameterizedTestToo(_ number: Int) {
        #expect(BlockingTestExecutor.isCurrent)
    }
}

/// A gate a blocking thread waits at until it opens.
private final class Latch: @unchecked Sendable {
    private let condition = NSCondition()
    private var isOpen = false

    func open() {
        condition.lock()
        isOpen = true
        condition.broadcast()
        condition.unlock()
    }

    /// Whether the latch opened within `seconds`.
    func waitOpen(seconds: Double) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        let deadline = Date(timeIntervalSinceNow: seconds)
        while !isOpen, condition.wait(until: deadline) {}
        return isOpen
    }
}

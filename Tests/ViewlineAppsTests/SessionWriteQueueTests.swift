import Synchronization
import Testing

@testable import ViewlinePostgres

/// One session's writes run one at a time, in the order they were asked for; other
/// sessions' writes do not wait for them; a write whose caller stopped waiting
/// before its turn is not run.
@Suite(.timeLimit(.minutes(1))) struct SessionWriteQueueTests {
    /// What ran, in order.
    final class Journal: Sendable {
        private let entries = Mutex<[String]>([])
        func add(_ entry: String) { entries.withLock { $0.append(entry) } }
        var all: [String] { entries.withLock { $0 } }
    }

    /// A write that runs until the test lets it end.
    final class Gate: Sendable {
        private let opened = Mutex<CheckedContinuation<Void, Never>?>(nil)
        private let started = Mutex<CheckedContinuation<Void, Never>?>(nil)
        private let isStarted = Mutex(false)

        func write() async {
            let waiter = isStarted.withLock { isStarted -> CheckedContinuation<Void, Never>? in
                isStarted = true
                return started.withLock { started in
                    defer { started = nil }
                    return started
                }
            }
            waiter?.resume()
            await withCheckedContinuation { continuation in opened.withLock { $0 = continuation } }
        }

        /// Returns once `write()` runs.
        func waitUntilStarted() async {
            await withCheckedContinuation { continuation in
                let now = isStarted.withLock { isStarted in
                    if !isStarted { started.withLock { $0 = continuation } }
                    return isStarted
                }
                if now { continuation.resume() }
            }
        }

        func open() async {
            while opened.withLock({ $0 == nil }) { await Task.yield() }
            opened.withLock { $0?.resume(); $0 = nil }
        }
    }

    @Test func aSessionsWritesRunOneAtATimeInTheOrderAskedFor() async throws {
        let queue = SessionWriteQueue()
        let order = Journal()
        let gate = Gate()
        let first = Task {
            try await queue.inTurn(for: "s") {
                order.add("first began")
                await gate.write()
                order.add("first ended")
            }
        }
        await gate.waitUntilStarted()
        let second = Task { try await queue.inTurn(for: "s") { order.add("second") } }
        // Another session's write goes on meanwhile.
        try await queue.inTurn(for: "other") { order.add("other session") }
        #expect(order.all == ["first began", "other session"])
        await gate.open()
        try await first.value
        try await second.value
        #expect(order.all == ["first began", "other session", "first ended", "second"])
        #expect(queue.busySessions == 0)
    }

    @Test func aWriteWhoseCallerStoppedWaitingBeforeItsTurnIsNotRun() async throws {
        let queue = SessionWriteQueue()
        let ran = Journal()
        let gate = Gate()
        let first = Task { try await queue.inTurn(for: "s") { await gate.write() } }
        await gate.waitUntilStarted()
        let abandoned = Task { try await queue.inTurn(for: "s") { ran.add("abandoned") } }
        let third = Task { try await queue.inTurn(for: "s") { ran.add("third") } }
        try await Task.sleep(for: .milliseconds(50))   // both wait for their turn
        abandoned.cancel()
        await gate.open()
        try await first.value
        await #expect(throws: CancellationError.self) { try await abandoned.value }
        try await third.value
        #expect(ran.all == ["third"])
        #expect(queue.busySessions == 0)
    }
}

import Synchronization
import Testing

@testable import ViewlineKit

/// `wait`'s timeout sleeps on a timer that is gone the moment its sleep is cancelled:
/// a `wait 3600000` that settles at once holds nothing for the hour.
@Suite struct SleepTimerTests {
    @Test func aSleepEndsAfterItsDuration() async throws {
        let started = ContinuousClock.now
        try await SleepTimer.sleep(for: .milliseconds(20))
        #expect(ContinuousClock.now - started >= .milliseconds(20))
    }

    @Test func aCancelledSleepThrowsAtOnceAndReleasesItsTimer() async throws {
        let watched = Watched()
        let sleeper = Task {
            let timer = SleepTimer()
            watched.timer.withLock { $0 = WeakTimer(timer) }
            try await timer.sleep(for: .seconds(3600))
        }
        while watched.timer.withLock({ $0 == nil }) { await Task.yield() }
        let started = ContinuousClock.now
        sleeper.cancel()
        await #expect(throws: CancellationError.self) { try await sleeper.value }
        // Cancelled, not slept out: an hour's sleep against a bound a loaded machine
        // cannot reach by slowness alone.
        #expect(ContinuousClock.now - started < .seconds(60))
        // The timer's handler is let go as dispatch processes the cancellation.
        for _ in 0..<500 where watched.timer.withLock({ $0?.timer != nil }) { try await Task.sleep(for: .milliseconds(2)) }
        #expect(watched.timer.withLock { $0?.timer } == nil)
    }

    @Test func aSleepCancelledBeforeItStartsThrows() async throws {
        let sleeper = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await SleepTimer.sleep(for: .seconds(3600))
        }
        await #expect(throws: CancellationError.self) { try await sleeper.value }
    }

    final class WeakTimer: Sendable {
        nonisolated(unsafe) weak var timer: SleepTimer?
        init(_ timer: SleepTimer) { self.timer = timer }
    }

    final class Watched: Sendable {
        let timer = Mutex<WeakTimer?>(nil)
    }
}

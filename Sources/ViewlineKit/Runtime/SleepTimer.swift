import Dispatch
import Synchronization

/// One sleep whose timer is released the moment it is cancelled.
///
/// `Task.sleep` keeps a cancelled sleep queued until its deadline: the sleep's job and
/// its dispatch timer (about 470 bytes) stay allocated for the whole duration. A `wait
/// 3600000` that settles at once would then hold its timer for an hour, and a client
/// repeating it would grow the server by that much per command. This sleep cancels
/// its dispatch timer instead, so a cancelled sleep holds nothing.
final class SleepTimer: Sendable {
    private enum State {
        case idle
        case sleeping(CheckedContinuation<Void, any Error>, any DispatchSourceTimer)
        case cancelled
        case over
    }

    private let state = Mutex(State.idle)

    /// Sleeps for `duration`; throws `CancellationError` as soon as its task is cancelled.
    static func sleep(for duration: Duration) async throws {
        try await SleepTimer().sleep(for: duration)
    }

    /// Sleeps once for `duration` (a timer sleeps only once).
    func sleep(for duration: Duration) async throws {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { start(duration, $0) }
        } onCancel: {
            cancel()
        }
    }

    private func start(_ duration: Duration, _ continuation: CheckedContinuation<Void, any Error>) {
        let cancelledAlready = state.withLock { state -> Bool in
            guard case .idle = state else { return true }
            let source = DispatchSource.makeTimerSource(queue: .global())
            source.setEventHandler { self.end(with: nil) }
            source.schedule(deadline: .now() + Self.dispatchInterval(duration))
            state = .sleeping(continuation, source)
            source.activate()
            return false
        }
        if cancelledAlready { continuation.resume(throwing: CancellationError()) }
    }

    private func cancel() {
        end(with: CancellationError())
    }

    /// Resumes the sleeper once (fired or cancelled) and cancels the timer, which
    /// releases its handler and with it this object.
    private func end(with error: (any Error)?) {
        let taken = state.withLock { state -> (CheckedContinuation<Void, any Error>, any DispatchSourceTimer)? in
            switch state {
            case .idle:
                state = .cancelled
                return nil
            case .sleeping(let continuation, let source):
                state = .over
                return (continuation, source)
            case .cancelled, .over:
                return nil
            }
        }
        guard let (continuation, source) = taken else { return }
        source.cancel()
        if let error { continuation.resume(throwing: error) } else { continuation.resume() }
    }

    /// `duration` as dispatch counts it, clamped to what it can hold.
    private static func dispatchInterval(_ duration: Duration) -> DispatchTimeInterval {
        let (seconds, attoseconds) = duration.components
        guard seconds >= 0 else { return .nanoseconds(0) }
        guard seconds < Int64(Int.max / 1_000_000_000) - 1 else { return .never }
        return .nanoseconds(Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000))
    }
}

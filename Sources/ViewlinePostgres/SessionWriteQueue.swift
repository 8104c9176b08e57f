import Synchronization

/// One session's writes, one at a time, in the order they were asked for.
///
/// A session's commands and background work may each be waiting on a write at
/// once: a command whose client gave up on it (its connection dropped) still runs
/// when the client, reconnected, sends the next. Sent to PostgreSQL together, the
/// two could commit in either order (both waiting on one lock are woken together),
/// so the earlier one, never acknowledged, could overwrite the later one, which
/// was. In turn, the later write starts only once the earlier one has committed or
/// failed.
///
/// A write whose caller stopped waiting (its deadline passed, so the task was
/// cancelled) before its turn came is not sent at all: its caller was told
/// `unavailable`, and the writes after it must not be overtaken by it later.
final class SessionWriteQueue: Sendable {
    /// Per session with a write running: the writes waiting for their turn, oldest first.
    private let waiting = Mutex<[String: [CheckedContinuation<Void, Never>]]>([:])

    /// Runs `write` once every write for `session` asked for before it has ended.
    func inTurn<T: Sendable>(for session: String, _ write: @Sendable () async throws -> T) async throws -> T {
        await turn(session)
        defer { pass(session) }
        try Task.checkCancellation()
        return try await write()
    }

    /// How many sessions have a write running (for tests: none once all have ended).
    var busySessions: Int { waiting.withLock { $0.count } }

    private func turn(_ session: String) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = waiting.withLock { waiting -> Bool in
                if waiting[session] == nil {
                    waiting[session] = []
                    return true
                }
                waiting[session]!.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    private func pass(_ session: String) {
        let next = waiting.withLock { waiting -> CheckedContinuation<Void, Never>? in
            guard var queue = waiting[session], !queue.isEmpty else {
                waiting[session] = nil
                return nil
            }
            let next = queue.removeFirst()
            waiting[session] = queue
            return next
        }
        next?.resume()
    }
}

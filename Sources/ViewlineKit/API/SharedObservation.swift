import Synchronization

/// One observation of a source of truth (a database query, a feed), shared by every
/// session that watches it: the upstream runs once for the whole server, however
/// many sessions show its value, and each change is read once.
///
/// Create one per query when the server starts, keep it in ``Services``, and let a
/// view-model follow it with ``Session/observe(_:_:)``. The upstream starts with the
/// first watcher and stops after the last; a new watcher gets the latest value at once.
public final class SharedObservation<Value: Sendable>: Sendable {
    private let makeUpstream: @Sendable () -> AsyncThrowingStream<Value, any Error>
    private let state = Mutex(State())

    private struct State {
        var watchers: [Int: AsyncStream<Value>.Continuation] = [:]
        var nextID = 0
        var upstream: Task<Void, Never>?
        var latest: Value?
    }

    /// - Parameter makeUpstream: starts observing; called again if every watcher left and a new one comes.
    public init(_ makeUpstream: @escaping @Sendable () -> AsyncThrowingStream<Value, any Error>) {
        self.makeUpstream = makeUpstream
    }

    /// How many watchers follow it right now.
    public var watcherCount: Int { state.withLock { $0.watchers.count } }

    /// The values from now on, newest first when a watcher falls behind (only the
    /// latest value is kept for it: a state observation needs no history).
    func watch() -> (id: Int, values: AsyncStream<Value>) {
        let (values, continuation) = AsyncStream.makeStream(of: Value.self, bufferingPolicy: .bufferingNewest(1))
        let id = state.withLock { state -> Int in
            let id = state.nextID
            state.nextID += 1
            state.watchers[id] = continuation
            if let latest = state.latest { continuation.yield(latest) }
            if state.upstream == nil { state.upstream = Task { await self.pump() } }
            return id
        }
        continuation.onTermination = { [weak self] _ in self?.leave(id) }
        return (id, values)
    }

    private func leave(_ id: Int) {
        let upstream = state.withLock { state -> Task<Void, Never>? in
            state.watchers[id] = nil
            guard state.watchers.isEmpty else { return nil }
            defer { state.upstream = nil; state.latest = nil }
            return state.upstream
        }
        upstream?.cancel()
    }

    private func pump() async {
        do {
            for try await value in makeUpstream() {
                let watchers = state.withLock { state in
                    state.latest = value
                    return Array(state.watchers.values)
                }
                for watcher in watchers { watcher.yield(value) }
            }
        } catch {
            // The upstream failed or was cancelled: watchers keep the last value they got.
        }
    }
}

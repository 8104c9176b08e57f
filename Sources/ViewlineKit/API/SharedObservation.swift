import NIOCore
import Synchronization

/// One observation of a source of truth (a database query, a feed), shared by every
/// session that watches it: the upstream runs once for the whole server, however
/// many sessions show its value, and each change is read once.
///
/// Create one per query when the server starts, keep it in ``Services``, and let a
/// view-model follow it with ``ViewSession/observe(_:_:)``. The upstream starts with the
/// first watcher and stops after the last; a new watcher gets the latest value at once.
public final class SharedObservation<Value: Sendable>: Sendable {
    private let makeUpstream: @Sendable () -> AsyncThrowingStream<Value, any Error>
    private let state = Mutex(State())

    private struct State {
        var watchers: [Int: Watcher] = [:]
        var nextID = 0
        var upstream: Task<Void, Never>?
        var latest: Value?
    }

    /// A watcher: its event loop and what to call there with each value.
    private struct Watcher {
        let loop: any EventLoop
        let deliver: @Sendable (Value) -> Void
    }

    /// - Parameter makeUpstream: starts observing; called again if every watcher left and a new one comes.
    public init(_ makeUpstream: @escaping @Sendable () -> AsyncThrowingStream<Value, any Error>) {
        self.makeUpstream = makeUpstream
    }

    /// How many watchers follow it right now.
    public var watcherCount: Int { state.withLock { $0.watchers.count } }

    /// Calls `deliver` on `loop` with the latest value (if there is one yet) and then
    /// with every new one, in order, until ``leave(_:)`` with the returned id. A
    /// change reaches the watchers of one loop in one task on that loop: no task,
    /// stream or thread hop per watcher.
    func watch(on loop: any EventLoop, _ deliver: @escaping @Sendable (Value) -> Void) -> Int {
        let (id, latest) = state.withLock { state -> (Int, Value?) in
            let id = state.nextID
            state.nextID += 1
            state.watchers[id] = Watcher(loop: loop, deliver: deliver)
            // One pump for every watcher, held here and cancelled when the last one goes.
            if state.upstream == nil { state.upstream = Task { await self.pump() } }
            return (id, state.latest)
        }
        if let latest { loop.execute { deliver(latest) } }
        return id
    }

    /// Stops calling the watcher `id`; the upstream stops after the last one leaves.
    func leave(_ id: Int) {
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
                    return state.watchers.values
                }
                var byLoop: [ObjectIdentifier: (loop: any EventLoop, deliveries: [@Sendable (Value) -> Void])] = [:]
                for watcher in watchers {
                    byLoop[ObjectIdentifier(watcher.loop), default: (watcher.loop, [])].deliveries.append(watcher.deliver)
                }
                for (loop, deliveries) in byLoop.values {
                    loop.execute { for deliver in deliveries { deliver(value) } }
                }
            }
        } catch {
            // The upstream failed or was cancelled: watchers keep the last value they got.
        }
    }
}

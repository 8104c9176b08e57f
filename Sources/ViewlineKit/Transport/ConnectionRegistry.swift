import NIOCore
import Synchronization

/// The open connections, so that shutdown can say `bye` to each one.
final class ConnectionRegistry: Sendable {
    private let state = Mutex<(next: Int, connections: [Int: (channel: any Channel, outbound: OutboundLines)], emptyWaiters: [CheckedContinuation<Void, Never>])>((1, [:], []))

    /// Reserves the next session number.
    func nextNumber() -> Int {
        state.withLock { state in
            defer { state.next += 1 }
            return state.next
        }
    }

    /// Adds the connection unless `limit` connections are already open.
    func add(_ number: Int, channel: any Channel, outbound: OutboundLines, limit: Int) -> Bool {
        state.withLock { state in
            guard state.connections.count < limit else { return false }
            state.connections[number] = (channel, outbound)
            return true
        }
    }

    func remove(_ id: Int) {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.connections.removeValue(forKey: id)
            guard state.connections.isEmpty else { return [] }
            defer { state.emptyWaiters = [] }
            return state.emptyWaiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once no connection is open.
    func waitUntilEmpty() async {
        await withCheckedContinuation { continuation in
            let empty = state.withLock { state in
                if !state.connections.isEmpty { state.emptyWaiters.append(continuation) }
                return state.connections.isEmpty
            }
            if empty { continuation.resume() }
        }
    }

    var connections: [(channel: any Channel, outbound: OutboundLines)] { state.withLock { Array($0.connections.values) } }
    var count: Int { state.withLock { $0.connections.count } }
}

import NIOCore
import Synchronization

/// The open connections, so that shutdown can say `bye` to each one.
final class ConnectionRegistry: Sendable {
    private let state = Mutex<(next: Int, connections: [Int: (channel: any Channel, outbound: OutboundLines)])>((1, [:]))

    /// Reserves the next session number.
    func nextNumber() -> Int {
        state.withLock { state in
            defer { state.next += 1 }
            return state.next
        }
    }

    func add(_ number: Int, channel: any Channel, outbound: OutboundLines) {
        state.withLock { $0.connections[number] = (channel, outbound) }
    }

    func remove(_ id: Int) {
        _ = state.withLock { $0.connections.removeValue(forKey: id) }
    }

    var connections: [(channel: any Channel, outbound: OutboundLines)] { state.withLock { Array($0.connections.values) } }
    var count: Int { state.withLock { $0.connections.count } }
}

import NIOCore
import Synchronization

/// The open connections, so that shutdown can say `bye` to each one.
final class ConnectionRegistry: Sendable {
    private let state = Mutex<(next: Int, channels: [Int: any Channel])>((1, [:]))

    /// Registers a channel and returns its session number.
    func add(_ channel: any Channel) -> Int {
        state.withLock { state in
            let id = state.next
            state.next += 1
            state.channels[id] = channel
            return id
        }
    }

    func remove(_ id: Int) {
        _ = state.withLock { $0.channels.removeValue(forKey: id) }
    }

    var channels: [any Channel] { state.withLock { Array($0.channels.values) } }
    var count: Int { state.withLock { $0.channels.count } }
}

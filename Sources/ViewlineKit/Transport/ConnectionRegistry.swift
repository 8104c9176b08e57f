import NIOCore
import Synchronization

/// The open connections, so that shutdown can wait for what each still has to run
/// and say `bye` to each one; and the places held by HTTP connections (the page, the
/// operations listener, a WebSocket before its upgrade), which count against the same
/// limits from `accept` on: every descriptor a client holds is one of `--max-clients`
/// and of its address's `--max-clients-per-address`.
final class ConnectionRegistry: Sendable {
    private struct State {
        var next = 1
        var connections: [Int: (channel: any Channel, outbound: OutboundLines, address: String, client: ClientConnection?)] = [:]
        /// HTTP connections holding a place (not protocol connections yet).
        var reserved = 0
        /// Open connections per client address, reserved places included.
        var perAddress: [String: Int] = [:]
        var emptyWaiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Mutex(State())

    /// Why a connection was not added.
    enum Refusal: Error {
        case full, addressFull
    }

    /// Reserves the next session number.
    func nextNumber() -> Int {
        state.withLock { state in
            defer { state.next += 1 }
            return state.next
        }
    }

    /// Adds the connection unless `limit` connections are already open, or
    /// `perAddress` from its address (0: no cap per address).
    func add(_ number: Int, channel: any Channel, outbound: OutboundLines, limit: Int, perAddress: Int) -> Refusal? {
        let address = channel.remoteAddress?.clientKey ?? ""
        return state.withLock { state in
            guard state.connections.count + state.reserved < limit else { return .full }
            let fromAddress = state.perAddress[address] ?? 0
            guard perAddress == 0 || fromAddress < perAddress else { return .addressFull }
            state.connections[number] = (channel, outbound, address, nil)
            state.perAddress[address] = fromAddress + 1
            return nil
        }
    }

    /// Holds a place for an HTTP connection from `address` under the same limits as
    /// ``add(_:channel:outbound:limit:perAddress:)``; ``release(address:)`` gives it back.
    func reserve(address: String, limit: Int, perAddress: Int) -> Refusal? {
        state.withLock { state in
            guard state.connections.count + state.reserved < limit else { return .full }
            let fromAddress = state.perAddress[address] ?? 0
            guard perAddress == 0 || fromAddress < perAddress else { return .addressFull }
            state.reserved += 1
            state.perAddress[address] = fromAddress + 1
            return nil
        }
    }

    /// Gives back a place ``reserve(address:limit:perAddress:)`` held.
    func release(address: String) {
        state.withLock { state in
            state.reserved -= 1
            let left = (state.perAddress[address] ?? 1) - 1
            state.perAddress[address] = left > 0 ? left : nil
        }
    }

    /// Places HTTP connections hold now.
    var reservedCount: Int { state.withLock { $0.reserved } }

    /// The connection's handler, once it has one (a drain asks it what is left to run).
    func bind(_ number: Int, to client: ClientConnection) {
        state.withLock { $0.connections[number]?.client = client }
    }

    func remove(_ id: Int) {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            if let removed = state.connections.removeValue(forKey: id) {
                let left = (state.perAddress[removed.address] ?? 1) - 1
                state.perAddress[removed.address] = left > 0 ? left : nil
            }
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

    var connections: [(channel: any Channel, outbound: OutboundLines)] {
        state.withLock { $0.connections.values.map { ($0.channel, $0.outbound) } }
    }
    var count: Int { state.withLock { $0.connections.count } }

    /// Whether every open connection has run all it received.
    var allIdle: Bool { state.withLock { $0.connections.values.allSatisfy { $0.client?.isIdle ?? true } } }
}

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
        /// By number: what each one writes through (its channel and client address with
        /// it) and its handler once it has one; two words an entry.
        var connections: [Int: (outbound: OutboundLines, client: ClientConnection?)] = [:]
        /// HTTP connections holding a place (not protocol connections yet).
        var reserved = 0
        /// Open connections per client address, reserved places included.
        var perAddress: [String: Int] = [:]
        var emptyWaiters: [Int: CheckedContinuation<Bool, Never>] = [:]
        var nextWaiter = 0
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

    /// Adds the connection `outbound` writes to unless `limit` connections are already
    /// open, or `perAddress` from its client's address (0: no cap per address).
    func add(_ number: Int, outbound: OutboundLines, limit: Int, perAddress: Int) -> Refusal? {
        let address = outbound.address
        return state.withLock { state in
            guard state.connections.count + state.reserved < limit else { return .full }
            let fromAddress = state.perAddress[address] ?? 0
            guard perAddress == 0 || fromAddress < perAddress else { return .addressFull }
            state.connections[number] = (outbound, nil)
            state.perAddress[address] = fromAddress + 1
            return nil
        }
    }

    /// Holds a place for an HTTP connection from `address` under the same limits as
    /// ``add(_:outbound:limit:perAddress:)``; ``release(address:)`` gives it back.
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
        let waiters = state.withLock { state -> [CheckedContinuation<Bool, Never>] in
            if let removed = state.connections.removeValue(forKey: id) {
                let left = (state.perAddress[removed.outbound.address] ?? 1) - 1
                state.perAddress[removed.outbound.address] = left > 0 ? left : nil
            }
            guard state.connections.isEmpty else { return [] }
            defer { state.emptyWaiters = [:] }
            return Array(state.emptyWaiters.values)
        }
        for waiter in waiters { waiter.resume(returning: true) }
    }

    /// Returns once no connection is open.
    func waitUntilEmpty() async {
        _ = await waitUntilEmptyOrCancelled()
    }

    /// Returns whether no connection is open within `limit` (a connection told `bye`
    /// and closed leaves once its last command's work returns, which a call into
    /// another system may hold up to that call's own deadline: a shutdown does not
    /// wait that long).
    func waitUntilEmpty(within limit: Duration) async -> Bool {
        await withTaskGroup(of: Bool.self) { group in
            group.addTask { await self.waitUntilEmptyOrCancelled() }
            group.addTask {
                try? await Task.sleep(for: limit)
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
    }

    /// `true` once no connection is open; `false` when the task is cancelled first.
    private func waitUntilEmptyOrCancelled() async -> Bool {
        let id = state.withLock { state in
            defer { state.nextWaiter += 1 }
            return state.nextWaiter
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let outcome = state.withLock { state -> Bool? in
                    if state.connections.isEmpty { return true }
                    if Task.isCancelled { return false }
                    state.emptyWaiters[id] = continuation
                    return nil
                }
                if let outcome { continuation.resume(returning: outcome) }
            }
        } onCancel: {
            state.withLock { $0.emptyWaiters.removeValue(forKey: id) }?.resume(returning: false)
        }
    }

    var connections: [(channel: any Channel, outbound: OutboundLines)] {
        state.withLock { $0.connections.values.map { ($0.outbound.channel, $0.outbound) } }
    }
    var count: Int { state.withLock { $0.connections.count } }

    /// Whether every open connection has run all it received.
    var allIdle: Bool { state.withLock { $0.connections.values.allSatisfy { $0.client?.isIdle ?? true } } }
}

import Logging
import PostgresNIO
import Synchronization

/// Whether the database answers, as one node sees it: a dedicated connection that
/// pings every second, and notices at once when the server closes it. Store calls
/// fail fast with ``StoreUnavailable`` while it is down (the pool itself would keep
/// them waiting for a connection), and calls already waiting give up when it goes
/// down; a busy pool is not "down".
final class DatabaseHealth: Sendable {
    private struct State {
        var down = false
        var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
        var nextWaiter = 0
    }

    private let state = Mutex(State())

    var isDown: Bool { state.withLock { $0.down } }

    func set(down: Bool) {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.down = down
            guard down else { return [] }
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once the database is down (at once if it is); ends early when the
    /// calling task is cancelled.
    func waitUntilDown() async {
        let id = state.withLock { state -> Int in
            defer { state.nextWaiter += 1 }
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let resumeNow = state.withLock { state -> Bool in
                    if state.down || Task.isCancelled { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
            waiter?.resume()
        }
    }

    /// Watches `url` with one connection of its own until the calling task is
    /// cancelled: its owner's `run()` (``DatabaseAccess/run()``) awaits it.
    func watch(url: PostgresURL, logger: Logger) async {
        var wasDown = false
        while !Task.isCancelled {
            var open: PostgresConnection?
            do {
                var configuration = try url.connectionConfiguration()
                configuration.options.connectTimeout = .seconds(2)
                let connection = try await PostgresConnection.connect(configuration: configuration, id: 1, logger: logger)
                open = connection
                connection.closeFuture.whenComplete { [self] _ in
                    if !Task.isCancelled { set(down: true) }
                }
                set(down: false)
                if wasDown { logger.notice("the database answers again") }
                wasDown = false
                while !Task.isCancelled && !connection.isClosed {
                    // Within a deadline that closes the connection: a silent server
                    // is "down" within 2 s, not when the kernel gives up on the socket.
                    _ = try await connection.withDeadline(.seconds(2)) {
                        try await connection.query("SELECT 1", logger: logger).collect()
                    }
                    try await Task.sleep(for: .seconds(1))
                }
            } catch {
                if !Task.isCancelled {
                    if !wasDown { logger.warning("the database does not answer", metadata: ["error": "\(String(describing: error))"]) }
                    wasDown = true
                    set(down: true)
                }
            }
            // Closed before it is released (postgres-nio asserts it).
            try? await open?.close()
            if !Task.isCancelled { try? await Task.sleep(for: .milliseconds(500)) }
        }
    }
}

import Logging
import PostgresNIO

extension PostgresURL {
    /// No server of the URL could be used: each one's reason, in the order tried.
    package struct NoPrimary: Error, CustomStringConvertible {
        var attempts: [String]
        package var description: String { "no primary among the URL's servers (\(attempts.joined(separator: "; ")))" }
    }

    /// A connection of a node's own, to the server it should write to: the first of
    /// ``servers`` that answers and, when ``requiresPrimary``, is not a standby
    /// (`pg_is_in_recovery()`), all within `timeout` — shared among the servers still
    /// to try, so one that is silent leaves the others their turn. Returns the
    /// connection and the server's index in ``servers``; throws ``NoPrimary`` when
    /// there is none (with one server that only connects, its own error).
    package func connectToPrimary(id: Int, within timeout: Duration, logger: Logger) async throws -> (PostgresConnection, server: Int) {
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        var attempts: [String] = []
        for index in servers.indices {
            let left = deadline - clock.now
            guard left > .zero else {
                attempts.append("\(servers[index]): no time left")
                continue
            }
            let share = left / (servers.count - index)
            var configuration = try connectionConfiguration(server: index)
            configuration.options.connectTimeout = .nanoseconds(max(1, Int64(share / .nanoseconds(1))))
            let connection: PostgresConnection
            do {
                connection = try await PostgresConnection.connect(configuration: configuration, id: id, logger: logger)
            } catch {
                if servers.count == 1 { throw error }
                attempts.append("\(servers[index]): \(String(describing: error))")
                continue
            }
            guard requiresPrimary else { return (connection, index) }
            do {
                let standby = try await connection.isStandby(within: max(share, .milliseconds(100)), logger: logger)
                if !standby { return (connection, index) }
                attempts.append("\(servers[index]): a standby")
            } catch {
                attempts.append("\(servers[index]): \(String(describing: error))")
            }
            try? await connection.close()
        }
        throw NoPrimary(attempts: attempts)
    }
}

extension PostgresConnection {
    /// Whether the server is a standby (in recovery: it refuses writes), asked within
    /// `timeout` (past it the connection is closed, and the call throws).
    package func isStandby(within timeout: Duration, logger: Logger) async throws -> Bool {
        try await withDeadline(timeout) {
            var standby = false
            for try await row in try await query("SELECT pg_is_in_recovery()", logger: logger) { standby = try row.decode(Bool.self) }
            return standby
        }
    }
}

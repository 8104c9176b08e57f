import Logging
import PostgresNIO

extension PostgresURL {
    /// No server of the URL could be used: each one's reason, in the order tried.
    package struct NoPrimary: Error, CustomStringConvertible {
        var attempts: [(server: Server, reason: String)]
        /// Each server's error, where connecting failed.
        var errors: [any Error]
        package var description: String {
            "no primary among the URL's servers (\(attempts.map { "\($0.server): \($0.reason)" }.joined(separator: "; ")))"
        }
    }

    /// A connection of a node's own to the server at `index` in ``servers``, within
    /// `timeout`.
    package func connect(server index: Int, id: Int, within timeout: Duration, logger: Logger) async throws -> PostgresConnection {
        var configuration = try connectionConfiguration(server: index)
        configuration.options.connectTimeout = .nanoseconds(max(1, Int64(timeout / .nanoseconds(1))))
        return try await PostgresConnection.connect(configuration: configuration, id: id, logger: logger)
    }

    /// A connection of a node's own to the server it should write to, within
    /// `timeout` — shared among the servers still to try, so one that is silent
    /// leaves the others their turn. With one server, that server (checked not to be
    /// a standby when ``requiresPrimary``). With several, every one is asked
    /// (``PostgresConnection/serverState(within:logger:)``) and the primary on the
    /// newest timeline is taken — an old primary that still accepts writes after a
    /// standby was promoted is passed over — the first listed among equals. Returns
    /// the connection, the server's index in ``servers`` and its timeline; throws
    /// ``NoPrimary`` when there is none (with one server that does not connect, its
    /// own error).
    package func connectToPrimary(id: Int, within timeout: Duration, logger: Logger) async throws -> (
        PostgresConnection, server: Int, timeline: Int
    ) {
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        var attempts: [(server: Server, reason: String)] = []
        var errors: [any Error] = []
        var best: (connection: PostgresConnection, server: Int, timeline: Int)?
        for index in servers.indices {
            let left = deadline - clock.now
            guard left > .zero else {
                attempts.append((servers[index], "no time left"))
                continue
            }
            let share = left / (servers.count - index)
            let connection: PostgresConnection
            do {
                connection = try await connect(server: index, id: id, within: share, logger: logger)
            } catch {
                if servers.count == 1 { throw error }
                attempts.append((servers[index], Self.reason(error)))
                errors.append(error)
                continue
            }
            guard requiresPrimary else { return (connection, index, 0) }
            do {
                let state = try await connection.serverState(within: max(share, .milliseconds(100)), logger: logger)
                if state.standby {
                    attempts.append((servers[index], "a standby, or read-only"))
                } else if let current = best, current.timeline >= state.timeline {
                    attempts.append((servers[index], "a primary on an older timeline than \(servers[current.server])'s"))
                } else {
                    if let current = best { try? await current.connection.close() }
                    best = (connection, index, state.timeline)
                    if servers.count == 1 { break }
                    continue
                }
            } catch {
                attempts.append((servers[index], Self.reason(error)))
                errors.append(error)
            }
            try? await connection.close()
        }
        if let best { return best }
        throw NoPrimary(attempts: attempts, errors: errors)
    }

    /// What an operator needs of a connection's failure (PostgresNIO hides a
    /// server's message from `description`).
    package static func reason(_ error: any Error) -> String {
        error is PSQLError ? String(reflecting: error) : String(describing: error)
    }
}

/// What a server says of itself to a node choosing where to write.
package struct ServerState: Sendable {
    /// In recovery (a standby), or read-only by default (a fenced old primary).
    package var standby: Bool
    /// Its WAL timeline (0 on a standby): a promotion starts a newer one.
    package var timeline: Int
}

extension PostgresConnection {
    /// Whether the server is a standby or read-only (it refuses writes), and its
    /// timeline, asked within `timeout` (past it the connection is closed, and the
    /// call throws).
    package func serverState(within timeout: Duration, logger: Logger) async throws -> ServerState {
        try await withDeadline(timeout) {
            var state = ServerState(standby: true, timeline: 0)
            let query: PostgresQuery = """
                SELECT pg_is_in_recovery() OR current_setting('transaction_read_only') = 'on',
                       CASE WHEN pg_is_in_recovery() THEN 0
                            ELSE ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int END
                """
            for try await row in try await self.query(query, logger: logger) {
                let (standby, timeline) = try row.decode((Bool, Int32).self)
                state = ServerState(standby: standby, timeline: Int(timeline))
            }
            return state
        }
    }

    /// Whether the server is a standby or read-only (``serverState(within:logger:)``).
    package func isStandby(within timeout: Duration, logger: Logger) async throws -> Bool {
        try await serverState(within: timeout, logger: logger).standby
    }
}

import Logging
import PostgresNIO

extension PostgresURL {
    /// No server of the URL could be used: each one's reason, in the order tried.
    package struct NoPrimary: Error, CustomStringConvertible {
        var attempts: [(server: Server, reason: String)]
        /// Each server's error, where connecting failed.
        var errors: [any Error]
        /// Every server answered, none on the newest timeline the caller saw (not even
        /// as a standby), and a primary on this older one: the newest branch is gone
        /// (its member rebuilt from the old primary, or the cluster made anew).
        var newestTimelineGone: Int?
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
    /// standby was promoted is passed over — the first in
    /// ``PostgresURL/Server/precedes(_:)``'s order among equals (so nodes that list
    /// them in different orders still choose alike). Returns
    /// the connection, the server's index in ``servers`` and its timeline; throws
    /// ``NoPrimary`` when there is none (with one server that does not connect, its
    /// own error).
    ///
    /// `notOlderThan`: the newest timeline the caller saw a primary on; a primary on
    /// an older one was deposed (its manager died, its database did not) and is
    /// passed over — writes there would be on a branch the cluster left.
    package func connectToPrimary(id: Int, within timeout: Duration, notOlderThan newest: Int = 0, logger: Logger) async throws -> (
        PostgresConnection, server: Int, timeline: Int
    ) {
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        var attempts: [(server: Server, reason: String)] = []
        var errors: [any Error] = []
        var best: (connection: PostgresConnection, server: Int, timeline: Int)?
        // Whether every server answered, one was on the newest timeline (or after it),
        // and the newest timeline of a primary passed over as deposed.
        var allAnswered = true
        var newestSeen = false
        var deposed: Int?
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
                allAnswered = false
                continue
            }
            guard requiresPrimary else { return (connection, index, 0) }
            do {
                let state = try await connection.serverState(within: max(share, .milliseconds(100)), logger: logger)
                if state.timeline >= newest {
                    newestSeen = true
                } else if state.standby, newest > 0 {
                    // A standby's timeline is its last restartpoint's: its WAL may be on
                    // a newer one already (a promoted member restarted in recovery). What
                    // its pg_wal holds says; unknown (no pg_monitor) counts as newer.
                    let held = try? await connection.newestWALTimeline(within: max(share, .milliseconds(100)), logger: logger)
                    if held ?? .max >= newest { newestSeen = true }
                }
                if state.standby {
                    attempts.append((servers[index], "a standby, or read-only"))
                } else if state.timeline < newest {
                    attempts.append((servers[index], "a deposed primary (timeline \(state.timeline), older than \(newest), seen before)"))
                    deposed = max(deposed ?? 0, state.timeline)
                } else if let current = best,
                    current.timeline > state.timeline
                        || (current.timeline == state.timeline && servers[current.server].precedes(servers[index]))
                {
                    attempts.append((servers[index], "a primary on a timeline no newer than \(servers[current.server])'s"))
                } else {
                    if let current = best { try? await current.connection.close() }
                    best = (connection, index, state.timeline)
                    if servers.count == 1 { break }
                    continue
                }
            } catch {
                attempts.append((servers[index], Self.reason(error)))
                errors.append(error)
                allAnswered = false
            }
            try? await connection.close()
        }
        if let best { return best }
        throw NoPrimary(attempts: attempts, errors: errors, newestTimelineGone: allAnswered && !newestSeen ? deposed : nil)
    }

    /// What an operator needs of a connection's failure (PostgresNIO hides a
    /// server's message from `description`).
    package static func reason(_ error: any Error) -> String {
        error is PSQLError ? String(reflecting: error) : String(describing: error)
    }
}

/// A node's connection does not carry its server-side limits.
package struct LimitsNotCarried: Error, CustomStringConvertible {
    var dropped: [String]
    package var description: String {
        "the database's connections do not carry the node's server-side limits (\(dropped.joined(separator: ", "))): "
            + "a connection pooler (PgBouncer) between them drops them, and a statement of a node that gave up would "
            + "run on; connect the nodes to PostgreSQL directly (docs/deploying.md)"
    }
}

/// What a server says of itself to a node choosing where to write.
package struct ServerState: Sendable {
    /// In recovery (a standby), or read-only by default (a fenced old primary).
    package var standby: Bool
    /// Its WAL timeline (a standby's, as of its last restartpoint): a promotion
    /// starts a newer one.
    package var timeline: Int
}

extension PostgresURL.Server {
    /// Whether this server comes before `other` in the one order every node gives the
    /// servers it lists, whatever order its URL names them in: by host (letters in
    /// lowercase), then port. Of two primaries on the same timeline, a node uses the
    /// first in it.
    package func precedes(_ other: Self) -> Bool {
        (host.lowercased(), port) < (other.host.lowercased(), other.port)
    }
}

extension PostgresConnection {
    /// Whether the server is a standby or read-only (it refuses writes), and its
    /// timeline, asked within `timeout` (past it the connection is closed, and the
    /// call throws; with `closingOnCancel`, also when the calling task is cancelled).
    package func serverState(within timeout: Duration, closingOnCancel: Bool = false, logger: Logger) async throws -> ServerState {
        try await withDeadline(timeout, closingOnCancel: closingOnCancel) {
            var state = ServerState(standby: true, timeline: 0)
            let query: PostgresQuery = """
                SELECT pg_is_in_recovery() OR current_setting('transaction_read_only') = 'on',
                       CASE WHEN pg_is_in_recovery() THEN (SELECT timeline_id FROM pg_control_checkpoint())
                            ELSE ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int END
                """
            for try await row in try await self.query(query, logger: logger) {
                let (standby, timeline) = try row.decode((Bool, Int32).self)
                state = ServerState(standby: standby, timeline: Int(timeline))
            }
            return state
        }
    }

    /// Throws ``LimitsNotCarried`` unless this connection carries `wanted`, the
    /// server-side limits a node asked for at connect (``PostgresURL/serverSideLimits``):
    /// a pooler in between that drops them (PgBouncer's `ignore_startup_parameters`)
    /// would let a statement of a node that gave up run on and commit behind its
    /// back. (A server without one of them — `client_connection_check_interval`
    /// before PostgreSQL 14 — refuses the connection itself.)
    package func checkServerSideLimits(_ wanted: [(String, String)], logger: Logger) async throws {
        let names = wanted.map { "'\($0.0)'" }.joined(separator: ", ")
        var held: [String: String] = [:]
        let query = PostgresQuery(unsafeSQL: "SELECT name, setting FROM pg_settings WHERE name IN (\(names))")
        for try await row in try await self.query(query, logger: logger) {
            let (name, setting) = try row.decode((String, String).self)
            held[name] = setting
        }
        let dropped = wanted.filter { name, value in held[name].map { $0 != value } ?? false }
        if !dropped.isEmpty {
            throw LimitsNotCarried(dropped: dropped.map { name, value in "\(name) is \(held[name] ?? "?"), not \(value)" })
        }
    }

    /// The newest timeline the server's `pg_wal` holds a segment or history file of,
    /// within `timeout` (needs `pg_monitor`, or throws); `nil` when it holds none.
    package func newestWALTimeline(within timeout: Duration, logger: Logger) async throws -> Int? {
        try await withDeadline(timeout) {
            var newest: Int?
            let query: PostgresQuery = """
                SELECT max(('x' || substr(name, 1, 8))::bit(32)::int) FROM pg_ls_waldir()
                WHERE name ~ '^[0-9A-F]{8}([0-9A-F]{16}|\\.history)$'
                """
            for try await row in try await self.query(query, logger: logger) {
                newest = try row.decode(Int32?.self).map(Int.init)
            }
            return newest
        }
    }

    /// Whether the server is a standby or read-only (``serverState(within:logger:)``).
    package func isStandby(within timeout: Duration, logger: Logger) async throws -> Bool {
        try await serverState(within: timeout, logger: logger).standby
    }
}

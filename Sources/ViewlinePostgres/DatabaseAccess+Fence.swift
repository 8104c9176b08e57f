import Logging
import PostgresNIO
import ViewlineKit

extension DatabaseAccess {
    /// Runs a write. When the current task acts for a session of a cluster
    /// (``SessionFence/current``), the write runs in a transaction that first checks,
    /// by the database's clock, that this node holds the session's lease — its
    /// heartbeat is younger than the node timeout and no other node owns the
    /// session's record — and holds the record against a claim until the write
    /// commits. A refused write writes nothing and throws ``SessionFenced``.
    package func write<T: Sendable>(_ work: @escaping @Sendable (PostgresConnection) async throws -> T) async throws -> T {
        guard let fence = SessionFence.current else {
            return try await unavailableIfDown { [self] in
                try await client.withConnection { connection in try await work(connection) }
            }
        }
        guard fence.isHeld else {
            fence.refused()
            throw SessionFenced()
        }
        do {
            return try await unavailableIfDown { [self] in
                try await client.withConnection { [logger] connection in
                    try await connection.query("BEGIN", logger: logger)
                    do {
                        guard try await Self.holds(fence, on: connection, logger: logger) else { throw SessionFenced() }
                        let value = try await work(connection)
                        try await connection.query("COMMIT", logger: logger)
                        return value
                    } catch {
                        _ = try? await connection.query("ROLLBACK", logger: logger)
                        throw error
                    }
                }
            }
        } catch let error as SessionFenced {
            fence.refused()
            throw error
        }
    }

    /// Whether `fence`'s node holds its session's lease now, by the database's clock;
    /// locks the session's record (when there is one) until the transaction ends, so a
    /// claim waits for the write. A session with no record yet cannot have been
    /// claimed: its node's own lease is enough.
    private static func holds(_ fence: SessionFence, on connection: PostgresConnection, logger: Logger) async throws -> Bool {
        let seconds = Double(fence.nodeTimeout.components.seconds) + Double(fence.nodeTimeout.components.attoseconds) / 1e18
        var held = false
        for try await value in try await connection.query("""
            WITH record AS (SELECT owner FROM viewline_sessions WHERE lookup = \(fence.session) FOR SHARE)
            SELECT NOT EXISTS (SELECT 1 FROM record WHERE owner <> \(fence.node))
               AND EXISTS (SELECT 1 FROM viewline_nodes WHERE id = \(fence.node)
                           AND heartbeat_at > clock_timestamp() - make_interval(secs => \(seconds)))
            """, logger: logger).decode(Bool.self)
        {
            held = value
        }
        return held
    }
}

extension PostgresConnection {
    /// Runs a statement and maps every row.
    package func collect<T: Sendable>(_ query: PostgresQuery, logger: Logger, _ transform: (PostgresRow) throws -> T) async throws -> [T] {
        var values: [T] = []
        for try await row in try await self.query(query, logger: logger) { values.append(try transform(row)) }
        return values
    }
}

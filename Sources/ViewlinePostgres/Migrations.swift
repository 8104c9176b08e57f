import Logging
import PostgresNIO

/// A schema as numbered steps, each applied once and recorded in a table of its own:
/// the cluster's directory and the seed apps' store each keep one, so either can be
/// used without the other's tables. Every node runs them at start: an advisory lock
/// taken in the migrating transaction makes concurrent starts wait for each other,
/// and a step already recorded is skipped.
package struct Migrations: Sendable {
    /// The table that records the steps applied.
    let table: String
    /// The advisory lock's key in ``DatabaseAccess/lockNamespace``.
    let lockKey: Int32
    let steps: [(version: Int, sql: [String])]

    package init(table: String, lockKey: Int32, steps: [(version: Int, sql: [String])]) {
        self.table = table
        self.lockKey = lockKey
        self.steps = steps
    }

    /// Applies the steps not yet recorded, through `database`'s one deadline-carrying
    /// path: a database that does not answer fails it with ``StoreUnavailable`` within
    /// the database's operation timeout or ``minimumDeadline``, whichever is longer
    /// (a first connection, the lock other starting nodes hold, several statements),
    /// never a wait without end.
    package func run(on database: DatabaseAccess) async throws {
        try await database.call(timeout: max(database.operationTimeout, Self.minimumDeadline)) { [self] connection in
            try await run(on: connection, logger: database.logger)
        }
    }

    /// The least time migrations get, however short the database's operation timeout.
    static let minimumDeadline = Duration.seconds(10)

    private func run(on connection: PostgresConnection, logger: Logger) async throws {
        try await connection.withTransaction(logger: logger) { connection in
            try await connection.query("SELECT pg_advisory_xact_lock(\(DatabaseAccess.lockNamespace), \(lockKey))", logger: logger)
            try await connection.query(
                PostgresQuery(
                    unsafeSQL: "CREATE TABLE IF NOT EXISTS \(table) (version int PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"),
                logger: logger)
            var applied: Set<Int> = []
            for try await version in try await connection.query(PostgresQuery(unsafeSQL: "SELECT version FROM \(table)"), logger: logger).decode(
                Int.self)
            {
                applied.insert(version)
            }
            for step in steps where !applied.contains(step.version) {
                for statement in step.sql { try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger) }
                try await connection.query(PostgresQuery(unsafeSQL: "INSERT INTO \(table) (version) VALUES (\(step.version))"), logger: logger)
                logger.info("migrated the database", metadata: ["schema": "\(table)", "version": "\(step.version)"])
            }
        }
    }
}

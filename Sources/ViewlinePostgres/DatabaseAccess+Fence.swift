import Logging
import PostgresNIO
import ViewlineKit

extension DatabaseAccess {
    /// Runs a write. When the current task acts for a session of a cluster
    /// (``SessionFence/current``), the write runs in a transaction that first checks,
    /// by the database's clock, that this node holds the session's lease — its
    /// heartbeat is younger than the node timeout and no other node owns the
    /// session's record — holds the record against a claim until the write
    /// commits, and checks the heartbeat again just before COMMIT. A refused write writes nothing and throws ``SessionFenced``.
    ///
    /// The session's writes also commit in the order they were asked for
    /// (``SessionWriteOrder``): each takes its number here, and a write older than
    /// one of the same session that already committed writes nothing and throws
    /// ``SessionWriteSuperseded``; one that commits first holds the session's
    /// order row until it ends, so a later one waits for it there.
    ///
    /// `transaction`: an unfenced write runs in a transaction too (a fenced one always does).
    package func write<T: Sendable>(
        transaction: Bool = false, _ work: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        guard let fence = SessionFence.current else {
            return transaction ? try await self.transaction(work) : try await call(work)
        }
        let number = fence.writes.next()
        // Not held by the node's own clock: refused at once. Nothing new to tell the
        // node (it knows; its renewal reconciles), and telling it again on every
        // retried write would keep it from ever ending its reconciling.
        guard fence.isHeld else { throw SessionFenced() }
        do {
            return try await call { [logger] connection in
                try await Self.ensureRecordRow(for: fence, on: connection, logger: logger)
                return try await connection.inTransaction(logger: logger) {
                    switch try await Self.holds(fence, on: connection, logger: logger) {
                    case .held: break
                    case .leaseLapsed: throw SessionFenced()
                    case .ownedElsewhere: throw OwnedElsewhere()
                    case .endedHere: throw EndedHere()
                    }
                    guard try await Self.isNewest(number, of: fence, on: connection, logger: logger) else {
                        throw SessionWriteSuperseded()
                    }
                    let value = try await work(connection)
                    // Checked again as the last statement before COMMIT: a write that
                    // ran long (lock waits, a slow link) commits only if the lease is
                    // still this node's by the database's clock now. (No claim can come
                    // between this and COMMIT: the record is locked until then.)
                    guard try await Self.heartbeatFresh(fence, on: connection, logger: logger) else { throw SessionFenced() }
                    return value
                }
            }
        } catch let error as SessionFenced {
            fence.refused()
            throw error
        } catch is OwnedElsewhere {
            fence.refusedOwnedElsewhere()
            throw SessionFenced()
        } catch is EndedHere {
            throw SessionFenced()  // this node ended it (quit, expiry): nothing to check
        }
    }

    /// The fence found another node owning the session (or it ended) while this node's
    /// lease is valid (turned into ``SessionFenced`` for the caller).
    private struct OwnedElsewhere: Error {}

    /// The fence found the session ended by this very node (a background write after
    /// its `quit` or expiry): refused, and nothing for the node to check.
    private struct EndedHere: Error {}

    /// What the database says of a fenced write's session.
    private enum Holding { case held, leaseLapsed, ownedElsewhere, endedHere }

    /// Gives a session with no record yet a row to fence on, committed before the
    /// write's transaction begins: owned by this node, with no secret digest and no
    /// snapshot, so no token ever matches it (an `attach` finds nothing, as before)
    /// and any real record replaces it (its rev is -1). Without it the fence locked
    /// nothing: the node's first record could be written and claimed by another node
    /// while the write was open, and the write commit after the claim.
    private static func ensureRecordRow(for fence: SessionFence, on connection: PostgresConnection, logger: Logger) async throws {
        try await connection.query(
            """
            INSERT INTO viewline_sessions (lookup, secret_digest, owner, snapshot, rev, updated_at)
            VALUES (\(fence.session), ''::bytea, \(fence.node), '', -1, clock_timestamp())
            ON CONFLICT (lookup) DO NOTHING
            """, logger: logger)
    }

    /// Whether `fence`'s node holds its session's lease now, by the database's clock
    /// (and the session has not ended: a quit's tombstone fences its late writes off),
    /// and if not, why: its lease lapsed, or the session is another node's; locks the session's record until the transaction ends, so a claim (and the
    /// node's own record batch, which skips a locked row) waits for the write.
    private static func holds(_ fence: SessionFence, on connection: PostgresConnection, logger: Logger) async throws -> Holding {
        var holding = Holding.leaseLapsed
        for try await (owned, endedHere, fresh) in try await connection.query(
            """
            WITH record AS (SELECT owner, ended FROM viewline_sessions WHERE lookup = \(fence.session) FOR SHARE)
            SELECT NOT EXISTS (SELECT 1 FROM record WHERE owner <> \(fence.node) OR ended),
                   EXISTS (SELECT 1 FROM record WHERE owner = \(fence.node) AND ended),
                   EXISTS (SELECT 1 FROM viewline_nodes WHERE id = \(fence.node))
            """, logger: logger
        ).decode((Bool, Bool, Bool).self) {
            holding = !fresh ? .leaseLapsed : owned ? .held : endedHere ? .endedHere : .ownedElsewhere
        }
        return holding
    }

    /// Whether `fence`'s node's heartbeat is younger than the node timeout now, by the
    /// database's clock.
    private static func heartbeatFresh(_ fence: SessionFence, on connection: PostgresConnection, logger: Logger) async throws -> Bool {
        // The node's own lease, by its monotonic clock, and its row still there (it has
        // not left). Not the heartbeat by the database's clock: a step of that clock
        // would refuse every write of a healthy node. Ownership is what fences: the
        // record is locked from the check above to COMMIT, so no claim comes between.
        guard fence.isHeld else { return false }
        var listed = false
        for try await value in try await connection.query(
            "SELECT EXISTS (SELECT 1 FROM viewline_nodes WHERE id = \(fence.node))", logger: logger
        ).decode(Bool.self) {
            listed = value
        }
        return listed
    }

    /// Records `number` as the session's newest write, unless a write of the same run
    /// of the session with a greater number has committed (then says `false`). The
    /// row stays locked until the transaction ends: a write of the session that comes
    /// later waits for this one to commit, then compares with its number.
    private static func isNewest(_ number: Int64, of fence: SessionFence, on connection: PostgresConnection, logger: Logger) async throws -> Bool {
        let holder = fence.writes.holder
        var recorded = false
        for try await _ in try await connection.query(
            """
            INSERT INTO viewline_session_writes (lookup, holder, sequence, written_at)
            VALUES (\(fence.session), \(holder), \(number), clock_timestamp())
            ON CONFLICT (lookup) DO UPDATE SET holder = excluded.holder, sequence = excluded.sequence, written_at = excluded.written_at
            WHERE viewline_session_writes.holder <> excluded.holder OR viewline_session_writes.sequence < excluded.sequence
            RETURNING 1
            """, logger: logger)
        {
            recorded = true
        }
        return recorded
    }
}

extension PostgresConnection {
    /// Runs `work` in a transaction: committed when it returns, rolled back when it throws.
    package func inTransaction<T>(logger: Logger, _ work: () async throws -> T) async throws -> T {
        try await query("BEGIN", logger: logger)
        do {
            let value = try await work()
            try await query("COMMIT", logger: logger)
            return value
        } catch {
            _ = try? await query("ROLLBACK", logger: logger)
            throw error
        }
    }

    /// Runs a statement and maps every row.
    package func collect<T: Sendable>(_ query: PostgresQuery, logger: Logger, _ transform: (PostgresRow) throws -> T) async throws -> [T] {
        var values: [T] = []
        for try await row in try await self.query(query, logger: logger) { values.append(try transform(row)) }
        return values
    }
}

import Foundation
import Logging
import PostgresNIO
import Synchronization
import ViewlineKit

/// The cluster's session records, node leases and shared settings, in the
/// PostgreSQL database the nodes share (tables `viewline_sessions`, `viewline_nodes`
/// and `viewline_cluster_settings`, and nothing else: the apps' own tables are
/// their stores'). It needs only a `PostgresClient`, which its owner runs:
///
/// ```swift
/// let client = PostgresClient(configuration: url.clientConfiguration)  // run in your ServiceGroup
/// let directory = PostgresSessionDirectory(client: client, url: url)
/// // once the group runs, beside `await directory.run()` (its health watch):
/// try await directory.migrate()
/// let cluster = Cluster(
///     directory: directory, nodeTimeout: try await directory.agreedNodeTimeout(proposing: .seconds(5)),
///     tokenKey: try await directory.agreedTokenKey())
/// let server = try ViewlineServer(apps: apps, services: services, cluster: cluster, configuration: configuration)
/// ```
public struct PostgresSessionDirectory: SessionDirectory {
    let database: DatabaseAccess
    /// Renewals go over a connection of their own, never queued behind the pool.
    let lease: DedicatedConnection
    /// So do record batches and the ends of records: behind a burst of the sessions'
    /// own queries they would trail, and the node refuse commands until they caught up.
    let records: DedicatedConnection

    /// How long a batch of records may take: the cluster's node timeout once agreed
    /// (``agreedNodeTimeout(proposing:)``). A batch that takes longer fails and goes
    /// again with the next; should the late one still arrive, its older revs change
    /// nothing.
    private let writeTimeout = WriteTimeout()
    /// The database's clock against this node's, renewal by renewal.
    private let clockWatch = DatabaseClockWatch()
    /// How often this node's housekeeping deletes (``renewLease(_:nodeTimeout:recordsExpireAfter:)``).
    private let deletes = DeletePace()

    /// When the housekeeping's last round that deleted ended, by this node's monotonic
    /// clock: the next one waits an interval from there (a slow round is not followed
    /// at once by another), unless the last one found more than it may delete at once.
    final class DeletePace: Sendable {
        private let state = Mutex<(ended: ContinuousClock.Instant?, more: Bool)>((nil, false))

        /// Whether a round that deletes is due at `now`: none yet, the last one left
        /// more to delete, or it ended `interval` ago or longer.
        func due(every interval: Duration, now: ContinuousClock.Instant = .now) -> Bool {
            state.withLock { state in
                guard let ended = state.ended, !state.more else { return true }
                return now - ended >= interval
            }
        }

        /// A round that deleted ended at `now`; `more`: it deleted as many as it may at
        /// once, so more may be due.
        func ended(more: Bool, now: ContinuousClock.Instant = .now) {
            state.withLock { $0 = (now, more) }
        }
    }

    /// What the database's clock jumped forward since `column` (a row's time), as an
    /// interval: every jump a node saw after it. (`column` must not name a row of
    /// `later`, the subquery's own alias.)
    static func jumpedSince(_ column: String) -> String {
        """
        COALESCE((SELECT make_interval(secs => sum(later.jump_ms)::double precision / 1000) FROM viewline_clock_jumps later \
        WHERE later.seen_at > \(column)), interval '0')
        """
    }

    final class WriteTimeout: Sendable {
        let value = Mutex(Duration.seconds(5))
    }

    /// How long any other statement of the directory may take: the node timeout too.
    /// A lease loop that checks its sessions after a lapse, a claim or a lookup on a
    /// pool connection gone silent fails then (its connection closed), rather than
    /// at the store's longer operation deadline.
    private var statementTimeout: Duration { writeTimeout.value.withLock { $0 } }

    /// A directory over `client`, which its owner runs (in a `ServiceGroup`); `url`
    /// names the same database, for the connections of its own that lease renewals
    /// and the health watch use. Call ``migrate()`` once the client runs.
    public init(
        client: PostgresClient, url: PostgresURL, operationTimeout: Duration = .seconds(30), logger: Logger = Logger(label: "viewline.cluster")
    ) {
        self.init(clients: [client], url: url, operationTimeout: operationTimeout, logger: logger)
    }

    /// A directory over `clients`, one per server of `url` in its order (from
    /// `PostgresStore.makeClients(_:logger:)`), which their owner runs: its calls
    /// follow the primary as the health watch finds it (a URL listing a cluster's
    /// members). Call ``migrate()`` once the clients run.
    public init(
        clients: [PostgresClient], url: PostgresURL, operationTimeout: Duration = .seconds(30),
        logger: Logger = Logger(label: "viewline.cluster")
    ) {
        self.init(DatabaseAccess(clients: clients, url: url, operationTimeout: operationTimeout, logger: logger))
    }

    /// A directory over `database`, which it may share with the store (one pool, one
    /// health watch per node).
    package init(_ database: DatabaseAccess) {
        self.database = database
        lease = DedicatedConnection(url: database.url, id: 2, logger: database.logger) { database.primaryServer }
        records = DedicatedConnection(url: database.url, id: 3, logger: database.logger) { database.primaryServer }
    }

    /// Creates the cluster's tables (idempotent; safe when several nodes start at
    /// once). Fails with
    /// ``StoreUnavailable`` when the database cannot be reached.
    public func migrate() async throws {
        do {
            try await ClusterMigrations.schema.run(on: database)
        } catch let error as StoreUnavailable {
            throw error
        } catch {
            throw StoreUnavailable(url: database.url, underlying: error)
        }
    }

    /// Connects and migrates, running a client of its own in a task until
    /// ``close()``: for tools and tests. A server runs the client in its
    /// `ServiceGroup` instead (``init(client:url:operationTimeout:logger:)``).
    public static func connect(_ url: PostgresURL, logger: Logger = Logger(label: "viewline.cluster")) async throws -> PostgresSessionDirectory {
        let database = DatabaseAccess(url: url, operationTimeout: .seconds(30), logger: logger)
        database.runInTask()
        let directory = PostgresSessionDirectory(database)
        do {
            try await directory.migrate()
        } catch {
            directory.close()
            throw error
        }
        return directory
    }

    /// Watches the database's health on a connection of its own until the calling
    /// task is cancelled (calls fail fast while it is down instead of waiting out
    /// their deadline): run it beside the client, in your `ServiceGroup`. A
    /// directory from ``connect(_:logger:)`` runs it already.
    public func run() async {
        await database.run()
    }

    /// Ends what ``connect(_:logger:)`` started (the health watch and the
    /// directory's own client). A directory over your client stops watching when
    /// the task running its ``run()`` is cancelled.
    public func close() {
        database.close()
    }

    // Every time below is PostgreSQL's (`clock_timestamp()`), never a node's.

    public func renewLease(_ node: ClusterNode, nodeTimeout: Duration, recordsExpireAfter: Duration) async throws -> LeaseRenewal {
        // `previous` reads the row as it was before this statement: the lease renewed.
        // The new heartbeat is the time the row is updated, after any claim holding the
        // row (`claim`'s `FOR SHARE`) has ended: a lease a claim found expired is
        // reported expired here, and the node's check of its sessions finds the claim.
        // Each renewal counts up the node's `renewals` (what other nodes time on their
        // own clocks before they claim) and reads back its `claims` (how many of its
        // sessions were claimed: a change since the last renewal is a lapse, whatever
        // either clock says). The heartbeat by the database's clock is kept for the
        // operator's view and as one more lapse signal (a forward step only makes the
        // node check its sessions).
        let sent = ContinuousClock.now
        let renewed =
            try await lease.rows(
                """
                WITH previous AS (SELECT heartbeat_at FROM viewline_nodes WHERE id = \(node.id)),
                renewed AS (
                    INSERT INTO viewline_nodes (id, address, web, release, records, heartbeat_at, renewals)
                    VALUES (\(node.id), \(node.address), \(node.web), \(node.release), \(Self.encode(node.records)), clock_timestamp(), 1)
                    ON CONFLICT (id) DO UPDATE SET address = excluded.address, web = excluded.web, release = excluded.release,
                        records = excluded.records, heartbeat_at = clock_timestamp(), renewals = viewline_nodes.renewals + 1
                    RETURNING heartbeat_at, claims)
                SELECT COALESCE((SELECT heartbeat_at FROM previous) <= (SELECT heartbeat_at FROM renewed) - make_interval(secs => \(nodeTimeout.seconds)), false),
                       (SELECT claims FROM renewed), (SELECT heartbeat_at FROM renewed)
                """, timeout: max(nodeTimeout - nodeTimeout / 5, .seconds(2))
            ) { row in try row.decode((Bool, Int64, Date).self) }.last
        let (expired, claims) = (renewed?.0 ?? false, renewed?.1 ?? 0)
        if let renewed { clockWatch.observe(database: renewed.2, sent: sent, received: .now) }
        // (The deadline is as long as a renewal can still count: the node serves until
        // the node timeout less its margin, a fifth of it, counted from before the send;
        // 2 s at least. A fixed 2 s failed every renewal of a slower link that the
        // database applied all the same: a fresh heartbeat, and a node that served nobody.)
        // Housekeeping, off the renewal's path: records of sessions whose node left
        // (its row gone) and that nobody attached to since, and tombstones of ended
        // sessions, a day old. A live record of a node that is still listed — alive,
        // paused or merely silent — is never deleted, whatever the database's clock says
        // (a node that died without leaving keeps its row, so its records wait for a
        // claim); at most 1,000 a round. A round that deletes begins a node timeout
        // after the last one ended, by this node's monotonic clock (at once while the
        // last one found its 1,000). Its statements scan every record (no index on
        // `updated_at`, so a record's write stays a HOT update): a round at each renewal
        // (a fifth of the node timeout) kept one of PostgreSQL's cores busy with 9,488
        // sessions on two nodes, and delayed everything else the database did.
        //
        // A record is judged by the database's clock less every forward jump of it
        // that a node saw after the record was written (`viewline_clock_jumps`,
        // `DatabaseClockWatch`): a jump of two days makes no record two days older. A
        // node deletes nothing before it has compared the clock for a node timeout (a
        // node started just after a jump cannot see it; those that saw it store it at
        // their next round), nor while a jump it saw is not stored; one round at a
        // time, and a leaving node stores what it saw.
        //
        // "Now" is the time this renewal read, never a later reading: a jump between
        // the renewal and the delete (or a backend whose clock is already past it)
        // would otherwise make a fresh record look old before any node saw the jump.
        if let now = renewed?.2, let (jumps, mayDelete) = clockWatch.beginHousekeeping(grace: nodeTimeout) {
            Task { [database, statementTimeout, clockWatch, deletes] in
                for (index, jump) in jumps.enumerated() {
                    let milliseconds = Int64(jump.size.seconds * 1000)
                    database.logger.warning(
                        "the database's clock jumped forward; records written before it are judged without the jump",
                        metadata: ["jump-ms": "\(milliseconds)"])
                    do {
                        try await Self.store(jump, in: database, timeout: statementTimeout)
                    } catch {
                        clockWatch.endHousekeeping(unstored: Array(jumps[index...]))
                        return
                    }
                }
                defer { clockWatch.endHousekeeping() }
                guard mayDelete, deletes.due(every: nodeTimeout) else { return }
                let seconds = recordsExpireAfter.seconds
                let limit = 1000
                let deleted = try? await database.collect(
                    """
                    WITH gone AS (
                        DELETE FROM viewline_sessions WHERE lookup IN (
                            SELECT s.lookup FROM viewline_sessions s
                            WHERE s.updated_at < \(now)::timestamptz - make_interval(secs => \(seconds))
                            AND s.updated_at < \(now)::timestamptz - make_interval(secs => \(seconds)) - \(unescaped: Self.jumpedSince("s.updated_at"))
                            AND (s.ended OR NOT EXISTS (SELECT 1 FROM viewline_nodes n WHERE n.id = s.owner))
                            LIMIT \(limit))
                        RETURNING 1)
                    SELECT count(*) FROM gone
                    """, timeout: statementTimeout
                ) { row in try row.decode(Int.self) }.first
                defer { deletes.ended(more: deleted == limit) }
                try? await database.run(
                    """
                    DELETE FROM viewline_session_writes w
                    WHERE w.written_at < \(now)::timestamptz - make_interval(secs => \(seconds))
                    AND w.written_at < \(now)::timestamptz - make_interval(secs => \(seconds)) - \(unescaped: Self.jumpedSince("w.written_at"))
                    """, timeout: statementTimeout)
                // A jump is forgotten once every record written before it is due
                // whatever it: the time since it, less the jumps after it, is past the
                // age (a later jump must not make an earlier one forgotten early).
                try? await database.run(
                    """
                    DELETE FROM viewline_clock_jumps j
                    WHERE j.seen_at < \(now)::timestamptz - make_interval(secs => \(seconds)) - \(unescaped: Self.jumpedSince("j.seen_at"))
                    """, timeout: statementTimeout)
            }
        }
        return LeaseRenewal(previousExpired: expired, claims: claims)
    }

    /// The node timeout every node of the cluster uses: the one stored by the first
    /// node (which stores `proposed`). Nodes that measured leases with different
    /// timeouts would each think the other's sessions free: a node started with
    /// another value adopts the stored one.
    public func agreedNodeTimeout(proposing proposed: Duration) async throws -> Duration {
        let milliseconds = String(Int(proposed.seconds * 1000))
        try await database.run(
            """
            INSERT INTO viewline_cluster_settings (name, value) VALUES ('node_timeout_ms', \(milliseconds)) ON CONFLICT (name) DO NOTHING
            """)
        let stored = try await database.collect("SELECT value FROM viewline_cluster_settings WHERE name = 'node_timeout_ms'") { row in
            try row.decode(String.self)
        }.first
        let agreed = stored.flatMap(Int.init).flatMap { $0 > 0 ? Duration.milliseconds($0) : nil } ?? proposed
        writeTimeout.value.withLock { $0 = agreed }
        return agreed
    }

    /// The key every node of the cluster tags session tokens with (`Cluster`'s
    /// `tokenKey`): 32 random bytes stored by the first node to ask, kept in the
    /// database like the node timeout, so a node started later recognises the tokens
    /// the others made.
    public func agreedTokenKey() async throws -> [UInt8] {
        let proposed = Hex.random(bytes: 32)
        try await database.run(
            """
            INSERT INTO viewline_cluster_settings (name, value) VALUES ('token_key', \(proposed)) ON CONFLICT (name) DO NOTHING
            """)
        let stored =
            try await database.collect("SELECT value FROM viewline_cluster_settings WHERE name = 'token_key'") { row in
                try row.decode(String.self)
            }.first ?? proposed
        guard let key = Hex.bytes(stored), key.count == 32 else { throw TokenKeyUnreadable() }
        return key
    }

    /// Why a failover of this database could lose what a node acknowledged, or `nil`
    /// when it cannot tell of a reason: commits acknowledged before any standby has
    /// them (standbys streaming, none synchronous), or before they are even on disk
    /// (`synchronous_commit` off). Read once at start (docs/deploying.md).
    public func durabilityWarning() async throws -> String? {
        let rows = try await database.collect(
            """
            SELECT current_setting('synchronous_commit'), current_setting('synchronous_standby_names'),
                   (SELECT count(*) FROM pg_stat_replication)::int,
                   (SELECT count(*) FROM pg_stat_replication WHERE sync_state IN ('potential', 'quorum'))::int
            """
        ) { row in try row.decode((String, String, Int, Int).self) }
        guard let (commit, standbys, streaming, standingBy) = rows.first else { return nil }
        if commit == "off" {
            return "synchronous_commit is off: a crash or a failover of the database may lose commits nodes acknowledged"
        }
        if streaming > 0, standbys.trimmingCharacters(in: .whitespaces).isEmpty {
            return
                "the database replicates to \(streaming) standby(s) asynchronously (synchronous_standby_names is empty): a failover may lose commits nodes acknowledged; use synchronous replication"
        }
        if streaming > 0, commit == "local" || commit == "remote_write" {
            return "synchronous_commit is \(commit): a failover may lose commits nodes acknowledged before a standby flushed them"
        }
        if standingBy > 0 {
            // Seen only with pg_read_all_stats (sync_state is hidden otherwise): two
            // standbys of one application_name, or a quorum.
            return
                "\(standingBy) standby(s) stand by to confirm commits (pg_stat_replication's sync_state potential or quorum): "
                + "a primary deposed while its database still runs (its manager died) keeps committing through them "
                + "until every node moves to the promoted one, and those commits are lost; give each standby its own "
                + "application_name and wait for as many as are named, or fence a deposed primary (Patroni's watchdog) (docs/deploying.md)"
        }
        if let (waitsFor, candidates) = Self.synchronousStandbys(standbys), candidates.map({ $0 > waitsFor }) ?? true {
            return
                "synchronous_standby_names (\(standbys)) lets \(candidates.map { "any \(waitsFor) of \($0)" } ?? "any") standby(s) confirm a commit: "
                + "a primary deposed while its database still runs (its manager died) keeps committing through the others "
                + "until every node moves to the promoted one, and those commits are lost; wait for as many standbys as are named, "
                + "or fence a deposed primary (Patroni's watchdog) (docs/deploying.md)"
        }
        return nil
    }

    /// How many synchronous standbys a commit waits for under `setting`
    /// (`synchronous_standby_names`), and how many the setting names (`nil` for
    /// `*`: any standby); `nil` when it names none. Its forms: `a`, `a, b` (the
    /// first of them), `N (a, b)` and `FIRST N (…)` (the first N), `ANY N (…)` (any N).
    static func synchronousStandbys(_ setting: String) -> (waitsFor: Int, candidates: Int?)? {
        var text = Substring(setting.trimmingCharacters(in: .whitespaces))
        guard !text.isEmpty else { return nil }
        var waitsFor = 1
        if let open = text.firstIndex(of: "("), text.hasSuffix(")") {
            let head = text[..<open].split(separator: " ")
            guard let number = head.last.flatMap({ Int($0) }) else { return (1, nil) }
            waitsFor = number
            text = text[text.index(after: open)..<text.index(before: text.endIndex)]
        }
        let names = text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        if names.contains("*") { return (waitsFor, nil) }
        return (waitsFor, names.count)
    }

    /// Checks that the node's connections carry the server-side limits it asked for
    /// (``PostgresURL/serverSideLimits``, sent at connect): a pooler in between that
    /// drops them (PgBouncer's `ignore_startup_parameters`) would let a statement of a
    /// node that gave up run on and commit behind its back. Throws
    /// ``LimitsNotCarried`` then; a node refuses to start on it (docs/deploying.md).
    package func checkServerSideLimits() async throws {
        let wanted = database.url.serverSideLimits
        try await database.call(timeout: statementTimeout) { [logger = database.logger] connection in
            try await connection.checkServerSideLimits(wanted, logger: logger)
        }
    }

    /// The stored token key is not 64 hex digits (written by hand?).
    struct TokenKeyUnreadable: Error, CustomStringConvertible {
        var description: String { "viewline_cluster_settings' token_key is not 64 hex digits" }
    }

    public func leave(_ node: ClusterNode) async throws {
        // Jumps of the database's clock this node saw and has not stored yet: stored
        // now, or nobody will (the other nodes may not have seen them).
        for jump in clockWatch.takeUnstored() { try? await Self.store(jump, in: database, timeout: statementTimeout) }
        try await database.run("DELETE FROM viewline_nodes WHERE id = \(node.id)", timeout: statementTimeout)
    }

    /// Stores a jump of the database's clock once, whichever nodes saw it (each
    /// measures it a little differently: within a statement timeout in time and 2 s
    /// in size is the same jump).
    static func store(_ jump: DatabaseClockWatch.Jump, in database: DatabaseAccess, timeout: Duration) async throws {
        let milliseconds = Int64(jump.size.seconds * 1000)
        try await database.run(
            """
            INSERT INTO viewline_clock_jumps (seen_at, jump_ms)
            SELECT \(jump.seenAt)::timestamptz, \(milliseconds)::bigint WHERE NOT EXISTS (
                SELECT 1 FROM viewline_clock_jumps
                WHERE abs(extract(epoch FROM seen_at - \(jump.seenAt)::timestamptz)) < \(timeout.seconds)
                AND abs(jump_ms - \(milliseconds)::bigint) < 2000)
            """, timeout: timeout)
    }

    public func save(_ records: [SessionRecord]) async throws -> SavedRecords {
        guard !records.isEmpty else { return SavedRecords() }
        // One statement for the whole batch; a record another node claimed meanwhile
        // is not taken back (the owner fences the write: a node id is never reused),
        // and one of a lower rev than the stored one changes nothing (it is late).
        // Rows are locked in the order of their lookups (`ORDER BY l`): two batches that
        // share records (one still running past its deadline and the next, a zombie's
        // and its successor's) wait for each other instead of deadlocking.
        // Rows another transaction holds (a store write's fence waiting on another row,
        // itself bounded by the server's lock_timeout) are skipped, not waited for
        // (`SKIP LOCKED`): they are reported and go with a later batch, and the rest of
        // the batch is written now.
        let revs = records.map { Int64($0.rev) }
        let lookups = records.map(\.lookup)
        let outcome = try await self.records.rows(
            """
            WITH input AS (
                SELECT * FROM unnest(\(lookups)::text[], \(records.map { Hex.string($0.secretDigest) })::text[],
                                     \(records.map(\.owner))::text[], \(records.map(\.snapshot))::text[], \(revs)::int8[]) AS r(l, d, o, s, v)),
            free AS (SELECT lookup FROM viewline_sessions WHERE lookup = ANY(\(lookups)::text[]) ORDER BY lookup FOR UPDATE SKIP LOCKED),
            busy AS (SELECT l FROM input WHERE EXISTS (SELECT 1 FROM viewline_sessions s WHERE s.lookup = input.l)
                     AND l NOT IN (SELECT lookup FROM free)),
            written AS (
                INSERT INTO viewline_sessions (lookup, secret_digest, owner, snapshot, rev, updated_at)
                SELECT l, decode(d, 'hex'), o, s, v, clock_timestamp() FROM input WHERE l NOT IN (SELECT l FROM busy)
                ORDER BY l
                ON CONFLICT (lookup) DO UPDATE SET
                    secret_digest = CASE WHEN viewline_sessions.rev <= excluded.rev THEN excluded.secret_digest ELSE viewline_sessions.secret_digest END,
                    snapshot = CASE WHEN viewline_sessions.rev <= excluded.rev THEN excluded.snapshot ELSE viewline_sessions.snapshot END,
                    rev = GREATEST(viewline_sessions.rev, excluded.rev),
                    updated_at = excluded.updated_at
                WHERE viewline_sessions.owner = excluded.owner AND NOT viewline_sessions.ended
                RETURNING lookup)
            SELECT lookup, true FROM written UNION ALL SELECT l, false FROM busy
            """, timeout: writeTimeout.value.withLock { $0 }
        ) { row in try row.decode((String, Bool).self) }
        let kept = Set(outcome.filter(\.1).map(\.0))
        let skipped = Set(outcome.filter { !$0.1 }.map(\.0))
        return SavedRecords(
            refused: lookups.filter { !kept.contains($0) && !skipped.contains($0) }, skipped: lookups.filter { skipped.contains($0) })
    }

    public func remove(lookups: [String], by node: ClusterNode) async throws -> SavedRecords {
        guard !lookups.isEmpty else { return SavedRecords() }
        // Tombstones, not deletes: a batch that took a session's snapshot before `quit`
        // and writes it after is refused (housekeeping deletes them after a day). On
        // the records' own connection, like the batches, and locked in the same order.
        // Fenced like a batch: a live record another node claimed stays live. A row
        // another transaction holds (a claim, that session's own fenced write) is
        // skipped, not waited for: the records loop never waits on one session's lock.
        let outcome = try await records.rows(
            """
            WITH free AS (SELECT lookup FROM viewline_sessions WHERE lookup = ANY(\(lookups)::text[]) ORDER BY lookup FOR UPDATE SKIP LOCKED),
            busy AS (SELECT l FROM unnest(\(lookups)::text[]) AS l WHERE EXISTS (SELECT 1 FROM viewline_sessions s WHERE s.lookup = l)
                     AND l NOT IN (SELECT lookup FROM free)),
            ended AS (
                INSERT INTO viewline_sessions (lookup, secret_digest, owner, snapshot, updated_at, ended)
                SELECT l, ''::bytea, \(node.id), '{}', clock_timestamp(), true FROM unnest(\(lookups)::text[]) AS l
                WHERE l NOT IN (SELECT l FROM busy)
                ORDER BY l
                ON CONFLICT (lookup) DO UPDATE SET ended = true, snapshot = '{}', secret_digest = ''::bytea, updated_at = clock_timestamp()
                WHERE viewline_sessions.owner = excluded.owner OR viewline_sessions.ended
                RETURNING lookup)
            SELECT lookup, true FROM ended UNION ALL SELECT l, false FROM busy
            """, timeout: writeTimeout.value.withLock { $0 }
        ) { row in try row.decode((String, Bool).self) }
        let done = Set(outcome.filter(\.1).map(\.0))
        let skipped = Set(outcome.filter { !$0.1 }.map(\.0))
        return SavedRecords(
            refused: lookups.filter { !done.contains($0) && !skipped.contains($0) }, skipped: lookups.filter { skipped.contains($0) })
    }

    public func liveNodes(nodeTimeout: Duration) async throws -> [ClusterNode]? {
        try await database.collect(
            """
            SELECT id, address, web, release, records FROM viewline_nodes
            WHERE heartbeat_at > clock_timestamp() - make_interval(secs => \(nodeTimeout.seconds))
            ORDER BY id LIMIT \(Self.liveNodesListed)
            """, timeout: statementTimeout
        ) { row in
            let (id, address, web, release, records) = try row.decode((String, String, String, String, String).self)
            return ClusterNode(id: id, address: address, web: web, release: release, records: Self.decode(records))
        }
    }

    /// A node's record versions as the `records` column keeps them (`{"search":2}`).
    static func encode(_ records: [String: Int]) -> String {
        JSON.object(JSONObject(records.sorted { $0.key < $1.key }.map { ($0.key, .int($0.value)) })).encoded
    }

    /// The `records` column read back; what is not a JSON object of integers (written
    /// by hand?) reads as no versions: that node is sent no record it may not read.
    static func decode(_ records: String) -> [String: Int] {
        guard case .object(let object)? = try? JSON.parse(records) else { return [:] }
        var versions: [String: Int] = [:]
        for (view, version) in object.pairs { if let version = version.intValue { versions[view] = version } }
        return versions
    }

    /// At most this many live nodes are listed (a bound on what one renewal reads).
    static let liveNodesListed = 1_000

    public func find(lookup: String, nodeTimeout: Duration) async throws -> SessionLocation? {
        try await database.collect(
            """
            SELECT s.lookup, encode(s.secret_digest, 'hex'), s.owner, s.snapshot, s.rev, coalesce(n.address, ''), coalesce(n.web, ''),
                   coalesce(n.heartbeat_at > clock_timestamp() - make_interval(secs => \(nodeTimeout.seconds)), false), n.renewals
            FROM viewline_sessions s LEFT JOIN viewline_nodes n ON n.id = s.owner
            WHERE s.lookup = \(lookup) AND NOT s.ended
            """, timeout: statementTimeout
        ) { row in
            let (lookup, digest, owner, snapshot, rev, address, web, alive, renewals) = try row.decode(
                (String, String, String, String, Int64, String, String, Bool, Int64?).self)
            return SessionLocation(
                record: SessionRecord(lookup: lookup, secretDigest: Hex.bytes(digest) ?? [], owner: owner, snapshot: snapshot, rev: Int(rev)),
                ownerAddress: address, ownerWeb: web, ownerAlive: alive, ownerRenewals: renewals)
        }.first
    }

    public func claim(lookup: String, from previousOwner: String, for node: ClusterNode, nodeTimeout: Duration) async throws -> SessionRecord? {
        // One statement: the owner is still the one seen, and its lease has expired by
        // the database's clock at this very moment (a node that came back is not robbed).
        // The owner's lease row is read locked (`FOR SHARE`), as it is now, not as the
        // statement's snapshot had it: a claim that waited for the session's row (the
        // owner writing its record) while the owner renewed would otherwise go through
        // on the lease as it was before, after the owner had checked its sessions; and a
        // renewal that comes while the claim runs waits for it, so its lapse check finds it.
        // It returns the row as claimed: a record the previous owner wrote after the
        // `find` is the one restored, its rev raised for the new owner to start from.
        try await database.collect(
            """
            WITH owner_lease AS (
                SELECT heartbeat_at FROM viewline_nodes WHERE id = \(previousOwner) FOR SHARE)
            UPDATE viewline_sessions SET owner = \(node.id), updated_at = clock_timestamp(), rev = rev + \(Int64(SessionRecord.maximumLag))
            WHERE lookup = \(lookup) AND owner = \(previousOwner) AND NOT ended
            AND NOT EXISTS (SELECT 1 FROM owner_lease WHERE heartbeat_at > clock_timestamp() - make_interval(secs => \(nodeTimeout.seconds)))
            RETURNING lookup, encode(secret_digest, 'hex'), owner, snapshot, rev
            """, timeout: statementTimeout
        ) { row in
            let (lookup, digest, owner, snapshot, rev) = try row.decode((String, String, String, String, Int64).self)
            return SessionRecord(lookup: lookup, secretDigest: Hex.bytes(digest) ?? [], owner: owner, snapshot: snapshot, rev: Int(rev))
        }.first
    }

    public func nodeRenewals() async throws -> [String: Int64]? {
        let rows = try await database.collect(
            "SELECT id, renewals FROM viewline_nodes ORDER BY id LIMIT \(Self.liveNodesListed)", timeout: statementTimeout
        ) { row in try row.decode((String, Int64).self) }
        return Dictionary(rows, uniquingKeysWith: { first, _ in first })
    }

    public func claim(
        lookup: String, from previousOwner: String, renewals: Int64?, for node: ClusterNode, nodeTimeout: Duration
    ) async throws -> SessionRecord? {
        // One statement, no clock: the owner is still the one seen and has not renewed
        // since the count the caller timed (or has left: no row). Its lease row is read
        // locked (`FOR SHARE`), as it is now: a renewal committed meanwhile fails the
        // claim, and one that comes while the claim runs waits for it and reads the
        // claim in `claims`, so the owner checks its sessions before it serves again.
        try await database.collect(
            """
            WITH owner_lease AS (
                SELECT renewals FROM viewline_nodes WHERE id = \(previousOwner) FOR SHARE),
            claimed AS (
                UPDATE viewline_sessions SET owner = \(node.id), updated_at = clock_timestamp(), rev = rev + \(Int64(SessionRecord.maximumLag))
                WHERE lookup = \(lookup) AND owner = \(previousOwner) AND NOT ended
                AND CASE WHEN \(renewals)::int8 IS NULL THEN NOT EXISTS (SELECT 1 FROM owner_lease)
                         ELSE EXISTS (SELECT 1 FROM owner_lease WHERE renewals = \(renewals)::int8) END
                RETURNING lookup, encode(secret_digest, 'hex'), owner, snapshot, rev),
            counted AS (
                UPDATE viewline_nodes SET claims = claims + 1 WHERE id = \(previousOwner) AND EXISTS (SELECT 1 FROM claimed))
            SELECT * FROM claimed
            """, timeout: statementTimeout
        ) { row in
            let (lookup, digest, owner, snapshot, rev) = try row.decode((String, String, String, String, Int64).self)
            return SessionRecord(lookup: lookup, secretDigest: Hex.bytes(digest) ?? [], owner: owner, snapshot: snapshot, rev: Int(rev))
        }.first
    }

    public func release(lookup: String, by node: ClusterNode, to previousOwner: String) async throws {
        try await database.run(
            """
            UPDATE viewline_sessions SET owner = \(previousOwner), rev = GREATEST(0, rev - \(Int64(SessionRecord.maximumLag)))
            WHERE lookup = \(lookup) AND owner = \(node.id)
            """, timeout: statementTimeout)
    }

    public func handOver(lookup: String, by node: ClusterNode, to successor: String) async throws {
        try await database.run(
            "UPDATE viewline_sessions SET owner = \(successor) WHERE lookup = \(lookup) AND owner = \(node.id) AND NOT ended",
            timeout: statementTimeout)
    }

    public func lost(_ lookups: [String], by node: ClusterNode) async throws -> [String] {
        guard !lookups.isEmpty else { return [] }
        // A session with no record yet was never seen by another node: not lost. One
        // another node claimed and then ended (quit, expired there) is lost too.
        return try await database.collect(
            """
            SELECT lookup FROM viewline_sessions WHERE lookup = ANY(\(lookups)::text[]) AND owner <> \(node.id)
            """, timeout: statementTimeout
        ) { try $0.decode(String.self) }
    }
}

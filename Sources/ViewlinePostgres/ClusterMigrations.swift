/// The cluster's tables — node leases (`viewline_nodes`), session records
/// (`viewline_sessions`), settings every node shares (`viewline_cluster_settings`),
/// the order of each session's application writes (`viewline_session_writes`) and
/// the jumps of the database's clock the nodes saw (`viewline_clock_jumps`)
/// — recorded in `viewline_cluster_migrations`. Written so a database the seed apps'
/// store migrated before the two schemas were split (it made these tables then)
/// takes them as they are.
enum ClusterMigrations {
    static let schema = Migrations(
        table: "viewline_cluster_migrations", lockKey: 1,
        steps: [
            (
                1,
                [
                    // A node's lease: its heartbeat by the database's clock, and where its
                    // clients (`moved`) and browsers (its web page) reach it.
                    """
                    CREATE TABLE IF NOT EXISTS viewline_nodes (
                        id text PRIMARY KEY, address text NOT NULL, heartbeat_at timestamptz NOT NULL, web text NOT NULL DEFAULT '')
                    """,
                    "ALTER TABLE viewline_nodes ADD COLUMN IF NOT EXISTS web text NOT NULL DEFAULT ''",
                    // A session's record. An ended session's stays as a tombstone (a day), so a
                    // batch written a moment after `quit` can never bring it back; `rev` is the
                    // session's rev when the snapshot was taken, so a late write never replaces
                    // a newer record.
                    """
                    CREATE TABLE IF NOT EXISTS viewline_sessions (
                        lookup text PRIMARY KEY, secret_digest bytea NOT NULL, owner text NOT NULL,
                        snapshot text NOT NULL, updated_at timestamptz NOT NULL,
                        ended boolean NOT NULL DEFAULT false, rev bigint NOT NULL DEFAULT 0)
                    """,
                    "ALTER TABLE viewline_sessions ADD COLUMN IF NOT EXISTS ended boolean NOT NULL DEFAULT false",
                    "ALTER TABLE viewline_sessions ADD COLUMN IF NOT EXISTS rev bigint NOT NULL DEFAULT 0",
                    // Settings every node must share (the node timeout): the first node's value.
                    "CREATE TABLE IF NOT EXISTS viewline_cluster_settings (name text PRIMARY KEY, value text NOT NULL)",
                ]
            ),
            (
                2,
                [
                    // The newest application write committed for a session: by which run of it
                    // (`holder`, one per session per node that ran it) and its number in that
                    // run's order, so an older write of the same run is refused
                    // (SessionWriteOrder). Rows no write touched for as long as records last
                    // are removed with the records.
                    """
                    CREATE TABLE IF NOT EXISTS viewline_session_writes (
                        lookup text PRIMARY KEY, holder text NOT NULL, sequence bigint NOT NULL, written_at timestamptz NOT NULL)
                    """
                ]
            ),
            (
                3,
                [
                    // Leases judged without the database's clock: each renewal counts up
                    // `renewals` (a node claims another's sessions only after seeing it
                    // unchanged for a node timeout on its own monotonic clock), and each
                    // claim of a node's session counts up its `claims` (its next renewal
                    // learns that it lapsed, whatever either clock says).
                    "ALTER TABLE viewline_nodes ADD COLUMN IF NOT EXISTS renewals bigint NOT NULL DEFAULT 0",
                    "ALTER TABLE viewline_nodes ADD COLUMN IF NOT EXISTS claims bigint NOT NULL DEFAULT 0",
                ]
            ),
            (
                4,
                [
                    // Forward jumps of the database's clock the nodes saw (`DatabaseClockWatch`):
                    // the database's time just after each (`seen_at`) and by how much. A
                    // record written before a jump is that much younger than its
                    // `updated_at` says; housekeeping judges it so, and forgets a jump once
                    // every record written before it is due anyway.
                    "CREATE TABLE IF NOT EXISTS viewline_clock_jumps (seen_at timestamptz NOT NULL, jump_ms bigint NOT NULL)"
                ]
            ),
            (
                5,
                [
                    // What each node runs, for a rolling deploy: its release (the
                    // operator's view) and its views' record versions as JSON (a node
                    // sends a session recorded by a newer release to one that reads it).
                    // Nodes of an earlier release leave them at their defaults.
                    "ALTER TABLE viewline_nodes ADD COLUMN IF NOT EXISTS release text NOT NULL DEFAULT ''",
                    "ALTER TABLE viewline_nodes ADD COLUMN IF NOT EXISTS records text NOT NULL DEFAULT '{}'",
                ]
            ),
        ])
}

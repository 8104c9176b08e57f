import Logging
import PostgresNIO

/// The schema, as numbered steps applied once each. Every node runs them at start:
/// an advisory lock taken in the migrating transaction makes concurrent starts wait
/// for each other, and a step already recorded is skipped.
enum PostgresMigrations {
    static let steps: [(version: Int, sql: [PostgresQuery])] = [
        (1, [
            """
            CREATE TABLE viewline_users (name text PRIMARY KEY, password_hash text NOT NULL)
            """,
            """
            CREATE TABLE viewline_drafts (user_name text PRIMARY KEY, text text NOT NULL, updated_at timestamptz NOT NULL)
            """,
            """
            CREATE TABLE viewline_saved_drafts (
                id bigserial PRIMARY KEY, user_name text NOT NULL, text text NOT NULL, saved_at timestamptz NOT NULL)
            """,
            "CREATE INDEX viewline_saved_drafts_user ON viewline_saved_drafts (user_name)",
            """
            CREATE TABLE viewline_contacts (id bigserial PRIMARY KEY, name text NOT NULL, phone text NOT NULL, address text NOT NULL)
            """,
            """
            CREATE TABLE viewline_contacts_version (id int PRIMARY KEY CHECK (id = 1), version bigint NOT NULL)
            """,
            "INSERT INTO viewline_contacts_version (id, version) VALUES (1, 0)",
            // Every statement that changes contacts bumps the version and notifies
            // listeners on every node (delivered at commit, with the new version).
            """
            CREATE FUNCTION viewline_contacts_changed() RETURNS trigger LANGUAGE plpgsql AS $$
            DECLARE new_version bigint;
            BEGIN
                UPDATE viewline_contacts_version SET version = version + 1 RETURNING version INTO new_version;
                PERFORM pg_notify('viewline_contacts', new_version::text);
                RETURN NULL;
            END $$
            """,
            """
            CREATE TRIGGER viewline_contacts_changed AFTER INSERT OR UPDATE OR DELETE ON viewline_contacts
            FOR EACH STATEMENT EXECUTE FUNCTION viewline_contacts_changed()
            """,
            """
            CREATE TABLE viewline_sync_state (source text PRIMARY KEY, applied_document text NOT NULL, applied_at timestamptz NOT NULL)
            """,
            "CREATE TABLE viewline_job_runs (job text PRIMARY KEY, generation bigint NOT NULL)",
            """
            CREATE TABLE viewline_nodes (id text PRIMARY KEY, address text NOT NULL, heartbeat_at timestamptz NOT NULL)
            """,
            """
            CREATE TABLE viewline_sessions (
                lookup text PRIMARY KEY, secret_digest bytea NOT NULL, owner text NOT NULL,
                snapshot text NOT NULL, updated_at timestamptz NOT NULL)
            """,
        ]),
        // Each node's web page, for `moved` to send a browser there.
        (2, ["ALTER TABLE viewline_nodes ADD COLUMN web text NOT NULL DEFAULT ''"]),
        // Settings every node must share (the node timeout): the first node's value.
        (3, ["CREATE TABLE viewline_cluster_settings (name text PRIMARY KEY, value text NOT NULL)"]),
        // An ended session's record stays as a tombstone (a day), so a batch written
        // a moment after `quit` deleted it can never bring the session back.
        (4, ["ALTER TABLE viewline_sessions ADD COLUMN ended boolean NOT NULL DEFAULT false"]),
        // The rev each record was taken at: a write that arrives late (held by a slow
        // link past its deadline) never replaces a newer record.
        (5, ["ALTER TABLE viewline_sessions ADD COLUMN rev bigint NOT NULL DEFAULT 0"]),
    ]

    static func run(on client: PostgresClient, logger: Logger) async throws {
        try await client.withTransaction(logger: logger) { connection in
            try await connection.query("SELECT pg_advisory_xact_lock(\(PostgresStore.lockNamespace), 0)", logger: logger)
            try await connection.query(
                "CREATE TABLE IF NOT EXISTS viewline_migrations (version int PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())",
                logger: logger)
            var applied: Set<Int> = []
            for try await version in try await connection.query("SELECT version FROM viewline_migrations", logger: logger).decode(Int.self) {
                applied.insert(version)
            }
            for step in steps where !applied.contains(step.version) {
                for statement in step.sql { try await connection.query(statement, logger: logger) }
                try await connection.query("INSERT INTO viewline_migrations (version) VALUES (\(step.version))", logger: logger)
                logger.info("migrated the database", metadata: ["version": "\(step.version)"])
            }
        }
    }
}

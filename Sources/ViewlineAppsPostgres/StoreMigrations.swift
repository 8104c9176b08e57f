import ViewlinePostgres

/// The seed apps' tables (users, drafts, contacts, sync state, job runs), recorded in
/// `viewline_migrations`. The cluster's tables are the directory's own
/// (``PostgresSessionDirectory/migrate()``); databases made before the two were
/// split hold steps 2–5 of this table, which were the cluster's, and keep them.
enum StoreMigrations {
    static let schema = Migrations(
        table: "viewline_migrations", lockKey: 0,
        steps: [
            (
                1,
                [
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
                ]
            )
        ])
}

# shellcheck shell=bash
# Sourced by ./dev (from the repository's root, under set -euo pipefail): ./dev chaos.

# ./dev chaos [minutes]: 3 nodes on a throwaway PostgreSQL under a client load while
# nodes are killed, paused, cut off from the database, cleanly restarted (SIGTERM),
# the database restarts and the database's and the nodes' wall clocks are stepped
# (PostgreSQL runs under libfaketime, its offset in $dir/pg-clock); checks that nothing
# acknowledged is lost (drafts, each session's searches, quits, idle sessions) and one
# node serves a session at a time (chaos/chaos.py). Writes chaos-report.md; exits
# non-zero on any violation.
# ./dev chaos [minutes] --ha-postgres: the database is two members under Patroni and etcd
# (synchronous replication) behind HAProxy, and the faults include `failover` (the
# primary's Patroni and PostgreSQL killed, the standby promoted, the old primary
# rejoining); `postgres` and `db-clock-step` are left out.
chaos() {
    local minutes="${1:-1}" ha=""
    [ "${2:-}" = "--ha-postgres" ] && ha=1
    setup
    local bin="${VIEWLINE_CHAOS_BIN:-}"   # a copy of the binaries, for a long run beside a rebuild
    if [ -z "$bin" ]; then
        swift build --product viewline-server 2>&1 | { grep -Ev '^\[[0-9]+/[0-9]+\]' || true; }
        bin="$(swift build --show-bin-path)"
    fi
    local dir; dir=$(mktemp -d /tmp/viewline-chaos.XXXXXX)
    local pg_url="" pg_stop="true" pg_port="" pg_restart="" pg_psql=""
    local database=()
    if [ -n "$ha" ]; then
        # Patroni, etcd and HAProxy, started and stopped by the run itself (it kills the primary).
        chmod 755 "$dir"  # PostgreSQL runs as `postgres`
        database=(--ha-postgres "$dir/patroni")
    else
        VIEWLINE_PG_FAKETIME_FILE="$dir/pg-clock" start_postgres "$dir"
        database=(--pg-port "$pg_port" --pg-restart "$pg_restart" --pg-clock "$dir/pg-clock" --psql "$pg_psql")
    fi
    local seconds; seconds=$(python3 -c "print(int(float('$minutes') * 60))")
    say "chaos for ${seconds} s${ha:+ on a PostgreSQL that fails over} (node logs in $dir)"
    local status=0
    python3 chaos/chaos.py --bin "$bin" --seconds "$seconds" "${database[@]}" --dir "$dir" --report chaos-report.md ${VIEWLINE_CHAOS_SEED:+--seed "$VIEWLINE_CHAOS_SEED"} ${VIEWLINE_CHAOS_FAULTS:+--faults "$VIEWLINE_CHAOS_FAULTS"} ${VIEWLINE_CHAOS_CLIENTS:+--clients "$VIEWLINE_CHAOS_CLIENTS"} ${VIEWLINE_CHAOS_STRICT_LIVENESS:+--strict-liveness} || status=$?
    $pg_stop >/dev/null 2>&1 || true
    if [ "$status" = 0 ] && [ -z "${VIEWLINE_CHAOS_KEEP:-}" ]; then rm -rf "$dir"; else say "node logs kept in $dir"; fi
    return "$status"
}

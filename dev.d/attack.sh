# shellcheck shell=bash
# Sourced by ./dev (from the repository's root, under set -euo pipefail): ./dev attack and attack_run (./dev test's short run).

# attack_run BIN SECONDS [attack flags]: a server from BIN under attack/attack.py: many
# connections from one address send random framings over TCP and WebSocket while a
# probe pings; fails when the server dies, grows past the budget per attacking
# connection, or the probe's p99 passes the bound. Then the other phases (output
# fan-out to slow readers, HTTP pipelining, an attach storm, registry pressure from two
# addresses, a 1,024 descriptor limit, dead tokens replayed at a cluster node, what one
# line can make the server send and spend), each briefly on a server of its own from BIN.
attack_run() {
    local bin=$1 seconds=$2; shift 2
    local out; out=$(mktemp)
    "$bin/viewline-server" --port 0 --web-port 0 --db :memory: --log-level error --demo --line-timeout 5 \
        --max-clients-per-address 0 --max-sessions-per-address 0 > "$out" &
    local server=$!
    for _ in $(seq 200); do grep -q '^web on' "$out" && break; sleep 0.05; done
    local port web
    port=$(sed -n 's/^listening on .*://p' "$out")
    web=$(sed -n 's|^web on http://.*:\([0-9]*\)/$|\1|p' "$out")
    local status=0
    python3 attack/attack.py --port "$port" --web-port "$web" --pid "$server" --seconds "$seconds" \
        --bin "$bin/viewline-server" "$@" || status=$?
    kill "$server" 2>/dev/null; wait "$server" 2>/dev/null || true
    rm -f "$out"
    return "$status"
}

# ./dev attack [seconds] [attack flags]: the release server, 40 attacking connections.
attack() {
    local seconds="${1:-600}"; shift || true
    setup
    say "building release"
    swift build -c release --product viewline-server 2>&1 | { grep -Ev '^\[[0-9]+/[0-9]+\]' || true; }
    # The dead-tokens phase runs a cluster node: a throwaway PostgreSQL unless one is given.
    local dir; dir=$(mktemp -d /tmp/viewline-attack.XXXXXX)
    local pg_url="" pg_stop="true" pg_port="" pg_restart="" pg_psql=""
    if [ -z "${VIEWLINE_TEST_POSTGRES:-}" ]; then
        start_postgres "$dir"
        export VIEWLINE_TEST_POSTGRES=$pg_url
    fi
    say "hostile-stream fuzzer for ${seconds} s against the release server"
    local status=0
    attack_run "$(swift build -c release --show-bin-path)" "$seconds" --connections 40 \
        --phase-seconds 20 --fanout-connections 200 --pipeline-connections 200 "$@" || status=$?
    $pg_stop >/dev/null 2>&1 || true
    rm -rf "$dir"
    return "$status"
}

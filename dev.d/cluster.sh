# shellcheck shell=bash
# Sourced by ./dev (from the repository's root, under set -euo pipefail): ./dev cluster.

# A throwaway PostgreSQL from Debian's packages and N nodes on consecutive ports.
cluster() {
    local count="${1:-3}" base="${VIEWLINE_PORT:-7878}"
    setup
    swift build --product viewline-server && swift build --product viewline
    local bin; bin="$(swift build --show-bin-path)"
    local dir; dir=$(mktemp -d /tmp/viewline-cluster.XXXXXX)
    local pids=() pg_url="" pg_stop="true"
    stop_cluster() {
        kill "${pids[@]}" 2>/dev/null; wait "${pids[@]}" 2>/dev/null
        $pg_stop >/dev/null 2>&1
        rm -rf "$dir"
    }
    trap stop_cluster EXIT
    trap "exit 130" INT TERM
    start_postgres "$dir"
    say "PostgreSQL in $dir: $pg_url"
    local url=$pg_url
    for i in $(seq 0 $((count - 1))); do
        local port=$((base + i))
        "$bin/viewline-server" --port "$port" --postgres "$url" --admin --demo --metrics-port $((port + 1000)) \
            > "$dir/node$i.out" 2> "$dir/node$i.log" &
        pids+=($!)
        for _ in $(seq 200); do grep -q '^listening on' "$dir/node$i.out" 2>/dev/null && break; sleep 0.05; done
        grep -q '^listening on' "$dir/node$i.out" || { cat "$dir/node$i.log" >&2; exit 1; }
        say "node $i: $(tr '\n' ' ' < "$dir/node$i.out")(pid ${pids[-1]}, log $dir/node$i.log)"
    done
    say "connect: $bin/viewline --port $base  |  nc 127.0.0.1 $((base + 1))  |  kill a node: kill ${pids[0]}"
    say "database: $url; Ctrl-C stops everything"
    wait "${pids[@]}" || true
}

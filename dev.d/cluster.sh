# shellcheck shell=bash
# Sourced by ./dev (from the repository's root, under set -euo pipefail): ./dev cluster.

# A throwaway PostgreSQL from Debian's packages and N nodes on consecutive ports; with
# --haproxy, three nodes behind Debian's HAProxy run with deploy/haproxy.cfg (clients
# connect to the proxy; each node trusts it and advertises its own frontend on it);
# with --ha-postgres, the database is two members under Patroni and etcd behind an
# HAProxy that follows the primary (Tests/support/patroni_cluster.py): kill the
# primary's Patroni and watch the nodes carry on.
cluster() {
    local count=3 haproxy="" ha=""
    for arg in "$@"; do
        case "$arg" in
            --haproxy) haproxy=1 ;;
            --ha-postgres) ha=1 ;;
            *[!0-9]*|"") echo "usage: ./dev cluster [N] [--haproxy] [--ha-postgres]" >&2; return 2 ;;
            *) count="$arg" ;;
        esac
    done
    if [ -n "$haproxy" ] && [ "$count" != 3 ]; then
        echo "./dev cluster --haproxy runs three nodes (deploy/haproxy.cfg lists three)" >&2
        return 2
    fi
    local base="${VIEWLINE_PORT:-7878}"
    setup
    swift build --product viewline-server && swift build --product viewline
    local bin; bin="$(swift build --show-bin-path)"
    local dir; dir=$(mktemp -d /tmp/viewline-cluster.XXXXXX)
    local pids=() node_pids=() pg_url="" pg_stop="true"
    stop_cluster() {
        kill "${pids[@]}" 2>/dev/null; wait "${pids[@]}" 2>/dev/null
        $pg_stop >/dev/null 2>&1
        rm -rf "$dir"
    }
    trap stop_cluster EXIT
    trap "exit 130" INT TERM
    if [ -n "$ha" ]; then
        chmod 755 "$dir"  # PostgreSQL runs as `postgres`
        python3 Tests/support/patroni_cluster.py "$dir/patroni" > "$dir/patroni.url" 2> "$dir/patroni.out" &
        pids+=($!)
        for _ in $(seq 600); do [ -s "$dir/patroni.url" ] && break; sleep 0.1; done
        [ -s "$dir/patroni.url" ] || { cat "$dir/patroni.out" >&2; exit 1; }
        pg_url=$(cat "$dir/patroni.url")
        say "PostgreSQL under Patroni ($(tail -1 "$dir/patroni.out")), through HAProxy: $pg_url (logs $dir/patroni)"
    else
        start_postgres "$dir"
        say "PostgreSQL in $dir: $pg_url"
    fi
    local url=$pg_url
    if [ -n "$haproxy" ]; then
        # The proxy on the ports clients know; the nodes on ports of their own.
        export VIEWLINE_LB_LINES="127.0.0.1:$base" VIEWLINE_LB_WEB="127.0.0.1:$((base + 202))"
        for i in 0 1 2; do
            export "VIEWLINE_LB_NODE$i=127.0.0.1:$((base + 23 + i))"
            export "VIEWLINE_NODE${i}_LINES=127.0.0.1:$((base + 3 + i))"
            export "VIEWLINE_NODE${i}_WEB=127.0.0.1:$((base + 203 + i))"
            export "VIEWLINE_NODE${i}_OPS_HOST=127.0.0.1" "VIEWLINE_NODE${i}_OPS_PORT=$((base + 1003 + i))"
        done
        haproxy -db -f deploy/haproxy.cfg 2> "$dir/haproxy.log" &
        pids+=($!)
        say "HAProxy: lines $VIEWLINE_LB_LINES, page http://$VIEWLINE_LB_WEB/ (log $dir/haproxy.log)"
    fi
    for i in $(seq 0 $((count - 1))); do
        local args=(--port $((base + i)) --metrics-port $((base + i + 1000)))
        if [ -n "$haproxy" ]; then
            args=(--port $((base + 3 + i)) --web-port $((base + 203 + i)) --metrics-port $((base + 1003 + i))
                  --trusted-proxy 127.0.0.1 --advertise "127.0.0.1:$((base + 23 + i))")
        fi
        "$bin/viewline-server" "${args[@]}" --postgres "$url" --admin --demo > "$dir/node$i.out" 2> "$dir/node$i.log" &
        pids+=($!)
        node_pids+=($!)
        for _ in $(seq 200); do grep -q '^listening on' "$dir/node$i.out" 2>/dev/null && break; sleep 0.05; done
        grep -q '^listening on' "$dir/node$i.out" || { cat "$dir/node$i.log" >&2; exit 1; }
        say "node $i: $(tr '\n' ' ' < "$dir/node$i.out")(pid ${pids[-1]}, log $dir/node$i.log)"
    done
    if [ -n "$haproxy" ]; then
        say "connect through the proxy: $bin/viewline --port $base  |  nc 127.0.0.1 $base  |  restart a node: kill ${node_pids[1]}"
    else
        say "connect: $bin/viewline --port $base  |  nc 127.0.0.1 $((base + 1))  |  kill a node: kill ${node_pids[0]}"
    fi
    if [ -n "$ha" ]; then
        say "fail the database over: kill the primary's Patroni (ps -o pid,args -C patroni), and watch the nodes carry on"
    fi
    say "database: $url; Ctrl-C stops everything"
    wait "${pids[@]}" || true
}

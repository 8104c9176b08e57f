#!/usr/bin/env bash
# benchmarks/ab.sh OLD-SERVER NEW-SERVER [ROUNDS]: two viewline-server binaries taking
# turns under the same viewline-bench, ROUNDS rounds (3 by default): ping at 1, 50
# and 50 x 16 connections, state search and search thai at 50 x 16 (commands/s,
# p50 and p99 µs), then server CPU per command at 1 x 16 (--cpu). On a noisy machine
# only alternation tells a change from the noise: compare medians and spreads.
#
#   git checkout -q OLD && swift build -c release --product viewline-server && cp .build/release/viewline-server /tmp/old
#   git checkout -q main && swift build -c release && benchmarks/ab.sh /tmp/old .build/release/viewline-server
set -euo pipefail
old=$1 new=$2 rounds=${3:-3}
bench=${VIEWLINE_BENCH:-$(dirname "$0")/../.build/release/viewline-bench}
seconds=${VIEWLINE_BENCH_SECONDS:-5}
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for round in $(seq "$rounds"); do
    for which in old new; do
        binary=$old; [ "$which" = new ] && binary=$new
        "$binary" --port 0 --db :memory: --log-level error --demo --max-clients-per-address 0 \
            --max-sessions-per-address 0 --max-logins-per-address 0 > "$out" &
        server=$!
        for _ in $(seq 100); do grep -q '^listening on' "$out" && break; sleep 0.05; done
        port=$(sed -n 's/^listening on .*://p' "$out")
        run() { "$bench" --port "$port" --seconds "$seconds" --brief "$@"; }
        cpu() { "$bench" --port "$port" --connections 1 --depth 16 --seconds "$seconds" --cpu --server-pid "$server" --command "$1"; }
        line="round $round $which | ping 1: $(run --connections 1) | ping 50: $(run --connections 50)"
        line+=" | ping 50x16: $(run --connections 50 --depth 16) | state search 50x16: $(run --connections 50 --depth 16 --command 'state search')"
        line+=" | search thai 50x16: $(run --connections 50 --depth 16 --command 'search thai')"
        line+=" | cpu µs ping $(cpu ping), state search $(cpu 'state search'), search thai $(cpu 'search thai')"
        kill "$server"; wait "$server" 2>/dev/null || true
        echo "$line"
    done
done

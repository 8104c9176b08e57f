#!/usr/bin/env bash
# benchmarks/pairs.sh A B [PAIRS] [RUNS]: what B costs over A in server CPU per command,
# where A and B are each a server binary and its flags in one word ("BINARY [FLAGS]"),
# under 50 x 16 pipelined `ping` (VIEWLINE_BENCH_COMMAND, VIEWLINE_BENCH_SECONDS: 2 s).
# PAIRS pairs of server processes (6 by default), each pair started in a random order
# and measured RUNS times (6), A and B taking turns (ABBA). Prints each pair's medians
# and the median of the pairs' differences.
#
# Why pairs of processes, not one server each: on this 2-core VM a process's luck
# (where its loops' threads land, its layout) moves its CPU per command by +-10 %
# for its whole life, more than a 3 % effect; only many processes average it out,
# and the same binary against itself (A = B) shows what is left of that luck.
#
#   benchmarks/pairs.sh .build/release/viewline-server ".build/release/viewline-server --admin" 8
set -euo pipefail
a=$1 b=$2 pairs=${3:-6} runs=${4:-6}
bench=${VIEWLINE_BENCH:-$(dirname "$0")/../.build/release/viewline-bench}
seconds=${VIEWLINE_BENCH_SECONDS:-2}
command=${VIEWLINE_BENCH_COMMAND:-ping}
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
dir=$(mktemp -d)
servers=()
trap 'kill "${servers[@]}" 2>/dev/null || true; rm -rf "$dir"' EXIT
start() {  # start NAME "BINARY [FLAGS]": sets NAME_pid and NAME_port
    local name=$1 out=$dir/$1
    : > "$out"
    # shellcheck disable=SC2086 # the binary and its flags are one word on purpose
    $2 --port 0 --db :memory: --log-level error --demo --max-clients-per-address 0 \
        --max-sessions-per-address 0 --max-logins-per-address 0 > "$out" &
    servers+=($!)
    printf -v "${name}_pid" %s $!
    for _ in $(seq 100); do grep -q '^listening on' "$out" && break; sleep 0.05; done
    printf -v "${name}_port" %s "$(sed -n 's/^listening on .*://p' "$out")"
}
run() {  # run PORT PID: server CPU µs per command
    "$bench" --port "$1" --connections 50 --depth 16 --seconds "$seconds" --cpu --server-pid "$2" --command "$command"
}
for pair in $(seq "$pairs"); do
    servers=()
    if ((RANDOM % 2)); then start a "$a"; start b "$b"; else start b "$b"; start a "$a"; fi
    run "$a_port" "$a_pid" > /dev/null
    run "$b_port" "$b_pid" > /dev/null  # warmed up
    for turn in $(seq "$runs"); do
        if ((turn % 2)); then x=$(run "$a_port" "$a_pid"); y=$(run "$b_port" "$b_pid")
        else y=$(run "$b_port" "$b_pid"); x=$(run "$a_port" "$a_pid"); fi
        echo "$pair $x $y"
    done
    kill "${servers[@]}"; wait "${servers[@]}" 2> /dev/null || true
done | python3 -c '
import statistics as st, sys
pairs = {}
for line in sys.stdin:
    pair, a, b = line.split()
    pairs.setdefault(pair, []).append((float(a), float(b)))
changes = []
for pair, rows in pairs.items():
    a, b = st.median(r[0] for r in rows), st.median(r[1] for r in rows)
    changes.append(100 * (b / a - 1))
    print(f"pair {pair}: A {a:.3f} µs, B {b:.3f} µs, {changes[-1]:+.1f} %", flush=True)
print(f"B over A: median of {len(changes)} pairs {st.median(changes):+.1f} % (pairs {min(changes):+.1f} to {max(changes):+.1f} %)")
'

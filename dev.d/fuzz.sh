# shellcheck shell=bash
# Sourced by ./dev (from the repository's root, under set -euo pipefail): ./dev fuzz and the seed corpus (./dev test replays it).

# The seed corpus (every line of protocol/vectors) in a fresh temporary folder.
corpus() {
    local dir; dir=$(mktemp -d)
    python3 protocol/vectors/fuzz/make-corpus.py "$dir" >&2
    echo "$dir"
}

fuzz() {
    local seconds="${1:-45}"
    say "building viewline-fuzz with libFuzzer and AddressSanitizer (.build-fuzz)"
    swift build --scratch-path .build-fuzz --product viewline-fuzz \
        -Xswiftc -sanitize=fuzzer,address -Xswiftc -DFUZZING -Xswiftc -gnone 2>&1 | { grep -Ev '^\[[0-9]+/[0-9]+\]' || true; }
    local seeds; seeds=$(corpus)
    mkdir -p .build-fuzz/crashes
    say "fuzzing for ${seconds} s (a crash is saved in .build-fuzz/crashes/; keep it in protocol/vectors/fuzz/crashes/)"
    .build-fuzz/debug/viewline-fuzz "$seeds" -max_total_time="$seconds" -max_len=4096 -timeout=10 \
        -artifact_prefix=.build-fuzz/crashes/ -print_final_stats=1 2>&1 | { grep -E '^(#|Done|stat::number_of_executed_units|==|SUMMARY)' | tail -n 8 || true; }
    rm -rf "$seeds"
}

# shellcheck shell=bash
# Sourced by ./dev (from the repository's root, under set -euo pipefail): ./dev run.

run() {
    setup
    # The same build as ./dev test's (tests included): one after the other rebuilds nothing.
    build
    local bin; bin="$(swift build --show-bin-path)"
    local port="${VIEWLINE_PORT:-7878}"
    "$bin/viewline-server" --port "$port" --admin --demo "$@" > /tmp/viewline-server.$$.out 2> /tmp/viewline-server.$$.log &
    local server=$!
    trap "kill $server 2>/dev/null; wait $server 2>/dev/null; rm -f /tmp/viewline-server.$$.out" EXIT
    for _ in $(seq 100); do grep -q '^listening on' /tmp/viewline-server.$$.out 2>/dev/null && break; sleep 0.05; done
    say "$(cat /tmp/viewline-server.$$.out) (log: /tmp/viewline-server.$$.log); Ctrl-D quits"
    "$bin/viewline" --port "$port"
}

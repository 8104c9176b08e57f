# shellcheck shell=bash
# Sourced by ./dev (from the repository's root, under set -euo pipefail): ./dev test, every suite in order.

# Build output never belongs in git (a stale copy is what a reader or `pip install .` picks up).
check_no_build_output() {
    local tracked
    tracked=$(git ls-files 2>/dev/null | grep -E '(^|/)(\.build[^/]*|build|dist|node_modules|__pycache__|[^/]*\.egg-info)/' || true)
    if [ -n "$tracked" ]; then
        echo "build output is tracked in git (remove it; .gitignore covers it):" >&2
        echo "$tracked" | head -20 >&2
        return 1
    fi
}

tests() {
    setup
    say "no build output tracked in git"
    check_no_build_output
    # .swift-format (150 columns, 4 spaces; the example apps are left as the tutorial
    # quotes them): `swift format format -i -r Sources Tests` fixes what this finds.
    say "swift format lint (Sources, Tests)"
    swift format lint --strict -r --configuration .swift-format Sources Tests
    build
    local bin; bin="$(swift build --show-bin-path)"
    export VIEWLINE_SERVER="$bin/viewline-server" VIEWLINE_CLIENT="$bin/viewline"
    # One PostgreSQL for every suite (each test makes its own database on it); tests
    # that stop the server start their own with the same script.
    local test_pg; test_pg=$(mktemp -d /tmp/viewline-test-pg.XXXXXX)
    trap 'Tests/support/postgres remove "'"$test_pg"'"' EXIT
    # Started from a 0700 directory the postgres user cannot enter, as from a checkout in
    # /root: the starter must still print only the URL (its tools' warnings are not output).
    local closed; closed=$(mktemp -d)
    VIEWLINE_TEST_POSTGRES=$(cd "$closed" && "$OLDPWD/Tests/support/postgres" start "$test_pg")
    rmdir "$closed"
    [[ "$VIEWLINE_TEST_POSTGRES" =~ ^postgres://[^[:space:]]+$ ]] \
        || { echo "Tests/support/postgres start printed more than a URL: $VIEWLINE_TEST_POSTGRES" >&2; return 1; }
    export VIEWLINE_TEST_POSTGRES
    say "Swift tests"
    # Only whole "started" lines go: a crash's message (a signal ends the test process)
    # is written into the middle of one, and must stay in the log.
    swift test --skip-build --disable-xctest 2>&1 | { grep -Ev '^↳|^◇.*started\.$' || true; }
    say "documentation: every public symbol documented, DocC (--analyze) with no diagnostic"
    Tests/support/check-docs
    if [ -d clients/python ]; then
        say "Python client tests (and mypy --strict)"
        (cd clients/python && python3 -m pytest -q && python3 -m mypy --strict viewline)
    fi
    if [ -d clients/node ]; then
        say "Node client tests"
        (cd clients/node && node --test)
    fi
    say "conformance: the same scenarios for the Python, Node and Swift clients (clients/conformance)"
    python3 clients/conformance/run.py --server "$bin/viewline-server" \
        --driver python="python3 clients/conformance/drivers/python.py" \
        --driver node="node clients/conformance/drivers/node.mjs" \
        --driver swift="$bin/viewline-conformance"
    say "operations tests (/metrics through prometheus_client's parser, /healthz, /readyz)"
    (cd Tests/Operations && python3 -m pytest -q)
    say "browser tests (headless Chromium; failures' screenshots in .build/browser-artifacts)"
    (cd Tests/Browser && python3 -m pytest -q)
    if [ -d clients/netcat ]; then
        say "netcat examples"
        clients/netcat/check-examples
    fi
    bench_smoke "$bin"
    # The debug build is several times slower than release and shares the 2 cores with
    # the generator: memory and survival are held as in ./dev attack, latency to 100 ms
    # (a debug probe's p99 was 2.7 ms at 1 MB/s; the 5 ms bound is ./dev attack's,
    # against the release build).
    say "hostile-stream fuzzer, ${VIEWLINE_ATTACK_SECONDS:-15} s against the debug server (./dev attack for the release run)"
    # The attach storm saturates a debug build's two cores (about 1 ms of CPU per
    # attach answered, throttled ones included): its probe is held to 1 s here, to
    # ./dev attack's bound against the release build.
    attack_run "$bin" "${VIEWLINE_ATTACK_SECONDS:-15}" --connections 20 --rate-mb 1 --p99-ms 100 --storm-p99-ms 1000
    if [ "${VIEWLINE_CHAOS_MINUTES:-1}" != 0 ]; then
        chaos "${VIEWLINE_CHAOS_MINUTES:-1}"
    fi
    say "fuzz corpus replayed through framing and decoding"
    local seeds; seeds=$(corpus)
    "$bin/viewline-fuzz" "$seeds" protocol/vectors/fuzz/crashes
    rm -rf "$seeds"
    if [ "${VIEWLINE_FUZZ_SECONDS:-30}" -gt 0 ]; then
        fuzz "${VIEWLINE_FUZZ_SECONDS:-30}"
    fi
    # The examples' targets are in this package too (built and tested above, once);
    # each example's own manifest, what an app copies, must still read.
    for example in Examples/*/; do
        say "example ${example%/}: its Package.swift reads (its targets were built and tested above)"
        swift package --package-path "$example" dump-package > /dev/null
    done
    local todo_server="$bin/todo-server"
    say "Examples/Todos in the browser (no front-end code of its own)"
    (cd Tests/Browser && VIEWLINE_TODO_SERVER="$todo_server" python3 -m pytest -q test_todos_example.py)
    say "Examples/Todos from the Python and Node clients (no command table of their own)"
    (cd clients/python && VIEWLINE_TODO_SERVER="$todo_server" python3 -m pytest -q tests/test_todos.py)
    (cd clients/node && VIEWLINE_TODO_SERVER="$todo_server" node --test test/todos.test.mjs)
    say "Examples/Todos at the REPL (drawn from its shape: no code of its own)"
    todos_at_the_repl "$todo_server" "$bin/viewline"
}

# The REPL's script mode against Examples/Todos: its view prints as a table of items.
todos_at_the_repl() {
    local server=$1 repl=$2 dir; dir=$(mktemp -d)
    (cd "$dir" && exec "$server" 0 0 > out 2>/dev/null) &
    local pid=$!
    for _ in $(seq 200); do grep -q '^listening on' "$dir/out" 2>/dev/null && break; sleep 0.05; done
    local port; port=$(sed -n 's/^listening on .*:\([0-9]*\)$/\1/p' "$dir/out")
    local printed; printed=$(printf 'add buy milk\nadd walk the dog\nstate todos\n' | "$repl" --port "$port" 2>&1 || true)
    kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; rm -rf "$dir"
    if grep -q '^ID  TITLE' <<<"$printed" && grep -q '^2   walk the dog' <<<"$printed"; then
        printf '%s\n' "$printed" | tail -n 4
    else
        printf '%s\n' "$printed"; echo "Examples/Todos is not a table at the REPL" >&2; return 1
    fi
}

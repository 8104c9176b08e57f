# shellcheck shell=bash
# Sourced by ./dev (from the repository's root, under set -euo pipefail): ./dev bench (release, the table) and bench_smoke
# (./dev test's every scenario for a moment).

# The open loop's generator keeps its schedule on the last core at real-time priority
# (root, two cores or more): it preempts the server the moment a command falls due or
# a reply arrives, so its own lag stays far under the 1 ms a run may have to count,
# while the server's threads run on every core around it. Otherwise it shares the
# cores as any process does. Sets the caller's `generator` (the command's prefix) and
# `generator_note` (what the row says).
open_loop_generator() {
    local cores; cores=$(nproc)
    generator=()
    generator_note="generator sharing the cores"
    if [ "$(id -u)" = 0 ] && [ "$cores" -ge 2 ] && command -v taskset >/dev/null && command -v chrt >/dev/null \
        && taskset -c $((cores - 1)) chrt -f 10 true 2>/dev/null; then
        generator=(taskset -c $((cores - 1)) chrt -f 10)
        generator_note="generator on CPU $((cores - 1)) at SCHED_FIFO"
    fi
}

# Every bench scenario for a moment against a debug server, so the bench cannot rot.
# Asserts nothing about speed (./dev bench measures, in release mode).
bench_smoke() {
    local bin=$1 out; out=$(mktemp)
    local contacts; contacts=$(mktemp)
    say "bench smoke (every scenario briefly; no speed asserted)"
    "$bin/viewline-server" --port 0 --db :memory: --log-level error --demo --remote-contacts "$contacts" \
        --max-clients-per-address 0 --max-sessions-per-address 0 --max-logins-per-address 0 > "$out" &
    local server=$!
    for _ in $(seq 100); do grep -q '^listening on' "$out" && break; sleep 0.05; done
    local port; port=$(sed -n 's/^listening on .*://p' "$out")
    "$bin/viewline-bench" --port "$port" --seconds 1 --connections 4 --depth 4
    kill "$server"; wait "$server" 2>/dev/null || true
    "$bin/viewline-bench" --floor-server 1 --port 0 > "$out" &
    server=$!
    for _ in $(seq 100); do grep -q '^listening on' "$out" && break; sleep 0.05; done
    port=$(sed -n 's/^listening on .*://p' "$out")
    "$bin/viewline-bench" --port "$port" --seconds 1 --connections 4 --depth 4
    "$bin/viewline-bench" --port "$port" --fanout 20 --fanout-changes 2 --floor
    kill "$server"; wait "$server" 2>/dev/null || true
    "$bin/viewline-bench" --floor-server 1 --floor-receive-buffer 64 --port 0 > "$out" &
    server=$!
    for _ in $(seq 100); do grep -q '^listening on' "$out" && break; sleep 0.05; done
    "$bin/viewline-bench" --port "$(sed -n 's/^listening on .*://p' "$out")" --idle 50 --server-pid "$server"
    kill "$server"; wait "$server" 2>/dev/null || true
    "$bin/viewline-server" --port 0 --web-port 0 --db :memory: --log-level error --demo --remote-contacts "$contacts" \
        --max-clients-per-address 0 --max-sessions-per-address 0 --max-logins-per-address 0 > "$out" &
    server=$!
    for _ in $(seq 100); do grep -q '^web on' "$out" && break; sleep 0.05; done
    "$bin/viewline-bench" --port "$(sed -n 's|^web on http://.*:\([0-9]*\)/$|\1|p' "$out")" --seconds 1 --connections 4 --depth 4 --websocket
    port=$(sed -n 's/^listening on .*://p' "$out")
    "$bin/viewline-bench" --port "$port" --seconds 1 --connections 2 --command "state search"
    "$bin/viewline-bench" --port "$port" --seconds 1 --connections 1 --depth 16 --cpu --server-pid "$server"
    "$bin/viewline-bench" --port "$port" --seconds 1 --connections 1 --flood 2
    "$bin/viewline-bench" --port "$port" --seconds 1 --connections 2 --setup "login alice wonderland" --command "draft smoke"
    "$bin/viewline-bench" --port "$port" --idle 50 --server-pid "$server"
    "$bin/viewline-bench" --port "$port" --detached 50 --command "search pizza" --server-pid "$server"
    "$bin/viewline-bench" --port "$port" --storm 50
    local generator=() generator_note=""
    open_loop_generator
    "${generator[@]}" "$bin/viewline-bench" --port "$port" --open-loop 20 --open-loop-rate 200 --open-loop-runs 2 --open-loop-seconds 1
    kill "$server"; wait "$server" 2>/dev/null || true
    "$bin/viewline-server" --port 0 --db :memory: --log-level error --demo --remote-contacts "$contacts" --session-ttl 1 \
        --max-clients-per-address 0 --max-sessions-per-address 0 --max-logins-per-address 0 > "$out" &
    server=$!
    for _ in $(seq 100); do grep -q '^listening on' "$out" && break; sleep 0.05; done
    port=$(sed -n 's/^listening on .*://p' "$out")
    "$bin/viewline-bench" --port "$port" --expiry 50 --expire-after 1 --command "search pizza" --server-pid "$server"
    "$bin/viewline-bench" --port "$port" --fanout 20 --fanout-changes 2 --contacts-file "$contacts"
    kill "$server"; wait "$server" 2>/dev/null || true
    rm -f "$out" "$contacts"
    # What a record write costs PostgreSQL (docs/capacity.md), one node for a moment.
    python3 benchmarks/pg_cost.py --bin "$bin" --nodes 1 --seconds 1 --sessions 10
    # The A/B script (benchmarks/README.md), one round of a server against itself.
    VIEWLINE_BENCH="$bin/viewline-bench" VIEWLINE_BENCH_SECONDS=1 benchmarks/ab.sh "$bin/viewline-server" "$bin/viewline-server" 1
    # The process-pairs script (the inspector's cost), one pair for one turn.
    VIEWLINE_BENCH="$bin/viewline-bench" VIEWLINE_BENCH_SECONDS=1 benchmarks/pairs.sh "$bin/viewline-server" "$bin/viewline-server --admin" 1 1
}

bench() {
    setup
    say "building release"
    swift build -c release --product viewline-server
    swift build -c release --product viewline-bench
    bin="$(swift build -c release --show-bin-path)"
    out=$(mktemp); pids=(); pg_stop="true"; pgdir=""
    # What #75 compares with the floor, one "key value" a line, summed up at the end.
    summary=$(mktemp)  # not local: the EXIT trap removes it after this function returned
    note() { echo "$*" >> "$summary"; }
    # Interrupted or done: the servers, a throwaway PostgreSQL and its directory go.
    restore_somaxconn=""
    trap 'kill ${pids[*]} 2>/dev/null; $pg_stop >/dev/null 2>&1; [ -n "$pgdir" ] && rm -rf "$pgdir"; rm -f "$out" "$summary"
        [ -n "$restore_somaxconn" ] && echo "$restore_somaxconn" > /proc/sys/net/core/somaxconn || true' EXIT
    trap "exit 130" INT TERM
    start_viewline() {  # start_viewline [flags]: sets port
        # Every generator connection comes from 127.0.0.1: no per-address caps.
        "$bin/viewline-server" --port 0 --db "${bench_db:-:memory:}" --log-level error --demo \
            --max-clients-per-address 0 --max-sessions-per-address 0 --max-logins-per-address 0 "$@" > "$out" &
        pids+=($!)
        for _ in $(seq 100); do grep -q '^listening on' "$out" && break; sleep 0.05; done
        port=$(sed -n 's/^listening on .*://p' "$out")
    }
    start_floor() {  # start_floor LOOPS [flags]: the bare SwiftNIO floor server; sets port
        "$bin/viewline-bench" --floor-server "$@" --port 0 > "$out" &
        pids+=($!)
        for _ in $(seq 100); do grep -q '^listening on' "$out" && break; sleep 0.05; done
        port=$(sed -n 's/^listening on .*://p' "$out")
    }
    if ! command -v redis-server >/dev/null && [ "$(id -u)" = 0 ]; then
        say "installing redis-server, the yardstick"
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server; } >/dev/null 2>&1 || true
    fi
    local redis_port="" redis_pid=""
    if command -v redis-server >/dev/null; then
        redis_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
        redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no --daemonize no > /dev/null &
        pids+=($!)
        redis_pid=$!
        sleep 0.3
    fi
    start_viewline
    measure() {  # measure ARGS...: "rate p50 p99"
        "$bin/viewline-bench" --brief --seconds "${VIEWLINE_BENCH_SECONDS:-5}" "$@"
    }
    printf '%-44s %12s %12s %7s\n' "scenario (5 s each, loopback)" "viewline/s" "redis/s" "ratio"
    row() {  # row LABEL REDIS-ARGS -- VIEWLINE-ARGS
        local label=$1; shift
        local redis_args=(); while [ "$1" != "--" ]; do redis_args+=("$1"); shift; done; shift
        read -r v v50 v99 <<< "$(measure --port "$port" "$@")"
        local r="-" ratio="-" redis_latency=""
        if [ -n "$redis_port" ] && [ ${#redis_args[@]} -gt 0 ]; then
            read -r r r50 r99 <<< "$(measure --port "$redis_port" --redis "${redis_args[@]}")"
            ratio=$(python3 -c "print(f'{$v/$r:.2f}')")
            redis_latency="; redis $r50 µs, $r99 µs"
        fi
        printf '%-44s %12s %12s %7s   (p50, p99: viewline %s µs, %s µs%s)\n' "$label" "$v" "$r" "$ratio" "$v50" "$v99" "$redis_latency"
        last_rate=$v
    }
    local last_rate=""
    row "ping, 1 connection" --command PING --connections 1 -- --connections 1
    note rate_default_1 "$last_rate"
    row "ping, 50 connections" --command PING --connections 50 -- --connections 50
    note rate_default_50 "$last_rate"
    row "ping, 50 connections x 16 pipelined" --command PING --connections 50 --depth 16 -- --connections 50 --depth 16
    note rate_default_50x16 "$last_rate"
    kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true
    # Like for like with single-threaded redis: one event loop (the generator has the other core).
    start_viewline --event-loops 1
    row "  ping, 1 connection, 1 event loop" --command PING --connections 1 -- --connections 1
    note rate_one_1 "$last_rate"
    row "  ping, 50 connections, 1 event loop" --command PING --connections 50 -- --connections 50
    note rate_one_50 "$last_rate"
    row "  ping, 50 x 16 pipelined, 1 event loop" --command PING --connections 50 --depth 16 -- --connections 50 --depth 16
    note rate_one_50x16 "$last_rate"
    kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true
    # The floor: a bare SwiftNIO line server (one event loop) that answers each line as
    # ping without decoding it: how much of the gap to redis is the runtime's.
    local viewline_port=$port
    start_floor 1
    row "  floor (bare SwiftNIO), 1 connection" --command PING --connections 1 -- --connections 1
    note rate_floor_1 "$last_rate"
    row "  floor (bare SwiftNIO), 50 connections" --command PING --connections 50 -- --connections 50
    note rate_floor_50 "$last_rate"
    row "  floor (bare SwiftNIO), 50 x 16 pipelined" --command PING --connections 50 --depth 16 -- --connections 50 --depth 16
    note rate_floor_50x16 "$last_rate"
    port=$viewline_port
    kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true
    start_viewline --web-port 0  # the same server, and WebSocket at /ws
    local tcp_port=$port
    port=$(sed -n 's|^web on http://.*:\([0-9]*\)/$|\1|p' "$out")
    row "ping over WebSocket, 50 connections" --command PING --connections 50 -- --connections 50 --websocket
    row "ping over WebSocket, 50 x 16 pipelined" --command PING --connections 50 --depth 16 -- --connections 50 --depth 16 --websocket
    port=$tcp_port
    row "state search vs redis ping, 50 connections" --command PING --connections 50 -- --connections 50 --command "state search"
    kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true
    start_viewline --metrics-port 0  # every command counted and timed into /metrics
    row "  ping, 50 x 16 pipelined, --metrics-port on" --command PING --connections 50 --depth 16 -- --connections 50 --depth 16
    kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true
    start_viewline --admin  # the inspector on: every command goes into its session's timeline
    row "  ping, 50 x 16 pipelined, inspector on" --command PING --connections 50 --depth 16 -- --connections 50 --depth 16
    row "  state search, 50 x 16, inspector on" -- --connections 50 --depth 16 --command "state search"
    kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true
    start_viewline
    row "  state search, 50 x 16, inspector off" -- --connections 50 --depth 16 --command "state search"
    kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true
    start_viewline
    # Server CPU per command (user + system from /proc/PID/stat), 1 connection x 16
    # pipelined: repeatable within ~5 % here, where rates move +-10 %.
    cpu_row() {  # cpu_row LABEL VIEWLINE-COMMAND REDIS-COMMAND
        local v r="-" ratio="-"
        v=$("$bin/viewline-bench" --port "$port" --connections 1 --depth 16 --seconds "${VIEWLINE_BENCH_SECONDS:-5}" \
            --cpu --server-pid "${pids[-1]}" --command "$2")
        if [ -n "$redis_port" ]; then
            r=$("$bin/viewline-bench" --port "$redis_port" --redis --connections 1 --depth 16 --seconds "${VIEWLINE_BENCH_SECONDS:-5}" \
                --cpu --server-pid "$redis_pid" --command "$3")
            ratio=$(python3 -c "print(f'{$v/$r:.2f}')")
        fi
        printf '%-44s %12s %12s %7s   (server CPU µs per command; ratio viewline / redis)\n' "$1" "$v" "$r" "$ratio"
        cpu_last=$v
    }
    local cpu_last=""
    if [ -n "$redis_port" ] && command -v redis-cli >/dev/null; then
        redis-cli -p "$redis_port" SET place '{"name":"Harbor Crust","cuisine":"pizza","rating":4.9}' >/dev/null
    fi
    cpu_row "CPU per command: ping vs PING" "ping" "PING"
    local cpu_ping=$cpu_last
    cpu_row "CPU per command: state search vs GET" "state search" "GET place"
    local cpu_state=$cpu_last
    # The floor's CPU per line, the same way: what Viewline adds is the difference
    # (#75: ping within 0.5 µs of it, state search within 1.5 µs).
    kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true
    start_floor 1
    local cpu_floor
    cpu_floor=$("$bin/viewline-bench" --port "$port" --connections 1 --depth 16 --seconds "${VIEWLINE_BENCH_SECONDS:-5}" \
        --cpu --server-pid "${pids[-1]}" --command PING)
    printf '%-44s %12s %12s %7s   (server CPU µs per line answered)\n' "  floor (bare SwiftNIO)" "$cpu_floor" "-" "-"
    note cpu_ping "$cpu_ping"; note cpu_state "$cpu_state"; note cpu_floor "$cpu_floor"
    printf '%-44s %12s %12s %7s   (server CPU µs per command over the floor)\n' "  over the floor: ping, state search" \
        "$(python3 -c "print(f'{$cpu_ping-$cpu_floor:+.2f}')")" "$(python3 -c "print(f'{$cpu_state-$cpu_floor:+.2f}')")" "-"
    kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true
    start_viewline
    row "ping during a 20-connection login flood" -- --connections 1 --flood 20
    kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true
    start_viewline --login-attempts-before-throttle 1000000
    row "  same, throttling off (hashing pool alone)" -- --connections 1 --flood 20
    kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true
    # Durable writes: a database file (WAL, synchronous=FULL); each reply comes after its commit.
    local dbdir; dbdir=$(mktemp -d)
    bench_db="$dbdir/bench.sqlite" start_viewline
    row "durable draft, 50 sessions (group commit)" -- --connections 50 --setup "login alice wonderland" --command "draft bench draft"
    kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true
    rm -rf "$dbdir"
    # Sessions at scale: the file limit must allow them (and the generator's sockets).
    local sessions="${VIEWLINE_BENCH_SESSIONS:-10000}"
    ulimit -n $((2 * sessions + 1024)) 2>/dev/null || sessions=$(( $(ulimit -n) / 2 - 512 ))
    local contacts; contacts=$(mktemp)
    start_viewline --remote-contacts "$contacts" --max-sessions $((sessions + 100)) --max-clients $((sessions + 100))
    local idle_kib; idle_kib=$("$bin/viewline-bench" --port "$port" --idle "$sessions" --server-pid "${pids[-1]}" --brief)
    printf '%-44s %s KiB\n' "RSS per idle session ($sessions sessions)" "$idle_kib"
    note idle "$idle_kib"
    kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true
    # The floor's idle connection: a bare SwiftNIO channel, its receive buffer
    # starting at 64 bytes as Viewline's: what one holds with nothing of Viewline's.
    start_floor "$(nproc)" --floor-receive-buffer 64
    idle_kib=$("$bin/viewline-bench" --port "$port" --idle "$sessions" --server-pid "${pids[-1]}" --brief)
    printf '%-44s %s KiB\n' "  floor (bare SwiftNIO), per idle connection" "$idle_kib"
    note idle_floor "$idle_kib"
    kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true
    start_viewline --remote-contacts "$contacts" --max-sessions $((sessions + 100)) --max-clients $((sessions + 100))
    local few=$(( sessions < 1000 ? sessions : 1000 ))
    read -r f50 f99 fmax fcpu <<< "$("$bin/viewline-bench" --port "$port" --fanout "$few" --contacts-file "$contacts" --server-pid "${pids[-1]}" --brief)"
    printf '%-44s p50 %s ms, p99 %s ms, max %s ms; server CPU %s ms\n' "contacts change reaching $few sessions" "$f50" "$f99" "$fmax" "$fcpu"
    kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true
    # Every session, then the floor's same fan-out: a bare SwiftNIO server (as many
    # loops as Viewline's default, one per core) writing a display-sized line to every
    # connection, one task per loop: what a change reaching them costs with nothing of
    # Viewline's. Taking turns, VIEWLINE_BENCH_RUNS times (3), a fresh server each.
    local fanout_runs="${VIEWLINE_BENCH_RUNS:-3}"
    for run in $(seq "$fanout_runs"); do
        start_viewline --remote-contacts "$contacts" --max-sessions $((sessions + 100)) --max-clients $((sessions + 100))
        read -r f50 f99 fmax fcpu <<< "$("$bin/viewline-bench" --port "$port" --fanout "$sessions" --contacts-file "$contacts" --server-pid "${pids[-1]}" --brief)"
        printf '%-44s p50 %s ms, p99 %s ms, max %s ms; server CPU %s ms\n' "contacts change reaching $sessions sessions, run $run" "$f50" "$f99" "$fmax" "$fcpu"
        note fanout "$run $sessions $f99 $fcpu"
        kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true
        start_floor "$(nproc)"
        read -r f50 f99 fmax fcpu <<< "$("$bin/viewline-bench" --port "$port" --fanout "$sessions" --floor --server-pid "${pids[-1]}" --brief)"
        printf '%-44s p50 %s ms, p99 %s ms, max %s ms; server CPU %s ms\n' "  floor (bare SwiftNIO), same, run $run" "$f50" "$f99" "$fmax" "$fcpu"
        note fanout_floor "$run $sessions $f99 $fcpu"
        kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true
    done
    # A reconnect storm (a failover's worth of clients at once): the default backlog
    # (capped by the host's net.core.somaxconn, named in the row), then SwiftNIO's 256.
    local somaxconn; somaxconn=$(cat /proc/sys/net/core/somaxconn 2>/dev/null || echo "?")
    storm_row() {  # storm_row BACKLOG: one storm against a fresh server
        start_viewline --max-sessions $((sessions + 100)) --max-clients $((sessions + 100)) --backlog "$1"
        read -r s_last s50 s99 s_over s_syn s_failed <<< "$("$bin/viewline-bench" --port "$port" --storm "$sessions" --brief)"
        printf '%-44s last welcome %s ms (p50 %s, p99 %s); %s listen overflows, %s SYN retransmits, %s failed\n' \
            "$sessions clients at once, --backlog $1 (somaxconn $(cat /proc/sys/net/core/somaxconn 2>/dev/null || echo "?"))" \
            "$s_last" "$s50" "$s99" "$s_over" "$s_syn" "$s_failed"
        kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true
    }
    storm_row 16384
    storm_row 256
    # As deployed: the host's cap raised to the default backlog (as the server's start
    # line asks), for this row only, when this run may (root), then put back.
    if [ "$(id -u)" = 0 ] && [ "$somaxconn" != "?" ] && [ "$somaxconn" -lt 16384 ] \
        && echo 16384 2>/dev/null > /proc/sys/net/core/somaxconn; then
        restore_somaxconn=$somaxconn  # the EXIT trap puts it back if the run is stopped
        storm_row 16384
        echo "$somaxconn" > /proc/sys/net/core/somaxconn || true
        restore_somaxconn=""
    fi
    # Open loop: $sessions sessions, commands due on a schedule (searches with results,
    # state, ping, alerts answered), latency from when each was due; VIEWLINE_BENCH_RUNS
    # runs (3), each finding its highest rate anew on a fresh server; the first run's
    # curve goes to benchmarks/open-loop.svg.
    local curve; curve=$(mktemp)
    local generator=() generator_note=""
    open_loop_generator
    for run in $(seq "${VIEWLINE_BENCH_RUNS:-3}"); do
        start_viewline --max-sessions $((sessions + 100)) --max-clients $((sessions + 100))
        "${generator[@]}" "$bin/viewline-bench" --port "$port" --open-loop "$sessions" --open-loop-seconds "${VIEWLINE_BENCH_SECONDS:-5}" --brief > "$curve"
        kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true
        local max; max=$(sed -n 's/^max //p' "$curve")
        while read -r share target achieved p50 p99 p999 lag; do
            [ "$share" = max ] && continue
            printf '%-44s p50 %s µs, p99 %s µs, p99.9 %s µs (generator lag p99 %s µs; %s)\n' \
                "open loop, $sessions sessions, ${share} % of ${max}/s, run $run" "$p50" "$p99" "$p999" "$lag" "$generator_note"
            note open_loop "$run $share $p99 $lag"
        done < "$curve"
        [ "$run" = 1 ] && python3 benchmarks/plot_open_loop.py "$curve" "$sessions" > benchmarks/open-loop.svg
    done
    rm -f "$curve"
    # Detached sessions: they outlive their connections, so the file limit does not
    # cap them. 200,000 by default; VIEWLINE_BENCH_DETACHED=1000000 for the million.
    local detached="${VIEWLINE_BENCH_DETACHED:-200000}"
    start_viewline --max-sessions "$detached" --session-ttl 86400  # none expires while the rest open
    read -r d_kib d50 d99 d_views d_rss <<< "$("$bin/viewline-bench" --port "$port" --detached "$detached" --command "search pizza" --server-pid "${pids[-1]}" --brief)"
    printf '%-44s %s KiB each (its states %s bytes encoded); attach p50 %s µs, p99 %s µs; RSS %s MiB\n' \
        "$detached detached sessions after search pizza" "$d_kib" "$d_views" "$d50" "$d99" "$((d_rss / 1024))"
    note detached "$detached $d_kib $d_views $d99 $d_rss"
    kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true
    # The same number opened in a burst and left to expire (the time to live outlasts
    # the burst, about 2,500 sessions a second here): the longest ping meanwhile.
    local ttl=$(( detached / 2000 + 10 ))
    start_viewline --max-sessions "$detached" --session-ttl "$ttl"
    local longest p9999 base_longest base_p9999
    read -r longest p9999 base_longest base_p9999 <<< "$("$bin/viewline-bench" --port "$port" --expiry "$detached" --expire-after "$ttl" \
        --command "search pizza" --server-pid "${pids[-1]}" --brief)"
    printf '%-44s longest ping %s ms, p99.99 %s ms (10 s before, nothing expiring: %s ms, %s ms)\n' "$detached sessions expiring" \
        "$longest" "$p9999" "$base_longest" "$base_p9999"
    note expiry "$longest $p9999 $base_longest $base_p9999"
    kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true
    # Across a cluster: two nodes over one PostgreSQL, half the sessions on each; the
    # sync runs on the first, the second hears it by LISTEN/NOTIFY.
    if ls -d /usr/lib/postgresql/*/bin >/dev/null 2>&1; then
        pgdir=$(mktemp -d /tmp/viewline-bench-pg.XXXXXX)
        local pg_url=""
        start_postgres "$pgdir"
        start_viewline --postgres "$pg_url" --remote-contacts "$contacts" --max-sessions $((sessions + 100)) --max-clients $((sessions + 100))
        local first=$port
        start_viewline --postgres "$pg_url" --remote-contacts "$contacts" --max-sessions $((sessions + 100)) --max-clients $((sessions + 100))
        read -r f50 f99 fmax <<< "$("$bin/viewline-bench" --port "$first" --other-ports "$port" --fanout "$sessions" --contacts-file "$contacts" --brief)"
        printf '%-44s p50 %s ms, p99 %s ms, max %s ms\n' "  same, 2 nodes on PostgreSQL ($((sessions / 2)) each)" "$f50" "$f99" "$fmax"
        note fanout_two_nodes "$f99"
        kill "${pids[-1]}" "${pids[-2]}"; wait "${pids[-1]}" "${pids[-2]}" 2>/dev/null || true
        $pg_stop >/dev/null 2>&1; rm -rf "$pgdir"; pg_stop="true"; pgdir=""
    fi
    rm -f "$contacts"
    # Issue #75's goals, each against the floor measured above.
    python3 benchmarks/against_floor.py "$summary"
}

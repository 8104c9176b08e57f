#!/usr/bin/env bash
# A failing save answered with `confirm` until it succeeds, driven through nc with a
# FIFO so the script can read each line and answer it. Needs a server with --admin.
#   ./save-until-ok.sh [port] [failures]
# Leaves nothing running: nc is stopped when the server says bye, when the server
# goes away first, and when the script is interrupted.
set -euo pipefail
PORT=${1:-7878}
FAILURES=${2:-2}
dir=$(mktemp -d)
mkfifo "$dir/to-server" "$dir/from-server"
# Two FIFOs: nc reads the first (read-only, so closing our end is its end of input)
# and writes the second, which this script reads line by line.
nc -N 127.0.0.1 "$PORT" < "$dir/to-server" > "$dir/from-server" &
nc_pid=$!
exec 3> "$dir/to-server" 4< "$dir/from-server"
finish() {
    exec 3>&- 4<&- 2>/dev/null || true
    # nc ends by itself once its input ends; make sure of it either way.
    for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$nc_pid" 2>/dev/null || break; sleep 0.1; done
    kill "$nc_pid" 2>/dev/null || true
    wait "$nc_pid" 2>/dev/null || true
    rm -rf "$dir"
}
trap finish EXIT
trap 'exit 130' INT TERM
trap '' PIPE  # a write after nc is gone fails (and ends the loop) instead of killing the script
send() { printf '%s\n' "$1" >&3; }

send "login alice wonderland"
send "draft notes from the netcat script"
send "fault save $FAILURES disk full"
send "save"
alerts=0
while true; do
    if ! IFS= read -r -t 2 line <&4; then
        # Quiet for 2 s: nc keeps running after the server hangs up (it waits for its
        # own input to end), so probe with a ping; once the connection is gone nc
        # fails to write it, exits, and the next read sees the end of its output.
        (($? > 128)) && send "ping" && continue
        break
    fi
    case "$line" in
        *'"type":"alert"'*)
            alerts=$((alerts + 1))
            echo "alert $alerts: $(printf '%s' "$line" | sed 's/.*"message":"\([^"]*\)".*/\1/')"
            send "confirm" ;;
        *'"view":"draft"'*'"pending":false'*)
            echo "saved after $alerts failed attempts"
            send "saved" ;;
        *'"drafts":'*)
            echo "remote store has: $(printf '%s' "$line" | sed 's/.*"drafts":\[{"text":"\([^"]*\)".*/\1/')"
            send "quit" ;;
        *'"type":"bye"'*) exit 0 ;;
    esac
done
echo "the server closed the connection" >&2
exit 1

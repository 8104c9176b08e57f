#!/usr/bin/env bash
# A failing save answered with `confirm` until it succeeds, driven through nc with a
# FIFO so the script can read each line and answer it. Needs a server with --admin.
#   ./save-until-ok.sh [port] [failures]
set -euo pipefail
PORT=${1:-7878}
FAILURES=${2:-2}
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
mkfifo "$dir/to-server"
exec 3<>"$dir/to-server"
coproc NC { nc 127.0.0.1 "$PORT" <&3; }
send() { printf '%s\n' "$1" >&3; }

send "login alice wonderland"
send "draft notes from the netcat script"
send "fault save $FAILURES disk full"
send "save"
alerts=0
while IFS= read -r line <&"${NC[0]}"; do
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
        *'"type":"bye"'*) break ;;
    esac
done
exec 3>&-

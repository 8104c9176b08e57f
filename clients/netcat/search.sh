#!/bin/sh
# Search with nothing but nc: send the command, ask the server to `wait` until the
# search is done, then quit. Prints the places found, one per line.
#   ./search.sh [port] [query...]
PORT=${1:-7878}; shift 2>/dev/null
QUERY=${*:-thai food}
printf 'search %s\nwait\nquit\n' "$QUERY" | nc -q 5 127.0.0.1 "$PORT" |
    grep '"loading":false' | tail -n 1 |
    python3 -c 'import json,sys
for place in json.loads(sys.stdin.read())["state"]["results"]:
    print("%-26s %-13s %.1f %-4s %s" % (place["name"], place["cuisine"], place["rating"], "$" * place["price"], place["address"]))'

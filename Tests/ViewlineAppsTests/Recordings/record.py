#!/usr/bin/env python3
"""Records the seed flows on a real viewline-server and exports each as a transcript.

    VIEWLINE_SERVER=.build/debug/viewline-server Tests/ViewlineAppsTests/Recordings/record.py [flow…]

Each flow runs on a fresh server with the inspector on (`--admin`), its backends
slowed (`--backend-latency`) so that typing outruns them as a person does; lines
are sent as a client sends them, without waiting for replies unless the flow says
`<quiet>` (wait until the server falls quiet). Then a second connection exports the
session (`export <session>`) into `<flow>.jsonl` beside this script, which
SeedFlowReplayTests replays against the current build.
"""
import json
import os
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SERVER = os.environ.get("VIEWLINE_SERVER", os.path.join(HERE, "../../../.build/debug/viewline-server"))
QUIET = "<quiet>"

FLOWS = {
    # Latest wins: three searches typed faster than the backend answers; only the last shows.
    "search": ["search t", "search th", "search thai", QUIET, "search ramen", QUIET, "state search"],
    # A save that re-asks until it works: the disk fails twice, each failure asks again.
    "drafts": [
        "login alice wonderland", QUIET, "draft meeting notes", "fault save 2 disk full", "save", QUIET, "confirm", QUIET,
        "confirm", QUIET, "saved", QUIET,
    ],
    # The view shows only what the database holds while a sync updates it; a failing sync changes nothing.
    "contacts": ["contacts", QUIET, "sync", QUIET, "fault sync 1 remote unreachable", "sync", QUIET, "confirm", QUIET, "state contacts"],
    # A flow that pauses for log-in (fields in an alert), then pages until complete.
    "playlist": [
        "playlist", QUIET, "confirm user=bob password=nope", QUIET, "confirm", QUIET, "playlist", QUIET,
        "confirm user=bob password=builder", QUIET, "more", QUIET, "more", QUIET,
    ],
}


def start():
    proc = subprocess.Popen(
        [SERVER, "--port", "0", "--db", ":memory:", "--admin", "--demo", "--backend-latency", "150", "--log-level", "error"],
        stdout=subprocess.PIPE)
    line = proc.stdout.readline().decode()
    return proc, int(line.rsplit(":", 1)[1])


def quiet(sock, quiet=0.5):
    """Reads until nothing comes for `quiet` seconds."""
    sock.settimeout(quiet)
    data = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            return data
        if not chunk:
            return data
        data += chunk


def export(port, session):
    sock = socket.create_connection(("127.0.0.1", port))
    reader = sock.makefile("rb")
    reader.readline()  # its own welcome
    sock.sendall(json.dumps({"id": 1, "cmd": "export", "args": {"session": session}}).encode() + b"\n")
    while True:
        message = json.loads(reader.readline())
        if message.get("type") == "reply" and message.get("re") == 1:
            if not message["ok"]:
                sys.exit(f"export failed: {message['error']}")
            return message["result"]["transcript"]


def record(name, lines):
    proc, port = start()
    try:
        sock = socket.create_connection(("127.0.0.1", port))
        welcome = json.loads(sock.makefile("rb").readline())
        for line in lines:
            if line == QUIET:
                quiet(sock)
            else:
                sock.sendall(line.encode() + b"\n")
        quiet(sock)
        transcript = export(port, welcome["session"])
        sock.close()
    finally:
        proc.terminate()
        proc.wait()
    with open(os.path.join(HERE, name + ".jsonl"), "w") as f:
        f.write(transcript)
    print(f"{name}: {transcript.count(chr(10)) - 1} steps", file=sys.stderr)


if __name__ == "__main__":
    for name, lines in FLOWS.items():
        if len(sys.argv) == 1 or name in sys.argv[1:]:
            record(name, lines)

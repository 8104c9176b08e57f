#!/usr/bin/env python3
"""Records the flow transcripts in this folder from a real viewline-server.

    VIEWLINE_SERVER=.build/debug/viewline-server protocol/vectors/transcripts/record.py

Each step sends one line and records what the server says until it falls quiet.
Fields that differ from run to run are replaced by "$any" (see README.md). Replayers
send a step's line only after every message the previous step expects arrived, which
makes the order of replies and events deterministic.
"""
import json
import os
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SERVER = os.environ.get("VIEWLINE_SERVER", os.path.join(HERE, "../../../.build/debug/viewline-server"))
VARYING = {"token", "savedAt"}

SCENARIOS = {
    "search": ("Search: loading first, then results; a failure keeps the old results and shows an OK alert; the same error twice is two alerts.", [
        "search golden", "fault search 2 places backend timed out", "search ramen", "confirm", "search pizza", "confirm a2", "state search",
    ]),
    "alerts": ("The alert queue and its errors, inline and JSON forms.", [
        "confirm", "fault search 2 boom", "search a", "search b", "cancel", "confirm a7", '{"id":"c1","cmd":"confirm","args":{"alert":"a1"}}', "confirm", "confirm",
    ]),
    "bad-input": ("Bad input gets stable error codes and the connection goes on.", [
        "teleport", "search", 'search "open', "{nope", '{"id":4}', '{"id":5,"cmd":"search","args":{"query":7}}', "state nowhere", "fault nothing", "more", "save", "ping", "quit",
    ]),
    "drafts": ("Drafts: a save failing twice then succeeding, then a discard.", [
        "draft too early", "login alice wonderland", "draft meeting notes", "fault save 2 disk full", "save", "confirm", "confirm", "saved",
        "draft scratch", "fault save", "save", "cancel", "state draft",
    ]),
    "contacts": ("Contacts: the view shows the database; a failing sync changes nothing.", [
        "contacts", "fault sync 1 remote unreachable", "sync", "confirm", "sync", "state contacts",
    ]),
    "playlist": ("Playlist: the login step with fields, then pages until complete; cancel drops the step.", [
        "playlist", "confirm user=bob password=nope", "confirm", "playlist", "confirm user=bob password=builder", "more", "logout", "playlist", "cancel", "more",
    ]),
}


def start():
    proc = subprocess.Popen([SERVER, "--port", "0", "--db", ":memory:", "--admin", "--demo", "--log-level", "error"], stdout=subprocess.PIPE)
    line = proc.stdout.readline().decode()
    return proc, int(line.rsplit(":", 1)[1])


def read_quiet(sock, buf, quiet=0.3):
    out = []
    sock.settimeout(quiet)
    while True:
        while b"\n" in buf:
            i = buf.index(b"\n")
            out.append(json.loads(bytes(buf[:i])))
            del buf[: i + 1]
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            return out
        if not chunk:
            return out
        buf += chunk


def mask(value):
    if isinstance(value, dict):
        return {k: ("$any" if k in VARYING else mask(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [mask(v) for v in value]
    return value


def record(name, description, lines):
    proc, port = start()
    try:
        sock = socket.create_connection(("127.0.0.1", port))
        buf = bytearray()
        steps = [{"expect": mask(read_quiet(sock, buf))}]
        for line in lines:
            sock.sendall(line.encode() + b"\n")
            steps.append({"send": line, "expect": mask(read_quiet(sock, buf))})
        sock.close()
    finally:
        proc.terminate()
        proc.wait()
    doc = {"description": description, "server_args": ["--admin"], "steps": steps}
    with open(os.path.join(HERE, name + ".json"), "w") as f:
        f.write("{\n")
        f.write('  "description": %s,\n  "server_args": ["--admin"],\n  "steps": [\n' % json.dumps(description))
        f.write(",\n".join("    " + json.dumps(step, ensure_ascii=False) for step in steps))
        f.write("\n  ]\n}\n")
    print(f"{name}: {len(steps)} steps", file=sys.stderr)


if __name__ == "__main__":
    for name, (description, lines) in SCENARIOS.items():
        if len(sys.argv) == 1 or name in sys.argv[1:]:
            record(name, description, lines)

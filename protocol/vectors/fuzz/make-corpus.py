#!/usr/bin/env python3
"""Writes the fuzzer's seed corpus: every line of the shared vectors and transcripts,
one file each, plus the crash reproducers kept in crashes/.

    protocol/vectors/fuzz/make-corpus.py OUTPUT_DIR
"""
import hashlib
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
VECTORS = os.path.dirname(HERE)


def lines():
    for name in ("inline.json", "json-commands.json"):
        with open(os.path.join(VECTORS, name)) as f:
            for vector in json.load(f)["vectors"]:
                yield vector["line"].encode("utf-8")
    transcripts = os.path.join(VECTORS, "transcripts")
    for name in sorted(os.listdir(transcripts)):
        if name.endswith(".json"):
            with open(os.path.join(transcripts, name)) as f:
                for step in json.load(f)["steps"]:
                    if "send" in step:
                        yield step["send"].encode("utf-8")
    # PROXY protocol headers as a trusted load balancer sends them (v1, v2 IPv4 and
    # IPv6 with a TLV, a LOCAL health check), each followed by a command.
    signature = b"\r\n\r\n\x00\r\nQUIT\n"
    yield b"PROXY TCP4 203.0.113.7 10.0.0.1 56324 7878\r\nping"
    yield b"PROXY TCP6 2001:db8::7 2001:db8::1 4711 443\r\nping"
    yield b"PROXY UNKNOWN\r\nping"
    yield signature + b"\x21\x11\x00\x0c" + bytes([203, 0, 113, 7, 10, 0, 0, 1, 0xDC, 0x04, 0x1E, 0xC6]) + b"ping"
    yield signature + b"\x21\x21\x00\x29" + bytes(32) + b"\x12\x67\x01\xbb" + b"\x01\x00\x02h2" + b"ping"
    yield signature + b"\x20\x00\x00\x00" + b"ping"
    crashes = os.path.join(HERE, "crashes")
    for name in sorted(os.listdir(crashes)) if os.path.isdir(crashes) else []:
        with open(os.path.join(crashes, name), "rb") as f:
            yield f.read()


def main() -> None:
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    count = 0
    for line in lines():
        for data in (line, line + b"\n", line + b"\r\n" + line + b"\n"):
            with open(os.path.join(out, hashlib.sha1(data).hexdigest()), "wb") as f:
                f.write(data)
            count += 1
    print(f"{count} seed inputs in {out}")


if __name__ == "__main__":
    main()

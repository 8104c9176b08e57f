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

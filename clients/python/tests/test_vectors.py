"""The shared vectors in protocol/vectors/: parsing and recorded transcripts."""
import json
import socket

import pytest

from conftest import COMMAND, PROTOCOL, Server, validate
from viewline import ViewlineError, quote, split
from viewline import errors

INLINE = json.loads((PROTOCOL / "vectors" / "inline.json").read_text())["vectors"]
JSON_COMMANDS = json.loads((PROTOCOL / "vectors" / "json-commands.json").read_text())["vectors"]
TRANSCRIPTS = sorted((PROTOCOL / "vectors" / "transcripts").glob("*.json"))


@pytest.mark.parametrize("vector", INLINE, ids=[v["line"] for v in INLINE])
def test_inline_vector_splits_as_the_server_splits(vector):
    """The client splits lines as the server does (``split``/``quote`` build lines);
    which arguments the words map to is the server's business, checked by sending
    each vector as a line with an id in ``test_inline_vectors_as_line_commands``."""
    if "words" in vector:
        assert split(vector["line"]) == vector["words"]
    elif vector.get("error") == "bad_syntax":
        with pytest.raises(ViewlineError) as caught:
            split(vector["line"])
        assert caught.value.code == "bad_syntax"


def test_inline_vectors_as_line_commands(server):
    """Every inline vector sent as ``{"id":…,"line":…}`` (what the clients send for
    ``command("…")``) gets the reply the vector promises: its error code, or no
    argument error at all."""
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    buf = bytearray()
    _lines(sock, buf, 1)
    for number, vector in enumerate(INLINE):
        if vector.get("cmd") == "quit":
            continue  # it would end the session the rest run in
        sock.sendall(json.dumps({"id": number, "line": vector["line"]}).encode() + b"\n")
        reply = _lines(sock, buf, 1)[0]
        while reply["type"] != "reply":
            reply = _lines(sock, buf, 1)[0]
        validate(reply)
        assert reply["re"] == number, vector["line"]
        code = None if reply["ok"] else reply["error"]["code"]
        if "error" in vector:
            assert code == vector["error"], (vector["line"], reply)
        else:
            # State-dependent failures (no alert to confirm, a quit that ends the
            # session) are the server's; what a vector promises is that the words parse.
            assert code not in ("bad_arguments", "bad_syntax", "unknown_command", "bad_request"), (vector["line"], reply)
    sock.close()


@pytest.mark.parametrize("word", ["plain", "two words", 'say "hi"', "back\\slash", "", "tab\there", "ラーメン"])
def test_quote_is_the_inverse_of_split(word):
    assert split("search " + quote(word)) == ["search", word]


def _lines(sock, buf, count):
    out = []
    while len(out) < count:
        while b"\n" in buf and len(out) < count:
            i = buf.index(b"\n")
            out.append(json.loads(bytes(buf[:i])))
            del buf[: i + 1]
        if len(out) < count:
            chunk = sock.recv(65536)
            assert chunk, "connection closed"
            buf += chunk
    return out


def test_json_command_vectors_against_the_server(server):
    """Each JSON-form vector sent to the real server gets the reply it promises."""
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    buf = bytearray()
    _lines(sock, buf, 1)
    for vector in JSON_COMMANDS:
        if vector.get("cmd") in ("wait",) or vector.get("cmd") == "confirm":
            continue  # these depend on session state; the Swift and transcript tests cover them
        sock.sendall(vector["line"].encode() + b"\n")
        replies = [m for m in _lines(sock, buf, 1)]
        reply = replies[0]
        while reply["type"] != "reply":
            reply = _lines(sock, buf, 1)[0]
        validate(reply)
        assert reply["re"] == vector["re"], vector["line"]
        if "error" in vector:
            assert reply["ok"] is False and reply["error"]["code"] == vector["error"], vector["line"]
        elif vector["cmd"] not in ("fault",):
            assert reply["ok"] is True, (vector["line"], reply)
    sock.close()


def _matches(actual, expected):
    if expected == "$any":
        return True
    if isinstance(expected, dict):
        return isinstance(actual, dict) and actual.keys() == expected.keys() and all(_matches(actual[k], v) for k, v in expected.items())
    if isinstance(expected, list):
        return isinstance(actual, list) and len(actual) == len(expected) and all(map(_matches, actual, expected))
    return actual == expected


@pytest.mark.parametrize("path", TRANSCRIPTS, ids=[p.stem for p in TRANSCRIPTS])
def test_transcript(path):
    doc = json.loads(path.read_text())
    server = Server(*doc["server_args"])
    try:
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        buf = bytearray()
        for step in doc["steps"]:
            if "send" in step:
                sock.sendall(step["send"].encode() + b"\n")
            got = _lines(sock, buf, len(step["expect"]))
            for actual, expected in zip(got, step["expect"]):
                validate(actual)
                assert _matches(actual, expected), f"after {step.get('send')!r}:\n got {actual}\nwant {expected}"
        sock.close()
    finally:
        server.stop()


@pytest.mark.parametrize("message", [
    {"type": "reply", "re": None, "ok": False, "error": {"code": "no_such_code", "message": "x"}},
    {"type": "display", "rev": 1, "view": "search", "state": {"query": "x", "results": []}},
    {"type": "alert", "rev": 2, "id": "a1", "title": "t", "message": "m", "actions": []},
    {"type": "telepathy"},
], ids=["unknown error code", "search state without loading", "alert without actions", "unknown type"])
def test_the_schemas_reject_what_the_protocol_forbids(message):
    with pytest.raises(AssertionError):
        validate(message)


def test_the_derived_commands_schema_agrees_with_every_json_vector():
    """protocol/schema/commands.schema.json (derived from the server's declarations)
    accepts exactly the JSON vectors the server parses."""
    import json
    import os
    from jsonschema import Draft202012Validator
    root = os.path.join(os.path.dirname(__file__), "..", "..", "..", "protocol")
    with open(os.path.join(root, "schema", "commands.schema.json")) as f:
        validator = Draft202012Validator(json.load(f))
    with open(os.path.join(root, "vectors", "json-commands.json")) as f:
        vectors = json.load(f)["vectors"]
    for vector in vectors:
        try:
            line = json.loads(vector["line"])
        except ValueError:
            continue
        valid = not list(validator.iter_errors(line))
        if isinstance(line, dict) and "line" in line and "cmd" not in line:
            # The line form: the schema checks its shape; its words only the server can.
            assert valid == (isinstance(line["line"], str) and set(line) <= {"id", "line"}), vector["line"]
        else:
            assert valid == ("cmd" in vector), vector["line"]


def test_final_bye_tables_are_the_schemas():
    """Which ``bye`` ends a session is one protocol fact, kept in bye.schema.json:
    the client's tables are that list, not a copy that can drift."""
    schema = json.loads((PROTOCOL / "schema" / "bye.schema.json").read_text())
    assert errors.FINAL_BYE_CODES == frozenset(schema["x-final-codes"])
    assert errors._FINAL_BYE_REASONS == frozenset(schema["x-final-reasons-before-1.1"])
    for code in schema["x-resumable-codes"] + ["a_code_from_a_later_server"]:
        assert not errors.bye_is_final({"type": "bye", "reason": "", "code": code})


def test_error_classes_are_the_schemas():
    """How a client acts on an error code (wait and retry, follow ``moved``, or not at
    all) is one protocol fact, kept in reply.schema.json's ``x-classes``."""
    schema = json.loads((PROTOCOL / "schema" / "reply.schema.json").read_text())
    classes = schema["properties"]["error"]["x-classes"]
    for code in schema["properties"]["error"]["properties"]["code"]["enum"]:
        error = errors.error_from_reply({"type": "reply", "re": None, "ok": False, "error": {"code": code, "message": ""}})
        assert error.code == code
        assert isinstance(error, errors.RetryLaterError) == (code in classes["retry-later"]), code
        assert isinstance(error, errors.ThrottledError) == (code in classes["throttled"]), code
        assert isinstance(error, errors.MovedError) == (code in classes["moved"]), code


def test_every_recorded_transcript_line_fits_the_transcript_schema():
    """The seed flows' recordings (Tests/ViewlineAppsTests/Recordings, made by a real
    server's `export`) are valid transcripts: a header first, then steps."""
    import glob
    import json
    import os
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource
    here = os.path.dirname(__file__)
    schemas = os.path.join(here, "..", "..", "..", "protocol", "schema")
    registry = Registry()
    for name in ("reply", "transcript"):
        with open(os.path.join(schemas, name + ".schema.json")) as f:
            schema = json.load(f)
        registry = registry.with_resource(schema["$id"], Resource.from_contents(schema))
    validator = Draft202012Validator(registry.contents("https://viewline.dev/protocol/1/transcript.schema.json"), registry=registry)
    files = sorted(glob.glob(os.path.join(here, "..", "..", "..", "Tests", "ViewlineAppsTests", "Recordings", "*.jsonl")))
    assert len(files) == 4
    for path in files:
        with open(path) as f:
            lines = [json.loads(line) for line in f if line.strip()]
        assert "transcript" in lines[0], path
        assert lines[0]["steps"] == len(lines) - 1, path
        for number, line in enumerate(lines, start=1):
            errors = list(validator.iter_errors(line))
            assert not errors, f"{os.path.basename(path)} line {number}: {errors[0].message}"
        # A step is never a header, and a header never a step.
        assert all("transcript" not in line for line in lines[1:]), path
    # What the schema refuses: a step of no known kind, an answer with two outcomes.
    assert list(validator.iter_errors({"teleport": 1}))
    assert list(validator.iter_errors({"answer": 1, "value": 1, "error": {"code": "x", "message": "y"}}))

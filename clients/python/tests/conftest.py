"""Fixtures: a real viewline-server on port 0, and schema validation of every message."""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
from typing import Iterator, List

import pytest
from jsonschema import Draft202012Validator

ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "clients" / "python"))
PROTOCOL = ROOT / "protocol"
SERVER = os.environ.get("VIEWLINE_SERVER", str(ROOT / ".build" / "debug" / "viewline-server"))


def _validator(name: str) -> Draft202012Validator:
    schemas = [json.loads(path.read_text()) for path in (PROTOCOL / "schema").glob("*.json")]
    schema = json.loads((PROTOCOL / "schema" / name).read_text())
    try:  # jsonschema >= 4.18
        from referencing import Registry, Resource
    except ImportError:  # older jsonschema, e.g. Debian 12's python3-jsonschema 4.10
        from jsonschema import RefResolver
        store = {s["$id"]: s for s in schemas}
        return Draft202012Validator(schema, resolver=RefResolver.from_schema(schema, store=store))
    registry = Registry().with_resources((s["$id"], Resource.from_contents(s)) for s in schemas)
    return Draft202012Validator(schema, registry=registry)


SERVER_MESSAGE = _validator("server-message.schema.json")
COMMAND = _validator("command.schema.json")


def validate(message: dict) -> None:
    """Fails the test if a server message does not match protocol/schema/."""
    errors = sorted(SERVER_MESSAGE.iter_errors(message), key=str)
    assert not errors, f"{message} does not match the schema: {errors[0].message}"


class Server:
    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [SERVER, "--port", "0", "--db", ":memory:", "--log-level", "error", "--demo", *args],
            stdout=subprocess.PIPE)
        line = self.proc.stdout.readline().decode()
        assert line.startswith("listening on "), line
        self.port = int(line.rsplit(":", 1)[1])

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server("--admin")
    yield s
    s.stop()


@pytest.fixture
def make_server() -> Iterator:
    started: List[Server] = []

    def make(*args: str) -> Server:
        s = Server(*args)
        started.append(s)
        return s

    yield make
    for s in started:
        s.stop()


@pytest.fixture
def client(server: Server):
    from viewline import Client
    with Client.connect(port=server.port, on_message=validate) as c:
        yield c


sys.path.insert(0, str(ROOT / "Tests" / "support"))
from throwaway_postgres import Postgres  # noqa: E402  (one starter for every Python test)


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    try:
        pg = Postgres()
    except RuntimeError as error:
        pytest.skip(str(error))
    yield pg
    pg.stop()

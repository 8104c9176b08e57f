"""The Python side of the one PostgreSQL starter (``Tests/support/postgres``), for the
client library's tests, the operations tests and the browser's cluster tests.

``Postgres()`` uses the server ``VIEWLINE_TEST_POSTGRES`` names (``dev test`` starts one for
every suite) and makes its databases there; ``Postgres(own=True)``, or no
``VIEWLINE_TEST_POSTGRES``, starts a server of its own (a test that stops the server to cut
nodes off their database needs one)."""
from __future__ import annotations

import os
import pathlib
import subprocess
import tempfile
from typing import Optional

SCRIPT = str(pathlib.Path(__file__).resolve().parent / "postgres")


def _run(*args: str) -> str:
    done = subprocess.run([SCRIPT, *args], check=False, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"postgres {args[0]}: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout.strip()


class Postgres:
    def __init__(self, own: bool = False) -> None:
        shared = os.environ.get("VIEWLINE_TEST_POSTGRES", "")
        self.dir: Optional[str] = None
        if shared and not own:
            self.url = shared
        else:
            self.dir = tempfile.mkdtemp(prefix="viewline-py-pg-")
            os.chmod(self.dir, 0o755)  # the server runs as `postgres` when we are root
            self.url = _run("start", self.dir)

    def start(self) -> None:
        """Starts the server again after ``halt()``."""
        assert self.dir, "only a server of its own can be restarted"
        _run("start", self.dir)

    def halt(self) -> None:
        """Stops the server, keeping its data (``start()`` brings it back)."""
        assert self.dir, "only a server of its own can be stopped"
        _run("stop", self.dir, "fast")

    def new_database(self) -> str:
        """A fresh database's URL."""
        return _run("createdb", self.url)

    def stop(self) -> None:
        """Stops and deletes a server of its own; leaves a shared one alone."""
        if self.dir:
            _run("remove", self.dir)

"""A throwaway PostgreSQL from Debian's packages, for Python tests (the client
library's, the operations tests'): its own data directory and a free loopback
port, as the ``postgres`` user when run as root (initdb refuses root)."""
from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from typing import List


class Postgres:
    def __init__(self) -> None:
        bins = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]))
        if not bins:
            raise RuntimeError("PostgreSQL is not installed (apt-get install postgresql)")
        self.bin = bins[-1]
        self.dir = tempfile.mkdtemp(prefix="viewline-py-pg-")
        self.as_pg: List[str] = []
        if os.getuid() == 0:
            shutil.chown(self.dir, "postgres", "postgres")
            self.as_pg = ["runuser", "-u", "postgres", "--"]
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self._run("initdb", "-D", f"{self.dir}/data", "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
        self.start()
        self._databases = 0

    def _run(self, program: str, *args: str) -> None:
        subprocess.run([*self.as_pg, f"{self.bin}/{program}", *args], check=True,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def start(self) -> None:
        self._run("pg_ctl", "-D", f"{self.dir}/data", "-l", f"{self.dir}/log", "-w", "-o",
                  f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off", "start")

    def halt(self) -> None:
        """Stops the server, keeping its data (start() brings it back)."""
        self._run("pg_ctl", "-D", f"{self.dir}/data", "-m", "fast", "-w", "stop")

    def new_database(self) -> str:
        """A fresh database's URL."""
        self._databases += 1
        name = f"py{os.getpid()}_{self._databases}"
        self._run("psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-qc", f"CREATE DATABASE {name}")
        return f"postgres://postgres@127.0.0.1:{self.port}/{name}?sslmode=disable"

    def stop(self) -> None:
        self._run("pg_ctl", "-D", f"{self.dir}/data", "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.dir, ignore_errors=True)

"""A node behind PgBouncer in transaction mode (Debian's 1.18): refused, and said why.

A node's safety rests on limits the database enforces for it — no statement runs
longer than its deadline, none goes on once the node gave up on it — which it asks
for at connect (startup parameters). PgBouncer refuses those parameters; told to
ignore them, it drops them. Either way the node stops at start with an error that
names the pooler and the fix (connect directly), rather than waiting forever or
serving without its limits. docs/deploying.md says why transaction pooling is not
supported beyond that (advisory locks held across statements, `LISTEN`)."""
from __future__ import annotations

import os
import pathlib
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from typing import Iterator, Tuple
from urllib.parse import urlparse

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SERVER = os.environ.get("VIEWLINE_SERVER", str(ROOT / ".build" / "debug" / "viewline-server"))
sys.path.insert(0, str(ROOT / "Tests" / "support"))
from throwaway_postgres import Postgres  # noqa: E402

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def database() -> Iterator[str]:
    postgres = Postgres()
    yield postgres.new_database()
    postgres.stop()


def pgbouncer(database_url: str, ignore_limits: bool) -> Iterator[str]:
    if not os.path.exists(PGBOUNCER):
        pytest.skip("pgbouncer is not installed (apt-get install pgbouncer)")
    target = urlparse(database_url)
    # Not under tmp_path: PgBouncer refuses to run as root, and `postgres` cannot enter
    # pytest's 0700 directories.
    directory = pathlib.Path(tempfile.mkdtemp(prefix="viewline-pgbouncer-"))
    os.chmod(directory, 0o755)
    port = free_port()
    ignored = "extra_float_digits"
    if ignore_limits:
        ignored += ",statement_timeout,lock_timeout,idle_in_transaction_session_timeout,client_connection_check_interval"
    (directory / "pgbouncer.ini").write_text(f"""[databases]
* = host={target.hostname} port={target.port} user={target.username}
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = any
pool_mode = transaction
ignore_startup_parameters = {ignored}
logfile = {directory}/pgbouncer.log
pidfile = {directory}/pgbouncer.pid
""")
    command = [PGBOUNCER, str(directory / "pgbouncer.ini")]
    if os.geteuid() == 0:
        shutil.chown(directory, "postgres", "postgres")
        command = ["runuser", "-u", "postgres", "--", *command]
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert process.poll() is None and time.monotonic() < deadline, "pgbouncer did not start"
            time.sleep(0.1)
    yield f"postgres://{target.username}@127.0.0.1:{port}{target.path}?sslmode=disable"
    process.terminate()
    process.wait(10)
    shutil.rmtree(directory, ignore_errors=True)


def start_node(url: str) -> Tuple[int, str]:
    """Runs a node on `url` until it exits (within 30 s): its exit status and log."""
    done = subprocess.run([SERVER, "--port", "0", "--postgres", url, "--node-timeout", "2", "--log-level", "info"],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
    assert not done.stdout.startswith("listening on"), "the node served behind the pooler"
    return done.returncode, done.stderr


def test_pgbouncer_as_it_comes_refuses_the_nodes_limits_and_the_node_says_so(database: str) -> None:
    for url in pgbouncer(database, ignore_limits=False):
        status, log = start_node(url)
        assert status != 0
        assert "unsupported startup parameter" in log, log[-2000:]
        assert "connect the nodes to PostgreSQL directly" in log, log[-2000:]


def test_the_refusal_is_heard_through_a_url_listing_several_servers(database: str) -> None:
    for url in pgbouncer(database, ignore_limits=False):
        # A member that does not answer first, then the pooler.
        listed = url.replace("@127.0.0.1:", "@127.0.0.1:1,127.0.0.1:", 1)
        status, log = start_node(listed)
        assert status != 0
        assert "unsupported startup parameter" in log, log[-2000:]


def test_pgbouncer_that_drops_the_limits_is_refused_at_start(database: str) -> None:
    for url in pgbouncer(database, ignore_limits=True):
        status, log = start_node(url)
        assert status != 0
        assert "do not carry the node's server-side limits" in log, log[-2000:]
        assert "statement_timeout is 0, not 1800" in log, log[-2000:]


def test_the_same_database_directly_serves(database: str) -> None:
    process = subprocess.Popen([SERVER, "--port", "0", "--postgres", database, "--node-timeout", "2"],
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        line = process.stdout.readline().decode()
        assert line.startswith("listening on "), line
    finally:
        process.terminate()
        process.wait(20)

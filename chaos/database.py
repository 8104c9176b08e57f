"""PostgreSQL from this run's side, through psql: statements the checks and the
faults send (read back as lines), and a transaction that holds tables in EXCLUSIVE
mode for a while so every write queues behind it."""
from __future__ import annotations

import subprocess
from typing import List


def hold_tables(args, tables: str, seconds: float) -> subprocess.Popen:
    """A psql that takes `tables` in EXCLUSIVE mode (reads go on, every write queues
    behind it) for `seconds`, then lets go; wait() on it."""
    return subprocess.Popen(
        args.psql + ["-Atc", f"BEGIN; LOCK TABLE {tables} IN EXCLUSIVE MODE; SELECT pg_sleep({seconds:.2f}); COMMIT;"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def psql(args, sql: str) -> List[str]:
    # The statement goes in on standard input: a long run's checks list thousands of
    # tokens, past what one command-line argument may hold.
    out = subprocess.run(args.psql + ["-At", "-v", "ON_ERROR_STOP=1", "-f", "-"], input=sql, capture_output=True, text=True,
                         check=True).stdout
    return [line for line in out.splitlines() if line]

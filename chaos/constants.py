"""The run's numbers and its clock: the node timeout every node runs with, how long a
command may go unanswered, the fault kinds, the bounds the checks hold the cluster
to (liveness, recovery windows, the slack of log lines time-stamped as read), and
`now()`, the one monotonic time base that faults, violations, the serve log and the
clients' journals are all measured on."""
from __future__ import annotations

import time
from typing import List

NODE_TIMEOUT = 2.0          # seconds: --node-timeout of every node
COMMAND_TIMEOUT = 6.0       # a command unanswered this long: the connection is dropped
USER_GENERATIONS = 6         # users per client, taking turns
FAULT_KINDS = ["kill", "quitkill", "pause", "partition", "slow", "heldwrites", "postgres", "term", "heldrecords",
               "silent", "rowlock", "slowrenew", "bigrecords", "node-clock-step", "db-clock-step", "upgrade"]
# Injected only when asked for (--faults), or by the run they need: `failover` with
# --ha-postgres (which leaves out `postgres` and `db-clock-step`: Patroni restarts its
# members itself, and they run without libfaketime). (`db-clock-step` was opt-in while
# a +2-day step of the database's clock lost idle sessions handed over by a SIGTERM.)
OPT_IN_FAULT_KINDS: List[str] = ["failover"]
HA_POSTGRES_EXCLUDED = ["postgres", "db-clock-step"]
JOURNAL_LENGTH = 5000       # commands each client's journal keeps
LIVENESS_BOUND = NODE_TIMEOUT   # an unrelated session refused longer than this is a violation
RECOVERY_WINDOW = 2 * NODE_TIMEOUT + 0.5   # after a fault, its node may refuse this long
LONG_RECOVERY = 30.0        # seconds without a success: the report shows what failed meanwhile
TRAIL_LENGTH = 12           # the last failures kept per client while it fails
TOLERANCE = 0.2             # log lines are time-stamped as read: scheduling slack
PAUSED_LINES = 1.0          # a SIGCONTed node's lines written before its SIGSTOP arrive within this
SIGTERM_BURST = 1.0         # seconds of back-to-back searches on a node before its SIGTERM
# A node steps down once its records are two node timeouts behind (and its lease loop
# notices, every fifth of one): a fault this long before a step-down may have caused it.
STEP_DOWN_WINDOW = 2 * NODE_TIMEOUT + NODE_TIMEOUT / 5 + TOLERANCE


def now() -> float:
    return time.monotonic()

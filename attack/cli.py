"""The command line (what `./dev attack` and attack_run pass): the flags, then the
streams phase against the server given (--port/--web-port/--pid) and the other
phases, each on a server of its own started from --bin."""
from __future__ import annotations

import argparse
import resource
import time

from . import __doc__ as OVERVIEW
from . import prober
from .attaches import attach_storm, dead_tokens
from .output import fanout, amplification
from .pipelining import pipelining
from .places import nofile, registry
from .prober import Prober
from .streams import KINDS, streams


# The phases besides the stream fuzzer: each starts a server of its own (from --bin,
# with the flags its bound needs), attacks it in one way for --phase-seconds, prints
# what it measured in the style of the streams report and returns how many bounds
# failed. Sizes are a smoke's by default; the flags give more.

PHASES = ["streams", "fanout", "pipelining", "attach-storm", "registry", "nofile", "dead-tokens", "amplification"]


def main() -> int:
    parser = argparse.ArgumentParser(description=OVERVIEW, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, help="the server the streams phase attacks")
    parser.add_argument("--web-port", type=int)
    parser.add_argument("--pid", type=int)
    parser.add_argument("--seconds", type=float, default=20, help="the streams phase's length")
    parser.add_argument("--connections", type=int, default=40)
    parser.add_argument("--budget-kib", type=int, default=2048, help="RSS growth allowed per attacking connection")
    parser.add_argument("--p99-ms", type=float, default=5.0)
    parser.add_argument("--storm-p99-ms", type=float, default=None,
                        help="the probe's p99 bound during the attach storm (default: --p99-ms)")
    parser.add_argument("--rate-mb", type=float, default=50.0, help="the attack's total send rate, MB/s")
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--nice", type=int, default=0, help="the generator's niceness (the probe's stays 0)")
    parser.add_argument("--kinds", default=",".join(KINDS), help="which attacks, comma-separated")
    more = parser.add_argument_group("the other phases (each on a server of its own, started from --bin)")
    more.add_argument("--phases", default="all", help=f"comma-separated, of {','.join(PHASES)}; all by default")
    more.add_argument("--bin", help="the viewline-server binary; without it only the streams phase runs")
    more.add_argument("--phase-seconds", type=float, default=2.0, help="each other phase's attack, in seconds")
    more.add_argument("--fanout-connections", type=int, default=96, help="readers that never read")
    more.add_argument("--fanout-batch", type=int, default=8, help="searches a driver keeps in flight")
    more.add_argument("--output-per-address-mib", type=int, default=64,
                      help="the server's --max-output-bytes-per-address, MiB (its default)")
    more.add_argument("--allowance-kib", type=int, default=64,
                      help="fanout: RSS allowed per connection besides the per-address output budget")
    more.add_argument("--session-cap", type=int, default=32, help="the server's --max-connections-per-session")
    more.add_argument("--pipeline-connections", type=int, default=40,
                      help="connections that pipeline 1,000 requests on the operations listener (2,000: a tenth as many on the web one)")
    more.add_argument("--pipeline-budget-kib", type=int, default=1024, help="RSS allowed per HTTP connection")
    more.add_argument("--attach-rate", type=int, default=100, help="the server's --max-attaches-per-second")
    more.add_argument("--registry-sessions", type=int, default=50, help="the registry phase's --max-sessions")
    more.add_argument("--amplification-lines", type=int, default=50, help="lines sent per amplification row")
    more.add_argument("--line-cpu-ms", type=float, default=20.0, help="the most server CPU one amplifying line may cost, ms")
    more.add_argument("--postgres", help="PostgreSQL for the dead-tokens phase (default: $VIEWLINE_TEST_POSTGRES)")
    more.add_argument("--dead-tokens", type=int, default=200, help="quit sessions whose tokens the dead-tokens phase replays")
    more.add_argument("--nofile-fill", type=int, default=0,
                      help="connections at most one address opens in the descriptor phase (0: its cap and one more)")
    args = parser.parse_args()
    phases = PHASES if args.phases == "all" else [p.strip() for p in args.phases.split(",") if p.strip()]
    unknown = [p for p in phases if p not in PHASES]
    if unknown:
        parser.error(f"unknown phases {', '.join(unknown)} (of {', '.join(PHASES)})")
    if "streams" in phases and (args.port is None or args.pid is None):
        parser.error("the streams phase needs --port and --pid")
    # The phases open many connections (fanout, descriptor limit): as many as the hard limit allows.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if ("attach-storm" in phases or "dead-tokens" in phases) and args.bin:
        prober.PROBER = Prober()
    failures = 0
    if "streams" in phases:
        failures += streams(args)
    others = {"fanout": fanout, "pipelining": pipelining, "attach-storm": attach_storm, "registry": registry,
              "nofile": nofile, "dead-tokens": dead_tokens, "amplification": amplification}
    for name in [p for p in phases if p != "streams"]:
        if not args.bin:
            print(f"{name}: skipped (no --bin to start its server from)")
            continue
        try:
            failures += others[name](args)
        except (OSError, RuntimeError, ValueError, KeyError, TypeError) as error:
            print(f"FAIL: {name}: {type(error).__name__}: {error} (seed {args.seed})")
            failures += 1
    if prober.PROBER:
        prober.PROBER.stop()
    return 1 if failures else 0

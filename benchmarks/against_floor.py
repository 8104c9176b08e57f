#!/usr/bin/env python3
"""Prints issue #75's goals against the floor measured in the same `./dev bench` run.

Input: the file `./dev bench` fills as it goes, one `KEY VALUE...` a line:
`rate_default_1`, `rate_one_50x16`, `rate_floor_50` … (commands/s), `cpu_ping`,
`cpu_state`, `cpu_floor` (server CPU µs per command), `idle`, `idle_floor` (KiB),
`fanout RUN SESSIONS P99-MS CPU-MS` and `fanout_floor …` per run, `fanout_two_nodes
P99-MS`, `detached COUNT KIB-EACH STATE-BYTES ATTACH-P99-µs RSS-KiB`, `expiry
LONGEST-MS P99.99-MS BASELINE-LONGEST-MS BASELINE-P99.99-MS`, `open_loop RUN SHARE P99-µs LAG-P99-µs` per share and run.
A figure the run did not measure (redis or PostgreSQL missing) is said to be missing.
Standard library only: `./dev bench` runs it on a fresh machine.
"""
import statistics
import sys


def read(path: str) -> tuple[dict[str, str], dict[str, list[list[float]]]]:
    single: dict[str, str] = {}
    rows: dict[str, list[list[float]]] = {}
    with open(path) as source:
        for line in source:
            parts = line.split()
            if len(parts) < 2:
                continue
            key, values = parts[0], parts[1:]
            if key in ("fanout", "fanout_floor", "open_loop", "detached", "expiry"):
                try:
                    rows.setdefault(key, []).append([float(v) for v in values])
                except ValueError:
                    continue
            else:
                single[key] = values[0]
    return single, rows


def number(single: dict[str, str], key: str) -> float | None:
    try:
        return float(single[key])
    except (KeyError, ValueError):
        return None


def verdict(met: bool) -> str:
    return "met" if met else "NOT MET"


def main() -> None:
    single, rows = read(sys.argv[1])
    print()
    print("Issue #75, against the floor of this run")

    # 1. Throughput: Viewline's best of its default loops and one loop, over the floor (one loop).
    ratios = []
    for load, label in (("1", "1 connection"), ("50", "50 connections"), ("50x16", "50 x 16")):
        best = max(
            (r for r in (number(single, f"rate_default_{load}"), number(single, f"rate_one_{load}")) if r is not None),
            default=None,
        )
        floor = number(single, f"rate_floor_{load}")
        if best is None or not floor:
            ratios.append(f"{label} missing")
            continue
        ratio = best / floor
        ratios.append(f"{label} {ratio:.2f} ({verdict(ratio >= 0.9)})")
    print(f"  1. throughput of the floor's (goal >= 0.90): {'; '.join(ratios)}")

    # 2. CPU per command over the floor's line.
    ping, state, floor = number(single, "cpu_ping"), number(single, "cpu_state"), number(single, "cpu_floor")
    if None in (ping, state, floor):
        print("  2. CPU per command over the floor: missing")
    else:
        print(
            f"  2. CPU per command over the floor: ping {ping - floor:+.2f} µs (goal <= 0.5, {verdict(ping - floor <= 0.5)}); "
            f"state search {state - floor:+.2f} µs (goal <= 1.5, {verdict(state - floor <= 1.5)})"
        )

    # 3. Fan-out, run by run against the floor's run beside it.
    viewline_runs, floor_runs = rows.get("fanout", []), rows.get("fanout_floor", [])
    one_node_p99 = []
    for v, f in zip(viewline_runs, floor_runs):
        run, sessions, v99, vcpu = v
        _, _, f99, fcpu = f
        per_display, floor_per_display = vcpu * 1000 / sessions, fcpu * 1000 / sessions
        cpu_met = per_display <= floor_per_display + 3
        p99_met = v99 <= 1.25 * f99
        one_node_p99.append(v99)
        print(
            f"  3. fan-out to {sessions:.0f}, run {run:.0f}: {per_display:.1f} µs CPU a display against the floor's "
            f"{floor_per_display:.1f} (goal <= +3, {verdict(cpu_met)}); p99 {v99:.1f} ms against "
            f"{f99:.1f} (goal <= 1.25 x, {verdict(p99_met)})"
        )
    two = number(single, "fanout_two_nodes")
    if two is not None and one_node_p99:
        one = statistics.median(one_node_p99)
        print(f"     two nodes p99 {two:.1f} ms against one node's {one:.1f} (goal <= 1.5 x, {verdict(two <= 1.5 * one)})")
    elif not viewline_runs:
        print("  3. fan-out: missing")

    # 4. Memory.
    idle, idle_floor = number(single, "idle"), number(single, "idle_floor")
    if idle is not None and idle_floor is not None:
        print(
            f"  4. an idle session {idle:.2f} KiB against the floor's connection {idle_floor:.2f} + 1 "
            f"({verdict(idle <= idle_floor + 1)})"
        )
    for count, each, state_bytes, _, _ in rows.get("detached", []):
        allowed = 1 + state_bytes / 1024
        print(
            f"     a detached session {each:.2f} KiB against 1 KiB + its states' {state_bytes:.0f} encoded bytes = "
            f"{allowed:.2f} ({verdict(each <= allowed)}; {count:.0f} held)"
        )

    # 5. A million detached sessions.
    expiry = rows.get("expiry", [[]])[-1]
    for count, _, _, attach_p99, rss in rows.get("detached", []):
        longest = expiry[0] if expiry else None
        if count < 1_000_000:
            print(f"  5. {count:.0f} detached sessions, not a million (VIEWLINE_BENCH_DETACHED=1000000 for the row)")
            continue
        gib = rss / 1024 / 1024
        print(
            f"  5. a million detached: {gib:.2f} GiB (goal < 3, {verdict(gib < 3)}); attach p99 {attach_p99 / 1000:.2f} ms "
            f"(goal < 1, {verdict(attach_p99 < 1000)}); longest ping while they expire "
            + (
                f"{longest:.1f} ms (goal <= 10, {verdict(longest <= 10)}; p99.99 {expiry[1]:.2f} ms; "
                f"the same pings with nothing expiring: longest {expiry[2]:.1f} ms, p99.99 {expiry[3]:.2f} ms)"
                if longest is not None
                else "missing"
            )
        )

    # 6. Open loop: a run counts when its generator kept up (lag p99 <= 1 ms).
    runs: dict[int, dict[int, tuple[float, float]]] = {}
    for run, share, p99, lag in rows.get("open_loop", []):
        runs.setdefault(int(run), {})[int(share)] = (p99, lag)
    for run, shares in sorted(runs.items()):
        said = []
        for share, goal_ms in ((50, 2), (75, 10)):
            if share not in shares:
                continue
            p99, lag = shares[share]
            counts = lag <= 1000
            said.append(
                f"{share} % p99 {p99 / 1000:.2f} ms (goal < {goal_ms}, "
                + (verdict(p99 < goal_ms * 1000) if counts else f"does not count: the generator lagged {lag / 1000:.2f} ms")
                + ")"
            )
        print(f"  6. open loop, run {run}: {'; '.join(said)}")


if __name__ == "__main__":
    main()

"""The operations listener (`--metrics-port`) of the real server: `/metrics`
parsed with prometheus_client's own text parser, checked to move by exactly what a
scripted session did; `/healthz` and `/readyz`."""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import urllib.error
import urllib.request
from typing import Dict, Tuple

import pytest
from prometheus_client.parser import text_string_to_metric_families

ROOT = pathlib.Path(__file__).resolve().parents[2]
SERVER = os.environ.get("VIEWLINE_SERVER", str(ROOT / ".build" / "debug" / "viewline-server"))
sys.path.insert(0, str(ROOT / "Tests" / "support"))
from line_client import LineClient  # noqa: E402
from throwaway_postgres import Postgres  # noqa: E402


@pytest.fixture
def server():
    process = subprocess.Popen(
        [SERVER, "--port", "0", "--metrics-port", "0", "--db", ":memory:", "--demo", "--admin", "--log-level", "error"],
        stdout=subprocess.PIPE)
    port = int(process.stdout.readline().decode().rsplit(":", 1)[1])
    metrics = process.stdout.readline().decode().split()[-1]
    assert metrics.startswith("http://") and metrics.endswith("/metrics")
    yield port, metrics.rsplit("/", 1)[0]
    process.terminate()
    process.wait(10)


def scrape(base: str) -> Dict[Tuple[str, Tuple[Tuple[str, str], ...]], float]:
    with urllib.request.urlopen(base + "/metrics", timeout=5) as response:
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = response.read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        assert family.name.startswith("viewline_"), family.name
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def status(url: str) -> Tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_every_counter_moves_by_exactly_what_was_done(server):
    port, base = server
    before = scrape(base)
    a = LineClient(port)
    assert a.command("search pizza")["ok"]
    a.until(lambda m: m.get("view") == "search" and not m["state"]["loading"])
    assert a.command("login alice nope")["error"]["code"] == "login_failed"
    assert a.command("login alice wonderland")["ok"]
    assert a.command("fault save 1 disk full")["ok"]
    assert a.command("draft metrics")["ok"]
    assert a.command("save")["ok"]
    alert = a.until(lambda m: m["type"] == "alert")
    assert a.command(f"cancel {alert['id']}")["ok"]
    assert a.command("bogus")["error"]["code"] == "unknown_command"
    b = LineClient(port)
    assert b.command(f"attach {a.welcome['token']}")["ok"]
    # Counted right after the reply is written: a scrape may come first, once.
    import time
    deadline = time.monotonic() + 2
    after = scrape(base)
    while after.get(("viewline_sessions_attached_total", ()), 0) == before.get(("viewline_sessions_attached_total", ()), 0) \
            and time.monotonic() < deadline:
        time.sleep(0.02)
        after = scrape(base)

    def moved(name: str, **labels) -> float:
        key = (name, tuple(sorted(labels.items())))
        return after.get(key, 0) - before.get(key, 0)

    expected = {
        ("search", "ok"): 1, ("login", "login_failed"): 1, ("login", "ok"): 1, ("fault", "ok"): 1,
        ("draft", "ok"): 1, ("save", "ok"): 1, ("cancel", "ok"): 1, ("unknown", "unknown_command"): 1,
        ("attach", "ok"): 1,
    }
    for (command, outcome), count in expected.items():
        assert moved("viewline_commands_total", command=command, outcome=outcome) == count, (command, outcome)
    total = sum(v - before.get(k, 0) for k, v in after.items() if k[0] == "viewline_commands_total")
    assert total == sum(expected.values())
    assert moved("viewline_command_duration_seconds_count", command="search") == 1
    assert moved("viewline_command_duration_seconds_count", command="login") == 2
    assert moved("viewline_events_sent_total", type="alert") == 1
    assert moved("viewline_events_sent_total", type="dismiss") == 1
    assert moved("viewline_connections_opened_total", transport="tcp") == 2
    assert moved("viewline_sessions_created_total") == 2
    assert moved("viewline_sessions_attached_total") == 1
    assert moved("viewline_bytes_written_total") > 0
    assert after[("viewline_connections", (("transport", "tcp"),))] == 2
    assert after[("viewline_output_backlog_connections", ())] == 0  # both clients read what they are sent
    assert after[("viewline_output_backlog_bytes", ())] == 0
    assert after[("viewline_sessions", (("state", "attached"),))] == 1  # b's own session ended when it left
    assert after[("viewline_process_resident_memory_bytes", ())] > 1_000_000
    assert after[("viewline_process_open_fds", ())] > 3


def test_health_and_readiness(server):
    _, base = server
    assert status(base + "/healthz") == (200, "ok\n")
    assert status(base + "/readyz") == (200, "ready\n")
    assert status(base + "/nothing")[0] == 404


def test_readyz_is_503_while_the_database_is_down_and_200_when_it_is_back():
    import time
    pg = Postgres(own=True)  # it halts the server
    process = None
    try:
        process = subprocess.Popen(
            [SERVER, "--port", "0", "--metrics-port", "0", "--postgres", pg.new_database(), "--node-timeout", "2",
             "--demo", "--admin", "--log-level", "error"], stdout=subprocess.PIPE)
        process_port = process.stdout.readline().decode().rsplit(":", 1)[1]
        base = process.stdout.readline().decode().split()[-1].rsplit("/", 1)[0]
        assert status(base + "/readyz") == (200, "ready\n")
        # The stores' and flows' figures land in the same /metrics (swift-metrics bootstrapped).
        port = int(process_port)
        client = LineClient(port)
        assert client.command("login alice wonderland")["ok"]
        assert client.command("draft kept")["ok"]
        assert client.command("sync")["ok"]
        client.command("wait")
        time.sleep(0.5)  # a record batch
        samples = scrape(base)
        assert samples[("viewline_store_calls_total", (("outcome", "ok"), ("store", "postgresql")))] > 0
        assert samples[("viewline_store_call_duration_seconds_count", (("store", "postgresql"),))] > 0
        assert samples[("viewline_contacts_syncs_total", ())] == 1
        assert samples[("viewline_contacts_fetches_total", ())] == 1
        assert samples[("viewline_cluster_records_per_batch_count", ())] > 0
        assert samples[("viewline_cluster_lease_valid", ())] == 1
        assert samples[("viewline_cluster_nodes_live", ())] == 1  # this node, alone
        cluster = client.command("info")["result"]["cluster"]
        assert cluster["liveNodes"] == 1 and [node["node"] for node in cluster["nodes"]] == [cluster["node"]]
        assert cluster["nodes"][0]["address"].endswith(":" + process_port.strip())
        # What the node runs, for a rolling deploy: its release and its record versions.
        assert cluster["release"] == cluster["nodes"][0]["release"] == "viewline/1.3"
        assert cluster["nodes"][0]["records"]["search"] == 1
        assert 0 <= cluster["recordLagSeconds"] < 2  # written within the node timeout

        def wait_for(code: int) -> str:
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                got, body = status(base + "/readyz")
                if got == code:
                    return body
                time.sleep(0.1)
            raise AssertionError(f"/readyz never answered {code}")

        pg.halt()
        assert "unavailable" in wait_for(503)
        assert status(base + "/healthz")[0] == 200  # alive, just not ready
        pg.start()
        assert wait_for(200) == "ready\n"
    finally:
        if process:
            process.terminate()
            process.wait(10)
        pg.stop()


def test_info_groups_the_figures_and_slowlog_names_commands_never_arguments():
    process = subprocess.Popen(
        [SERVER, "--port", "0", "--metrics-port", "0", "--db", ":memory:", "--demo", "--admin", "--log-level", "error",
         "--slow-command-ms", "0"], stdout=subprocess.PIPE)
    try:
        port = int(process.stdout.readline().decode().rsplit(":", 1)[1])
        process.stdout.readline()
        a = LineClient(port)
        assert a.command("login alice wonderland")["ok"]
        assert a.command("search pizza")["ok"]
        info = a.command("info")["result"]
        assert set(info) == {"server", "clients", "sessions", "commands", "latency", "cluster"}
        # Every command's latency as one cumulative histogram: login and search so far.
        latency = info["latency"]
        assert len(latency["cumulative"]) == len(latency["bucketsSeconds"]) + 1
        assert latency["cumulative"] == sorted(latency["cumulative"]) and latency["cumulative"][-1] == 2
        assert latency["bucketsSeconds"][0] == 0.0001
        assert info["clients"]["connected"] == 1 and info["clients"]["byTransport"]["tcp"] == 1
        assert info["clients"]["outputBacklog"] == {"connections": 0, "bytes": 0}  # every client keeps up
        assert info["sessions"]["live"] == 1 and info["sessions"]["attached"] == 1
        assert info["commands"]["login"] == {"ok": 1} and info["commands"]["search"] == {"ok": 1}
        assert info["cluster"] is None
        assert info["server"]["uptimeSeconds"] >= 0 and info["server"]["residentBytes"] > 0
        slow = a.command("slowlog 3")["result"]
        assert slow["thresholdMs"] == 0
        assert [entry["command"] for entry in slow["entries"]] == ["info", "search", "login"]
        assert "wonderland" not in json.dumps(slow)
        assert a.command("slowlog 0")["error"]["code"] == "bad_arguments"
    finally:
        process.terminate()
        process.wait(10)

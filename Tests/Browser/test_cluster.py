"""The page in a cluster: opened on one node for a session another node owns, it
follows `moved` over WebSocket to that node's page (each node lists the other's
page origin with --web-origin) and drives the session there."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest
from selenium.webdriver.common.by import By

from conftest import ROOT, SERVER, free_port
from test_page import join_offered_session, run, status, view, wait

sys.path.insert(0, str(ROOT / "Tests" / "support"))
from line_client import LineClient  # noqa: E402
from throwaway_postgres import Postgres  # noqa: E402


@pytest.fixture
def two_nodes():
    try:
        pg = Postgres()
    except RuntimeError as error:
        pytest.skip(str(error))
    url = pg.new_database()
    ports = {name: free_port() for name in ("a", "a_web", "b", "b_web")}
    origins = {name: f"http://127.0.0.1:{ports[name + '_web']}" for name in ("a", "b")}
    processes = []
    for name, other in (("a", "b"), ("b", "a")):
        process = subprocess.Popen(
            [SERVER, "--port", str(ports[name]), "--web-port", str(ports[name + "_web"]), "--postgres", url,
             "--web-origin", origins[other], "--demo", "--log-level", "warning"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert process.stdout.readline().startswith(b"listening on")
        assert process.stdout.readline().startswith(b"web on")
        processes.append(process)
    yield ports, origins
    for process in processes:
        process.terminate()
        process.wait(10)
    pg.stop()


def test_the_page_follows_moved_to_the_node_that_owns_the_session(page, two_nodes):
    ports, origins = two_nodes
    owner = LineClient(ports["a"])
    assert owner.command("login alice wonderland")["ok"]
    time.sleep(0.5)  # the session's record is written in the next batch
    page.get(f"{origins['b']}/#attach={owner.welcome['token']}")
    join_offered_session(page)
    wait(page, lambda: "alice" in view(page, "session").text)
    assert status(page) == "connected"
    # Commands from the page run in the session on node A: its TCP client sees them.
    run(page, "search", query="pizza")
    shown = owner.until(lambda m: m.get("type") == "display" and m["view"] == "search"
                        and m["state"]["query"] == "pizza" and not m["state"]["loading"])
    assert shown["state"]["results"]
    section = view(page, "search")
    wait(page, lambda: section.find_elements(By.CSS_SELECTOR, "table tbody tr"))

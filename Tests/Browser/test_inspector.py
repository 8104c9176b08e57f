"""The inspector at /inspect (docs/inspector.md), in headless Chromium: a session
driven over TCP appears, its search timeline shows the `loading` → results diff, an
earlier rev shows the earlier state, the charts follow the node, the page passes
axe-core and works by keyboard alone; a server without --admin serves none of it."""
from __future__ import annotations

import subprocess
import time
import urllib.error
import urllib.request

from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from conftest import SERVER, Server, free_port
from test_accessibility import assert_clean
from test_page import named, status, wait


def inspector(page, server: Server) -> None:
    page.get(server.url + "inspect")
    wait(page, lambda: status(page) == "connected")


def open_session(page, session: str) -> None:
    """Clicks the session's button in the list, which is drawn again every second
    (a button found just before a redraw is gone: find it again)."""
    def clicked() -> bool:
        try:
            button = named(page, "button", f"inspect session {session}")
            if button is None:
                return False
            button.click()
            return True
        except StaleElementReferenceException:
            return False
    wait(page, clicked)


def timeline(page) -> str:
    return "\n".join(item.text for item in page.find_elements(By.CSS_SELECTOR, "#timeline li"))


def test_a_session_driven_over_tcp_shows_its_search_as_diffs_and_earlier_states(page, server: Server):
    tcp = server.tcp()
    session = tcp.welcome["session"]
    tcp.command("search pizza")
    tcp.until(lambda m: m.get("view") == "search" and m["state"].get("results"))
    inspector(page, server)
    open_session(page, session)
    wait(page, lambda: "display search:" in timeline(page) and "results: 0 →" in timeline(page))
    text = timeline(page)
    assert "search query=pizza → ok" in text, text
    assert 'query: "" → "pizza"' in text and "loading: false → true" in text, text
    assert "loading: true → false" in text, text
    # The state at rev 1 (the first display: loading, no results yet).
    rev = named(page, "input", "State at rev")
    rev.clear()
    rev.send_keys("1", Keys.TAB)
    wait(page, lambda: '"loading": true' in page.find_element(By.ID, "states").text)
    assert named(page, "button", "Follow live").get_attribute("aria-pressed") == "false"


def test_the_charts_follow_the_node_and_the_page_is_clean_and_keyboard_driven(page, server: Server):
    inspector(page, server)
    wait(page, lambda: page.find_elements(By.CSS_SELECTOR, "figure.chart figcaption"))
    for _ in range(4):
        server.tcp().command("ping")
    wait(page, lambda: any(c.text.startswith("sessions: 5") for c in page.find_elements(By.CSS_SELECTOR, "figcaption")))
    # Every client keeps up: nothing backs up.
    assert page.find_element(By.CSS_SELECTOR, "#chart-backlog figcaption").text.startswith("output backlog: 0 KiB")
    assert_clean(page, "the inspector's list")
    # By keyboard: Tab to a session's button, Enter opens it.
    body = page.find_element(By.TAG_NAME, "body")
    for _ in range(12):
        body.send_keys(Keys.TAB)
        focused = page.switch_to.active_element
        if (focused.accessible_name or "").startswith("inspect session"):
            break
    assert (page.switch_to.active_element.accessible_name or "").startswith("inspect session")
    page.switch_to.active_element.send_keys(Keys.ENTER)
    wait(page, lambda: page.find_element(By.ID, "session-section").is_displayed())
    wait(page, lambda: timeline(page))
    assert_clean(page, "a session's timeline")


def test_a_session_downloads_as_a_transcript_that_replays(page, server: Server, tmp_path):
    """"Download as a test" saves the session's recording (`export`) as a .jsonl
    transcript: its header, each command with the password masked, each backend call
    with its arguments and answer, each event; the page stays axe-clean."""
    import json
    tcp = server.tcp()
    session = tcp.welcome["session"]
    tcp.command("login alice wonderland")
    tcp.command("search pizza")
    tcp.until(lambda m: m.get("view") == "search" and m["state"].get("results"))
    page.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(tmp_path)})
    inspector(page, server)
    open_session(page, session)
    named(page, "button", "Download as a test").click()
    name = session + ".jsonl"
    wait(page, lambda: (tmp_path / name).exists() and (tmp_path / name).stat().st_size > 0)
    wait(page, lambda: page.find_element(By.ID, "export-status").text.startswith(f"Downloaded {name}"))
    lines = [json.loads(line) for line in (tmp_path / name).read_text().splitlines()]
    assert lines[0]["transcript"] == 1 and lines[0]["session"] == session and lines[0]["cut"] is False
    assert lines[0]["steps"] == len(lines) - 1
    commands = [line["command"] for line in lines if "command" in line]
    assert {"cmd": "login", "args": {"user": "alice", "password": "•••"}} in commands, commands
    assert "wonderland" not in (tmp_path / name).read_text()
    calls = [line for line in lines if "call" in line]
    assert calls and calls[-1]["backend"] == "search" and calls[-1]["arguments"] == "pizza", calls
    assert any("answer" in line and line["answer"] == calls[-1]["call"] and "value" in line for line in lines)
    assert any(line.get("event", {}).get("view") == "search" for line in lines)
    assert_clean(page, "a session with its export")


def test_latency_charts_move_under_load_on_a_server_that_records_metrics(page):
    server = Server(extra=["--metrics-port", str(free_port())])
    try:
        inspector(page, server)
        tcp = server.tcp()
        caption = lambda name: page.find_element(By.CSS_SELECTOR, f"#chart-{name} figcaption").text
        wait(page, lambda: page.find_elements(By.ID, "chart-p99"))
        # Searches for a few seconds: every second's p50 and p99 come from the commands
        # run in it, so the lines leave zero.
        for attempt in range(40):
            tcp.command(f"search pizza {attempt}")
            tcp.command("state search")
            if "peak 0 ms" not in caption("p99") and "peak 0 ms" not in caption("p50"):
                break
            time.sleep(0.1)
        wait(page, lambda: "peak 0 ms" not in caption("p99"))
        assert caption("p50").startswith("p50 command latency: "), caption("p50")
        assert caption("rate").startswith("commands/s: "), caption("rate")
    finally:
        for client in server.clients:
            client.sock.close()
        server.stop()


def test_an_inspector_token_opens_the_inspector_without_admin(page, tmp_path):
    token_file = tmp_path / "inspector-token"
    token_file.write_text("a5c1f0e2d3b4a5968778695a4b3c2d1e\n")
    server = Server(extra=["--inspector-token-file", str(token_file)], admin=False)
    try:
        tcp = server.tcp()
        assert tcp.command("fault search")["error"]["code"] == "admin_disabled"
        inspector(page, server)
        field = wait(page, lambda: (found := named(page, "input", "Token")) and found.is_displayed() and found)
        field.send_keys("not-the-token-at-all", Keys.ENTER)
        wait(page, lambda: "not this server's inspector token" in page.find_element(By.ID, "token-error").text)
        field.send_keys("a5c1f0e2d3b4a5968778695a4b3c2d1e", Keys.ENTER)
        session = tcp.welcome["session"]
        wait(page, lambda: named(page, "button", f"inspect session {session}"))
        assert not page.find_element(By.ID, "token-form").is_displayed()
        assert_clean(page, "the inspector after its token")
        # The token never reaches the page's address or a timeline.
        assert "a5c1f0e2" not in page.current_url
        open_session(page, session)
        assert "a5c1f0e2" not in page.find_element(By.TAG_NAME, "body").text
    finally:
        for client in server.clients:
            client.sock.close()
        server.stop()


def test_a_command_sent_again_and_again_is_one_line_with_its_count(page, server: Server):
    tcp = server.tcp()
    session = tcp.welcome["session"]
    for _ in range(5):
        tcp.command("ping")
    for _ in range(3):
        tcp.command("state search")
    inspector(page, server)
    open_session(page, session)
    wait(page, lambda: "ping ×5" in timeline(page) and "state ×3 view=search" in timeline(page))
    line = next(item for item in timeline(page).splitlines() if "ping ×5" in item)
    assert "→ ok" in line and "ms longest" in line, line
    assert timeline(page).count("ping") == 1 and timeline(page).count("state") == 1, timeline(page)


def test_hostile_strings_in_a_timeline_stay_text(page, server: Server):
    tcp = server.tcp()
    session = tcp.welcome["session"]
    tcp.command('{"cmd":"search","args":{"query":"<img src=x onerror=alert(1)>"}}')
    inspector(page, server)
    open_session(page, session)
    wait(page, lambda: "<img src=x onerror=alert(1)>" in timeline(page))
    assert not page.find_elements(By.CSS_SELECTOR, "#timeline img")


def test_a_server_without_admin_serves_no_inspector():
    port, web = free_port(), free_port()
    process = subprocess.Popen(
        [SERVER, "--port", str(port), "--web-port", str(web), "--db", ":memory:", "--log-level", "warning"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert process.stdout.readline().decode().startswith("listening on")
        assert process.stdout.readline().decode().startswith("web on")
        for path in ("/inspect", "/inspect.js", "/inspect.html"):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{web}{path}", timeout=5)
                raise AssertionError(f"{path} was served")
            except urllib.error.HTTPError as error:
                assert error.code == 404, (path, error.code)
        with urllib.request.urlopen(f"http://127.0.0.1:{web}/", timeout=5) as page:
            assert page.status == 200
    finally:
        process.terminate()
        process.wait(10)


def test_a_record_this_release_cannot_read_is_listed_with_its_versions(page, tmp_path):
    # A rollback on a database file: release 2 of the seed apps records a search at
    # version 2; release 1 cannot read it, refuses the attach and keeps the record,
    # and the inspector lists it — the view, both versions, the reason.
    database = str(tmp_path / "viewline.sqlite")
    server = Server(["--db", database, "--drain-seconds", "1", "--seed-release", "2"])
    try:
        tcp = server.tcp()
        token = tcp.welcome["token"]
        assert tcp.command("search pho")["ok"]
        assert tcp.command("wait")["ok"]
        server.stop()
        server.extra = ["--db", database, "--drain-seconds", "1"]
        server.start()
        answer = server.tcp().command(f"attach {token}")
        assert answer["error"]["code"] == "unavailable" and answer["error"]["retryAfter"] >= 1
        inspector(page, server)
        listed = wait(page, lambda: (found := page.find_element(By.ID, "unreadable")) and found.is_displayed() and found)
        text = listed.text
        assert "view search: recorded version 2, this release 1" in text and "newer" in text and "record kept" in text
        assert_clean(page, "the inspector listing an unreadable record")
    finally:
        for client in server.clients:
            client.sock.close()
        server.stop()

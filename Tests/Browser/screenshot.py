#!/usr/bin/env python3
"""Makes the README's pictures of the page with the real server and headless Chromium:
a logged-in session, a search's results and a failing save's alert, in light and dark
at 1280 px (docs/page-1280-light.png, docs/page-1280-dark.png) and at 400 px, as a
phone shows it (docs/page-400-light.png, docs/page-400-dark.png); and the inspector
(/inspect) following that session, in light and dark (docs/inspector-light.png,
docs/inspector-dark.png). The browser suite runs axe-core on the same states
(test_accessibility.py, test_inspector.py).

Run: python3 Tests/Browser/screenshot.py"""
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from conftest import ROOT, Server, chromium, free_port  # noqa: E402
from test_page import dialog, run, status, view, wait  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402


def set_up(driver, server: Server) -> None:
    """A session with alice logged in, dim sum found, and a save that failed."""
    driver.get(server.url)
    wait(driver, lambda: status(driver) == "connected")
    run(driver, "login", user="alice", password="wonderland")
    wait(driver, lambda: "alice" in view(driver, "session").text)
    run(driver, "search", query="dim sum")
    wait(driver, lambda: view(driver, "search").find_elements(By.CSS_SELECTOR, "table tbody tr"))
    run(driver, "fault", service="save", count="1", message="disk full")
    run(driver, "draft", text="Pick up dumplings for Friday")
    run(driver, "save")
    wait(driver, lambda: dialog(driver))


def shoot(driver, width: int, scheme: str, name: str = "") -> pathlib.Path:
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": scheme}]})
    driver.set_window_size(width, 900)
    driver.execute_script("window.scrollTo(0, 0)")
    out = ROOT / "docs" / (f"{name}-{scheme}.png" if name else f"page-{width}-{scheme}.png")
    driver.save_screenshot(str(out))
    return out


def inspect_session(driver, server: Server) -> None:
    """The inspector, the page's session opened in it (a few seconds of charts first)."""
    driver.execute_script("window.open('about:blank')")
    driver.switch_to.window(driver.window_handles[-1])
    driver.get(server.url + "inspect")
    wait(driver, lambda: status(driver) == "connected")
    # A few seconds of charts, with commands running (the latency charts need them).
    load = server.tcp()
    for second in range(5):
        for query in ("pizza", "thai", "sushi", "tacos"):
            load.command(f"search {query} {second}")
            load.command("state search")
        time.sleep(1)

    def open_the_search_session() -> bool:
        # The list is drawn anew every second: find the row afresh each try.
        for row in driver.find_elements(By.CSS_SELECTOR, "#sessions tr"):
            if "search" in row.text:
                row.find_element(By.TAG_NAME, "button").click()
                return True
        return False

    wait(driver, open_the_search_session)
    wait(driver, lambda: "display search" in driver.find_element(By.ID, "timeline").text)


server = Server(extra=["--metrics-port", str(free_port())])  # the latency charts read its histogram
driver = chromium()
try:
    set_up(driver, server)
    for width in (1280, 400):
        for scheme in ("light", "dark"):
            print(shoot(driver, width, scheme))
    inspect_session(driver, server)
    for scheme in ("light", "dark"):
        print(shoot(driver, 1280, scheme, "inspector"))
finally:
    driver.quit()
    server.stop()

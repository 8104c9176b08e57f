#!/usr/bin/env python3
"""Makes docs/browser.png, the README's picture of the page: the real server and
headless Chromium, a search and an alert. Run: python3 Tests/Browser/screenshot.py"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from conftest import ROOT, Server, chromium  # noqa: E402
from test_page import dialog, run, status, view, wait  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402

server = Server()
driver = chromium()
try:
    driver.set_window_size(1100, 820)
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
    driver.execute_script("window.scrollTo(0, 0)")
    out = ROOT / "docs" / "browser.png"
    driver.save_screenshot(str(out))
    print(out)
finally:
    driver.quit()
    server.stop()

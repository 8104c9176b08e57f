"""axe-core (the engine behind Lighthouse's accessibility score, bundled in PyPI's
axe-selenium-python) on the page in each state a person meets: any violation fails."""
from __future__ import annotations

import json

from axe_selenium_python import Axe
from selenium.webdriver.common.by import By

from conftest import Server
from test_page import dialog, run, status, type_search, view, wait


def violations(driver) -> list:
    axe = Axe(driver)
    axe.inject()
    results = axe.run()
    assert len(results["passes"]) > 10, "axe-core did not run its rules"
    found = results["violations"]
    return [f"{v['id']} ({v['impact']}): {[n['target'] for n in v['nodes']][:3]}" for v in found]


def assert_clean(driver, state: str) -> None:
    found = violations(driver)
    assert not found, f"axe-core, {state}: " + json.dumps(found, indent=1)


def test_axe_core_finds_nothing_in_any_state(page, server: Server):
    page.get(server.url)
    wait(page, lambda: status(page) == "connected")
    view(page, "search")
    assert_clean(page, "empty")
    # No two controls share an accessible name ("search query", "slowlog count", "help
    # command"; the command line alone is "command").
    page.find_element(By.CSS_SELECTOR, "#admin-section summary").click()  # admin commands too
    names = [e.accessible_name for e in page.find_elements(By.CSS_SELECTOR, "input, button, select, textarea") if e.is_displayed()]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    assert "command" in names and "help command" in names and "slowlog count" in names and "fault count" in names
    run(page, "search", query="pizza")
    wait(page, lambda: view(page, "search").find_elements(By.CSS_SELECTOR, "table tbody tr"))
    assert_clean(page, "search results")
    # Open somewhere else too (the notice and its button), then a failing backend's
    # alert, open as a modal dialog.
    other = server.tcp()
    other.command(f"attach {page.find_element(By.ID, 'token').text}")
    wait(page, lambda: page.find_element(By.ID, "connections").is_displayed())
    assert_clean(page, "open in two places")
    run(page, "fault", service="search", count="1", message="places backend timed out")
    type_search(page, "noodle")
    wait(page, lambda: dialog(page))
    assert_clean(page, "an alert open")
    dialog(page).find_element(By.CSS_SELECTOR, "button").click()
    wait(page, lambda: not dialog(page))
    # A long log.
    for n in range(100):
        page.execute_script("document.getElementById('line').value = arguments[0]", f"ping")
        page.find_element(By.ID, "line").submit()
    wait(page, lambda: len(page.find_elements(By.CSS_SELECTOR, "#log li")) >= 100)
    assert_clean(page, "100 log lines")
    # Narrow, then dark.
    page.set_window_size(400, 900)
    assert_clean(page, "400 px")
    page.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
    assert_clean(page, "dark, 400 px")
    page.set_window_size(1280, 900)
    assert_clean(page, "dark, 1280 px")


def test_the_join_dialog_is_clean_too(page, server: Server):
    token = server.tcp().welcome["token"]
    page.get(f"{server.url}#attach={token}")
    wait(page, lambda: page.find_element(By.ID, "join").is_displayed())
    assert_clean(page, "the join dialog open")

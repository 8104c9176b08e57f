"""The browser page (`--web-port`) in real headless Chromium, driven through
WebDriver the way a person (or a screen reader) finds things: by role and
accessible name. Every test runs against the real server."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import time

import pytest
from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

from conftest import Server


def wait(driver, predicate, seconds: float = 10):
    # A view is drawn anew on every display: an element found a moment ago may be gone
    # by the time it is read, so such a poll simply counts as "not yet".
    return WebDriverWait(driver, seconds, poll_frequency=0.05,
                         ignored_exceptions=(StaleElementReferenceException,)).until(lambda d: predicate())


def named(driver, css: str, name: str):
    """The element matching `css` whose computed accessible name is `name`."""
    for element in driver.find_elements(By.CSS_SELECTOR, css):
        if element.accessible_name == name:
            return element
    return None


def join_offered_session(driver, join: bool = True):
    """Answers the page's question before it joins a session from an `#attach=` link."""
    dialog = wait(driver, lambda: next((d for d in driver.find_elements(By.CSS_SELECTOR, "dialog[open]")
                                         if d.accessible_name == "Join another session?"), None))
    button = named(driver, "dialog[open] button", "Join this session" if join else "Stay in my own session")
    button.click()
    wait(driver, lambda: not dialog.is_displayed())


def command_form(driver, name: str):
    # Admin commands sit in a collapsed section: open it as a person would.
    wait(driver, lambda: driver.find_elements(By.CSS_SELECTOR, "form.command"))
    closed = driver.execute_script(
        "return document.querySelector(`form.command[aria-label='${arguments[0]}']`)?.closest('details:not([open])')", name)
    if closed:
        closed.find_element(By.TAG_NAME, "summary").click()
    return wait(driver, lambda: named(driver, "form", name))


def run(driver, name: str, **values):
    form = command_form(driver, name)
    for field, value in values.items():
        box = form.find_element(By.NAME, field)
        box.clear()
        box.send_keys(value)
    named(form, "button", name).click()


def type_search(driver, query: str):
    """Searches by typing alone: the search box searches as one types (after a 150 ms
    pause), so a failing search's alert may open before a click on its button lands."""
    wait(driver, lambda: named(driver, "input", "search query")).send_keys(query)


def view(driver, name: str):
    return wait(driver, lambda: named(driver, "section", name))


def dialog(driver):
    element = driver.find_element(By.CSS_SELECTOR, "[role=alertdialog]")
    return element if element.is_displayed() else None


def status(driver) -> str:
    return driver.find_element(By.CSS_SELECTOR, "[role=status]").text


def test_a_search_renders_a_results_table_and_the_progress_indicator_goes_away(page, server: Server):
    page.get(server.url)
    wait(page, lambda: status(page) == "connected")
    run(page, "search", query="pizza")
    section = view(page, "search")
    wait(page, lambda: section.find_elements(By.CSS_SELECTOR, "table tbody tr"))
    headers = [th.text for th in section.find_elements(By.CSS_SELECTOR, "table th")]
    assert "name" in headers and "address" in headers
    wait(page, lambda: not section.find_elements(By.TAG_NAME, "progress"))
    assert "pizza" in section.text.lower()


def test_each_views_primary_action_comes_first_in_its_card_as_its_one_filled_button(page, server: Server):
    page.get(server.url)
    wait(page, lambda: status(page) == "connected")
    wait(page, lambda: page.find_elements(By.CSS_SELECTOR, "section.view .controls form.command"))
    # help's `primary` (1.3): search, login, draft, contacts, playlist.
    for view_name, primary in [("search", "search"), ("session", "login"), ("draft", "draft"),
                               ("contacts", "contacts"), ("playlist", "playlist")]:
        forms = view(page, view_name).find_elements(By.CSS_SELECTOR, ".controls form.command")
        assert forms and forms[0].accessible_name == primary, (view_name, [f.accessible_name for f in forms])
        buttons = [form.find_element(By.TAG_NAME, "button") for form in forms]
        assert "primary" in buttons[0].get_attribute("class").split()
        assert all("secondary" in b.get_attribute("class").split() for b in buttons[1:]), view_name


def test_search_is_live_and_never_shows_results_older_than_the_last_keystroke(page):
    # A slow backend (80 ms a search), so searches overlap while the person types.
    slow = Server(["--backend-latency", "80"])
    try:
        page.get(slow.url)
        wait(page, lambda: status(page) == "connected")
        view(page, "search")
        # Every query the search view shows, in order, with whether it was still loading.
        page.execute_script('''
            window.shown = [];
            new MutationObserver(() => {
              const terms = [...document.querySelectorAll("#view-search dt")];
              const field = (name) => terms.find((dt) => dt.textContent === name)?.nextElementSibling.textContent;
              const query = field("query");
              if (query !== undefined) window.shown.push([query, field("loading")]);
            }).observe(document.getElementById("views"), { subtree: true, childList: true, characterData: true });
        ''')
        box = wait(page, lambda: named(page, "input", "search query"))
        final = "vegetarian ramen bar"  # 20 keystrokes, no Enter
        for key in final:
            box.send_keys(key)
            time.sleep(0.03)  # faster than the 150 ms the page waits for
        wait(page, lambda: page.execute_script("return window.shown.at(-1)") == [final, "no"])
        time.sleep(1)  # anything late would show by now
        shown = page.execute_script("return window.shown")
        first = next(i for i, (query, _) in enumerate(shown) if query == final)
        assert all(query == final for query, _ in shown[first:]), shown
        assert all(final.startswith(query) for query, _ in shown), shown
        assert shown[-1] == [final, "no"]
        # Debounced: far fewer searches than keystrokes reached the view.
        assert len({query for query, _ in shown}) < 10, shown
    finally:
        slow.stop()


def test_a_backend_fault_shows_an_alert_dialog_whose_ok_closes_it(page, server: Server):
    page.get(server.url)
    wait(page, lambda: status(page) == "connected")
    run(page, "fault", service="search", count="1", message="the catalog is down")
    type_search(page, "ramen")
    box = wait(page, lambda: dialog(page))
    assert box.accessible_name  # the alert's title names the dialog
    assert "the catalog is down" in box.text
    named(box, "button", "OK").click()
    wait(page, lambda: dialog(page) is None)


def tab_to(driver, name: str, presses: int = 120):
    """Presses Tab until the focused control's accessible name is `name`."""
    for _ in range(presses):
        if driver.switch_to.active_element.accessible_name == name:
            return driver.switch_to.active_element
        driver.switch_to.active_element.send_keys(Keys.TAB)
    raise AssertionError(f"Tab never reached {name!r}")


def test_the_save_retry_flow_by_keyboard_alone(page, server: Server):
    page.get(server.url)
    wait(page, lambda: status(page) == "connected")
    wait(page, lambda: named(page, "input", "draft text"))
    server.tcp().command("fault save 1 disk full")  # the next save fails once
    page.find_element(By.TAG_NAME, "body").click()
    tab_to(page, "login user").send_keys("alice", Keys.TAB)
    page.switch_to.active_element.send_keys("wonderland", Keys.ENTER)
    wait(page, lambda: "alice" in view(page, "session").text)
    tab_to(page, "draft text").send_keys("Pick up dumplings", Keys.ENTER)
    wait(page, lambda: "Pick up dumplings" in view(page, "draft").text)
    # `pending` is a fact, not work under way: the draft view declares only `saving` busy.
    pending = ".//dt[.='pending']/following-sibling::dd[1]"
    assert view(page, "draft").find_element(By.XPATH, pending).text == "yes"
    assert not view(page, "draft").find_elements(By.TAG_NAME, "progress")
    save = tab_to(page, "save")
    save.send_keys(Keys.ENTER)
    wait(page, lambda: dialog(page))
    # The dialog takes the keyboard, its confirm action first: Enter saves again.
    assert page.switch_to.active_element.accessible_name == "Save"
    page.switch_to.active_element.send_keys(Keys.ENTER)
    wait(page, lambda: dialog(page) is None)
    # Focus is back where it was before the dialog.
    assert page.switch_to.active_element == save
    wait(page, lambda: view(page, "draft").find_element(By.XPATH, pending).text == "no")


def test_search_playlist_and_contacts_by_keyboard_alone(page, server: Server):
    page.get(server.url)
    wait(page, lambda: status(page) == "connected")
    wait(page, lambda: named(page, "input", "search query"))
    page.find_element(By.TAG_NAME, "body").click()
    # Search: typing is enough (live), no Enter.
    tab_to(page, "search query").send_keys("dumpling")
    results = view(page, "search")
    wait(page, lambda: any("Dumpling" in row.text for row in results.find_elements(By.CSS_SELECTOR, "table tbody tr")))
    # Playlist: its button opens the log-in alert; Escape cancels it and focus returns.
    start = tab_to(page, "playlist")
    start.send_keys(Keys.ENTER)
    wait(page, lambda: dialog(page))
    page.switch_to.active_element.send_keys(Keys.ESCAPE)
    wait(page, lambda: dialog(page) is None)
    assert page.switch_to.active_element == start
    # Again, logging in from the alert by keyboard: the user field has the focus first.
    start.send_keys(Keys.ENTER)
    wait(page, lambda: dialog(page))
    assert page.switch_to.active_element.accessible_name.lower().startswith("user")
    page.switch_to.active_element.send_keys("alice", Keys.TAB)
    page.switch_to.active_element.send_keys("wonderland", Keys.ENTER)
    wait(page, lambda: dialog(page) is None)
    playlist = view(page, "playlist")
    wait(page, lambda: len(playlist.find_elements(By.CSS_SELECTOR, "table tbody tr")) >= 1)
    first_page = len(playlist.find_elements(By.CSS_SELECTOR, "table tbody tr"))
    tab_to(page, "Load more").send_keys(Keys.ENTER)
    wait(page, lambda: len(view(page, "playlist").find_elements(By.CSS_SELECTOR, "table tbody tr")) > first_page)
    # Contacts: opening the view (its primary action) by Enter shows what the database
    # holds while a sync runs.
    tab_to(page, "contacts").send_keys(Keys.ENTER)
    contacts = view(page, "contacts")
    wait(page, lambda: contacts.find_elements(By.CSS_SELECTOR, "table tbody tr"))


def test_the_login_alert_has_a_password_input_and_logs_in(page, server: Server):
    page.get(server.url)
    wait(page, lambda: status(page) == "connected")
    run(page, "playlist")
    box = wait(page, lambda: dialog(page))
    assert box.find_element(By.CSS_SELECTOR, "input[type=password]")
    box.find_element(By.NAME, "user").send_keys("alice")
    password = box.find_element(By.NAME, "password")
    password.send_keys("wonderland")
    password.send_keys(Keys.ENTER)  # Enter confirms
    wait(page, lambda: dialog(page) is None)
    session = view(page, "session")
    wait(page, lambda: "alice" in session.text)
    playlist = view(page, "playlist")
    wait(page, lambda: playlist.find_elements(By.CSS_SELECTOR, "table tbody tr"))


def test_a_failing_save_is_answered_from_the_dialog_until_it_succeeds(page, server: Server):
    page.get(server.url)
    wait(page, lambda: status(page) == "connected")
    run(page, "login", user="alice", password="wonderland")
    wait(page, lambda: "alice" in view(page, "session").text)
    run(page, "fault", service="save", count="2", message="disk full")
    run(page, "draft", text="buy milk")
    draft = view(page, "draft")  # found before the modal makes the page inert
    # The draft's own display first: before it, the view still says "pending no" (nothing
    # typed yet), which would read as "saved" before the save had even begun.
    wait(page, lambda: "buy milk" in draft.text and "pending\nyes" in draft.text)
    run(page, "save")
    answered = set()

    def settled():
        box = dialog(page)
        if box is not None and box.get_attribute("data-alert") not in answered:
            assert "disk full" in box.text
            answered.add(box.get_attribute("data-alert"))
            named(box, "button", "Save").click()  # the alert's confirm action: save again
            return False
        return box is None and "pending\nno" in draft.text

    wait(page, settled, seconds=20)
    assert len(answered) == 2
    run(page, "saved")
    wait(page, lambda: "buy milk" in page.find_element(By.CSS_SELECTOR, "[role=log]").text)


def test_one_session_in_the_page_and_over_tcp(page, server: Server):
    page.get(server.url)
    wait(page, lambda: status(page) == "connected")
    token = wait(page, lambda: named(page, "code", "session token")).text
    assert len(token) == 48
    tcp = server.tcp()
    tcp.send(f"attach {token} 0")
    assert tcp.reply()["ok"]
    # A command typed in the page is seen over TCP.
    console = named(page, "section", "Console")
    line = named(console, "input", "command")
    line.send_keys("search thai", Keys.ENTER)
    tcp.until(lambda m: m.get("view") == "search" and m["state"]["query"] == "thai")
    # An alert answered over TCP leaves the page.
    tcp.send("fault search 1 offline")
    tcp.reply()
    line.send_keys("search tacos", Keys.ENTER)
    wait(page, lambda: dialog(page))
    alert = tcp.until(lambda m: m.get("type") == "alert")
    tcp.send(f"confirm {alert['id']}")
    wait(page, lambda: dialog(page) is None)


def test_a_reload_keeps_every_view(page, server: Server):
    page.get(server.url)
    wait(page, lambda: status(page) == "connected")
    run(page, "search", query="sushi")
    wait(page, lambda: view(page, "search").find_elements(By.CSS_SELECTOR, "table tbody tr"))
    token = named(page, "code", "session token").text
    page.refresh()
    wait(page, lambda: status(page) == "connected")
    assert named(page, "code", "session token").text == token
    wait(page, lambda: "sushi" in view(page, "search").text.lower())
    assert view(page, "search").find_elements(By.CSS_SELECTOR, "table tbody tr")


def test_hostile_strings_stay_text(page, server: Server):
    page.get(server.url)
    wait(page, lambda: status(page) == "connected")
    run(page, "login", user="alice", password="wonderland")
    wait(page, lambda: "alice" in view(page, "session").text)
    hostile = "<img src=x onerror=alert(1)>"
    run(page, "draft", text=hostile)
    draft = view(page, "draft")
    wait(page, lambda: hostile in draft.text)
    assert not page.find_elements(By.CSS_SELECTOR, "section img")


def test_a_restarted_server_shows_reconnecting_then_connected(page, server: Server):
    page.get(server.url)
    wait(page, lambda: status(page) == "connected")
    server.stop()
    wait(page, lambda: status(page) == "reconnecting…")
    server.start()
    wait(page, lambda: status(page) == "connected", seconds=20)
    run(page, "search", query="pho")
    wait(page, lambda: "pho" in view(page, "search").text.lower())


def test_a_restart_on_a_database_file_gives_the_page_its_session_back(page, tmp_path):
    # A deploy: the server records its sessions in its file, and the page resumes the
    # same session after SIGTERM and a start on the same ports — the same token, the
    # search still on screen, the user still logged in.
    server = Server(["--db", str(tmp_path / "viewline.sqlite"), "--drain-seconds", "1"])
    try:
        page.get(server.url)
        wait(page, lambda: status(page) == "connected")
        token = wait(page, lambda: named(page, "code", "session token")).text
        run(page, "login", user="alice", password="wonderland")
        wait(page, lambda: "alice" in view(page, "session").text)
        run(page, "search", query="pho")
        wait(page, lambda: "pho" in view(page, "search").text.lower())
        server.stop()
        wait(page, lambda: status(page) == "reconnecting…")
        server.start()
        wait(page, lambda: status(page) == "connected", seconds=20)
        assert wait(page, lambda: named(page, "code", "session token")).text == token
        assert "alice" in view(page, "session").text
        assert "pho" in view(page, "search").text.lower()
    finally:
        server.stop()


def test_a_burst_of_displays_shows_the_last_state_within_a_second(page, server: Server):
    """2,000 display events in about a second: the page draws on animation frames,
    not per event, and shows the last state within a second of the last event."""
    page.get(server.url)
    wait(page, lambda: status(page) == "connected")
    token = wait(page, lambda: named(page, "code", "session token")).text
    tcp = server.tcp()
    tcp.send(f"attach {token}")
    tcp.reply()
    # Each search shows `loading`; the latest wins, so the ones it supersedes never
    # show results: 2,000 searches are at least 2,000 displays.
    burst = "".join(f"search q{i}\n" for i in range(1999)) + "search final\n"
    tcp.sock.sendall(burst.encode())
    last = tcp.until(lambda m: m.get("view") == "search" and m["state"]["query"] == "final" and not m["state"]["loading"])
    shown = time.monotonic()
    section = view(page, "search")
    wait(page, lambda: "final" in section.text and "loading\nno" in section.text, seconds=1.0)
    assert time.monotonic() - shown < 1.0
    assert last["rev"] >= 2000


def test_a_link_with_someone_elses_session_is_joined_only_when_the_person_says_so(page, server: Server):
    # Session fixation: an attacker sends a link with its own session's token. The page
    # asks first, and staying in one's own session is the default (Escape, or the button).
    attacker = server.tcp()
    token = attacker.welcome["token"]
    page.get(f"{server.url}#attach={token}")
    dialog = wait(page, lambda: next((d for d in page.find_elements(By.CSS_SELECTOR, "dialog[open]")
                                       if d.accessible_name == "Join another session?"), None))
    assert token[:8] in dialog.text
    assert "see everything" in dialog.text
    assert page.switch_to.active_element.accessible_name == "Stay in my own session"
    assert "attach=" not in page.current_url  # the token left the address bar at once
    dialog.send_keys(Keys.ESCAPE)
    wait(page, lambda: status(page) == "connected")
    assert page.find_element(By.ID, "token").text != token
    # The victim logs in; the attacker's session learns nothing.
    run(page, "login", user="bob", password="builder")
    wait(page, lambda: "bob" in view(page, "session").text)
    assert "bob" not in json.dumps(attacker.command("state session")["result"])
    # Answered "join": the page drives that session (the person chose to).
    page.get(f"{server.url}#attach={token}")
    join_offered_session(page)
    wait(page, lambda: page.find_element(By.ID, "token").text == token)


def test_the_page_says_where_else_the_session_is_open_and_ends_the_others(page, server: Server):
    page.get(server.url)
    wait(page, lambda: status(page) == "connected")
    token = wait(page, lambda: named(page, "code", "session token")).text
    assert not page.find_element(By.ID, "connections").is_displayed()  # alone: nothing to say
    # Someone else got the token (a link, a shoulder) and joins.
    other = server.tcp()
    other.send(f"attach {token}")
    assert other.reply()["ok"]
    notice = page.find_element(By.ID, "connections")
    wait(page, lambda: notice.is_displayed())
    assert "Also open in 1 other place" in notice.text
    named(page, "button", "End the others").click()
    bye = other.until(lambda m: m.get("type") == "bye")
    assert bye["code"] == "revoked"
    wait(page, lambda: not notice.is_displayed())
    fresh = page.find_element(By.ID, "token").text
    assert len(fresh) == 48 and fresh != token and fresh[:16] == token[:16]
    # The old token joins nothing; the page keeps working with the new one.
    assert server.tcp().command(f"attach {token}")["error"]["code"] == "bad_token"
    run(page, "search", query="ramen")
    wait(page, lambda: "ramen" in view(page, "search").text)


def test_a_form_sends_typed_json_so_a_password_with_spaces_and_quotes_logs_in(page, tmp_path):
    users = tmp_path / "users.json"
    users.write_text(json.dumps([{"user": "carol", "password": 'open "sesame" now'}]))
    server = Server(["--users", str(users)])
    try:
        page.get(server.url)
        wait(page, lambda: status(page) == "connected")
        run(page, "login", user="carol", password='open "sesame" now')
        wait(page, lambda: "carol" in view(page, "session").text)
        # An integer argument is a number input with its declared bounds.
        page_box = command_form(page, "saved").find_element(By.NAME, "page")
        assert page_box.get_attribute("type") == "number"
        assert page_box.get_attribute("min") == "1" and page_box.get_attribute("max") == "5"
        # An empty optional is left out by name: attach with only lastRev filled is
        # refused by the browser (token is required), never sent with lastRev as the token.
        attach = command_form(page, "attach")
        assert attach.find_element(By.NAME, "token").get_attribute("required") == "true"
    finally:
        server.stop()

"""Examples/Todos in the browser: a view-model written from the tutorial works in
the page with no front-end code of its own, and is inspected at /inspect with
nothing added to the example (its server reads the inspector token's file from
VIEWLINE_INSPECTOR_TOKEN_FILE). `./dev test` runs this after building the example,
with VIEWLINE_TODO_SERVER set to its todo-server binary."""
from __future__ import annotations

import os
import subprocess
import tempfile

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from conftest import free_port
from line_client import LineClient
from test_inspector import open_session, timeline
from test_page import command_form, dialog, named, run, status, view, wait

TODO_SERVER = os.environ.get("VIEWLINE_TODO_SERVER")

pytestmark = pytest.mark.skipif(not TODO_SERVER, reason="VIEWLINE_TODO_SERVER (Examples/Todos' todo-server) not given")


TOKEN = "7d0c5e1a9b3f4a2e8c6d1b0f5e4a3c2d"


@pytest.fixture
def todo_server():
    """The example's todo-server, run as its README says, with an inspector token's
    file named in the environment: (TCP port, web URL)."""
    port, web_port = free_port(), free_port()
    directory = tempfile.mkdtemp()
    token_file = os.path.join(directory, "inspector-token")
    with open(token_file, "w") as file:
        file.write(TOKEN + "\n")
    environment = dict(os.environ, VIEWLINE_INSPECTOR_TOKEN_FILE=token_file)
    process = subprocess.Popen([TODO_SERVER, str(port), str(web_port)], cwd=directory, stdout=subprocess.PIPE, env=environment)
    assert process.stdout.readline().startswith(b"listening on")
    assert process.stdout.readline().startswith(b"web on")
    yield port, f"http://127.0.0.1:{web_port}/"
    process.terminate()
    process.wait(10)


@pytest.fixture
def todo_url(todo_server):
    return todo_server[1]


def test_the_todos_example_works_in_the_page(page, todo_url):
    page.get(todo_url)
    wait(page, lambda: status(page) == "connected")
    run(page, "add", title="buy milk")
    todos = view(page, "todos")
    wait(page, lambda: any("buy milk" in row.text for row in todos.find_elements(By.CSS_SELECTOR, "table tbody tr")))
    headers = [th.text for th in todos.find_elements(By.CSS_SELECTOR, "table th")]
    assert headers == ["id", "title", "done"]
    # The filter is live (help's `live`): typing narrows the list with no Enter.
    run(page, "add", title="walk the dog")
    wait(page, lambda: "walk the dog" in todos.text)
    box = command_form(page, "filter").find_element(By.NAME, "text")
    box.send_keys("MILK")
    wait(page, lambda: "walk the dog" not in todos.text and "buy milk" in todos.text)
    box.send_keys(Keys.BACKSPACE * 4)
    wait(page, lambda: "walk the dog" in todos.text)
    # "Load more" (help's `paging`) shows only while the state says there is more.
    assert not todos.find_element(By.CSS_SELECTOR, ".paging").is_displayed()
    run(page, "delete", id="1")
    box = wait(page, lambda: dialog(page))
    named(box, "button", "Undo").click()
    wait(page, lambda: dialog(page) is None)
    wait(page, lambda: "buy milk" in todos.text)


def test_the_todos_example_is_inspected_with_nothing_added(page, todo_server):
    port, url = todo_server
    tcp = LineClient(port)
    try:
        session = tcp.welcome["session"]
        assert "error" not in tcp.command("add buy milk")
        tcp.until(lambda m: m.get("view") == "todos" and m["state"].get("items") and not m["state"].get("saving"))
        page.get(url + "inspect")
        field = wait(page, lambda: (found := named(page, "input", "Token")) and found.is_displayed() and found)
        field.send_keys(TOKEN, Keys.ENTER)
        open_session(page, session)
        # The command, the display's diff, and the save behind it (the example's
        # backend, timed), each as it happened.
        wait(page, lambda: "add title=buy milk → ok" in timeline(page) and "call todo-store → ok" in timeline(page))
        wait(page, lambda: "display todos:" in timeline(page) and "saving: false → true" in timeline(page))
        # Checking an item off shows which item and field changed.
        assert "error" not in tcp.command("done 1")
        wait(page, lambda: "items[0].done: false → true" in timeline(page))
        assert TOKEN not in page.find_element(By.TAG_NAME, "body").text
    finally:
        tcp.sock.close()


def test_a_token_file_that_gives_no_token_stops_the_example_at_start(tmp_path):
    short = tmp_path / "inspector-token"
    short.write_text("too-short\n")
    for named_file in (str(short), str(tmp_path / "missing")):
        environment = dict(os.environ, VIEWLINE_INSPECTOR_TOKEN_FILE=named_file)
        process = subprocess.run([TODO_SERVER, str(free_port()), str(free_port())], cwd=tmp_path, env=environment,
                                 capture_output=True, timeout=30)
        assert process.returncode != 0
        assert named_file.encode() in process.stderr, process.stderr

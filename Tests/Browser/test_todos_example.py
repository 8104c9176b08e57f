"""Examples/Todos in the browser: a view-model written from the tutorial works in
the page with no front-end code of its own. `./dev test` runs this after building
the example, with VIEWLINE_TODO_SERVER set to its todo-server binary."""
from __future__ import annotations

import os
import subprocess
import tempfile

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from conftest import free_port
from test_page import command_form, dialog, named, run, status, view, wait

TODO_SERVER = os.environ.get("VIEWLINE_TODO_SERVER")

pytestmark = pytest.mark.skipif(not TODO_SERVER, reason="VIEWLINE_TODO_SERVER (Examples/Todos' todo-server) not given")


@pytest.fixture
def todo_url():
    port, web_port = free_port(), free_port()
    directory = tempfile.mkdtemp()
    process = subprocess.Popen([TODO_SERVER, str(port), str(web_port)], cwd=directory, stdout=subprocess.PIPE)
    assert process.stdout.readline().startswith(b"listening on")
    assert process.stdout.readline().startswith(b"web on")
    yield f"http://127.0.0.1:{web_port}/"
    process.terminate()
    process.wait(10)


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
